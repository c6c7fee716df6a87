//! What each key does, by context: overlays first, then the approval modal, the
//! final review, and the focused pane.

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind};

use super::{App, ChosenHunks, Op, Overlay, Pane, Screen};
use crate::protocol::ApprovalDecision;
use crate::tui::keymap::{Action, Context};
use crate::tui::run_view::NoteKind;

/// Columns the diff moves per sideways scroll.
const SIDEWAYS: isize = 8;

/// What answers a key, in the order they cover each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KeyOwner {
    Popup,
    Approval,
    Runs,
    Review,
    Panes,
}

impl App {
    pub(super) fn handle_key(&mut self, key: KeyEvent) {
        if key.kind == KeyEventKind::Release {
            self.effects.dirty = false;
            return;
        }
        self.flash = None;
        if self.settings.keymap.lookup(Context::Global, &key) == Some(Action::Cancel)
            && !self.typing_reason()
        {
            self.interrupt();
            return;
        }
        match self.key_owner() {
            KeyOwner::Popup => {
                if let Some(popup) = self.popups.pop() {
                    self.overlay_key(popup, &key);
                }
            }
            KeyOwner::Approval => self.approval_key(&key),
            KeyOwner::Runs => self.browser_key(&key),
            KeyOwner::Review => self.review_key(&key),
            KeyOwner::Panes => self.panes_key(key),
        }
    }

    /// Who answers a key: the top popup, then the approval modal, then the screen.
    pub(super) fn key_owner(&self) -> KeyOwner {
        if !self.popups.is_empty() {
            KeyOwner::Popup
        } else if self.approvals.is_visible() {
            KeyOwner::Approval
        } else {
            match &self.screen {
                Screen::Runs { .. } => KeyOwner::Runs,
                Screen::Review(_) => KeyOwner::Review,
                Screen::Panes => KeyOwner::Panes,
            }
        }
    }

    /// A key for the focused pane (the task box takes text).
    fn panes_key(&mut self, key: KeyEvent) {
        let context = self.panes.focus.context();
        // `?` in an empty task box is a question, not text.
        if self.panes.focus == Pane::Input
            && self.composer.input.is_empty()
            && self.settings.keymap.lookup(Context::Global, &key) == Some(Action::Help)
        {
            self.popups.raise(Overlay::Help(context, 0));
            return;
        }
        match self.settings.keymap.lookup(context, &key) {
            Some(action) if self.panes.focus == Pane::Input => self.input_action(action, key),
            Some(action) => self.act(action),
            None if self.panes.focus == Pane::Input => {
                self.composer.input.input(key);
            }
            None => self.effects.dirty = false,
        }
    }

    /// In the input box, movement keys edit: Home/End move the cursor, Up/Down move
    /// between lines or through what was sent before, PageUp/PageDown scroll the
    /// activity so it can be read while typing.
    fn input_action(&mut self, action: Action, key: KeyEvent) {
        let row = self.composer.input.cursor().0;
        let last_row = self.composer.input.lines().len().saturating_sub(1);
        match action {
            Action::Top | Action::Bottom => {
                self.composer.input.input(key);
            }
            Action::ScrollUp if row > 0 => {
                self.composer.input.input(key);
            }
            Action::ScrollDown if row < last_row => {
                self.composer.input.input(key);
            }
            Action::ScrollUp => self.recall(-1),
            Action::ScrollDown => self.recall(1),
            Action::PageUp | Action::PageDown => self.stream_action(action),
            other => self.act(other),
        }
    }

    /// Steps through the tasks and follow-ups sent before (`-1` older, `1` newer).
    fn recall(&mut self, step: isize) {
        let len = self.composer.history.len();
        if len == 0 {
            return;
        }
        let next = match (self.composer.history_at, step < 0) {
            (None, true) => Some(len - 1),
            (None, false) => None,
            (Some(i), true) => Some(i.saturating_sub(1)),
            (Some(i), false) if i + 1 < len => Some(i + 1),
            (Some(_), false) => None,
        };
        self.composer.history_at = next;
        let text = next
            .map(|i| self.composer.history[i].clone())
            .unwrap_or_default();
        self.reset_input();
        self.composer.input.insert_str(text);
        self.composer.history_at = next;
    }

