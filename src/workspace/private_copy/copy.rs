//! The private copy of a source repository that a run works on.
//!
//! What is copied: the files Git tracks plus the untracked files that are not
//! ignored, as they are in the working tree (not as staged), with their
//! execute bit, and symlinks that stay inside the repository. Left out, and
//! listed by [`PrivateWorkspace::left_out`]: credential files
//! ([`SecretPaths`]) and paths git refuses. Refused, naming the path:
//! symlinks leading outside, submodules and nested repositories, fifos,
//! sockets and devices, and files their owner cannot read (judged on the
//! mode bits, which root would otherwise ignore). The source `.git` is never
//! copied; the copy gets a fresh repository with one baseline commit of
//! everything copied.
//!
//! The source is only read: libgit2 reads its index and computes its status
//! without writing either, and runs no hooks, filters or other programs.
//!
//! Files are copied in fixed-size chunks, and only their data: holes of a
//! sparse file (found with `SEEK_DATA`/`SEEK_HOLE`) stay holes, so a 2 GB
//! sparse file costs neither 2 GB of disk nor of memory. A file over the
//! per-file limit is copied but kept out of the baseline commit (and hidden
//! from `git status` by `.git/info/exclude`), as it is out of every
//! checkpoint: it is never read whole to be hashed.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use git2::{
    IndexEntry, IndexTime, ObjectType, Oid, Repository, RepositoryOpenFlags, StatusOptions,
};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use super::pack::{Pack, PackWriter, encode_blob, reuse_packs};
use crate::protocol::SourceState;
use crate::workspace::confinement::secrets::{
    LeftOut, REASON_CREDENTIAL, REASON_GIT_REFUSES, SecretPaths,
};
use crate::workspace::scan::fingerprint::{now_ns, oid_bytes};
use crate::workspace::scan::stat_cache::{CachedHash, StatKey};
use crate::workspace::scan::walk::stat_key;
use crate::workspace::store::tree::signature;
use crate::workspace::store::tree::{TreeItem, build_tree};
use crate::workspace::{WorkspaceError, WorkspaceRoot, verify_path};

const MODE_GITLINK: u32 = 0o160000;

/// A private copy of a source repository, with its baseline commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateWorkspace {
    path: PathBuf,
    baseline: Oid,
    owner: Option<(u32, u32)>,
    left_out: Vec<LeftOut>,
    /// Disk space the copied files take (`st_blocks` × 512), `.git` aside.
    allocated: u64,
    /// Files and symlinks copied.
    files: u64,
    pack: Vec<Pack>,
    /// What the copy knows of the files it committed, until a checkpoint
    /// store takes it for its baseline.
    facts: BaselineFacts,
    /// What the source was when it was listed for the copy.
    source: SourceState,
    /// When the copy began reading the source: a source file whose times
    /// are older than this (less the racy window) is what the copy holds.
    /// `None` for a rebuilt workspace.
    as_of_ns: Option<i64>,
}

/// For each file the copy wrote and committed: its `lstat` facts right after
/// writing, its content SHA-256 and its blob id, as a scan would find them,
/// recorded at the time the copy started.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct BaselineFacts(pub(crate) HashMap<Vec<u8>, CachedHash>);

impl std::fmt::Debug for BaselineFacts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BaselineFacts({} files)", self.0.len())
    }
}

impl PrivateWorkspace {
    /// Copies `source_repo` into `dest` (which must not exist or be empty)
    /// and commits the copy as the baseline. With `owner_uid_gid` set and
    /// running as root, everything in `dest` (`.git` included) is given to
    /// that uid/gid, e.g. the sandbox user. The default credential paths are
    /// left out.
    pub fn create(
        source_repo: &Path,
        dest: &Path,
        owner_uid_gid: Option<(u32, u32)>,
    ) -> Result<Self, WorkspaceError> {
        Self::create_with(source_repo, dest, owner_uid_gid, &SecretPaths::default())
    }

    /// [`Self::create`], leaving out the credential paths of `secrets`.
    pub fn create_with(
        source_repo: &Path,
        dest: &Path,
        owner_uid_gid: Option<(u32, u32)>,
        secrets: &SecretPaths,
    ) -> Result<Self, WorkspaceError> {
        Self::create_limited(
            source_repo,
            dest,
            owner_uid_gid,
            secrets,
            crate::workspace::DEFAULT_MAX_FILE_BYTES,
            &mut |_| {},
        )
    }

    /// [`Self::create_with`]; files over `max_file_bytes` are copied but not
    /// committed to the baseline (see the module documentation), and
    /// `progress` hears after each source path.
    pub(crate) fn create_limited(
        source_repo: &Path,
        dest: &Path,
        owner_uid_gid: Option<(u32, u32)>,
        secrets: &SecretPaths,
        max_file_bytes: u64,
        progress: &mut dyn FnMut(CopyProgress),
    ) -> Result<Self, WorkspaceError> {
        let workers = std::thread::available_parallelism().map_or(1, usize::from);
        Self::create_with_workers(
            source_repo,
            dest,
            owner_uid_gid,
            secrets,
            max_file_bytes,
            progress,
            workers,
        )
    }

