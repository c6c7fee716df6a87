//! The agent as a pure reducer: [`Agent::handle`] takes one [`Input`] and
//! returns the [`Effect`]s to perform, as data. It never does IO, so every
//! decision — plan gates, budgets, corrections, recovery — is tested without
//! Docker, network or async. The runtime driver performs the effects and feeds
//! their results back as inputs.

use std::collections::VecDeque;

use super::context::{self, COMPACT_AT, Context, STOP_AT};
use super::events::{Outcome, RunEvent, VerificationReason};
use super::plan::{Plan, PlanItem};
use super::policy;
use crate::model::types::{ChatMessage, ModelReply, ModelRequest, ToolCall, ToolSpec};

/// Replies in a row without a tool call before the run gives up.
pub const MAX_CONSECUTIVE_NO_TOOL: u32 = 3;
/// Failed completion verifications after a regression from a validated state
/// before the validated checkpoint is restored (two repair cycles, then this).
pub const ROLLBACK_AFTER_FAILURES: u32 = 3;

#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub task: String,
    /// The frozen checks, as `name: command`, for the runtime contract.
    pub checks: Vec<String>,
    pub max_turns: u32,
    pub max_tokens: u64,
    /// Context budget in tokens (the smallest ceiling of the model chain).
    pub context_limit: u64,
    pub tools: Vec<ToolSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The workspace exists and its baseline checkpoint is taken.
    Start {
        baseline_checkpoint: String,
    },
    CheckpointCreated {
        id: String,
        validated: bool,
    },
    ModelReplied(ModelReply),
    ModelFailed {
        reason: String,
    },
    ToolFinished {
        call_id: String,
        ok: bool,
        content: String,
    },
    Verified {
        reason: VerificationReason,
        passed: bool,
        /// What the model is told: failing checks, exit codes, bounded output.
        feedback: String,
    },
    Restored {
        id: String,
    },
    /// A message typed by the person while the run works; sent with the next turn.
    FollowUp(String),
    Cancelled {
        reason: String,
    },
    TimedOut {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Emit(RunEvent),
    /// Take a checkpoint; `validated` marks it as a verified-good state.
    Checkpoint {
        reason: String,
        validated: bool,
    },
    /// Verify the baseline in the background, on its own copy of the baseline
    /// checkpoint, while the agent works; the result comes back as
    /// `Verified { reason: Baseline, .. }` whenever it is ready.
    VerifyBaseline {
        attempt: u32,
    },
    /// Mark an existing checkpoint as a verified-good state.
    MarkValidated {
        checkpoint: String,
    },
    CallModel(ModelRequest),
    RunTool(ToolCall),
    Verify {
        reason: VerificationReason,
        attempt: u32,
    },
    Restore {
        checkpoint: String,
    },
    Finish {
        outcome: Outcome,
        reason: String,
    },
}

/// Counters for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentStats {
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub tool_calls: u32,
    pub repair_cycles: u32,
    pub rollbacks: u32,
    pub verifications: u32,
}

#[derive(Debug, Clone)]
pub struct Agent {
    config: AgentConfig,
    system: String,
    task: String,
    fixed_chars: usize,
    plan: Plan,
    context: Context,
    queue: VecDeque<ToolCall>,
    /// The call whose result is awaited (a tool, or request_completion's verification).
    in_flight: Option<ToolCall>,
    follow_ups: Vec<String>,
    stats: AgentStats,
    no_tool_streak: u32,
    validated: Option<String>,
    failures_since_validated: u32,
    baseline_checkpoint: Option<String>,
    finished: bool,
}

