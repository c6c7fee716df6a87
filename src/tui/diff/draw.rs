//! Drawing single rows of the diff viewer straight into a buffer, without allocating:
//! a file-list entry, a hunk header, a hunk line with its gutters, a note.

use std::ops::Range;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;

use super::model::{DiffLine, FileDiff, FileStatus, LineKind};
use super::review::ReviewSelection;
use super::rows::BodyRow;
use crate::tui::theme::{Meaning, Theme};

/// What a tab becomes on screen.
const TAB: &str = "    ";
/// The gutter mark of the selected hunk.
const SELECTED_MARK: &str = "▌";

/// Writes left to right along one row, clipping at the row's right edge.
pub(super) struct Pen<'b> {
    buf: &'b mut Buffer,
    x: u16,
    y: u16,
    right: u16,
    /// Characters still to leave out before writing (horizontal scroll).
    skip: usize,
}

impl<'b> Pen<'b> {
    /// A pen at the start of `row` (a one-row rectangle inside `buf`).
    pub(super) fn new(buf: &'b mut Buffer, row: Rect) -> Self {
        Pen {
            buf,
            x: row.x,
            y: row.y,
            right: row.right(),
            skip: 0,
        }
    }

    /// Moves to column `x` of the row.
    fn move_to(&mut self, x: u16) {
        self.x = x.min(self.right);
    }

    /// Columns left before the right edge.
    fn room(&self) -> usize {
        usize::from(self.right.saturating_sub(self.x))
    }

    /// Writes `text`, tabs as four spaces and control characters left out.
    pub(super) fn put(&mut self, text: &str, style: Style) {
        for (index, piece) in text.split('\t').enumerate() {
            if index > 0 && self.skip >= TAB.len() {
                self.skip -= TAB.len();
            } else if index > 0 && self.skip > 0 {
                let rest = &TAB[self.skip..];
                self.skip = 0;
                self.x = self
                    .buf
                    .set_stringn(self.x, self.y, rest, self.room(), style)
                    .0;
            } else if index > 0 {
                self.x = self
                    .buf
                    .set_stringn(self.x, self.y, TAB, self.room(), style)
                    .0;
            }
            if self.x >= self.right {
                return;
            }
            let piece = self.skipped(piece);
            self.x = self
                .buf
                .set_stringn(self.x, self.y, piece, self.room(), style)
                .0;
        }
    }

    /// What is left of `piece` after the characters still to skip.
    fn skipped<'t>(&mut self, piece: &'t str) -> &'t str {
        if self.skip == 0 {
            return piece;
        }
        match piece.char_indices().nth(self.skip) {
            Some((at, _)) => {
                self.skip = 0;
                &piece[at..]
            }
            None => {
                self.skip -= piece.chars().count();
                ""
            }
        }
    }

    /// Writes `text` with its `emphasis` ranges in `strong` and the rest in `base`.
    fn put_emphasised(
        &mut self,
        text: &str,
        emphasis: &[Range<usize>],
        base: Style,
        strong: Style,
    ) {
        let mut at = 0;
        for range in emphasis {
            if self.x >= self.right {
                return;
            }
            let (Some(before), Some(changed)) =
                (text.get(at..range.start), text.get(range.clone()))
            else {
                continue;
            };
            self.put(before, base);
            self.put(changed, strong);
            at = range.end;
        }
        if let Some(rest) = text.get(at..) {
            self.put(rest, base);
        }
    }

    /// Writes `number` right-aligned in `width` columns (blank for `None`).
    fn put_number(&mut self, number: Option<u32>, width: usize, style: Style) {
        let mut digits = [b' '; 10];
        let width = width.min(digits.len());
        if let Some(mut value) = number {
            for slot in digits[..width].iter_mut().rev() {
                *slot = b'0' + (value % 10) as u8;
                value /= 10;
                if value == 0 {
                    break;
                }
            }
        }
        self.put(std::str::from_utf8(&digits[..width]).unwrap_or(""), style);
    }
}

/// What every body row of one file needs to know.
pub(super) struct BodyContext<'a> {
    pub theme: &'a Theme,
    /// The hunk to mark in the gutter, if any.
    pub selected_hunk: Option<usize>,
    /// Columns for each line number.
    pub number_width: usize,
    /// In a review: the choices, and the index of this file.
    pub review: Option<(&'a ReviewSelection, usize)>,
    /// Characters of line text scrolled off to the left.
    pub column: usize,
}

impl BodyContext<'_> {
    /// The style of `meaning` in hunk `hunk`, dimmed when a review leaves the hunk out.
    fn style(&self, meaning: Meaning, hunk: usize) -> Style {
        let style = self.theme.get(meaning);
        match self.review {
            Some((review, file)) if !review.is_included(file, hunk) => {
                style.add_modifier(Modifier::DIM)
            }
            _ => style,
        }
    }
}