    fn typing_reason(&self) -> bool {
        self.approvals.typing_reason()
    }

    /// Ctrl-C: with a run going, ask first; asked already, cancel and quit; idle, quit.
    fn interrupt(&mut self) {
        if matches!(self.popups.top(), Some(Overlay::ConfirmCancel)) {
            self.popups.pop();
            self.cancel_run();
            self.effects.quit_after_run = true;
        } else if self.view.is_running() {
            self.popups.raise(Overlay::ConfirmCancel);
        } else {
            self.effects.quit = true;
        }
    }

    fn overlay_key(&mut self, overlay: Overlay, key: &KeyEvent) {
        match overlay {
            Overlay::ConfirmCancel => match key.code {
                KeyCode::Char('y') | KeyCode::Enter => {
                    self.cancel_run();
                    self.view
                        .note(NoteKind::Warning, "cancelling: exporting the partial patch");
                }
                KeyCode::Char('n') | KeyCode::Esc => {}
                _ => self.popups.raise(Overlay::ConfirmCancel),
            },
            Overlay::ConfirmDiscard => match key.code {
                KeyCode::Char('y') | KeyCode::Char('q') => self.effects.quit = true,
                KeyCode::Char('n') | KeyCode::Esc => {}
                _ => self.popups.raise(Overlay::ConfirmDiscard),
            },
            Overlay::Help(context, mut offset) => {
                match self.settings.keymap.lookup(Context::Help, key) {
                    Some(Action::Dismiss) | None => {}
                    Some(action) => {
                        let lines = self.settings.keymap.bindings(context).len()
                            + self.settings.keymap.bindings(Context::Global).len()
                            + 2;
                        scroll(&mut offset, lines, action, 10);
                        self.popups.raise(Overlay::Help(context, offset));
                    }
                }
            }
            Overlay::Delivery => self.delivery_key(key),
            Overlay::ConfirmUnverified => self.confirm_unverified_key(key),
            Overlay::ConfirmUndo(run) => self.confirm_undo_key(run, false, key),
            Overlay::ConfirmForceUndo(run) => self.confirm_undo_key(run, true, key),
            Overlay::ConfirmResume { run_id, task } => match key.code {
                KeyCode::Char('y') | KeyCode::Char('r') | KeyCode::Enter => {
                    self.resume(&run_id, &task);
                }
                KeyCode::Char('n') | KeyCode::Esc => {}
                _ => self.popups.raise(Overlay::ConfirmResume { run_id, task }),
            },
            Overlay::Pager(mut pager) => {
                let keep = match self.settings.keymap.lookup(Context::Help, key) {
                    Some(Action::Dismiss) => false,
                    Some(action) => {
                        scroll(&mut pager.scroll, pager.lines.len(), action, 10);
                        true
                    }
                    None => true,
                };
                if keep {
                    self.popups.raise(Overlay::Pager(pager));
                }
            }
        }
    }

