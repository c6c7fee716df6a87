//! `ripgrep`: regex search with ripgrep's own engine (`grep-regex`,
//! `grep-searcher`) over files listed by the confined walker and read
//! through [`WorkspaceRoot`].

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::overrides::{Override, OverrideBuilder};

use super::list_tree::symlink_start;
use super::paths::{self, display};
use super::read_file::is_binary;
use super::walk::{ConfinedWalk, Visit};
use super::{RipgrepArgs, ToolError, ToolOutput};
use crate::workspace::{EntryKind, WorkspaceRoot};

pub(crate) const MAX_MATCHES: usize = 200;
/// Files larger than this are not searched (and are reported).
const MAX_SEARCH_BYTES: u64 = 8 << 20;
const MAX_MATCH_LINE_CHARS: usize = 300;
const WALK_DEPTH: usize = 64;

#[derive(Default)]
struct Found {
    lines: Vec<String>,
    total: usize,
    files: BTreeSet<String>,
    skipped_binary: usize,
    skipped_large: Vec<String>,
}

pub fn ripgrep(args: &RipgrepArgs, root: &WorkspaceRoot) -> Result<ToolOutput, ToolError> {
    let rel = paths::relative(&args.path)?;
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive)
        .build(&args.pattern)
        .map_err(|e| {
            ToolError::refused(format!(
                "invalid regular expression `{}`: {e}\nEscape special characters such as ( ) [ ] {{ }} . * + ? | \\ with a backslash, or search for a simpler pattern",
                args.pattern
            ))
        })?;
    let globs = build_globs(root, args.glob.as_deref())?;
    let mut found = Found::default();
    let meta = paths::metadata(root, &rel)?;
    match meta.kind {
        EntryKind::File => search_file(root, &rel, &matcher, &mut found),
        EntryKind::Dir => {
            ConfinedWalk::new(root, WALK_DEPTH).run(&rel, &mut |entry| {
                if entry.kind != EntryKind::File {
                    return Visit::Continue;
                }
                if let Some(globs) = &globs
                    && globs
                        .matched(root.path().join(&entry.rel), false)
                        .is_ignore()
                {
                    return Visit::Continue;
                }
                search_file(root, &entry.rel, &matcher, &mut found);
                Visit::Continue
            })?;
        }
        EntryKind::Symlink => return Err(symlink_start(root, &rel)),
        EntryKind::Special => {
            return Err(ToolError::BadPath {
                path: display(&rel),
                problem: "is a special file and cannot be searched".into(),
            });
        }
    }
    Ok(render(args, &rel, found))
}

fn build_globs(root: &WorkspaceRoot, glob: Option<&str>) -> Result<Option<Override>, ToolError> {
    let Some(glob) = glob.map(str::trim).filter(|g| !g.is_empty()) else {
        return Ok(None);
    };
    let mut builder = OverrideBuilder::new(root.path());
    builder.add(glob).map_err(|e| {
        ToolError::refused(format!(
            "invalid glob `{glob}`: {e}; use a pattern such as `*.py` or `src/**/*.rs`"
        ))
    })?;
    builder
        .build()
        .map(Some)
        .map_err(|e| ToolError::refused(format!("invalid glob `{glob}`: {e}")))
}

fn search_file(
    root: &WorkspaceRoot,
    rel: &Path,
    matcher: &grep_regex::RegexMatcher,
    found: &mut Found,
) {
    let shown = display(rel);
    let Ok(meta) = root.metadata(rel) else { return };
    if meta.len > MAX_SEARCH_BYTES {
        found.skipped_large.push(shown);
        return;
    }
    let Ok(bytes) = root.read(rel, MAX_SEARCH_BYTES) else {
        return;
    };
    if is_binary(&bytes) {
        found.skipped_binary += 1;
        return;
    }
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let mut in_file = 0usize;
    let _ = searcher.search_slice(
        matcher,
        &bytes,
        Lossy(|line_number, line| {
            in_file += 1;
            found.total += 1;
            if found.lines.len() < MAX_MATCHES {
                let text = line.trim_end_matches(['\n', '\r']);
                let text = if text.chars().count() > MAX_MATCH_LINE_CHARS {
                    let cut: String = text.chars().take(MAX_MATCH_LINE_CHARS).collect();
                    format!("{cut} [… line cut]")
                } else {
                    text.to_string()
                };
                found.lines.push(format!("{shown}:{line_number}:{text}"));
            }
            Ok(true)
        }),
    );
    if in_file > 0 {
        found.files.insert(display(rel));
    }
}

fn render(args: &RipgrepArgs, rel: &Path, found: Found) -> ToolOutput {
    let mut full = String::new();
    if found.total == 0 {
        let _ = writeln!(
            full,
            "no matches for `{}` under {}{}",
            args.pattern,
            display(rel),
            args.glob
                .as_deref()
                .map(|g| format!(" (glob `{g}`)"))
                .unwrap_or_default()
        );
    }
    for line in &found.lines {
        full.push_str(line);
        full.push('\n');
    }
    if found.total > found.lines.len() {
        let _ = writeln!(
            full,
            "[{} more matches omitted; showing the first {MAX_MATCHES} — narrow the pattern, path or glob]",
            found.total - found.lines.len()
        );
    }
    if found.skipped_binary > 0 {
        let _ = writeln!(full, "[{} binary files skipped]", found.skipped_binary);
    }
    if !found.skipped_large.is_empty() {
        let _ = writeln!(
            full,
            "[files over 8 MiB not searched: {}]",
            found.skipped_large.join(", ")
        );
    }
    let summary = format!("{} matches in {} files", found.total, found.files.len());
    ToolOutput::success(full, summary)
}
