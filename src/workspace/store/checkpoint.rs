//! Checkpoints: commits of the workspace in a private bare Git repository
//! outside it. Never attached to a container, never written to the
//! source repository.
//!
//! Checkpoints form a linear history on `refs/minicoder/checkpoints`; the
//! last one that passed verification is `refs/minicoder/validated`. Each
//! commit message holds the label and a `Minicoder-Fingerprint:` trailer.
//!
//! The store owns a [`Fingerprinter`] whose stat cache (in the store
//! directory) records blob ids that are known to be in the store, so an
//! incremental checkpoint reads and writes only the files that changed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use git2::{DiffFormat, ObjectType, Oid, Repository, Sort, Tree, TreeWalkMode, TreeWalkResult};

use super::change_journal::{Changes, Journal};
use super::tree::{DirTrees, outermost, signature, touches, write_tree, write_tree_reusing};
use crate::workspace::scan::fingerprint::{EntryDigest, MODE_EXEC, MODE_LINK, store_new_blob};
use crate::workspace::{
    ExcludeSet, Fingerprint, Fingerprinter, SecretPaths, Snapshot, WorkspaceError, WorkspaceRoot,
};

#[path = "checkpoint_export.rs"]
mod export;
pub use export::{MAX_PATCH_BYTES, PatchExport, human_bytes};
#[path = "checkpoint_budget.rs"]
mod budget;
pub use budget::Pruned;

const CHECKPOINTS_REF: &str = "refs/minicoder/checkpoints";
pub(crate) const VALIDATED_REF: &str = "refs/minicoder/validated";
const TRAILER: &str = "\n\nMinicoder-Fingerprint: ";
/// One line per file over the size limit (not in the tree): size, mtime in
/// ns and the quoted path.
const OVERSIZE_TRAILER: &str = "Minicoder-Oversize: ";
const CACHE_FILE: &str = "minicoder-stat-cache";

/// One checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The commit id in the store.
    pub id: Oid,
    pub label: String,
    pub fingerprint: Fingerprint,
    /// Seconds since the Unix epoch.
    pub created: i64,
}

/// The private checkpoint store of one workspace.
pub struct CheckpointStore {
    repo: Repository,
    scanner: Fingerprinter,
    /// Trees this store has written since it was opened.
    stored_trees: HashSet<Oid>,
    /// What an exported patch refuses to add or change.
    secrets: SecretPaths,
    /// What the checkpoints after the baseline may hold, if bounded.
    budget: Option<u64>,
    /// The blobs written since the latest baseline.
    written: budget::Written,
    /// What changed in the workspace since `kept`, if it is watched.
    journal: Option<Journal>,
    /// The latest snapshot taken with the journal.
    kept: Option<Kept>,
}

/// A snapshot the journal can bring up to date.
struct Kept {
    snapshot: Arc<Snapshot>,
    /// Its tree, once written.
    tree: Option<Oid>,
    /// Its files with more than one name, examined every time.
    linked: HashSet<Vec<u8>>,
    /// Trees of directories written for an earlier snapshot: those not
    /// touched by `changed` (see the tree module) hold as they are.
    dirs: DirTrees,
    /// What changed since `dirs` were written.
    changed: Vec<Vec<u8>>,
}

impl std::fmt::Debug for CheckpointStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointStore")
            .field("store", &self.repo.path())
            .field("workspace", &self.scanner.workspace())
            .finish()
    }
}

impl CheckpointStore {
    /// Opens the store at `store_dir` (created as a bare repository if
    /// missing) for the workspace at `workspace`.
    pub fn open(
        store_dir: &Path,
        workspace: &Path,
        excludes: ExcludeSet,
    ) -> Result<Self, WorkspaceError> {
        let repo = if store_dir.join("HEAD").exists() {
            Repository::open_bare(store_dir)
                .map_err(WorkspaceError::git("opening the checkpoint store"))?
        } else {
            crate::state::private_dir(store_dir).map_err(|e| WorkspaceError::io(store_dir, e))?;
            Repository::init_bare(store_dir)
                .map_err(WorkspaceError::git("creating the checkpoint store"))?
        };
        let scanner =
            Fingerprinter::new(workspace, excludes).with_cache_file(store_dir.join(CACHE_FILE))?;
        Ok(Self {
            repo,
            scanner,
            stored_trees: HashSet::new(),
            secrets: SecretPaths::default(),
            budget: None,
            written: budget::Written::default(),
            journal: None,
            kept: None,
        })
    }

