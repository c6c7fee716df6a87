//! The diff viewer pane and the bare patch preview.
//!
//! The pane is a bordered block whose title gives the totals (and, in a review, how
//! many hunks are chosen). Inside, a file list sits in a left column when the pane is
//! wide, else above the hunks, taking at most a third of the height; the hunks of the
//! selected file fill the rest. Only visible rows are visited.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, StatefulWidget, Widget};

use super::draw::{self, BodyContext, Pen};
use super::model::DiffModel;
use super::review::ReviewSelection;
use super::rows::{self, body_rows, rows_from};
use super::state::DiffViewState;
use crate::tui::theme::{Meaning, Theme};

/// Inner widths from which the file list becomes a left column.
const WIDE_FROM: u16 = 100;
/// The width of the file list column.
const LIST_COLUMNS: u16 = 30;
/// What an empty diff shows.
pub(super) const EMPTY_NOTE: &str = "no changes yet";

/// The diff viewer pane, drawn with a [`DiffViewState`].
pub struct DiffView<'a> {
    model: &'a DiffModel,
    theme: &'a Theme,
    focused: bool,
    review: Option<&'a ReviewSelection>,
    title: &'a str,
}

impl<'a> DiffView<'a> {
    pub fn new(model: &'a DiffModel, theme: &'a Theme) -> Self {
        DiffView {
            model,
            theme,
            focused: false,
            review: None,
            title: "Diff",
        }
    }

    pub fn focused(mut self, focused: bool) -> Self {
        self.focused = focused;
        self
    }

    /// Shows review marks: `[x]`/`[ ]` per hunk, left-out hunks dimmed.
    pub fn review(mut self, review: Option<&'a ReviewSelection>) -> Self {
        self.review = review;
        self
    }

    pub fn title(mut self, title: &'a str) -> Self {
        self.title = title;
        self
    }

    fn title_line(&self, state: &DiffViewState) -> Line<'a> {
        let title_style = self.theme.get(Meaning::Title);
        let text = self.theme.get(Meaning::Text);
        let files = self.model.files.len();
        let (added, removed) = self.model.totals();
        let mut spans = vec![Span::styled(format!(" {} ", self.title), title_style)];
        // In a review the choice matters most, so it comes first and survives truncation.
        if let Some(review) = self.review {
            let (chosen, total) = review.chosen();
            spans.push(Span::styled(
                format!("{chosen} of {total} hunks chosen · "),
                text,
            ));
        }
        spans.extend([
            Span::styled(
                format!("{files} file{} ", if files == 1 { "" } else { "s" }),
                text,
            ),
            Span::styled(format!("+{added}"), self.theme.get(Meaning::DiffAdded)),
            Span::styled(
                format!(" -{removed} "),
                self.theme.get(Meaning::DiffRemoved),
            ),
        ]);
        if state.column() > 0 {
            spans.push(Span::styled(format!("· → {} ", state.column()), text));
        }
        if !state.file_list_shown()
            && let Some(path) = state.selected_path(self.model)
        {
            let at = state.selected_file() + 1;
            spans.push(Span::styled(format!("· {at}/{files} {path} "), text));
        }
        Line::from(spans)
    }
}

impl StatefulWidget for DiffView<'_> {
    type State = DiffViewState;

    fn render(self, area: Rect, buf: &mut Buffer, state: &mut DiffViewState) {
        let area = area.intersection(buf.area);
        let border = if self.focused {
            Meaning::BorderFocused
        } else {
            Meaning::Border
        };
        let block = Block::bordered()
            .border_type(BorderType::Rounded)
            .border_style(self.theme.get(border))
            .title(self.title_line(state));
        let inner = block.inner(area);
        block.render(area, buf);
        if self.model.is_empty() {
            state.fit(self.model, usize::from(inner.height));
            centred_note(buf, inner, EMPTY_NOTE, self.theme);
            return;
        }
        let layout = Layout::of(
            inner,
            self.model.files.len(),
            list_columns(self.model),
            state.file_list_shown(),
        );
        state.fit(self.model, usize::from(layout.body.height));
        if let Some(list) = layout.list {
            self.file_list(buf, list, state);
        }
        if let Some(separator) = layout.separator {
            let symbol = if separator.width == 1 { "│" } else { "─" };
            let style = self.theme.get(Meaning::Border);
            for position in separator.positions() {
                buf[position].set_symbol(symbol).set_style(style);
            }
        }
        self.body(buf, layout.body, state);
    }
}

impl DiffView<'_> {
    fn file_list(&self, buf: &mut Buffer, list: Rect, state: &mut DiffViewState) {
        let height = usize::from(list.height);
        let selected = state.selected_file();
        if selected < state.list_scroll {
            state.list_scroll = selected;
        } else if selected >= state.list_scroll + height {
            state.list_scroll = selected + 1 - height;
        }
        let last_start = self.model.files.len().saturating_sub(height);
        state.list_scroll = state.list_scroll.min(last_start);
        let files = self.model.files.iter().enumerate().skip(state.list_scroll);
        for ((index, file), y) in files.zip(list.top()..list.bottom()) {
            let mark = self.review.map(|review| {
                let (chosen, total) =
                    (0..file.hunks.len().max(1)).fold((0, 0), |(chosen, total), hunk| {
                        (
                            chosen + usize::from(review.is_included(index, hunk)),
                            total + 1,
                        )
                    });
                match chosen {
                    0 => "[ ] ",
                    _ if chosen == total => "[x] ",
                    _ => "[~] ",
                }
            });
            let row = Rect::new(list.x, y, list.width, 1);
            draw::file_entry(buf, row, file, index == selected, mark, self.theme);
        }
    }

    fn body(&self, buf: &mut Buffer, body: Rect, state: &DiffViewState) {
        let index = state.selected_file();
        let Some(file) = self.model.files.get(index) else {
            return;
        };
        let context = BodyContext {
            theme: self.theme,
            selected_hunk: Some(state.selected_hunk()),
            number_width: rows::number_width(file),
            review: self.review.map(|review| (review, index)),
            column: state.column(),
        };
        let rows = rows_from(file, state.scroll());
        for (row, y) in rows.zip(body.top()..body.bottom()) {
            draw::body_row(buf, Rect::new(body.x, y, body.width, 1), row, &context);
        }
    }
}

