//! The effect loop: performs what the reducer asks, one effect at a time, and
//! feeds each result back. Blocking effects race the deadline and
//! cancellation; whichever wins, the run ends through [`finish`].

use std::collections::VecDeque;
use std::time::Instant;

use super::baseline::{self, BaselineJob};
use super::finish::{self, Ending};
use super::setup::Prepared;
use super::tool_exec;
use crate::agent::events::{CheckReport, Outcome, RunEvent, VerificationReason};
use crate::agent::reducer::{Effect, Input};
use crate::model::types::{ModelRequest, estimate_tokens};
use crate::model::{ActionSource, ModelObservation};
use crate::trace::RunReport;
use crate::verify::VerificationResult;
use tokio_util::sync::CancellationToken;

/// Time spent in each kind of work, for the report.
#[derive(Debug, Clone, Copy, Default)]
pub struct Durations {
    pub bootstrap_ms: u64,
    pub model_ms: u64,
    pub tools_ms: u64,
    pub verification_ms: u64,
}

/// What happened to a blocking effect.
enum Raced<T> {
    Done(T),
    Cancelled,
    TimedOut,
}

pub async fn drive(mut run: Prepared) -> RunReport {
    let mut durations = Durations::default();
    let mut last_verification: Option<VerificationResult> = None;
    run.bus.emit(RunEvent::RunStarted {
        run_id: run.run_id.clone(),
        repo: run.repo.display().to_string(),
        task: run.options.task.clone(),
        baseline_commit: run.workspace.baseline().to_string(),
        fingerprint: run.baseline_fingerprint.clone(),
        artifact_dir: run.artifacts.path().display().to_string(),
        max_turns: run.options.limits.max_turns,
        timeout_ms: run.options.limits.timeout_ms,
        checks: run.checks.iter().map(|c| c.name.clone()).collect(),
    });

    let mut queue: VecDeque<Effect> = VecDeque::new();
    let mut baseline: Option<BaselineJob> = None;
    match bootstrap(&mut run, &mut durations).await {
        Ok(()) => queue.extend(run.agent.handle(Input::Start {
            baseline_checkpoint: run.baseline_checkpoint.to_string(),
        })),
        Err(reason) => queue.push_back(Effect::Finish {
            outcome: reason.0,
            reason: reason.1,
        }),
    }

    let ending = loop {
        let Some(effect) = queue.pop_front() else {
            // The reducer always ends with Finish; an empty queue is a bug
            // in it, reported rather than hung on.
            break Ending::new(
                Outcome::Failure,
                "the agent stopped without an outcome".into(),
            );
        };
        if baseline.as_ref().is_some_and(BaselineJob::is_finished)
            && let Some(job) = baseline.take()
        {
            let input = baseline_done(&mut run, job).await;
            queue.extend(run.agent.handle(input));
        }
        if let Some(follow_ups) = run.hooks.follow_ups.as_mut() {
            while let Ok(text) = follow_ups.try_recv() {
                queue.extend(run.agent.handle(Input::FollowUp(text)));
            }
        }
        let input = match effect {
            Effect::Emit(event) => {
                run.bus.emit(event);
                continue;
            }
            Effect::Finish { outcome, reason } => break Ending::new(outcome, reason),
            Effect::Checkpoint { reason, validated } => checkpoint(&mut run, &reason, validated),
            Effect::VerifyBaseline { attempt } => {
                run.bus.emit(RunEvent::VerificationStarted {
                    attempt,
                    reason: VerificationReason::Baseline,
                    checks: run.checks.iter().map(|c| c.name.clone()).collect(),
                });
                match baseline::spawn(&run, attempt) {
                    Ok(job) => baseline = Some(job),
                    // Without a verified baseline there is no rollback target;
                    // the run itself goes on.
                    Err(e) => tracing::warn!("the baseline verification could not start: {e}"),
                }
                None
            }
            Effect::MarkValidated { checkpoint } => {
                let marked = git2::Oid::from_str(&checkpoint)
                    .map_err(|e| e.to_string())
                    .and_then(|oid| {
                        run.checkpoints
                            .mark_validated(oid)
                            .map_err(|e| e.to_string())
                    });
                if let Err(e) = marked {
                    tracing::warn!("marking {checkpoint} validated: {e}");
                }
                None
            }
            Effect::CallModel(request) => {
                let t = Instant::now();
                let raced = call_model(&mut run, request).await;
                durations.model_ms += t.elapsed().as_millis() as u64;
                match raced {
                    Raced::Done(input) => Some(input),
                    other => Some(interrupted(&run, other)),
                }
            }
            Effect::RunTool(call) => {
                let t = Instant::now();
                let (cancel, deadline) = (run.hooks.cancel.clone(), run.deadline);
                let raced = race(
                    &cancel,
                    deadline,
                    tool_exec::execute(&mut run_parts(&mut run), &call),
                )
                .await;
                durations.tools_ms += t.elapsed().as_millis() as u64;
                match raced {
                    Raced::Done(Ok(result)) => Some(Input::ToolFinished {
                        call_id: call.id,
                        ok: result.ok,
                        content: result.content,
                    }),
                    Raced::Done(Err(e)) => Some(Input::ModelFailed {
                        reason: format!("the sandbox failed: {e}"),
                    }),
                    other => Some(interrupted(&run, other.map_unit())),
                }
            }
            Effect::Verify { reason, attempt } => {
                let t = Instant::now();
                // Verdicts are told in the order they happened: a baseline
                // that ended before (or during) this verification comes first.
                if baseline.as_ref().is_some_and(BaselineJob::is_finished)
                    && let Some(job) = baseline.take()
                {
                    let input = baseline_done(&mut run, job).await;
                    queue.extend(run.agent.handle(input));
                }
                let (raced, earlier) = verify(&mut run, reason, attempt, &mut baseline).await;
                if let Some(input) = earlier {
                    queue.extend(run.agent.handle(input));
                }
                durations.verification_ms += t.elapsed().as_millis() as u64;
                // The baseline's verdict decides whether a failure counts
                // against a validated state, so before a failed completion
                // reaches the agent, the baseline's must have. (A pass ends
                // the run whatever the baseline says: no need to wait.)
                let failed = matches!(&raced, Raced::Done(Ok(r)) if !r.passed);
                if reason == VerificationReason::Completion
                    && failed
                    && let Some(job) = baseline.as_mut()
                {
                    let (cancel, deadline) = (run.hooks.cancel.clone(), run.deadline);
                    if let Raced::Done(()) = race(&cancel, deadline, job.wait()).await
                        && let Some(job) = baseline.take()
                    {
                        let input = baseline_done(&mut run, job).await;
                        queue.extend(run.agent.handle(input));
                    }
                }
                if failed {
                    // The agent will repair and ask again: have a fresh
                    // container ready by then.
                    run.verifier.prewarm().await;
                }
                match raced {
                    Raced::Done(Ok(result)) => {
                        let input = Input::Verified {
                            reason,
                            passed: result.passed,
                            feedback: feedback(&result.checks, run.artifacts.path()),
                        };
                        last_verification = Some(result);
                        Some(input)
                    }
                    Raced::Done(Err(e)) => Some(Input::ModelFailed {
                        reason: format!("verification could not run: {e}"),
                    }),
                    other => Some(interrupted(&run, other.map_unit())),
                }
            }
            Effect::Restore { checkpoint } => Some(restore(&mut run, &checkpoint)),
        };
        if let Some(input) = input {
            queue.extend(run.agent.handle(input));
        }
        finish::write_state(&run.artifacts, &run.run_id, &run.agent, false);
    };
    if let Some(job) = baseline.take() {
        job.cancel().await;
    }
    finish::finish(run, ending, durations, last_verification).await
}

