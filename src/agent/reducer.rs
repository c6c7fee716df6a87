//! The agent as a pure reducer: [`Agent::handle`] takes one [`Input`] and
//! returns the [`Effect`]s to perform, as data. It never does IO, so every
//! decision — bootstrap, plan gates, budgets, corrections, approvals,
//! recovery, the final verdict — is tested without Docker, network or async.
//! The runtime driver performs the effects and feeds their results back.
//!
//! `handle` matches on the [`Phase`] and the input together; the rules for
//! approvals and for verification live in the two submodules.

mod approval;
mod plan_update;
mod request;
mod spend;
mod verdict;

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::budget::Calibration;
use super::context::{self, Context};
pub use super::effects::{
    AgentConfig, AgentStats, CheckOutput, Effect, FailureKind, Input, PatchFacts,
};
use super::instructions::{InstructionDoc, ProjectInstructions};
use super::phase::Phase;
use super::plan::Plan;
use super::policy;
use super::run_state::RunState;
use crate::model::types::{ChatMessage, ModelReply, ToolCall};
use crate::protocol::{Outcome, RunEvent, VerificationReason};
use crate::tools::ToolName;

/// Replies in a row without a tool call before the run gives up.
pub(crate) const MAX_CONSECUTIVE_NO_TOOL: u32 = 3;
/// Failed completion verifications after a regression from a validated state
/// before the validated checkpoint is restored (two repair cycles, then this).
pub(crate) const ROLLBACK_AFTER_FAILURES: u32 = 3;

/// How a run's reason begins when its sandbox failed (a batch tells an
/// engine that cannot run anything by it).
pub(crate) const SANDBOX_FAILED: &str = "the sandbox failed";

/// Where the background verification of the baseline stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Baseline {
    NotStarted,
    Running,
    Passed,
    Failed,
}

/// The agent's whole state; it serialises, so a run can be resumed from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Agent {
    config: AgentConfig,
    system: String,
    task: String,
    /// Characters of the tools field of every request.
    tools_chars: usize,
    phase: Phase,
    plan: Plan,
    context: Context,
    /// Project instructions found so far, and where they were looked for.
    instructions: ProjectInstructions,
    /// What every request carries besides the conversation.
    run_state: RunState,
    /// The estimate of the last request, and how providers counted it.
    last_request_tokens: u64,
    calibration: Calibration,
    baseline_attempt: u32,
    /// Tool calls of the last reply not yet run.
    queue: VecDeque<ToolCall>,
    follow_ups: Vec<String>,
    stats: AgentStats,
    no_tool_streak: u32,
    baseline: Baseline,
    baseline_checkpoint: Option<String>,
    validated: Option<String>,
    failures_since_validated: u32,
    /// The fingerprint of the latest completion or after-restore verification
    /// and whether it passed: success is bound to it.
    last_verdict: Option<(bool, String)>,
    /// Set when a person chose "approve the rest of the run".
    approve_all: bool,
    approvals_asked: u32,
    /// The summary of the latest completion request, bounded.
    #[serde(default)]
    completion_summary: Option<String>,
    /// A resumed run is running its bootstrap again: what it installed
    /// outside the checkpoints (a venv, `node_modules`, the dependency
    /// folder) went with the old workspace.
    #[serde(default)]
    rebootstrapping: bool,
    /// A `Stop` hook refused the end once; it is not asked to again.
    #[serde(default)]
    stop_hook_refused: bool,
    /// What hooks added, not sent yet.
    #[serde(default)]
    hook_context: Vec<String>,
    /// MCP tools the person allowed for the rest of the run.
    #[serde(default)]
    external_approved: Vec<String>,
    /// The `PreCompact` hooks ran for the compaction about to happen.
    #[serde(default)]
    compact_hooks_ran: bool,
    /// Which budgets the model was warned of at 80 %.
    #[serde(default)]
    budget_warned: spend::BudgetWarned,
    /// The first model that answered without a price in the table.
    #[serde(default)]
    unpriced_model: Option<String>,
}