/// Where the parts of the pane go.
struct Layout {
    list: Option<Rect>,
    separator: Option<Rect>,
    body: Rect,
}

/// Columns the file list needs to show every entry whole: status letter,
/// path and counts, with a space between each.
fn list_columns(model: &DiffModel) -> u16 {
    let widest = model
        .files
        .iter()
        .map(|f| {
            let counts = if f.binary {
                3
            } else {
                digits(f.added) + digits(f.removed) + 3
            };
            2 + Span::raw(f.path.as_str()).width() + 1 + counts
        })
        .max()
        .unwrap_or(0);
    u16::try_from(widest).unwrap_or(u16::MAX)
}

fn digits(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |d| d as usize + 1)
}

impl Layout {
    fn of(inner: Rect, files: usize, wanted: u16, show_list: bool) -> Layout {
        let files = u16::try_from(files).unwrap_or(u16::MAX);
        if !show_list || inner.height == 0 || inner.width < 8 {
            return Layout {
                list: None,
                separator: None,
                body: inner,
            };
        }
        if inner.width >= WIDE_FROM {
            let width = wanted
                .clamp(LIST_COLUMNS, LIST_COLUMNS * 2)
                .min(inner.width / 3);
            let list = Rect::new(inner.x, inner.y, width, inner.height);
            let separator = Rect::new(inner.x + width, inner.y, 1, inner.height);
            let body_x = separator.right();
            let body = Rect::new(body_x, inner.y, inner.right() - body_x, inner.height);
            return Layout {
                list: Some(list),
                separator: Some(separator),
                body,
            };
        }
        if inner.height < 5 {
            return Layout {
                list: None,
                separator: None,
                body: inner,
            };
        }
        let height = files.min(inner.height / 3).max(1);
        let list = Rect::new(inner.x, inner.y, inner.width, height);
        let separator = Rect::new(inner.x, inner.y + height, inner.width, 1);
        let body_y = separator.bottom();
        let body = Rect::new(inner.x, body_y, inner.width, inner.bottom() - body_y);
        Layout {
            list: Some(list),
            separator: Some(separator),
            body,
        }
    }
}

fn centred_note(buf: &mut Buffer, inner: Rect, note: &str, theme: &Theme) {
    if inner.height == 0 {
        return;
    }
    let width = u16::try_from(Span::raw(note).width()).unwrap_or(u16::MAX);
    let x = inner.x + inner.width.saturating_sub(width) / 2;
    let y = inner.y + inner.height.saturating_sub(1) / 2;
    let style = theme.get(Meaning::Text).add_modifier(Modifier::DIM);
    Pen::new(buf, Rect::new(x, y, inner.right() - x, 1)).put(note, style);
}

/// Draws the diff pane: [`DiffView`] with the title "Diff".
pub fn render_diff(
    area: Rect,
    buf: &mut Buffer,
    model: &DiffModel,
    state: &mut DiffViewState,
    theme: &Theme,
    focused: bool,
    review: Option<&ReviewSelection>,
) {
    DiffView::new(model, theme)
        .focused(focused)
        .review(review)
        .render(area, buf, state);
}

/// The rows [`render_patch`] needs to show all of `model`.
pub fn patch_height(model: &DiffModel) -> usize {
    model.files.iter().map(|file| 1 + body_rows(file)).sum()
}

/// Draws the hunks of every file, each after a line naming the file, from row `scroll`
/// on; no border and no file list (the approval preview).
pub fn render_patch(area: Rect, buf: &mut Buffer, model: &DiffModel, scroll: usize, theme: &Theme) {
    let area = area.intersection(buf.area);
    if model.is_empty() {
        centred_note(buf, area, EMPTY_NOTE, theme);
        return;
    }
    let mut skip = scroll.min(patch_height(model).saturating_sub(1));
    let mut y = area.top();
    for file in &model.files {
        if y >= area.bottom() {
            break;
        }
        let rows = 1 + body_rows(file);
        if skip >= rows {
            skip -= rows;
            continue;
        }
        if skip == 0 {
            let row = Rect::new(area.x, y, area.width, 1);
            draw::file_entry(buf, row, file, false, None, theme);
            buf.set_style(row, Style::default().add_modifier(Modifier::BOLD));
            y += 1;
        }
        let context = BodyContext {
            theme,
            selected_hunk: None,
            number_width: rows::number_width(file),
            review: None,
            column: 0,
        };
        for (row, at) in rows_from(file, skip.saturating_sub(1)).zip(y..area.bottom()) {
            draw::body_row(buf, Rect::new(area.x, at, area.width, 1), row, &context);
            y = at + 1;
        }
        skip = 0;
    }
}