    /// [`Self::create_limited`] copying with up to `workers` threads (two
    /// at most: the kernel's file creation is most of a copy, and a second
    /// thread creating files in other directories takes half of it when a
    /// core is free).
    pub(super) fn create_with_workers(
        source_repo: &Path,
        dest: &Path,
        owner_uid_gid: Option<(u32, u32)>,
        secrets: &SecretPaths,
        max_file_bytes: u64,
        progress: &mut dyn FnMut(CopyProgress),
        workers: usize,
    ) -> Result<Self, WorkspaceError> {
        let source = open_source(source_repo)?;
        let workdir = workdir_of(&source, source_repo)?;
        let (paths, source_state) = source_paths(&source, secrets)?;
        drop(source);

        prepare_dest(dest)?;
        let owner = owner_uid_gid.filter(|_| rustix::process::geteuid().is_root());
        let repo = Repository::init(dest)
            .map_err(WorkspaceError::git("creating the workspace repository"))?;
        let pack = PackWriter::new(&repo.path().join("objects"))?;
        let started_ns = now_ns();
        let copier = Copier::new(&workdir, dest, owner, max_file_bytes, started_ns)?;
        let mut left_out = Vec::new();
        let mut todo = Vec::with_capacity(paths.len());
        for rel in &paths {
            match left_out_reason(rel, secrets) {
                Some(reason) => left_out.push(LeftOut::new(rel, reason)),
                None => todo.push(Path::new(OsStr::from_bytes(rel))),
            }
        }
        let (total, skipped) = (paths.len() as u64, left_out.len() as u64);
        if skipped > 0 {
            progress(CopyProgress {
                files: skipped,
                total,
                bytes: 0,
            });
        }
        let pack = Mutex::new(pack);
        let copied = copy_paths(&copier, &todo, &pack, workers, &mut |files, bytes| {
            progress(CopyProgress {
                files: skipped + files,
                total,
                bytes,
            });
        })?;
        let pack = pack.into_inner().unwrap_or_else(PoisonError::into_inner);
        let allocated = copied
            .iter()
            .fold(0u64, |sum, f| sum.saturating_add(f.allocated));
        let files = copied.len() as u64;
        let (baseline, pack, facts) =
            commit_baseline(&repo, dest, pack, copied, max_file_bytes, started_ns)?;
        drop(repo);
        if let Some((uid, gid)) = owner {
            // The copied files were given away as they were made; what is
            // left is the directories, the new `.git`, then the root.
            copier.give_made_dirs()?;
            chown_git_dir(&dest.join(".git"), uid, gid)?;
            std::os::unix::fs::lchown(dest, Some(uid), Some(gid))
                .map_err(|e| WorkspaceError::io(dest, e))?;
        }
        Ok(Self {
            path: dest.to_path_buf(),
            baseline,
            owner,
            left_out,
            allocated,
            files,
            pack,
            facts,
            source: source_state,
            as_of_ns: Some(started_ns),
        })
    }

    /// A workspace made some other way (rebuilt from checkpoints): its
    /// `.git` holds loose objects, so it has no baseline pack to hand on.
    pub(super) fn from_parts(
        path: PathBuf,
        baseline: Oid,
        owner: Option<(u32, u32)>,
        left_out: Vec<LeftOut>,
    ) -> Self {
        Self {
            path,
            baseline,
            owner,
            left_out,
            allocated: 0,
            files: 0,
            pack: Vec::new(),
            facts: BaselineFacts::default(),
            source: SourceState::default(),
            as_of_ns: None,
        }
    }

    /// A workspace taken from a copy prepared ahead (see the prepared
    /// module): its checkpoint store was seeded with the baseline's objects
    /// when the copy was made, so there is no pack to hand on.
    pub(super) fn from_prepared(
        path: PathBuf,
        baseline: Oid,
        owner: Option<(u32, u32)>,
        left_out: Vec<LeftOut>,
        allocated: u64,
        files: u64,
        source: SourceState,
    ) -> Self {
        Self {
            allocated,
            files,
            source,
            ..Self::from_parts(path, baseline, owner, left_out)
        }
    }

    /// The same, known to hold the source as it was at `as_of_ns`.
    pub(super) fn with_as_of(self, as_of_ns: i64) -> Self {
        Self {
            as_of_ns: Some(as_of_ns),
            ..self
        }
    }

    /// The same, with what a copy made elsewhere recorded of the files it
    /// wrote (see [`Self::take_baseline_facts`]).
    pub(super) fn with_baseline_facts(self, facts: BaselineFacts) -> Self {
        Self { facts, ..self }
    }

    /// When the copy began reading the source (`None` when rebuilt): see
    /// the recycle module.
    pub(crate) fn as_of_ns(&self) -> Option<i64> {
        self.as_of_ns
    }

    /// What the source was when the copy listed it (the default when the
    /// workspace was rebuilt instead).
    pub(crate) fn source_state(&self) -> &SourceState {
        &self.source
    }

    /// How many files and symlinks were copied (0 when rebuilt).
    pub(crate) fn copied_files(&self) -> u64 {
        self.files
    }

    /// Hands over what the copy knows of each committed file, once: it
    /// describes the files as the copy left them, so it serves only the
    /// scan of the baseline checkpoint, taken before anything else runs in
    /// the workspace.
    pub(crate) fn take_baseline_facts(&mut self) -> BaselineFacts {
        std::mem::take(&mut self.facts)
    }

    /// The pack holding the baseline's files and trees in the workspace's
    /// `.git`: a checkpoint store can take the same objects from it.
    pub(crate) fn baseline_pack(&self) -> &[Pack] {
        &self.pack
    }

    /// The disk space of the copied files (without the workspace's `.git`):
    /// the source's size, as far as the workspace limits are concerned.
    pub(crate) fn allocated_bytes(&self) -> u64 {
        self.allocated
    }

    /// The source paths not copied, and why, in path order.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id of the baseline commit in the workspace's own `.git`.
    pub fn baseline(&self) -> Oid {
        self.baseline
    }

    /// Confined access to the workspace, creating files as its owner.
    pub fn root(&self) -> Result<WorkspaceRoot, WorkspaceError> {
        Ok(WorkspaceRoot::open(&self.path)?.with_owner(self.owner))
    }
}

/// How far a copy is: `files` of the `total` source paths, `bytes` copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyProgress {
    pub files: u64,
    pub total: u64,
    pub bytes: u64,
}

/// A file copied into the workspace: path, git mode and size (a symlink's
/// target is its content).
struct CopiedFile {
    path: Vec<u8>,
    mode: u32,
    size: u64,
    /// Disk space of the copy (`st_blocks` × 512).
    allocated: u64,
    content: Content,
}

