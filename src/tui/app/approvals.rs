//! The edits the run asks to approve: queued as they come, one on screen,
//! answered with an op, and refused at once when nobody is left to answer.

use super::{App, ApprovalRequest, Op, PendingApproval};
use crate::protocol::ApprovalDecision;
use crate::tui::diff::DiffModel;
use crate::tui::run_view::NoteKind;

impl App {
    /// Stops the run; edits still waiting for an answer are refused now, since
    /// nobody will answer them.
    pub(crate) fn cancel_run(&mut self) {
        self.effects.ops.push(Op::Cancel);
        self.run.cancelling = true;
        self.refuse_pending("the run was cancelled");
    }

    pub(super) fn approval_requested(&mut self, request: ApprovalRequest) {
        if self.run.cancelling {
            // Asked in the moment between the cancel and the run noticing it.
            self.answer(
                request.id,
                ApprovalDecision::Refuse(Some("the run was cancelled".into())),
            );
        } else {
            self.approvals.queue.push_back(request);
            self.next_approval();
        }
    }

    /// An approval the run resolved without this screen's answer (nobody
    /// answered in time, the run ended) is taken off the screen instead of
    /// inviting a `y` that would mean nothing.
    pub(super) fn approval_resolved(&mut self, id: &str, reason: Option<&str>) {
        self.approvals.queue.retain(|r| r.id != id);
        if self
            .approvals
            .shown
            .as_ref()
            .is_some_and(|a| a.request.id == id)
            && let Some(pending) = self.approvals.shown.take()
        {
            self.view.note(
                NoteKind::Warning,
                format!(
                    "the edit of {} was refused: {}",
                    pending.request.path,
                    reason.unwrap_or("nobody answered in time")
                ),
            );
            self.next_approval();
        }
    }

    fn answer(&mut self, id: String, decision: ApprovalDecision) {
        self.effects.ops.push(Op::Answer { id, decision });
    }

    pub(super) fn refuse_pending(&mut self, why: &str) {
        let pending = self.approvals.shown.take().map(|a| a.request);
        let queued: Vec<ApprovalRequest> = self.approvals.queue.drain(..).collect();
        for request in pending.into_iter().chain(queued) {
            self.answer(request.id, ApprovalDecision::Refuse(Some(why.to_string())));
        }
    }

    /// Shows the next queued approval, if none is shown.
    fn next_approval(&mut self) {
        if self.approvals.shown.is_some() {
            return;
        }
        if let Some(request) = self.approvals.queue.pop_front() {
            let patch = DiffModel::parse(&request.patch);
            self.approvals.shown = Some(PendingApproval {
                request,
                patch,
                scroll: 0,
                visible: true,
                reason: None,
            });
        }
    }

    /// Answers the approval on screen. An answer the run no longer waits for
    /// comes back as `command.rejected` ("too late: ...").
    pub(super) fn answer_approval(&mut self, decision: ApprovalDecision) {
        if let Some(pending) = self.approvals.shown.take() {
            self.answer(pending.request.id, decision.clone());
        }
        if decision == ApprovalDecision::ApproveAll {
            // Everything already queued is part of "the rest of the run".
            while let Some(request) = self.approvals.queue.pop_front() {
                self.answer(request.id, ApprovalDecision::Approve);
            }
        }
        self.next_approval();
    }
}
