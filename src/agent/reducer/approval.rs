//! Edits before they touch the workspace: the credential refusals, asking a
//! person (`--approval each`), and every way an answer can arrive — in time,
//! approving the rest of the run, late, twice, never, or with nobody left to
//! give one. Only an answer to the edit being waited for applies it.

use super::{Agent, Effect};
use crate::agent::phase::{PendingApproval, Phase};
use crate::model::types::ToolCall;
use crate::protocol::{ApprovalDecision, ApprovalMode, CallApproval, RunEvent};

impl Agent {
    /// `edit_file`'s patch fits: refuse it, ask for it, or apply it.
    pub(super) fn on_edit_prepared(
        &mut self,
        call: ToolCall,
        path: String,
        patch: String,
        credentials: Vec<String>,
        credential_file: bool,
        fx: &mut Vec<Effect>,
    ) {
        if credential_file {
            return self.refuse_edit(
                &call,
                "refused: credential file",
                format!(
                    "Refused: `{path}` is a credential file, which minicoder keeps out of the workspace and out of every \
                     patch. Read secrets from the environment or a file the user provides instead."
                ),
                fx,
            );
        }
        if !credentials.is_empty() {
            return self.refuse_edit(
                &call,
                "refused: credential",
                format!(
                    "Refused: this patch would add a credential ({}). Keep secrets out of the code; read them from \
                     the environment or a configuration file the user provides.",
                    credentials.join(", ")
                ),
                fx,
            );
        }
        if self.config.approval == ApprovalMode::Each && !self.approve_all {
            self.approvals_asked += 1;
            let approval = PendingApproval {
                id: format!("approval-{}", self.approvals_asked),
                call,
                path,
                patch,
                call_approval: None,
            };
            fx.push(Effect::Emit(RunEvent::ApprovalRequested {
                id: approval.id.clone(),
                call_id: approval.call.id.clone(),
                path: approval.path.clone(),
                patch: approval.patch.clone(),
                call: None,
            }));
            fx.push(Effect::AwaitApproval {
                id: approval.id.clone(),
                timeout_ms: self.config.approval_timeout_ms,
            });
            self.phase = Phase::AwaitingApproval { approval };
            return;
        }
        self.apply(call, path, patch, fx);
    }

    /// Whether an MCP server's tool runs without asking.
    pub(super) fn external_allowed(&self, tool: &str) -> bool {
        self.config.external.allowed.iter().any(|t| t == tool)
            || self.external_approved.iter().any(|t| t == tool)
    }

    /// Asks the person whether `call` may run: a tool of an MCP server
    /// (outside the sandbox, as them), or one a `PreToolUse` hook wants
    /// them to confirm. With nobody to ask, the call is refused.
    pub(super) fn ask_call(&mut self, call: ToolCall, why: CallApproval, fx: &mut Vec<Effect>) {
        if !self.config.external.can_ask {
            let text = match (&why.reason, why.outside_sandbox) {
                (Some(reason), _) => format!(
                    "Refused: a PreToolUse hook asks for the person's confirmation of this call ({reason}), \
                     and nobody can be asked in this run."
                ),
                (None, _) => format!(
                    "Refused: {} is a tool of an MCP server outside the sandbox, and only tools the person \
                     allow-listed run when nobody can be asked. Do without it.",
                    call.name
                ),
            };
            self.answer(&call, false, "refused: nobody to ask", text, fx);
            return self.next_call(fx);
        }
        self.approvals_asked += 1;
        let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .and_then(|v| serde_json::to_string_pretty(&v))
            .unwrap_or_else(|_| call.arguments.clone());
        let approval = PendingApproval {
            id: format!("approval-{}", self.approvals_asked),
            path: call.name.clone(),
            patch: arguments,
            call_approval: Some(why),
            call,
        };
        fx.push(Effect::Emit(RunEvent::ApprovalRequested {
            id: approval.id.clone(),
            call_id: approval.call.id.clone(),
            path: approval.path.clone(),
            patch: approval.patch.clone(),
            call: approval.call_approval.clone(),
        }));
        fx.push(Effect::AwaitApproval {
            id: approval.id.clone(),
            timeout_ms: self.config.approval_timeout_ms,
        });
        self.phase = Phase::AwaitingApproval { approval };
    }