/// Reports a finished baseline verification and turns it into an input.
async fn baseline_done(run: &mut Prepared, job: BaselineJob) -> Input {
    let attempt = job.attempt;
    let done = job.join().await;
    for check in &done.checks {
        run.bus.emit(RunEvent::VerificationCheck {
            attempt,
            check: check.clone(),
        });
    }
    let passed = match &done.result {
        Ok(result) => {
            run.bus.emit(RunEvent::VerificationFinished {
                attempt,
                reason: VerificationReason::Baseline,
                passed: result.passed,
                fingerprint: result.fingerprint.to_string(),
            });
            result.passed
        }
        Err(e) => {
            tracing::warn!("the baseline verification failed to run: {e}");
            false
        }
    };
    // A baseline check that cannot even run (exit 126/127) is an environment
    // error, not the task's: the run stops (SPEC §6).
    if let Ok(result) = &done.result
        && let Some(why) = crate::verify::environment_error(&result.checks)
    {
        return Input::ModelFailed {
            reason: format!("environment error: {why}"),
        };
    }
    Input::Verified {
        reason: VerificationReason::Baseline,
        passed,
        feedback: String::new(),
    }
}

impl<T> Raced<T> {
    fn map_unit(self) -> Raced<()> {
        match self {
            Raced::Done(_) => Raced::Done(()),
            Raced::Cancelled => Raced::Cancelled,
            Raced::TimedOut => Raced::TimedOut,
        }
    }
}