impl Agent {
    pub fn new(config: AgentConfig) -> Self {
        let system = context::system_prompt(&config.checks);
        let task = context::task_message(&config.task);
        let tools_chars = serde_json::to_string(&config.tools).map_or(0, |s| s.len());
        let (instructions, _) =
            ProjectInstructions::new(config.instructions.clone(), config.context_limit);
        Self {
            tools_chars,
            system,
            task,
            config,
            phase: Phase::Ready,
            plan: Plan::default(),
            context: Context::default(),
            instructions,
            run_state: RunState::default(),
            last_request_tokens: 0,
            calibration: Calibration::default(),
            baseline_attempt: 0,
            queue: VecDeque::new(),
            follow_ups: Vec::new(),
            stats: AgentStats::default(),
            no_tool_streak: 0,
            baseline: Baseline::NotStarted,
            baseline_checkpoint: None,
            validated: None,
            failures_since_validated: 0,
            last_verdict: None,
            approve_all: false,
            external_approved: Vec::new(),
            compact_hooks_ran: false,
            budget_warned: spend::BudgetWarned::default(),
            unpriced_model: None,
            approvals_asked: 0,
            completion_summary: None,
            rebootstrapping: false,
            stop_hook_refused: false,
            hook_context: Vec::new(),
        }
    }

    /// When edits are approved from now on (a resumed run takes the front
    /// end's choice).
    pub(crate) fn set_approval(&mut self, mode: crate::protocol::ApprovalMode) {
        self.config.approval = mode;
    }

    /// The hook points in force now (a resumed run asks for the person's
    /// hooks as they are, not as they were).
    pub(crate) fn set_hooks(&mut self, hooks: crate::agent::effects::HookPoints) {
        self.config.hooks = hooks;
    }

