//! The headless consumer of the event stream: exactly one JSON
//! object on stdout at the end (or, with `--events`, one JSON event a line
//! instead), and human progress on stderr. Both are escaped for the
//! terminal ([`crate::terminal_text`]): the JSON keeps its value, a progress
//! line shows the controls it quotes instead of obeying them.

use std::io::Write;

use tokio::sync::mpsc::UnboundedReceiver;

use crate::protocol::RunEvent;
use crate::terminal_text::{escape_json, write_line};
use crate::trace::redact::shown;

/// What stdout carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StdoutMode {
    /// The final result object only.
    Result,
    /// Every event as a JSON line (the final object is not printed).
    Events,
    /// Nothing: the caller prints its own summary.
    Nothing,
}

/// Consumes events until the sender is dropped: progress lines on stderr and,
/// in [`StdoutMode::Events`], JSONL on stdout.
pub(crate) async fn consume(
    mut events: UnboundedReceiver<RunEvent>,
    mode: StdoutMode,
    progress: bool,
) {
    // Which verification each attempt is, so a check line says whose it is
    // (a baseline's checks can end while a completion's run).
    let mut reasons = std::collections::HashMap::new();
    let mut run_id = None;
    let mut spent = Spent::default();
    while let Some(event) = events.recv().await {
        if let RunEvent::RunStarted { run_id: id, .. } = &event {
            run_id = Some(id.clone());
        }
        if let RunEvent::ModelResponse {
            usage, cost_micros, ..
        } = &event
        {
            spent.add(usage, *cost_micros);
        }
        if let RunEvent::VerificationStarted {
            attempt, reason, ..
        } = &event
        {
            reasons.insert(*attempt, *reason);
        }
        if mode == StdoutMode::Events
            && event.is_persisted()
            && let Ok(line) = serde_json::to_string(&event)
        {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", escape_json(&shown(&line)));
            let _ = out.flush();
        }
        let line = match &event {
            RunEvent::VerificationCheck { attempt, check } => {
                Some(check_line(check, reasons.get(attempt).copied()))
            }
            _ => progress_line(&event),
        };
        if progress && let Some(line) = line {
            write_line(&mut std::io::stderr().lock(), &shown(&line));
        }
        let extra: Vec<String> = match &event {
            RunEvent::RunStarted { source, .. } => source
                .dirty_notice()
                .map(|n| format!("  note: {n}"))
                .into_iter()
                .collect(),
            RunEvent::RunFinished { outcome, .. } => {
                let tokens =
                    (spent.replies > 0).then(|| format!("tokens: {}", spent.totals.describe()));
                let next = run_id
                    .as_deref()
                    .map(|id| format!("next: {}", next_step(id, *outcome)));
                tokens.into_iter().chain(next).collect()
            }
            _ => Vec::new(),
        };
        if progress {
            for line in extra {
                write_line(&mut std::io::stderr().lock(), &shown(&line));
            }
        }
    }
}

/// What the replies of a run reported, added up as they arrive.
#[derive(Default)]
struct Spent {
    totals: crate::protocol::TokenTotals,
    replies: u32,
}

impl Spent {
    fn add(&mut self, usage: &crate::protocol::Usage, cost_micros: Option<u64>) {
        self.totals.add(usage, cost_micros, self.replies == 0);
        self.replies = self.replies.saturating_add(1);
    }
}

/// What to do after a run: apply a success, look into anything else.
pub(crate) fn next_step(run_id: &str, outcome: crate::protocol::Outcome) -> String {
    match outcome {
        crate::protocol::Outcome::Success => format!("minicoder apply {run_id}"),
        crate::protocol::Outcome::Budget => format!(
            "minicoder resume {run_id} --max-cost USD (or --max-tokens N) to go on with a larger budget"
        ),
        _ => format!("minicoder show {run_id}"),
    }
}

