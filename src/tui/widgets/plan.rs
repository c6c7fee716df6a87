//! The plan pane: every item with its status; the one in progress stands out.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::protocol::PlanStatus;
use crate::tui::app::{App, Pane};
use crate::tui::draw::pane_block;
use crate::tui::theme::Meaning;

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    let plan = &app.view.plan;
    let done = plan.iter().filter(|i| i.status == PlanStatus::Done).count();
    let title = if plan.is_empty() {
        " Plan ".to_string()
    } else {
        format!(" Plan {done}/{} ", plan.len())
    };
    let focused = app.focus == Pane::Plan;
    let block = pane_block(app, title, focused);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if plan.is_empty() {
        let text = Line::from(Span::styled(
            "no plan yet",
            app.theme.get(Meaning::Text).add_modifier(Modifier::DIM),
        ));
        frame.render_widget(Paragraph::new(text), inner);
        return;
    }
    let rows = inner.height as usize;
    // Keep the item in progress (or the scrolled-to one) in view.
    let anchor = if focused {
        app.plan_scroll
    } else {
        app.view.current_plan_item().unwrap_or(0)
    };
    let start = anchor
        .saturating_sub(rows.saturating_sub(1))
        .min(plan.len().saturating_sub(rows));
    let lines: Vec<Line> = plan
        .iter()
        .enumerate()
        .skip(start)
        .take(rows)
        .map(|(i, item)| {
            let (mark, meaning) = match item.status {
                PlanStatus::Done => ("✓", Meaning::PlanDone),
                PlanStatus::InProgress => ("▶", Meaning::PlanInProgress),
                PlanStatus::Pending => ("○", Meaning::PlanPending),
            };
            let mut style = app.theme.get(meaning);
            if focused && i == app.plan_scroll {
                style = style.patch(app.theme.get(Meaning::Selection));
            }
            Line::from(vec![
                Span::styled(format!(" {mark} "), style),
                Span::styled(item.content.clone(), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
