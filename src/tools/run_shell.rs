//! `run_shell`: one command in the run's sandbox container.

use std::fmt::Write as _;
use std::time::Duration;

use super::cap::{cap_for_model, group_thousands, stream_for_model};
use super::paths::{self, display};
use super::{MAX_COMMAND_TIMEOUT, RunShellArgs, ToolContext, ToolError, ToolOutput};
use crate::sandbox::container::CommandOutcome;
use crate::sandbox::{CommandRequest, SandboxError};
use crate::workspace::EntryKind;

/// Bytes of each stream the model sees, beginning and end (so at most as
/// many characters): two streams with their notes fit the result's cap.
const STREAM_BYTES: usize = 7_400;

pub async fn run_shell(
    args: &RunShellArgs,
    ctx: &mut ToolContext<'_>,
) -> Result<ToolOutput, SandboxError> {
    let cwd = match checked_cwd(args, ctx) {
        Ok(cwd) => cwd,
        Err(e) => return Ok(ToolOutput::failure(e.to_string())),
    };
    let timeout = match args.timeout_ms {
        Some(0) | None => ctx.default_timeout,
        Some(ms) => Duration::from_millis(ms),
    }
    .min(MAX_COMMAND_TIMEOUT);
    // The spool files go there; the runtime normally made it already.
    let _ = crate::state::private_dir(ctx.outputs_dir);
    // (The container holds the command to the workspace limits.)
    let request = CommandRequest::new(args.command.clone())
        .cwd(cwd)
        .timeout(timeout)
        .spool_to(ctx.outputs_dir, &crate::ids::file_safe(ctx.call_id, 100));
    let outcome = ctx.container.run(request).await?;
    let mut output = render(&outcome, timeout);
    if let Some(reason) = &outcome.limit_after {
        // A command quicker than a poll: not stopped, but the model is told.
        let note = format!(
            "note: after this command {reason}; delete what is not needed before going on\n"
        );
        output.content.insert_str(0, &note);
        output.full.insert_str(0, &note);
    }
    if args
        .timeout_ms
        .is_some_and(|ms| u128::from(ms) > MAX_COMMAND_TIMEOUT.as_millis())
    {
        let note = format!(
            "note: timeout_ms was capped at {} ms (10 minutes)\n",
            MAX_COMMAND_TIMEOUT.as_millis()
        );
        output.content.insert_str(0, &note);
        output.full.insert_str(0, &note);
    }
    Ok(output)
}

fn checked_cwd(args: &RunShellArgs, ctx: &ToolContext<'_>) -> Result<String, ToolError> {
    let rel = paths::relative(&args.cwd)?;
    let meta = paths::metadata(ctx.root, &rel)?;
    if meta.kind != EntryKind::Dir {
        return Err(ToolError::BadPath {
            path: display(&rel),
            problem: "is not a directory inside the workspace (symlinks are not followed for cwd); give a directory path".into(),
        });
    }
    Ok(display(&rel))
}

