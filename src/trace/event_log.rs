//! `events.jsonl`: one redacted JSON object a line, hash-chained.
//!
//! Each line is `{"seq", "ts", "type", ...fields, "prev"}` where `prev` is the
//! lowercase hex SHA-256 of the previous line's bytes (without its newline),
//! 64 zeros for the first. Lines are redacted before they are hashed, so the
//! chain verifies over exactly what is on disk.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use chrono::{SecondsFormat, Utc};
use sha2::{Digest, Sha256};

use super::{Redactor, TraceError};
use crate::protocol::RunEvent;

/// The `prev` of the first line.
pub const GENESIS_PREV: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What a verified chain holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainSummary {
    /// Number of lines (the `seq` of the last one).
    pub lines: u64,
    /// SHA-256 of the last line ([`GENESIS_PREV`] for an empty log).
    pub last_hash: String,
}

/// Appends events to `events.jsonl`.
#[derive(Debug)]
pub struct EventLog {
    path: PathBuf,
    file: File,
    seq: u64,
    prev: String,
    redactor: Redactor,
}

impl EventLog {
    /// A new, empty log (refuses an existing file). Redacts with
    /// [`Redactor::from_env`]; see [`EventLog::with_redactor`].
    pub fn create(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::AlreadyExists {
                    TraceError::EventLogExists { path: path.clone() }
                } else {
                    TraceError::Io {
                        action: "create the event log",
                        path: path.clone(),
                        source,
                    }
                }
            })?;
        Ok(Self {
            path,
            file,
            seq: 0,
            prev: GENESIS_PREV.to_string(),
            redactor: Redactor::from_env(),
        })
    }

    /// Continues an existing log (for `resume`): verifies its chain, then
    /// appends after its last line. A last line cut short by a crash (no
    /// newline) is completed if it is whole, or dropped if it is not.
    pub fn open_append(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        repair_torn_tail(&path)?;
        let summary = verify_chain(&path)?;
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(TraceError::io("open the event log", &path))?;
        Ok(Self {
            path,
            file,
            seq: summary.lines,
            prev: summary.last_hash,
            redactor: Redactor::from_env(),
        })
    }

    /// Redacts with `redactor` instead of the one built from the environment.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The `seq` of the last line written (0 before the first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// SHA-256 of the last line written ([`GENESIS_PREV`] before the first).
    pub fn last_hash(&self) -> &str {
        &self.prev
    }

    /// Writes one event as a line and returns its `seq`; `None` for events
    /// that are not persisted (streamed deltas). The line reaches the kernel
    /// before this returns; `run.finished` is also synced to disk.
    pub fn append(&mut self, event: &RunEvent) -> Result<Option<u64>, TraceError> {
        if !event.is_persisted() {
            return Ok(None);
        }
        let body = serde_json::to_string(event).map_err(TraceError::serialize("an event"))?;
        let body = self.redactor.redact(&body);
        // `body` is `{"type":...,...}`: splice seq and ts in front, prev behind.
        let fields = body
            .strip_prefix('{')
            .and_then(|b| b.strip_suffix('}'))
            .unwrap_or("");
        let seq = self.seq + 1;
        let ts = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
        let separator = if fields.is_empty() { "" } else { "," };
        let line = format!(
            "{{\"seq\":{seq},\"ts\":\"{ts}\"{separator}{fields},\"prev\":\"{}\"}}",
            self.prev
        );
        let hash = sha256_hex(line.as_bytes());
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        self.file
            .write_all(&bytes)
            .map_err(TraceError::io("append to the event log", &self.path))?;
        if matches!(event, RunEvent::RunFinished { .. }) {
            self.sync()?;
        }
        self.seq = seq;
        self.prev = hash;
        Ok(Some(seq))
    }

    /// Forces written lines to disk.
    pub fn sync(&self) -> Result<(), TraceError> {
        self.file
            .sync_data()
            .map_err(TraceError::io("sync the event log", &self.path))
    }
}