/// How far a copied path is on its way into the baseline.
enum Content {
    /// A symlink: its target.
    Link(Vec<u8>),
    /// A file read once: written to the workspace and, if within the limit,
    /// its blob to the pack, with its facts (`None`: over the limit).
    Read(Option<CachedHash>),
    /// A larger file the kernel copied: its facts right after writing.
    Copied(StatKey),
    /// A file already in the copy whose blob is already in a pack.
    Known(Oid),
}

/// The source repository, opened without searching upwards.
pub(super) fn open_source(source_repo: &Path) -> Result<Repository, WorkspaceError> {
    Repository::open_ext(
        source_repo,
        RepositoryOpenFlags::NO_SEARCH,
        &[] as &[&OsStr],
    )
    .map_err(WorkspaceError::git(format!(
        "opening the source repository {}",
        source_repo.display()
    )))
}

/// The working tree of `source` (a bare repository has none).
pub(super) fn workdir_of(
    source: &Repository,
    source_repo: &Path,
) -> Result<PathBuf, WorkspaceError> {
    Ok(source
        .workdir()
        .ok_or_else(|| {
            WorkspaceError::io(source_repo, std::io::Error::other("is a bare repository"))
        })?
        .to_path_buf())
}

/// Why the source path `rel` is not copied, if it is not.
pub(super) fn left_out_reason(rel: &[u8], secrets: &SecretPaths) -> Option<&'static str> {
    if secrets.matches(rel, false) {
        Some(REASON_CREDENTIAL)
    } else if !verify_path(rel, false) {
        Some(REASON_GIT_REFUSES)
    } else {
        None
    }
}

/// Whether every one of `paths` (relative, `/`-separated) that the source
/// repository at `repo` holds is copied into a workspace as it is, and
/// reads there as in the source: a regular file its owner can read, not
/// ignored, not left out, with no link on its way (a link is copied as a
/// link, and what it leads to in the source may be what the copy leaves
/// out, or the source's own `.git`). `false` where that cannot be told.
pub(crate) fn copied_as_they_are(repo: &Path, paths: &[String], secrets: &SecretPaths) -> bool {
    let Ok(source) = open_source(repo) else {
        return false;
    };
    let Ok(workdir) = workdir_of(&source, repo) else {
        return false;
    };
    paths.iter().all(|path| {
        let rel = Path::new(path);
        let mut at = workdir.clone();
        for part in rel.components() {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
                Err(_) => return false,
                Ok(m) if m.file_type().is_symlink() => return false,
                Ok(m) if at.as_path() == workdir.join(rel) => {
                    if !m.file_type().is_file() || m.permissions().mode() & 0o400 == 0 {
                        return false;
                    }
                }
                Ok(_) => {}
            }
        }
        match source.status_file(rel) {
            Err(e) => e.code() == git2::ErrorCode::NotFound,
            Ok(status) => {
                !status.contains(git2::Status::IGNORED)
                    && left_out_reason(path.as_bytes(), secrets).is_none()
            }
        }
    })
}

/// Tracked paths (stage 0..3, deduplicated) plus untracked, not ignored
/// ones; and the state of the source they give.
pub(super) fn source_paths(
    repo: &Repository,
    secrets: &SecretPaths,
) -> Result<(BTreeSet<Vec<u8>>, SourceState), WorkspaceError> {
    let index = repo
        .index()
        .map_err(WorkspaceError::git("reading the source index"))?;
    let mut paths = BTreeSet::new();
    let workdir = repo.workdir().unwrap_or(Path::new(".")).to_path_buf();
    for entry in index.iter() {
        if entry.mode == MODE_GITLINK {
            // A checked-out submodule is copied as plain files.
            submodule_paths(&workdir, &entry.path, 0, &mut paths)?;
            continue;
        }
        paths.insert(entry.path);
    }
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .include_unmodified(false)
        .update_index(false);
    let statuses = repo
        .statuses(Some(&mut opts))
        .map_err(WorkspaceError::git("listing untracked files of the source"))?;
    for entry in statuses.iter() {
        if !entry.status().is_wt_new() {
            continue;
        }
        let path = entry.path_bytes();
        // An untracked directory that Git does not enter is a nested repository.
        if let Some(dir) = path.strip_suffix(b"/") {
            return Err(WorkspaceError::Submodule {
                path: PathBuf::from(OsStr::from_bytes(dir)),
            });
        }
        paths.insert(path.to_vec());
    }
    let state = super::source_state::from_statuses(repo, Some(&statuses));
    drop(statuses);
    // Git's status does not report fifos, sockets or devices at all: find
    // the ones that are not ignored, to refuse them.
    let workdir = repo.workdir().unwrap_or(Path::new("."));
    // A directory holding a path to copy is entered without asking Git
    // whether it is ignored: a special file found in it still is asked,
    // and Git's answer for a path covers its directories.
    let mut holding = HashSet::new();
    for path in &paths {
        for (at, _) in path.iter().enumerate().filter(|(_, b)| **b == b'/') {
            holding.insert(&path[..at]);
        }
    }
    find_special_files(repo, workdir, Path::new(""), secrets, &holding)?;
    drop(holding);
    Ok((paths, state))
}

/// The submodule paths of the repository at `root` (its index's gitlinks);
/// none where it cannot be read.
pub fn submodules_of(root: &Path) -> Vec<String> {
    let Ok(repo) = open_source(root) else {
        return Vec::new();
    };
    let Ok(index) = repo.index() else {
        return Vec::new();
    };
    index
        .iter()
        .filter(|e| e.mode == MODE_GITLINK)
        .map(|e| String::from_utf8_lossy(&e.path).into_owned())
        .collect()
}

/// Submodules within submodules are followed this deep.
const MAX_SUBMODULE_DEPTH: usize = 4;