    fn approval_key(&mut self, key: &KeyEvent) {
        let Some(pending) = self.approvals.shown.as_mut() else {
            return;
        };
        if let Some(reason) = pending.reason.as_mut() {
            match key.code {
                KeyCode::Enter => {
                    let text = reason.lines().join(" ").trim().to_string();
                    let reason = (!text.is_empty()).then_some(text);
                    self.answer_approval(ApprovalDecision::Refuse(reason));
                }
                KeyCode::Esc => pending.reason = None,
                _ => {
                    reason.input(*key);
                }
            }
            return;
        }
        match self.settings.keymap.lookup(Context::Approval, key) {
            Some(Action::Approve) => self.answer_approval(ApprovalDecision::Approve),
            Some(Action::ApproveAll) => self.answer_approval(ApprovalDecision::ApproveAll),
            Some(Action::Refuse) => {
                let mut reason = ratatui_textarea::TextArea::default();
                reason.set_cursor_line_style(ratatui::style::Style::default());
                reason.set_placeholder_text("why (optional), then Enter");
                pending.reason = Some(reason);
            }
            Some(Action::Dismiss) => {
                pending.visible = false;
                self.flash = Some("an edit waits for approval: press p to see it again".into());
            }
            Some(Action::Help) => self.popups.raise(Overlay::Help(Context::Approval, 0)),
            Some(action) => {
                let lines = pending.patch.line_count() + pending.patch.files.len() * 2;
                scroll(&mut pending.scroll, lines, action, 10);
            }
            None => self.effects.dirty = false,
        }
    }

    fn review_key(&mut self, key: &KeyEvent) {
        let Some(review) = self.screen.review_mut() else {
            return;
        };
        let (file, hunk) = (review.state.selected_file(), review.state.selected_hunk());
        match self.settings.keymap.lookup(Context::Review, key) {
            Some(Action::ToggleHunk) => review.selection.toggle(file, hunk),
            Some(Action::ToggleAll) => review.selection.toggle_all(),
            Some(Action::NextHunk) => review.state.next_hunk(&review.model),
            Some(Action::PrevHunk) => review.state.prev_hunk(&review.model),
            Some(Action::NextFile) => review.state.next_file(&review.model),
            Some(Action::PrevFile) => review.state.prev_file(&review.model),
            Some(Action::ScrollDown) => review.state.scroll_by(&review.model, 1),
            Some(Action::ScrollUp) => review.state.scroll_by(&review.model, -1),
            Some(Action::PageDown) => review.state.page(&review.model, 1),
            Some(Action::PageUp) => review.state.page(&review.model, -1),
            Some(Action::Top) => review.state.top(&review.model),
            Some(Action::ScrollLeft) => review.state.scroll_horizontally(-SIDEWAYS),
            Some(Action::ScrollRight) => review.state.scroll_horizontally(SIDEWAYS),
            Some(Action::Bottom) => review.state.bottom(&review.model),
            Some(Action::Apply) => self.apply_review(),
            Some(Action::ListRuns) => self.open_browser(),
            Some(Action::SavePatch) => {
                if review.selection.chosen().0 == 0 {
                    self.flash = Some("no hunk is chosen: space chooses one, A all".into());
                } else {
                    let (_, of) = review.selection.chosen();
                    self.effects.ops.push(Op::SaveReview {
                        patch: review.patch.clone(),
                        hunks: ChosenHunks {
                            numbers: review.selection.numbers(),
                            of,
                        },
                        artifact_dir: review.artifact_dir.clone(),
                    });
                }
            }
            Some(Action::Dismiss) => {
                self.screen.close_review();
                self.panes.focus = Pane::Input;
            }
            Some(Action::Help) => self.popups.raise(Overlay::Help(Context::Review, 0)),
            // A chosen selection not saved yet is asked about before it is lost.
            Some(Action::Quit) if review.saved.is_none() && review.selection.chosen().0 > 0 => {
                self.popups.raise(Overlay::ConfirmDiscard)
            }
            Some(Action::Quit) => self.effects.quit = true,
            _ => self.effects.dirty = false,
        }
    }

