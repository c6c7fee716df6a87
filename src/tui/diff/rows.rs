//! The rows a file's body takes on screen, so that views and scrolling agree.
//!
//! A file with hunks shows, per hunk, its `@@` header and then its lines. A binary file
//! shows one note; another file without hunks (a mode change, a pure rename, an empty
//! new file) shows a note and the header lines that say what changed. Finding a row
//! walks the hunks, never the lines, so it costs little even for huge diffs.

use super::model::{DiffLine, FileDiff};

/// The note shown instead of a binary file's content.
pub(super) const BINARY_NOTE: &str = "binary file; not shown";
/// The note shown for a file whose change has no hunks.
pub(super) const NO_CONTENT_NOTE: &str = "no content changes";

/// One row of a file's body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BodyRow<'m> {
    HunkHeader { hunk: usize, header: &'m str },
    Line { hunk: usize, line: &'m DiffLine },
    Note(&'m str),
}

/// How many rows the body of `file` takes.
pub(super) fn body_rows(file: &FileDiff) -> usize {
    if file.binary {
        1
    } else if file.hunks.is_empty() {
        1 + file.meta_lines().count()
    } else {
        file.hunks.iter().map(|hunk| 1 + hunk.lines.len()).sum()
    }
}

/// The row of hunk `hunk`'s header (the body's end when there is no such hunk).
pub(super) fn hunk_first_row(file: &FileDiff, hunk: usize) -> usize {
    file.hunks
        .iter()
        .take(hunk)
        .map(|hunk| 1 + hunk.lines.len())
        .sum()
}

/// The hunk that row `row` belongs to (the last one for rows past the end; 0 without hunks).
pub(super) fn hunk_at_row(file: &FileDiff, row: usize) -> usize {
    let mut first = 0;
    for (index, hunk) in file.hunks.iter().enumerate() {
        let next = first + 1 + hunk.lines.len();
        if row < next {
            return index;
        }
        first = next;
    }
    file.hunks.len().saturating_sub(1)
}

/// The rows of `file`'s body from row `start` on.
pub(super) fn rows_from(file: &FileDiff, start: usize) -> BodyRows<'_> {
    if file.binary || file.hunks.is_empty() {
        return BodyRows {
            file,
            hunk: 0,
            line: None,
            note: start,
        };
    }
    let hunk = hunk_at_row(file, start);
    let offset = start.saturating_sub(hunk_first_row(file, hunk));
    let (hunk, line) = match offset {
        0 => (hunk, None),
        offset => (hunk, Some(offset - 1)),
    };
    BodyRows {
        file,
        hunk,
        line,
        note: 0,
    }
}

/// Iterator over a file's body rows; see [`rows_from`].
pub(super) struct BodyRows<'m> {
    file: &'m FileDiff,
    hunk: usize,
    /// `None` for the hunk's header, else the index of the next line.
    line: Option<usize>,
    note: usize,
}

impl<'m> Iterator for BodyRows<'m> {
    type Item = BodyRow<'m>;

    fn next(&mut self) -> Option<BodyRow<'m>> {
        let file = self.file;
        if file.binary || file.hunks.is_empty() {
            let index = self.note;
            self.note += 1;
            if file.binary {
                return (index == 0).then_some(BodyRow::Note(BINARY_NOTE));
            }
            return match index {
                0 => Some(BodyRow::Note(NO_CONTENT_NOTE)),
                _ => file.meta_lines().nth(index - 1).map(BodyRow::Note),
            };
        }
        loop {
            let hunk = file.hunks.get(self.hunk)?;
            match self.line {
                None => {
                    self.line = Some(0);
                    return Some(BodyRow::HunkHeader {
                        hunk: self.hunk,
                        header: &hunk.header,
                    });
                }
                Some(index) => {
                    if let Some(line) = hunk.lines.get(index) {
                        self.line = Some(index + 1);
                        return Some(BodyRow::Line {
                            hunk: self.hunk,
                            line,
                        });
                    }
                    self.hunk += 1;
                    self.line = None;
                }
            }
        }
    }
}

/// How many columns the widest line number of `file` needs.
pub(super) fn number_width(file: &FileDiff) -> usize {
    let last = file.hunks.iter().fold(0u32, |widest, hunk| {
        widest
            .max(hunk.old_start.saturating_add(hunk.old_len))
            .max(hunk.new_start.saturating_add(hunk.new_len))
    });
    digits(last)
}

/// The number of decimal digits of `value` (1 for 0).
pub(super) fn digits(mut value: u32) -> usize {
    let mut count = 1;
    while value >= 10 {
        value /= 10;
        count += 1;
    }
    count
}
