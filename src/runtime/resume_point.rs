//! Resume points: before every model request, and when the run ends, the
//! workspace is checkpointed (only when it changed) and the agent's whole
//! state is saved beside the run's checkpoint store — never in the artifact
//! directory, since it holds what the provider asked to have sent back
//! verbatim. A run killed at any moment is resumed from its last point: the
//! workspace is rebuilt from that checkpoint, so the conversation and the
//! files agree, and whatever ran after it is reported as interrupted.

use std::io::{BufRead, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::parts::Run;
use crate::agent::reducer::Agent;
use crate::protocol::{RunEvent, SourceState};

/// The saved state's file name, in the run's checkpoint store.
pub(crate) const RESUME_FILE: &str = "minicoder-resume.json";
const VERSION: u32 = 2;
/// The first line of a saved state: this, a space, the HMAC (receipt key)
/// of the JSON that follows the line.
const HEADER: &str = "minicoder-resume-2";
/// The most of a saved state read back (the context is bounded far below).
const MAX_POINT_BYTES: u64 = 256 << 20;
/// The most of one event line looked at for what was interrupted.
const MAX_EVENT_LINE: usize = 1 << 20;

/// What a run saves to be resumed (saved from a borrowed agent, `A =
/// &Agent`, so that a save holds no second copy of the history).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ResumePoint<A = Agent> {
    pub version: u32,
    pub run_id: String,
    /// The checkpoint the workspace was at.
    pub checkpoint: String,
    pub baseline_checkpoint: String,
    pub baseline_fingerprint: String,
    /// The workspace repository's baseline commit, and its raw bytes (hex).
    pub workspace_baseline: String,
    pub workspace_baseline_raw: String,
    pub source: SourceState,
    pub edit_seq: u32,
    pub call_seq: u32,
    /// What the point was taken before (`turn 3`, `the end`).
    pub label: String,
    pub saved: String,
    pub agent: A,
}

/// Where the saved state of `run_id` lives.
pub(crate) fn point_path(store_dir: &Path) -> PathBuf {
    store_dir.join(RESUME_FILE)
}

/// Whether run `run_id` saved a state to go on from.
pub(crate) fn has_resume_point(state: &crate::state::StateDir, run_id: &str) -> bool {
    point_path(&state.checkpoint_store_dir(run_id)).exists()
}

/// The newest run of `repo` that stopped without a report (killed, or its
/// machine went down), is not going on in another process, and can be
/// resumed: its id and task.
pub(crate) fn interrupted_run(repo: &Path) -> Option<(String, String)> {
    let state = crate::state::StateDir::from_env().ok()?;
    crate::runs::list_for_repo(&state, repo)
        .into_iter()
        .find(|r| {
            r.report.is_none()
                && !crate::runs::is_live(&state, &r.id)
                && has_resume_point(&state, &r.id)
        })
        .map(|r| (r.id, r.manifest.task))
}

/// Takes a resume point; a failure is logged and the run goes on (it only
/// weakens what a resume can do).
pub(crate) fn save(run: &mut Run, label: &str) {
    if let Err(e) = try_save(run, label) {
        tracing::warn!("saving the resume point ({label}): {e}");
    }
}

