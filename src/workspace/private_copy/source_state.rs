//! What the source repository is at the start of a run: the commit HEAD
//! names, and how many files of the working tree (which the baseline copies)
//! differ from it. Only read: no index or status is written.

use git2::{Repository, Status};

use crate::protocol::SourceState;

/// The state of `repo` from its status (untracked files listed, ignored
/// ones not): the copy lists the source this way anyway, and tells both
/// from one walk of the working tree.
pub(super) fn from_statuses(
    repo: &Repository,
    statuses: Option<&git2::Statuses<'_>>,
) -> SourceState {
    let head = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .map(|c| c.id().to_string());
    let (mut modified, mut untracked) = (0u32, 0u32);
    for entry in statuses.iter().flat_map(|s| s.iter()) {
        let status = entry.status();
        if status.contains(Status::WT_NEW) && !status.intersects(index_changes()) {
            untracked = untracked.saturating_add(1);
        } else if !status.is_empty() && !status.contains(Status::IGNORED) {
            modified = modified.saturating_add(1);
        }
    }
    SourceState {
        head,
        dirty: modified > 0 || untracked > 0,
        modified,
        untracked,
    }
}

fn index_changes() -> Status {
    Status::INDEX_NEW
        | Status::INDEX_MODIFIED
        | Status::INDEX_DELETED
        | Status::INDEX_RENAMED
        | Status::INDEX_TYPECHANGE
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// As the copy finds it, listing the source.
    fn source_state(dir: &Path) -> SourceState {
        let repo = crate::workspace::private_copy::copy::open_source(dir).unwrap();
        crate::workspace::private_copy::copy::source_paths(
            &repo,
            &crate::workspace::SecretPaths::default(),
        )
        .unwrap()
        .1
    }

    fn commit_all(repo: &Repository) -> String {
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("t", "t@example.invalid").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "c", &tree, &[])
            .unwrap()
            .to_string()
    }

    #[test]
    fn counts_modified_and_untracked_files_and_names_head() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        std::fs::write(dir.path().join(".gitignore"), "ignored.log\n").unwrap();
        let head = commit_all(&repo);

        let clean = source_state(dir.path());
        assert_eq!(clean.head.as_deref(), Some(head.as_str()));
        assert!(!clean.dirty);
        assert_eq!(clean.dirty_notice(), None);

        std::fs::write(dir.path().join("a.txt"), "changed\n").unwrap();
        std::fs::write(dir.path().join("new.txt"), "n\n").unwrap();
        std::fs::write(dir.path().join("ignored.log"), "x\n").unwrap();
        let dirty = source_state(dir.path());
        assert_eq!((dirty.modified, dirty.untracked), (1, 1));
        assert_eq!(
            dirty.dirty_notice().as_deref(),
            Some("baseline includes 1 modified and 1 untracked file not in HEAD")
        );
    }

    #[test]
    fn a_repository_without_commits_has_no_head() {
        let dir = tempfile::tempdir().unwrap();
        Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        let state = source_state(dir.path());
        assert_eq!(state.head, None);
        assert_eq!(state.untracked, 1);
        assert!(state.dirty);
    }
}
