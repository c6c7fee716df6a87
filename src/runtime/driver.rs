//! The effect loop: performs what the reducer asks, one effect at a time, and
//! feeds each result back; the effects an input causes are performed before
//! those queued earlier. Blocking effects race cancellation and the deadline
//! through [`Steering`](super::steering::Steering); commands that arrive
//! meanwhile reach the agent before the next piece of work starts.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::baseline::{self, BaselineJob};
use super::check_output;
use super::finish::{self, Conclusion};
use super::parts::{Run, elapsed_ms};
use super::setup::started_event;
use super::tool_exec::{self, Parts};
use crate::agent::effects::{Effect, FailureKind, Input};
use crate::model::types::{ModelRequest, ToolCall, estimate_tokens};
use crate::model::{ActionSource, ModelObservation};
use crate::protocol::{
    CheckReport, Outcome, RunEvent, RunReport, ToolCallSummary, VerificationReason,
};
use crate::verify::VerificationResult;

/// What the driver keeps between effects besides the run itself.
#[derive(Default)]
struct Loop {
    queue: VecDeque<Effect>,
    baseline: Option<BaselineJob>,
    last_verification: Option<VerificationResult>,
    conclusion: Option<Conclusion>,
    /// The approval being waited for and when its wait ends.
    approval_timer: Option<(String, tokio::time::Instant)>,
}

impl Loop {
    /// Gives the agent an input; what it causes is performed next.
    /// (A wait the agent holds is queued again after each input that does
    /// not end it; one still queued, behind what was asked with it, is not
    /// queued again ahead of those: they happen first.)
    fn feed(&mut self, run: &mut Run, input: Input) {
        for effect in run.agent.handle(input).into_iter().rev() {
            if effect.is_wait() && self.queue.contains(&effect) {
                continue;
            }
            self.queue.push_front(effect);
        }
    }
}

pub(crate) async fn drive(run: Run) -> RunReport {
    let start = Input::Start {
        baseline_checkpoint: run.ws.baseline.to_string(),
    };
    drive_from(run, start).await
}

/// Runs the loop from `first`: `Start` for a new run, `Resumed` for one
/// that goes on (its `run.resumed` already emitted).
pub(crate) async fn drive_from(mut run: Run, first: Input) -> RunReport {
    let event = started_event(&run);
    run.bus.emit(event);
    if let Some(p) = run.id.project.clone() {
        run.bus.emit(RunEvent::ProjectConfig {
            hash: p.hash,
            trusted: p.trusted,
            network: p.network,
            ignored: p.ignored,
        });
    }
    let mut l = Loop::default();
    let (new_run, prompt) = match &first {
        Input::Start { .. } => (true, Some(run.id.options.task.clone())),
        // (A resumed run's follow-up was screened before it started.)
        _ => (false, None),
    };
    for input in super::hooks::session_start(&mut run, new_run, prompt).await {
        l.feed(&mut run, input);
    }
    l.feed(&mut run, first);
    let (outcome, reason) = loop {
        if l.queue
            .front()
            .is_some_and(|e| !e.is_wait() && !matches!(e, Effect::Emit(_)))
        {
            deliver_background(&mut run, &mut l).await;
        }
        let Some(effect) = l.queue.pop_front() else {
            // The reducer always ends with End; an empty queue is a bug in
            // it, reported rather than hung on.
            break (
                Outcome::Failure,
                "the agent stopped without an outcome".to_string(),
            );
        };
        if let Effect::End { outcome, reason } = effect {
            break (outcome, reason);
        }
        let emit_only = matches!(effect, Effect::Emit(_));
        if let Some(input) = perform(&mut run, &mut l, effect).await {
            for input in super::hooks::screen_follow_up(&mut run, input).await {
                l.feed(&mut run, input);
            }
        }
        if !emit_only {
            finish::write_state(&run.artifacts, &run.id.run_id, &run.agent, false);
        }
    };
    // A baseline still under way is not needed any more: its containers go
    // while the run ends, and the teardown waits for them with the others.
    let baseline = l.baseline.take();
    if let Some(job) = &baseline {
        job.stop();
    }
    finish::finish(
        run,
        (outcome, reason),
        l.conclusion,
        l.last_verification,
        baseline,
    )
    .await
}

