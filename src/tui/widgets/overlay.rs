//! What can cover the panes: the key help, the cancel confirmation and the output pager.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph};

use super::chrome::centered;
use crate::tui::keymap::Keymap;
use crate::tui::keymap::{Action, Context};
use crate::tui::screen::Review;
use crate::tui::screen::popups::Overlay;
use crate::tui::theme::{Meaning, Theme};

/// What the popups are drawn with.
pub struct Scene<'a> {
    pub theme: &'a Theme,
    pub keymap: &'a Keymap,
    /// The review on screen, for what leaving it would drop.
    pub review: Option<&'a Review>,
}

/// Draws `popup`; the apply and undo popups are [`super::delivery`]'s.
pub fn draw(scene: &Scene, frame: &mut Frame, area: Rect, popup: &mut Overlay) {
    if let Overlay::Pager(pager) = popup {
        // The last page stays full: scrolling to the end shows the end, not one line.
        let rows = usize::from(area.height.saturating_sub(4));
        pager.scroll = pager.scroll.min(pager.lines.len().saturating_sub(rows));
    }
    match &*popup {
        Overlay::Help(context, offset) => help(scene, frame, area, *context, *offset),
        Overlay::ConfirmCancel => confirm_cancel(scene, frame, area),
        Overlay::ConfirmDiscard => confirm_discard(scene, frame, area),
        Overlay::ConfirmResume { run_id, task } => {
            confirm_resume(scene, frame, area, run_id, task);
        }
        // The apply and undo screens draw themselves.
        Overlay::Delivery
        | Overlay::ConfirmUnverified
        | Overlay::ConfirmUndo(_)
        | Overlay::ConfirmForceUndo(_) => {}
        Overlay::Pager(pager) => {
            let rect = centered(
                area,
                area.width.saturating_sub(4),
                area.height.saturating_sub(2),
            );
            let rows = usize::from(rect.height.saturating_sub(2));
            let top = pager.scroll;
            let lines: Vec<Line> = pager
                .lines
                .iter()
                .skip(top)
                .take(rows)
                .map(|l| Line::from(Span::styled(l.clone(), scene.theme.get(Meaning::Text))))
                .collect();
            let title = format!(
                " {} — line {}/{} — Esc closes ",
                pager.title,
                (top + rows).min(pager.lines.len()),
                pager.lines.len()
            );
            modal(scene, frame, rect, title, lines);
        }
    }
}