fn render(outcome: &CommandOutcome, timeout: Duration) -> ToolOutput {
    let millis = outcome.duration.as_millis();
    let status = if let Some(reason) = &outcome.stopped {
        format!(
            "stopped: {reason}; the command and every process it started were killed. \
             The run goes on: delete what is not needed (files the command wrote are still there) \
             and avoid writing so much"
        )
    } else if outcome.timed_out {
        format!(
            "timed out after {} s; the command and every process it started were killed",
            timeout.as_secs_f64()
        )
    } else {
        match (outcome.exit_code, outcome.signal) {
            (_, Some(signal)) => format!(
                "killed by signal {signal}{}",
                if signal == 9 {
                    " (SIGKILL: perhaps the memory or PID limit)"
                } else {
                    ""
                }
            ),
            (Some(code), None) => format!("exit code {code}"),
            (None, None) => "ended without an exit code".to_string(),
        }
    };
    let summary = if outcome.stopped.is_some() {
        format!("stopped at a workspace limit after {millis} ms")
    } else if outcome.timed_out {
        format!("timed out after {millis} ms")
    } else if let Some(code) = outcome.exit_code {
        format!("exit {code} in {millis} ms")
    } else {
        format!("{status} in {millis} ms")
    };
    let mut head = format!("{status}; duration {millis} ms\n");
    if let Some(reason) = &outcome.container_replaced {
        let _ = writeln!(
            head,
            "note: the sandbox container was replaced ({reason}); files outside the workspace were reset"
        );
    }
    let mut content = head.clone();
    let mut full = head;
    for (name, stream) in [("stdout", &outcome.stdout), ("stderr", &outcome.stderr)] {
        if stream.is_empty() {
            let _ = writeln!(content, "--- {name}: (empty)");
            let _ = writeln!(full, "--- {name}: (empty)");
            continue;
        }
        let shown = stream_for_model(stream, STREAM_BYTES);
        let kept = stream_for_model(stream, usize::MAX);
        let note = if shown.len() < kept.len() || stream.truncated() {
            format!(
                " ({} bytes{})",
                group_thousands(usize::try_from(stream.total_bytes).unwrap_or(usize::MAX)),
                stream
                    .spool_name()
                    .map(|id| format!(", output id {id}"))
                    .unwrap_or_default()
            )
        } else {
            String::new()
        };
        let _ = writeln!(content, "--- {name}{note}:");
        let _ = writeln!(full, "--- {name}{note}:");
        content.push_str(&shown);
        full.push_str(&kept);
        if !shown.ends_with('\n') {
            content.push('\n');
        }
        if !kept.ends_with('\n') {
            full.push('\n');
        }
    }
    ToolOutput {
        ok: outcome.success(),
        content: cap_for_model(&content, super::MODEL_CHAR_LIMIT),
        full,
        summary,
        changed_files: Vec::new(),
        exit_code: outcome.exit_code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::StreamCapture;

    fn outcome(stdout: &[u8], stderr: &[u8]) -> CommandOutcome {
        let stream = |bytes: &[u8], name: &str| {
            let dir = std::env::temp_dir().join("minicoder-run-shell-test");
            let mut c = StreamCapture::new(crate::sandbox::output::STREAM_CAP, None);
            c.push(bytes).unwrap();
            let mut s = c.finish(0).unwrap();
            if !bytes.is_empty() {
                s.spool = Some(dir.join(name));
            }
            s
        };
        CommandOutcome {
            exit_code: Some(1),
            signal: None,
            timed_out: false,
            duration: Duration::from_millis(12),
            stdout: stream(stdout, "0001-c.stdout"),
            stderr: stream(stderr, "0001-c.stderr"),
            stopped: None,
            container_replaced: None,
            limit_after: None,
        }
    }

    #[test]
    fn a_huge_output_reaches_the_model_by_its_ends_with_the_way_to_the_middle() {
        let mut big = b"BEGIN-MARKER\n".to_vec();
        big.extend(std::iter::repeat_n(b'x', 5 << 20));
        big.extend_from_slice(b"\nEND-MARKER: 3 failed\n");
        let out = render(&outcome(&big, b"warning: slow\n"), Duration::from_secs(60));
        assert!(out.content.chars().count() <= crate::tools::MODEL_CHAR_LIMIT);
        assert!(out.content.contains("BEGIN-MARKER"), "{}", out.content);
        assert!(
            out.content.contains("END-MARKER: 3 failed"),
            "{}",
            out.content
        );
        assert!(
            out.content
                .contains("--- stdout (5,242,915 bytes, output id 0001-c.stdout):"),
            "{}",
            out.content
        );
        assert!(
            out.content
                .contains("read them with read_output id=0001-c.stdout offset=3700 …]"),
            "{}",
            out.content
        );
        assert!(out.content.contains("--- stderr:\nwarning: slow\n"));
        assert!(
            !out.content.contains("minicoder-run-shell-test"),
            "no host path"
        );
        // The full text keeps the 1 MB in memory: both ends, the middle noted.
        assert!(out.full.contains("END-MARKER") && out.full.len() < (1 << 20) + 1000);
        assert!(
            out.full.contains("offset=524288 …]"),
            "{}",
            &out.full[..200]
        );
    }

    #[test]
    fn spool_stems_are_safe_file_names() {
        let stem = |id: &str| crate::ids::file_safe(id, 100);
        assert_eq!(stem("call_1"), "call_1");
        assert!(!stem("../../x").contains('/') && !stem("../../x").starts_with('.'));
        assert!(!stem("").is_empty());
    }
}
