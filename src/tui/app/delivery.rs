//! Delivering a run from the session: applying the reviewed patch (or a run
//! picked in the runs browser), undoing an apply, and the runs browser itself.
//!
//! Every choice is made here; the session loop performs the [`Op`]s (the
//! apply, the undo, listing and reading runs) off the UI thread and answers
//! with [`AppEvent`]s.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent};

use super::keys::scroll;
use super::{App, Op, Overlay, Pane};
use crate::protocol::CheckReport;
use crate::tui::diff::{DiffModel, DiffViewState};
use crate::tui::keymap::{Action, Context};
use crate::tui::run_view::NoteKind;

/// One run of this repository, as the runs browser lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEntry {
    pub id: String,
    /// The run's artifact directory.
    pub dir: String,
    /// `45s`, `12m`, `3h`, `5d`.
    pub age: String,
    pub task: String,
    /// `success`, `failure`, `cancelled`, `running` or `interrupted`.
    pub outcome: String,
    /// Whether the final verification passed (`None`: no report).
    pub verified: Option<bool>,
    pub applied: bool,
    pub changed_files: Vec<String>,
}

/// A run opened in the browser: its diff, verification matrix and events.
#[derive(Debug, Clone)]
pub struct RunDetail {
    pub entry: RunEntry,
    pub reason: String,
    pub summary: Option<String>,
    pub patch: Arc<DiffModel>,
    pub checks: Vec<CheckReport>,
    /// One line per event, made safe to draw.
    pub events: Vec<String>,
    /// Earlier events not read (the log is read from its end, bounded).
    pub events_skipped: usize,
}

/// What the opened run shows: one section at a time, Tab moves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Diff,
    Verification,
    Events,
}

impl Section {
    pub fn title(self) -> &'static str {
        match self {
            Section::Diff => "Diff",
            Section::Verification => "Verification",
            Section::Events => "Events",
        }
    }

    fn next(self) -> Section {
        match self {
            Section::Diff => Section::Verification,
            Section::Verification => Section::Events,
            Section::Events => Section::Diff,
        }
    }
}

/// A run opened from the list.
#[derive(Debug)]
pub struct OpenRun {
    pub detail: RunDetail,
    pub diff_state: DiffViewState,
    pub section: Section,
    /// The scroll of the verification and events sections.
    pub scroll: usize,
}

/// The runs of this repository, newest first.
#[derive(Debug, Default)]
pub struct Browser {
    pub runs: Vec<RunEntry>,
    pub selected: usize,
    /// A list or a run is being read.
    pub loading: bool,
    pub error: Option<String>,
    pub open: Option<OpenRun>,
}

impl Browser {
    fn selected(&self) -> Option<&RunEntry> {
        self.runs.get(self.selected)
    }
}

/// Which run an apply or undo acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    pub id: String,
    /// The run's artifact directory.
    pub dir: String,
    pub task: String,
}

impl RunRef {
    fn of(entry: &RunEntry) -> RunRef {
        RunRef {
            id: entry.id.clone(),
            dir: entry.dir.clone(),
            task: entry.task.clone(),
        }
    }
}

/// An apply for the session loop to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyRequest {
    pub run: RunRef,
    /// The chosen hunks, when they are not the whole patch: they were not
    /// what was verified, so they are verified again before they are written.
    pub subset: Option<String>,
    /// Merge three ways where the source changed since the run's baseline.
    pub merge: bool,
    /// Apply what did not pass verification: only on the person's explicit choice.
    pub unverified: bool,
}

/// One check of a subset's verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// What the applied patch was verified as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// The run's verified patch, whole.
    Run,
    /// The chosen hunks passed the run's checks again.
    Subset(Vec<CheckLine>),
    /// Applied although it did not pass (or was not) verified, as chosen.
    Unverified(Vec<CheckLine>),
}

/// A finished apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// `(letter, path)`: A, M, D, R, C.
    pub changes: Vec<(char, String)>,
    /// Paths merged three ways with the person's edits.
    pub merged: Vec<String>,
    pub verified: Verified,
}

/// Why nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyFailure {
    /// The chosen hunks did not pass the checks, or could not be verified.
    SubsetFailed {
        why: String,
        checks: Vec<CheckLine>,
    },
    /// The run itself did not pass verification.
    Unverified(String),
    /// The source changed where the patch changes it, in these paths.
    Overlap(Vec<String>),
    /// These files do not merge cleanly.
    Unmerged(Vec<String>),
    Other(String),
}

impl ApplyFailure {
    /// Whether applying anyway is a choice to offer.
    fn can_override(&self) -> bool {
        matches!(
            self,
            ApplyFailure::SubsetFailed { .. } | ApplyFailure::Unverified(_)
        )
    }
}