/// Checks every line of a log: valid JSON object, `seq` counting from 1,
/// `type` and `ts` present, `prev` the SHA-256 of the line before. Reports the
/// first line that breaks. (A changed *last* line has no successor to betray
/// it: the receipt's events digest covers that.)
pub fn verify_chain(path: impl AsRef<Path>) -> Result<ChainSummary, TraceError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(TraceError::io("read the event log", path))?;
    let broken = |line: u64, reason: String| TraceError::ChainBroken {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let complete = match bytes.iter().rposition(|b| *b == b'\n') {
        Some(last_newline) => &bytes[..=last_newline],
        None => &bytes[..0],
    };
    let summary = scan_lines(complete).map_err(|(line, reason)| broken(line, reason))?;
    if complete.len() < bytes.len() {
        return Err(broken(
            summary.lines + 1,
            "the line is incomplete (no newline at the end of the file)".to_string(),
        ));
    }
    Ok(summary)
}

/// SHA-256 of a whole file, lowercase hex (the receipt's events digest).
pub fn digest(path: impl AsRef<Path>) -> Result<String, TraceError> {
    let path = path.as_ref();
    let mut file = File::open(path).map_err(TraceError::io("open for hashing", path))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(TraceError::io("read for hashing", path))?;
    Ok(hex::encode(hasher.finalize()))
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Verifies newline-terminated lines; `Err((line number, reason))`.
fn scan_lines(complete: &[u8]) -> Result<ChainSummary, (u64, String)> {
    let mut prev = GENESIS_PREV.to_string();
    let mut count: u64 = 0;
    let Some(body) = complete.strip_suffix(b"\n") else {
        return Ok(ChainSummary {
            lines: 0,
            last_hash: prev,
        });
    };
    for raw in body.split(|b| *b == b'\n') {
        count += 1;
        check_line(raw, count, &prev).map_err(|reason| (count, reason))?;
        prev = sha256_hex(raw);
    }
    Ok(ChainSummary {
        lines: count,
        last_hash: prev,
    })
}

fn check_line(raw: &[u8], seq: u64, prev: &str) -> Result<(), String> {
    let value: serde_json::Value =
        serde_json::from_slice(raw).map_err(|e| format!("the line is not valid JSON ({e})"))?;
    let object = value
        .as_object()
        .ok_or_else(|| "the line is not a JSON object".to_string())?;
    match object.get("seq").and_then(|s| s.as_u64()) {
        Some(found) if found == seq => {}
        Some(found) => return Err(format!("seq is {found}, expected {seq}")),
        None => return Err("the line has no numeric seq".to_string()),
    }
    for field in ["ts", "type"] {
        if !object.get(field).is_some_and(|v| v.is_string()) {
            return Err(format!("the line has no `{field}`"));
        }
    }
    match object.get("prev").and_then(|p| p.as_str()) {
        Some(found) if found == prev => Ok(()),
        Some(_) if seq == 1 => Err("the first line's prev is not 64 zeros".to_string()),
        Some(_) => Err(format!(
            "its prev is not the SHA-256 of line {} (line {} or this line was changed, or a line was removed)",
            seq - 1,
            seq - 1
        )),
        None => Err("the line has no prev".to_string()),
    }
}

/// After a crash the last line may lack its newline: complete it when it is a
/// whole, chained line; otherwise cut it off.
fn repair_torn_tail(path: &Path) -> Result<(), TraceError> {
    let bytes = std::fs::read(path).map_err(TraceError::io("read the event log", path))?;
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let cut = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let mut whole = bytes.clone();
    whole.push(b'\n');
    let tail_is_whole = scan_lines(&whole).is_ok();
    let file = OpenOptions::new()
        .write(true)
        .append(tail_is_whole)
        .open(path)
        .map_err(TraceError::io("repair the event log", path))?;
    if tail_is_whole {
        (&file)
            .write_all(b"\n")
            .map_err(TraceError::io("repair the event log", path))?;
    } else {
        file.set_len(cut as u64)
            .map_err(TraceError::io("repair the event log", path))?;
    }
    file.sync_data()
        .map_err(TraceError::io("repair the event log", path))
}

#[cfg(test)]
#[path = "event_log_tests.rs"]
mod tests;
