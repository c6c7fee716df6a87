//! `edit_file`: a unified diff of one file, prepared (checked, nothing
//! written) and then applied, so the runtime can ask a person in between.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use similar::TextDiff;

use super::paths::{self, display, is_in_git_dir};
use super::read_file::{MAX_READ_BYTES, is_binary};
use super::unified_diff::{FilePatch, TextLines, apply_hunks, parse_unified_diff};
use super::{EditFileArgs, ToolError, ToolOutput};
use crate::workspace::{EntryKind, WorkspaceRoot, quote_path, verify_path};

/// A checked edit: the file's bytes before and after (`None` = absent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedEdit {
    /// Workspace-relative path.
    pub path: String,
    pub before: Option<Vec<u8>>,
    pub after: Option<Vec<u8>>,
    /// The change as a normalized unified diff (`a/`/`b/` headers).
    pub patch: String,
}

impl PreparedEdit {
    #[cfg(test)]
    pub(crate) fn is_creation(&self) -> bool {
        self.before.is_none()
    }
}

/// Parses and checks `args.patch` against the file; writes nothing.
pub fn prepare_edit(args: &EditFileArgs, root: &WorkspaceRoot) -> Result<PreparedEdit, ToolError> {
    let rel = paths::relative(&args.path)?;
    let shown = display(&rel);
    if rel.as_os_str().is_empty() {
        return Err(ToolError::BadPath {
            path: args.path.clone(),
            problem: "names the workspace root; give the path of a file".into(),
        });
    }
    if is_in_git_dir(&rel) {
        return Err(ToolError::refused(format!(
            "`{shown}` is inside .git; the repository's metadata cannot be edited"
        )));
    }
    if !verify_path(rel.as_os_str().as_bytes(), false) {
        return Err(ToolError::refused(format!(
            "`{shown}` is a path git refuses: a component is `.git` in another case or spelling \
             (`.GIT`, `.git.`, `git~1`, or with invisible characters), or a nested repository's \
             `.git`; such a file could never be part of the patch, so choose another name"
        )));
    }
    let patch = parse_unified_diff(&args.patch).map_err(|problem| {
        ToolError::refused(format!(
            "the patch for `{shown}` could not be parsed: {problem}"
        ))
    })?;
    check_header_paths(&patch, &rel)?;
    let before = current_text(root, &rel)?;
    let creating = patch.has_headers && patch.old_path.is_none();
    let deleting = patch.has_headers && patch.new_path.is_none();
    let original = match (&before, creating) {
        (Some(_), true) => {
            return Err(ToolError::refused(format!(
                "`{shown}` already exists, but the patch creates it (`--- /dev/null`); patch the existing file with `--- a/{shown}` headers and context lines"
            )));
        }
        (None, false) => {
            return Err(ToolError::NotFound { path: shown }.with_hint(
                "to create it, use `--- /dev/null` and `+++ b/PATH` headers with only '+' lines",
            ));
        }
        (Some(text), false) => TextLines::parse(text),
        (None, true) => TextLines::parse(""),
    };
    let applied = apply_hunks(&original, &patch.hunks)
        .map_err(|m| ToolError::refused(format!("edit of `{shown}` refused: {}", m.message)))?;
    let after = if deleting {
        if !applied.lines.is_empty() {
            return Err(ToolError::refused(format!(
                "the patch deletes `{shown}` (`+++ /dev/null`) but leaves {} lines in it; a deletion must remove every line",
                applied.lines.len()
            )));
        }
        None
    } else {
        Some(applied.render())
    };
    let normalized = normalized_patch(&shown, before.as_deref(), after.as_deref());
    Ok(PreparedEdit {
        path: shown,
        before: before.map(String::into_bytes),
        after: after.map(String::into_bytes),
        patch: normalized,
    })
}

/// Writes a prepared edit, if the file still holds what it was prepared
/// against. Keeps the mode of an existing file; creates missing parents.
pub fn apply_edit(edit: &PreparedEdit, root: &WorkspaceRoot) -> Result<(), ToolError> {
    let rel = paths::relative(&edit.path)?;
    let now = current_text(root, &rel)?.map(String::into_bytes);
    if now != edit.before {
        return Err(ToolError::refused(format!(
            "`{}` changed after the edit was prepared; read it again and send a new patch",
            edit.path
        )));
    }
    let io = |e| ToolError::from_workspace(&edit.path, e);
    match &edit.after {
        None => root.remove_file(&rel).map_err(io),
        Some(bytes) => {
            if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
                root.create_dir_all(parent).map_err(io)?;
            }
            root.write(&rel, bytes).map_err(io)
        }
    }
}

/// Prepares and applies in one step (no approval in between).
pub fn edit_file(args: &EditFileArgs, root: &WorkspaceRoot) -> Result<ToolOutput, ToolError> {
    let edit = prepare_edit(args, root)?;
    apply_edit(&edit, root)?;
    Ok(edit_output(&edit))
}