/// The files of the submodule at `rel` (relative to `workdir`, the outer
/// working tree) as the outer repository's paths: its tracked files and
/// its untracked ones that are not ignored, its own submodules in turn,
/// never its `.git`. A submodule that is not checked out (an empty
/// directory) has none.
fn submodule_paths(
    workdir: &Path,
    rel: &[u8],
    depth: usize,
    paths: &mut BTreeSet<Vec<u8>>,
) -> Result<(), WorkspaceError> {
    let refuse = || WorkspaceError::Submodule {
        path: PathBuf::from(OsStr::from_bytes(rel)),
    };
    if depth >= MAX_SUBMODULE_DEPTH || !verify_path(rel, false) {
        return Err(refuse());
    }
    let dir = workdir.join(OsStr::from_bytes(rel));
    match std::fs::symlink_metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        // Not checked out, or removed: nothing of it is in the working tree.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        _ => return Err(refuse()),
    }
    if std::fs::symlink_metadata(dir.join(".git")).is_err() {
        return Ok(());
    }
    let sub = Repository::open_ext(&dir, RepositoryOpenFlags::NO_SEARCH, &[] as &[&OsStr])
        .map_err(|_| refuse())?;
    let prefixed = |path: &[u8]| {
        let mut full = rel.to_vec();
        full.push(b'/');
        full.extend_from_slice(path);
        full
    };
    let index = sub
        .index()
        .map_err(WorkspaceError::git("reading a submodule's index"))?;
    for entry in index.iter() {
        let full = prefixed(&entry.path);
        if entry.mode == MODE_GITLINK {
            submodule_paths(workdir, &full, depth + 1, paths)?;
        } else {
            paths.insert(full);
        }
    }
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .include_unmodified(false)
        .exclude_submodules(true)
        .update_index(false);
    let statuses = sub
        .statuses(Some(&mut opts))
        .map_err(WorkspaceError::git("listing a submodule's untracked files"))?;
    for entry in statuses.iter() {
        if !entry.status().is_wt_new() {
            continue;
        }
        let path = entry.path_bytes();
        if let Some(nested) = path.strip_suffix(b"/") {
            return Err(WorkspaceError::Submodule {
                path: PathBuf::from(OsStr::from_bytes(&prefixed(nested))),
            });
        }
        paths.insert(prefixed(path));
    }
    Ok(())
}

fn find_special_files(
    repo: &Repository,
    workdir: &Path,
    rel: &Path,
    secrets: &SecretPaths,
    holding: &HashSet<&[u8]>,
) -> Result<(), WorkspaceError> {
    let dir = workdir.join(rel);
    for entry in std::fs::read_dir(&dir).map_err(|e| WorkspaceError::io(&dir, e))? {
        let entry = entry.map_err(|e| WorkspaceError::io(&dir, e))?;
        let ft = entry
            .file_type()
            .map_err(|e| WorkspaceError::io(entry.path(), e))?;
        let path = rel.join(entry.file_name());
        if entry.file_name() == ".git" || ft.is_file() || ft.is_symlink() {
            continue;
        }
        // What is left out is never looked into.
        let bytes = path.as_os_str().as_bytes();
        if left_out_reason(bytes, secrets).is_some() || secrets.matches(bytes, ft.is_dir()) {
            continue;
        }
        let ignored = || {
            repo.is_path_ignored(&path)
                .map_err(WorkspaceError::git("checking .gitignore"))
        };
        if ft.is_dir() {
            if holding.contains(bytes) || !ignored()? {
                find_special_files(repo, workdir, &path, secrets, holding)?;
            }
        } else if !ignored()? {
            return Err(WorkspaceError::SpecialFile {
                kind: special_kind(&ft),
                path,
            });
        }
    }
    Ok(())
}

fn special_kind(ft: &std::fs::FileType) -> &'static str {
    if ft.is_fifo() {
        "fifo"
    } else if ft.is_socket() {
        "socket"
    } else {
        "device"
    }
}

pub(super) fn prepare_dest(dest: &Path) -> Result<(), WorkspaceError> {
    match std::fs::read_dir(dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(WorkspaceError::DestinationNotEmpty {
                    path: dest.to_path_buf(),
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dest).map_err(|e| WorkspaceError::io(dest, e))?;
        }
        Err(e) => return Err(WorkspaceError::io(dest, e)),
    }
    Ok(())
}

/// Copies `todo` (in path order) with up to two threads, each on its own
/// contiguous run of paths (so mostly in directories of its own); gives the
/// files copied in path order. `progress` hears, on this thread, how many
/// paths are done and how many bytes were copied. The first error in path
/// order is the one returned, as a copy in one thread would.
fn copy_paths(
    copier: &Copier<'_>,
    todo: &[&Path],
    pack: &Mutex<PackWriter>,
    workers: usize,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<CopiedFile>, WorkspaceError> {
    let split = if workers > 1 && todo.len() >= PARALLEL_FROM {
        todo.len() / 2
    } else {
        todo.len()
    };
    let (first, second) = todo.split_at(split);
    let stop = AtomicBool::new(false);
    let (files, bytes) = (AtomicU64::new(0), AtomicU64::new(0));
    let (mine, theirs) = std::thread::scope(|s| {
        let helper = (!second.is_empty()).then(|| {
            s.spawn(|| {
                copy_run(copier, second, pack, &stop, &mut |size| {
                    files.fetch_add(1, Ordering::Relaxed);
                    bytes.fetch_add(size, Ordering::Relaxed);
                })
            })
        });
        let (mut my_files, mut my_bytes) = (0, 0);
        let mine = copy_run(copier, first, pack, &stop, &mut |size| {
            my_files += 1;
            my_bytes += size;
            progress(
                my_files + files.load(Ordering::Relaxed),
                my_bytes + bytes.load(Ordering::Relaxed),
            );
        });
        if mine.is_err() {
            // Whatever the second half finds comes after this error.
            stop.store(true, Ordering::Relaxed);
        }
        let theirs = helper.map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
        (mine, theirs)
    });
    let mut copied = mine?;
    if let Some(theirs) = theirs {
        copied.extend(theirs?);
        progress(todo.len() as u64, copied.iter().map(|f| f.size).sum());
    }
    Ok(copied)
}

/// Copies `paths` in order until done, an error, or `stop`; `done` hears
/// the size of each path done.
fn copy_run(
    copier: &Copier<'_>,
    paths: &[&Path],
    pack: &Mutex<PackWriter>,
    stop: &AtomicBool,
    done: &mut dyn FnMut(u64),
) -> Result<Vec<CopiedFile>, WorkspaceError> {
    let mut copied = Vec::with_capacity(paths.len());
    let mut bufs = Buffers::default();
    for rel in paths {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let size = match copier.copy(rel, pack, &mut bufs)? {
            Some(file) => {
                let size = file.size;
                copied.push(file);
                size
            }
            None => 0,
        };
        done(size);
    }
    Ok(copied)
}

/// Copies of this many paths or more are shared between two threads.
const PARALLEL_FROM: usize = 256;

/// The memory one copying thread reuses: a small file's bytes and their
/// pack entry.
#[derive(Default)]
struct Buffers {
    data: Vec<u8>,
    framed: Vec<u8>,
}

pub(super) struct Copier<'a> {
    workdir: &'a Path,
    dir_fd: OwnedFd,
    checked_dirs: Mutex<HashSet<PathBuf>>,
    dest: &'a Path,
    /// Who is given every file and directory made (as root only).
    owner: Option<(u32, u32)>,
    /// Directories made in `dest`, relative.
    made_dirs: Mutex<HashSet<PathBuf>>,
    max_file_bytes: u64,
    /// When the copy started: the recording time of its facts.
    started_ns: i64,
}

