//! The most telling lines of a check's or a command's output — the names of
//! failing tests, the assertion, the error — picked out of text the model
//! would otherwise see only as a tail. Pure: text in, lines out.
//!
//! The output is hostile (whatever a command printed): every line kept is
//! cut to [`MAX_LINE_CHARS`], control characters and terminal escapes are
//! dropped, and the caller bounds how many lines it keeps.

use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// Characters of one kept line.
pub(crate) const MAX_LINE_CHARS: usize = 200;
/// Failing test names kept.
pub(crate) const MAX_TEST_NAMES: usize = 12;

/// What an output says about a failure.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Evidence {
    /// Failing tests, in order of appearance, without duplicates.
    pub failing_tests: Vec<String>,
    /// Failing test names found beyond those kept.
    #[serde(default)]
    pub more_tests: usize,
    /// The telling lines (failures, assertions, errors, summaries), in order
    /// of appearance.
    pub lines: Vec<String>,
    /// Telling lines found beyond those kept.
    #[serde(default)]
    pub more_lines: usize,
}

impl Evidence {
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.failing_tests.is_empty() && self.lines.is_empty()
    }
}

/// How telling a kind of line is; higher is kept first.
const TEST: u8 = 5;
const ASSERTION: u8 = 4;
const ERROR: u8 = 3;
const SUMMARY: u8 = 3;
const LOCATION: u8 = 2;

/// The index in [`TEST_NAMES`] of pytest's `____ test_name ____` header.
const PYTEST_HEADER: usize = 2;

/// Patterns whose first capture group names a failing test.
static TEST_NAMES: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // pytest: short summary, verbose line, section header.
        r"^(?:FAILED|ERROR) ([^\s(]\S*?)(?: - .*)?$",
        r"^(\S+::\S+) (?:FAILED|ERROR)\b",
        r"^_{3,} (?:ERROR (?:at \w+ of |collecting )?)?(\S+(?:\[[^\]]*\])?) _{3,}$",
        // unittest.
        r"^(?:FAIL|ERROR): (\S+ \([^)]+\))",
        // cargo test / libtest.
        r"^test (\S+) \.\.\. FAILED$",
        r"^---- (\S+) stdout ----$",
        // go test.
        r"^\s*--- FAIL: (\S+)",
        // jest, vitest, mocha-style marks.
        r"^\s*(?:✕|×|✗) (.+?)(?: \(\d+(?:\.\d+)? ?m?s\))?$",
        r"^\s*● (.+›.+)$",
    ]
    .iter()
    .filter_map(|p| Regex::new(p).ok())
    .collect()
});

static SUMMARY_LINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(\b\d+ (?:failed|failures?|errors?)\b|test result: FAILED|^FAILED \(|^FAIL\s+\S+|Tests?:.*\bfailed\b)",
    )
    .ok()
});

static LOCATION_LINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?:^\s*File "[^"]+", line \d+|^\s*[\w./-]+\.\w+:\d+(?::\d+)?:|^\s*--> [\w./-]+:\d+)"#,
    )
    .ok()
});

/// Picks out what `output` says about a failure: at most `max_lines` lines.
pub(crate) fn extract(output: &str, max_lines: usize) -> Evidence {
    let mut tests: Vec<String> = Vec::new();
    let mut candidates: Vec<(usize, u8, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (index, raw) in output.lines().enumerate() {
        let line = clean_line(raw);
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let (name, score) = classify(trimmed);
        if let Some(name) = name {
            add_test(&mut tests, name);
        }
        if let Some(score) = score
            && seen.insert(trimmed.to_string())
        {
            candidates.push((index, score, clip(trimmed, MAX_LINE_CHARS)));
        }
    }
    let total_lines = candidates.len();
    // The most telling first, earlier before later among equals; then back
    // into the order of the output.
    candidates.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    candidates.truncate(max_lines);
    candidates.sort_by_key(|c| c.0);
    let more_tests = tests.len().saturating_sub(MAX_TEST_NAMES);
    tests.truncate(MAX_TEST_NAMES);
    Evidence {
        failing_tests: tests,
        more_tests,
        more_lines: total_lines - candidates.len(),
        lines: candidates.into_iter().map(|c| c.2).collect(),
    }
}

/// Adds a failing test's name once: `path::test` and a bare `test` (a
/// pytest section header) are the same test, kept in the longer form.
fn add_test(tests: &mut Vec<String>, name: String) {
    for known in tests.iter_mut() {
        if *known == name || known.ends_with(&format!("::{name}")) {
            return;
        }
        if name.ends_with(&format!("::{known}")) {
            *known = name;
            return;
        }
    }
    tests.push(name);
}

/// The failing test a line names, and how telling the line is.
fn classify(line: &str) -> (Option<String>, Option<u8>) {
    for (index, pattern) in TEST_NAMES.iter().enumerate() {
        if let Some(name) = pattern.captures(line).and_then(|c| c.get(1)) {
            let name = clip(name.as_str().trim(), MAX_LINE_CHARS);
            // A pytest section header says nothing beyond the name.
            let score = (index != PYTEST_HEADER).then_some(TEST);
            return (Some(name), score);
        }
    }
    let lower = line.to_ascii_lowercase();
    let score = if line.starts_with("E ")
        || lower.contains("assert")
        || lower.contains("panicked at")
        || line.starts_with("left:")
        || line.starts_with("right:")
        || line.starts_with("Expected")
        || line.starts_with("Received")
        || lower.contains("expected") && (lower.contains(" got") || lower.contains("but"))
    {
        Some(ASSERTION)
    } else if is_error(line, &lower) {
        Some(ERROR)
    } else if SUMMARY_LINE.as_ref().is_some_and(|r| r.is_match(line)) {
        Some(SUMMARY)
    } else if LOCATION_LINE.as_ref().is_some_and(|r| r.is_match(line)) {
        Some(LOCATION)
    } else {
        None
    };
    (None, score)
}

fn is_error(line: &str, lower: &str) -> bool {
    const MARKS: [&str; 12] = [
        "error:",
        "error[",
        "exception",
        "traceback (most recent call last)",
        "fatal:",
        "undefined reference",
        "cannot find",
        "no such file",
        "segmentation fault",
        "syntaxerror",
        "command not found",
        "not defined",
    ];
    MARKS.iter().any(|m| lower.contains(m))
        || line
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .any(|word| word.len() > 5 && word.ends_with("Error"))
}

/// A line without terminal escapes or control characters.
fn clean_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len().min(4 * MAX_LINE_CHARS));
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ params final-byte; other escapes: ESC + one char.
            if chars.peek() == Some(&'[') {
                chars.next();
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        if c == '\t' {
            out.push(' ');
        } else if !c.is_control() {
            out.push(c);
        }
        // Enough for a kept line even after trimming.
        if out.len() > 4 * MAX_LINE_CHARS {
            break;
        }
    }
    out
}

/// The first `max` characters of `s`, and `…` when more followed.
pub(crate) fn clip(s: &str, max: usize) -> String {
    crate::terminal_text::cut_to(s, max.saturating_add(1))
}

#[cfg(test)]
#[path = "evidence_tests.rs"]
mod tests;