/// The tool result of an applied edit: what the model is told, with the
/// patch itself in the full output.
pub fn edit_output(edit: &PreparedEdit) -> ToolOutput {
    let (added, removed) = count_changes(&edit.patch);
    let content = format!(
        "Applied the patch to {}: +{added} -{removed} lines.",
        edit.path
    );
    ToolOutput {
        ok: true,
        full: format!("{content}\n{}", edit.patch),
        content,
        summary: format!("+{added} -{removed}"),
        // Quoted as git quotes it, like every `changed_files` list.
        changed_files: vec![quote_path(edit.path.as_bytes()).into_owned()],
        exit_code: None,
    }
}

fn count_changes(patch: &str) -> (usize, usize) {
    let body = patch
        .lines()
        .filter(|l| !l.starts_with("+++ ") && !l.starts_with("--- "));
    body.fold((0, 0), |(a, r), l| match l.as_bytes().first() {
        Some(b'+') => (a + 1, r),
        Some(b'-') => (a, r + 1),
        _ => (a, r),
    })
}

/// The file's text, `None` when it does not exist. Refuses symlinks,
/// directories, binary and over-large files.
fn current_text(root: &WorkspaceRoot, rel: &Path) -> Result<Option<String>, ToolError> {
    let shown = display(rel);
    let meta = match root.metadata(rel) {
        Ok(meta) => meta,
        Err(e) => {
            return match ToolError::from_workspace(&shown, e) {
                ToolError::NotFound { .. } => Ok(None),
                other => Err(other),
            };
        }
    };
    let problem = match meta.kind {
        EntryKind::File if meta.len > MAX_READ_BYTES => {
            Some("is over 2 MiB; edit it with run_shell (e.g. sed) instead".to_string())
        }
        EntryKind::File => None,
        EntryKind::Symlink => {
            let target = root
                .read_link(rel)
                .map(|t| t.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "?".into());
            Some(format!(
                "is a symlink to `{target}`; edit the target's own path instead (targets outside the workspace cannot be edited)"
            ))
        }
        EntryKind::Dir => Some("is a directory; give the path of a file".into()),
        EntryKind::Special => Some("is a special file and cannot be edited".into()),
    };
    if let Some(problem) = problem {
        return Err(ToolError::BadPath {
            path: shown,
            problem,
        });
    }
    let bytes = root
        .read(rel, MAX_READ_BYTES)
        .map_err(|e| ToolError::from_workspace(&shown, e))?;
    if is_binary(&bytes) {
        return Err(ToolError::BadPath {
            path: shown,
            problem: "is a binary file; edit_file changes text files only".into(),
        });
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| ToolError::BadPath {
            path: shown,
            problem: "is not valid UTF-8 text; edit_file changes UTF-8 text files only".into(),
        })
}

/// The header paths must name `rel` (with or without `a/`/`b/`).
fn check_header_paths(patch: &FilePatch, rel: &Path) -> Result<(), ToolError> {
    for header in [&patch.old_path, &patch.new_path].into_iter().flatten() {
        let named = header_names(header, rel);
        if !named {
            return Err(ToolError::refused(format!(
                "the patch header names `{header}`, but `path` is `{}`; one call edits one file — make the headers `--- a/{0}` and `+++ b/{0}`",
                display(rel)
            )));
        }
    }
    if patch.has_headers && patch.old_path.is_none() && patch.new_path.is_none() {
        return Err(ToolError::refused(
            "both headers are /dev/null; name the file in `+++ b/PATH` to create it or in `--- a/PATH` to delete it",
        ));
    }
    Ok(())
}

fn header_names(header: &str, rel: &Path) -> bool {
    let plain = |p: &str| paths::relative(p).is_ok_and(|r| r == rel);
    plain(header)
        || ["a/", "b/"]
            .iter()
            .any(|prefix| header.strip_prefix(prefix).is_some_and(plain))
}

fn normalized_patch(shown: &str, before: Option<&str>, after: Option<&str>) -> String {
    let old_header = if before.is_some() {
        format!("a/{shown}")
    } else {
        "/dev/null".into()
    };
    let new_header = if after.is_some() {
        format!("b/{shown}")
    } else {
        "/dev/null".into()
    };
    let old = before.unwrap_or("");
    let new = after.unwrap_or("");
    let diff = TextDiff::from_lines(old, new);
    let body = diff
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(true)
        .header(&old_header, &new_header)
        .to_string();
    if body.is_empty() {
        format!("--- {old_header}\n+++ {new_header}\n")
    } else {
        body
    }
}

impl ToolError {
    fn with_hint(self, hint: &str) -> Self {
        ToolError::refused(format!("{self}; {hint}"))
    }
}

#[cfg(test)]
#[path = "edit_file_tests.rs"]
mod tests;