/// What arrived while the last effect ran: the baseline's verdict and the
/// commands sent meanwhile.
async fn deliver_background(run: &mut Run, l: &mut Loop) {
    if l.baseline.as_ref().is_some_and(BaselineJob::is_finished)
        && let Some(job) = l.baseline.take()
    {
        let input = baseline_done(run, job).await;
        l.feed(run, input);
    }
    for input in run.steering.pending() {
        for input in super::hooks::screen_follow_up(run, input).await {
            l.feed(run, input);
        }
    }
}

async fn perform(run: &mut Run, l: &mut Loop, effect: Effect) -> Option<Input> {
    match effect {
        Effect::Emit(event) => {
            run.bus.emit(event);
            None
        }
        Effect::Bootstrap => Some(bootstrap(run).await),
        Effect::Rebaseline => Some(rebaseline(run)),
        Effect::Checkpoint { reason, validated } => Some(checkpoint(run, &reason, validated)),
        Effect::VerifyBaseline { attempt } => start_baseline(run, l, attempt),
        Effect::AwaitBaseline => Some(await_baseline(run, l).await),
        Effect::MarkValidated { checkpoint } => {
            mark_validated(run, &checkpoint);
            None
        }
        Effect::CallModel(request) => {
            let label = format!("turn {}", run.agent.stats().turns);
            super::resume_point::save(run, &label);
            let t = Instant::now();
            let input = call_model(run, request).await;
            run.counters.durations.model_ms += elapsed_ms(t);
            Some(or_alarm(run, l, input).await)
        }
        Effect::ReadInstructions { lookups } => Some(Input::InstructionsRead {
            docs: super::instructions::read(&run.ws.root, &lookups),
        }),
        Effect::PreCompactHooks { tokens } => Some(super::hooks::pre_compact(run, tokens).await),
        Effect::PostCompactHooks {
            before_tokens,
            after_tokens,
            messages_compacted,
        } => super::hooks::post_compact(run, before_tokens, after_tokens, messages_compacted).await,
        Effect::StopHooks { stop_hook_active } => {
            Some(super::hooks::stop(run, stop_hook_active).await)
        }
        Effect::PreToolHooks(call) => {
            let t = Instant::now();
            let input = super::hooks::pre_tool_use(run, &call).await;
            run.counters.durations.tools_ms += elapsed_ms(t);
            Some(input)
        }
        Effect::RunTool(call) => {
            let t = Instant::now();
            let input = run_tool(run, &call).await;
            let input = super::hooks::post_tool_use(run, &call, input).await;
            run.counters.durations.tools_ms += elapsed_ms(t);
            feed_changes(run, l);
            Some(or_alarm(run, l, input).await)
        }
        Effect::ApplyEdit { call, .. } => {
            let t = Instant::now();
            let input = tool_exec::apply_edit(parts(run), &call);
            let input = super::hooks::post_tool_use(run, &call, input).await;
            run.counters.durations.tools_ms += elapsed_ms(t);
            feed_changes(run, l);
            Some(input)
        }
        Effect::AwaitApproval { id, timeout_ms } => {
            let asked_now = !matches!(&l.approval_timer, Some((waiting, _)) if *waiting == id);
            if asked_now && let Some(answer) = super::hooks::approval_asked(run, &id).await {
                return Some(answer);
            }
            let until = match &l.approval_timer {
                Some((waiting, until)) if *waiting == id => *until,
                _ => tokio::time::Instant::now() + Duration::from_millis(timeout_ms),
            };
            l.approval_timer = Some((id.clone(), until));
            Some(
                run.steering
                    .next_until(until, Input::ApprovalTimedOut { id })
                    .await,
            )
        }
        Effect::Verify { reason, attempt } => {
            let t = Instant::now();
            let input = verify(run, l, reason, attempt).await;
            run.counters.durations.verification_ms += elapsed_ms(t);
            Some(input)
        }
        Effect::PrewarmVerifier => {
            run.sandbox.verifier.prewarm().await;
            None
        }
        Effect::Restore { checkpoint } => {
            let input = restore(run, &checkpoint);
            parts(run).report_changes();
            feed_changes(run, l);
            Some(input)
        }
        Effect::Finish { .. } => {
            let (conclusion, input) = finish::conclude(run);
            l.conclusion = Some(conclusion);
            Some(input)
        }
        // Handled by the loop.
        Effect::End { .. } => None,
    }
}

