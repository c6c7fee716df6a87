//! Word-level highlights: which parts of a changed line actually changed.
//!
//! In each hunk, a run of removed lines is paired line by line with the run of added
//! lines that follows it. Each pair is diffed as words (identifiers, numbers, single
//! punctuation characters and runs of whitespace) and the changed words become the
//! lines' emphasis. Pairs too different to read as edits of each other, and very long
//! lines, get none: the whole line is then simply added or removed.

use std::ops::Range;

use similar::{Algorithm, DiffTag};

use super::model::{DiffLine, Hunk, LineKind};

/// Byte ranges of one line.
type Ranges = Vec<Range<usize>>;

/// Lines longer than this (in bytes) get no emphasis, to keep parsing fast.
const MAX_LINE_BYTES: usize = 500;

/// Pairs whose word similarity is below this get no emphasis.
const MIN_RATIO: f32 = 0.3;

/// Fills the emphasis of every paired removed and added line of `hunk`.
pub(super) fn emphasise(hunk: &mut Hunk) {
    let lines = &mut hunk.lines;
    let mut at = 0;
    while at < lines.len() {
        if lines[at].kind != LineKind::Removed {
            at += 1;
            continue;
        }
        let removed = run_of(lines, at, LineKind::Removed);
        let added = run_of(
            lines,
            removed.last().map_or(at, |last| last + 1),
            LineKind::Added,
        );
        at = added.last().or(removed.last()).map_or(at, |last| last + 1);
        for (&old, &new) in removed.iter().zip(&added) {
            if let Some((old_ranges, new_ranges)) =
                changed_words(&lines[old].text, &lines[new].text)
            {
                lines[old].emphasis = old_ranges;
                lines[new].emphasis = new_ranges;
            }
        }
    }
}

/// Indices of the lines of `kind` from `start` on, stepping over `\ No newline` markers.
fn run_of(lines: &[DiffLine], start: usize, kind: LineKind) -> Vec<usize> {
    let mut run = Vec::new();
    for (index, line) in lines.iter().enumerate().skip(start) {
        if line.kind == kind {
            run.push(index);
        } else if line.kind != LineKind::NoNewline {
            break;
        }
    }
    run
}

/// Byte ranges of the changed words of `old` and of `new`, or `None` when the lines
/// are too long or too different for word highlights to help.
pub(super) fn changed_words(old: &str, new: &str) -> Option<(Ranges, Ranges)> {
    let old = old.strip_suffix('\r').unwrap_or(old);
    let new = new.strip_suffix('\r').unwrap_or(new);
    if old.len() > MAX_LINE_BYTES || new.len() > MAX_LINE_BYTES || old == new {
        return None;
    }
    let old_words = words(old);
    let new_words = words(new);
    let old_tokens: Vec<&str> = old_words.iter().map(|range| &old[range.clone()]).collect();
    let new_tokens: Vec<&str> = new_words.iter().map(|range| &new[range.clone()]).collect();
    let ops = similar::capture_diff_slices(Algorithm::Patience, &old_tokens, &new_tokens);
    if similar::diff_ratio(&ops, old_tokens.len(), new_tokens.len()) < MIN_RATIO {
        return None;
    }
    let mut old_ranges = Vec::new();
    let mut new_ranges = Vec::new();
    for op in &ops {
        let (tag, old_span, new_span) = op.as_tag_tuple();
        if matches!(tag, DiffTag::Delete | DiffTag::Replace) {
            push_merged(&mut old_ranges, old, &old_words, old_span);
        }
        if matches!(tag, DiffTag::Insert | DiffTag::Replace) {
            push_merged(&mut new_ranges, new, &new_words, new_span);
        }
    }
    Some((old_ranges, new_ranges))
}

/// Adds the bytes of `tokens` (indices into `words`) to `ranges`, joining it to the
/// previous range when only whitespace lies between them.
fn push_merged(
    ranges: &mut Vec<Range<usize>>,
    text: &str,
    words: &[Range<usize>],
    tokens: Range<usize>,
) {
    let (Some(first), Some(last)) = (words.get(tokens.start), tokens.end.checked_sub(1)) else {
        return;
    };
    let Some(last) = words.get(last) else {
        return;
    };
    let range = first.start..last.end;
    if let Some(previous) = ranges.last_mut() {
        let gap = text.get(previous.end..range.start).unwrap_or("x");
        if gap.chars().all(char::is_whitespace) {
            previous.end = range.end;
            return;
        }
    }
    ranges.push(range);
}

/// Splits `text` into words: runs of letters, digits and `_`, runs of whitespace,
/// and every other character on its own.
pub(super) fn words(text: &str) -> Vec<Range<usize>> {
    #[derive(PartialEq)]
    enum Class {
        Word,
        Space,
        Other,
    }
    let class = |c: char| {
        if c.is_alphanumeric() || c == '_' {
            Class::Word
        } else if c.is_whitespace() {
            Class::Space
        } else {
            Class::Other
        }
    };
    let mut words: Vec<Range<usize>> = Vec::with_capacity(text.len() / 3 + 1);
    let mut previous: Option<Class> = None;
    for (at, c) in text.char_indices() {
        let current = class(c);
        let joins = current != Class::Other && previous.as_ref() == Some(&current);
        match words.last_mut() {
            Some(last) if joins => last.end = at + c.len_utf8(),
            _ => words.push(at..at + c.len_utf8()),
        }
        previous = Some(current);
    }
    words
}
