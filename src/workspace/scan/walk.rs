//! The stat phase of a fingerprint scan: a walk of the workspace by
//! directory file descriptor, shared between worker threads.
//!
//! System calls dominate a scan (one `getdents64` batch per directory, one
//! `fstatat` per file), so directories are handed out to a few workers. A
//! worker only reads directories, `lstat`s their entries relative to the
//! directory fd and compares the facts with the stat cache; files the cache
//! cannot vouch for are reported back and read afterwards, in one thread.
//!
//! Nothing is followed: every directory is opened relative to its parent
//! with `O_NOFOLLOW | O_DIRECTORY`, and entries are examined with
//! `AT_SYMLINK_NOFOLLOW`, so a directory swapped for a symlink during the
//! walk cannot lead it outside the workspace.

use std::collections::HashMap;
use std::ffi::{CStr, OsStr};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, RawDir};

use super::stat_cache::{CachedHash, StatKey};
use crate::workspace::{ExcludeSet, WorkspaceError, verify_component};

/// Workers beyond the calling thread never help much on small machines and
/// only add contention on large ones.
const MAX_WORKERS: usize = 4;
/// Large enough for a directory of a few hundred entries in one system call.
const DIRENT_BUFFER: usize = 32 * 1024;

/// One file or symlink found by the walk.
pub(crate) enum Found {
    File {
        /// Relative path, `/`-separated.
        rel: Vec<u8>,
        /// Where the file's own name starts in `rel`.
        name_start: usize,
        /// The cached hashes, if the cache vouches for the file as it is.
        cached: Option<CachedHash>,
        /// Whether the file has more than one name (`st_nlink > 1`).
        linked: bool,
    },
    Symlink {
        rel: Vec<u8>,
        target: Vec<u8>,
    },
}

/// What a walk has done, for tests and benchmarks: `lstat`s, directories
/// read and files read whole.
#[derive(Debug, Default)]
pub(crate) struct ScanCounts {
    pub stats: AtomicUsize,
    pub dirs: AtomicUsize,
    pub reads: AtomicUsize,
}

impl ScanCounts {
    /// (`lstat`s, directories read, files read) so far.
    #[cfg(test)]
    pub(crate) fn get(&self) -> (usize, usize, usize) {
        (
            self.stats.load(Ordering::Relaxed),
            self.dirs.load(Ordering::Relaxed),
            self.reads.load(Ordering::Relaxed),
        )
    }

    pub(crate) fn stat(&self) {
        self.stats.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self) {
        self.reads.fetch_add(1, Ordering::Relaxed);
    }
}

/// Called with every directory a walk reads, open, and its relative path
/// (empty for the root, no trailing `/`), before its entries are listed.
pub(crate) type OnDir<'a> = dyn Fn(BorrowedFd<'_>, &[u8]) + Sync + 'a;

/// A directory a walk starts from.
pub(crate) struct Start(Job);

impl Start {
    /// The workspace root.
    pub(crate) fn root() -> Self {
        Self(Job {
            parent: None,
            name: Vec::new(),
            prefix: Vec::new(),
        })
    }

    /// The directory `rel` (relative, no trailing `/`), whose own name
    /// starts at `name_start` and whose parent directory is open as
    /// `parent`.
    pub(crate) fn below(parent: OwnedFd, rel: &[u8], name_start: usize) -> Self {
        let mut prefix = rel.to_vec();
        prefix.push(b'/');
        Self(Job {
            parent: Some(Arc::new(parent)),
            name: rel[name_start..].to_vec(),
            prefix,
        })
    }
}

/// Walks the directories `starts` and everything below them, in
/// unspecified order, calling `on_dir` with every directory read.
pub(crate) fn walk_from(
    root: &OwnedFd,
    workspace: &Path,
    excludes: &ExcludeSet,
    cache: &HashMap<Vec<u8>, CachedHash>,
    starts: Vec<Start>,
    on_dir: Option<&OnDir<'_>>,
    counts: &ScanCounts,
) -> Result<Vec<Found>, WorkspaceError> {
    if starts.is_empty() {
        return Ok(Vec::new());
    }
    let shared = Shared {
        queue: Mutex::new(Queue {
            jobs: starts.into_iter().map(|s| s.0).collect(),
            busy: 0,
            failed: None,
        }),
        wake: Condvar::new(),
        root,
        workspace,
        excludes,
        cache,
        on_dir,
        counts,
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, MAX_WORKERS);
    let mut found = std::thread::scope(|s| {
        let helpers: Vec<_> = (1..workers).map(|_| s.spawn(|| shared.work())).collect();
        let mut found = shared.work();
        for helper in helpers {
            // A helper that panicked found nothing more; its panic is
            // re-raised by the scope.
            if let Ok(more) = helper.join() {
                found.extend(more);
            }
        }
        found
    });
    let mut queue = shared
        .queue
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    match queue.failed.take() {
        Some(e) => Err(e),
        None => {
            found.shrink_to_fit();
            Ok(found)
        }
    }
}