    /// Watches the workspace for changes (see the journal module), so a
    /// checkpoint examines only what changed since the previous one. Where
    /// the workspace cannot be watched, every checkpoint scans it whole.
    pub fn watch(self) -> Self {
        self.watch_bounded(super::change_journal::DEFAULT_BOUND)
    }

    /// [`Self::watch`], keeping at most `bound` changed paths before a full
    /// scan is needed.
    pub(crate) fn watch_bounded(mut self, bound: usize) -> Self {
        match Journal::start(self.scanner.workspace(), self.scanner.excludes(), bound) {
            Ok(journal) => self.journal = Some(journal),
            Err(e) => tracing::info!(
                "the workspace cannot be watched for changes ({e}): every checkpoint scans it whole"
            ),
        }
        self.kept = None;
        self
    }

    /// Stops watching the workspace (checkpoints scan it whole from now
    /// on). The watch is closed on a thread of its own: closing an inotify
    /// instance waits for the kernel's grace period (about 10 ms), which
    /// the end of a run need not wait for.
    pub fn unwatch_in_background(&mut self) {
        self.kept = None;
        if let Some(journal) = self.journal.take() {
            let _ = std::thread::Builder::new()
                .name("close-watch".into())
                .spawn(move || drop(journal));
        }
    }

    /// Whether the workspace is watched.
    #[cfg(test)]
    pub(crate) fn is_watched(&self) -> bool {
        self.journal.is_some()
    }

    /// `lstat`s, directories read and files read by this store's scans.
    #[cfg(test)]
    pub(crate) fn scan_counts(&self) -> (usize, usize, usize) {
        self.scanner.counts()
    }