fn interrupted<T>(run: &Prepared, raced: Raced<T>) -> Input {
    match raced {
        Raced::TimedOut => Input::TimedOut {
            reason: format!(
                "the run's time budget ({} s) ran out",
                run.options.limits.timeout_ms / 1000
            ),
        },
        _ => Input::Cancelled {
            reason: "cancelled by the user".into(),
        },
    }
}

/// Runs `work` unless the run is cancelled or its deadline passes first.
async fn race<T>(
    cancel: &CancellationToken,
    deadline: tokio::time::Instant,
    work: impl std::future::Future<Output = T>,
) -> Raced<T> {
    tokio::select! {
        out = work => Raced::Done(out),
        _ = cancel.cancelled() => Raced::Cancelled,
        _ = tokio::time::sleep_until(deadline) => Raced::TimedOut,
    }
}

/// The borrows the tool executor needs, split from the rest of the run.
pub fn run_parts(run: &mut Prepared) -> tool_exec::Parts<'_> {
    tool_exec::Parts {
        root: &run.root,
        container: &mut run.container,
        checkpoints: &mut run.checkpoints,
        baseline: run.baseline_checkpoint,
        artifacts: &run.artifacts,
        bus: &mut run.bus,
        approval: run.options.approval,
        approver: run.hooks.approver.as_ref(),
        approve_all: &mut run.approve_all,
        command_timeout: run.options.limits.command_timeout(),
        edit_seq: &mut run.edit_seq,
        last_fingerprint: &mut run.last_fingerprint,
        call_seq: &mut run.call_seq,
    }
}