/// Opens the directory `dir` (relative, `/`-separated, empty for the root)
/// below `root`, one component at a time without following symlinks.
pub(crate) fn open_dir_beneath(
    root: BorrowedFd<'_>,
    dir: &[u8],
    workspace: &Path,
) -> Result<OwnedFd, WorkspaceError> {
    open_dir_below(root, dir).map_err(|e| io_error(workspace, dir, e))
}

/// [`open_dir_beneath`], with the bare error.
pub(crate) fn open_dir_below(
    root: BorrowedFd<'_>,
    dir: &[u8],
) -> Result<OwnedFd, rustix::io::Errno> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut fd = rustix::fs::openat(root, c".", flags, Mode::empty())?;
    for component in dir.split(|&b| b == b'/').filter(|c| !c.is_empty()) {
        fd = rustix::fs::openat(
            fd.as_fd(),
            OsStr::from_bytes(component),
            flags,
            Mode::empty(),
        )?;
    }
    Ok(fd)
}

fn open_child_dir(
    at: BorrowedFd<'_>,
    name: &[u8],
    rel: &[u8],
    workspace: &Path,
) -> Result<OwnedFd, WorkspaceError> {
    rustix::fs::openat(
        at,
        OsStr::from_bytes(name),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_error(workspace, rel, e))
}

pub(crate) fn io_error(
    workspace: &Path,
    rel: &[u8],
    e: impl Into<std::io::Error>,
) -> WorkspaceError {
    WorkspaceError::io(workspace.join(OsStr::from_bytes(rel)), e)
}

/// A directory to read: `name` inside `parent` (the root itself when
/// `parent` is `None`), whose relative path is `prefix` (empty or ending in
/// `/`).
struct Job {
    parent: Option<Arc<OwnedFd>>,
    name: Vec<u8>,
    prefix: Vec<u8>,
}

struct Queue {
    jobs: Vec<Job>,
    /// Workers reading a directory now (which may add jobs).
    busy: usize,
    failed: Option<WorkspaceError>,
}

struct Shared<'a> {
    queue: Mutex<Queue>,
    wake: Condvar,
    root: &'a OwnedFd,
    workspace: &'a Path,
    excludes: &'a ExcludeSet,
    cache: &'a HashMap<Vec<u8>, CachedHash>,
    on_dir: Option<&'a OnDir<'a>>,
    counts: &'a ScanCounts,
}

