//! A unified-diff parser and applier for one file, written for patches
//! that models write: hunk counts are checked loosely (the body decides),
//! context may differ in trailing whitespace, and a hunk is looked for near
//! the line its header names, then anywhere after the previous hunk.

use std::fmt::Write as _;

/// One line of a hunk body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The header as written (`@@ -3,4 +3,5 @@ fn x`).
    pub header: String,
    /// 1-based first old line named by the header (0 when absent).
    pub old_start: usize,
    pub lines: Vec<HunkLine>,
    /// `\ No newline at end of file` followed the last old-side line.
    pub old_no_newline: bool,
    /// `\ No newline at end of file` followed the last new-side line.
    pub new_no_newline: bool,
}

impl Hunk {
    pub(crate) fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Remove(t) => Some(t.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    pub(crate) fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(t) | HunkLine::Add(t) => Some(t.as_str()),
                HunkLine::Remove(_) => None,
            })
            .collect()
    }
}

/// A parsed patch of one file. A `None` path is `/dev/null`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePatch {
    /// Whether `---`/`+++` headers were present at all.
    pub has_headers: bool,
    pub old_path: Option<String>,
    pub new_path: Option<String>,
    pub hunks: Vec<Hunk>,
}

/// Parses the unified diff of one file.
pub fn parse_unified_diff(patch: &str) -> Result<FilePatch, String> {
    let lines: Vec<&str> = patch.lines().collect();
    let (mut index, old_path, new_path, has_headers) = parse_preamble(&lines)?;
    let mut hunks = Vec::new();
    while index < lines.len() {
        let header = lines[index];
        if header.starts_with("--- ") || header.starts_with("diff ") {
            return Err(
                "the patch touches more than one file; edit_file changes one file a call — send one patch per file".into(),
            );
        }
        if !header.starts_with("@@") {
            return Err(format!(
                "line {}: expected a hunk header like `@@ -12,5 +12,6 @@`, found `{header}`",
                index + 1
            ));
        }
        let mut hunk = Hunk {
            header: header.to_string(),
            old_start: parse_old_start(header)?,
            lines: Vec::new(),
            old_no_newline: false,
            new_no_newline: false,
        };
        index += 1;
        // Empty lines (no leading space) at the end of the hunk, so far.
        let mut bare_at_end = 0;
        // The lines the header says are still to come, when it says: a
        // removed `-- x` and an added `++ y` look like the next file's
        // headers, and only the counts tell them apart.
        let mut to_come = parse_counts(header);
        while index < lines.len() {
            let line = lines[index];
            bare_at_end = if line.is_empty() { bare_at_end + 1 } else { 0 };
            if line.starts_with("@@") || line.starts_with("diff ") {
                break;
            }
            let pending = to_come.is_some_and(|(old, new)| old > 0 || new > 0);
            if !pending
                && line.starts_with("--- ")
                && lines.get(index + 1).is_some_and(|l| l.starts_with("+++ "))
            {
                break;
            }
            if let Some((old, new)) = to_come.as_mut() {
                match line.as_bytes().first() {
                    Some(b'+') => *new = new.saturating_sub(1),
                    Some(b'-') => *old = old.saturating_sub(1),
                    Some(b'\\') => {}
                    _ => {
                        *old = old.saturating_sub(1);
                        *new = new.saturating_sub(1);
                    }
                }
            }
            push_line(&mut hunk, line, index)?;
            index += 1;
        }
        // Empty lines at the very end are trailing blank lines of the
        // message, not context; a context line written as one space is.
        while index >= lines.len()
            && bare_at_end > 0
            && matches!(hunk.lines.last(), Some(HunkLine::Context(t)) if t.is_empty())
        {
            hunk.lines.pop();
            bare_at_end -= 1;
        }
        if !hunk
            .lines
            .iter()
            .any(|l| matches!(l, HunkLine::Add(_) | HunkLine::Remove(_)))
        {
            return Err(format!(
                "hunk `{}` changes nothing (no '+' or '-' lines)",
                hunk.header
            ));
        }
        hunks.push(hunk);
    }
    if hunks.is_empty() {
        return Err("the patch has no hunks; each change needs a `@@ -start,count +start,count @@` header followed by lines".into());
    }
    Ok(FilePatch {
        has_headers,
        old_path,
        new_path,
        hunks,
    })
}

/// The preamble before the first hunk (`diff --git`, `index`, mode lines,
/// then `---`/`+++`): where the hunks begin, the old and new paths, and
/// whether the headers were there.
fn parse_preamble(lines: &[&str]) -> Result<(usize, Option<String>, Option<String>, bool), String> {
    let mut index = 0;
    let (mut old_path, mut new_path, mut has_headers) = (None, None, false);
    while index < lines.len() && !lines[index].starts_with("@@") {
        let line = lines[index];
        if let Some(rest) = line.strip_prefix("--- ") {
            let Some(next) = lines.get(index + 1).and_then(|l| l.strip_prefix("+++ ")) else {
                return Err(format!(
                    "line {}: a `--- old` header must be followed by a `+++ new` header",
                    index + 1
                ));
            };
            old_path = header_path(rest);
            new_path = header_path(next);
            has_headers = true;
            index += 2;
            continue;
        }
        if line.starts_with("+++ ") {
            return Err(format!(
                "line {}: `+++` header without a `---` header before it",
                index + 1
            ));
        }
        index += 1;
    }
    Ok((index, old_path, new_path, has_headers))
}