async fn bootstrap(run: &mut Prepared, durations: &mut Durations) -> Result<(), (Outcome, String)> {
    if run.bootstrap.is_empty() {
        return Ok(());
    }
    let t = Instant::now();
    run.bus.emit(RunEvent::BootstrapStarted {
        commands: run.bootstrap.clone(),
        network: run.options.bootstrap_network,
    });
    let settings = crate::verify::BootstrapSettings {
        image: run.image.clone(),
        workspace: run.workspace.path().to_path_buf(),
        run_id: run.run_id.clone(),
        network: run.options.bootstrap_network,
        outputs_dir: run.outputs_dir(),
        timeout: crate::verify::DEFAULT_BOOTSTRAP_TIMEOUT,
        cache_volume: run.cache_volume.clone(),
    };
    let work = crate::verify::run_bootstrap(run.docker.clone(), &settings, &run.bootstrap);
    let raced = race(&run.hooks.cancel.clone(), run.deadline, work).await;
    durations.bootstrap_ms = t.elapsed().as_millis() as u64;
    let (passed, failure) = match raced {
        Raced::Done(Ok(result)) => (result.passed, result.failure),
        Raced::Done(Err(e)) => (false, Some(e.to_string())),
        Raced::Cancelled => return Err((Outcome::Cancelled, "cancelled by the user".into())),
        Raced::TimedOut => {
            return Err((
                Outcome::Failure,
                "the run's time budget ran out during bootstrap".into(),
            ));
        }
    };
    run.bus.emit(RunEvent::BootstrapFinished {
        passed,
        duration_ms: durations.bootstrap_ms,
        failure: failure.clone(),
    });
    if passed {
        // What the bootstrap wrote is baseline, never the agent's change:
        // the baseline checkpoint is taken again, after it (SPEC §6).
        match run.checkpoints.create("baseline after bootstrap") {
            Ok(cp) => {
                run.baseline_checkpoint = cp.id;
                run.baseline_fingerprint = cp.fingerprint.to_string();
                run.bus.emit(RunEvent::CheckpointCreated {
                    id: cp.id.to_string(),
                    reason: "baseline after bootstrap".into(),
                    fingerprint: cp.fingerprint.to_string(),
                });
                Ok(())
            }
            Err(e) => Err((
                Outcome::Failure,
                format!("the baseline after bootstrap could not be recorded: {e}"),
            )),
        }
    } else {
        Err((
            Outcome::Failure,
            format!("bootstrap failed: {}", failure.unwrap_or_default()),
        ))
    }
}

fn checkpoint(run: &mut Prepared, reason: &str, validated: bool) -> Option<Input> {
    match run.checkpoints.create(reason) {
        Ok(cp) => {
            if validated && let Err(e) = run.checkpoints.mark_validated(cp.id) {
                tracing::warn!("marking checkpoint {} validated: {e}", cp.id);
            }
            run.bus.emit(RunEvent::CheckpointCreated {
                id: cp.id.to_string(),
                reason: reason.to_string(),
                fingerprint: cp.fingerprint.to_string(),
            });
            Some(Input::CheckpointCreated {
                id: cp.id.to_string(),
                validated,
            })
        }
        Err(e) => {
            // A missing checkpoint weakens recovery but must not end the run.
            tracing::warn!("checkpoint ({reason}) failed: {e}");
            None
        }
    }
}

fn restore(run: &mut Prepared, id: &str) -> Input {
    let restored = git2::Oid::from_str(id)
        .map_err(|e| e.to_string())
        .and_then(|oid| {
            run.checkpoints
                .restore(oid, &run.root)
                .map_err(|e| e.to_string())
        });
    match restored {
        Ok(_) => {
            run.bus.emit(RunEvent::CheckpointRestored {
                id: id.to_string(),
                reason: "third failed completion verification after a validated state".into(),
            });
            Input::Restored { id: id.to_string() }
        }
        Err(e) => Input::ModelFailed {
            reason: format!("restoring the validated checkpoint {id} failed: {e}"),
        },
    }
}

