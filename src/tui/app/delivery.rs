//! Delivering a run from the session: applying the reviewed patch (or a run
//! picked in the runs browser), undoing an apply, and the runs browser itself.
//!
//! What a key asks is decided in [`super::reduce`]; here the requests are
//! made and their results shown. The session loop performs the [`Op`]s (the
//! apply, the undo, listing and reading runs) off the UI thread and answers
//! with [`AppEvent`]s.

use super::{
    App, Applied, ApplyFailure, ApplyRequest, Browser, Delivery, DeliveryState, Op, OpenRun,
    Overlay, Pane, RunDetail, RunEntry, RunRef, Section, Undone, Verified,
};
use crate::tui::diff::DiffViewState;
use crate::tui::run_view::NoteKind;

impl App {
    /// Sends an apply and shows it going.
    pub(crate) fn request_apply(&mut self, request: ApplyRequest) {
        if self.deliveries.is_working() {
            self.flash = Some("an apply or undo is going: wait for it".into());
            return;
        }
        self.deliveries.shown = Some(Delivery {
            run: request.run.clone(),
            request: Some(request.clone()),
            state: DeliveryState::Applying { progress: None },
        });
        self.effects.ops.push(Op::Apply(request));
        self.popups.raise(Overlay::Delivery);
    }

    pub(super) fn request_undo(&mut self, run: RunRef, force: bool) {
        if self.deliveries.is_working() {
            self.flash = Some("an apply or undo is going: wait for it".into());
            return;
        }
        self.deliveries.shown = Some(Delivery {
            run: run.clone(),
            request: None,
            state: DeliveryState::Undoing { force },
        });
        self.effects.ops.push(Op::Undo { run, force });
        self.popups.raise(Overlay::Delivery);
    }

    pub(super) fn delivery_progress(&mut self, line: String) {
        if let Some(Delivery {
            state: DeliveryState::Applying { progress },
            ..
        }) = self.deliveries.shown.as_mut()
        {
            *progress = Some(line);
        } else {
            self.effects.dirty = false;
        }
    }

    pub(super) fn applied(&mut self, result: Result<Applied, ApplyFailure>) {
        let Some(delivery) = self.deliveries.shown.as_mut() else {
            return;
        };
        let run = delivery.run.clone();
        match result {
            Ok(applied) => {
                let how = match &applied.verified {
                    Verified::Run => "verified",
                    Verified::Subset(_) => "the chosen hunks, verified again",
                    Verified::Unverified(_) => "unverified, as chosen",
                };
                self.view.note(
                    NoteKind::Info,
                    format!(
                        "applied run {} ({how}): {} file(s); u undoes it",
                        run.id,
                        applied.changes.len()
                    ),
                );
                delivery.state = DeliveryState::Applied(applied);
                self.deliveries.applied_run = Some(run.clone());
                // Delivered: the review has nothing left to decide.
                if self.screen.review().is_some_and(|r| r.run.id == run.id) {
                    self.screen.close_review();
                    self.panes.focus = Pane::Stream;
                }
            }
            Err(failure) => {
                self.view
                    .note(NoteKind::Warning, format!("run {} not applied", run.id));
                delivery.state = DeliveryState::ApplyFailed(failure);
            }
        }
        self.popups.raise(Overlay::Delivery);
        self.refresh_browser();
    }

    pub(super) fn undone(&mut self, result: Result<Undone, String>) {
        let Some(delivery) = self.deliveries.shown.as_mut() else {
            return;
        };
        let run = delivery.run.clone();
        match result {
            Ok(undone) => {
                let kind = if undone.skipped.is_empty() {
                    NoteKind::Info
                } else {
                    NoteKind::Warning
                };
                self.view.note(
                    kind,
                    format!(
                        "undid run {}: {} restored, {} left as changed since",
                        run.id,
                        undone.restored.len(),
                        undone.skipped.len()
                    ),
                );
                if undone.skipped.is_empty()
                    && self
                        .deliveries
                        .applied_run
                        .as_ref()
                        .is_some_and(|r| r.id == run.id)
                {
                    self.deliveries.applied_run = None;
                }
                delivery.state = DeliveryState::Undone(undone);
            }
            Err(why) => delivery.state = DeliveryState::UndoFailed(why),
        }
        self.popups.raise(Overlay::Delivery);
        self.refresh_browser();
    }

    /// Opens the runs browser and asks for the list.
    pub(crate) fn open_browser(&mut self) {
        self.screen.open_runs(Browser {
            loading: true,
            ..Browser::default()
        });
        self.effects.ops.push(Op::ListRuns);
    }

    pub(super) fn refresh_browser(&mut self) {
        if let Some(browser) = self.screen.browser_mut() {
            browser.loading = true;
            self.effects.ops.push(Op::ListRuns);
        }
    }

    pub(super) fn runs_listed(&mut self, result: Result<Vec<RunEntry>, String>) {
        let Some(browser) = self.screen.browser_mut() else {
            self.effects.dirty = false;
            return;
        };
        browser.loading = false;
        match result {
            Ok(runs) => {
                // The selection follows its run when the list changes under it.
                let keep = browser.selected().map(|r| r.id.clone());
                browser.selected = keep
                    .and_then(|id| runs.iter().position(|r| r.id == id))
                    .unwrap_or(0);
                if let Some(open) = browser.open.as_mut()
                    && let Some(entry) = runs.iter().find(|r| r.id == open.detail.entry.id)
                {
                    open.detail.entry = entry.clone();
                }
                browser.runs = runs;
                browser.error = None;
            }
            Err(e) => browser.error = Some(e),
        }
    }

    pub(super) fn run_opened(&mut self, result: Result<Box<RunDetail>, String>) {
        let Some(browser) = self.screen.browser_mut() else {
            self.effects.dirty = false;
            return;
        };
        browser.loading = false;
        match result {
            Ok(detail) => {
                browser.open = Some(OpenRun {
                    detail: *detail,
                    diff_state: DiffViewState::default(),
                    section: Section::Diff,
                    scroll: 0,
                });
                browser.error = None;
            }
            Err(e) => browser.error = Some(e),
        }
    }
}