/// Starts the baseline verification in the background; without one there
/// is no rollback target, and the run itself goes on.
fn start_baseline(run: &mut Run, l: &mut Loop, attempt: u32) -> Option<Input> {
    run.bus.emit(RunEvent::VerificationStarted {
        attempt,
        reason: VerificationReason::Baseline,
        checks: check_names(run),
    });
    match baseline::spawn(run, attempt) {
        Ok(job) => {
            l.baseline = Some(job);
            None
        }
        Err(e) => {
            tracing::warn!("the baseline verification could not start: {e}");
            Some(baseline_verdict(false))
        }
    }
}

fn mark_validated(run: &mut Run, checkpoint: &str) {
    let marked = git2::Oid::from_str(checkpoint)
        .map_err(|e| e.to_string())
        .and_then(|oid| {
            run.ws
                .checkpoints
                .mark_validated(oid)
                .map_err(|e| e.to_string())
        });
    if let Err(e) = marked {
        tracing::warn!("marking {checkpoint} validated: {e}");
    }
}

/// When the baseline interrupted the effect (it found the environment
/// broken), its verdict instead of the effect's input.
async fn or_alarm(run: &mut Run, l: &mut Loop, input: Input) -> Input {
    if !run.steering.take_alarm() {
        return input;
    }
    match l.baseline.take() {
        Some(job) => baseline_done(run, job).await,
        None => input,
    }
}

/// Gives the agent the workspace's diff stat when it changed.
fn feed_changes(run: &mut Run, l: &mut Loop) {
    if let Some(files) = run.counters.diff_stat.take() {
        l.feed(run, Input::WorkspaceChanged { files });
    }
}

fn check_names(run: &Run) -> Vec<String> {
    run.sandbox.checks.iter().map(|c| c.name.clone()).collect()
}

fn baseline_verdict(passed: bool) -> Input {
    Input::Verified {
        reason: VerificationReason::Baseline,
        passed,
        fingerprint: String::new(),
        feedback: String::new(),
        checks: Vec::new(),
    }
}

/// The borrows the tool executor needs, split from the rest of the run.
fn parts(run: &mut Run) -> Parts<'_> {
    Parts {
        ws: &mut run.ws,
        container: &mut run.sandbox.container,
        artifacts: &run.artifacts,
        bus: &mut run.bus,
        counters: &mut run.counters,
        command_timeout: run.id.options.limits.command_timeout(),
        allow_config_edits: run.id.options.allow_config_edits,
    }
}

async fn run_tool(run: &mut Run, call: &ToolCall) -> Input {
    let command_timeout = run.id.options.limits.command_timeout();
    let allow_config_edits = run.id.options.allow_config_edits;
    let Run {
        ws,
        sandbox,
        artifacts,
        bus,
        counters,
        steering,
        ..
    } = run;
    let p = Parts {
        ws,
        container: &mut sandbox.container,
        artifacts,
        bus,
        counters,
        command_timeout,
        allow_config_edits,
    };
    if call.name.starts_with(crate::mcp_client::PREFIX) {
        return match steering
            .race(tool_exec::run_external(p, &sandbox.mcp, call))
            .await
        {
            Ok(input) => input,
            Err(why) => run.steering.interrupted(why),
        };
    }
    match steering.race(tool_exec::run_tool(p, call)).await {
        Ok(Ok(input)) => input,
        Ok(Err(e)) => Input::Failed {
            kind: FailureKind::Sandbox,
            reason: e.to_string(),
        },
        Err(why) => run.steering.interrupted(why),
    }
}

/// Waits for the background baseline verdict.
async fn await_baseline(run: &mut Run, l: &mut Loop) -> Input {
    let Some(job) = l.baseline.as_mut() else {
        return baseline_verdict(false);
    };
    match run.steering.race(job.wait()).await {
        Ok(()) | Err(super::steering::Interrupted::Background) => match l.baseline.take() {
            Some(job) => {
                run.steering.take_alarm();
                baseline_done(run, job).await
            }
            None => baseline_verdict(false),
        },
        Err(why) => run.steering.interrupted(why),
    }
}

