//! What a key does, decided without changing anything: each function here
//! takes the state of what answers the key (a popup, the approval, the
//! review, the browser, the panes) and the key or its action, and returns
//! the [`Effect`]s that follow, as data. [`App`](super::App) performs them,
//! in order; the decisions are tested as values, without a terminal.
//!
//! The popups' and the approval's keys are here; the screens' are in
//! [`screens`].

pub(super) mod screens;

use crossterm::event::{KeyCode, KeyEvent};

use super::{ApplyFailure, ApplyRequest, Delivery, DeliveryState, Op, Overlay, Pane, RunRef};
use crate::protocol::ApprovalDecision;
use crate::tui::diff::{DiffModel, DiffViewState};
use crate::tui::keymap::{Action, Context, Keymap};
use crate::tui::run_view::NoteKind;

use super::PendingApproval;

/// Columns a diff moves per sideways scroll.
const SIDEWAYS: isize = 8;

/// One thing a key makes happen; the app performs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Nothing changed: no frame is drawn for the key.
    Unchanged,
    /// A one-line message until the next key.
    Flash(String),
    Quit,
    /// Quit once the run has stopped.
    QuitAfterRun,
    /// Stop the run (edits waiting for an answer are refused).
    CancelRun,
    Note(NoteKind, String),
    /// Close the popup on top.
    Pop,
    /// Show a popup on top (one of its kind already open is taken off).
    Raise(Overlay),
    /// Scroll the popup on top (help or pager) to this line.
    ScrollPopup(usize),
    /// The apply or undo shown is put away.
    ClearDelivery,
    Apply(ApplyRequest),
    Undo {
        run: RunRef,
        force: bool,
    },
    Resume {
        run_id: String,
        task: String,
    },
    /// An op for the session loop, as it is.
    Send(Op),
    /// Answer the approval on screen.
    Answer(ApprovalDecision),
    /// Start typing the reason of a refusal.
    AskReason,
    /// Stop typing it, without answering.
    DropReason,
    TypeReason(KeyEvent),
    /// Hide the approval to look around first.
    HideApproval,
    ShowApproval,
    ScrollApproval(usize),
    /// Choose or drop hunk `hunk` of file `file` in the review.
    ToggleHunk {
        file: usize,
        hunk: usize,
    },
    ToggleAll,
    CloseReview,
    /// Move in one of the diffs.
    Diff(DiffTarget, DiffMove),
    OpenBrowser,
    /// List the runs again, if the browser is up.
    RefreshBrowser,
    CloseBrowser,
    /// Read the run in this directory, to show it in the browser.
    LoadRun {
        dir: String,
    },
    SelectRun(usize),
    /// Back from the opened run to the list.
    CloseRun,
    NextSection,
    /// Scroll the opened run's section to this line.
    ScrollRun(usize),
    Focus(Pane),
    Zoom(bool),
    /// Send what the task box holds.
    Submit,
    /// A key typed in the task box.
    Edit(KeyEvent),
    /// Step through what was sent before (`-1` older, `1` newer).
    Recall(isize),
    /// Expand or collapse the selected activity entry.
    ToggleEntry,
    ShowToolOutput,
    ShowCheckOutput,
    /// Scroll a pane to this row (the activity follows new entries at its end).
    ScrollPane(Pane, usize),
}

/// Which diff a [`DiffMove`] moves in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiffTarget {
    Pane,
    Review,
    OpenRun,
}

/// A movement in a diff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiffMove {
    NextHunk,
    PrevHunk,
    NextFile,
    PrevFile,
    Lines(isize),
    Pages(isize),
    Top,
    Bottom,
    Sideways(isize),
}

impl DiffMove {
    /// The movement an action is in a diff, if it is one.
    pub(crate) fn of(action: Action) -> Option<DiffMove> {
        Some(match action {
            Action::NextHunk => DiffMove::NextHunk,
            Action::PrevHunk => DiffMove::PrevHunk,
            Action::NextFile => DiffMove::NextFile,
            Action::PrevFile => DiffMove::PrevFile,
            Action::ScrollDown => DiffMove::Lines(1),
            Action::ScrollUp => DiffMove::Lines(-1),
            Action::PageDown => DiffMove::Pages(1),
            Action::PageUp => DiffMove::Pages(-1),
            Action::Top => DiffMove::Top,
            Action::Bottom => DiffMove::Bottom,
            Action::ScrollLeft => DiffMove::Sideways(-SIDEWAYS),
            Action::ScrollRight => DiffMove::Sideways(SIDEWAYS),
            _ => return None,
        })
    }

