//! A key in, effects out: [`App::decide`] asks who answers the key (the top
//! popup, then the approval modal, then the screen) and returns what the key
//! does as [`Effect`]s, changing nothing; [`App::perform`] carries them out.

use crossterm::event::{KeyEvent, KeyEventKind};

use super::reduce::screens::{on_browser, on_panes, on_review};
use super::reduce::{DiffTarget, Effect, interrupt, on_approval, on_popup};
use super::{App, Op, Overlay, Pane, Screen};
use crate::tui::keymap::{Action, Context};

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
        if key.kind != KeyEventKind::Release {
            self.flash = None;
        }
        for effect in self.decide(key) {
            self.perform(effect);
        }
    }

    /// What `key` does now, as effects, in the order they are performed.
    pub(crate) fn decide(&self, key: KeyEvent) -> Vec<Effect> {
        if key.kind == KeyEventKind::Release {
            return vec![Effect::Unchanged];
        }
        let keymap = &self.settings.keymap;
        if keymap.lookup(Context::Global, &key) == Some(Action::Cancel)
            && !self.approvals.typing_reason()
        {
            return interrupt(self.popups.top(), self.view.is_running());
        }
        let effects = match self.key_owner() {
            KeyOwner::Popup => self
                .popups
                .top()
                .map(|popup| on_popup(popup, &key, keymap, self.deliveries.shown.as_ref())),
            KeyOwner::Approval => self
                .approvals
                .shown
                .as_ref()
                .map(|pending| on_approval(pending, &key, keymap)),
            KeyOwner::Runs => self
                .screen
                .browser()
                .map(|browser| on_browser(browser, &key, keymap, self.view.is_running())),
            KeyOwner::Review => self
                .screen
                .review()
                .map(|review| on_review(review, keymap.lookup(Context::Review, &key))),
            KeyOwner::Panes => Some(on_panes(self, key)),
        };
        effects.unwrap_or_default()
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

    /// Carries out one effect of a key.
    pub(crate) fn perform(&mut self, effect: Effect) {
        match effect {
            Effect::Unchanged => self.effects.dirty = false,
            Effect::Flash(text) => self.flash = Some(text),
            Effect::Quit => self.effects.quit = true,
            Effect::QuitAfterRun => self.effects.quit_after_run = true,
            Effect::CancelRun => self.cancel_run(),
            Effect::Note(kind, text) => self.view.note(kind, text),
            Effect::Pop => {
                self.popups.pop();
            }
            Effect::Raise(popup) => self.popups.raise(popup),
            Effect::ScrollPopup(at) => match self.popups.top_mut() {
                Some(Overlay::Help(_, offset)) => *offset = at,
                Some(Overlay::Pager(pager)) => pager.scroll = at,
                _ => {}
            },
            Effect::ClearDelivery => self.deliveries.shown = None,
            Effect::Apply(request) => self.request_apply(request),
            Effect::Undo { run, force } => self.request_undo(run, force),
            Effect::Resume { run_id, task } => self.resume(&run_id, &task),
            Effect::Send(op) => self.effects.ops.push(op),
            Effect::Diff(target, movement) => {
                let diff = match target {
                    DiffTarget::Pane => Some((&mut self.panes.diff_state, &*self.panes.diff)),
                    DiffTarget::Review => {
                        self.screen.review_mut().map(|r| (&mut r.state, &r.model))
                    }
                    DiffTarget::OpenRun => self
                        .screen
                        .browser_mut()
                        .and_then(|b| b.open.as_mut())
                        .map(|open| (&mut open.diff_state, &*open.detail.patch)),
                };
                if let Some((state, model)) = diff {
                    movement.perform(state, model);
                }
            }
            other => self.perform_on_screen(other),
        }
    }

    /// The effects on the approval, the review and the browser.
    fn perform_on_screen(&mut self, effect: Effect) {
        let pending = self.approvals.shown.as_mut();
        match effect {
            Effect::Answer(decision) => self.answer_approval(decision),
            Effect::AskReason => {
                if let Some(pending) = pending {
                    let mut reason = ratatui_textarea::TextArea::default();
                    reason.set_cursor_line_style(ratatui::style::Style::default());
                    reason.set_placeholder_text("why (optional), then Enter");
                    pending.reason = Some(reason);
                }
            }
            Effect::DropReason => pending.into_iter().for_each(|p| p.reason = None),
            Effect::TypeReason(key) => {
                if let Some(reason) = pending.and_then(|p| p.reason.as_mut()) {
                    reason.input(key);
                }
            }
            Effect::HideApproval => pending.into_iter().for_each(|p| p.visible = false),
            Effect::ShowApproval => pending.into_iter().for_each(|p| p.visible = true),
            Effect::ScrollApproval(at) => pending.into_iter().for_each(|p| p.scroll = at),
            Effect::ToggleHunk { file, hunk } => {
                if let Some(review) = self.screen.review_mut() {
                    review.selection.toggle(file, hunk);
                }
            }
            Effect::ToggleAll => {
                if let Some(review) = self.screen.review_mut() {
                    review.selection.toggle_all();
                }
            }
            Effect::CloseReview => self.screen.close_review(),
            Effect::OpenBrowser => self.open_browser(),
            Effect::RefreshBrowser => self.refresh_browser(),
            Effect::CloseBrowser => self.screen.close_runs(),
            other => self.perform_on_browser(other),
        }
    }

    fn perform_on_browser(&mut self, effect: Effect) {
        let Some(browser) = self.screen.browser_mut() else {
            return self.perform_on_panes(effect);
        };
        match effect {
            Effect::LoadRun { dir } => {
                browser.loading = true;
                self.effects.ops.push(Op::OpenRun { dir });
            }
            Effect::SelectRun(at) => browser.selected = at,
            Effect::CloseRun => browser.open = None,
            Effect::NextSection => {
                if let Some(open) = browser.open.as_mut() {
                    open.section = open.section.next();
                    open.scroll = 0;
                }
            }
            Effect::ScrollRun(at) => {
                if let Some(open) = browser.open.as_mut() {
                    open.scroll = at;
                }
            }
            other => self.perform_on_panes(other),
        }
    }

    fn perform_on_panes(&mut self, effect: Effect) {
        let panes = &mut self.panes;
        match effect {
            Effect::Focus(pane) => panes.focus = pane,
            Effect::Zoom(zoomed) => panes.zoomed = zoomed,
            Effect::Submit => self.submit(),
            Effect::Edit(key) => {
                self.composer.input.input(key);
            }
            Effect::Recall(step) => self.recall(step),
            Effect::ToggleEntry => {
                let stream = &mut panes.stream;
                if !stream.expanded.remove(&stream.selected) {
                    stream.expanded.insert(stream.selected);
                }
            }
            Effect::ShowToolOutput => self.show_tool_output(),
            Effect::ShowCheckOutput => self.show_check_output(),
            Effect::ScrollPane(Pane::Stream, at) => {
                panes.stream.selected = at;
                panes.stream.follow = at + 1 >= self.view.stream.len();
            }
            Effect::ScrollPane(Pane::Matrix, at) => panes.matrix_row = at,
            Effect::ScrollPane(Pane::Plan, at) => panes.plan_scroll = at,
            _ => {}
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
                crate::tui::run_view::NoteKind::User,
                format!("you (sent with the next turn): {text}"),
            );
            self.reset_input();
        } else {
            self.submit_idle(&text);
        }
    }
}
