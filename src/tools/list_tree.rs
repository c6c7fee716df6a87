//! `list_tree`: a bounded, ignore-aware tree of a workspace directory.

use std::fmt::Write as _;
use std::path::Path;

use super::paths::{self, display};
use super::walk::{ConfinedWalk, Visit};
use super::{ListTreeArgs, ToolError, ToolOutput};
use crate::workspace::{EntryKind, WorkspaceRoot};

pub(crate) const MAX_TREE_ENTRIES: usize = 400;
const MAX_DEPTH: usize = 12;

pub fn list_tree(args: &ListTreeArgs, root: &WorkspaceRoot) -> Result<ToolOutput, ToolError> {
    let rel = paths::relative(&args.path)?;
    ensure_walkable_dir(root, &rel)?;
    let max_depth = args.max_depth.clamp(1, MAX_DEPTH);
    let mut listing = String::new();
    let mut entries = 0usize;
    let mut truncated = false;
    let stats = ConfinedWalk::new(root, max_depth).run(&rel, &mut |entry| {
        if entries >= MAX_TREE_ENTRIES {
            truncated = true;
            return Visit::Stop;
        }
        entries += 1;
        let indent = "  ".repeat(entry.depth - 1);
        let _ = match entry.kind {
            EntryKind::Dir => writeln!(listing, "{indent}{}/", entry.name),
            EntryKind::Symlink => {
                let target = root
                    .read_link(&entry.rel)
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| "?".into());
                writeln!(
                    listing,
                    "{indent}{} -> {target}  (symlink, not followed)",
                    entry.name
                )
            }
            EntryKind::Special => writeln!(listing, "{indent}{}  (special file)", entry.name),
            EntryKind::File => writeln!(listing, "{indent}{}", entry.name),
        };
        Visit::Continue
    })?;
    let mut full = format!("{}/ (depth {max_depth})\n", display(&rel));
    if entries == 0 {
        full.push_str("(empty, or everything in it is ignored)\n");
    }
    full.push_str(&listing);
    if truncated {
        let _ = writeln!(
            full,
            "[listing stopped at {MAX_TREE_ENTRIES} entries; list a subdirectory or lower max_depth to see the rest]"
        );
    }
    if stats.unreadable > 0 {
        let _ = writeln!(full, "[{} directories could not be read]", stats.unreadable);
    }
    let summary = if truncated {
        format!("{entries} entries (truncated)")
    } else {
        format!("{entries} entries")
    };
    Ok(ToolOutput::success(full, summary))
}

/// Refuses a start path that is not a directory reached without symlinks.
pub(crate) fn ensure_walkable_dir(root: &WorkspaceRoot, rel: &Path) -> Result<(), ToolError> {
    let meta = paths::metadata(root, rel)?;
    match meta.kind {
        EntryKind::Dir => Ok(()),
        EntryKind::Symlink => Err(symlink_start(root, rel)),
        EntryKind::File => Err(ToolError::BadPath {
            path: display(rel),
            problem: "is a file, not a directory; use read_file to read it".into(),
        }),
        EntryKind::Special => Err(ToolError::BadPath {
            path: display(rel),
            problem: "is a special file (fifo, socket or device), not a directory".into(),
        }),
    }
}

pub(crate) fn symlink_start(root: &WorkspaceRoot, rel: &Path) -> ToolError {
    let target = root
        .read_link(rel)
        .map(|t| t.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "?".into());
    ToolError::BadPath {
        path: display(rel),
        problem: format!(
            "is a symlink to `{target}`; walkers do not follow symlinks — give the target's own workspace path instead (targets outside the workspace are not reachable)"
        ),
    }
}