/// Draws one body row into `row` (a one-row rectangle).
pub(super) fn body_row(buf: &mut Buffer, row: Rect, body: BodyRow<'_>, context: &BodyContext<'_>) {
    let mut pen = Pen::new(buf, row);
    let hunk = match body {
        BodyRow::HunkHeader { hunk, .. } | BodyRow::Line { hunk, .. } => hunk,
        BodyRow::Note(text) => {
            pen.move_to(row.x + 1);
            let style = context.theme.get(Meaning::Text).add_modifier(Modifier::DIM);
            pen.put(text, style);
            return;
        }
    };
    let mark = if context.selected_hunk == Some(hunk) {
        SELECTED_MARK
    } else {
        " "
    };
    pen.put(mark, context.theme.get(Meaning::DiffHunk));
    match body {
        BodyRow::HunkHeader { hunk, header } => {
            let style = context.style(Meaning::DiffHunk, hunk);
            if let Some((review, file)) = context.review {
                let check = if review.is_included(file, hunk) {
                    "[x] "
                } else {
                    "[ ] "
                };
                pen.put(check, style);
            }
            pen.put(header, style);
        }
        BodyRow::Line { hunk, line } => hunk_line(&mut pen, hunk, line, context),
        BodyRow::Note(_) => {}
    }
}

/// Draws the gutters, sign and text of a hunk line.
fn hunk_line(pen: &mut Pen<'_>, hunk: usize, line: &DiffLine, context: &BodyContext<'_>) {
    let gutter = context.style(Meaning::Border, hunk);
    pen.put_number(line.old_no, context.number_width, gutter);
    pen.put(" ", gutter);
    pen.put_number(line.new_no, context.number_width, gutter);
    pen.put(" ", gutter);
    let (meaning, word) = match line.kind {
        LineKind::Added => (Meaning::DiffAdded, Meaning::DiffAddedWord),
        LineKind::Removed => (Meaning::DiffRemoved, Meaning::DiffRemovedWord),
        LineKind::Context => (Meaning::Text, Meaning::Text),
        LineKind::NoNewline => (Meaning::Border, Meaning::Border),
    };
    let base = context.style(meaning, hunk);
    let sign = match line.kind {
        LineKind::Added => "+",
        LineKind::Removed => "-",
        LineKind::Context => " ",
        LineKind::NoNewline => "\\ ",
    };
    pen.put(sign, base);
    pen.skip = context.column;
    pen.put_emphasised(&line.text, &line.emphasis, base, context.style(word, hunk));
    pen.skip = 0;
}

/// Draws one file-list entry into `row`: review mark, status letter, path (cut on the
/// left with `…` when too long) and `+N -M`; the selected entry in the selection style.
pub(super) fn file_entry(
    buf: &mut Buffer,
    row: Rect,
    file: &FileDiff,
    selected: bool,
    review_mark: Option<&str>,
    theme: &Theme,
) {
    let mut pen = Pen::new(buf, row);
    let text = theme.get(Meaning::Text);
    if let Some(mark) = review_mark {
        pen.put(mark, text);
    }
    let status_style = match file.status {
        FileStatus::Added => theme.get(Meaning::DiffAdded),
        FileStatus::Deleted => theme.get(Meaning::DiffRemoved),
        _ => theme.get(Meaning::DiffHunk),
    };
    let mut letter = [0u8; 4];
    pen.put(file.status.letter().encode_utf8(&mut letter), status_style);
    pen.put(" ", status_style);
    if file.touches_config() {
        pen.put("config! ", theme.get(Meaning::CheckFail));
    }
    let added = SignedCount::new(b'+', file.added);
    let removed = SignedCount::new(b'-', file.removed);
    let counts_width = if file.binary {
        3
    } else {
        added.as_str().len() + 1 + removed.as_str().len()
    };
    let show_counts = pen.room() >= counts_width + 1 + 6;
    let path_room = if show_counts {
        pen.room() - counts_width - 1
    } else {
        pen.room()
    };
    match cut_left(&file.path, path_room) {
        Some(tail) => {
            pen.put("…", text);
            pen.put(tail, text);
        }
        None => pen.put(&file.path, text),
    }
    if show_counts {
        let width = u16::try_from(counts_width).unwrap_or(u16::MAX);
        pen.move_to(row.right().saturating_sub(width));
        if file.binary {
            pen.put("bin", theme.get(Meaning::Border));
        } else {
            pen.put(added.as_str(), theme.get(Meaning::DiffAdded));
            pen.put(" ", text);
            pen.put(removed.as_str(), theme.get(Meaning::DiffRemoved));
        }
    }
    if selected {
        buf.set_style(row, theme.get(Meaning::Selection));
    }
}

/// The tail of `path` that fits in `width - 1` columns after a `…`, or `None` when
/// the whole path fits.
pub(super) fn cut_left(path: &str, width: usize) -> Option<&str> {
    if Span::raw(path).width() <= width {
        return None;
    }
    let room = width.saturating_sub(1);
    let mut used = 0;
    let mut start = path.len();
    for (at, c) in path.char_indices().rev() {
        used += Span::raw(&path[at..at + c.len_utf8()]).width();
        if used > room {
            break;
        }
        start = at;
    }
    Some(&path[start..])
}

/// `+N` or `-N`, formatted on the stack.
struct SignedCount {
    bytes: [u8; 24],
    start: usize,
}

impl SignedCount {
    fn new(sign: u8, mut value: usize) -> Self {
        let mut bytes = [0u8; 24];
        let mut start = bytes.len();
        loop {
            start -= 1;
            bytes[start] = b'0' + (value % 10) as u8;
            value /= 10;
            if value == 0 {
                break;
            }
        }
        start -= 1;
        bytes[start] = sign;
        SignedCount { bytes, start }
    }

    fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[self.start..]).unwrap_or("")
    }
}
