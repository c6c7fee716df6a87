//! The approval modal (`--approval each`): the edit's patch, and y / n / a / Esc.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph};

use super::chrome::centered;
use crate::tui::screen::approval::Approvals;
use crate::tui::theme::{Meaning, Theme};

/// The edit (or the call to an MCP server's tool) asked about, over the
/// whole screen.
pub fn draw(frame: &mut Frame, area: Rect, theme: &Theme, approvals: &mut Approvals) {
    let Some(pending) = approvals.shown.as_mut() else {
        return;
    };
    let width = (area.width.saturating_mul(9) / 10).max(60);
    let height = (area.height.saturating_mul(8) / 10).max(14);
    let modal = centered(area, width, height);
    frame.render_widget(Clear, modal);
    let (added, removed) = pending.patch.totals();
    let queued = approvals.queue.len();
    let more = if queued > 0 {
        format!(" ({queued} more waiting)")
    } else {
        String::new()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Double)
        .border_style(theme.get(Meaning::ApprovalBorder))
        .title(Line::from(Span::styled(
            if let Some(call) = &pending.request.call {
                let where_ = if call.outside_sandbox {
                    ", outside the sandbox"
                } else {
                    ""
                };
                format!(" Call {}{where_}?{more} ", pending.request.path)
            } else {
                format!(
                    " Apply this edit to {}? +{added} -{removed}{more} ",
                    pending.request.path
                )
            },
            theme.get(Meaning::Title),
        )));
    let inner = block.inner(modal);
    frame.render_widget(block, modal);
    let footer_rows = if pending.reason.is_some() { 3 } else { 1 };
    let [body, footer] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(footer_rows)]).areas(inner);
    if let Some(call) = &pending.request.call {
        // Why it is asked, then the call's arguments as the model gave them
        // (escaped: they are the model's text).
        let why = match (&call.reason, call.outside_sandbox) {
            (Some(reason), _) => format!(" A hook asks you first: {reason}"),
            (None, true) => " It runs on this machine, as you, with these arguments:".to_string(),
            (None, false) => " With these arguments:".to_string(),
        };
        let lines: Vec<Line> = std::iter::once(Line::from(Span::styled(
            crate::terminal_text::escape_line(&why).into_owned(),
            theme.get(Meaning::Text),
        )))
        .chain(pending.request.patch.lines().map(|l| {
            Line::from(Span::styled(
                format!(" {}", crate::terminal_text::escape_line(l)),
                theme.get(Meaning::Text),
            ))
        }))
        .collect();
        let scroll = u16::try_from(pending.scroll).unwrap_or(u16::MAX);
        frame.render_widget(Paragraph::new(lines).scroll((scroll, 0)), body);
    } else {
        crate::tui::diff::render_patch(
            body,
            frame.buffer_mut(),
            &pending.patch,
            pending.scroll,
            theme,
        );
    }
    match pending.reason.as_mut() {
        Some(reason) => {
            reason.set_block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(theme.get(Meaning::ApprovalBorder))
                    .title(" Why refuse? Enter refuses, Esc goes back "),
            );
            reason.set_style(theme.get(Meaning::Text));
            frame.render_widget(&*reason, footer);
        }
        None => {
            let key = theme.get(Meaning::HelpKey);
            let text = theme.get(Meaning::Text);
            let (yes, all) = if let Some(call) = &pending.request.call {
                let all = if call.outside_sandbox {
                    " allow this tool for the rest of the run  "
                } else {
                    " call (a hook asks each time)  "
                };
                (" call  ", all)
            } else {
                (" apply  ", " approve the rest of the run  ")
            };
            let line = Line::from(vec![
                Span::styled(" y", key),
                Span::styled(yes, text),
                Span::styled("n", key),
                Span::styled(" refuse (say why)  ", text),
                Span::styled("a", key),
                Span::styled(all, text),
                Span::styled("Esc", key),
                Span::styled(" look around first  ", text),
                Span::styled("j/k", key),
                Span::styled(" scroll", text),
            ]);
            frame.render_widget(Paragraph::new(line), footer);
        }
    }
}
