//! What a key does on each screen: the final review, the runs browser, and
//! the run's panes. Like the popups' keys, each is decided from the state
//! and returned as [`Effect`]s; nothing here changes anything.

use crossterm::event::KeyEvent;

use super::{DiffMove, DiffTarget, Effect, interrupt, scrolled};
use crate::tui::app::{
    App, ApplyRequest, Browser, ChosenHunks, Op, Overlay, Pane, Review, RunEntry, RunRef, Section,
};
use crate::tui::keymap::{Action, Context, Keymap};

const NO_HUNK: &str = "no hunk is chosen: space chooses one, A all";

/// An action in the final review.
pub(crate) fn on_review(review: &Review, action: Option<Action>) -> Vec<Effect> {
    let (chosen, total) = review.selection.chosen();
    let effect = match action {
        Some(Action::ToggleHunk) => Effect::ToggleHunk {
            file: review.state.selected_file(),
            hunk: review.state.selected_hunk(),
        },
        Some(Action::ToggleAll) => Effect::ToggleAll,
        Some(Action::Apply) if chosen == 0 => Effect::Flash(NO_HUNK.into()),
        // Every hunk chosen applies the verified patch as it is; some of
        // them are a new patch, verified again first.
        Some(Action::Apply) => Effect::Apply(ApplyRequest {
            run: review.run.clone(),
            subset: (chosen < total).then(|| ChosenHunks {
                numbers: review.selection.numbers(),
                of: total,
            }),
            merge: false,
            unverified: false,
        }),
        Some(Action::ListRuns) => Effect::OpenBrowser,
        Some(Action::SavePatch) if chosen == 0 => Effect::Flash(NO_HUNK.into()),
        Some(Action::SavePatch) => Effect::Send(Op::SaveReview {
            patch: review.patch.clone(),
            hunks: ChosenHunks {
                numbers: review.selection.numbers(),
                of: total,
            },
            artifact_dir: review.artifact_dir.clone(),
        }),
        Some(Action::Dismiss) => return vec![Effect::CloseReview, Effect::Focus(Pane::Input)],
        Some(Action::Help) => Effect::Raise(Overlay::Help(Context::Review, 0)),
        // A chosen selection not saved yet is asked about before it is lost.
        Some(Action::Quit) if review.saved.is_none() && chosen > 0 => {
            Effect::Raise(Overlay::ConfirmDiscard)
        }
        Some(Action::Quit) => Effect::Quit,
        Some(other) => match DiffMove::of(other) {
            Some(m) => Effect::Diff(DiffTarget::Review, m),
            None => Effect::Unchanged,
        },
        None => Effect::Unchanged,
    };
    vec![effect]
}

/// A key while the browser is up: the opened run's, else the list's.
pub(crate) fn on_browser(
    browser: &Browser,
    key: &KeyEvent,
    keymap: &Keymap,
    running: bool,
) -> Vec<Effect> {
    let context = if browser.open.is_some() {
        Context::Show
    } else {
        Context::Runs
    };
    let Some(action) = keymap.lookup(context, key) else {
        return vec![Effect::Unchanged];
    };
    let pointed = match &browser.open {
        Some(open) => Some(&open.detail.entry),
        None => browser.selected(),
    };
    match (action, pointed) {
        (Action::Help, _) => vec![Effect::Raise(Overlay::Help(context, 0))],
        (Action::Quit, _) => vec![quit(running)],
        (Action::ListRuns, _) => vec![Effect::RefreshBrowser],
        (Action::Apply | Action::Undo | Action::Resume, None) => vec![Effect::Unchanged],
        (Action::Apply, Some(entry)) => vec![apply_run(entry)],
        (Action::Undo, Some(entry)) => vec![undo_run(entry)],
        (Action::Resume, Some(entry)) => resume_run(entry),
        _ if browser.open.is_some() => vec![on_open_run(browser, action)],
        (Action::Dismiss, _) => vec![Effect::CloseBrowser],
        (Action::Open, Some(entry)) => vec![Effect::LoadRun {
            dir: entry.dir.clone(),
        }],
        (Action::Open, None) => vec![Effect::Unchanged],
        (other, _) => vec![Effect::SelectRun(scrolled(
            browser.selected,
            browser.runs.len(),
            other,
            10,
        ))],
    }
}

/// An action on the run opened in the browser, by section.
fn on_open_run(browser: &Browser, action: Action) -> Effect {
    let Some(open) = &browser.open else {
        return Effect::Unchanged;
    };
    match (open.section, action) {
        (_, Action::Dismiss) => Effect::CloseRun,
        (_, Action::FocusNext) => Effect::NextSection,
        (Section::Diff, other) => match DiffMove::of(other) {
            Some(m) => Effect::Diff(DiffTarget::OpenRun, m),
            None => Effect::Unchanged,
        },
        (Section::Verification, other) => {
            Effect::ScrollRun(scrolled(open.scroll, open.detail.checks.len(), other, 10))
        }
        (Section::Events, other) => {
            Effect::ScrollRun(scrolled(open.scroll, open.detail.events.len(), other, 10))
        }
    }
}

fn apply_run(entry: &RunEntry) -> Effect {
    if entry.applied {
        Effect::Flash(format!("run {} is applied already: u undoes it", entry.id))
    } else if entry.verified.is_none() {
        Effect::Flash(format!(
            "run {} has not ended: there is no patch to apply",
            entry.id
        ))
    } else {
        Effect::Apply(ApplyRequest {
            run: RunRef::of(entry),
            subset: None,
            merge: false,
            unverified: false,
        })
    }
}

fn undo_run(entry: &RunEntry) -> Effect {
    if entry.applied {
        Effect::Raise(Overlay::ConfirmUndo(RunRef::of(entry)))
    } else {
        Effect::Flash(format!("run {} is not applied: nothing to undo", entry.id))
    }
}