fn modal(scene: &Scene, frame: &mut Frame, rect: Rect, title: String, lines: Vec<Line>) {
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(scene.theme.get(Meaning::BorderFocused))
        .title(Line::from(Span::styled(
            title,
            scene.theme.get(Meaning::Title),
        )));
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

/// Every key of the current context, then the global ones it does not hide.
fn help(scene: &Scene, frame: &mut Frame, area: Rect, context: Context, offset: usize) {
    let key_style = scene.theme.get(Meaning::HelpKey);
    let text = scene.theme.get(Meaning::Text);
    let mut lines = Vec::new();
    let mut section = |name: &str, bindings: Vec<(String, Action, &str)>| {
        if bindings.is_empty() {
            return;
        }
        lines.push(Line::from(Span::styled(
            name.to_string(),
            scene.theme.get(Meaning::Title),
        )));
        // One line per action, with every key that does it.
        let mut grouped: Vec<(String, Action, &str)> = Vec::new();
        for (key, action, description) in bindings {
            match grouped.iter_mut().find(|(_, a, _)| *a == action) {
                Some((keys, _, _)) => {
                    keys.push_str(" / ");
                    keys.push_str(&key);
                }
                None => grouped.push((key, action, description)),
            }
        }
        for (keys, _, description) in grouped {
            lines.push(Line::from(vec![
                Span::styled(format!("  {keys:<16}"), key_style),
                Span::styled(description.to_string(), text),
            ]));
        }
    };
    let own = scene.keymap.bindings(context);
    let own_keys: Vec<String> = own.iter().map(|(k, _, _)| k.clone()).collect();
    section(&format!("{} keys", context.title()), own);
    if context != Context::Global {
        let global: Vec<_> = scene
            .keymap
            .bindings(Context::Global)
            .into_iter()
            .filter(|(k, _, _)| !own_keys.contains(k))
            .filter(|(k, _, _)| !context.is_text_entry() || k.chars().count() != 1)
            .filter(|(_, action, _)| global_works_in(context, *action))
            .collect();
        section("everywhere", global);
    }
    let height = (lines.len() as u16 + 2).min(area.height);
    let rect = centered(area, 60, height);
    let visible = usize::from(height.saturating_sub(2));
    let hidden = lines.len().saturating_sub(visible);
    let offset = offset.min(hidden);
    let title = if hidden > 0 {
        format!(
            " Keys ({}/{}) — j/k scroll, Esc closes ",
            offset + visible,
            lines.len()
        )
    } else {
        " Keys — Esc, q or ? closes ".to_string()
    };
    let lines: Vec<Line> = lines.into_iter().skip(offset).collect();
    modal(scene, frame, rect, title, lines);
}

/// The modal contexts take only a few global keys: cancelling, help and scrolling
/// (and quitting from the review).
fn global_works_in(context: Context, action: Action) -> bool {
    match context {
        Context::Approval | Context::Review => {
            matches!(
                action,
                Action::Cancel
                    | Action::Help
                    | Action::ScrollUp
                    | Action::ScrollDown
                    | Action::PageUp
                    | Action::PageDown
                    | Action::Top
                    | Action::Bottom
            ) || (context == Context::Review && matches!(action, Action::Quit | Action::ListRuns))
        }
        Context::Runs | Context::Show => {
            matches!(
                action,
                Action::Cancel
                    | Action::Help
                    | Action::Quit
                    | Action::ListRuns
                    | Action::Undo
                    | Action::ScrollUp
                    | Action::ScrollDown
                    | Action::PageUp
                    | Action::PageDown
                    | Action::Top
                    | Action::Bottom
            ) || (context == Context::Show && action == Action::FocusNext)
        }
        _ => true,
    }
}

fn confirm_cancel(scene: &Scene, frame: &mut Frame, area: Rect) {
    let key = scene.theme.get(Meaning::HelpKey);
    let text = scene.theme.get(Meaning::Text);
    let lines = vec![
        Line::from(Span::styled(
            " Stop the agent? The partial patch is kept.",
            text,
        )),
        Line::from(""),
        Line::from(vec![
            Span::styled(" y", key),
            Span::styled(" cancel the run   ", text),
            Span::styled("n", key),
            Span::styled(" keep going   ", text),
            Span::styled("Ctrl-C", key),
            Span::styled(" cancel and quit", text),
        ]),
    ];
    let rect = centered(area, 62, 5);
    modal(scene, frame, rect, " Cancel the run? ".into(), lines);
}

fn confirm_resume(scene: &Scene, frame: &mut Frame, area: Rect, run_id: &str, task: &str) {
    let key = scene.theme.get(Meaning::HelpKey);
    let text = scene.theme.get(Meaning::Text);
    let width = area.width.saturating_sub(4).min(72);
    let room = usize::from(width.saturating_sub(4));
    let task: String = crate::terminal_text::clean_for_screen(task)
        .replace('\n', " ")
        .chars()
        .take(room.saturating_sub(7))
        .collect();
    let lines = vec![
        Line::from(Span::styled(
            format!(" Run {run_id} stopped before it ended."),
            text,
        )),
        Line::from(Span::styled(format!(" Task: {task}"), text)),
        Line::from(Span::styled(
            " It goes on from its last resume point, verified again.",
            text,
        )),
        Line::from(vec![
            Span::styled(" y", key),
            Span::styled(" resume it   ", text),
            Span::styled("n", key),
            Span::styled(" not now (Ctrl-R lists the runs)", text),
        ]),
    ];
    let rect = centered(area, width, 6);
    modal(
        scene,
        frame,
        rect,
        " Resume the interrupted run? ".into(),
        lines,
    );
}

fn confirm_discard(scene: &Scene, frame: &mut Frame, area: Rect) {
    let key = scene.theme.get(Meaning::HelpKey);
    let text = scene.theme.get(Meaning::Text);
    let (chosen, total) = scene.review.map_or((0, 0), |r| r.selection.chosen());
    let lines = vec![
        Line::from(Span::styled(
            format!(" {chosen} of {total} hunks are chosen and not saved."),
            text,
        )),
        Line::from(Span::styled(
            " final.patch stays in the run's folder.",
            text,
        )),
        Line::from(vec![
            Span::styled(" y", key),
            Span::styled(" quit without saving   ", text),
            Span::styled("n", key),
            Span::styled(" back to the review", text),
        ]),
    ];
    let rect = centered(area, 62, 5);
    modal(scene, frame, rect, " Discard the review? ".into(), lines);
}
