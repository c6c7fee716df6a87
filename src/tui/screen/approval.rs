//! Edits the run asked to approve: the one on screen, and those behind it.

use std::collections::VecDeque;

use ratatui_textarea::TextArea;

use crate::tui::diff::DiffModel;

/// What the run asked in `approval.requested`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub id: String,
    pub call_id: String,
    pub path: String,
    pub patch: String,
    /// A tool call to allow (`path` its tool, `patch` its arguments), not
    /// an edit.
    pub call: Option<crate::protocol::CallApproval>,
}

/// An edit waiting for `y`/`n`/`a`.
#[derive(Debug)]
pub struct PendingApproval {
    pub request: ApprovalRequest,
    pub patch: DiffModel,
    pub scroll: usize,
    /// Shown, or hidden with Esc to look around first.
    pub visible: bool,
    /// Typing the reason for a refusal.
    pub reason: Option<TextArea<'static>>,
}

/// The edit asked about now, and the ones asked after it, oldest first.
#[derive(Debug, Default)]
pub struct Approvals {
    pub shown: Option<PendingApproval>,
    pub queue: VecDeque<ApprovalRequest>,
}

impl Approvals {
    /// The modal is up (not hidden to look around).
    pub fn is_visible(&self) -> bool {
        self.shown.as_ref().is_some_and(|a| a.visible)
    }

    /// Typing the reason of a refusal: keys are text, not commands.
    pub fn typing_reason(&self) -> bool {
        self.shown
            .as_ref()
            .is_some_and(|a| a.visible && a.reason.is_some())
    }
}
