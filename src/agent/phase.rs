//! The agent's phases: what it is waiting for at each moment. The reducer
//! matches on the phase and the input together, so an input that does not
//! belong to the phase (a late answer, a stray result) is never mistaken for
//! one that does.

use serde::{Deserialize, Serialize};

use crate::model::types::ToolCall;
use crate::protocol::{Outcome, VerificationReason};

/// An edit waiting for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    pub id: String,
    pub call: ToolCall,
    /// The file to edit; for an MCP server's tool, its name.
    pub path: String,
    /// The edit's patch; for an MCP server's tool, its arguments.
    pub patch: String,
    /// A tool call to be allowed rather than an edit.
    #[serde(default)]
    pub call_approval: Option<crate::protocol::CallApproval>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Set up; waiting for `Start`.
    Ready,
    /// The bootstrap commands run.
    Bootstrapping,
    /// A model request is in flight.
    AwaitingModel,
    /// The person's `PreToolUse` hooks judge a call before it runs.
    AwaitingHooks { call: ToolCall },
    /// A tool call is in flight (for `edit_file`: its patch is being checked).
    AwaitingTool { call: ToolCall },
    /// An edit waits for the person's answer.
    AwaitingApproval { approval: PendingApproval },
    /// An edit (approved where needed) is being applied.
    ApplyingEdit { call: ToolCall },
    /// A verification runs; for a completion, `call` is request_completion's.
    Verifying {
        reason: VerificationReason,
        call: Option<ToolCall>,
    },
    /// A verified completion waits for the person's `Stop` hooks.
    AwaitingStopHooks { call: ToolCall },
    /// The context is about to be compacted: the person's `PreCompact`
    /// hooks run first.
    AwaitingCompactHooks,
    /// A failed completion waits for the baseline's verdict, which decides
    /// whether it counts against a validated state.
    AwaitingBaseline { call: ToolCall, feedback: String },
    /// The validated checkpoint is being restored.
    Restoring { checkpoint: String },
    /// The outcome is decided; the patch is being exported.
    Concluding { outcome: Outcome, reason: String },
    /// The outcome is final.
    Finished { outcome: Outcome, reason: String },
}

impl Phase {
    /// The approval being waited for, if any.
    pub(crate) fn pending_approval(&self) -> Option<&PendingApproval> {
        match self {
            Phase::AwaitingApproval { approval } => Some(approval),
            _ => None,
        }
    }

    /// Whether the agent has decided its outcome (it may still be concluding).
    pub(crate) fn is_decided(&self) -> bool {
        matches!(self, Phase::Concluding { .. } | Phase::Finished { .. })
    }

    /// A short name, for messages about inputs that arrive out of place.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Ready => "ready",
            Phase::Bootstrapping => "bootstrapping",
            Phase::AwaitingModel => "awaiting the model",
            Phase::AwaitingHooks { .. } => "running hooks",
            Phase::AwaitingTool { .. } => "running a tool",
            Phase::AwaitingApproval { .. } => "awaiting approval",
            Phase::ApplyingEdit { .. } => "applying an edit",
            Phase::Verifying { .. } => "verifying",
            Phase::AwaitingStopHooks { .. } => "running stop hooks",
            Phase::AwaitingCompactHooks => "running compaction hooks",
            Phase::AwaitingBaseline { .. } => "awaiting the baseline verdict",
            Phase::Restoring { .. } => "restoring",
            Phase::Concluding { .. } => "concluding",
            Phase::Finished { .. } => "finished",
        }
    }
}