    /// Files larger than `bytes` are neither read nor checkpointed.
    pub(crate) fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.scanner.set_max_file_bytes(bytes);
        // What a kept snapshot holds depends on the limit.
        self.forget_kept();
        self
    }

    /// The per-file limit of this store.
    pub(crate) fn max_file_bytes(&self) -> u64 {
        self.scanner.max_file_bytes()
    }

    /// The credential paths an exported patch refuses (the defaults unless set).
    pub fn with_secret_paths(mut self, secrets: SecretPaths) -> Self {
        self.secrets = secrets;
        self
    }

    /// The cache files a store at `store_dir` keeps beside its objects.
    pub(crate) fn cache_files(store_dir: &Path) -> [std::path::PathBuf; 1] {
        [store_dir.join(CACHE_FILE)]
    }

    /// The tree of checkpoint `id`.
    pub(crate) fn tree_of(&self, id: Oid) -> Result<Oid, WorkspaceError> {
        Ok(self.commit(id)?.tree_id())
    }

    /// The store's repository, read-only use.
    pub(crate) fn repository(&self) -> &Repository {
        &self.repo
    }

    /// The credential paths of this store's workspace.
    /// What the store's scans leave out: the tool caches and, for a run,
    /// the repository's ignore rules. The verifier leaves out the same.
    pub fn excludes(&self) -> &ExcludeSet {
        self.scanner.excludes()
    }

    pub fn secret_paths(&self) -> &SecretPaths {
        &self.secrets
    }

    /// Takes the objects of `packs` (each shared where the sandbox cannot
    /// change it, else copied): files whose blobs they hold are then hashed
    /// but not stored again.
    pub(crate) fn adopt_pack(
        &mut self,
        packs: &[crate::workspace::private_copy::pack::Pack],
    ) -> Result<(), WorkspaceError> {
        for pack in packs {
            pack.share_into(&self.repo.path().join("objects"))?;
        }
        self.repo
            .odb()
            .and_then(|odb| odb.refresh())
            .map_err(WorkspaceError::git("reading an adopted pack"))
    }

    /// [`Self::adopt_pack`] of the copy's baseline pack, and what the copy
    /// knows of the files it wrote: the next scan (the baseline checkpoint,
    /// before anything runs in the workspace) reads none of the files whose
    /// facts are still those the copy saw.
    pub(crate) fn adopt_baseline(
        &mut self,
        copy: &mut crate::workspace::PrivateWorkspace,
    ) -> Result<(), WorkspaceError> {
        self.adopt_pack(copy.baseline_pack())?;
        let facts = copy.take_baseline_facts();
        if copy.path() == self.scanner.workspace() {
            self.scanner.prime_next_scan(facts.0);
        }
        Ok(())
    }

    /// Records the workspace as it is now, after the latest checkpoint.
    pub fn create(&mut self, label: &str) -> Result<Checkpoint, WorkspaceError> {
        Ok(self.create_within_budget(label)?.0)
    }

    /// The latest checkpoint if the workspace still matches it (its tree is
    /// the same), else a new one as [`Self::create_within_budget`] makes;
    /// `true` when it is new.
    pub(crate) fn create_if_changed(
        &mut self,
        label: &str,
    ) -> Result<(Checkpoint, Pruned, bool), WorkspaceError> {
        let tip = self.tip()?.map(|c| (c.id(), c.tree_id()));
        // One scan serves both the comparison and the new checkpoint.
        let (snapshot, tree) = self.snapshot_tree()?;
        if let Some((tip_id, tip_tree)) = tip
            && tree == tip_tree
            && !self.is_pruned(tip_id)
        {
            return Ok((self.get(tip_id)?, Pruned::default(), false));
        }
        let (checkpoint, pruned) = self.commit_snapshot(label, &snapshot, tree)?;
        Ok((checkpoint, pruned, true))
    }

    /// [`Self::create`], then prunes earlier checkpoints if the store is
    /// over its budget (see the budget module).
    pub fn create_within_budget(
        &mut self,
        label: &str,
    ) -> Result<(Checkpoint, Pruned), WorkspaceError> {
        let (snapshot, tree_id) = self.snapshot_tree()?;
        self.commit_snapshot(label, &snapshot, tree_id)
    }

    /// Commits `snapshot` (whose tree is `tree_id`) after the latest
    /// checkpoint, then prunes if the store is over its budget.
    fn commit_snapshot(
        &mut self,
        label: &str,
        snapshot: &Snapshot,
        tree_id: Oid,
    ) -> Result<(Checkpoint, Pruned), WorkspaceError> {
        let label = label.replace(['\n', '\r'], " ");
        if !budget::is_baseline(&label) {
            let old = self.tip()?.map(|c| c.tree_id());
            self.count_new_blobs(old, tree_id)?;
        }
        let tree = self.tree(tree_id)?;
        let parent = self.tip()?;
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        let sig = signature()?;
        let mut message = format!("{label}{TRAILER}{}\n", snapshot.fingerprint);
        for e in &snapshot.entries {
            if let EntryDigest::Oversize { size, mtime_ns } = e.digest {
                let path = crate::workspace::quote_path(e.path.as_os_str().as_bytes());
                message.push_str(&format!("{OVERSIZE_TRAILER}{size} {mtime_ns} {path}\n"));
            }
        }
        let id = self
            .repo
            .commit(Some(CHECKPOINTS_REF), &sig, &sig, &message, &tree, &parents)
            .map_err(WorkspaceError::git("committing a checkpoint"))?;
        drop((tree, parent));
        let pruned = if budget::is_baseline(&label) {
            // What a baseline holds is never pruned, so never counted.
            self.written.clear();
            Pruned::default()
        } else {
            self.enforce_budget()?
        };
        let checkpoint = Checkpoint {
            id,
            label,
            fingerprint: snapshot.fingerprint,
            created: sig.when().seconds(),
        };
        Ok((checkpoint, pruned))
    }

    /// All checkpoints, oldest first.
    pub fn list(&self) -> Result<Vec<Checkpoint>, WorkspaceError> {
        let Some(tip) = self.tip()? else {
            return Ok(Vec::new());
        };
        let mut walk = self
            .repo
            .revwalk()
            .map_err(WorkspaceError::git("listing checkpoints"))?;
        walk.push(tip.id())
            .map_err(WorkspaceError::git("listing checkpoints"))?;
        walk.simplify_first_parent()
            .map_err(WorkspaceError::git("listing checkpoints"))?;
        walk.set_sorting(Sort::TOPOLOGICAL | Sort::REVERSE)
            .map_err(WorkspaceError::git("listing checkpoints"))?;
        walk.map(|id| self.get(id.map_err(WorkspaceError::git("listing checkpoints"))?))
            .collect()
    }

    /// The checkpoint with commit id `id`.
    pub fn get(&self, id: Oid) -> Result<Checkpoint, WorkspaceError> {
        let commit = self.commit(id)?;
        let message = String::from_utf8_lossy(commit.message_bytes());
        let (label, fingerprint) = message
            .rsplit_once(TRAILER)
            .and_then(|(label, rest)| {
                let fp = rest.lines().next().unwrap_or_default();
                Some((label.to_string(), fp.trim().parse().ok()?))
            })
            .ok_or_else(|| WorkspaceError::UnknownCheckpoint { id: id.to_string() })?;
        Ok(Checkpoint {
            id,
            label,
            fingerprint,
            created: commit.time().seconds(),
        })
    }

    /// The latest checkpoint, if any.
    pub fn latest(&self) -> Result<Option<Checkpoint>, WorkspaceError> {
        self.tip()?.map(|c| self.get(c.id())).transpose()
    }

    /// The unified patch from checkpoint `from` to checkpoint `to`.
    pub fn diff(&self, from: Oid, to: Oid) -> Result<String, WorkspaceError> {
        self.unpruned(from)?;
        self.unpruned(to)?;
        let old = self
            .commit(from)?
            .tree()
            .map_err(WorkspaceError::git("reading a checkpoint"))?;
        let new = self
            .commit(to)?
            .tree()
            .map_err(WorkspaceError::git("reading a checkpoint"))?;
        self.patch(&old, &new)
    }

    /// The unified patch from checkpoint `from` to the workspace as it is now
    /// (its changed files are stored as blobs, but no checkpoint is made).
    pub fn diff_to_workspace(&mut self, from: Oid) -> Result<String, WorkspaceError> {
        self.commit(from)?;
        self.unpruned(from)?;
        let (_, new) = self.snapshot_tree()?;
        let old = self.tip()?.map(|c| c.tree_id());
        self.count_new_blobs(old, new)?;
        let old = self
            .commit(from)?
            .tree()
            .map_err(WorkspaceError::git("reading a checkpoint"))?;
        self.patch(&old, &self.tree(new)?)
    }

    /// Makes the workspace match checkpoint `id` exactly: changed files are
    /// rewritten, extra ones deleted, missing ones recreated, modes and
    /// symlinks restored. `.git` and excluded directories are left alone.
    /// Every write goes through `root`.
    pub fn restore(&mut self, id: Oid, root: &WorkspaceRoot) -> Result<Checkpoint, WorkspaceError> {
        let checkpoint = self.get(id)?;
        self.unpruned(id)?;
        let current = self.scan()?;
        // What is written here is not what the journal's snapshot holds.
        self.forget_kept();
        let tree = self
            .commit(id)?
            .tree()
            .map_err(WorkspaceError::git("reading a checkpoint"))?;
        let want = flatten(&tree)?;
        let have: HashMap<&Path, (u32, Oid)> = current
            .entries
            .iter()
            .map(|e| (e.path.as_path(), (e.mode, e.blob)))
            .collect();

        let mut emptied = Vec::new();
        for e in &current.entries {
            // A file over the size limit is in no checkpoint: it stays as it is.
            if !e.is_oversize() && !want.contains_key(e.path.as_os_str().as_bytes()) {
                root.remove_file(&e.path)?;
                emptied.extend(
                    e.path
                        .ancestors()
                        .skip(1)
                        .filter(|p| !p.as_os_str().is_empty()),
                );
            }
        }
        // Deepest first, so a directory emptied by the deletions can give way
        // to a file of the same name.
        emptied.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
        emptied.dedup();
        for dir in emptied {
            let _ = root.remove_dir(dir); // Not empty: it stays.
        }

        for (path, &(mode, blob)) in &want {
            let path = Path::new(OsStr::from_bytes(path));
            if have.get(path) == Some(&(mode, blob)) {
                continue;
            }
            self.write_entry(root, path, mode, blob)?;
        }
        Ok(checkpoint)
    }

    /// Writes every file of checkpoint `id` into `root`, a directory other
    /// than the store's workspace (a copy to verify the baseline on, while
    /// the agent changes the workspace). `root` is expected to be empty.
    pub fn export(&self, id: Oid, root: &WorkspaceRoot) -> Result<(), WorkspaceError> {
        self.unpruned(id)?;
        export_tree(&self.repo, id, root, &|| false).map(drop)
    }

    /// The store's directory: [`export_from`] opens it again from another
    /// thread.
    pub(crate) fn dir(&self) -> &Path {
        self.repo.path()
    }

    fn write_entry(
        &self,
        root: &WorkspaceRoot,
        path: &Path,
        mode: u32,
        blob: Oid,
    ) -> Result<(), WorkspaceError> {
        write_entry(&self.repo, root, path, mode, blob)
    }

    /// The files over the size limit when checkpoint `id` was taken: quoted
    /// path → (size, mtime in ns).
    pub(crate) fn oversize_at(
        &self,
        id: Oid,
    ) -> Result<BTreeMap<String, (u64, i64)>, WorkspaceError> {
        let commit = self.commit(id)?;
        let message = String::from_utf8_lossy(commit.message_bytes()).into_owned();
        let mut out = BTreeMap::new();
        for line in message.lines() {
            let Some(rest) = line.strip_prefix(OVERSIZE_TRAILER) else {
                continue;
            };
            let mut parts = rest.splitn(3, ' ');
            if let (Some(size), Some(mtime), Some(path)) =
                (parts.next(), parts.next(), parts.next())
                && let (Ok(size), Ok(mtime)) = (size.parse(), mtime.parse())
            {
                out.insert(path.to_string(), (size, mtime));
            }
        }
        Ok(out)
    }

    /// Marks checkpoint `id` as the validated state to return to.
    pub fn mark_validated(&self, id: Oid) -> Result<(), WorkspaceError> {
        self.commit(id)?;
        self.repo
            .reference(VALIDATED_REF, id, true, "validated")
            .map_err(WorkspaceError::git("marking a checkpoint validated"))?;
        Ok(())
    }

    /// The checkpoint last marked validated, if any.
    pub fn validated(&self) -> Result<Option<Checkpoint>, WorkspaceError> {
        match self.repo.refname_to_id(VALIDATED_REF) {
            Ok(id) => self.get(id).map(Some),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(WorkspaceError::git("reading the validated checkpoint")(e)),
        }
    }

    /// [`Self::scan`] without copying a snapshot the journal kept.
    pub(crate) fn scan_shared(&mut self) -> Result<Arc<Snapshot>, WorkspaceError> {
        if self.journal.is_some() {
            return self.snapshot();
        }
        Ok(Arc::new(self.scan()?))
    }

    /// Scans the workspace, storing the blobs of changed files.
    pub fn scan(&mut self) -> Result<Snapshot, WorkspaceError> {
        if self.journal.is_some() {
            let snapshot = self.snapshot()?;
            return Ok(Snapshot::clone(&snapshot));
        }
        let odb = self
            .repo
            .odb()
            .map_err(WorkspaceError::git("opening the object database"))?;
        self.scanner
            .scan_with(&mut |reader, size| store_new_blob(&odb, reader, size))
    }

    /// Scans the workspace and writes its tree.
    fn snapshot_tree(&mut self) -> Result<(Arc<Snapshot>, Oid), WorkspaceError> {
        let snapshot = match self.journal {
            Some(_) => self.snapshot()?,
            None => Arc::new(self.scan()?),
        };
        let odb = self
            .repo
            .odb()
            .map_err(WorkspaceError::git("opening the object database"))?;
        let Some(kept) = self
            .kept
            .as_mut()
            .filter(|k| Arc::ptr_eq(&k.snapshot, &snapshot))
        else {
            let tree_id = write_tree(&odb, &snapshot.entries, &mut self.stored_trees)?;
            return Ok((snapshot, tree_id));
        };
        if let Some(tree) = kept.tree {
            return Ok((snapshot, tree));
        }
        // Only the directories on the way to what changed are written again.
        let mut dirs = std::mem::take(&mut kept.dirs);
        let changed = std::mem::take(&mut kept.changed);
        if !changed.is_empty() {
            dirs.retain(|dir, _| !touches(&changed, dir));
        }
        let mut made = DirTrees::new();
        let tree_id = write_tree_reusing(
            &odb,
            &snapshot.entries,
            &mut self.stored_trees,
            &dirs,
            &mut made,
        )?;
        dirs.extend(made);
        kept.dirs = dirs;
        kept.tree = Some(tree_id);
        Ok((snapshot, tree_id))
    }

    /// The workspace as a full scan would find it now, through the
    /// journal: the kept snapshot when nothing changed, brought up to date
    /// when some paths did, else a full scan that watches every directory
    /// again.
    fn snapshot(&mut self) -> Result<Arc<Snapshot>, WorkspaceError> {
        let Some(journal) = &self.journal else {
            return Ok(Arc::new(self.scan()?));
        };
        let changes = journal.take();
        let kept = self.kept.take();
        let odb = self
            .repo
            .odb()
            .map_err(WorkspaceError::git("opening the object database"))?;
        let mut sink = |reader: &mut dyn std::io::Read, size| store_new_blob(&odb, reader, size);
        let watch = |dir: std::os::fd::BorrowedFd<'_>, rel: &[u8]| journal.watch_dir(dir, rel);
        if let (Changes::Paths(mut paths), Some(kept)) = (changes, kept) {
            if paths.is_empty() && kept.linked.is_empty() {
                let snapshot = Arc::clone(&kept.snapshot);
                self.kept = Some(kept);
                return Ok(snapshot);
            }
            paths.extend(kept.linked.iter().cloned());
            let old =
                Arc::try_unwrap(kept.snapshot).map_or_else(|s| s.entries.clone(), |s| s.entries);
            match self.scanner.rescan(&mut sink, old, paths, Some(&watch)) {
                Ok((snapshot, facts)) => {
                    // A new name of a file: its other names may have
                    // changed unseen.
                    if facts.linked.iter().all(|p| kept.linked.contains(p)) {
                        let snapshot = Arc::new(snapshot);
                        let mut changed = kept.changed;
                        changed.extend(facts.roots);
                        self.kept = Some(Kept {
                            snapshot: Arc::clone(&snapshot),
                            tree: None,
                            linked: kept.linked,
                            dirs: kept.dirs,
                            changed: outermost(changed),
                        });
                        return Ok(snapshot);
                    }
                }
                Err(e) => {
                    journal.invalidate();
                    return Err(e);
                }
            }
        }
        journal.begin_full_scan();
        let scanned = self.scanner.scan_hooked(&mut sink, Some(&watch));
        journal.end_full_scan(scanned.is_ok());
        let (snapshot, facts) = scanned?;
        let snapshot = Arc::new(snapshot);
        self.kept = Some(Kept {
            snapshot: Arc::clone(&snapshot),
            tree: None,
            linked: facts.linked.into_iter().collect(),
            dirs: DirTrees::new(),
            changed: Vec::new(),
        });
        Ok(snapshot)
    }

    /// The next checkpoint scans the workspace whole (it was written
    /// without the journal's help).
    fn forget_kept(&mut self) {
        self.kept = None;
        if let Some(journal) = &self.journal {
            journal.invalidate();
        }
    }

    fn tree(&self, id: Oid) -> Result<Tree<'_>, WorkspaceError> {
        self.repo
            .find_tree(id)
            .map_err(WorkspaceError::git("reading a tree"))
    }

    fn patch(&self, old: &Tree<'_>, new: &Tree<'_>) -> Result<String, WorkspaceError> {
        Ok(self.patch_capped(old, new, usize::MAX)?.0)
    }

    /// The patch from `old` to `new`, holding at most `cap` bytes in memory:
    /// past it the text is cut at the last file boundary that fits, and
    /// printing goes on only to count. Returns the text and the whole
    /// patch's length.
    pub(crate) fn patch_capped(
        &self,
        old: &Tree<'_>,
        new: &Tree<'_>,
        cap: usize,
    ) -> Result<(String, u64), WorkspaceError> {
        let diff = self
            .repo
            .diff_tree_to_tree(Some(old), Some(new), None)
            .map_err(WorkspaceError::git("diffing checkpoints"))?;
        print_capped(&diff, cap)
    }

    /// The patch a run delivers, cut like [`Self::patch_capped`]: binary
    /// files carried whole (`GIT binary patch`) and every `index` line with
    /// full object ids, so the patch alone names the exact pre-image and
    /// post-image of each file and `apply` can check both.
    pub(crate) fn full_patch_capped(
        &self,
        old: &Tree<'_>,
        new: &Tree<'_>,
        cap: usize,
    ) -> Result<(String, u64), WorkspaceError> {
        let mut options = git2::DiffOptions::new();
        options.show_binary(true).id_abbrev(40);
        let diff = self
            .repo
            .diff_tree_to_tree(Some(old), Some(new), Some(&mut options))
            .map_err(WorkspaceError::git("diffing checkpoints"))?;
        print_capped(&diff, cap)
    }

    fn tip(&self) -> Result<Option<git2::Commit<'_>>, WorkspaceError> {
        match self.repo.refname_to_id(CHECKPOINTS_REF) {
            Ok(id) => self.commit(id).map(Some),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(WorkspaceError::git("reading the latest checkpoint")(e)),
        }
    }

    fn commit(&self, id: Oid) -> Result<git2::Commit<'_>, WorkspaceError> {
        self.repo
            .find_commit(id)
            .map_err(|_| WorkspaceError::UnknownCheckpoint { id: id.to_string() })
    }
}

