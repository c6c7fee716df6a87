//! Each request and what it carries: the fixed prefix (contract, task,
//! project instructions), the discoveries and the conversation, and the run
//! state at the end; compaction when the request would pass 75 % of the
//! budget, the stop at 90 %, and the facts the run state is made of (files
//! read, the diff stat, the latest verification, recovery, follow-ups).

use super::{Agent, Effect};
use crate::agent::context::{COMPACT_AT, COMPACT_TO, MESSAGE_OVERHEAD, STOP_AT, message_chars};
use crate::agent::effects::CheckOutput;
use crate::agent::instructions::{self, InstructionDoc};
use crate::agent::phase::Phase;
use crate::agent::run_state::{BudgetView, VerificationDigest, digest_check};
use crate::model::types::{ChatMessage, ModelReply, ModelRequest, ToolCall, estimate_tokens};
use crate::protocol::{Outcome, RunEvent, VerificationReason};
use crate::tools::ToolName;

/// Characters reserved for the numbers of the budget line, which are only
/// known once the rest of the request is.
const BUDGET_SLACK: usize = 64;
/// Checks of one verification kept in the run state (the most a run has).
const MAX_CHECKS: usize = 16;

impl Agent {
    /// The next model request, unless a budget is used up.
    pub(super) fn next_turn(&mut self, fx: &mut Vec<Effect>) {
        if self.phase.is_decided() {
            return;
        }
        self.phase = Phase::AwaitingModel;
        if self.stats.turns >= self.config.max_turns {
            let reason = format!(
                "the turn budget ({} turns) is used up",
                self.config.max_turns
            );
            return self.finish(Outcome::Failure, reason, fx);
        }
        if let Some((outcome, reason)) = self.budget_stop() {
            return self.finish(outcome, reason, fx);
        }
        self.warn_of_budget(fx);
        for text in self.hook_context.drain(..) {
            self.context.history.push(ChatMessage::user(text));
        }
        for text in self.follow_ups.drain(..) {
            self.context.history.push(ChatMessage::user(format!(
                "Message from the person running you:\n{text}"
            )));
        }
        if self.config.hooks.pre_compact && !self.compact_hooks_ran && self.needs_compaction() {
            // The person's hooks hear of it first (and may leave a note
            // that outlives it).
            let tokens = self
                .calibration
                .tokens(self.fixed_chars() + self.context.chars());
            fx.push(Effect::PreCompactHooks { tokens });
            self.phase = Phase::AwaitingCompactHooks;
            return;
        }
        if let Some(reason) = self.fit_context(fx) {
            return self.finish(Outcome::Failure, reason, fx);
        }
        self.stats.turns += 1;
        let messages = self.messages();
        self.sent(&messages);
        fx.push(Effect::CallModel(ModelRequest {
            messages,
            tools: self.config.tools.clone(),
        }));
    }

    /// The messages before the conversation: contract, task, instructions.
    fn prefix(&self) -> Vec<ChatMessage> {
        let mut out = vec![
            ChatMessage::system(self.system.clone()),
            ChatMessage::user(self.task.clone()),
        ];
        out.extend(self.instructions.render().map(ChatMessage::user));
        out
    }

    fn budget(&self, context_tokens: u64) -> BudgetView {
        BudgetView {
            turn: self.stats.turns,
            max_turns: self.config.max_turns,
            tokens_used: self
                .stats
                .input_tokens
                .saturating_add(self.stats.output_tokens),
            max_tokens: self.config.max_tokens,
            cost: self
                .config
                .max_cost_micros
                .map(|max| (self.stats.cost_micros, max)),
            context_tokens,
            context_limit: self.config.context_limit,
        }
    }

    /// Characters of everything but the conversation and the discoveries:
    /// the prefix, the tools and the run state.
    fn fixed_chars(&self) -> usize {
        let prefix: usize = self.prefix().iter().map(message_chars).sum();
        let state = self.run_state.render(&self.plan, self.budget(0)).len();
        prefix + self.tools_chars + state + MESSAGE_OVERHEAD + BUDGET_SLACK
    }

    /// The whole request as it is sent next, the run state last.
    pub fn messages(&self) -> Vec<ChatMessage> {
        let tokens = self
            .calibration
            .tokens(self.fixed_chars() + self.context.chars());
        let state = self.run_state.render(&self.plan, self.budget(tokens));
        self.context
            .messages(self.prefix(), Some(ChatMessage::user(state)))
    }