async fn call_model(run: &mut Prepared, request: ModelRequest) -> Raced<Input> {
    let turn = run.agent.stats().turns;
    let chars: usize = request.messages.iter().map(|m| m.char_len()).sum();
    run.bus.emit(RunEvent::ModelRequest {
        turn,
        model: run.source.current(),
        messages: request.messages.len(),
        estimated_input_tokens: estimate_tokens(chars),
    });
    let started = Instant::now();
    let deadline = run.deadline.into_std();
    let source: &mut Box<dyn ActionSource> = &mut run.source;
    let bus = &mut run.bus;
    let mut observe = |o: ModelObservation| match o {
        ModelObservation::Delta(text) => bus.emit(RunEvent::ModelDelta { turn, text }),
        ModelObservation::Retry {
            model,
            attempt,
            reason,
            delay,
        } => bus.emit(RunEvent::ModelRetry {
            model,
            attempt,
            reason,
            delay_ms: delay.as_millis() as u64,
        }),
        ModelObservation::Fallback { from, to, reason } => {
            bus.emit(RunEvent::ModelFallback { from, to, reason })
        }
    };
    let cancel = run.hooks.cancel.clone();
    let result = tokio::select! {
        r = source.complete(&request, deadline, &mut observe) => Raced::Done(r),
        _ = cancel.cancelled() => Raced::Cancelled,
        _ = tokio::time::sleep_until(run.deadline) => Raced::TimedOut,
    };
    match result {
        Raced::Done(Ok(reply)) => {
            run.bus.emit(RunEvent::ModelResponse {
                turn,
                model: reply.model.clone(),
                content: reply.content.clone(),
                tool_calls: reply
                    .tool_calls
                    .iter()
                    .map(|c| crate::agent::events::ToolCallSummary {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
                usage: reply.usage,
                duration_ms: started.elapsed().as_millis() as u64,
            });
            run.model_used = Some(reply.model.clone());
            Raced::Done(Input::ModelReplied(reply))
        }
        Raced::Done(Err(e)) => Raced::Done(Input::ModelFailed {
            reason: e.to_string(),
        }),
        Raced::Cancelled => Raced::Cancelled,
        Raced::TimedOut => Raced::TimedOut,
    }
}

async fn verify(
    run: &mut Prepared,
    reason: VerificationReason,
    attempt: u32,
    baseline: &mut Option<BaselineJob>,
) -> (
    Raced<Result<VerificationResult, crate::verify::VerifyError>>,
    Option<Input>,
) {
    run.bus.emit(RunEvent::VerificationStarted {
        attempt,
        reason,
        checks: run.checks.iter().map(|c| c.name.clone()).collect(),
    });
    let cancel = run.hooks.cancel.clone();
    let deadline = run.deadline;
    let bus = &mut run.bus;
    let mut observe = |check: &CheckReport| {
        bus.emit(RunEvent::VerificationCheck {
            attempt,
            check: check.clone(),
        })
    };
    let result = tokio::select! {
        r = run.verifier.verify(attempt, &mut observe) => Raced::Done(r),
        _ = cancel.cancelled() => Raced::Cancelled,
        _ = tokio::time::sleep_until(deadline) => Raced::TimedOut,
    };
    // A baseline that ended while this ran has its verdict told first.
    let mut earlier = None;
    if baseline.as_ref().is_some_and(BaselineJob::is_finished)
        && let Some(job) = baseline.take()
    {
        earlier = Some(baseline_done(run, job).await);
    }
    if let Raced::Done(Ok(v)) = &result {
        run.bus.emit(RunEvent::VerificationFinished {
            attempt,
            reason,
            passed: v.passed,
            fingerprint: v.fingerprint.to_string(),
        });
    }
    (result, earlier)
}

/// What the agent is told about a verification: each check's verdict, and
/// for failures the end of their output (bounded).
fn feedback(checks: &[CheckReport], artifact_dir: &std::path::Path) -> String {
    const TAIL: usize = 3000;
    let mut out = String::new();
    for c in checks {
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
        if c.passed {
            continue;
        }
        let Some(file) = &c.output_file else { continue };
        let mut text = String::new();
        for ext in ["stdout", "stderr"] {
            let path = artifact_dir.join(file).with_extension(ext);
            if let Ok(bytes) = std::fs::read(&path) {
                text.push_str(&String::from_utf8_lossy(&bytes));
            }
        }
        let tail: String = {
            let chars: Vec<char> = text.chars().collect();
            let start = chars.len().saturating_sub(TAIL);
            let mut t: String = chars[start..].iter().collect();
            if start > 0 {
                t.insert_str(0, "[… earlier output omitted …]\n");
            }
            t
        };
        if !tail.trim().is_empty() {
            out.push_str("  output:\n");
            out.push_str(&tail);
            out.push('\n');
        }
    }
    out
}
