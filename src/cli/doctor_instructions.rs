//! The project-instructions section of `minicoder doctor`: inside a Git
//! repository, which instruction files a run would put into its context —
//! the root's, and those of each directory down to the current one —
//! without reading them (only their sizes are looked at).

use std::path::Path;

use crate::agent::instructions::{self, MAX_FILE_BYTES};
use crate::tui::text::clean;
use crate::workspace::{EntryKind, WorkspaceRoot};

/// One line per directory with an instruction file; `None` outside a repository.
pub(crate) fn report(cwd: &Path) -> Option<Vec<String>> {
    let repo = git2::Repository::discover(cwd).ok()?;
    let top = repo.workdir()?.canonicalize().ok()?;
    let root = WorkspaceRoot::open(&top).ok()?;
    let here = cwd
        .canonicalize()
        .ok()
        .and_then(|c| c.strip_prefix(&top).ok().map(Path::to_path_buf))
        .unwrap_or_default();
    let mut dirs = vec![String::new()];
    dirs.extend(instructions::dirs_on_the_way(&here.to_string_lossy(), true).unwrap_or_default());
    let mut lines = Vec::new();
    for dir in &dirs {
        let lookup = instructions::lookup(dir);
        let found = lookup.candidates.iter().find_map(|path| {
            root.metadata(Path::new(path))
                .ok()
                .filter(|m| matches!(m.kind, EntryKind::File | EntryKind::Symlink))
                .map(|m| (path, m.len))
        });
        if let Some((path, len)) = found {
            let cut = if len > MAX_FILE_BYTES as u64 {
                format!(", cut to {} KiB in runs", MAX_FILE_BYTES / 1024)
            } else {
                String::new()
            };
            lines.push(format!("{} ({len} bytes{cut})", clean(path)));
        }
    }
    if lines.is_empty() {
        lines.push(
            "none at the root (AGENTS.md, CLAUDE.md or .github/copilot-instructions.md); \
             files in subdirectories are read when the agent works there"
                .to_string(),
        );
    }
    Some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_and_the_directories_down_to_here_are_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        git2::Repository::init(dir.path()).expect("init");
        std::fs::create_dir_all(dir.path().join("pkg/sub")).expect("mkdir");
        std::fs::write(dir.path().join("CLAUDE.md"), "x".repeat(40_000)).expect("write");
        std::fs::write(dir.path().join("pkg/AGENTS.md"), "rules").expect("write");
        std::fs::write(dir.path().join("pkg/CLAUDE.md"), "ignored").expect("write");
        let lines = report(&dir.path().join("pkg/sub")).expect("a repository");
        assert_eq!(
            lines,
            [
                "CLAUDE.md (40000 bytes, cut to 32 KiB in runs)",
                "pkg/AGENTS.md (5 bytes)"
            ]
        );
        let lines = report(dir.path()).expect("a repository");
        assert_eq!(lines, ["CLAUDE.md (40000 bytes, cut to 32 KiB in runs)"]);
        let outside = tempfile::tempdir().expect("tempdir");
        assert!(report(outside.path()).is_none());
    }
}