impl<'a> Copier<'a> {
    pub(super) fn new(
        workdir: &'a Path,
        dest: &'a Path,
        owner: Option<(u32, u32)>,
        max_file_bytes: u64,
        started_ns: i64,
    ) -> Result<Self, WorkspaceError> {
        let dir_fd = rustix::fs::open(
            workdir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WorkspaceError::io(workdir, e))?;
        Ok(Self {
            workdir,
            dir_fd,
            checked_dirs: Default::default(),
            dest,
            owner,
            made_dirs: Default::default(),
            max_file_bytes,
            started_ns,
        })
    }

    /// Copies one working-tree path; `None` when it is gone or a directory.
    /// A small file within the limit goes into `pack` on the way, through
    /// `bufs`.
    fn copy(
        &self,
        rel: &Path,
        pack: &Mutex<PackWriter>,
        bufs: &mut Buffers,
    ) -> Result<Option<CopiedFile>, WorkspaceError> {
        let src = self.workdir.join(rel);
        if !self.parents_are_dirs(rel)? {
            return Ok(None);
        }
        let meta = match std::fs::symlink_metadata(&src) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(WorkspaceError::io(&src, e)),
        };
        let ft = meta.file_type();
        let to = self.dest.join(rel);
        let (mode, size, allocated, content) = if ft.is_file() {
            if meta.permissions().mode() & 0o400 == 0 {
                return Err(WorkspaceError::Unreadable {
                    path: rel.to_path_buf(),
                    mode: meta.permissions().mode() & 0o7777,
                });
            }
            let exec = meta.permissions().mode() & 0o111 != 0;
            self.create_parent(rel)?;
            let perm = if exec { 0o755 } else { 0o644 };
            let copied = copy_file(&src, &to, perm, self, pack, bufs)?;
            (
                if exec { 0o100755 } else { 0o100644 },
                copied.size,
                copied.allocated,
                copied.content,
            )
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| WorkspaceError::io(&src, e))?;
            self.check_link(rel, &target)?;
            self.create_parent(rel)?;
            std::os::unix::fs::symlink(&target, &to).map_err(|e| WorkspaceError::io(&to, e))?;
            if let Some((uid, gid)) = self.owner {
                std::os::unix::fs::lchown(&to, Some(uid), Some(gid))
                    .map_err(|e| WorkspaceError::io(&to, e))?;
            }
            let bytes = target.as_os_str().as_bytes().to_vec();
            (0o120000, bytes.len() as u64, 0, Content::Link(bytes))
        } else if ft.is_dir() {
            if src.join(".git").exists() {
                return Err(WorkspaceError::Submodule {
                    path: rel.to_path_buf(),
                });
            }
            return Ok(None);
        } else {
            return Err(WorkspaceError::SpecialFile {
                path: rel.to_path_buf(),
                kind: special_kind(&ft),
            });
        };
        Ok(Some(CopiedFile {
            path: rel.as_os_str().as_bytes().to_vec(),
            mode,
            size,
            allocated,
            content,
        }))
    }

    /// Makes the missing ancestors of `rel` in the destination. They stay
    /// ours until the copy is done ([`Self::give_made_dirs`]): the sandbox's
    /// container may already be running, and nothing it owns may stand on
    /// a path this copy still writes by.
    fn create_parent(&self, rel: &Path) -> Result<(), WorkspaceError> {
        let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) else {
            return Ok(());
        };
        let missing: Vec<&Path> = {
            let made = self
                .made_dirs
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            parent
                .ancestors()
                .filter(|p| !p.as_os_str().is_empty())
                .take_while(|p| !made.contains(*p))
                .collect()
        };
        for dir in missing.into_iter().rev() {
            let path = self.dest.join(dir);
            match std::fs::create_dir(&path) {
                Ok(()) => {}
                // Made by the other thread.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && path.is_dir() => {}
                Err(e) => return Err(WorkspaceError::io(&path, e)),
            }
            self.made_dirs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(dir.to_path_buf());
        }
        Ok(())
    }

    /// Gives the directories made to the owner, deepest first: each one's
    /// parent is still ours when it is given, so nothing in the sandbox can
    /// have put a link on the way.
    fn give_made_dirs(&self) -> Result<(), WorkspaceError> {
        let Some((uid, gid)) = self.owner else {
            return Ok(());
        };
        let made = self
            .made_dirs
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut dirs: Vec<&PathBuf> = made.iter().collect();
        dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
        for dir in dirs {
            let path = self.dest.join(dir);
            std::os::unix::fs::lchown(&path, Some(uid), Some(gid))
                .map_err(|e| WorkspaceError::io(&path, e))?;
        }
        Ok(())
    }

    /// Whether every ancestor of `rel` is a real directory; an ancestor that
    /// is a symlink is refused (Git never tracks a path beyond one).
    fn parents_are_dirs(&self, rel: &Path) -> Result<bool, WorkspaceError> {
        for dir in rel
            .ancestors()
            .skip(1)
            .filter(|p| !p.as_os_str().is_empty())
        {
            if self
                .checked_dirs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(dir)
            {
                break;
            }
            match std::fs::symlink_metadata(self.workdir.join(dir)) {
                Ok(m) if m.file_type().is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(WorkspaceError::BeyondSymlink {
                        path: rel.to_path_buf(),
                    });
                }
                _ => return Ok(false),
            }
            self.checked_dirs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(dir.to_path_buf());
        }
        Ok(true)
    }

    /// Refuses a link whose target leaves the repository, judged both on the
    /// text of the target and by the kernel resolving it beneath the root.
    pub(super) fn check_link(&self, rel: &Path, target: &Path) -> Result<(), WorkspaceError> {
        let outside = || WorkspaceError::OutsideSymlink {
            path: rel.to_path_buf(),
            target: target.to_path_buf(),
        };
        let mut depth = rel.components().count().saturating_sub(1) as i64;
        for c in target.components() {
            match c {
                Component::RootDir | Component::Prefix(_) => return Err(outside()),
                Component::ParentDir => depth -= 1,
                Component::Normal(_) => depth += 1,
                Component::CurDir => {}
            }
            if depth < 0 {
                return Err(outside());
            }
        }
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(
            &self.dir_fd,
            rel,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            resolve,
        ) {
            Err(Errno::XDEV) => Err(outside()),
            _ => Ok(()),
        }
    }
}