/// One short line per event worth telling a person about, unescaped (its
/// printer escapes it).
pub(crate) fn progress_line(event: &RunEvent) -> Option<String> {
    Some(match event {
        RunEvent::RunStarted {
            run_id,
            repo,
            checks,
            ..
        } => format!("run {run_id} on {repo}; checks: {}", checks.join(", ")),
        RunEvent::RunResumed {
            run_id,
            checkpoint,
            interrupted,
            follow_up,
            ..
        } => {
            let mut line = format!("resuming {run_id} from checkpoint {}", short(checkpoint));
            if !interrupted.is_empty() {
                line.push_str(&format!("; interrupted: {}", interrupted.join("; ")));
            }
            if follow_up.is_some() {
                line.push_str("; with a follow-up");
            }
            line
        }
        RunEvent::ProjectConfig {
            trusted, ignored, ..
        } => crate::protocol::project_notice(*trusted, ignored)?,
        RunEvent::BootstrapFinished {
            passed,
            duration_ms,
            failure,
        } => {
            let why = failure
                .as_deref()
                .filter(|_| !*passed)
                .map(|f| format!(": {f}"))
                .unwrap_or_default();
            format!(
                "bootstrap {} in {duration_ms} ms{why}",
                if *passed { "passed" } else { "FAILED" }
            )
        }
        RunEvent::ModelRequest { turn, model, .. } => {
            format!("turn {turn}: asking {}:{}", model.provider, model.model)
        }
        RunEvent::ModelRetry {
            attempt,
            reason,
            delay_ms,
            ..
        } => format!("  model retry {attempt} in {delay_ms} ms: {reason}"),
        RunEvent::ModelFallback { from, to, reason } => format!(
            "  falling back from {} to {}: {reason}",
            from.provider, to.provider
        ),
        RunEvent::ToolFinished {
            name, ok, summary, ..
        } => format!("  {} {name}: {summary}", if *ok { "✓" } else { "✗" }),
        RunEvent::PolicyRefused { name, reason, .. } => format!("  refused {name}: {reason}"),
        RunEvent::ToolRewritten {
            name, arguments, ..
        } => format!("  a hook rewrote {name}: {arguments}"),
        RunEvent::HookRan {
            hook,
            event,
            exit,
            decision,
            duration_ms,
            ..
        } => format!(
            "  hook {event} `{hook}`: {}, {decision}, {duration_ms} ms",
            exit.map_or("no exit status".to_string(), |c| format!("exit {c}"))
        ),
        RunEvent::AgentCorrection { .. } => "  the reply called no tool; correcting".to_string(),
        RunEvent::CheckpointRestored { id, .. } => {
            format!("  restored validated checkpoint {}", short(id))
        }
        RunEvent::VerificationCheck { check, .. } => check_line(check, None),
        RunEvent::VerificationFinished { reason, passed, .. } => format!(
            "verification ({reason:?}): {}",
            if *passed { "passed" } else { "failed" }
        ),
        RunEvent::ContextCompacted {
            before_tokens,
            after_tokens,
            ..
        } => format!("  context compacted: {before_tokens} → {after_tokens} tokens"),
        RunEvent::RunFinished {
            outcome,
            reason,
            duration_ms,
            ..
        } => format!("finished: {outcome:?} ({reason}) in {duration_ms} ms"),
        RunEvent::RunPreparing {
            phase,
            done,
            total,
            bytes,
        } => format!(
            "preparing: {}",
            crate::protocol::preparing_text(phase, *done, *total, *bytes)
        ),
        _ => return None,
    })
}

/// `  check pytest (Baseline): FAILED (exit 127, 12 ms): sh: 1: pytest: not found`
fn check_line(
    check: &crate::protocol::CheckReport,
    reason: Option<crate::protocol::VerificationReason>,
) -> String {
    let whose = reason.map(|r| format!(" ({r:?})")).unwrap_or_default();
    let mut line = format!(
        "  check {}{whose}: {} (exit {}, {} ms)",
        check.name,
        if check.passed { "passed" } else { "FAILED" },
        check.exit_code.map_or("-".into(), |c| c.to_string()),
        check.duration_ms
    );
    // Why, where the person looks (already free of control characters).
    if let Some(why) = check.first_error.as_ref().or(check.failure.as_ref())
        && !check.passed
    {
        line.push_str(&format!(": {why}"));
    }
    line
}

fn short(id: &str) -> &str {
    &id[..id.len().min(10)]
}

/// Prints the one result object.
pub(crate) fn print_result(value: &impl serde::Serialize) {
    let mut out = std::io::stdout().lock();
    match serde_json::to_string(value) {
        Ok(json) => {
            let _ = writeln!(out, "{}", escape_json(&shown(&json)));
        }
        Err(e) => {
            let failure = serde_json::json!({"outcome": "failure", "reason": format!("the result could not be encoded: {e}"), "exit_code": 1});
            let _ = writeln!(out, "{}", escape_json(&failure.to_string()));
        }
    }
    let _ = out.flush();
}