/// A run that stopped before it ended well goes on; a success or an applied
/// run does not (a follow-up is typed to a new run).
fn resume_run(entry: &RunEntry) -> Vec<Effect> {
    if !matches!(
        entry.outcome.as_str(),
        "interrupted" | "cancelled" | "failure"
    ) {
        return vec![Effect::Flash(format!(
            "run {} is {}: there is nothing to resume",
            entry.id, entry.outcome
        ))];
    }
    if entry.applied {
        return vec![Effect::Flash(format!(
            "run {} is applied: u undoes it first",
            entry.id
        ))];
    }
    vec![
        Effect::CloseBrowser,
        Effect::Resume {
            run_id: entry.id.clone(),
            task: entry.task.clone(),
        },
    ]
}

fn quit(running: bool) -> Effect {
    if running {
        Effect::Flash("a run is going: Ctrl-C cancels it first".into())
    } else {
        Effect::Quit
    }
}

/// A key for the focused pane (the task box takes text).
pub(crate) fn on_panes(app: &App, key: KeyEvent) -> Vec<Effect> {
    let keymap = &app.settings.keymap;
    let focus = app.panes.focus;
    let context = focus.context();
    // `?` in an empty task box is a question, not text.
    if focus == Pane::Input
        && app.composer.input.is_empty()
        && keymap.lookup(Context::Global, &key) == Some(Action::Help)
    {
        return vec![Effect::Raise(Overlay::Help(context, 0))];
    }
    match keymap.lookup(context, &key) {
        Some(action) if focus == Pane::Input => on_input(app, action, key),
        Some(action) => act(app, action),
        None if focus == Pane::Input => vec![Effect::Edit(key)],
        None => vec![Effect::Unchanged],
    }
}

/// In the task box, movement keys edit: Home/End move the cursor, Up/Down
/// move between lines or through what was sent before, PageUp/PageDown
/// scroll the activity so it can be read while typing.
fn on_input(app: &App, action: Action, key: KeyEvent) -> Vec<Effect> {
    let input = &app.composer.input;
    let row = input.cursor().0;
    let last_row = input.lines().len().saturating_sub(1);
    match action {
        Action::Top | Action::Bottom => vec![Effect::Edit(key)],
        Action::ScrollUp if row > 0 => vec![Effect::Edit(key)],
        Action::ScrollDown if row < last_row => vec![Effect::Edit(key)],
        Action::ScrollUp => vec![Effect::Recall(-1)],
        Action::ScrollDown => vec![Effect::Recall(1)],
        Action::PageUp | Action::PageDown => vec![on_pane(app, Pane::Stream, action)],
        other => act(app, other),
    }
}

/// An action on the panes, whichever has the focus.
pub(crate) fn act(app: &App, action: Action) -> Vec<Effect> {
    let focus = app.panes.focus;
    let effect = match action {
        Action::Quit => quit(app.view.is_running()),
        Action::Cancel => return interrupt(app.popups.top(), app.view.is_running()),
        Action::Help => Effect::Raise(Overlay::Help(focus.context(), 0)),
        Action::FocusNext | Action::FocusPrev => {
            let i = Pane::ORDER.iter().position(|p| *p == focus).unwrap_or(0);
            let n = Pane::ORDER.len();
            let next = if action == Action::FocusNext {
                (i + 1) % n
            } else {
                (i + n - 1) % n
            };
            Effect::Focus(Pane::ORDER[next])
        }
        Action::FocusInput => Effect::Focus(Pane::Input),
        Action::Zoom => Effect::Zoom(!app.panes.zoomed && focus != Pane::Input),
        Action::ShowApproval if app.approvals.shown.is_some() => Effect::ShowApproval,
        Action::ShowApproval => Effect::Flash("no edit is waiting for approval".into()),
        Action::Submit => Effect::Submit,
        Action::ListRuns => Effect::OpenBrowser,
        Action::Undo => match &app.deliveries.applied_run {
            Some(run) => Effect::Raise(Overlay::ConfirmUndo(run.clone())),
            None => {
                Effect::Flash("nothing was applied in this session: Ctrl-R lists the runs".into())
            }
        },
        Action::Dismiss if focus == Pane::Input => Effect::Focus(Pane::Stream),
        _ => on_pane(app, focus, action),
    };
    vec![effect]
}

/// An action the focused pane takes for itself: scrolling, expanding, a pager.
pub(crate) fn on_pane(app: &App, pane: Pane, action: Action) -> Effect {
    let panes = &app.panes;
    match (pane, action) {
        (Pane::Stream, Action::Expand) => Effect::ToggleEntry,
        (Pane::Stream, Action::ShowOutput) => Effect::ShowToolOutput,
        (Pane::Stream, other) => Effect::ScrollPane(
            Pane::Stream,
            scrolled(panes.stream.selected, app.view.stream.len(), other, 10),
        ),
        (Pane::Diff, other) => match DiffMove::of(other) {
            Some(m) => Effect::Diff(DiffTarget::Pane, m),
            None => Effect::Unchanged,
        },
        (Pane::Matrix, Action::ShowOutput | Action::Expand) => Effect::ShowCheckOutput,
        (Pane::Matrix, other) => Effect::ScrollPane(
            Pane::Matrix,
            scrolled(panes.matrix_row, app.view.matrix.checks.len(), other, 5),
        ),
        (Pane::Plan, other) => Effect::ScrollPane(
            Pane::Plan,
            scrolled(panes.plan_scroll, app.view.plan.len(), other, 5),
        ),
        (Pane::Input, _) => Effect::Unchanged,
    }
}
