//! The budget of a run's checkpoint store: what the checkpoints after the
//! baseline may hold on disk.
//!
//! Every blob a tree written after a baseline checkpoint holds, and the
//! latest checkpoint does not, is counted by its size on disk. When a checkpoint takes the count over the budget, blobs that
//! no checkpoint holds any more (a file stored for a live diff and changed
//! again before the next checkpoint) are deleted first, then intermediate
//! checkpoints are pruned, oldest first, until the count is within the
//! budget again: a pruned checkpoint keeps its commit and trees, and loses
//! the blobs that no kept checkpoint shares. The baselines, the validated
//! checkpoint and the latest one are never pruned; a pruned checkpoint is
//! marked under `refs/minicoder/pruned/` and refuses to be restored,
//! diffed or exported by name. Blobs of files over the per-file limit are
//! never written at all (see the fingerprint module).
//!
//! Only loose objects this store wrote itself are deleted; the store never
//! packs, and a blob the baseline holds is never counted.

use std::collections::HashSet;

use git2::{ObjectType, Oid};

use super::{CheckpointStore, VALIDATED_REF};
use crate::workspace::WorkspaceError;

const PRUNED_PREFIX: &str = "refs/minicoder/pruned/";
/// The checkpoint a saved run state refers to: never pruned.
const RESUME_REF: &str = "refs/minicoder/resume";

/// What one pruning did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The checkpoints pruned, oldest first.
    pub checkpoints: Vec<Oid>,
    /// Bytes of blob content deleted.
    pub freed_bytes: u64,
}

/// Blobs written after the baseline, with their sizes.
#[derive(Debug, Default)]
pub(crate) struct Written {
    blobs: std::collections::HashMap<Oid, u64>,
    bytes: u64,
}

impl Written {
    pub(crate) fn add(&mut self, id: Oid, size: u64) {
        if self.blobs.insert(id, size).is_none() {
            self.bytes += size;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.blobs.clear();
        self.bytes = 0;
    }
}

/// Whether a checkpoint labelled `label` is a baseline, never pruned.
pub(crate) fn is_baseline(label: &str) -> bool {
    label.starts_with("baseline")
}

impl CheckpointStore {
    /// The checkpoints after the baseline may hold at most `bytes` of blob
    /// content; past it, [`Self::create`] prunes.
    pub(crate) fn with_checkpoint_budget(mut self, bytes: u64) -> Self {
        self.budget = Some(bytes);
        self
    }

    /// Bytes of blob content written since the latest baseline and still
    /// in the store.
    #[cfg(test)]
    pub(crate) fn written_bytes(&self) -> u64 {
        self.written.bytes
    }

    /// Counts the blobs of `new` that `old` does not hold at the same path.
    pub(crate) fn count_new_blobs(
        &mut self,
        old: Option<Oid>,
        new: Oid,
    ) -> Result<(), WorkspaceError> {
        if old == Some(new) {
            return Ok(());
        }
        let mut found = Vec::new();
        self.new_blobs(old, new, &mut found)?;
        for (id, size) in found {
            self.written.add(id, size);
        }
        Ok(())
    }

