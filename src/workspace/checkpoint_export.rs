//! The patch a run exports, and the list of the files it changes, both from
//! one tree diff so that they always agree.
//!
//! Paths are the tree diff's own bytes, quoted as git quotes them
//! ([`quote`]): every name, a newline, an escape character or invalid UTF-8
//! in it, is listed exactly once and reads back to its bytes. What the patch
//! refuses to add or change is kept out of it and named: credential files
//! (the run's [`SecretPaths`](super::SecretPaths)) and paths git refuses
//! (none can be in a checkpoint, but the export checks on its own).

use std::os::unix::ffi::OsStrExt;

use git2::{Delta, FileMode, Oid};

use super::super::git_path::{quote, verify_path};
use super::super::tree::write_tree;
use super::super::{FingerprintEntry, WorkspaceError};
use super::CheckpointStore;
use super::MODE_LINK;

/// The complete change from a checkpoint to the workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchExport {
    /// A unified patch, `git apply`-able on the checkpoint's files.
    pub patch: String,
    /// Every path the patch adds, changes or deletes, in patch order.
    pub changed_files: Vec<String>,
    /// Paths in the workspace that the patch leaves out, in path order.
    pub refused: Vec<String>,
}

impl CheckpointStore {
    /// The patch from checkpoint `from` to the workspace as it is now (its
    /// changed files are stored as blobs, but no checkpoint is made).
    pub fn export_patch(&mut self, from: Oid) -> Result<PatchExport, WorkspaceError> {
        self.commit(from)?;
        let snapshot = self.scan()?;
        let (kept, refused): (Vec<FingerprintEntry>, Vec<FingerprintEntry>) =
            snapshot.entries.into_iter().partition(|e| {
                let path = e.path.as_os_str().as_bytes();
                verify_path(path, e.mode == MODE_LINK) && !self.secrets.matches(path, false)
            });
        let odb = self
            .repo
            .odb()
            .map_err(WorkspaceError::git("opening the object database"))?;
        let new = write_tree(&odb, &kept, &mut self.stored_trees)?;
        let old = self
            .commit(from)?
            .tree()
            .map_err(WorkspaceError::git("reading a checkpoint"))?;
        let new = self.tree(new)?;
        let patch = self.patch(&old, &new)?;
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&old), Some(&new), None)
            .map_err(WorkspaceError::git("diffing checkpoints"))?;
        let mut changed_files = Vec::with_capacity(diff.deltas().len());
        for delta in diff.deltas() {
            let file = match delta.status() {
                Delta::Deleted => delta.old_file(),
                _ => delta.new_file(),
            };
            let path = file.path_bytes().unwrap_or_default();
            // Only the old side can still hold a refused path (a checkpoint
            // taken under other rules): the patch would then carry it, so
            // the export fails instead.
            let old = delta.old_file();
            let old_refused = old.path_bytes().is_some_and(|p| {
                delta.status() != Delta::Added
                    && (!verify_path(p, old.mode() == FileMode::Link)
                        || self.secrets.matches(p, false))
            });
            if old_refused || !verify_path(path, file.mode() == FileMode::Link) {
                return Err(WorkspaceError::RefusedPath {
                    path: quote(path).into_owned(),
                });
            }
            changed_files.push(quote(path).into_owned());
        }
        Ok(PatchExport {
            patch,
            changed_files,
            refused: refused
                .iter()
                .map(|e| quote(e.path.as_os_str().as_bytes()).into_owned())
                .collect(),
        })
    }
}
