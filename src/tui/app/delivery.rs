//! Delivering a run from the session: applying the reviewed patch (or a run
//! picked in the runs browser), undoing an apply, and the runs browser itself.
//!
//! Every choice is made here; the session loop performs the [`Op`]s (the
//! apply, the undo, listing and reading runs) off the UI thread and answers
//! with [`AppEvent`]s.

use crossterm::event::{KeyCode, KeyEvent};

use super::keys::scroll;
use super::{
    App, Applied, ApplyFailure, ApplyRequest, Browser, ChosenHunks, Delivery, DeliveryState, Op,
    OpenRun, Overlay, Pane, RunDetail, RunEntry, RunRef, Section, Undone, Verified,
};
use crate::tui::diff::DiffViewState;
use crate::tui::keymap::{Action, Context};
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

    fn request_undo(&mut self, run: RunRef, force: bool) {
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

    /// Enter in the review: every hunk chosen applies the verified patch as
    /// it is; some of them are a new patch, verified again first.
    pub(super) fn apply_review(&mut self) {
        let Some(review) = self.screen.review() else {
            return;
        };
        let (chosen, total) = review.selection.chosen();
        if chosen == 0 {
            self.flash = Some("no hunk is chosen: space chooses one, A all".into());
            return;
        }
        let subset = (chosen < total).then(|| ChosenHunks {
            numbers: review.selection.numbers(),
            of: total,
        });
        let request = ApplyRequest {
            run: review.run.clone(),
            subset,
            merge: false,
            unverified: false,
        };
        self.request_apply(request);
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

    /// The keys of the delivery screen: each result offers only what makes
    /// sense after it.
    pub(super) fn delivery_key(&mut self, key: &KeyEvent) {
        let Some(delivery) = self.deliveries.shown.clone() else {
            return;
        };
        let close = matches!(key.code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q'));
        match &delivery.state {
            DeliveryState::Applying { .. } | DeliveryState::Undoing { .. } => {
                self.popups.raise(Overlay::Delivery);
                self.effects.dirty = false;
            }
            DeliveryState::Applied(_) if key.code == KeyCode::Char('u') => {
                self.popups
                    .raise(Overlay::ConfirmUndo(delivery.run.clone()));
            }
            DeliveryState::ApplyFailed(failure)
                if failure.can_override() && key.code == KeyCode::Char('!') =>
            {
                self.popups.raise(Overlay::ConfirmUnverified);
            }
            DeliveryState::ApplyFailed(ApplyFailure::Overlap(_))
                if key.code == KeyCode::Char('m') =>
            {
                if let Some(request) = delivery.request.clone() {
                    self.request_apply(ApplyRequest {
                        merge: true,
                        ..request
                    });
                }
            }
            DeliveryState::Undone(undone)
                if !undone.skipped.is_empty() && key.code == KeyCode::Char('F') =>
            {
                self.popups
                    .raise(Overlay::ConfirmForceUndo(delivery.run.clone()));
            }
            _ if close => {
                self.deliveries.shown = None;
            }
            _ => {
                self.popups.raise(Overlay::Delivery);
                self.effects.dirty = false;
            }
        }
    }

    /// The explicit choice to apply what did not pass verification.
    pub(super) fn confirm_unverified_key(&mut self, key: &KeyEvent) {
        match key.code {
            KeyCode::Char('y') => {
                if let Some(request) = self
                    .deliveries
                    .shown
                    .as_ref()
                    .and_then(|d| d.request.clone())
                {
                    self.request_apply(ApplyRequest {
                        unverified: true,
                        ..request
                    });
                }
            }
            KeyCode::Char('n') | KeyCode::Esc => self.popups.raise(Overlay::Delivery),
            _ => self.popups.raise(Overlay::ConfirmUnverified),
        }
    }

    pub(super) fn confirm_undo_key(&mut self, run: RunRef, force: bool, key: &KeyEvent) {
        match key.code {
            KeyCode::Char('y') => self.request_undo(run, force),
            KeyCode::Char('n') | KeyCode::Esc => {
                if self.deliveries.shown.is_some() {
                    self.popups.raise(Overlay::Delivery);
                }
            }
            _ if force => self.popups.raise(Overlay::ConfirmForceUndo(run)),
            _ => self.popups.raise(Overlay::ConfirmUndo(run)),
        }
    }

    /// `u` outside the browser: the apply made in this session.
    pub(super) fn undo_last(&mut self) {
        match self.deliveries.applied_run.clone() {
            Some(run) => self.popups.raise(Overlay::ConfirmUndo(run)),
            None => {
                self.flash =
                    Some("nothing was applied in this session: Ctrl-R lists the runs".into())
            }
        }
    }

    /// Opens the runs browser and asks for the list.
    pub(crate) fn open_browser(&mut self) {
        self.screen.open_runs(Browser {
            loading: true,
            ..Browser::default()
        });
        self.effects.ops.push(Op::ListRuns);
    }

    fn refresh_browser(&mut self) {
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

    /// Keys while the browser is open: the opened run's, else the list's.
    pub(super) fn browser_key(&mut self, key: &KeyEvent) {
        let opened = self.screen.browser().is_some_and(|b| b.open.is_some());
        let context = if opened { Context::Show } else { Context::Runs };
        let Some(action) = self.settings.keymap.lookup(context, key) else {
            self.effects.dirty = false;
            return;
        };
        match action {
            Action::Help => self.popups.raise(Overlay::Help(context, 0)),
            Action::Quit => self.act(Action::Quit),
            Action::ListRuns => self.refresh_browser(),
            Action::Apply => self.apply_from_browser(),
            Action::Undo => self.undo_from_browser(),
            Action::Resume => self.resume_from_browser(),
            _ if opened => self.show_action(action),
            _ => self.list_action(action),
        }
    }

    fn list_action(&mut self, action: Action) {
        let Some(browser) = self.screen.browser_mut() else {
            return;
        };
        match action {
            Action::Dismiss => self.screen.close_runs(),
            Action::Open => match browser.selected() {
                Some(entry) => {
                    let dir = entry.dir.clone();
                    browser.loading = true;
                    self.effects.ops.push(Op::OpenRun { dir });
                }
                None => self.effects.dirty = false,
            },
            other => scroll(&mut browser.selected, browser.runs.len(), other, 10),
        }
    }

    fn show_action(&mut self, action: Action) {
        let Some(open) = self.screen.browser_mut().and_then(|b| b.open.as_mut()) else {
            return;
        };
        let model = &open.detail.patch;
        let state = &mut open.diff_state;
        match (open.section, action) {
            (_, Action::Dismiss) => {
                if let Some(browser) = self.screen.browser_mut() {
                    browser.open = None;
                }
            }
            (_, Action::FocusNext) => {
                open.section = open.section.next();
                open.scroll = 0;
            }
            (Section::Diff, Action::NextHunk) => state.next_hunk(model),
            (Section::Diff, Action::PrevHunk) => state.prev_hunk(model),
            (Section::Diff, Action::NextFile) => state.next_file(model),
            (Section::Diff, Action::PrevFile) => state.prev_file(model),
            (Section::Diff, Action::ScrollDown) => state.scroll_by(model, 1),
            (Section::Diff, Action::ScrollUp) => state.scroll_by(model, -1),
            (Section::Diff, Action::PageDown) => state.page(model, 1),
            (Section::Diff, Action::PageUp) => state.page(model, -1),
            (Section::Diff, Action::Top) => state.top(model),
            (Section::Diff, Action::Bottom) => state.bottom(model),
            (Section::Diff, Action::ScrollLeft) => state.scroll_horizontally(-8),
            (Section::Diff, Action::ScrollRight) => state.scroll_horizontally(8),
            (Section::Verification, other) => {
                let len = open.detail.checks.len();
                scroll(&mut open.scroll, len, other, 10);
            }
            (Section::Events, other) => {
                let len = open.detail.events.len();
                scroll(&mut open.scroll, len, other, 10);
            }
            _ => self.effects.dirty = false,
        }
    }

    /// The run the browser points at: the opened one, else the selected one.
    fn browser_run(&self) -> Option<&RunEntry> {
        let browser = self.screen.browser()?;
        match &browser.open {
            Some(open) => Some(&open.detail.entry),
            None => browser.selected(),
        }
    }

    fn apply_from_browser(&mut self) {
        let Some(entry) = self.browser_run().cloned() else {
            self.effects.dirty = false;
            return;
        };
        if entry.applied {
            self.flash = Some(format!("run {} is applied already: u undoes it", entry.id));
            return;
        }
        if entry.verified.is_none() {
            self.flash = Some(format!(
                "run {} has not ended: there is no patch to apply",
                entry.id
            ));
            return;
        }
        self.request_apply(ApplyRequest {
            run: RunRef::of(&entry),
            subset: None,
            merge: false,
            unverified: false,
        });
    }

    /// A run that stopped before it ended well goes on; a success or an
    /// applied run does not (a follow-up is typed to a new run).
    fn resume_from_browser(&mut self) {
        let Some(entry) = self.browser_run().cloned() else {
            self.effects.dirty = false;
            return;
        };
        if !matches!(
            entry.outcome.as_str(),
            "interrupted" | "cancelled" | "failure"
        ) {
            self.flash = Some(format!(
                "run {} is {}: there is nothing to resume",
                entry.id, entry.outcome
            ));
            return;
        }
        if entry.applied {
            self.flash = Some(format!("run {} is applied: u undoes it first", entry.id));
            return;
        }
        self.screen.close_runs();
        self.resume(&entry.id, &entry.task);
    }

    fn undo_from_browser(&mut self) {
        let Some(entry) = self.browser_run().cloned() else {
            self.effects.dirty = false;
            return;
        };
        if entry.applied {
            self.popups.raise(Overlay::ConfirmUndo(RunRef::of(&entry)));
        } else {
            self.flash = Some(format!("run {} is not applied: nothing to undo", entry.id));
        }
    }
}