/// A finished undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// `restored PATH` or `removed PATH`.
    pub restored: Vec<String>,
    /// Changed since the apply, left as they are.
    pub skipped: Vec<String>,
}

/// An apply or undo on screen: going, or its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryState {
    Applying { progress: Option<String> },
    Applied(Applied),
    ApplyFailed(ApplyFailure),
    Undoing { force: bool },
    Undone(Undone),
    UndoFailed(String),
}

/// The apply or undo the delivery screen shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub run: RunRef,
    /// The apply that led here, to try again with `--merge` or unverified.
    pub request: Option<ApplyRequest>,
    pub state: DeliveryState,
}

impl Delivery {
    pub fn is_working(&self) -> bool {
        matches!(
            self.state,
            DeliveryState::Applying { .. } | DeliveryState::Undoing { .. }
        )
    }
}

impl App {
    /// Sends an apply and shows it going.
    pub(crate) fn request_apply(&mut self, request: ApplyRequest) {
        if self.delivery.as_ref().is_some_and(Delivery::is_working) {
            self.flash = Some("an apply or undo is going: wait for it".into());
            return;
        }
        self.delivery = Some(Delivery {
            run: request.run.clone(),
            request: Some(request.clone()),
            state: DeliveryState::Applying { progress: None },
        });
        self.ops.push(Op::Apply(request));
        self.overlay = Some(Overlay::Delivery);
    }

    fn request_undo(&mut self, run: RunRef, force: bool) {
        if self.delivery.as_ref().is_some_and(Delivery::is_working) {
            self.flash = Some("an apply or undo is going: wait for it".into());
            return;
        }
        self.delivery = Some(Delivery {
            run: run.clone(),
            request: None,
            state: DeliveryState::Undoing { force },
        });
        self.ops.push(Op::Undo { run, force });
        self.overlay = Some(Overlay::Delivery);
    }