/// `diff` as patch text, at most `cap` bytes of it in memory: past the cap
/// the text is cut at the last file boundary that fits and printing goes on
/// only to count. Returns the text and the whole patch's length.
fn print_capped(diff: &git2::Diff<'_>, cap: usize) -> Result<(String, u64), WorkspaceError> {
    let mut out = Vec::new();
    let mut total = 0u64;
    // Where the file being printed started in `out`.
    let mut file_start = 0;
    let mut full = true;
    diff.print(DiffFormat::Patch, |_, _, line| {
        let origin = matches!(line.origin(), '+' | '-' | ' ');
        let len = line.content().len() + usize::from(origin);
        total += len as u64;
        if !full {
            return true;
        }
        if line.origin() == 'F' {
            file_start = out.len();
        }
        if out.len() + len > cap {
            out.truncate(file_start);
            full = false;
            return true;
        }
        if origin {
            out.push(line.origin() as u8);
        }
        out.extend_from_slice(line.content());
        true
    })
    .map_err(WorkspaceError::git("printing a patch"))?;
    Ok((String::from_utf8_lossy(&out).into_owned(), total))
}

/// [`CheckpointStore::export`] through a handle of its own on the store at
/// `store_dir`, so it can run on another thread while the store's owner goes
/// on: a checkpoint, once written, never changes. Stops between two files
/// once `stop` says so (returning `false`: not all was written).
pub(crate) fn export_from(
    store_dir: &Path,
    id: Oid,
    root: &WorkspaceRoot,
    stop: &dyn Fn() -> bool,
) -> Result<bool, WorkspaceError> {
    let repo = Repository::open_bare(store_dir)
        .map_err(WorkspaceError::git("opening the checkpoint store"))?;
    export_tree(&repo, id, root, stop)
}

