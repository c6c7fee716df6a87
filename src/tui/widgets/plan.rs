//! The plan pane: every item with its status; the one in progress stands out.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::chrome::pane_block;
use crate::protocol::PlanStatus;
use crate::tui::run_view::RunView;
use crate::tui::theme::{Meaning, Theme};

/// `scroll` is the item the person moved to, shown while the pane is `focused`.
pub fn draw(
    frame: &mut Frame,
    area: Rect,
    view: &RunView,
    theme: &Theme,
    scroll: usize,
    focused: bool,
) {
    let plan = &view.plan;
    let done = plan.iter().filter(|i| i.status == PlanStatus::Done).count();
    let title = if plan.is_empty() {
        " Plan ".to_string()
    } else {
        format!(" Plan {done}/{} ", plan.len())
    };
    let block = pane_block(theme, title, focused);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if plan.is_empty() {
        let text = Line::from(Span::styled(
            "no plan yet",
            theme.get(Meaning::Text).add_modifier(Modifier::DIM),
        ));
        frame.render_widget(Paragraph::new(text), inner);
        return;
    }
    let rows = inner.height as usize;
    // Keep the item in progress (or the scrolled-to one) in view.
    let anchor = if focused {
        scroll
    } else {
        view.current_plan_item().unwrap_or(0)
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
            let mut style = theme.get(meaning);
            if focused && i == scroll {
                style = style.patch(theme.get(Meaning::Selection));
            }
            Line::from(vec![
                Span::styled(format!(" {mark} "), style),
                Span::styled(item.content.clone(), style),
            ])
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}
