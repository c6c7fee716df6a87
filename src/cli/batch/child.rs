//! One task's run as a child `minicoder` process: its own process group (a
//! Ctrl-C on the terminal reaches the batch, which passes it on), told to
//! stop if the batch dies (SIGTERM: the run cancels itself and removes its
//! containers), its event stream read line by line (each bounded) and
//! turned into what the scheduler needs; its report read when it exits.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc::UnboundedSender;

use super::scheduler::{Exit, TaskResult};
use crate::protocol::{Outcome, RunReport};

/// The longest event line kept; a longer one is skipped whole.
const MAX_LINE: usize = 1 << 20;

/// What the driver hears from a child.
#[derive(Debug)]
pub(crate) enum Heard {
    Started {
        run_id: String,
        artifact_dir: String,
    },
    Turn(u32),
    Tokens(u64),
    /// The child ended; `artifact_dir` is where its report is, if it began.
    Ended {
        status: Option<i32>,
        signal: Option<i32>,
    },
}

/// What one event line says, if anything the batch shows.
pub(crate) fn hear(line: &[u8]) -> Option<Heard> {
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    match v.get("type")?.as_str()? {
        "run.started" => Some(Heard::Started {
            run_id: v.get("run_id")?.as_str()?.to_string(),
            artifact_dir: v.get("artifact_dir")?.as_str()?.to_string(),
        }),
        "model.request" => Some(Heard::Turn(
            u32::try_from(v.get("turn")?.as_u64()?).unwrap_or(u32::MAX),
        )),
        "model.response" => {
            let usage = v.get("usage")?;
            let n = |k: &str| {
                usage
                    .get(k)
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(0)
            };
            Some(Heard::Tokens(n("input").saturating_add(n("output"))))
        }
        _ => None,
    }
}

/// Reads lines of at most [`MAX_LINE`] bytes, skipping longer ones whole.
async fn each_line(
    reader: impl AsyncRead + Unpin,
    mut line: impl FnMut(&[u8]),
) -> std::io::Result<()> {
    let mut reader = BufReader::new(reader);
    let mut buf = Vec::new();
    let mut too_long = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            if !too_long && !buf.is_empty() {
                line(&buf);
            }
            return Ok(());
        }
        let (take, end) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            buf.extend_from_slice(&chunk[..take - usize::from(end)]);
            if buf.len() > MAX_LINE {
                too_long = true;
                buf.clear();
            }
        }
        reader.consume(take);
        if end {
            if !too_long {
                line(&buf);
            }
            buf.clear();
            too_long = false;
        }
    }
}

/// Starts the child, on the engine the batch placed it on (else the
/// batch's own), and reports what it says and when it ends to `tx`, tagged
/// with `index`. Returns its process id.
pub(crate) fn spawn(
    index: usize,
    (args, engine): (Vec<std::ffi::OsString>, Option<&str>),
    log: &Path,
    tx: UnboundedSender<(usize, Heard)>,
) -> std::io::Result<u32> {
    let exe = std::env::current_exe()?;
    let log_file = super::append_private(log)?;
    let mut cmd = tokio::process::Command::new(exe);
    let engine = engine.or(crate::sandbox::engines::selected().map(|e| e.name.as_str()));
    if let Some(engine) = engine {
        cmd.arg("--engine").arg(engine);
    }
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log_file))
        .process_group(0);
    let parent = std::process::id();
    // SAFETY: between fork and exec only async-signal-safe calls: prctl,
    // getppid and raise.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            // The batch died before the line above: stop now.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                libc::raise(libc::SIGTERM);
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn()?;
    let pid = child.id().unwrap_or(0);
    let stdout = child.stdout.take();
    tokio::spawn(async move {
        if let Some(stdout) = stdout {
            let tx = tx.clone();
            let _ = each_line(stdout, |line| {
                if let Some(heard) = hear(line) {
                    let _ = tx.send((index, heard));
                }
            })
            .await;
        }
        let status = child.wait().await.ok();
        use std::os::unix::process::ExitStatusExt as _;
        let _ = tx.send((
            index,
            Heard::Ended {
                status: status.and_then(|s| s.code()),
                signal: status.and_then(|s| s.signal()),
            },
        ));
    });
    Ok(pid)
}