/// Reports a finished baseline verification and turns it into an input.
async fn baseline_done(run: &mut Run, job: BaselineJob) -> Input {
    let attempt = job.attempt;
    let done = job.join().await;
    for check in &done.checks {
        run.bus.emit(RunEvent::VerificationCheck {
            attempt,
            check: check.clone(),
        });
    }
    match &done.result {
        Ok(result) => {
            run.bus.emit(RunEvent::VerificationFinished {
                attempt,
                reason: VerificationReason::Baseline,
                passed: result.passed,
                fingerprint: result.fingerprint.to_string(),
            });
            // A baseline check that cannot even run (exit 126/127), or that
            // lacks a dependency nothing installed, says the environment is
            // wrong, not the code.
            if let Some(why) = done.environment.clone() {
                return Input::Failed {
                    kind: FailureKind::Environment,
                    reason: why,
                };
            }
            Input::Verified {
                reason: VerificationReason::Baseline,
                passed: result.passed,
                fingerprint: result.fingerprint.to_string(),
                feedback: String::new(),
                checks: check_output::outputs(&result.checks, run.artifacts.path()),
            }
        }
        Err(e) => {
            tracing::warn!("the baseline verification failed to run: {e}");
            baseline_verdict(false)
        }
    }
}

async fn bootstrap(run: &mut Run) -> Input {
    let t = Instant::now();
    // The download cache of this repository and configuration; without
    // one the bootstrap fetches everything itself.
    let downloads = match &run.sandbox.download_key {
        Some(key) => crate::sandbox::caches::for_bootstrap(
            &run.sandbox.docker,
            &run.id.repo,
            key,
            &run.sandbox.image,
            run.id.state.root(),
        )
        .await
        .map_err(|e| tracing::warn!("no download cache for the bootstrap: {e}"))
        .ok(),
        None => None,
    };
    let settings = crate::verify::BootstrapSettings {
        image: run.sandbox.image.clone(),
        workspace: run.ws.workspace.path().to_path_buf(),
        run_id: run.id.run_id.clone(),
        network: run.sandbox.bootstrap_network,
        outputs_dir: run.outputs_dir(),
        timeout: crate::verify::DEFAULT_BOOTSTRAP_TIMEOUT,
        downloads,
        deps: run.sandbox.deps.clone(),
        limits: Some(run.ws.limits),
    };
    let work = crate::verify::run_bootstrap(
        run.sandbox.docker.clone(),
        &settings,
        &run.sandbox.bootstrap,
    );
    let raced = run.steering.race(work).await;
    run.counters.durations.bootstrap_ms = elapsed_ms(t);
    let (passed, failure) = match raced {
        Ok(Ok(result)) => (result.passed, result.failure),
        Ok(Err(e)) => (false, Some(e.to_string())),
        Err(why) => return run.steering.interrupted(why),
    };
    if passed {
        // What it built that the repository ignores stays for the checks;
        // what commands build later is removed before each verification.
        let kept = crate::workspace::ignored_entries(
            run.ws.workspace.path(),
            run.ws.checkpoints.excludes(),
        );
        run.sandbox.verifier.keep_ignored(kept);
    }
    Input::BootstrapFinished {
        passed,
        failure,
        duration_ms: run.counters.durations.bootstrap_ms,
    }
}

/// What the bootstrap wrote is baseline, never the agent's change: the
/// baseline checkpoint is taken again, after it, and the patch is made
/// against that one.
fn rebaseline(run: &mut Run) -> Input {
    let reason = "baseline after bootstrap";
    match run.ws.checkpoints.create(reason) {
        Ok(cp) => {
            run.ws.baseline = cp.id;
            run.ws.baseline_fingerprint = cp.fingerprint.to_string();
            run.bus.emit(RunEvent::CheckpointCreated {
                id: cp.id.to_string(),
                reason: reason.to_string(),
                fingerprint: cp.fingerprint.to_string(),
                pruned: Vec::new(),
                freed_bytes: None,
            });
            Input::Rebaselined {
                checkpoint: cp.id.to_string(),
            }
        }
        Err(e) => Input::Failed {
            kind: FailureKind::Baseline,
            reason: e.to_string(),
        },
    }
}