    /// Compacts when the next request would pass [`COMPACT_AT`] of the
    /// budget; the reason to stop when even then it passes [`STOP_AT`].
    pub(super) fn fit_context(&mut self, fx: &mut Vec<Effect>) -> Option<String> {
        let limit = self.config.context_limit.max(1);
        let fixed = self.fixed_chars();
        let share = |tokens: u64| tokens as f64 / limit as f64;
        if !self.needs_compaction() {
            return None;
        }
        self.compact_hooks_ran = false;
        let target = (COMPACT_TO * limit as f64) as u64;
        let room = self.calibration.chars_within(target).saturating_sub(fixed);
        if let Some(c) = self.context.compact(fixed, room) {
            let (before_tokens, after_tokens) = (
                self.calibration.scale(c.before_tokens),
                self.calibration.scale(c.after_tokens),
            );
            fx.push(Effect::Emit(RunEvent::ContextCompacted {
                before_tokens,
                after_tokens,
                messages_compacted: c.messages_compacted,
            }));
            if self.config.hooks.post_compact {
                fx.push(Effect::PostCompactHooks {
                    before_tokens,
                    after_tokens,
                    messages_compacted: c.messages_compacted,
                });
            }
        }
        let after = self.calibration.tokens(fixed + self.context.chars());
        (share(after) >= STOP_AT).then(|| {
            format!(
                "the context budget ({limit} tokens) is exhausted even after compaction \
                 (≈ {after} tokens are left that cannot be compacted)"
            )
        })
    }

    /// Whether the next request would pass [`COMPACT_AT`] of the budget.
    fn needs_compaction(&self) -> bool {
        let limit = self.config.context_limit.max(1);
        let tokens = self
            .calibration
            .tokens(self.fixed_chars() + self.context.chars());
        tokens as f64 / limit as f64 >= COMPACT_AT
    }

    /// The plain estimate of a request, for calibrating against the provider.
    pub(super) fn sent(&mut self, messages: &[ChatMessage]) {
        let chars: usize = messages.iter().map(message_chars).sum::<usize>() + self.tools_chars;
        self.last_request_tokens = estimate_tokens(chars);
    }

    /// What a reply says about the request's size.
    pub(super) fn calibrate(&mut self, reply: &ModelReply) {
        if !reply.usage.estimated {
            self.calibration
                .observe(self.last_request_tokens, reply.usage.input);
        }
    }

    /// Before a call runs: the directories it works in that were never
    /// looked at for instructions.
    pub(super) fn look_for_instructions(&mut self, call: &ToolCall, fx: &mut Vec<Effect>) {
        let dirs = instructions::dirs_of_call(&call.name, &call.arguments);
        if dirs.is_empty() {
            return;
        }
        let lookups = self.instructions.lookups(dirs);
        if !lookups.is_empty() {
            fx.push(Effect::ReadInstructions { lookups });
        }
    }

    pub(super) fn on_instructions(&mut self, docs: Vec<InstructionDoc>, fx: &mut Vec<Effect>) {
        for doc in docs {
            if let Some(kept) = self.instructions.admit(doc) {
                fx.push(Effect::Emit(loaded(&kept)));
            }
        }
    }

    /// The root's instructions, announced when the run starts.
    pub(super) fn announce_instructions(&self, fx: &mut Vec<Effect>) {
        for doc in self.instructions.docs() {
            fx.push(Effect::Emit(loaded(doc)));
        }
    }

    /// A call that succeeded: the files it read.
    pub(super) fn note_result(&mut self, call: &ToolCall) {
        if !matches!(
            ToolName::from_name(&call.name),
            Some(ToolName::ReadFile | ToolName::TreeSitterSymbols)
        ) {
            return;
        }
        let path = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|v| v.get("path").and_then(|p| p.as_str()).map(str::to_string));
        if let Some(path) = path {
            self.run_state.file_read(&path);
        }
    }

    /// The latest verification, for the run state. A baseline verdict that
    /// arrives after a later verification does not replace it, and one
    /// whose checks could not run says nothing.
    pub(super) fn record_verification(
        &mut self,
        reason: VerificationReason,
        passed: bool,
        checks: &[CheckOutput],
    ) {
        if reason == VerificationReason::Baseline
            && (checks.is_empty()
                || self
                    .run_state
                    .verification()
                    .is_some_and(|v| v.reason != VerificationReason::Baseline))
        {
            return;
        }
        let attempt = match reason {
            VerificationReason::Baseline => self.baseline_attempt,
            _ => self.stats.verifications,
        };
        let checks = checks
            .iter()
            .take(MAX_CHECKS)
            .map(|c| {
                digest_check(
                    &c.name,
                    c.exit_code,
                    c.passed,
                    c.failure.as_deref(),
                    &c.output,
                )
            })
            .collect();
        self.run_state.set_verification(VerificationDigest {
            attempt,
            reason,
            passed,
            checks,
        });
    }

    /// What failed, in a few words: check names and failing tests.
    pub(super) fn failing_summary(&self) -> String {
        let Some(v) = self.run_state.verification() else {
            return "no check output".into();
        };
        let parts: Vec<String> = v
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| {
                let exit = c.exit_code.map_or("none".into(), |e| e.to_string());
                let tests = c
                    .evidence
                    .failing_tests
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>();
                if tests.is_empty() {
                    format!("{} (exit {exit})", c.name)
                } else {
                    format!("{} (exit {exit}: {})", c.name, tests.join(", "))
                }
            })
            .collect();
        if parts.is_empty() {
            "no failing check reported".into()
        } else {
            parts.join("; ")
        }
    }
}

fn loaded(doc: &InstructionDoc) -> RunEvent {
    RunEvent::InstructionsLoaded {
        path: doc.path.clone(),
        bytes: doc.bytes,
        truncated: doc.truncated,
    }
}