    /// A resumed run's MCP servers as they are now.
    pub(crate) fn set_external(&mut self, external: crate::agent::effects::ExternalTools) {
        self.config.external = external;
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub(crate) fn validated_checkpoint(&self) -> Option<&str> {
        self.validated.as_deref()
    }

    /// Whether the outcome is decided (the patch may still be exporting).
    #[cfg(test)]
    pub(crate) fn is_finished(&self) -> bool {
        self.phase.is_decided()
    }

    /// The project instructions in the context (root first), each as kept.
    pub fn instructions(&self) -> &[InstructionDoc] {
        self.instructions.docs()
    }

    /// What the agent said it did in its latest completion request.
    pub(crate) fn completion_summary(&self) -> Option<&str> {
        self.completion_summary.as_deref()
    }

    /// What every request carries besides the conversation.
    #[cfg(test)]
    pub(crate) fn run_state(&self) -> &RunState {
        &self.run_state
    }

    /// Takes one input and returns what to do about it. While the agent waits
    /// for a person or for the baseline, every input that does not end the
    /// wait leaves the wait in place (the driver waits again).
    pub fn handle(&mut self, input: Input) -> Vec<Effect> {
        let waiting = self.wait();
        let mut fx = Vec::new();
        self.step(input, &mut fx);
        if let Some(wait) = waiting
            && self.wait().as_ref() == Some(&wait)
            && !fx.iter().any(Effect::is_wait)
        {
            fx.push(wait);
        }
        fx
    }

    /// The wait the current phase holds the driver in, if any.
    fn wait(&self) -> Option<Effect> {
        match &self.phase {
            Phase::AwaitingApproval { approval } => Some(Effect::AwaitApproval {
                id: approval.id.clone(),
                timeout_ms: self.config.approval_timeout_ms,
            }),
            Phase::AwaitingBaseline { .. } => Some(Effect::AwaitBaseline),
            _ => None,
        }
    }

    fn step(&mut self, input: Input, fx: &mut Vec<Effect>) {
        if matches!(self.phase, Phase::Finished { .. }) && !matches!(input, Input::Resumed { .. }) {
            return;
        }
        // Inputs that mean the same in every phase.
        let input = match input {
            Input::Verified {
                reason: VerificationReason::Baseline,
                passed,
                checks,
                ..
            } => {
                if self.baseline == Baseline::Running {
                    self.record_verification(VerificationReason::Baseline, passed, &checks);
                }
                return self.on_baseline(passed, fx);
            }
            Input::WorkspaceChanged { files } => return self.run_state.set_changes(files),
            Input::InstructionsRead { docs } => return self.on_instructions(docs, fx),
            Input::CheckpointCreated { id, validated } => {
                return self.on_checkpoint(id, validated, fx);
            }
            // A missing checkpoint weakens recovery but must not end the run.
            Input::Failed {
                kind: FailureKind::Checkpoint,
                ..
            } => return,
            Input::FollowUp(text) => {
                self.run_state.follow_up(&text);
                return self.follow_ups.push(text);
            }
            Input::HookContext { event, text } => {
                return self
                    .hook_context
                    .push(format!("Context from the person's {event} hook:\n{text}"));
            }
            Input::Resumed { note, follow_up } => return self.on_resumed(note, follow_up, fx),
            Input::Approval { id, decision } => return self.on_approval(id, decision, fx),
            Input::ApprovalTimedOut { id } => return self.on_approval_timeout(id, fx),
            Input::CommandsClosed => return self.on_commands_closed(fx),
            other => other,
        };
        if let Phase::Concluding { outcome, reason } = &self.phase {
            if let Input::Concluded(facts) = input {
                let (outcome, reason) = (*outcome, reason.clone());
                self.conclude(outcome, reason, facts, fx);
            }
            return;
        }
        match input {
            Input::Cancelled { reason } => self.finish(Outcome::Cancelled, reason, fx),
            Input::TimedOut { reason } => {
                let reason = if self.phase == Phase::Bootstrapping {
                    "the run's time budget ran out during bootstrap".to_string()
                } else {
                    reason
                };
                self.finish(Outcome::Failure, reason, fx)
            }
            Input::Failed { kind, reason } => self.on_failure(kind, reason, fx),
            input => self.advance(input, fx),
        }
    }

    /// The inputs that belong to one phase.
    fn advance(&mut self, input: Input, fx: &mut Vec<Effect>) {
        match (&self.phase, input) {
            (
                Phase::Ready,
                Input::Start {
                    baseline_checkpoint,
                },
            ) => {
                self.baseline_checkpoint = Some(baseline_checkpoint);
                self.announce_instructions(fx);
                if self.config.bootstrap.is_empty() {
                    return self.begin(fx);
                }
                self.phase = Phase::Bootstrapping;
                fx.push(Effect::Emit(RunEvent::BootstrapStarted {
                    commands: self.config.bootstrap.clone(),
                    network: self.config.bootstrap_network,
                }));
                fx.push(Effect::Bootstrap);
            }
            (
                Phase::Bootstrapping,
                Input::BootstrapFinished {
                    passed,
                    failure,
                    duration_ms,
                },
            ) => self.on_bootstrap_finished(passed, failure, duration_ms, fx),
            (Phase::Bootstrapping, Input::Rebaselined { checkpoint }) => {
                self.baseline_checkpoint = Some(checkpoint);
                self.begin(fx);
            }
            (Phase::AwaitingModel, Input::ModelReplied(reply)) => self.on_reply(reply, fx),
            (
                Phase::AwaitingHooks { call },
                Input::PreToolHooksRan {
                    call_id,
                    refused,
                    arguments,
                    ask,
                },
            ) if call.id == call_id => {
                let call = call.clone();
                self.on_pre_tool_hooks(call, refused, arguments, ask, fx);
            }
            (Phase::AwaitingCompactHooks, Input::PreCompactHooksRan { context }) => {
                for text in context {
                    self.hook_context.push(format!(
                        "Context from the person's PreCompact hook:\n{text}"
                    ));
                }
                self.compact_hooks_ran = true;
                self.next_turn(fx);
            }
            (Phase::AwaitingStopHooks { call }, Input::StopHooksRan { refused }) => {
                let call = call.clone();
                self.on_stop_hooks(call, refused, fx);
            }
            (
                Phase::AwaitingTool { call } | Phase::ApplyingEdit { call },
                Input::ToolFinished {
                    call_id,
                    content,
                    ok,
                },
            ) if call.id == call_id => {
                if ok {
                    let call = call.clone();
                    self.note_result(&call);
                }
                self.phase = Phase::AwaitingModel;
                self.context
                    .history
                    .push(ChatMessage::tool_result(call_id, content));
                self.next_call(fx);
            }
            (
                Phase::AwaitingTool { call },
                Input::EditPrepared {
                    call_id,
                    path,
                    patch,
                    credentials,
                    credential_file,
                },
            ) if call.id == call_id => {
                let call = call.clone();
                self.on_edit_prepared(call, path, patch, credentials, credential_file, fx);
            }
            (
                Phase::Verifying { .. },
                Input::Verified {
                    reason,
                    passed,
                    fingerprint,
                    feedback,
                    checks,
                },
            ) => self.on_verified(reason, passed, fingerprint, feedback, &checks, fx),
            (Phase::Restoring { .. }, Input::Restored { id }) => self.on_restored(id, fx),
            // Anything else is out of place (a stray or repeated result): it
            // changes nothing.
            _ => {}
        }
    }

    /// The bootstrap ended: the baseline is taken again after it (a resumed
    /// run goes on), or the run fails with its reason.
    fn on_bootstrap_finished(
        &mut self,
        passed: bool,
        failure: Option<String>,
        duration_ms: u64,
        fx: &mut Vec<Effect>,
    ) {
        fx.push(Effect::Emit(RunEvent::BootstrapFinished {
            passed,
            duration_ms,
            failure: failure.clone(),
        }));
        let again = std::mem::take(&mut self.rebootstrapping);
        if passed && again {
            self.go_on_resumed(fx);
        } else if passed {
            fx.push(Effect::Rebaseline);
        } else {
            let why = failure.unwrap_or_default();
            let when = if again { " (again, on resume)" } else { "" };
            self.finish(
                Outcome::Failure,
                format!("bootstrap failed{when}: {why}"),
                fx,
            );
        }
    }

    /// A saved state goes on: whatever was in flight is gone, the workspace
    /// is as it was when the state was saved, and no earlier verification
    /// counts any more — success needs a new one.
    fn on_resumed(&mut self, note: String, follow_up: Option<String>, fx: &mut Vec<Effect>) {
        let was_finished = matches!(self.phase, Phase::Finished { .. });
        if was_finished
            && follow_up.is_none()
            && let Phase::Finished {
                outcome: Outcome::Success,
                ..
            } = self.phase
        {
            // Nothing to continue: a finished success needs a new instruction.
            return self.finish_again(fx);
        }
        self.queue.clear();
        self.last_verdict = None;
        self.validated = None;
        self.failures_since_validated = 0;
        self.no_tool_streak = 0;
        self.approve_all = false;
        self.completion_summary = None;
        self.context.close_open_calls(
            "Not run: the run was interrupted before this call finished; its effects were rolled back.",
        );
        self.context.history.push(ChatMessage::user(note));
        if let Some(text) = follow_up {
            self.run_state.follow_up(&text);
            self.follow_ups.push(text);
        }
        if !self.config.bootstrap.is_empty() {
            // The rebuilt workspace has the run's files, not what the
            // bootstrap installed: it runs again first (and its writes are
            // not taken as a new baseline — the run's baseline stays).
            self.phase = Phase::Bootstrapping;
            self.rebootstrapping = true;
            fx.push(Effect::Emit(RunEvent::BootstrapStarted {
                commands: self.config.bootstrap.clone(),
                network: self.config.bootstrap_network,
            }));
            return fx.push(Effect::Bootstrap);
        }
        self.go_on_resumed(fx);
    }

    /// A resumed run goes on: the baseline verification again if its
    /// verdict was lost with the process, then the next turn.
    fn go_on_resumed(&mut self, fx: &mut Vec<Effect>) {
        self.phase = Phase::AwaitingModel;
        if matches!(self.baseline, Baseline::NotStarted | Baseline::Running) {
            // Its verdict was lost with the process: it runs again.
            return self.begin(fx);
        }
        self.next_turn(fx);
    }

    /// Ends again with the outcome already decided.
    fn finish_again(&mut self, fx: &mut Vec<Effect>) {
        if let Phase::Finished { outcome, reason } = self.phase.clone() {
            self.phase = Phase::Concluding {
                outcome,
                reason: reason.clone(),
            };
            fx.push(Effect::Finish { outcome, reason });
        }
    }

    /// The bootstrap is done: verify the baseline in the background and start.
    fn begin(&mut self, fx: &mut Vec<Effect>) {
        self.baseline = Baseline::Running;
        self.stats.verifications += 1;
        self.baseline_attempt = self.stats.verifications;
        fx.push(Effect::VerifyBaseline {
            attempt: self.stats.verifications,
        });
        self.next_turn(fx);
    }

    fn on_failure(&mut self, kind: FailureKind, reason: String, fx: &mut Vec<Effect>) {
        let reason = match kind {
            FailureKind::Model | FailureKind::Checkpoint => reason,
            FailureKind::Sandbox => format!("{SANDBOX_FAILED}: {reason}"),
            FailureKind::Verification => format!("verification could not run: {reason}"),
            FailureKind::Baseline => {
                format!("the baseline after bootstrap could not be recorded: {reason}")
            }
            FailureKind::Environment => format!("environment error: {reason}"),
            FailureKind::Restore => match &self.phase {
                Phase::Restoring { checkpoint } => {
                    format!("restoring the validated checkpoint {checkpoint} failed: {reason}")
                }
                _ => format!("restoring the validated checkpoint failed: {reason}"),
            },
        };
        self.finish(Outcome::Failure, reason, fx);
    }

    /// Decides the outcome; the driver exports the patch and reports back.
    fn finish(&mut self, outcome: Outcome, reason: String, fx: &mut Vec<Effect>) {
        if self.phase.is_decided() {
            return;
        }
        if let Some(approval) = self.phase.pending_approval() {
            // Nobody will answer now: the edit is refused, never applied.
            fx.push(Effect::Emit(RunEvent::ApprovalResolved {
                id: approval.id.clone(),
                approved: false,
                reason: Some(format!("the run ended: {reason}")),
            }));
        }
        self.queue.clear();
        self.phase = Phase::Concluding {
            outcome,
            reason: reason.clone(),
        };
        fx.push(Effect::Finish { outcome, reason });
    }

    fn on_checkpoint(&mut self, id: String, validated: bool, fx: &mut Vec<Effect>) {
        if validated {
            self.validated = Some(id.clone());
            self.failures_since_validated = 0;
            fx.push(Effect::MarkValidated { checkpoint: id });
        }
    }

    fn checkpoint(&mut self, reason: impl Into<String>, validated: bool, fx: &mut Vec<Effect>) {
        fx.push(Effect::Checkpoint {
            reason: reason.into(),
            validated,
        });
    }

    fn on_reply(&mut self, reply: ModelReply, fx: &mut Vec<Effect>) {
        self.spend(&reply);
        self.calibrate(&reply);
        self.context.history.push(ChatMessage::from_reply(&reply));
        if reply.tool_calls.is_empty() {
            self.no_tool_streak += 1;
            if self.no_tool_streak >= MAX_CONSECUTIVE_NO_TOOL {
                let reason = format!(
                    "the model answered {MAX_CONSECUTIVE_NO_TOOL} times in a row without calling a tool"
                );
                return self.finish(Outcome::Failure, reason, fx);
            }
            self.context
                .history
                .push(ChatMessage::user(policy::NO_TOOL_CORRECTION));
            fx.push(Effect::Emit(RunEvent::AgentCorrection {
                turn: self.stats.turns,
                message: policy::NO_TOOL_CORRECTION.to_string(),
            }));
            return self.next_turn(fx);
        }
        self.no_tool_streak = 0;
        self.queue.extend(reply.tool_calls);
        self.next_call(fx);
    }

    /// Works through the queued calls until one needs the driver; when none
    /// is left, starts the next turn.
    fn next_call(&mut self, fx: &mut Vec<Effect>) {
        while let Some(call) = self.queue.pop_front() {
            self.stats.tool_calls += 1;
            fx.push(Effect::Emit(RunEvent::ToolStarted {
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            }));
            if self.refused_by_policy(&call, fx) {
                continue;
            }
            match ToolName::from_name(&call.name) {
                Some(ToolName::UpdatePlan) => self.update_plan(&call, fx),
                Some(ToolName::RequestCompletion) => {
                    if let Some(summary) = completion_summary(&call.arguments) {
                        self.completion_summary = Some(summary);
                    }
                    self.stats.verifications += 1;
                    fx.push(Effect::Verify {
                        reason: VerificationReason::Completion,
                        attempt: self.stats.verifications,
                    });
                    self.phase = Phase::Verifying {
                        reason: VerificationReason::Completion,
                        call: Some(call),
                    };
                    return;
                }
                _ if self.config.hooks.pre_tool_use => {
                    fx.push(Effect::PreToolHooks(call.clone()));
                    self.phase = Phase::AwaitingHooks { call };
                    return;
                }
                _ => return self.start_tool(call, fx),
            }
        }
        self.next_turn(fx);
    }

    /// Answers `call` with the policy's refusal, if it has one.
    fn refused_by_policy(&mut self, call: &ToolCall, fx: &mut Vec<Effect>) -> bool {
        let external = self.config.offers_external(&call.name);
        let Some(reason) = policy::refusal(&call.name, &call.arguments, &self.plan, external)
        else {
            return false;
        };
        fx.push(Effect::Emit(RunEvent::PolicyRefused {
            call_id: call.id.clone(),
            name: call.name.clone(),
            reason: reason.clone(),
        }));
        self.answer(call, false, "refused", format!("Refused: {reason}"), fx);
        true
    }

    /// Runs a tool call the policy (and the hooks) let through; an MCP
    /// server's tool the person has not allowed asks them first.
    fn start_tool(&mut self, call: ToolCall, fx: &mut Vec<Effect>) {
        if self.config.offers_external(&call.name) && !self.external_allowed(&call.name) {
            let why = crate::protocol::CallApproval {
                outside_sandbox: true,
                reason: None,
            };
            return self.ask_call(call, why, fx);
        }
        self.run_call(call, fx);
    }

    /// Runs a call nobody needs to be asked about (any more).
    fn run_call(&mut self, call: ToolCall, fx: &mut Vec<Effect>) {
        if ToolName::from_name(&call.name).is_some_and(ToolName::mutates_workspace) {
            self.checkpoint(format!("before {}", call.name), false, fx);
        }
        self.look_for_instructions(&call, fx);
        fx.push(Effect::RunTool(call.clone()));
        self.phase = Phase::AwaitingTool { call };
    }

    /// The `PreToolUse` hooks' verdict on `call`: refused, it is answered
    /// with the reason; else it runs, with the arguments a hook rewrote
    /// held to the policy again (a hook cannot take a call past it).
    fn on_pre_tool_hooks(
        &mut self,
        mut call: ToolCall,
        refused: Option<String>,
        arguments: Option<String>,
        ask: Option<String>,
        fx: &mut Vec<Effect>,
    ) {
        self.phase = Phase::AwaitingModel;
        if let Some(why) = refused {
            self.answer(
                &call,
                false,
                "blocked by a hook",
                format!("Blocked by a PreToolUse hook: {why}"),
                fx,
            );
            return self.next_call(fx);
        }
        if let Some(arguments) = arguments {
            call.arguments = arguments;
            if self.refused_by_policy(&call, fx) {
                return self.next_call(fx);
            }
        }
        if let Some(reason) = ask {
            // The person decides (for an MCP server's tool too: one answer).
            let why = crate::protocol::CallApproval {
                outside_sandbox: self.config.offers_external(&call.name)
                    && !self.external_allowed(&call.name),
                reason: Some(reason),
            };
            return self.ask_call(call, why, fx);
        }
        self.start_tool(call, fx);
    }

    /// Records a result the agent produced itself (refusals, plan updates).
    fn answer(
        &mut self,
        call: &ToolCall,
        ok: bool,
        summary: &str,
        content: String,
        fx: &mut Vec<Effect>,
    ) {
        fx.push(Effect::Emit(RunEvent::ToolFinished {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
            summary: summary.to_string(),
            result: content.clone(),
            output_file: None,
            duration_ms: 0,
            changed_files: Vec::new(),
        }));
        self.context
            .history
            .push(ChatMessage::tool_result(call.id.clone(), content));
    }
}

/// Longest completion summary kept, in characters.
pub(crate) const MAX_SUMMARY_CHARS: usize = 4000;

/// The `summary` argument of a completion request, trimmed and bounded;
/// `None` when there is none.
fn completion_summary(arguments: &str) -> Option<String> {
    let args: serde_json::Value = serde_json::from_str(arguments).ok()?;
    let text = args.get("summary")?.as_str()?.trim();
    if text.is_empty() {
        return None;
    }
    Some(crate::terminal_text::cut_to(text, MAX_SUMMARY_CHARS + 1))
}

#[cfg(test)]
#[path = "reducer_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "reducer_flow_tests.rs"]
mod flow_tests;

#[cfg(test)]
#[path = "reducer_context_tests.rs"]
mod context_tests;

#[cfg(test)]
#[path = "reducer_resume_tests.rs"]
mod resume_tests;