/// A regular file as copied: its size, the disk space it takes and how far
/// it is on its way into the baseline.
struct Copied {
    size: u64,
    allocated: u64,
    content: Content,
}

/// Copies the regular file `src` to the new file `to` (created with mode
/// `perm`, whatever the umask, and given to `owner`), data only: holes stay
/// holes. A small file is read once into `bufs`: the same bytes are written,
/// hashed and (within `max_file_bytes`) packed. A larger one is copied by
/// the kernel (`copy_file_range`) where it can, otherwise through a buffer
/// in chunks, extent by extent.
fn copy_file(
    src: &Path,
    to: &Path,
    perm: u32,
    copier: &Copier<'_>,
    pack: &Mutex<PackWriter>,
    bufs: &mut Buffers,
) -> Result<Copied, WorkspaceError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let from = std::fs::File::open(src).map_err(|e| WorkspaceError::io(src, e))?;
    let size = from
        .metadata()
        .map_err(|e| WorkspaceError::io(src, e))?
        .len();
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(perm)
        .open(to)
        .map_err(|e| WorkspaceError::io(to, e))?;
    let small = size <= SMALL_FILE;
    let buf = &mut bufs.data;
    if small {
        // Too small for a hole to matter: read whole, once.
        buf.clear();
        buf.reserve(usize::try_from(size).unwrap_or(0));
        (&from)
            .take(size)
            .read_to_end(buf)
            .map_err(|e| WorkspaceError::io(src, e))?;
        // A file that shrank meanwhile is copied as its length then was.
        buf.resize(usize::try_from(size).unwrap_or(0), 0);
        out.write_all(buf).map_err(|e| WorkspaceError::io(to, e))?;
    } else {
        let mut chunk = Vec::new();
        let mut pos = 0u64;
        while pos < size {
            // The next data extent; a filesystem without SEEK_DATA reports
            // the whole file as data.
            let start = match rustix::fs::seek(&from, rustix::fs::SeekFrom::Data(pos)) {
                Ok(start) => start,
                Err(Errno::NXIO) => break, // only a hole is left
                Err(_) => pos,
            };
            let end = rustix::fs::seek(&from, rustix::fs::SeekFrom::Hole(start))
                .unwrap_or(size)
                .min(size);
            copy_range(&from, &out, start, end, &mut chunk).map_err(|e| e.at(src, to))?;
            pos = end.max(start + 1);
        }
        out.set_len(size).map_err(|e| WorkspaceError::io(to, e))?;
    }
    if let Some((uid, gid)) = copier.owner {
        std::os::unix::fs::fchown(&out, Some(uid), Some(gid))
            .map_err(|e| WorkspaceError::io(to, e))?;
    }
    let mut st = rustix::fs::fstat(&out).map_err(|e| WorkspaceError::io(to, e))?;
    if st.st_mode & 0o7777 != perm {
        // The umask took bits away.
        rustix::fs::fchmod(&out, Mode::from_raw_mode(perm))
            .map_err(|e| WorkspaceError::io(to, e))?;
        st = rustix::fs::fstat(&out).map_err(|e| WorkspaceError::io(to, e))?;
    }
    drop(out);
    let key = stat_key(&st);
    #[allow(clippy::unnecessary_cast)]
    let allocated = (st.st_blocks as u64).saturating_mul(512);
    let content = if !small {
        Content::Copied(key)
    } else if size > copier.max_file_bytes {
        Content::Read(None)
    } else {
        let blob = encode_blob(buf, std::mem::take(&mut bufs.framed))?;
        let id = blob.id;
        pack.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .append(&blob)?;
        bufs.framed = blob.into_buffer();
        Content::Read(Some(CachedHash {
            key,
            sha256: Sha256::digest(bufs.data.as_slice()).into(),
            blob: oid_bytes(id),
            recorded_ns: copier.started_ns,
        }))
    };
    Ok(Copied {
        size,
        allocated,
        content,
    })
}

/// Files up to this size are copied as one extent, without looking for holes.
const SMALL_FILE: u64 = 64 << 10;

/// Which side of a copy failed.
enum CopyError {
    Read(std::io::Error),
    Write(std::io::Error),
}

