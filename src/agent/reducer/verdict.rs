//! Verification and what follows from it: the baseline's verdict (which
//! decides the rollback target), completions that pass or fail, repair
//! cycles, the rollback after the third failure, and the final verdict that
//! binds success to the workspace that was verified.

use super::{Agent, Baseline, CheckOutput, Effect, PatchFacts, ROLLBACK_AFTER_FAILURES};
use crate::agent::phase::Phase;
use crate::model::types::{ChatMessage, ToolCall};
use crate::protocol::{Outcome, VerificationReason};

impl Agent {
    /// The background baseline verification ended. A pass makes the baseline
    /// the validated state (unless a later one was validated already). A
    /// failed completion that waited for this verdict is now counted.
    pub(super) fn on_baseline(&mut self, passed: bool, fx: &mut Vec<Effect>) {
        if self.baseline != Baseline::Running {
            return;
        }
        self.baseline = if passed {
            Baseline::Passed
        } else {
            Baseline::Failed
        };
        if passed
            && self.validated.is_none()
            && let Some(id) = self.baseline_checkpoint.clone()
        {
            self.validated = Some(id.clone());
            self.failures_since_validated = 0;
            fx.push(Effect::MarkValidated { checkpoint: id });
        }
        if let Phase::AwaitingBaseline { call, feedback } = &self.phase {
            let (call, feedback) = (call.clone(), feedback.clone());
            self.completion_failed(call, feedback, fx);
        }
    }

    pub(super) fn on_verified(
        &mut self,
        reason: VerificationReason,
        passed: bool,
        fingerprint: String,
        feedback: String,
        checks: &[CheckOutput],
        fx: &mut Vec<Effect>,
    ) {
        let Phase::Verifying {
            reason: expected,
            call,
        } = &self.phase
        else {
            return;
        };
        if *expected != reason {
            return;
        }
        let call = call.clone();
        self.record_verification(reason, passed, checks);
        self.last_verdict = Some((passed, fingerprint));
        if !passed {
            // The agent will repair and ask again: have a fresh container ready.
            fx.push(Effect::PrewarmVerifier);
        }
        match (reason, call) {
            (VerificationReason::AfterRestore, _) => {
                let state = if passed { "passes" } else { "fails" };
                let found = if passed {
                    String::new()
                } else {
                    format!(" (failing: {})", self.failing_summary())
                };
                self.run_state.recovered(format!(
                    "after rollback {}, verification of the restored checkpoint {state}{found}",
                    self.stats.rollbacks
                ));
                self.context.history.push(ChatMessage::user(format!(
                    "After three failed completion verifications the workspace was restored to the last \
                     validated checkpoint; verification {state} there. Your changes since then are gone. \
                     Re-read the code, update the plan and try a different approach.\n{feedback}"
                )));
                self.next_turn(fx);
            }
            (VerificationReason::Completion, Some(call)) if passed => {
                if self.config.hooks.stop {
                    fx.push(Effect::StopHooks {
                        stop_hook_active: self.stop_hook_refused,
                    });
                    self.phase = Phase::AwaitingStopHooks { call };
                    return;
                }
                self.end_verified(&call, fx);
            }
            (VerificationReason::Completion, Some(call)) => {
                // Whether this failure counts against a validated state depends
                // on the baseline's verdict: wait for it if it is not in yet.
                if self.baseline == Baseline::Running {
                    self.phase = Phase::AwaitingBaseline { call, feedback };
                    fx.push(Effect::AwaitBaseline);
                } else {
                    self.completion_failed(call, feedback, fx);
                }
            }
            _ => self.next_turn(fx),
        }
    }

