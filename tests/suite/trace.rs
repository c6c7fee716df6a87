//! Run artifacts end to end: the event chain, redaction on disk, resume, the
//! artifact directory's guarantees and receipts over real files.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use minicoder::model::types::ModelId;
use minicoder::protocol::{CheckReport, Outcome, RunEvent, VerificationReason};
use minicoder::trace::{
    ArtifactDir, EventLog, GENESIS_PREV, Manifest, ManifestCheck, ManifestLimits, Receipt,
    ReceiptCheck, ReceiptKey, ReceiptVerification, Redactor, TraceError, digest, verify_chain,
};

fn redactor() -> Redactor {
    Redactor::from_vars([("OPENAI_API_KEY", "env-secret-value-123")])
}

fn event(n: u32) -> RunEvent {
    match n % 3 {
        0 => RunEvent::ToolStarted {
            call_id: format!("call-{n}"),
            name: "run_shell".into(),
            arguments: "{\"command\":\"pytest -q\"}".into(),
        },
        1 => RunEvent::PolicyRefused {
            call_id: format!("call-{n}"),
            name: "edit_file".into(),
            reason: format!("a plan is required before edit_file (event {n})"),
        },
        _ => RunEvent::VerificationFinished {
            attempt: n,
            reason: VerificationReason::Completion,
            passed: false,
            fingerprint: "ab".repeat(32),
        },
    }
}

fn write_events(path: &Path, count: u32) -> EventLog {
    let mut log = EventLog::create(path)
        .expect("create")
        .with_redactor(redactor());
    for n in 1..=count {
        let seq = log.append(&event(n)).expect("append");
        assert_eq!(seq, Some(u64::from(n)));
    }
    log
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read")
        .lines()
        .map(str::to_string)
        .collect()
}

fn broken_line(path: &Path) -> u64 {
    match verify_chain(path) {
        Err(TraceError::ChainBroken { line, .. }) => line,
        other => panic!("expected a broken chain, got {other:?}"),
    }
}

#[test]
fn five_events_verify() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.jsonl");
    let log = write_events(&path, 5);
    let summary = verify_chain(&path).expect("verify");
    assert_eq!(summary.lines, 5);
    assert_eq!(summary.last_hash, log.last_hash());
    let all = lines(&path);
    let first: serde_json::Value = serde_json::from_str(&all[0]).expect("json");
    assert_eq!(first["prev"], GENESIS_PREV);
    assert_eq!(first["type"], "policy.refused");
}

#[test]
fn a_flipped_byte_in_line_three_breaks_line_four() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.jsonl");
    write_events(&path, 5);
    let mut all = lines(&path);
    // Line 3 stays valid JSON with its own prev intact; only its successor's
    // prev no longer matches.
    assert!(all[2].contains("\"call_id\":\"call-3\""));
    all[2] = all[2].replacen("call-3", "call-8", 1); // one byte

    std::fs::write(&path, all.join("\n") + "\n").expect("write");
    assert_eq!(broken_line(&path), 4);
    let err = verify_chain(&path).expect_err("broken");
    assert!(err.to_string().contains("line 4"), "{err}");
}

#[test]
fn a_byte_that_breaks_line_three_itself_is_named_line_three() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.jsonl");
    write_events(&path, 5);
    let mut bytes = std::fs::read(&path).expect("read");
    let start_of_third = {
        let mut newlines = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n');
        newlines.nth(1).expect("two lines").0 + 1
    };
    bytes[start_of_third] = b'X'; // `{` -> `X`: not JSON any more
    std::fs::write(&path, &bytes).expect("write");
    assert_eq!(broken_line(&path), 3);

    // A changed prev of line 3 is also line 3's fault.
    write_events(&dir.path().join("b.jsonl"), 5);
    let path = dir.path().join("b.jsonl");
    let mut all = lines(&path);
    let prev = serde_json::from_str::<serde_json::Value>(&all[2]).expect("json")["prev"]
        .as_str()
        .expect("prev")
        .to_string();
    all[2] = all[2].replace(&prev, &"0".repeat(64));
    std::fs::write(&path, all.join("\n") + "\n").expect("write");
    assert_eq!(broken_line(&path), 3);
}