fn try_save(run: &mut Run, label: &str) -> Result<(), String> {
    let (cp, pruned, created) = run
        .ws
        .checkpoints
        .create_if_changed(&format!("resume point before {label}"))
        .map_err(|e| e.to_string())?;
    if created {
        run.bus.emit(RunEvent::CheckpointCreated {
            id: cp.id.to_string(),
            reason: format!("resume point before {label}"),
            fingerprint: cp.fingerprint.to_string(),
            pruned: pruned.checkpoints.iter().map(|id| id.to_string()).collect(),
            freed_bytes: (pruned.freed_bytes > 0).then_some(pruned.freed_bytes),
        });
    }
    let point = ResumePoint {
        version: VERSION,
        run_id: run.id.run_id.clone(),
        checkpoint: cp.id.to_string(),
        baseline_checkpoint: run.ws.baseline.to_string(),
        baseline_fingerprint: run.ws.baseline_fingerprint.clone(),
        workspace_baseline: run.ws.workspace.baseline().to_string(),
        workspace_baseline_raw: hex::encode(&run.ws.baseline_raw),
        source: run.ws.source.clone(),
        edit_seq: run.counters.edit_seq,
        call_seq: run.counters.call_seq,
        label: label.to_string(),
        saved: chrono::Utc::now().to_rfc3339(),
        agent: &run.agent,
    };
    // JSON is UTF-8; the one copy made is the redactor's, where it finds
    // something (a history grows with the run: a save must not hold it four
    // times over).
    let json = serde_json::to_string(&point).map_err(|e| e.to_string())?;
    // No key in it either, whatever a provider's error echoed.
    let json = match run.artifacts.redactor().redact(&json) {
        std::borrow::Cow::Borrowed(_) => json,
        std::borrow::Cow::Owned(redacted) => redacted,
    };
    // Signed: a saved state changed outside minicoder is never resumed.
    let mac = crate::trace::signing::sign_bytes(&run.id.key, json.as_bytes())
        .map_err(|e| e.to_string())?;
    let header = format!("{HEADER} {mac}\n");
    // The mark first: the checkpoint the file names is never pruned, and
    // the previous one was protected until now (pruning happens only in a
    // checkpoint of this process, which has just been made).
    run.ws
        .checkpoints
        .mark_resume_point(cp.id)
        .map_err(|e| e.to_string())?;
    let store = run.id.state.checkpoint_store_dir(&run.id.run_id);
    write_durably(&point_path(&store), &[header.as_bytes(), json.as_bytes()])
}

/// Replaces `path` with `parts`, one after another: a temporary file,
/// synced, renamed.
fn write_durably(path: &Path, parts: &[&[u8]]) -> Result<(), String> {
    let tmp = path.with_extension("json.tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    parts
        .iter()
        .try_for_each(|part| file.write_all(part))
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a saved state back, checking its signature under `key`.
pub(crate) fn load(
    store_dir: &Path,
    key: &crate::trace::ReceiptKey,
) -> Result<ResumePoint, String> {
    let path = point_path(store_dir);
    let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "the run saved no state to resume from ({} is missing): it stopped before its first model request, or its checkpoint store was removed",
            path.display()
        ),
        _ => format!("{}: {e}", path.display()),
    })?;
    let mut text = Vec::new();
    std::io::Read::read_to_end(
        &mut std::io::Read::take(file, MAX_POINT_BYTES + 1),
        &mut text,
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > MAX_POINT_BYTES {
        return Err(format!(
            "{} is too large to be a saved state",
            path.display()
        ));
    }
    let (header, json) = match text.iter().position(|b| *b == b'\n') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (&text[..0], &text[..]),
    };
    let header = std::str::from_utf8(header).unwrap_or_default();
    let Some(mac) = header
        .strip_prefix(HEADER)
        .and_then(|rest| rest.strip_prefix(' '))
    else {
        return Err(format!(
            "{} is not a signed saved state (written by another version of minicoder?); it cannot be resumed",
            path.display()
        ));
    };
    if !crate::trace::signing::verify_bytes(key, json, mac.trim()) {
        return Err(format!(
            "{} does not match its signature: it was changed outside minicoder (or signed with another key); it cannot be resumed",
            path.display()
        ));
    }
    let point: ResumePoint = serde_json::from_slice(json)
        .map_err(|e| format!("{} does not parse: {e}", path.display()))?;
    if point.version != VERSION {
        return Err(format!(
            "{} was saved by another version of minicoder (format {}, this one reads {VERSION})",
            path.display(),
            point.version
        ));
    }
    Ok(point)
}

/// What the event log says was under way when the run stopped, and how the
/// run ended if it did (outcome and reason of its last `run.finished`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct LogTail {
    pub interrupted: Vec<String>,
    pub finished: Option<(String, String)>,
}