    /// A failed completion: another repair cycle, or after the third failure
    /// since a validated state, a rollback to it.
    pub(super) fn completion_failed(
        &mut self,
        call: ToolCall,
        feedback: String,
        fx: &mut Vec<Effect>,
    ) {
        let rollback = match &self.validated {
            Some(id) => {
                self.failures_since_validated += 1;
                (self.failures_since_validated >= ROLLBACK_AFTER_FAILURES).then(|| id.clone())
            }
            None => None,
        };
        let note = match (&rollback, &self.validated) {
            (Some(_), _) => "This was the third failed completion since the last validated state: \
                             the workspace is restored to it."
                .to_string(),
            (None, Some(_)) => format!(
                "Repair cycle {} of {}: fix the failures, then call request_completion again.",
                self.failures_since_validated,
                ROLLBACK_AFTER_FAILURES - 1
            ),
            (None, None) => "Fix the failures, then call request_completion again.".to_string(),
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
                self.run_state.recovered(format!(
                    "rollback {}: after {ROLLBACK_AFTER_FAILURES} failed completion verifications since the \
                     validated checkpoint {}, the workspace was restored to it and every change since was \
                     undone; failing then: {}",
                    self.stats.rollbacks,
                    id.chars().take(12).collect::<String>(),
                    self.failing_summary()
                ));
                self.failures_since_validated = 0;
                self.queue.clear();
                self.phase = Phase::Restoring {
                    checkpoint: id.clone(),
                };
                fx.push(Effect::Restore { checkpoint: id });
            }
            None => {
                self.phase = Phase::AwaitingModel;
                self.next_call(fx);
            }
        }
    }

    pub(super) fn on_restored(&mut self, id: String, fx: &mut Vec<Effect>) {
        self.validated = Some(id);
        self.stats.verifications += 1;
        self.phase = Phase::Verifying {
            reason: VerificationReason::AfterRestore,
            call: None,
        };
        fx.push(Effect::Verify {
            reason: VerificationReason::AfterRestore,
            attempt: self.stats.verifications,
        });
    }

    /// The final verdict: a success stands only if the patch was exported, it
    /// adds no credential, it leaves nothing of the workspace out, and the
    /// workspace is the one the verifier passed.
    pub(super) fn conclude(
        &mut self,
        outcome: Outcome,
        reason: String,
        facts: PatchFacts,
        fx: &mut Vec<Effect>,
    ) {
        let PatchFacts {
            fingerprint,
            credentials,
            left_out,
            too_large,
            export_error,
        } = facts;
        let (outcome, reason) = match (outcome, export_error) {
            (Outcome::Success, Some(e)) => (
                Outcome::Failure,
                format!("the patch could not be exported: {e}"),
            ),
            (Outcome::Success, None) if !credentials.is_empty() => (
                Outcome::Failure,
                format!(
                    "the patch would add a credential ({}); it is refused",
                    credentials.join(", ")
                ),
            ),
            (Outcome::Success, None) if !left_out.is_empty() => (
                Outcome::Failure,
                format!(
                    "the workspace holds credential files or paths git refuses, which a patch may not add or change ({}); they are left out of final.patch, so the verified state is not the patch",
                    left_out.join(", ")
                ),
            ),
            (Outcome::Success, None) if !too_large.is_empty() => (
                Outcome::Failure,
                format!(
                    "files over the per-file limit changed, which no patch can carry: {}; final.patch leaves them out, so the verified state is not the patch",
                    too_large.join(", ")
                ),
            ),
            (Outcome::Success, None)
                if self.last_verdict.as_ref() != Some(&(true, fingerprint.clone())) =>
            {
                (
                    Outcome::Failure,
                    "the workspace changed after the passing verification; a new pass is required"
                        .to_string(),
                )
            }
            (outcome, _) => (outcome, reason),
        };
        self.phase = Phase::Finished {
            outcome,
            reason: reason.clone(),
        };
        fx.push(Effect::End { outcome, reason });
    }
}

impl Agent {
    /// A verified completion ends the run.
    pub(super) fn end_verified(&mut self, call: &ToolCall, fx: &mut Vec<Effect>) {
        self.answer(
            call,
            true,
            "verification passed",
            "Verification passed.".into(),
            fx,
        );
        self.checkpoint("completion verified", true, fx);
        self.finish(Outcome::Success, "verification passed".into(), fx);
    }

    /// The `Stop` hooks' verdict on a verified completion: the first
    /// refusal sends the agent back to work with the reason; after that the
    /// hooks are told `stop_hook_active`, and the run ends whatever they say.
    pub(super) fn on_stop_hooks(
        &mut self,
        call: ToolCall,
        refused: Option<String>,
        fx: &mut Vec<Effect>,
    ) {
        match refused {
            Some(why) if !self.stop_hook_refused => {
                self.stop_hook_refused = true;
                self.answer(
                    &call,
                    false,
                    "a Stop hook refused the end",
                    format!(
                        "Verification passed, but a Stop hook refused the end of the run: {why}\n\
                         Deal with it, then request completion again."
                    ),
                    fx,
                );
                self.phase = Phase::AwaitingModel;
                self.next_call(fx);
            }
            _ => self.end_verified(&call, fx),
        }
    }
}