#[test]
fn a_removed_line_is_detected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.jsonl");
    write_events(&path, 5);
    let mut all = lines(&path);
    all.remove(1);
    std::fs::write(&path, all.join("\n") + "\n").expect("write");
    assert_eq!(broken_line(&path), 2);
}

#[test]
fn a_key_in_an_event_is_redacted_on_disk_and_the_chain_still_verifies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.jsonl");
    let mut log = EventLog::create(&path)
        .expect("create")
        .with_redactor(redactor());
    let github = format!("ghp_{}", "Zz09".repeat(9));
    log.append(&RunEvent::ToolFinished {
        call_id: "c1".into(),
        name: "run_shell".into(),
        ok: true,
        summary: "exit 0".into(),
        result: format!(
            "OPENAI_API_KEY=env-secret-value-123\ntoken: {github}\nAuthorization: Bearer abcdefghijklmnopqrstuvwxyz0123\npassword = \"hunter2x\"\n"
        ),
        output_file: None,
        duration_ms: 3,
        changed_files: vec![],
    })
    .expect("append");
    log.append(&event(1)).expect("append");
    let text = std::fs::read_to_string(&path).expect("read");
    for secret in [
        "env-secret-value-123",
        github.as_str(),
        "abcdefghijklmnopqrstuvwxyz0123",
        "hunter2x",
    ] {
        assert!(!text.contains(secret), "{secret} is on disk");
    }
    assert!(text.contains("[REDACTED]"));
    let first: serde_json::Value =
        serde_json::from_str(text.lines().next().expect("line")).expect("still JSON");
    assert!(
        first["result"]
            .as_str()
            .expect("result")
            .contains("password = \"[REDACTED]\"")
    );
    assert_eq!(verify_chain(&path).expect("verify").lines, 2);
}

#[test]
fn resume_continues_seq_and_prev() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.jsonl");
    let log = write_events(&path, 3);
    let last_hash = log.last_hash().to_string();
    drop(log);
    let mut resumed = EventLog::open_append(&path)
        .expect("resume")
        .with_redactor(redactor());
    assert_eq!(resumed.seq(), 3);
    assert_eq!(resumed.last_hash(), last_hash);
    assert_eq!(resumed.append(&event(4)).expect("append"), Some(4));
    let all = lines(&path);
    assert_eq!(all.len(), 4);
    let fourth: serde_json::Value = serde_json::from_str(&all[3]).expect("json");
    assert_eq!(fourth["seq"], 4);
    assert_eq!(fourth["prev"], last_hash);
    assert_eq!(verify_chain(&path).expect("verify").lines, 4);
}

#[test]
fn resume_refuses_a_tampered_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("events.jsonl");
    write_events(&path, 3);
    let all = lines(&path);
    let tampered = [
        all[0].replacen("call-1", "call-9", 1),
        all[1].clone(),
        all[2].clone(),
    ];
    std::fs::write(&path, tampered.join("\n") + "\n").expect("write");
    let err = EventLog::open_append(&path).expect_err("tampered");
    assert!(
        matches!(err, TraceError::ChainBroken { line: 2, .. }),
        "{err}"
    );
}

fn repo_and_artifacts() -> (tempfile::TempDir, std::path::PathBuf, ArtifactDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    let artifacts = ArtifactDir::create(dir.path().join("state/runs/r1"), &repo)
        .expect("create")
        .with_redactor(redactor());
    (dir, repo, artifacts)
}

#[test]
fn artifact_dir_has_its_layout_and_is_private() {
    let (_dir, _repo, artifacts) = repo_and_artifacts();
    let mode = std::fs::metadata(artifacts.path())
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
    assert!(artifacts.path().join("outputs").is_dir());
    assert!(artifacts.path().join("patches").is_dir());
}