fn checkpoint(run: &mut Run, reason: &str, validated: bool) -> Input {
    match run.ws.checkpoints.create_within_budget(reason) {
        Ok((cp, pruned)) => {
            run.bus.emit(RunEvent::CheckpointCreated {
                id: cp.id.to_string(),
                reason: reason.to_string(),
                fingerprint: cp.fingerprint.to_string(),
                pruned: pruned.checkpoints.iter().map(|id| id.to_string()).collect(),
                freed_bytes: (pruned.freed_bytes > 0).then_some(pruned.freed_bytes),
            });
            Input::CheckpointCreated {
                id: cp.id.to_string(),
                validated,
            }
        }
        Err(e) => {
            tracing::warn!("checkpoint ({reason}) failed: {e}");
            Input::Failed {
                kind: FailureKind::Checkpoint,
                reason: e.to_string(),
            }
        }
    }
}

fn restore(run: &mut Run, id: &str) -> Input {
    let restored = git2::Oid::from_str(id)
        .map_err(|e| e.to_string())
        .and_then(|oid| {
            run.ws
                .checkpoints
                .restore(oid, &run.ws.root)
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
        Err(reason) => Input::Failed {
            kind: FailureKind::Restore,
            reason,
        },
    }
}

async fn call_model(run: &mut Run, request: ModelRequest) -> Input {
    let turn = run.agent.stats().turns;
    let chars: usize = request.messages.iter().map(|m| m.char_len()).sum();
    run.bus.emit(RunEvent::ModelRequest {
        turn,
        model: run.source.current(),
        messages: request.messages.len(),
        estimated_input_tokens: estimate_tokens(chars),
    });
    let started = Instant::now();
    let deadline = run.steering.deadline.into_std();
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
    let raced = run
        .steering
        .race(source.complete(&request, deadline, &mut observe))
        .await;
    match raced {
        Ok(Ok(reply)) => {
            run.bus.emit(RunEvent::ModelResponse {
                turn,
                model: reply.model.clone(),
                content: reply.content.clone(),
                tool_calls: reply
                    .tool_calls
                    .iter()
                    .map(|c| ToolCallSummary {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
                usage: reply.usage,
                cost_micros: run
                    .id
                    .options
                    .prices
                    .get(&reply.model)
                    .map(|p| p.cost_micros(&reply.usage)),
                duration_ms: elapsed_ms(started),
            });
            run.counters.model_used = Some(reply.model.clone());
            Input::ModelReplied(reply)
        }
        Ok(Err(e)) => Input::Failed {
            kind: FailureKind::Model,
            reason: e.to_string(),
        },
        Err(why) => run.steering.interrupted(why),
    }
}

async fn verify(run: &mut Run, l: &mut Loop, reason: VerificationReason, attempt: u32) -> Input {
    run.bus.emit(RunEvent::VerificationStarted {
        attempt,
        reason,
        checks: check_names(run),
    });
    let bus = &mut run.bus;
    let mut observe = |check: &CheckReport| {
        bus.emit(RunEvent::VerificationCheck {
            attempt,
            check: check.clone(),
        })
    };
    let raced = run
        .steering
        .race(run.sandbox.verifier.verify(attempt, &mut observe))
        .await;
    // Verdicts are told in the order they happened: a baseline that ended
    // while this ran has its verdict told (and given to the agent) first.
    if l.baseline.as_ref().is_some_and(BaselineJob::is_finished)
        && let Some(job) = l.baseline.take()
    {
        let input = baseline_done(run, job).await;
        l.feed(run, input);
    }
    match raced {
        Ok(Ok(result)) => {
            run.bus.emit(RunEvent::VerificationFinished {
                attempt,
                reason,
                passed: result.passed,
                fingerprint: result.fingerprint.to_string(),
            });
            let checks = check_output::outputs(&result.checks, run.artifacts.path());
            let input = Input::Verified {
                reason,
                passed: result.passed,
                fingerprint: result.fingerprint.to_string(),
                feedback: check_output::feedback(&result.checks, &checks),
                checks,
            };
            l.last_verification = Some(result);
            input
        }
        Ok(Err(e)) => Input::Failed {
            kind: FailureKind::Verification,
            reason: e.to_string(),
        },
        Err(why) => run.steering.interrupted(why),
    }
}
