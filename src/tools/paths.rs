//! Checking the paths a model gives before they reach [`WorkspaceRoot`],
//! which confines them again in the kernel; checking here gives clearer
//! messages.

use std::path::{Component, Path, PathBuf};

use super::ToolError;
use crate::workspace::{EntryKind, EntryMetadata, WorkspaceError, WorkspaceRoot};

/// Generated and tool folders that the walkers skip.
pub(crate) const SKIPPED_DIRS: [&str; 8] = [
    ".git",
    "node_modules",
    "target",
    "__pycache__",
    ".pytest_cache",
    ".venv",
    "dist",
    "build",
];

/// A workspace-relative path without `.` components; empty for the root.
pub(crate) fn relative(path: &str) -> Result<PathBuf, ToolError> {
    let trimmed = path.trim();
    let as_path = Path::new(trimmed);
    if as_path.is_absolute() {
        let hint = trimmed
            .strip_prefix("/workspace/")
            .map(|rest| {
                format!(" (inside the sandbox the workspace is /workspace, so write `{rest}`)")
            })
            .unwrap_or_default();
        return Err(ToolError::BadPath {
            path: trimmed.to_string(),
            problem: format!(
                "absolute paths are refused; give a path relative to the workspace root{hint}"
            ),
        });
    }
    let mut out = PathBuf::new();
    for component in as_path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(ToolError::PathEscape {
                    path: trimmed.to_string(),
                });
            }
        }
    }
    Ok(out)
}

/// How a relative path is shown to the model.
pub fn display(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        ".".to_string()
    } else {
        rel.to_string_lossy().into_owned()
    }
}

/// `lstat`-like facts about `rel`, confined.
pub fn metadata(root: &WorkspaceRoot, rel: &Path) -> Result<EntryMetadata, ToolError> {
    root.metadata(rel)
        .map_err(|e| ToolError::from_workspace(&display(rel), e))
}

/// Whether a path lies inside the workspace's `.git` directory.
pub(crate) fn is_in_git_dir(rel: &Path) -> bool {
    rel.components().next() == Some(Component::Normal(".git".as_ref()))
}

/// Facts about `rel` after following a symlink at its final component, as
/// long as the target stays inside; refuses one that leads outside.
pub(crate) fn resolved_kind(root: &WorkspaceRoot, rel: &Path) -> Result<EntryKind, ToolError> {
    let meta = metadata(root, rel)?;
    if meta.kind != EntryKind::Symlink {
        return Ok(meta.kind);
    }
    // Opening the target as a directory through the root resolves the link
    // in the kernel: an outside target fails with PathEscape, a file with
    // ENOTDIR (whether it is a regular file is checked when it is read).
    match root.read_dir(rel) {
        Ok(_) => Ok(EntryKind::Dir),
        Err(WorkspaceError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOTDIR) => {
            Ok(EntryKind::File)
        }
        Err(e) => Err(ToolError::from_workspace(&display(rel), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_cleaned() {
        assert_eq!(
            relative("./src/./a.rs").ok(),
            Some(PathBuf::from("src/a.rs"))
        );
        assert_eq!(relative(".").ok(), Some(PathBuf::new()));
    }

    #[test]
    fn parent_and_absolute_paths_are_refused() {
        assert!(matches!(
            relative("../x"),
            Err(ToolError::PathEscape { .. })
        ));
        assert!(matches!(
            relative("a/../../x"),
            Err(ToolError::PathEscape { .. })
        ));
        let err = relative("/workspace/src/a.rs").err().map(|e| e.to_string());
        assert!(err.is_some_and(|m| m.contains("absolute") && m.contains("`src/a.rs`")));
    }

    #[test]
    fn git_dir_paths_are_recognised() {
        assert!(is_in_git_dir(Path::new(".git/config")));
        assert!(!is_in_git_dir(Path::new("src/.git")));
    }
}