/// Sends `signal` to a child (its whole process group).
pub(crate) fn signal(pid: u32, signal: i32) {
    if let Ok(pid) = i32::try_from(pid)
        && pid > 0
    {
        // SAFETY: kill(2) with a negative pid signals the child's group.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// A run's report, if it wrote one.
pub(crate) fn read_report(artifact_dir: &Path) -> Option<RunReport> {
    let text = super::plan::read_bounded(&artifact_dir.join("report.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// What a report says of its task.
pub(crate) fn result_of(id: &str, report: &RunReport) -> TaskResult {
    let outcome = match report.outcome {
        Outcome::Success => "success",
        Outcome::Failure => "failure",
        Outcome::Budget => "budget",
        Outcome::Cancelled => "cancelled",
    };
    TaskResult {
        id: id.to_string(),
        run_id: Some(report.run_id.clone()),
        outcome: outcome.into(),
        verified: report.outcome == Outcome::Success && report.verification.passed,
        reason: report.reason.clone(),
        duration_ms: report.duration_ms,
        turns: report.turns,
        tokens: report.tokens,
        changed_files: report.changed_files.clone(),
        patch: Some(report.patch.clone()).filter(|p| !p.is_empty()),
        artifacts: Some(report.artifact_dir.clone()),
        exit_code: report.exit_code,
        resumed: false,
        model: Some(format!("{}:{}", report.model.provider, report.model.model)),
        engine: None,
    }
}

/// How a child that ended came out: its report if its run began and wrote
/// one, else why not (the last line of its log says).
pub(crate) fn exit_of(
    id: &str,
    artifact_dir: Option<&str>,
    since: std::time::SystemTime,
    (status, signal): (Option<i32>, Option<i32>),
    log: &Path,
) -> Exit {
    // Only a report written by this child counts: a resumed run's folder
    // holds the report of the go that stopped.
    let fresh = |d: &Path| {
        std::fs::metadata(d.join("report.json"))
            .and_then(|m| m.modified())
            .is_ok_and(|t| t >= since)
    };
    if let Some(report) = artifact_dir
        .map(PathBuf::from)
        .filter(|d| fresh(d))
        .and_then(|d| read_report(&d))
    {
        return Exit::Report(Box::new(result_of(id, &report)));
    }
    let last = last_line(log).unwrap_or_default();
    let how = match (status, signal) {
        (Some(code), _) => format!("exited {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "ended".to_string(),
    };
    Exit::NoReport {
        reason: if last.is_empty() {
            format!("the run {how} without a report")
        } else {
            format!("the run {how} without a report: {last}")
        },
        exit_code: status.unwrap_or(-1),
    }
}

/// The last non-empty line of a log, read from its last 4 KiB.
fn last_line(log: &Path) -> Option<String> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = std::fs::File::open(log).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(4096))).ok()?;
    let mut tail = Vec::new();
    f.take(4096).read_to_end(&mut tail).ok()?;
    let text = String::from_utf8_lossy(&tail);
    // The error line of a refusal, over the usage hints after it.
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .iter()
        .rev()
        .find(|l| l.starts_with("error:"))
        .or(lines.last())
        .map(|l| crate::terminal_text::cut_to(l, 300))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_become_what_the_table_shows_and_anything_else_is_ignored() {
        let started =
            br#"{"seq":1,"type":"run.started","run_id":"r1","artifact_dir":"/a/r1","task":"t"}"#;
        assert!(matches!(hear(started), Some(Heard::Started { run_id, .. }) if run_id == "r1"));
        assert!(matches!(
            hear(br#"{"type":"model.request","turn":3}"#),
            Some(Heard::Turn(3))
        ));
        let response =
            br#"{"type":"model.response","usage":{"input":1000,"output":20,"estimated":true}}"#;
        assert!(matches!(hear(response), Some(Heard::Tokens(1020))));
        let huge =
            br#"{"type":"model.response","usage":{"input":18446744073709551615,"output":5}}"#;
        assert!(matches!(hear(huge), Some(Heard::Tokens(u64::MAX))));
        for other in [
            &b"not json"[..],
            br#"{"type":"tool.started"}"#,
            br#"{"type":"run.started","run_id":7}"#,
            br#"{"type":"model.request","turn":"3"}"#,
            br#"[1,2]"#,
        ] {
            assert!(hear(other).is_none());
        }
    }

    #[tokio::test]
    async fn lines_are_bounded_and_an_overlong_one_is_skipped_whole() {
        let mut input = b"one\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE + 10));
        input.extend(b"\ntwo\nthree");
        let mut seen = Vec::new();
        each_line(&input[..], |l| {
            seen.push(String::from_utf8_lossy(l).into_owned())
        })
        .await
        .expect("read");
        assert_eq!(seen, ["one", "two", "three"]);
    }

    #[test]
    fn a_child_without_a_report_says_why_from_its_log() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("t.log");
        std::fs::write(
            &log,
            "progress\nminicoder: the repository /x does not exist\n\n",
        )
        .expect("write");
        let exit = exit_of("t", None, std::time::UNIX_EPOCH, (Some(2), None), &log);
        assert_eq!(
            exit,
            Exit::NoReport {
                reason:
                    "the run exited 2 without a report: minicoder: the repository /x does not exist"
                        .into(),
                exit_code: 2
            }
        );
        let exit = exit_of(
            "t",
            Some("/nowhere"),
            std::time::UNIX_EPOCH,
            (None, Some(9)),
            &dir.path().join("none"),
        );
        assert!(
            matches!(exit, Exit::NoReport { reason, exit_code: -1 } if reason.contains("signal 9"))
        );
        // A report older than the child is an earlier go's, not its own.
        let run = dir.path().join("run");
        std::fs::create_dir(&run).expect("mkdir");
        std::fs::write(run.join("report.json"), "{}").expect("report");
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(60);
        let exit = exit_of("t", run.to_str(), later, (Some(1), None), &log);
        assert!(
            matches!(exit, Exit::NoReport { exit_code: 1, .. }),
            "{exit:?}"
        );
        // A refusal's error line, over the usage hints after it.
        let clap = dir.path().join("clap.log");
        std::fs::write(
            &clap,
            "error: unexpected argument '- '\n\nUsage: minicoder run\n\nFor more information, try '--help'.\n",
        )
        .expect("write");
        let exit = exit_of("t", None, std::time::UNIX_EPOCH, (Some(2), None), &clap);
        assert!(
            matches!(&exit, Exit::NoReport { reason, .. } if reason.ends_with("error: unexpected argument '- '")),
            "{exit:?}"
        );
    }
}