    /// Enter in the review: every hunk chosen applies the verified patch as
    /// it is; some of them are a new patch, verified again first.
    pub(super) fn apply_review(&mut self) {
        let Some(review) = self.review.as_ref() else {
            return;
        };
        let (chosen, total) = review.selection.chosen();
        if chosen == 0 {
            self.flash = Some("no hunk is chosen: space chooses one, A all".into());
            return;
        }
        let subset = (chosen < total).then(|| review.selection.selected_patch(&review.model));
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
        }) = self.delivery.as_mut()
        {
            *progress = Some(line);
        } else {
            self.dirty = false;
        }
    }

    pub(super) fn applied(&mut self, result: Result<Applied, ApplyFailure>) {
        let Some(delivery) = self.delivery.as_mut() else {
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
                self.applied_run = Some(run.clone());
                // Delivered: the review has nothing left to decide.
                if self.review.as_ref().is_some_and(|r| r.run.id == run.id) {
                    self.review = None;
                    self.focus = Pane::Stream;
                }
            }
            Err(failure) => {
                self.view
                    .note(NoteKind::Warning, format!("run {} not applied", run.id));
                delivery.state = DeliveryState::ApplyFailed(failure);
            }
        }
        self.overlay = Some(Overlay::Delivery);
        self.refresh_browser();
    }

    pub(super) fn undone(&mut self, result: Result<Undone, String>) {
        let Some(delivery) = self.delivery.as_mut() else {
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
                    && self.applied_run.as_ref().is_some_and(|r| r.id == run.id)
                {
                    self.applied_run = None;
                }
                delivery.state = DeliveryState::Undone(undone);
            }
            Err(why) => delivery.state = DeliveryState::UndoFailed(why),
        }
        self.overlay = Some(Overlay::Delivery);
        self.refresh_browser();
    }

    /// The keys of the delivery screen: each result offers only what makes
    /// sense after it.
    pub(super) fn delivery_key(&mut self, key: &KeyEvent) {
        let Some(delivery) = self.delivery.clone() else {
            return;
        };
        let close = matches!(key.code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q'));
        match &delivery.state {
            DeliveryState::Applying { .. } | DeliveryState::Undoing { .. } => {
                self.overlay = Some(Overlay::Delivery);
                self.dirty = false;
            }
            DeliveryState::Applied(_) if key.code == KeyCode::Char('u') => {
                self.overlay = Some(Overlay::ConfirmUndo(delivery.run.clone()));
            }
            DeliveryState::ApplyFailed(failure)
                if failure.can_override() && key.code == KeyCode::Char('!') =>
            {
                self.overlay = Some(Overlay::ConfirmUnverified);
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
                self.overlay = Some(Overlay::ConfirmForceUndo(delivery.run.clone()));
            }
            _ if close => {
                self.delivery = None;
            }
            _ => {
                self.overlay = Some(Overlay::Delivery);
                self.dirty = false;
            }
        }
    }

    /// The explicit choice to apply what did not pass verification.
    pub(super) fn confirm_unverified_key(&mut self, key: &KeyEvent) {
        match key.code {
            KeyCode::Char('y') => {
                if let Some(request) = self.delivery.as_ref().and_then(|d| d.request.clone()) {
                    self.request_apply(ApplyRequest {
                        unverified: true,
                        ..request
                    });
                }
            }
            KeyCode::Char('n') | KeyCode::Esc => self.overlay = Some(Overlay::Delivery),
            _ => self.overlay = Some(Overlay::ConfirmUnverified),
        }
    }

    pub(super) fn confirm_undo_key(&mut self, run: RunRef, force: bool, key: &KeyEvent) {
        match key.code {
            KeyCode::Char('y') => self.request_undo(run, force),
            KeyCode::Char('n') | KeyCode::Esc => {
                if self.delivery.is_some() {
                    self.overlay = Some(Overlay::Delivery);
                }
            }
            _ if force => self.overlay = Some(Overlay::ConfirmForceUndo(run)),
            _ => self.overlay = Some(Overlay::ConfirmUndo(run)),
        }
    }

    /// `u` outside the browser: the apply made in this session.
    pub(super) fn undo_last(&mut self) {
        match self.applied_run.clone() {
            Some(run) => self.overlay = Some(Overlay::ConfirmUndo(run)),
            None => {
                self.flash =
                    Some("nothing was applied in this session: Ctrl-R lists the runs".into())
            }
        }
    }

    /// Opens the runs browser and asks for the list.
    pub(crate) fn open_browser(&mut self) {
        self.browser = Some(Browser {
            loading: true,
            ..Browser::default()
        });
        self.ops.push(Op::ListRuns);
    }

    fn refresh_browser(&mut self) {
        if let Some(browser) = self.browser.as_mut() {
            browser.loading = true;
            self.ops.push(Op::ListRuns);
        }
    }

    pub(super) fn runs_listed(&mut self, result: Result<Vec<RunEntry>, String>) {
        let Some(browser) = self.browser.as_mut() else {
            self.dirty = false;
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
        let Some(browser) = self.browser.as_mut() else {
            self.dirty = false;
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
        let opened = self.browser.as_ref().is_some_and(|b| b.open.is_some());
        let context = if opened { Context::Show } else { Context::Runs };
        let Some(action) = self.keymap.lookup(context, key) else {
            self.dirty = false;
            return;
        };
        match action {
            Action::Help => self.overlay = Some(Overlay::Help(context, 0)),
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
        let Some(browser) = self.browser.as_mut() else {
            return;
        };
        match action {
            Action::Dismiss => self.browser = None,
            Action::Open => match browser.selected() {
                Some(entry) => {
                    let dir = entry.dir.clone();
                    browser.loading = true;
                    self.ops.push(Op::OpenRun { dir });
                }
                None => self.dirty = false,
            },
            other => scroll(&mut browser.selected, browser.runs.len(), other, 10),
        }
    }

    fn show_action(&mut self, action: Action) {
        let Some(open) = self.browser.as_mut().and_then(|b| b.open.as_mut()) else {
            return;
        };
        let model = &open.detail.patch;
        let state = &mut open.diff_state;
        match (open.section, action) {
            (_, Action::Dismiss) => {
                if let Some(browser) = self.browser.as_mut() {
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
            _ => self.dirty = false,
        }
    }

    /// The run the browser points at: the opened one, else the selected one.
    fn browser_run(&self) -> Option<&RunEntry> {
        let browser = self.browser.as_ref()?;
        match &browser.open {
            Some(open) => Some(&open.detail.entry),
            None => browser.selected(),
        }
    }

    fn apply_from_browser(&mut self) {
        let Some(entry) = self.browser_run().cloned() else {
            self.dirty = false;
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
            self.dirty = false;
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
        self.browser = None;
        self.resume(&entry.id, &entry.task);
    }

    fn undo_from_browser(&mut self) {
        let Some(entry) = self.browser_run().cloned() else {
            self.dirty = false;
            return;
        };
        if entry.applied {
            self.overlay = Some(Overlay::ConfirmUndo(RunRef::of(&entry)));
        } else {
            self.flash = Some(format!("run {} is not applied: nothing to undo", entry.id));
        }
    }
}