/// Adds hunk line `line` (at `index`) to `hunk`.
fn push_line(hunk: &mut Hunk, line: &str, index: usize) -> Result<(), String> {
    if line.starts_with('\\') {
        match hunk.lines.last() {
            Some(HunkLine::Remove(_)) => hunk.old_no_newline = true,
            Some(HunkLine::Add(_)) => hunk.new_no_newline = true,
            Some(HunkLine::Context(_)) => {
                hunk.old_no_newline = true;
                hunk.new_no_newline = true;
            }
            None => {}
        }
    } else if let Some(text) = line.strip_prefix('+') {
        hunk.lines.push(HunkLine::Add(text.to_string()));
    } else if let Some(text) = line.strip_prefix('-') {
        hunk.lines.push(HunkLine::Remove(text.to_string()));
    } else if let Some(text) = line.strip_prefix(' ') {
        hunk.lines.push(HunkLine::Context(text.to_string()));
    } else if line.is_empty() {
        // An empty context line whose leading space was stripped.
        hunk.lines.push(HunkLine::Context(String::new()));
    } else {
        return Err(format!(
            "line {}: hunk lines must start with ' ' (context), '-' (remove) or '+' (add); found `{line}`",
            index + 1
        ));
    }
    Ok(())
}

/// `a/src/x.rs\t2024-…` → `Some("src/x.rs")`-ish; `/dev/null` → `None`.
/// The `a/`/`b/` prefix is kept here and stripped when compared.
fn header_path(rest: &str) -> Option<String> {
    let path = rest.split('\t').next().unwrap_or(rest).trim();
    let path = path.trim_matches('"');
    if path == "/dev/null" {
        None
    } else {
        Some(path.to_string())
    }
}

/// The old and new line counts of a hunk header (`@@ -3,4 +3,5 @@`; a
/// missing count is 1), if the header has both ranges.
fn parse_counts(header: &str) -> Option<(usize, usize)> {
    let mut words = header.trim_start_matches('@').split_whitespace();
    let count = |word: Option<&str>, sign: char| -> Option<usize> {
        let range = word?.strip_prefix(sign)?;
        match range.split_once(',') {
            Some((start, count)) => {
                start.parse::<usize>().ok()?;
                count.parse().ok()
            }
            None => range.parse::<usize>().ok().map(|_| 1),
        }
    };
    Some((count(words.next(), '-')?, count(words.next(), '+')?))
}

fn parse_old_start(header: &str) -> Result<usize, String> {
    let body = header.trim_start_matches('@').trim();
    let Some(old) = body
        .split_whitespace()
        .next()
        .filter(|w| w.starts_with('-'))
    else {
        return Ok(0);
    };
    old[1..]
        .split(',')
        .next()
        .unwrap_or("")
        .parse()
        .map_err(|_| format!("hunk header `{header}`: the old range `{old}` is not `-start,count`"))
}

/// A file's text as lines, remembering its line ending and final newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextLines {
    pub lines: Vec<String>,
    pub final_newline: bool,
    pub crlf: bool,
}

impl TextLines {
    pub fn parse(text: &str) -> Self {
        let crlf = text.contains("\r\n");
        let final_newline = text.ends_with('\n');
        let lines = text
            .lines()
            .map(|l| {
                if crlf {
                    l.strip_suffix('\r').unwrap_or(l).to_string()
                } else {
                    l.to_string()
                }
            })
            .collect();
        Self {
            lines,
            final_newline,
            crlf,
        }
    }

    pub fn render(&self) -> String {
        let newline = if self.crlf { "\r\n" } else { "\n" };
        let mut out = self.lines.join(newline);
        if self.final_newline && !self.lines.is_empty() {
            out.push_str(newline);
        }
        out
    }
}

/// Why a hunk did not apply, with the lines to show the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HunkMismatch {
    pub hunk_number: usize,
    pub message: String,
}

