//! A verification's checks as the agent gets them: each check's verdict
//! with a bounded part of its spooled output (beginning and end, never the
//! whole file), and the feedback text of a failed completion.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use crate::agent::effects::CheckOutput;
use crate::protocol::CheckReport;
use crate::tools::cap::omission_marker;

/// Bytes read from the beginning of each output stream.
const HEAD: u64 = 8 * 1024;
/// Bytes read from the end of each output stream.
const TAIL: u64 = 56 * 1024;
/// Characters of a failing check's output in the feedback.
const FEEDBACK_TAIL: usize = 3000;

/// Each check with the beginning and end of its stdout and stderr.
pub(crate) fn outputs(checks: &[CheckReport], artifact_dir: &Path) -> Vec<CheckOutput> {
    checks
        .iter()
        .map(|c| CheckOutput {
            name: c.name.clone(),
            exit_code: c.exit_code,
            passed: c.passed,
            failure: c.failure.clone(),
            output: if c.passed {
                String::new()
            } else {
                spooled(c, artifact_dir)
            },
        })
        .collect()
}

/// What the agent is told about a verification: each check's verdict, and
/// for failures the end of their output (bounded).
pub(crate) fn feedback(checks: &[CheckReport], outputs: &[CheckOutput]) -> String {
    let mut out = String::new();
    for (c, o) in checks.iter().zip(outputs) {
        let verdict = if c.passed { "passed" } else { "FAILED" };
        let exit = c.exit_code.map_or("none".to_string(), |e| e.to_string());
        out.push_str(&format!(
            "- {} (`{}`): {verdict}, exit {exit}, {} ms",
            c.name, c.command, c.duration_ms
        ));
        if let Some(why) = &c.failure {
            out.push_str(&format!(" — {why}"));
        }
        out.push('\n');
        if c.passed || o.output.trim().is_empty() {
            continue;
        }
        let total = o.output.chars().count();
        let skip = total.saturating_sub(FEEDBACK_TAIL);
        out.push_str("  output:\n");
        if skip > 0 {
            match c
                .output_file
                .as_deref()
                .and_then(|f| Path::new(f).file_name())
            {
                Some(id) => out.push_str(&format!(
                    "[… earlier output omitted; read_output id={} reads the whole stream …]\n",
                    id.to_string_lossy()
                )),
                None => out.push_str("[… earlier output omitted …]\n"),
            }
        }
        out.extend(o.output.chars().skip(skip));
        out.push('\n');
    }
    out
}

/// The beginning and end of a check's stdout and stderr.
fn spooled(check: &CheckReport, artifact_dir: &Path) -> String {
    let Some(file) = &check.output_file else {
        return String::new();
    };
    let mut text = String::new();
    for ext in ["stdout", "stderr"] {
        let path = artifact_dir.join(file).with_extension(ext);
        match head_and_tail(&path, HEAD, TAIL) {
            Ok(part) => text.push_str(&part),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!("reading {}: {e}", path.display()),
        }
    }
    text
}

/// At most `head` bytes from the start and `tail` from the end of a file
/// (no UTF-8 character split at a cut), with a note between them of what was
/// left out and the `read_output` call that reads it.
pub(crate) fn head_and_tail(path: &Path, head: u64, tail: u64) -> std::io::Result<String> {
    let mut file = File::open(path)?;
    let size = file.metadata()?.len();
    let mut bytes = Vec::new();
    if size <= head + tail {
        file.take(head + tail).read_to_end(&mut bytes)?;
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    (&mut file).take(head).read_to_end(&mut bytes)?;
    let front = complete_prefix(&bytes);
    let mut text = String::from_utf8_lossy(&bytes[..front]).into_owned();
    bytes.clear();
    file.seek(SeekFrom::Start(size - tail))?;
    file.take(tail).read_to_end(&mut bytes)?;
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|b| **b & 0b1100_0000 == 0b1000_0000)
        .count();
    let omitted = size - front as u64 - (bytes.len() - skip) as u64;
    let id = path.file_name().map(|n| n.to_string_lossy().into_owned());
    text.push_str(&omission_marker(front as u64, omitted, id.as_deref()));
    text.push_str(&String::from_utf8_lossy(&bytes[skip..]));
    Ok(text)
}

/// The length of `bytes` without a UTF-8 character cut off at its end.
fn complete_prefix(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(passed: bool) -> CheckReport {
        CheckReport {
            name: "tests".into(),
            command: "pytest".into(),
            exit_code: Some(if passed { 0 } else { 1 }),
            passed,
            duration_ms: 5,
            failure: None,
            first_error: None,
            output_file: Some("outputs/verify-1-tests.txt".into()),
        }
    }

    #[test]
    fn a_huge_output_is_read_at_its_ends_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("outputs")).expect("mkdir");
        let mut big = "FAILED t.py::test_first - boom\n".to_string();
        big.push_str(&"noise\n".repeat(1_000_000));
        big.push_str("FAILED t.py::test_last - assert 1 == 2\n");
        std::fs::write(dir.path().join("outputs/verify-1-tests.stdout"), &big).expect("write");
        let out = outputs(&[report(false), report(true)], dir.path());
        assert!(out[0].output.len() < (HEAD + TAIL) as usize + 200);
        assert!(out[0].output.starts_with("FAILED t.py::test_first"));
        assert!(out[0].output.ends_with("assert 1 == 2\n"));
        assert!(
            out[0].output.contains(&format!(
                "bytes omitted; read them with read_output id=verify-1-tests.stdout offset={HEAD} …]"
            )),
            "{}",
            &out[0].output[..9000]
        );
        assert!(
            out[1].output.is_empty(),
            "a passing check's output is not read"
        );
        let text = feedback(&[report(false), report(true)], &out);
        assert!(
            text.contains("- tests (`pytest`): FAILED, exit 1, 5 ms"),
            "{text}"
        );
        assert!(text.contains(
            "[… earlier output omitted; read_output id=verify-1-tests.txt reads the whole stream …]"
        ));
        assert!(text.contains("assert 1 == 2"));
        assert!(text.contains("- tests (`pytest`): passed, exit 0"));
        assert!(text.len() < 3500, "{}", text.len());
    }
}