    pub(super) fn act(&mut self, action: Action) {
        match action {
            Action::Quit => {
                if self.view.is_running() {
                    self.flash = Some("a run is going: Ctrl-C cancels it first".into());
                } else {
                    self.effects.quit = true;
                }
            }
            Action::Cancel => self.interrupt(),
            Action::Help => self
                .popups
                .raise(Overlay::Help(self.panes.focus.context(), 0)),
            Action::FocusNext | Action::FocusPrev => {
                let i = Pane::ORDER
                    .iter()
                    .position(|p| *p == self.panes.focus)
                    .unwrap_or(0);
                let n = Pane::ORDER.len();
                let next = if action == Action::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.panes.focus = Pane::ORDER[next];
            }
            Action::FocusInput => self.panes.focus = Pane::Input,
            Action::Zoom => {
                self.panes.zoomed = !self.panes.zoomed && self.panes.focus != Pane::Input
            }
            Action::ShowApproval => match self.approvals.shown.as_mut() {
                Some(pending) => pending.visible = true,
                None => self.flash = Some("no edit is waiting for approval".into()),
            },
            Action::Submit => self.submit(),
            Action::ListRuns => self.open_browser(),
            Action::Undo => self.undo_last(),
            Action::Dismiss if self.panes.focus == Pane::Input => self.panes.focus = Pane::Stream,
            _ => self.pane_action(action),
        }
    }

    fn submit(&mut self) {
        let text = self.composer.input.lines().join("\n").trim().to_string();
        if text.is_empty() {
            return;
        }
        if self.composer.history.last() != Some(&text) {
            self.composer.history.push(text.clone());
        }
        self.composer.history_at = None;
        if self.view.is_running() {
            self.effects.ops.push(Op::FollowUp(text.clone()));
            self.view.note(
                NoteKind::User,
                format!("you (sent with the next turn): {text}"),
            );
            self.reset_input();
        } else {
            self.start(&text);
        }
    }

    fn pane_action(&mut self, action: Action) {
        match self.panes.focus {
            Pane::Stream => self.stream_action(action),
            Pane::Diff => {
                let (model, state) = (&self.panes.diff, &mut self.panes.diff_state);
                match action {
                    Action::NextHunk => state.next_hunk(model),
                    Action::PrevHunk => state.prev_hunk(model),
                    Action::NextFile => state.next_file(model),
                    Action::PrevFile => state.prev_file(model),
                    Action::ScrollDown => state.scroll_by(model, 1),
                    Action::ScrollUp => state.scroll_by(model, -1),
                    Action::PageDown => state.page(model, 1),
                    Action::PageUp => state.page(model, -1),
                    Action::Top => state.top(model),
                    Action::ScrollLeft => state.scroll_horizontally(-SIDEWAYS),
                    Action::ScrollRight => state.scroll_horizontally(SIDEWAYS),
                    Action::Bottom => state.bottom(model),
                    _ => self.effects.dirty = false,
                }
            }
            Pane::Matrix => match action {
                Action::ShowOutput | Action::Expand => self.show_check_output(),
                _ => {
                    let rows = self.view.matrix.checks.len();
                    scroll(&mut self.panes.matrix_row, rows, action, 5);
                }
            },
            Pane::Plan => {
                let len = self.view.plan.len();
                scroll(&mut self.panes.plan_scroll, len, action, 5);
            }
            Pane::Input => self.effects.dirty = false,
        }
    }

    fn stream_action(&mut self, action: Action) {
        let len = self.view.stream.len();
        let state = &mut self.panes.stream;
        match action {
            Action::Expand => {
                if !state.expanded.remove(&state.selected) {
                    state.expanded.insert(state.selected);
                }
            }
            Action::ShowOutput => self.show_tool_output(),
            other => {
                scroll(&mut state.selected, len, other, 10);
                state.follow = state.selected + 1 >= len;
            }
        }
    }
}

/// Moves `position` within `0..len` for a scrolling action.
pub(crate) fn scroll(position: &mut usize, len: usize, action: Action, page: usize) {
    let last = len.saturating_sub(1);
    *position = match action {
        Action::ScrollUp => position.saturating_sub(1),
        Action::ScrollDown => (*position + 1).min(last),
        Action::PageUp => position.saturating_sub(page),
        Action::PageDown => (*position + page).min(last),
        Action::Top => 0,
        Action::Bottom => last,
        _ => *position,
    };
}