impl CopyError {
    fn at(self, src: &Path, to: &Path) -> WorkspaceError {
        match self {
            Self::Read(e) => WorkspaceError::io(src, e),
            Self::Write(e) => WorkspaceError::io(to, e),
        }
    }
}

/// Copies bytes `start..end` of `from` to the same offsets of `out`: by
/// `copy_file_range` while the kernel takes it, the rest through `buf`. A
/// source that ends early ends the copy (the caller sets the length).
fn copy_range(
    from: &std::fs::File,
    out: &std::fs::File,
    start: u64,
    end: u64,
    buf: &mut Vec<u8>,
) -> Result<(), CopyError> {
    use std::os::unix::fs::FileExt;
    let mut at = start;
    while at < end {
        let want = usize::try_from(end - at).unwrap_or(usize::MAX).min(1 << 30);
        let (mut off_in, mut off_out) = (at, at);
        match rustix::fs::copy_file_range(from, Some(&mut off_in), out, Some(&mut off_out), want) {
            Ok(0) => return Ok(()),
            Ok(n) => at += n as u64,
            Err(Errno::INTR) => {}
            // Not between these files (another filesystem, a kernel or
            // filesystem without it): through the buffer.
            Err(_) => break,
        }
    }
    if at < end && buf.is_empty() {
        buf.resize(crate::workspace::scan::fingerprint::CHUNK, 0);
    }
    while at < end {
        let want = usize::try_from(end - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = from
            .read_at(&mut buf[..want], at)
            .map_err(CopyError::Read)?;
        if n == 0 {
            break;
        }
        out.write_all_at(&buf[..n], at).map_err(CopyError::Write)?;
        at += n as u64;
    }
    Ok(())
}

/// A `.gitignore` pattern matching exactly the path `rel`, if it has one.
fn exact_pattern(rel: &[u8]) -> Option<Vec<u8>> {
    if rel.iter().any(|&b| b == b'\n' || b == b'\r') {
        return None;
    }
    let mut out = vec![b'/'];
    for &b in rel {
        if matches!(b, b'*' | b'?' | b'[' | b'\\' | b' ' | b'!' | b'#') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'\n');
    Some(out)
}

/// Commits the copied files to the fresh repository `repo` of `dest`: its
/// index and one commit hold exactly the copied bytes (no filters run),
/// all in `pack` (small files are in it already); files over
/// `max_file_bytes` are left out and listed in `.git/info/exclude`. Gives
/// the commit, the pack and what is known of each committed file.
fn commit_baseline(
    repo: &Repository,
    dest: &Path,
    mut pack: PackWriter,
    files: Vec<CopiedFile>,
    max_file_bytes: u64,
    recorded_ns: i64,
) -> Result<(Oid, Vec<Pack>, BaselineFacts), WorkspaceError> {
    let mut index = repo
        .index()
        .map_err(WorkspaceError::git("opening the workspace index"))?;
    let odb = repo
        .odb()
        .map_err(WorkspaceError::git("opening the workspace object database"))?;
    let mut excluded = Vec::new();
    let mut entries = Vec::with_capacity(files.len());
    let mut facts = HashMap::with_capacity(files.len());
    for f in files {
        let id = match f.content {
            Content::Link(target) => pack.add_blob(&mut target.as_slice(), f.size)?,
            Content::Known(id) => id,
            Content::Read(Some(hash)) => {
                let id = Oid::from_bytes(&hash.blob)
                    .map_err(WorkspaceError::git("reading a blob id"))?;
                facts.insert(f.path.clone(), hash);
                id
            }
            Content::Read(None) => {
                excluded_pattern(&mut excluded, &f.path);
                continue;
            }
            Content::Copied(_) if f.size > max_file_bytes => {
                excluded_pattern(&mut excluded, &f.path);
                continue;
            }
            Content::Copied(key) => {
                let path = dest.join(OsStr::from_bytes(&f.path));
                let file = std::fs::File::open(&path).map_err(|e| WorkspaceError::io(&path, e))?;
                let mut reader = Sha256Reader {
                    inner: file,
                    sha: Sha256::new(),
                };
                let id = pack
                    .add_blob(&mut reader, f.size)
                    .map_err(|e| e.at(path.clone()))?;
                let hash = CachedHash {
                    key,
                    sha256: reader.sha.finalize().into(),
                    blob: oid_bytes(id),
                    recorded_ns,
                };
                facts.insert(f.path.clone(), hash);
                id
            }
        };
        entries.push(IndexEntry {
            ctime: IndexTime::new(0, 0),
            mtime: IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: f.mode,
            uid: 0,
            gid: 0,
            file_size: u32::try_from(f.size).unwrap_or(u32::MAX),
            id,
            flags: 0,
            flags_extended: 0,
            path: f.path,
        });
    }
    // The trees go into the pack too (the paths are in Git's order).
    let items: Vec<TreeItem<'_>> = entries
        .iter()
        .map(|e| TreeItem {
            path: &e.path,
            mode: e.mode,
            id: e.id,
        })
        .collect();
    // In a pack of their own: a refresh writes new trees, and keeps the
    // packs of the files that did not change.
    pack.start_part()?;
    let tree_id = build_tree(&items, &mut |buf| pack.add_bytes(ObjectType::Tree, buf))?;
    drop(items);
    let pack = pack.finish()?;
    // The index names the objects: they are in place before it is built.
    odb.refresh()
        .map_err(WorkspaceError::git("reading the baseline pack"))?;
    for entry in &entries {
        index.add(entry).map_err(WorkspaceError::git(format!(
            "adding {} to the baseline",
            String::from_utf8_lossy(&entry.path)
        )))?;
    }
    if !excluded.is_empty() {
        let info = repo.path().join("info");
        std::fs::create_dir_all(&info).map_err(|e| WorkspaceError::io(&info, e))?;
        let exclude = info.join("exclude");
        let mut text = std::fs::read(&exclude).unwrap_or_default();
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(b"# over minicoder's per-file limit: not in the baseline\n");
        text.extend_from_slice(&excluded);
        std::fs::write(&exclude, text).map_err(|e| WorkspaceError::io(&exclude, e))?;
    }
    index
        .write()
        .map_err(WorkspaceError::git("writing the workspace index"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(WorkspaceError::git("reading the baseline tree"))?;
    let sig = signature()?;
    let commit = repo
        .commit(Some("HEAD"), &sig, &sig, "minicoder baseline", &tree, &[])
        .map_err(WorkspaceError::git("committing the baseline"))?;
    Ok((commit, pack, BaselineFacts(facts)))
}

/// A file already in a copy, to be committed again as it is there: path,
/// git mode, size, a symlink's target, and its blob's id when the earlier
/// baseline held it.
pub(super) struct KeptFile {
    pub(super) path: Vec<u8>,
    pub(super) mode: u32,
    pub(super) size: u64,
    pub(super) target: Option<Vec<u8>>,
    pub(super) blob: Option<Oid>,
}

/// What [`recopy_and_commit`] copied: each path with the disk space it takes.
pub(super) type Recopied = Vec<(Vec<u8>, u64)>;

/// Brings an earlier copy in `dest` (its `.git` moved away) up to date:
/// copies `again` from the source's working tree `workdir` as a copy does
/// (same checks, owner and per-file limit), then commits those and the
/// `kept` files already in `dest` as a fresh baseline in a fresh `.git`.
/// The kept files' blobs come from the earlier baseline's packs in
/// `old_packs` ([`reuse_packs`]): only the objects still wanted are taken,
/// so nothing of a version that is gone reaches the new `.git`.
pub(super) fn recopy_and_commit(
    workdir: &Path,
    dest: &Path,
    owner: Option<(u32, u32)>,
    max_file_bytes: u64,
    again: &[&Path],
    kept: Vec<KeptFile>,
    old_packs: &Path,
) -> Result<(Oid, Recopied), WorkspaceError> {
    let owner = owner.filter(|_| rustix::process::geteuid().is_root());
    let repo =
        Repository::init(dest).map_err(WorkspaceError::git("creating the workspace repository"))?;
    let mut writer = PackWriter::new(&repo.path().join("objects"))?;
    let wanted: std::collections::HashSet<Oid> = kept.iter().filter_map(|k| k.blob).collect();
    let (_, found) = reuse_packs(old_packs, &wanted, &mut writer)?;
    let pack = Mutex::new(writer);
    let started_ns = now_ns();
    let copier = Copier::new(workdir, dest, owner, max_file_bytes, started_ns)?;
    let mut bufs = Buffers::default();
    let mut files = Vec::with_capacity(again.len() + kept.len());
    let mut recopied = Vec::with_capacity(again.len());
    for rel in again {
        if let Some(file) = copier.copy(rel, &pack, &mut bufs)? {
            recopied.push((file.path.clone(), file.allocated));
            files.push(file);
        }
    }
    for k in kept {
        let content = match (k.target, k.blob) {
            (Some(target), _) => Content::Link(target),
            (None, Some(id)) if found.contains(&id) => Content::Known(id),
            (None, _) => {
                let path = dest.join(OsStr::from_bytes(&k.path));
                let st = rustix::fs::lstat(&path).map_err(|e| WorkspaceError::io(&path, e))?;
                Content::Copied(crate::workspace::scan::walk::stat_key(&st))
            }
        };
        files.push(CopiedFile {
            path: k.path,
            mode: k.mode,
            size: k.size,
            allocated: 0,
            content,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    let pack = pack.into_inner().unwrap_or_else(PoisonError::into_inner);
    let (baseline, _, _) = commit_baseline(&repo, dest, pack, files, max_file_bytes, started_ns)?;
    drop(repo);
    if let Some((uid, gid)) = owner {
        copier.give_made_dirs()?;
        chown_git_dir(&dest.join(".git"), uid, gid)?;
    }
    Ok((baseline, recopied))
}

/// Adds the `.gitignore` line of a file kept out of the baseline.
fn excluded_pattern(excluded: &mut Vec<u8>, path: &[u8]) {
    if let Some(pattern) = exact_pattern(path) {
        excluded.extend_from_slice(&pattern);
    }
}

/// Passes bytes on, hashing them with SHA-256.
struct Sha256Reader<R> {
    inner: R,
    sha: Sha256,
}

impl<R: Read> Read for Sha256Reader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.sha.update(&buf[..n]);
        Ok(n)
    }
}

pub(super) fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<(), WorkspaceError> {
    chown_tree_but(path, uid, gid, None)
}

/// [`chown_tree`] of a workspace's new `.git`, all but the packs written
/// there: they stay the host's, read-only, so the sandbox user can remove
/// them but never change them, and the checkpoint store can share them
/// (`Pack::share_into`).
pub(super) fn chown_git_dir(git: &Path, uid: u32, gid: u32) -> Result<(), WorkspaceError> {
    chown_tree_but(git, uid, gid, Some(&git.join("objects").join("pack")))
}

fn chown_tree_but(
    path: &Path,
    uid: u32,
    gid: u32,
    files_kept_in: Option<&Path>,
) -> Result<(), WorkspaceError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| WorkspaceError::io(path, e))?;
    if meta.is_file() && files_kept_in.is_some() && path.parent() == files_kept_in {
        return Ok(());
    }
    // What a directory holds first, the directory last: it stays ours
    // while anything under it is given, so nothing the sandbox does in a
    // directory given already can turn a path here into a link.
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(|e| WorkspaceError::io(path, e))? {
            let entry = entry.map_err(|e| WorkspaceError::io(path, e))?;
            chown_tree_but(&entry.path(), uid, gid, files_kept_in)?;
        }
    }
    std::os::unix::fs::lchown(path, Some(uid), Some(gid)).map_err(|e| WorkspaceError::io(path, e))
}

#[cfg(test)]
#[path = "copy_tests.rs"]
mod tests;