#[test]
fn artifact_dir_inside_the_repo_is_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    std::os::unix::fs::symlink(&repo, dir.path().join("alias")).expect("symlink");
    for inside in [
        repo.join(".agent/runs/r1"),
        repo.clone(),
        dir.path().join("alias/out"),
        dir.path().join("elsewhere/../repo/out"),
    ] {
        let err = ArtifactDir::create(&inside, &repo).expect_err("inside the repo");
        assert!(
            matches!(err, TraceError::ArtifactDirInsideRepo { .. }),
            "{}: {err}",
            inside.display()
        );
        let message = err.to_string();
        assert!(message.contains("repo"), "{message}");
    }
    let entries: Vec<_> = std::fs::read_dir(&repo).expect("read").collect();
    assert!(entries.is_empty(), "the repository was written to");
    // A sibling whose name starts like the repository's is outside it.
    ArtifactDir::create(dir.path().join("repo-artifacts"), &repo).expect("sibling is fine");
}

#[test]
fn state_is_replaced_atomically_with_the_latest_content() {
    let (_dir, _repo, artifacts) = repo_and_artifacts();
    for turn in 1..=3 {
        artifacts
            .write_state(&serde_json::json!({"turn": turn, "phase": "act"}))
            .expect("write state");
    }
    let state: serde_json::Value = artifacts.read_state().expect("read state");
    assert_eq!(state["turn"], 3);
    assert!(!artifacts.path().join("state.json.tmp").exists());
    let names: Vec<String> = std::fs::read_dir(artifacts.path())
        .expect("read_dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
}

fn manifest() -> Manifest {
    Manifest {
        run_id: "r1".into(),
        repo: "/src/repo".into(),
        task: "fix the bug; key env-secret-value-123".into(),
        baseline_commit: "3f786850e387550fdab836ed7e6dc881de23001b".into(),
        baseline_fingerprint: "aa".repeat(32),
        checks: vec![ManifestCheck {
            name: "test".into(),
            command: "pytest -q".into(),
        }],
        checks_from_flags: false,
        bootstrap: vec!["pip install -e .".into()],
        model_chain: vec![ModelId {
            provider: "gemini".into(),
            model: "gemini-3.8-flash".into(),
        }],
        limits: ManifestLimits {
            max_turns: 30,
            timeout_ms: 1_800_000,
            command_timeout_ms: 60_000,
            model_timeout_ms: 120_000,
            max_tokens: 128_000,
            max_cost_micros: None,
            network: false,
            approval: "final".into(),
            allow_config_edits: false,
            workspace: None,
        },
        left_out: Vec::new(),
        instructions: Vec::new(),
        project: None,
        source_head: None,
        hmac: String::new(),
        created: "2025-01-01T00:00:00.000Z".into(),
        minicoder_version: minicoder::trace::MINICODER_VERSION.into(),
    }
}

#[test]
fn the_manifest_is_written_once_and_redacted() {
    let (_dir, _repo, artifacts) = repo_and_artifacts();
    let key = minicoder::trace::ReceiptKey::from_bytes([5; 32]);
    artifacts
        .write_manifest(&manifest(), &key)
        .expect("first write");
    let mut changed = manifest();
    changed.task = "something else".into();
    let err = artifacts
        .write_manifest(&changed, &key)
        .expect_err("immutable");
    assert!(matches!(err, TraceError::ManifestExists { .. }), "{err}");
    let on_disk = artifacts.read_manifest().expect("read");
    assert_eq!(on_disk.task, "fix the bug; key [REDACTED]");
    assert_eq!(on_disk.limits, manifest().limits);
}

#[test]
fn outputs_and_patches_are_redacted_and_named() {
    let (_dir, _repo, artifacts) = repo_and_artifacts();
    let rel = artifacts
        .write_output("0001-run_shell.txt", b"ok env-secret-value-123 done")
        .expect("output");
    assert_eq!(rel, "outputs/0001-run_shell.txt");
    let text = std::fs::read_to_string(artifacts.path().join(&rel)).expect("read");
    assert_eq!(text, "ok [REDACTED] done");
    assert!(artifacts.write_output("../escape", b"x").is_err());

    let rel = artifacts
        .write_patch(1, "edit-src/a.py", "--- a/src/a.py\n+++ b/src/a.py\n")
        .expect("patch");
    assert_eq!(rel, "patches/0001-edit-src_a.py.patch");
    assert!(artifacts.path().join(rel).is_file());

    let clean = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n";
    let stored = artifacts.write_final_patch(clean).expect("final");
    assert!(!stored.redacted);
    assert_eq!(
        stored.sha256,
        digest(artifacts.final_patch_path()).expect("digest")
    );
}

fn sign_run(artifacts: &ArtifactDir, key: &ReceiptKey) -> Receipt {
    let mut log = artifacts.create_event_log().expect("events");
    log.append(&RunEvent::VerificationCheck {
        attempt: 1,
        check: CheckReport {
            name: "test".into(),
            command: "pytest -q".into(),
            exit_code: Some(0),
            passed: true,
            duration_ms: 10,
            failure: None,
            first_error: None,
            output_file: None,
        },
    })
    .expect("append");
    log.append(&RunEvent::RunFinished {
        outcome: Outcome::Success,
        reason: "verified".into(),
        duration_ms: 20,
    })
    .expect("append");
    let patch = artifacts
        .write_final_patch("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
        .expect("patch");
    let receipt = Receipt::sign(
        key,
        Receipt {
            run_id: "r1".into(),
            repo: "/src/repo".into(),
            baseline_commit: "3f786850e387550fdab836ed7e6dc881de23001b".into(),
            baseline_fingerprint: "aa".repeat(32),
            patch_sha256: patch.sha256,
            final_fingerprint: "bb".repeat(32),
            verification: ReceiptVerification {
                passed: true,
                fingerprint: "bb".repeat(32),
                checks: vec![ReceiptCheck {
                    name: "test".into(),
                    command: "pytest -q".into(),
                    exit_code: Some(0),
                    passed: true,
                }],
            },
            events_sha256: digest(artifacts.events_path()).expect("digest"),
            ..Receipt::default()
        },
    )
    .expect("sign");
    artifacts.write_receipt(&receipt).expect("write receipt");
    receipt
}

#[test]
fn a_receipt_over_real_files_verifies_and_catches_each_tamper() {
    let (dir, _repo, artifacts) = repo_and_artifacts();
    let key = ReceiptKey::load_or_create_at(dir.path().join("state/receipt.key")).expect("key");
    sign_run(&artifacts, &key);
    let receipt = artifacts.read_receipt().expect("read");
    let patch = std::fs::read(artifacts.final_patch_path()).expect("patch");
    receipt
        .verify_against(&key, &patch, artifacts.events_path())
        .expect("verifies");

    // The patch.
    let mut changed = patch.clone();
    changed.extend_from_slice(b"+c\n");
    let err = receipt
        .verify_against(&key, &changed, artifacts.events_path())
        .expect_err("patch");
    assert!(matches!(err, TraceError::PatchMismatch { .. }), "{err}");

    // A field of receipt.json, edited on disk.
    let path = artifacts.receipt_path();
    let original = std::fs::read_to_string(&path).expect("read");
    std::fs::write(
        &path,
        original.replacen("\"passed\": true", "\"passed\": false", 1),
    )
    .expect("write");
    let err = artifacts
        .read_receipt()
        .expect("parse")
        .verify(&key)
        .expect_err("field");
    assert!(matches!(err, TraceError::ReceiptTampered), "{err}");
    std::fs::write(&path, &original).expect("restore");

    // The event log, even in a way that keeps its chain valid (an appended line).
    let mut log = artifacts.open_event_log().expect("open");
    log.append(&RunEvent::AgentCorrection {
        turn: 9,
        message: "added later".into(),
    })
    .expect("append");
    assert!(verify_chain(artifacts.events_path()).is_ok());
    let err = receipt
        .verify_against(&key, &patch, artifacts.events_path())
        .expect_err("events");
    assert!(matches!(err, TraceError::EventsMismatch { .. }), "{err}");
}

#[test]
fn a_receipt_holding_a_secret_is_not_written() {
    let (_dir, _repo, artifacts) = repo_and_artifacts();
    let key = ReceiptKey::from_bytes([3u8; 32]);
    let mut receipt = sign_run(&artifacts, &key);
    receipt.verification.checks[0].command =
        "curl -H 'Authorization: Bearer abcdefghijklmnop123456'".into();
    let err = artifacts.write_receipt(&receipt).expect_err("secret");
    assert!(
        matches!(err, TraceError::ReceiptHoldsSecret { .. }),
        "{err}"
    );
}
