use super::*;
use crate::protocol::Outcome;

fn finished(reason: &str) -> RunEvent {
    RunEvent::RunFinished {
        outcome: Outcome::Failure,
        reason: reason.to_string(),
        duration_ms: 7,
    }
}

fn new_log(dir: &tempfile::TempDir) -> EventLog {
    EventLog::create(dir.path().join("events.jsonl"))
        .expect("create")
        .with_redactor(Redactor::default())
}

#[test]
fn lines_carry_seq_ts_type_fields_and_prev_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = new_log(&dir);
    assert_eq!(log.append(&finished("a")).expect("append"), Some(1));
    assert_eq!(log.append(&finished("b")).expect("append"), Some(2));
    let text = std::fs::read_to_string(log.path()).expect("read");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("{\"seq\":1,\"ts\":\""), "{}", lines[0]);
    assert!(lines[0].contains("\"type\":\"run.finished\",\"outcome\":\"failure\""));
    assert!(lines[0].ends_with(&format!(",\"prev\":\"{GENESIS_PREV}\"}}")));
    let first: serde_json::Value = serde_json::from_str(lines[0]).expect("json");
    let ts = first["ts"].as_str().expect("ts");
    // RFC 3339, UTC, milliseconds: 2025-01-02T03:04:05.678Z
    assert_eq!(ts.len(), 24, "{ts}");
    assert!(ts.ends_with('Z') && ts.as_bytes()[19] == b'.');
    assert!(chrono::DateTime::parse_from_rfc3339(ts).is_ok());
    let second: serde_json::Value = serde_json::from_str(lines[1]).expect("json");
    assert_eq!(second["prev"], sha256_hex(lines[0].as_bytes()));
    assert_eq!(second["reason"], "b");
    assert_eq!(log.last_hash(), sha256_hex(lines[1].as_bytes()));
}

#[test]
fn streamed_deltas_are_not_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = new_log(&dir);
    let delta = RunEvent::ModelDelta {
        turn: 1,
        text: "partial".into(),
    };
    assert_eq!(log.append(&delta).expect("append"), None);
    assert_eq!(log.append(&finished("x")).expect("append"), Some(1));
    let text = std::fs::read_to_string(log.path()).expect("read");
    assert_eq!(text.lines().count(), 1);
    assert!(!text.contains("model.delta"));
}

#[test]
fn create_refuses_an_existing_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.jsonl");
    std::fs::write(&path, "").expect("write");
    let err = EventLog::create(&path).expect_err("must refuse");
    assert!(matches!(err, TraceError::EventLogExists { .. }), "{err}");
}

#[test]
fn an_empty_log_verifies_with_the_genesis_hash() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = new_log(&dir);
    let summary = verify_chain(log.path()).expect("verify");
    assert_eq!(summary.lines, 0);
    assert_eq!(summary.last_hash, GENESIS_PREV);
}

#[test]
fn a_torn_last_line_fails_verification_and_is_repaired_on_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = new_log(&dir);
    for reason in ["a", "b"] {
        log.append(&finished(reason)).expect("append");
    }
    let path = log.path().to_path_buf();
    drop(log);
    let mut bytes = std::fs::read(&path).expect("read");
    let whole = bytes.clone();
    bytes.extend_from_slice(b"{\"seq\":3,\"ts\":\"2025");
    std::fs::write(&path, &bytes).expect("write");
    match verify_chain(&path) {
        Err(TraceError::ChainBroken { line, .. }) => assert_eq!(line, 3),
        other => panic!("expected a broken line 3, got {other:?}"),
    }
    let mut resumed = EventLog::open_append(&path)
        .expect("resume")
        .with_redactor(Redactor::default());
    assert_eq!(
        std::fs::read(&path).expect("read"),
        whole,
        "torn line cut off"
    );
    assert_eq!(resumed.append(&finished("c")).expect("append"), Some(3));
    assert_eq!(verify_chain(&path).expect("verify").lines, 3);
}

#[test]
fn a_whole_last_line_without_newline_is_completed_on_resume() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = new_log(&dir);
    for reason in ["a", "b"] {
        log.append(&finished(reason)).expect("append");
    }
    let path = log.path().to_path_buf();
    drop(log);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.pop();
    std::fs::write(&path, &bytes).expect("write");
    let resumed = EventLog::open_append(&path).expect("resume");
    assert_eq!(resumed.seq(), 2);
    assert_eq!(verify_chain(&path).expect("verify").lines, 2);
}

#[test]
fn a_wrong_seq_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = new_log(&dir);
    log.append(&finished("a")).expect("append");
    let path = log.path().to_path_buf();
    drop(log);
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, text.replacen("\"seq\":1", "\"seq\":9", 1)).expect("write");
    match verify_chain(&path) {
        Err(TraceError::ChainBroken { line, reason, .. }) => {
            assert_eq!(line, 1);
            assert!(reason.contains("seq is 9"), "{reason}");
        }
        other => panic!("expected a broken line 1, got {other:?}"),
    }
}

#[test]
fn digest_is_the_sha256_of_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = new_log(&dir);
    log.append(&finished("a")).expect("append");
    let bytes = std::fs::read(log.path()).expect("read");
    assert_eq!(digest(log.path()).expect("digest"), sha256_hex(&bytes));
}