/// Reads the event log line by line (each line looked at up to a bound).
pub(crate) fn log_tail(events: &Path) -> LogTail {
    let mut tail = LogTail::default();
    let Ok(file) = std::fs::File::open(events) else {
        return tail;
    };
    let mut reader = std::io::BufReader::new(file);
    let mut tools: Vec<(String, String)> = Vec::new();
    let mut verifying: Option<String> = None;
    let mut line = Vec::new();
    loop {
        line.clear();
        match read_bounded_line(&mut reader, &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Ok(v) = serde_json::from_slice::<serde_json::Value>(&line) else {
            continue;
        };
        let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
        match v.get("type").and_then(|t| t.as_str()).unwrap_or("") {
            "tool.started" => {
                let args: String = field("arguments").chars().take(120).collect();
                tools.push((field("call_id"), format!("{} {args}", field("name"))));
            }
            "tool.finished" => {
                let id = field("call_id");
                tools.retain(|(c, _)| *c != id);
            }
            "verification.started" => {
                let reason = v.get("reason").map(|r| r.to_string()).unwrap_or_default();
                verifying = Some(format!(
                    "a verification ({})",
                    reason.trim_matches('"').to_lowercase()
                ));
            }
            "verification.finished" => verifying = None,
            "run.finished" => {
                tail.finished = Some((field("outcome"), field("reason")));
                tools.clear();
                verifying = None;
            }
            "run.resumed" => tail.finished = None,
            _ => {}
        }
    }
    tail.interrupted = tools.into_iter().map(|(_, what)| what).collect();
    tail.interrupted.extend(verifying);
    tail
}

/// One line into `out` without its newline, keeping at most
/// [`MAX_EVENT_LINE`] bytes of it (the rest is skipped).
fn read_bounded_line(reader: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<usize> {
    let mut total = 0;
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            return Ok(total);
        }
        let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        let room = MAX_EVENT_LINE.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        let used = done.unwrap_or(buf.len());
        total += used;
        reader.consume(used);
        if done.is_some() {
            return Ok(total);
        }
    }
}

/// What the model is told when the run goes on.
pub(crate) fn note(point: &ResumePoint, tail: &LogTail, follow_up: bool) -> String {
    let mut note = match &tail.finished {
        Some((outcome, reason)) if follow_up => format!(
            "This run had finished ({outcome}: {reason}) and is continued with a new instruction from the person. The workspace is as the run left it."
        ),
        Some((outcome, reason)) => format!(
            "This run had stopped ({outcome}: {reason}) and has been resumed. The workspace is exactly as it was before {} (checkpoint {}); anything done after that was rolled back.",
            point.label,
            short(&point.checkpoint)
        ),
        None => format!(
            "This run was interrupted (the process stopped without finishing) and has been resumed. The workspace is exactly as it was before {} (checkpoint {}); anything done after that was rolled back.",
            point.label,
            short(&point.checkpoint)
        ),
    };
    if !tail.interrupted.is_empty() {
        note.push_str(&format!(
            " In flight when it stopped, and rolled back: {}.",
            tail.interrupted.join("; ")
        ));
    }
    note.push_str(
        " Verification from before this point no longer counts: re-check what you need, and request_completion again to be verified.",
    );
    note
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_names_unfinished_tools_and_verifications_and_the_last_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let events = dir.path().join("events.jsonl");
        let lines = [
            r#"{"seq":1,"type":"tool.started","call_id":"a","name":"read_file","arguments":"{}"}"#,
            r#"{"seq":2,"type":"tool.finished","call_id":"a","name":"read_file"}"#,
            r#"{"seq":3,"type":"tool.started","call_id":"b","name":"run_shell","arguments":"{\"command\":\"sleep 100\"}"}"#,
            r#"not json"#,
            r#"{"seq":4,"type":"verification.started","reason":"completion"}"#,
        ];
        std::fs::write(&events, lines.join("\n")).expect("write");
        let tail = log_tail(&events);
        assert_eq!(tail.finished, None);
        assert_eq!(tail.interrupted.len(), 2, "{tail:?}");
        assert!(tail.interrupted[0].starts_with("run_shell {\"command\":\"sleep 100\"}"));
        assert_eq!(tail.interrupted[1], "a verification (completion)");

        let mut more = lines.join("\n");
        more.push_str("\n{\"seq\":5,\"type\":\"run.finished\",\"outcome\":\"cancelled\",\"reason\":\"Ctrl-C\"}\n");
        std::fs::write(&events, more).expect("write");
        let tail = log_tail(&events);
        assert_eq!(tail.finished, Some(("cancelled".into(), "Ctrl-C".into())));
        assert!(tail.interrupted.is_empty());
    }

    #[test]
    fn a_huge_event_line_is_read_only_up_to_its_bound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let events = dir.path().join("events.jsonl");
        let mut text = vec![b'x'; 3 * MAX_EVENT_LINE];
        text.extend_from_slice(
            b"\n{\"type\":\"tool.started\",\"call_id\":\"c\",\"name\":\"git\",\"arguments\":\"\"}\n",
        );
        std::fs::write(&events, text).expect("write");
        let tail = log_tail(&events);
        assert_eq!(tail.interrupted, vec!["git ".to_string()]);
    }
}
