//! The patch a run exports, and the list of the files it changes, both from
//! one tree diff so that they always agree.
//!
//! Paths are the tree diff's own bytes, quoted as git quotes them
//! ([`quote`]): every name, a newline, an escape character or invalid UTF-8
//! in it, is listed exactly once and reads back to its bytes. What the patch
//! refuses to add or change is kept out of it and named: credential files
//! (the run's [`SecretPaths`](super::SecretPaths)) and paths git refuses
//! (none can be in a checkpoint, but the export checks on its own).

use std::collections::BTreeSet;
use std::os::unix::ffi::OsStrExt;

use git2::{Delta, Diff, FileMode, Oid, Tree};

use super::CheckpointStore;
use crate::workspace::confinement::git_path::{quote, verify_path};
use crate::workspace::store::tree::write_tree;
use crate::workspace::{EntryDigest, FingerprintEntry, WorkspaceError};

/// The complete change from a checkpoint to the workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchExport {
    /// A unified patch, `git apply`-able on the checkpoint's files; when the
    /// whole patch is over [`MAX_PATCH_BYTES`], only the files that fit.
    pub patch: String,
    /// The length of the whole patch (longer than `patch` when it was cut).
    pub patch_bytes: u64,
    /// Every path the patch adds, changes or deletes, in patch order.
    pub changed_files: Vec<String>,
    /// Paths in the workspace that the patch leaves out, in path order.
    pub refused: Vec<String>,
    /// Files over the per-file limit that were added, changed or deleted
    /// since the checkpoint: never read, so no patch can carry them. Each
    /// is the quoted path and why, in path order.
    pub too_large: Vec<String>,
}

/// The most a patch export holds; a longer patch is not exported.
pub const MAX_PATCH_BYTES: usize = 12 << 20;

impl PatchExport {
    /// Whether `patch` is the whole patch.
    pub(crate) fn is_complete(&self) -> bool {
        self.patch.len() as u64 == self.patch_bytes
    }
}

/// Bytes as a short figure for messages: `2.0 GB`, `100 MB`, `512 bytes`
/// (one decimal below 10 of a unit).
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v >= 9.95 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

impl CheckpointStore {
    /// The patch from checkpoint `from` to the workspace as it is now (its
    /// changed files are stored as blobs, but no checkpoint is made).
    pub fn export_patch(&mut self, from: Oid) -> Result<PatchExport, WorkspaceError> {
        self.commit(from)?;
        let snapshot = self.scan_shared()?;
        let too_large = self.too_large_changes(from, &snapshot.entries)?;
        let odb = self
            .repo
            .odb()
            .map_err(WorkspaceError::git("opening the object database"))?;
        let whole = write_tree(&odb, &snapshot.entries, &mut self.stored_trees)?;
        // Only a changed path can reach the patch, so only changed paths
        // are matched: a run that touches few of a million files matches few.
        let refused = self.refused_changes(from, whole)?;
        let new = if refused.is_empty() {
            whole
        } else {
            let kept: Vec<FingerprintEntry> = snapshot
                .entries
                .iter()
                .filter(|e| !refused.contains(e.path.as_os_str().as_bytes()))
                .cloned()
                .collect();
            write_tree(&odb, &kept, &mut self.stored_trees)?
        };
        let old = self
            .commit(from)?
            .tree()
            .map_err(WorkspaceError::git("reading a checkpoint"))?;
        let new = self.tree(new)?;
        let (patch, patch_bytes) = self.full_patch_capped(&old, &new, MAX_PATCH_BYTES)?;
        let changed_files = self
            .tree_diff(&old, &new)?
            .deltas()
            .map(|delta| {
                let file = match delta.status() {
                    Delta::Deleted => delta.old_file(),
                    _ => delta.new_file(),
                };
                quote(file.path_bytes().unwrap_or_default()).into_owned()
            })
            .collect();
        Ok(PatchExport {
            patch,
            patch_bytes,
            changed_files,
            refused: refused.iter().map(|p| quote(p).into_owned()).collect(),
            too_large,
        })
    }

    /// The files over the size limit that differ between checkpoint `from`
    /// and `entries` (by size and mtime), each with the reason the patch
    /// leaves it out.
    fn too_large_changes(
        &self,
        from: Oid,
        entries: &[FingerprintEntry],
    ) -> Result<Vec<String>, WorkspaceError> {
        let mut before = self.oversize_at(from)?;
        let limit = human_bytes(self.max_file_bytes());
        let mut out = Vec::new();
        for e in entries {
            let EntryDigest::Oversize { size, mtime_ns } = e.digest else {
                continue;
            };
            let path = quote(e.path.as_os_str().as_bytes()).into_owned();
            let what = match before.remove(&path) {
                Some(facts) if facts == (size, mtime_ns) => continue,
                Some(_) => "changed",
                None => "added",
            };
            out.push(format!(
                "{path} ({what}, {}: over the per-file limit of {limit}, so no patch can carry it)",
                human_bytes(size)
            ));
        }
        for path in before.into_keys() {
            out.push(format!(
                "{path} (deleted: it was over the per-file limit of {limit}, so no patch can carry its deletion)"
            ));
        }
        out.sort();
        Ok(out)
    }

    /// The paths that changed from checkpoint `from` to the tree `whole`
    /// and that a patch may not carry; an error if `from` holds one.
    fn refused_changes(&self, from: Oid, whole: Oid) -> Result<BTreeSet<Vec<u8>>, WorkspaceError> {
        let old = self
            .commit(from)?
            .tree()
            .map_err(WorkspaceError::git("reading a checkpoint"))?;
        let mut refused = BTreeSet::new();
        for delta in self.tree_diff(&old, &self.tree(whole)?)?.deltas() {
            let old_side = delta.old_file();
            if delta.status() != Delta::Added
                && let Some(path) = old_side.path_bytes()
                && self.refuses(path, old_side.mode())
            {
                // A checkpoint taken under other rules: the patch would
                // carry the file, so the export fails instead.
                return Err(WorkspaceError::RefusedPath {
                    path: quote(path).into_owned(),
                });
            }
            let new_side = delta.new_file();
            if delta.status() != Delta::Deleted
                && let Some(path) = new_side.path_bytes()
                && self.refuses(path, new_side.mode())
            {
                refused.insert(path.to_vec());
            }
        }
        Ok(refused)
    }

    /// Whether a patch may not carry `path`: a credential file or a path
    /// git refuses.
    fn refuses(&self, path: &[u8], mode: FileMode) -> bool {
        !verify_path(path, mode == FileMode::Link) || self.secrets.matches(path, false)
    }

    fn tree_diff(&self, old: &Tree<'_>, new: &Tree<'_>) -> Result<Diff<'_>, WorkspaceError> {
        self.repo
            .diff_tree_to_tree(Some(old), Some(new), None)
            .map_err(WorkspaceError::git("diffing checkpoints"))
    }
}