    pub(crate) fn perform(self, state: &mut DiffViewState, model: &DiffModel) {
        match self {
            DiffMove::NextHunk => state.next_hunk(model),
            DiffMove::PrevHunk => state.prev_hunk(model),
            DiffMove::NextFile => state.next_file(model),
            DiffMove::PrevFile => state.prev_file(model),
            DiffMove::Lines(n) => state.scroll_by(model, n),
            DiffMove::Pages(n) => state.page(model, n),
            DiffMove::Top => state.top(model),
            DiffMove::Bottom => state.bottom(model),
            DiffMove::Sideways(n) => state.scroll_horizontally(n),
        }
    }
}

/// Where `position` within `0..len` goes for a scrolling action.
pub(crate) fn scrolled(position: usize, len: usize, action: Action, page: usize) -> usize {
    let last = len.saturating_sub(1);
    match action {
        Action::ScrollUp => position.saturating_sub(1),
        Action::ScrollDown => (position + 1).min(last),
        Action::PageUp => position.saturating_sub(page),
        Action::PageDown => (position + page).min(last),
        Action::Top => 0,
        Action::Bottom => last,
        _ => position,
    }
}

/// Ctrl-C: asked already, cancel and quit once the run stopped; with a run
/// going, ask first; idle, quit.
pub(crate) fn interrupt(top: Option<&Overlay>, running: bool) -> Vec<Effect> {
    if matches!(top, Some(Overlay::ConfirmCancel)) {
        vec![Effect::Pop, Effect::CancelRun, Effect::QuitAfterRun]
    } else if running {
        vec![Effect::Raise(Overlay::ConfirmCancel)]
    } else {
        vec![Effect::Quit]
    }
}

/// A key on the popup on top; the popup stays unless the effects close it.
pub(crate) fn on_popup(
    popup: &Overlay,
    key: &KeyEvent,
    keymap: &Keymap,
    delivery: Option<&Delivery>,
) -> Vec<Effect> {
    let code = key.code;
    let no = matches!(code, KeyCode::Char('n') | KeyCode::Esc);
    match popup {
        Overlay::ConfirmCancel => match code {
            KeyCode::Char('y') | KeyCode::Enter => vec![
                Effect::Pop,
                Effect::CancelRun,
                Effect::Note(
                    NoteKind::Warning,
                    "cancelling: exporting the partial patch".into(),
                ),
            ],
            _ if no => vec![Effect::Pop],
            _ => vec![],
        },
        Overlay::ConfirmDiscard => match code {
            KeyCode::Char('y') | KeyCode::Char('q') => vec![Effect::Pop, Effect::Quit],
            _ if no => vec![Effect::Pop],
            _ => vec![],
        },
        Overlay::Help(context, offset) => match keymap.lookup(Context::Help, key) {
            Some(Action::Dismiss) | None => vec![Effect::Pop],
            Some(action) => {
                let lines =
                    keymap.bindings(*context).len() + keymap.bindings(Context::Global).len() + 2;
                vec![Effect::ScrollPopup(scrolled(*offset, lines, action, 10))]
            }
        },
        Overlay::Pager(pager) => match keymap.lookup(Context::Help, key) {
            Some(Action::Dismiss) => vec![Effect::Pop],
            Some(action) => vec![Effect::ScrollPopup(scrolled(
                pager.scroll,
                pager.lines.len(),
                action,
                10,
            ))],
            None => vec![],
        },
        Overlay::Delivery => on_delivery(delivery, code),
        Overlay::ConfirmUnverified => match code {
            KeyCode::Char('y') => {
                let request = delivery.and_then(|d| d.request.clone());
                let apply = request.map(|request| {
                    Effect::Apply(ApplyRequest {
                        unverified: true,
                        ..request
                    })
                });
                [Effect::Pop].into_iter().chain(apply).collect()
            }
            _ if no => vec![Effect::Pop, Effect::Raise(Overlay::Delivery)],
            _ => vec![],
        },
        Overlay::ConfirmUndo(run) => confirm_undo(run, false, code, delivery),
        Overlay::ConfirmForceUndo(run) => confirm_undo(run, true, code, delivery),
        Overlay::ConfirmResume { run_id, task } => match code {
            KeyCode::Char('y') | KeyCode::Char('r') | KeyCode::Enter => vec![
                Effect::Pop,
                Effect::Resume {
                    run_id: run_id.clone(),
                    task: task.clone(),
                },
            ],
            _ if no => vec![Effect::Pop],
            _ => vec![],
        },
    }
}