    /// The blobs (with their sizes as loose objects, 0 if packed) at the
    /// paths of tree `new` where tree `old` holds something else. A
    /// subtree both hold is not read: a checkpoint after a small change
    /// reads only the trees on the way to it.
    fn new_blobs(
        &self,
        old: Option<Oid>,
        new: Oid,
        found: &mut Vec<(Oid, u64)>,
    ) -> Result<(), WorkspaceError> {
        if old == Some(new) {
            return Ok(());
        }
        let old = old.map(|id| self.tree(id)).transpose()?;
        let new = self.tree(new)?;
        let objects = self.repo.path().join("objects");
        for entry in new.iter() {
            let before = old
                .as_ref()
                .and_then(|t| t.get_name_bytes(entry.name_bytes()));
            if before
                .as_ref()
                .is_some_and(|b| b.id() == entry.id() && b.filemode() == entry.filemode())
            {
                continue;
            }
            match entry.kind() {
                Some(ObjectType::Tree) => {
                    let below = before
                        .filter(|b| b.kind() == Some(ObjectType::Tree))
                        .map(|b| b.id());
                    self.new_blobs(below, entry.id(), found)?;
                }
                Some(ObjectType::Blob) if !entry.id().is_zero() => {
                    let hex = entry.id().to_string();
                    let size = std::fs::symlink_metadata(objects.join(&hex[..2]).join(&hex[2..]))
                        .map_or(0, |m| m.len());
                    found.push((entry.id(), size));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Keeps checkpoint `id` from being pruned: a saved run state refers
    /// to it (the one mark replaces the previous one).
    pub(crate) fn mark_resume_point(&self, id: Oid) -> Result<(), WorkspaceError> {
        self.repo
            .reference(RESUME_REF, id, true, "resume point")
            .map(|_| ())
            .map_err(WorkspaceError::git("marking a resume point"))
    }

    /// Prunes every checkpoint that is not a baseline, the validated one,
    /// the resume point or the latest: for a run that has ended.
    pub(crate) fn compact(&mut self) -> Result<Pruned, WorkspaceError> {
        let budget = self.budget.replace(0);
        let pruned = self.enforce_budget();
        self.budget = budget;
        pruned
    }

    /// Whether checkpoint `id` was pruned.
    pub fn is_pruned(&self, id: Oid) -> bool {
        self.repo
            .find_reference(&format!("{PRUNED_PREFIX}{id}"))
            .is_ok()
    }

    /// Refuses a pruned checkpoint by name.
    pub(crate) fn unpruned(&self, id: Oid) -> Result<(), WorkspaceError> {
        if self.is_pruned(id) {
            return Err(WorkspaceError::CheckpointPruned { id: id.to_string() });
        }
        Ok(())
    }

    /// Brings the store within its budget, if it has one and is over it.
    pub(crate) fn enforce_budget(&mut self) -> Result<Pruned, WorkspaceError> {
        let mut pruned = Pruned::default();
        let Some(budget) = self.budget else {
            return Ok(pruned);
        };
        if self.written.bytes <= budget && budget > 0 {
            return Ok(pruned);
        }
        let all = self.list()?;
        let validated = self.repo.refname_to_id(VALIDATED_REF).ok();
        let resume = self.repo.refname_to_id(RESUME_REF).ok();
        let tip = all.last().map(|c| c.id);
        let mut candidates = all
            .iter()
            .filter(|c| {
                !is_baseline(&c.label)
                    && Some(c.id) != validated
                    && Some(c.id) != resume
                    && Some(c.id) != tip
                    && !self.is_pruned(c.id)
            })
            .map(|c| c.id)
            .collect::<Vec<_>>()
            .into_iter();
        let mut gone: HashSet<Oid> = all
            .iter()
            .filter(|c| self.is_pruned(c.id))
            .map(|c| c.id)
            .collect();
        loop {
            let keep = self.kept_blobs(all.iter().map(|c| c.id).filter(|id| !gone.contains(id)))?;
            pruned.freed_bytes += self.delete_unkept(&keep);
            if self.written.bytes <= budget && budget > 0 {
                break;
            }
            let Some(next) = candidates.next() else {
                if budget == 0 {
                    break;
                }
                tracing::warn!(
                    "the checkpoints hold {} bytes, over their budget of {budget}, and none is left to prune",
                    self.written.bytes
                );
                break;
            };
            self.repo
                .reference(&format!("{PRUNED_PREFIX}{next}"), next, true, "pruned")
                .map_err(WorkspaceError::git("marking a checkpoint pruned"))?;
            gone.insert(next);
            pruned.checkpoints.push(next);
        }
        Ok(pruned)
    }

    /// Every blob the trees of `checkpoints` hold (a subtree shared by two
    /// is walked once).
    fn kept_blobs(
        &self,
        checkpoints: impl Iterator<Item = Oid>,
    ) -> Result<HashSet<Oid>, WorkspaceError> {
        let mut blobs = HashSet::new();
        let mut seen_trees = HashSet::new();
        for id in checkpoints {
            let tree = self.commit(id)?.tree_id();
            let mut stack = vec![tree];
            while let Some(t) = stack.pop() {
                if !seen_trees.insert(t) {
                    continue;
                }
                let tree = self
                    .repo
                    .find_tree(t)
                    .map_err(WorkspaceError::git("reading a checkpoint tree"))?;
                for entry in tree.iter() {
                    match entry.kind() {
                        Some(ObjectType::Tree) => stack.push(entry.id()),
                        Some(ObjectType::Blob) => {
                            blobs.insert(entry.id());
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(blobs)
    }

    /// Deletes the counted blobs not in `keep`; returns the bytes freed.
    fn delete_unkept(&mut self, keep: &HashSet<Oid>) -> u64 {
        let objects = self.repo.path().join("objects");
        let doomed: Vec<(Oid, u64)> = self
            .written
            .blobs
            .iter()
            .filter(|(id, _)| !keep.contains(id))
            .map(|(id, size)| (*id, *size))
            .collect();
        let mut freed = 0;
        let mut deleted = HashSet::new();
        for (id, size) in doomed {
            let hex = id.to_string();
            let path = objects.join(&hex[..2]).join(&hex[2..]);
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    freed += size;
                    deleted.insert(id);
                }
                // Held in a pack (the baseline's): never deleted one by one.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!("pruning {}: {e}", path.display()),
            }
            self.written.blobs.remove(&id);
            self.written.bytes -= size;
        }
        if !deleted.is_empty() {
            self.scanner.forget_blobs(&deleted);
            // The kept snapshot may name them.
            self.kept = None;
        }
        freed
    }
}
