//! What every pane and modal is framed with.

use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Borders};

use crate::tui::theme::{Meaning, Theme};

/// A pane's frame: rounded border, bold title, focused border in the accent colour.
pub(crate) fn pane_block<'a>(
    theme: &Theme,
    title: impl Into<Line<'a>>,
    focused: bool,
) -> Block<'a> {
    let border = if focused {
        Meaning::BorderFocused
    } else {
        Meaning::Border
    };
    Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(theme.get(border))
        .title(title.into().style(theme.get(Meaning::Title)))
}

/// A `width`×`height` rectangle centred in `area`, clamped to it.
pub(crate) fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let width = width.min(area.width);
    let height = height.min(area.height);
    Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + (area.height - height) / 2,
        width,
        height,
    }
}