/// The keys of the apply/undo popup: each result offers only what makes
/// sense after it, and nothing closes it while it goes on.
pub(crate) fn on_delivery(delivery: Option<&Delivery>, code: KeyCode) -> Vec<Effect> {
    let Some(delivery) = delivery else {
        return vec![Effect::Pop];
    };
    let close = matches!(code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q'));
    match &delivery.state {
        DeliveryState::Applying { .. } | DeliveryState::Undoing { .. } => vec![Effect::Unchanged],
        DeliveryState::Applied(_) if code == KeyCode::Char('u') => vec![
            Effect::Pop,
            Effect::Raise(Overlay::ConfirmUndo(delivery.run.clone())),
        ],
        DeliveryState::ApplyFailed(failure)
            if failure.can_override() && code == KeyCode::Char('!') =>
        {
            vec![Effect::Pop, Effect::Raise(Overlay::ConfirmUnverified)]
        }
        DeliveryState::ApplyFailed(ApplyFailure::Overlap(_)) if code == KeyCode::Char('m') => {
            let merge = delivery.request.clone().map(|request| {
                Effect::Apply(ApplyRequest {
                    merge: true,
                    ..request
                })
            });
            [Effect::Pop].into_iter().chain(merge).collect()
        }
        DeliveryState::Undone(undone)
            if !undone.skipped.is_empty() && code == KeyCode::Char('F') =>
        {
            vec![
                Effect::Pop,
                Effect::Raise(Overlay::ConfirmForceUndo(delivery.run.clone())),
            ]
        }
        _ if close => vec![Effect::Pop, Effect::ClearDelivery],
        _ => vec![Effect::Unchanged],
    }
}

/// Undo `run` (`force`: files changed since the apply too)? `n` goes back to
/// the apply/undo result, if one is shown.
fn confirm_undo(
    run: &RunRef,
    force: bool,
    code: KeyCode,
    delivery: Option<&Delivery>,
) -> Vec<Effect> {
    match code {
        KeyCode::Char('y') => vec![
            Effect::Pop,
            Effect::Undo {
                run: run.clone(),
                force,
            },
        ],
        KeyCode::Char('n') | KeyCode::Esc if delivery.is_some() => {
            vec![Effect::Pop, Effect::Raise(Overlay::Delivery)]
        }
        KeyCode::Char('n') | KeyCode::Esc => vec![Effect::Pop],
        _ => vec![],
    }
}

/// A key on the approval modal: `y`, `a`, `n` then a reason, Esc to look
/// around first.
pub(crate) fn on_approval(
    pending: &PendingApproval,
    key: &KeyEvent,
    keymap: &Keymap,
) -> Vec<Effect> {
    if let Some(reason) = &pending.reason {
        return vec![match key.code {
            KeyCode::Enter => {
                let text = reason.lines().join(" ").trim().to_string();
                Effect::Answer(ApprovalDecision::Refuse((!text.is_empty()).then_some(text)))
            }
            KeyCode::Esc => Effect::DropReason,
            _ => Effect::TypeReason(*key),
        }];
    }
    match keymap.lookup(Context::Approval, key) {
        Some(Action::Approve) => vec![Effect::Answer(ApprovalDecision::Approve)],
        Some(Action::ApproveAll) => vec![Effect::Answer(ApprovalDecision::ApproveAll)],
        Some(Action::Refuse) => vec![Effect::AskReason],
        Some(Action::Dismiss) => vec![
            Effect::HideApproval,
            Effect::Flash("an edit waits for approval: press p to see it again".into()),
        ],
        Some(Action::Help) => vec![Effect::Raise(Overlay::Help(Context::Approval, 0))],
        Some(action) => {
            let lines = pending.patch.line_count() + pending.patch.files.len() * 2;
            vec![Effect::ScrollApproval(scrolled(
                pending.scroll,
                lines,
                action,
                10,
            ))]
        }
        None => vec![Effect::Unchanged],
    }
}

#[cfg(test)]
mod tests;