impl Agent {
    pub fn new(config: AgentConfig) -> Self {
        let system = context::system_prompt(&config.checks);
        let task = context::task_message(&config.task);
        let tools_chars = serde_json::to_string(&config.tools).map_or(0, |s| s.len());
        Self {
            fixed_chars: system.len() + task.len() + tools_chars,
            system,
            task,
            config,
            plan: Plan::default(),
            context: Context::default(),
            queue: VecDeque::new(),
            in_flight: None,
            follow_ups: Vec::new(),
            stats: AgentStats::default(),
            no_tool_streak: 0,
            validated: None,
            failures_since_validated: 0,
            baseline_checkpoint: None,
            finished: false,
        }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn stats(&self) -> AgentStats {
        self.stats
    }

    pub fn validated_checkpoint(&self) -> Option<&str> {
        self.validated.as_deref()
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The whole conversation as the next request would send it.
    pub fn messages(&self) -> Vec<ChatMessage> {
        self.context.messages(&self.system, &self.task)
    }

    pub fn handle(&mut self, input: Input) -> Vec<Effect> {
        if self.finished {
            return Vec::new();
        }
        let mut fx = Vec::new();
        match input {
            Input::Start {
                baseline_checkpoint,
            } => {
                // The baseline is verified concurrently; the agent starts now.
                self.baseline_checkpoint = Some(baseline_checkpoint);
                self.stats.verifications += 1;
                fx.push(Effect::VerifyBaseline {
                    attempt: self.stats.verifications,
                });
                self.next_turn(&mut fx);
            }
            Input::CheckpointCreated { id, validated } => {
                if validated {
                    self.validated = Some(id);
                    self.failures_since_validated = 0;
                }
            }
            Input::ModelReplied(reply) => self.on_reply(reply, &mut fx),
            Input::ModelFailed { reason } => self.finish(Outcome::Failure, reason, &mut fx),
            Input::ToolFinished {
                call_id,
                ok: _,
                content,
            } => {
                self.in_flight = None;
                self.context
                    .history
                    .push(ChatMessage::tool_result(call_id, content));
                self.next_call(&mut fx);
            }
            Input::Verified {
                reason,
                passed,
                feedback,
            } => self.on_verified(reason, passed, feedback, &mut fx),
            Input::Restored { id } => {
                self.validated = Some(id);
                self.stats.verifications += 1;
                fx.push(Effect::Verify {
                    reason: VerificationReason::AfterRestore,
                    attempt: self.stats.verifications,
                });
            }
            Input::FollowUp(text) => self.follow_ups.push(text),
            Input::Cancelled { reason } => self.finish(Outcome::Cancelled, reason, &mut fx),
            Input::TimedOut { reason } => self.finish(Outcome::Failure, reason, &mut fx),
        }
        fx
    }

    fn finish(&mut self, outcome: Outcome, reason: String, fx: &mut Vec<Effect>) {
        self.finished = true;
        fx.push(Effect::Finish { outcome, reason });
    }

    fn on_reply(&mut self, reply: ModelReply, fx: &mut Vec<Effect>) {
        self.stats.input_tokens += reply.usage.input;
        self.stats.output_tokens += reply.usage.output;
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
            if let Some(reason) = policy::refusal(&call.name, &call.arguments, &self.plan) {
                fx.push(Effect::Emit(RunEvent::PolicyRefused {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    reason: reason.clone(),
                }));
                self.answer(&call, false, "refused", format!("Refused: {reason}"), fx);
                continue;
            }
            match call.name.as_str() {
                "update_plan" => self.update_plan(&call, fx),
                "request_completion" => {
                    self.stats.verifications += 1;
                    self.in_flight = Some(call);
                    fx.push(Effect::Verify {
                        reason: VerificationReason::Completion,
                        attempt: self.stats.verifications,
                    });
                    return;
                }
                name => {
                    if policy::needs_plan(name) {
                        fx.push(Effect::Checkpoint {
                            reason: format!("before {name}"),
                            validated: false,
                        });
                    }
                    self.in_flight = Some(call.clone());
                    fx.push(Effect::RunTool(call));
                    return;
                }
            }
        }
        self.next_turn(fx);
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

    fn update_plan(&mut self, call: &ToolCall, fx: &mut Vec<Effect>) {
        #[derive(serde::Deserialize)]
        struct Args {
            items: Vec<PlanItem>,
        }
        let parsed = serde_json::from_str::<Args>(&call.arguments)
            .map_err(|e| {
                format!(
                    "update_plan needs {{\"items\": [{{\"id\", \"content\", \"status\": \"pending\"|\"in_progress\"|\"done\", \"notes\"?}}]}}: {e}"
                )
            })
            .and_then(|a| Plan::validate(&a.items).map(|_| a.items).map_err(|e| e.to_string()));
        match parsed {
            Err(reason) => self.answer(
                call,
                false,
                "invalid plan",
                format!("Plan not updated: {reason}"),
                fx,
            ),
            Ok(items) => {
                let transition = statuses(&items) != statuses(&self.plan.items);
                self.plan = Plan { items };
                fx.push(Effect::Emit(RunEvent::PlanUpdated {
                    items: self.plan.items.clone(),
                }));
                if transition {
                    fx.push(Effect::Checkpoint {
                        reason: "plan transition".into(),
                        validated: false,
                    });
                }
                let done = self.plan.items.len() - self.plan.unfinished().len();
                let summary = format!("{done}/{} done", self.plan.items.len());
                let current = self
                    .plan
                    .in_progress()
                    .map(|i| format!(" In progress: {} {}.", i.id, i.content))
                    .unwrap_or_default();
                self.answer(
                    call,
                    true,
                    &summary,
                    format!("Plan updated: {summary}.{current}"),
                    fx,
                );
            }
        }
    }

    fn on_verified(
        &mut self,
        reason: VerificationReason,
        passed: bool,
        feedback: String,
        fx: &mut Vec<Effect>,
    ) {
        match reason {
            VerificationReason::Baseline => {
                // Arrives whenever the background verification ends; the
                // agent is already working. A pass makes the baseline the
                // validated state (unless a later one was validated already).
                if passed
                    && self.validated.is_none()
                    && let Some(id) = self.baseline_checkpoint.clone()
                {
                    self.validated = Some(id.clone());
                    self.failures_since_validated = 0;
                    fx.push(Effect::MarkValidated { checkpoint: id });
                }
            }
            VerificationReason::AfterRestore => {
                let state = if passed { "passes" } else { "fails" };
                self.context.history.push(ChatMessage::user(format!(
                    "After three failed completion verifications the workspace was restored to the last \
                     validated checkpoint; verification {state} there. Your changes since then are gone. \
                     Re-read the code, update the plan and try a different approach.\n{feedback}"
                )));
                self.next_turn(fx);
            }
            VerificationReason::Completion => {
                let Some(call) = self.in_flight.take() else {
                    return self.next_turn(fx);
                };
                if passed {
                    self.answer(
                        &call,
                        true,
                        "verification passed",
                        "Verification passed.".into(),
                        fx,
                    );
                    fx.push(Effect::Checkpoint {
                        reason: "completion verified".into(),
                        validated: true,
                    });
                    return self.finish(Outcome::Success, "verification passed".into(), fx);
                }
                let rollback = match &self.validated {
                    Some(id) => {
                        self.failures_since_validated += 1;
                        (self.failures_since_validated >= ROLLBACK_AFTER_FAILURES)
                            .then(|| id.clone())
                    }
                    None => None,
                };
                let note = match (&rollback, &self.validated) {
                    (Some(_), _) => {
                        "This was the third failed completion since the last validated state: \
                                     the workspace is restored to it."
                            .to_string()
                    }
                    (None, Some(_)) => format!(
                        "Repair cycle {} of {}: fix the failures, then call request_completion again.",
                        self.failures_since_validated,
                        ROLLBACK_AFTER_FAILURES - 1
                    ),
                    (None, None) => {
                        "Fix the failures, then call request_completion again.".to_string()
                    }
                };
                if rollback.is_none() {
                    self.stats.repair_cycles += 1;
                }
                self.answer(
                    &call,
                    false,
                    "verification failed",
                    format!("Verification failed.\n{feedback}\n{note}"),
                    fx,
                );
                match rollback {
                    Some(id) => {
                        self.stats.rollbacks += 1;
                        self.failures_since_validated = 0;
                        self.queue.clear();
                        fx.push(Effect::Restore { checkpoint: id });
                    }
                    None => self.next_call(fx),
                }
            }
        }
    }

    fn next_turn(&mut self, fx: &mut Vec<Effect>) {
        if self.finished {
            return;
        }
        if self.stats.turns >= self.config.max_turns {
            let reason = format!(
                "the turn budget ({} turns) is used up",
                self.config.max_turns
            );
            return self.finish(Outcome::Failure, reason, fx);
        }
        let used = self.stats.input_tokens + self.stats.output_tokens;
        if used >= self.config.max_tokens {
            let reason = format!(
                "the token budget ({} tokens) is used up",
                self.config.max_tokens
            );
            return self.finish(Outcome::Failure, reason, fx);
        }
        for text in self.follow_ups.drain(..) {
            self.context.history.push(ChatMessage::user(format!(
                "Message from the person running you:\n{text}"
            )));
        }
        let limit = self.config.context_limit.max(1) as f64;
        if self.context.estimate(self.fixed_chars) as f64 >= COMPACT_AT * limit {
            if let Some(c) = self.context.compact(self.fixed_chars) {
                fx.push(Effect::Emit(RunEvent::ContextCompacted {
                    before_tokens: c.before_tokens,
                    after_tokens: c.after_tokens,
                    messages_compacted: c.messages_compacted,
                }));
            }
            if self.context.estimate(self.fixed_chars) as f64 >= STOP_AT * limit {
                let reason = format!(
                    "the context budget ({} tokens) is exhausted even after compaction",
                    self.config.context_limit
                );
                return self.finish(Outcome::Failure, reason, fx);
            }
        }
        self.stats.turns += 1;
        fx.push(Effect::CallModel(ModelRequest {
            messages: self.messages(),
            tools: self.config.tools.clone(),
        }));
    }
}

#[cfg(test)]
#[path = "reducer_tests.rs"]
mod tests;

fn statuses(items: &[PlanItem]) -> Vec<(&str, super::plan::PlanStatus)> {
    items.iter().map(|i| (i.id.as_str(), i.status)).collect()
}