/// Applies every hunk to `file`, or none: returns the new text lines.
pub(crate) fn apply_hunks(file: &TextLines, hunks: &[Hunk]) -> Result<TextLines, HunkMismatch> {
    let mut result: Vec<String> = Vec::with_capacity(file.lines.len());
    let mut final_newline = file.final_newline || file.lines.is_empty();
    let mut cursor = 0usize; // next unconsumed line of the old file
    let mut shift: isize = 0; // where earlier hunks were found vs. their headers
    for (i, hunk) in hunks.iter().enumerate() {
        let old = hunk.old_lines();
        let expected = expected_index(hunk, &old, shift, file.lines.len());
        let at = find_block(&file.lines, &old, expected, cursor).ok_or_else(|| HunkMismatch {
            hunk_number: i + 1,
            message: mismatch_message(file, hunk, i + 1, hunks.len(), expected, cursor),
        })?;
        shift += at as isize - expected as isize;
        result.extend(file.lines[cursor..at].iter().cloned());
        // Context lines keep the file's own text (they may differ from the
        // patch in trailing whitespace).
        let mut old_index = at;
        for line in &hunk.lines {
            match line {
                HunkLine::Context(_) => {
                    result.push(file.lines[old_index].clone());
                    old_index += 1;
                }
                HunkLine::Remove(_) => old_index += 1,
                HunkLine::Add(text) => result.push(text.clone()),
            }
        }
        cursor = at + old.len();
        if cursor == file.lines.len() {
            if hunk.new_no_newline {
                final_newline = false;
            } else if hunk.old_no_newline {
                final_newline = true;
            }
        }
    }
    result.extend(file.lines[cursor..].iter().cloned());
    Ok(TextLines {
        lines: result,
        final_newline,
        crlf: file.crlf,
    })
}

/// The 0-based index where the header says the hunk starts. For a pure
/// insertion, `-N,0` means "after line N".
fn expected_index(hunk: &Hunk, old: &[&str], shift: isize, len: usize) -> usize {
    let base = if old.is_empty() {
        hunk.old_start
    } else {
        hunk.old_start.saturating_sub(1)
    };
    (base as isize + shift).clamp(0, len as isize) as usize
}

/// Where `block` occurs at or after `from`, nearest to `expected`: first
/// exactly, then ignoring trailing whitespace.
fn find_block(lines: &[String], block: &[&str], expected: usize, from: usize) -> Option<usize> {
    if block.is_empty() {
        return Some(expected.max(from).min(lines.len()));
    }
    if block.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - block.len();
    let exact = |at: usize| {
        lines[at..at + block.len()]
            .iter()
            .zip(block)
            .all(|(a, b)| a == b)
    };
    let loose = |at: usize| {
        lines[at..at + block.len()]
            .iter()
            .zip(block)
            .all(|(a, b)| a.trim_end() == b.trim_end())
    };
    let candidates = || nearest_first(expected.clamp(from, last_start.max(from)), from, last_start);
    candidates()
        .find(|&at| exact(at))
        .or_else(|| candidates().find(|&at| loose(at)))
}

/// `from..=last` ordered by distance from `center`.
fn nearest_first(center: usize, from: usize, last: usize) -> impl Iterator<Item = usize> {
    let span = last.saturating_sub(from) + 1;
    (0..=span).flat_map(move |d| {
        let below = center.checked_sub(d).filter(|&at| at >= from && d > 0);
        let above = Some(center + d).filter(|&at| at <= last && at >= from);
        below.into_iter().chain(above)
    })
}

fn mismatch_message(
    file: &TextLines,
    hunk: &Hunk,
    number: usize,
    count: usize,
    expected: usize,
    cursor: usize,
) -> String {
    let old = hunk.old_lines();
    let mut out = format!(
        "hunk {number} of {count} (`{}`) does not match the file: its context and '-' lines are not present{}.\n",
        hunk.header,
        if number > 1 {
            " after the previous hunk"
        } else {
            ""
        }
    );
    out.push_str("The hunk expects these lines:\n");
    for line in &old {
        let _ = writeln!(out, "      | {line}");
    }
    let (at, matching) = best_partial_match(&file.lines, &old, cursor);
    let center = if matching > 0 { at } else { expected };
    let first = center.saturating_sub(3);
    let last = (center + old.len() + 3).min(file.lines.len());
    if file.lines.is_empty() {
        out.push_str("The file is empty.\n");
    } else {
        let _ = writeln!(
            out,
            "Lines actually present at {}-{} ({}):",
            first + 1,
            last.max(first + 1),
            if matching > 0 {
                format!("the closest match, {matching} of {} lines equal", old.len())
            } else {
                "where the header points".to_string()
            }
        );
        for (i, line) in file.lines.iter().enumerate().take(last).skip(first) {
            let _ = writeln!(out, "{:>6}| {line}", i + 1);
        }
    }
    out.push_str(
        "No change was made (all hunks apply or none). Copy the context lines exactly from the file (read_file shows them) and send the corrected patch.\n",
    );
    out
}

/// The start (at or after `from`) where most lines of `block` agree.
fn best_partial_match(lines: &[String], block: &[&str], from: usize) -> (usize, usize) {
    let mut best = (from, 0);
    if block.is_empty() {
        return best;
    }
    for at in from..lines.len() {
        let score = block
            .iter()
            .enumerate()
            .filter(|(i, b)| lines.get(at + i).is_some_and(|l| l.trim() == b.trim()))
            .count();
        if score > best.1 {
            best = (at, score);
        }
    }
    best
}

#[cfg(test)]
#[path = "unified_diff_tests.rs"]
mod tests;