    fn apply(&mut self, call: ToolCall, path: String, patch: String, fx: &mut Vec<Effect>) {
        self.phase = Phase::ApplyingEdit { call: call.clone() };
        fx.push(Effect::ApplyEdit { call, path, patch });
    }

    /// A person's answer. It counts only for the edit being waited for; any
    /// other (late, repeated, unknown) is rejected and changes nothing.
    pub(super) fn on_approval(
        &mut self,
        id: String,
        decision: ApprovalDecision,
        fx: &mut Vec<Effect>,
    ) {
        let pending = match self.phase.pending_approval() {
            Some(p) if p.id == id => p.clone(),
            _ => {
                fx.push(Effect::Emit(RunEvent::CommandRejected {
                    command: "approval".into(),
                    reason: format!(
                        "too late: {id} is not waiting for an answer (it was already resolved, or never asked)"
                    ),
                }));
                return;
            }
        };
        let (approved, reason) = match &decision {
            ApprovalDecision::Approve => (true, None),
            ApprovalDecision::ApproveAll => {
                (true, Some("approved for the rest of the run".to_string()))
            }
            ApprovalDecision::Refuse(reason) => (false, reason.clone()),
        };
        fx.push(Effect::Emit(RunEvent::ApprovalResolved {
            id,
            approved,
            reason: reason.clone(),
        }));
        if let Some(why) = &pending.call_approval {
            return self.on_call_answer(pending.call, why.outside_sandbox, &decision, reason, fx);
        }
        if decision == ApprovalDecision::ApproveAll {
            self.approve_all = true;
        }
        if approved {
            return self.apply(pending.call, pending.path, pending.patch, fx);
        }
        let why = reason
            .map(|r| format!(" Their reason: {r}"))
            .unwrap_or_default();
        self.refuse_edit(
            &pending.call,
            "refused by the person",
            format!(
                "The person reviewing your edits refused this patch to {}; the file is unchanged.{why} \
                 Take this into account and propose a different change.",
                pending.path
            ),
            fx,
        );
    }

    /// The person's answer about a call: run it (and, for an MCP server's
    /// tool approved for "the rest of the run", every later call of that
    /// tool), or tell the model no.
    fn on_call_answer(
        &mut self,
        call: ToolCall,
        outside_sandbox: bool,
        decision: &ApprovalDecision,
        reason: Option<String>,
        fx: &mut Vec<Effect>,
    ) {
        if let ApprovalDecision::Refuse(_) = decision {
            let why = reason
                .map(|r| format!(" Their reason: {r}"))
                .unwrap_or_default();
            self.phase = Phase::AwaitingModel;
            self.answer(
                &call,
                false,
                "refused by the person",
                format!(
                    "The person refused this call to {}.{why} Do without it.",
                    call.name
                ),
                fx,
            );
            return self.next_call(fx);
        }
        if *decision == ApprovalDecision::ApproveAll && outside_sandbox {
            self.external_approved.push(call.name.clone());
        }
        self.run_call(call, fx);
    }

    /// Nobody answered in time: a refusal, never a yes.
    pub(super) fn on_approval_timeout(&mut self, id: String, fx: &mut Vec<Effect>) {
        if self.phase.pending_approval().is_some_and(|p| p.id == id) {
            let minutes = self.config.approval_timeout_ms / 60_000;
            self.on_approval(
                id,
                ApprovalDecision::Refuse(Some(format!("no answer within {minutes} minutes"))),
                fx,
            );
        }
    }

    /// The front end is gone: nobody can answer what is pending.
    pub(super) fn on_commands_closed(&mut self, fx: &mut Vec<Effect>) {
        if let Some(pending) = self.phase.pending_approval() {
            let id = pending.id.clone();
            self.on_approval(
                id,
                ApprovalDecision::Refuse(Some(
                    "edits need approval and no one is there to approve them".into(),
                )),
                fx,
            );
        }
    }

    fn refuse_edit(
        &mut self,
        call: &ToolCall,
        summary: &str,
        content: String,
        fx: &mut Vec<Effect>,
    ) {
        self.answer(call, false, summary, content, fx);
        self.phase = Phase::AwaitingModel;
        self.next_call(fx);
    }
}