fn export_tree(
    repo: &Repository,
    id: Oid,
    root: &WorkspaceRoot,
    stop: &dyn Fn() -> bool,
) -> Result<bool, WorkspaceError> {
    let tree = repo
        .find_commit(id)
        .map_err(|_| WorkspaceError::UnknownCheckpoint { id: id.to_string() })?
        .tree()
        .map_err(WorkspaceError::git("reading a checkpoint"))?;
    for (path, &(mode, blob)) in &flatten(&tree)? {
        if stop() {
            return Ok(false);
        }
        write_entry(repo, root, Path::new(OsStr::from_bytes(path)), mode, blob)?;
    }
    Ok(true)
}

pub(in crate::workspace) fn write_entry(
    repo: &Repository,
    root: &WorkspaceRoot,
    path: &Path,
    mode: u32,
    blob: Oid,
) -> Result<(), WorkspaceError> {
    let blob = repo
        .find_blob(blob)
        .map_err(WorkspaceError::git("reading a checkpoint blob"))?;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        root.create_dir_all(parent)?;
    }
    match mode {
        MODE_LINK => root.symlink(path, Path::new(OsStr::from_bytes(blob.content()))),
        MODE_EXEC => root.write_with_mode(path, blob.content(), 0o755),
        _ => root.write_with_mode(path, blob.content(), 0o644),
    }
}

/// Path bytes → (mode, blob id) for every blob and link of a tree.
fn flatten(tree: &Tree<'_>) -> Result<BTreeMap<Vec<u8>, (u32, Oid)>, WorkspaceError> {
    let mut out = BTreeMap::new();
    tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(ObjectType::Blob) {
            let mut path = dir.as_bytes().to_vec();
            path.extend_from_slice(entry.name_bytes());
            out.insert(path, (entry.filemode() as u32, entry.id()));
        }
        TreeWalkResult::Ok
    })
    .map_err(WorkspaceError::git("reading a checkpoint tree"))?;
    Ok(out)
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