impl Shared<'_> {
    /// Takes directories from the queue until the walk is done or failed.
    fn work(&self) -> Vec<Found> {
        let mut found = Vec::new();
        let mut buf = vec![MaybeUninit::<u8>::uninit(); DIRENT_BUFFER];
        while let Some(job) = self.next_job() {
            let result = self.read_dir(job, &mut buf, &mut found);
            let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.busy -= 1;
            if let Err(e) = result {
                queue.failed.get_or_insert(e);
            }
            if queue.busy == 0 || queue.failed.is_some() {
                self.wake.notify_all();
            }
        }
        found
    }

    fn next_job(&self) -> Option<Job> {
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if queue.failed.is_some() {
                return None;
            }
            if let Some(job) = queue.jobs.pop() {
                queue.busy += 1;
                return Some(job);
            }
            if queue.busy == 0 {
                return None;
            }
            queue = self
                .wake
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn push(&self, jobs: &mut Vec<Job>) {
        if jobs.is_empty() {
            return;
        }
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.jobs.append(jobs);
        self.wake.notify_all();
    }

    fn read_dir(
        &self,
        job: Job,
        buf: &mut [MaybeUninit<u8>],
        found: &mut Vec<Found>,
    ) -> Result<(), WorkspaceError> {
        let Job {
            parent,
            name,
            prefix,
        } = job;
        let fd = match &parent {
            Some(parent) => open_child_dir(parent.as_fd(), &name, &prefix, self.workspace)?,
            None => open_child_dir(self.root.as_fd(), b".", &prefix, self.workspace)?,
        };
        drop(parent);
        self.counts.dirs.fetch_add(1, Ordering::Relaxed);
        if let Some(on_dir) = self.on_dir {
            on_dir(fd.as_fd(), prefix.strip_suffix(b"/").unwrap_or(&prefix));
        }
        let fd = Arc::new(fd);
        let mut subdirs = Vec::new();
        let mut dir = RawDir::new(fd.as_fd(), buf);
        let mut rel = prefix.clone();
        while let Some(entry) = dir.next() {
            let entry = entry.map_err(|e| io_error(self.workspace, &prefix, e))?;
            let name = entry.file_name();
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." || bytes == b".git" {
                continue;
            }
            // What git refuses (`.GIT`, `git~1`, ...) is as inert as `.git`
            // and never part of a checkpoint, so never part of a patch.
            if !verify_component(bytes, entry.file_type() == FileType::Symlink) {
                continue;
            }
            rel.truncate(prefix.len());
            rel.extend_from_slice(bytes);
            let is_dir = self.visit(
                fd.as_fd(),
                name,
                entry.file_type(),
                &rel,
                prefix.len(),
                found,
            )?;
            if is_dir {
                let mut child = rel.clone();
                child.push(b'/');
                subdirs.push(Job {
                    parent: Some(Arc::clone(&fd)),
                    name: bytes.to_vec(),
                    prefix: child,
                });
            }
        }
        self.push(&mut subdirs);
        Ok(())
    }

    /// Records one entry; says whether it is a directory to walk.
    fn visit(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        file_type: FileType,
        rel: &[u8],
        name_start: usize,
        found: &mut Vec<Found>,
    ) -> Result<bool, WorkspaceError> {
        let err = |e: rustix::io::Errno| io_error(self.workspace, rel, e);
        match file_type {
            FileType::Directory => return Ok(self.enters(name, rel)),
            FileType::RegularFile | FileType::Unknown => {}
            FileType::Symlink => {
                if !self.excludes.ignores(rel, false) {
                    found.push(self.symlink(dir, name, rel)?);
                }
                return Ok(false);
            }
            _ => return Ok(false),
        }
        self.counts.stat();
        let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map_err(err)?;
        match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile if self.excludes.ignores(rel, false) => Ok(false),
            FileType::RegularFile => {
                let key = stat_key(&st);
                let cached = self
                    .cache
                    .get(rel)
                    .filter(|c| c.is_valid_for(&key))
                    .copied();
                found.push(Found::File {
                    rel: rel.to_vec(),
                    name_start,
                    cached,
                    linked: st.st_nlink > 1,
                });
                Ok(false)
            }
            FileType::Directory => Ok(self.enters(name, rel)),
            FileType::Symlink => {
                if !self.excludes.ignores(rel, false) {
                    found.push(self.symlink(dir, name, rel)?);
                }
                Ok(false)
            }
            _ => Ok(false),
        }
    }

    /// Whether the walk goes into the directory `rel` called `name`.
    fn enters(&self, name: &CStr, rel: &[u8]) -> bool {
        !self
            .excludes
            .excludes_dir(OsStr::from_bytes(name.to_bytes()))
            && !self.excludes.ignores(rel, true)
    }

    fn symlink(
        &self,
        dir: BorrowedFd<'_>,
        name: &CStr,
        rel: &[u8],
    ) -> Result<Found, WorkspaceError> {
        let target = rustix::fs::readlinkat(dir, name, Vec::new())
            .map_err(|e| io_error(self.workspace, rel, e))?;
        Ok(Found::Symlink {
            rel: rel.to_vec(),
            target: target.into_bytes(),
        })
    }
}

// The field types of `struct stat` differ between architectures.
#[allow(clippy::unnecessary_cast)]
pub(crate) fn stat_key(st: &rustix::fs::Stat) -> StatKey {
    StatKey {
        size: st.st_size as u64,
        mtime_ns: (st.st_mtime as i64).saturating_mul(1_000_000_000) + st.st_mtime_nsec as i64,
        ctime_ns: (st.st_ctime as i64).saturating_mul(1_000_000_000) + st.st_ctime_nsec as i64,
        ino: st.st_ino as u64,
        mode: st.st_mode as u32,
    }
}
