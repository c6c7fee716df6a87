//! What a workspace may grow to, and how big it is now.
//!
//! The workspace is a host directory bind-mounted into the command
//! container, so whatever a command writes there lands on the host's disk.
//! Three limits hold while a command runs: the workspace's size (bytes
//! actually allocated, so a sparse file counts for its data only), its
//! number of entries, and a floor of free space on the filesystem that holds
//! it. A fourth, the per-file limit, bounds what the host ever reads of one
//! file (see the fingerprint module).
//!
//! | limit | default | where it holds | what the model is told |
//! | --- | --- | --- | --- |
//! | workspace size (allocated bytes) | 4 × the source, at least 2 GB (`workspace_bytes`) | every command in a container: the agent's, the bootstrap's (with the dependency folder), each verification check, the probe | the command is stopped: "stopped: the workspace grew to X, over its size limit of Y (by Z)"; a check so stopped fails with that reason |
//! | workspace entries | 200,000 (`workspace_files`) | the same | "… holds N files and directories, over its limit of M (by K)" |
//! | free space of the state filesystem | 1 GB (`min_free_bytes`) | the same | "the disk holding the workspace has X free, below the floor of Y" |
//! | one file | 100 MB (`max_file_bytes`) | every host read of the workspace: fingerprint, checkpoint, export, read_file | "X is N, over the per-file limit of M" |
//! | checkpoints after the baseline | the source's size, at least 1 GB (`checkpoint_bytes`) | the checkpoint store | nothing: older checkpoints are pruned |
//!
//! How they are enforced: [`crate::sandbox::CommandContainer::run`] — the
//! one place every process that touches the workspace goes through —
//! watches the container's roots on the host while a command runs and has
//! the supervisor stop it at the first poll over a limit. The
//! alternative, a size-limited filesystem per run (a loop-mounted image or
//! a quota'd volume), would stop writes in the kernel, but needs root or a
//! storage driver with quotas on the host, changes where the workspace
//! lives, and has no file-count limit short of an inode count fixed at
//! creation; the watchdog works wherever minicoder runs.
//!
//! What it costs a command: nothing to wait for, and no walk when the
//! command changes nothing. The truth is a walk ([`measure`]: an `lstat`
//! of every entry; ~120 ms at 50,000 files), so the walk is kept, per
//! container, as the last measurement, and every directory it read is
//! watched by an inotify journal of the whole tree (`.git` and the
//! excluded directories too, unlike the checkpoints' journal; see
//! [`crate::workspace::store::change_journal`] for why its events cover every change). A command is
//! measured from that last walk; while it runs the watchdog reads the
//! journal every 100 ms, and walks — while it runs and once more when it
//! ends — only once something below the roots changed. So does the next
//! command's start when the host changed the workspace in between (an
//! edit, a restore). A directory removed while a command runs makes the
//! journal stop vouching until the command has ended and been walked: a
//! descriptor opened through a name in it writes on without an event any
//! watch receives, while the file may live on under another name. So does
//! a walk made while the command runs, which resets the journal: the end
//! of such a command is walked too. The floor needs no walk at all: `statvfs` is its
//! measure, read at every poll. Where a journal cannot be had (no inotify,
//! its watch limit reached, a queue overflow) every command is walked, as
//! before the journal. What a journal cannot see while it happens — blocks
//! allocated through a shared mapping of a sparse file — is seen when the
//! file is closed (at the latest when the supervisor ends the command's
//! processes), and the floor bounds it meanwhile. A walk that meets a limit
//! stops the command; polls never overlap, so between two polls a command
//! can overshoot a size limit by what it writes in one poll's time, which
//! the free-space floor bounds on a nearly full disk.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};

use crate::workspace::scan::fingerprint::DEFAULT_MAX_FILE_BYTES;
use crate::workspace::store::checkpoint::human_bytes;

/// The default entry-count limit of a workspace.
pub(crate) const DEFAULT_MAX_FILES: u64 = 200_000;
/// The default free-space floor of the state filesystem.
pub(crate) const DEFAULT_MIN_FREE_BYTES: u64 = 1 << 30;
/// The smallest default size limit (otherwise 4 × the source's size).
pub(crate) const MIN_DEFAULT_MAX_BYTES: u64 = 2 << 30;
/// The smallest default checkpoint budget (otherwise the source's size).
pub(crate) const MIN_DEFAULT_CHECKPOINT_BYTES: u64 = 1 << 30;

/// Growth in allocated bytes that does not count against a workspace
/// already over a limit when its command started: the filesystem's own
/// bookkeeping (delayed allocation settling, extent blocks written back)
/// moves `st_blocks` a little after a command has ended. It counts from the
/// size when the workspace was first found over the limit, not from each
/// command's start, so that commands cannot creep past it.
pub(crate) const SETTLING_BYTES: u64 = 32 << 20;

/// The `"limits"` object of `.minicoder.json`; each unset field takes its
/// default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitOverrides {
    /// Files larger than this are not read, fingerprinted by content,
    /// checkpointed or exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_bytes: Option<u64>,
    /// The workspace's size limit while a command runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_bytes: Option<u64>,
    /// The workspace's entry-count limit while a command runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_files: Option<u64>,
    /// Free space the state filesystem keeps while a command runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_free_bytes: Option<u64>,
    /// File content the checkpoints after the baseline may hold; past it,
    /// intermediate checkpoints are pruned, oldest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_bytes: Option<u64>,
    /// The overrides come from a configuration nobody vouched for: each
    /// one counts only where it is stricter than the default (a smaller
    /// maximum, a higher floor), never where it loosens it.
    #[serde(skip)]
    pub tighten_only: bool,
}

/// The limits of one run's workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceLimits {
    pub max_file_bytes: u64,
    pub max_bytes: u64,
    pub max_files: u64,
    pub min_free_bytes: u64,
    #[serde(default = "default_checkpoint_bytes")]
    pub max_checkpoint_bytes: u64,
}

fn default_checkpoint_bytes() -> u64 {
    MIN_DEFAULT_CHECKPOINT_BYTES
}

impl Default for WorkspaceLimits {
    fn default() -> Self {
        Self::new(0, &LimitOverrides::default())
    }
}

impl WorkspaceLimits {
    /// The limits for a workspace copied from `source_bytes` of source.
    pub fn new(source_bytes: u64, overrides: &LimitOverrides) -> Self {
        let strict = overrides.tighten_only;
        // A maximum: the override, or (not vouched for) the smaller of the two.
        let at_most = |set: Option<u64>, default: u64| match set {
            Some(v) if strict => v.min(default),
            Some(v) => v,
            None => default,
        };
        let floor = match overrides.min_free_bytes {
            Some(v) if strict => v.max(DEFAULT_MIN_FREE_BYTES),
            Some(v) => v,
            None => DEFAULT_MIN_FREE_BYTES,
        };
        Self {
            max_file_bytes: at_most(overrides.max_file_bytes, DEFAULT_MAX_FILE_BYTES),
            max_bytes: at_most(
                overrides.workspace_bytes,
                source_bytes.saturating_mul(4).max(MIN_DEFAULT_MAX_BYTES),
            ),
            max_files: at_most(overrides.workspace_files, DEFAULT_MAX_FILES),
            min_free_bytes: floor,
            max_checkpoint_bytes: at_most(
                overrides.checkpoint_bytes,
                source_bytes.max(MIN_DEFAULT_CHECKPOINT_BYTES),
            ),
        }
    }

    /// The overrides of `overrides` that may loosen a default, as
    /// `name = value` (what an untrusted configuration cannot have).
    pub(crate) fn loosening(overrides: &LimitOverrides) -> Vec<String> {
        let mut out = Vec::new();
        let mut above = |name: &str, value: Option<u64>, default: u64| {
            if let Some(v) = value.filter(|v| *v > default) {
                out.push(format!("{name} = {}", human_bytes_or_count(name, v)));
            }
        };
        above(
            "max_file_bytes",
            overrides.max_file_bytes,
            DEFAULT_MAX_FILE_BYTES,
        );
        // These two default to at least these, more for a large source.
        above(
            "workspace_bytes",
            overrides.workspace_bytes,
            MIN_DEFAULT_MAX_BYTES,
        );
        above(
            "workspace_files",
            overrides.workspace_files,
            DEFAULT_MAX_FILES,
        );
        above(
            "checkpoint_bytes",
            overrides.checkpoint_bytes,
            MIN_DEFAULT_CHECKPOINT_BYTES,
        );
        if let Some(v) = overrides
            .min_free_bytes
            .filter(|v| *v < DEFAULT_MIN_FREE_BYTES)
        {
            out.push(format!("min_free_bytes = {}", human_bytes(v)));
        }
        out
    }

    /// The first limit `now` crosses, as a sentence for the model, given
    /// the usage when the command started (`start`): a workspace already
    /// over a limit may still run commands that do not grow it further, so
    /// that the model can delete what put it there.
    pub(crate) fn crossed(&self, start: &Usage, now: &Usage) -> Option<String> {
        if let Some(free) = now.free_bytes
            && free < self.min_free_bytes
            && start
                .free_bytes
                .is_none_or(|f| f >= self.min_free_bytes || free.saturating_add(SETTLING_BYTES) < f)
        {
            return Some(format!(
                "the disk holding the workspace has {} free, below the floor of {} ({} under it)",
                human_bytes(free),
                human_bytes(self.min_free_bytes),
                human_bytes(self.min_free_bytes - free),
            ));
        }
        let allowed = if start.bytes > self.max_bytes {
            start.bytes.saturating_add(SETTLING_BYTES)
        } else {
            self.max_bytes
        };
        if now.bytes > allowed {
            return Some(format!(
                "the workspace grew to {}, over its size limit of {} (by {})",
                human_bytes(now.bytes),
                human_bytes(self.max_bytes),
                human_bytes(now.bytes - self.max_bytes),
            ));
        }
        if now.files > self.max_files.max(start.files) {
            return Some(format!(
                "the workspace holds {} files and directories, over its limit of {} (by {})",
                now.files,
                self.max_files,
                now.files - self.max_files,
            ));
        }
        None
    }
}

fn human_bytes_or_count(name: &str, value: u64) -> String {
    if name.ends_with("_files") {
        value.to_string()
    } else {
        human_bytes(value)
    }
}

/// How big a workspace is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes allocated to its entries (`st_blocks` × 512).
    pub bytes: u64,
    /// Files, directories, symlinks and other entries, `.git` included.
    pub files: u64,
    /// Free bytes for unprivileged users on its filesystem, if known.
    pub free_bytes: Option<u64>,
}

/// Measures `workspace`: every entry, without following symlinks. A walk
/// that meets an entry vanishing under it just skips it; `give_up` is
/// asked now and then and ends the walk early (its figures then are
/// lower bounds).
pub(crate) fn measure(workspace: &Path, give_up: &mut dyn FnMut(&Usage) -> bool) -> Usage {
    measure_watching(workspace, give_up, None).0
}

/// [`measure`], each directory walked also watched by `journal` (a full
/// scan of it); the second value is whether the walk went to its end.
fn measure_watching(
    workspace: &Path,
    give_up: &mut dyn FnMut(&Usage) -> bool,
    journal: Option<&crate::workspace::store::change_journal::Journal>,
) -> (Usage, bool) {
    let mut usage = Usage {
        free_bytes: free_bytes(workspace),
        ..Usage::default()
    };
    let Ok(root) = rustix::fs::open(
        workspace,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return (usage, false);
    };
    let mut stack: Vec<(OwnedFd, Vec<u8>)> = vec![(root, Vec::new())];
    while let Some((dir, rel)) = stack.pop() {
        if give_up(&usage) {
            return (usage, false);
        }
        if let Some(journal) = journal {
            journal.watch_dir(dir.as_fd(), &rel);
        }
        walk_dir(dir.as_fd(), &rel, journal.is_some(), &mut usage, &mut stack);
    }
    (usage, true)
}

fn walk_dir(
    dir: BorrowedFd<'_>,
    rel: &[u8],
    with_paths: bool,
    usage: &mut Usage,
    stack: &mut Vec<(OwnedFd, Vec<u8>)>,
) {
    let Ok(dup) = rustix::fs::openat(
        dir,
        c".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let Ok(entries) = rustix::fs::Dir::read_from(&dup) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        usage.files += 1;
        #[allow(clippy::unnecessary_cast)]
        let blocks = st.st_blocks as u64;
        usage.bytes = usage.bytes.saturating_add(blocks.saturating_mul(512));
        if FileType::from_raw_mode(st.st_mode) == FileType::Directory
            && let Ok(fd) = rustix::fs::openat(
                dir,
                OsStr::from_bytes(name.to_bytes()),
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
        {
            let child = if with_paths {
                let mut child = rel.to_vec();
                if !child.is_empty() {
                    child.push(b'/');
                }
                child.extend_from_slice(name.to_bytes());
                child
            } else {
                Vec::new()
            };
            stack.push((fd, child));
        }
    }
}

/// Free bytes for unprivileged users on the filesystem of `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Measures every root in `roots` as one: their entries and bytes added up,
/// the free space of the first one's filesystem. With `journals` (one per
/// root), each walk is also a full scan of its root's journal.
fn measure_all(
    roots: &[std::path::PathBuf],
    give_up: &mut dyn FnMut(&Usage) -> bool,
    journals: Option<&[Option<crate::workspace::store::change_journal::Journal>]>,
) -> Usage {
    let mut total = Usage::default();
    for (i, root) in roots.iter().enumerate() {
        let (bytes, files) = (total.bytes, total.files);
        let mut stop = false;
        let journal = journals.and_then(|j| j.get(i)).and_then(Option::as_ref);
        if let Some(j) = journal {
            j.begin_full_scan();
        }
        let (usage, whole) = measure_watching(
            root,
            &mut |partial| {
                let so_far = Usage {
                    bytes: bytes.saturating_add(partial.bytes),
                    files: files.saturating_add(partial.files),
                    free_bytes: if i == 0 {
                        partial.free_bytes
                    } else {
                        total.free_bytes
                    },
                };
                stop = give_up(&so_far);
                stop
            },
            journal,
        );
        if let Some(j) = journal {
            j.end_full_scan(whole);
        }
        total.bytes = total.bytes.saturating_add(usage.bytes);
        total.files = total.files.saturating_add(usage.files);
        if i == 0 {
            total.free_bytes = usage.free_bytes;
        }
        if stop {
            break;
        }
    }
    total
}

/// One journal per root, watching every directory below it; `None` where
/// a journal could not be had (each command is then walked).
type Journals = std::sync::Arc<Vec<Option<crate::workspace::store::change_journal::Journal>>>;

/// The last measurement of one container's roots, kept between its
/// commands with journals of every directory below them, so that a command
/// that changes nothing costs no walk (see the module documentation).
#[derive(Debug, Default, Clone)]
pub(crate) struct Meter {
    last: std::sync::Arc<std::sync::Mutex<Option<Measured>>>,
    /// Walks made, for the tests.
    walks: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// A first walk started ahead of the first command.
    priming: std::sync::Arc<std::sync::Mutex<Option<tokio::task::JoinHandle<Measured>>>>,
    /// The size when the workspace was first found over its size limit,
    /// and the free space when the disk was first found under the floor:
    /// the settling allowance counts from there, not from each command's
    /// start, so commands cannot creep past a limit a little at a time.
    anchors: std::sync::Arc<std::sync::Mutex<(Option<u64>, Option<u64>)>>,
}

#[derive(Debug, Clone)]
struct Measured {
    roots: Vec<std::path::PathBuf>,
    usage: Usage,
    journals: Journals,
}

impl Measured {
    /// No process of the sandbox is alive: see [`crate::workspace::store::change_journal::Journal::settle`].
    fn settle(&self) {
        for j in self.journals.iter().flatten() {
            j.settle();
        }
    }

    /// Whether nothing changed below the roots since the walk that gave
    /// `usage`, as every journal vouches.
    fn is_quiet(&self) -> bool {
        quiet(&self.journals, self.roots.len())
    }
}

/// Whether each of `roots` roots has a journal, and every one vouches that
/// nothing changed below it since its last full scan.
fn quiet(journals: &Journals, roots: usize) -> bool {
    journals.len() == roots
        && journals
            .iter()
            .all(|j| j.as_ref().is_some_and(|j| j.is_quiet()))
}

impl Meter {
    /// Starts the first walk of `roots` in the background (while the
    /// container starts, or the model thinks), so that the first command
    /// finds it made.
    pub(crate) fn prime(&self, roots: Vec<std::path::PathBuf>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let meter = self.clone();
        let handle = runtime.spawn_blocking(move || meter.walk(&roots));
        *self.priming.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
    }

    /// `start` with the settling allowance anchored (see [`Meter::anchors`]).
    fn anchored(&self, mut start: Usage, limits: &WorkspaceLimits) -> Usage {
        let mut anchors = self.anchors.lock().unwrap_or_else(|e| e.into_inner());
        if start.bytes > limits.max_bytes {
            let first = *anchors.0.get_or_insert(start.bytes);
            start.bytes = start.bytes.min(first);
        } else {
            anchors.0 = None;
        }
        match start.free_bytes {
            Some(free) if free < limits.min_free_bytes => {
                let first = *anchors.1.get_or_insert(free);
                start.free_bytes = Some(free.max(first));
            }
            _ => anchors.1 = None,
        }
        start
    }

    /// Waits for a walk [`Self::prime`] started, if any.
    async fn primed(&self) {
        let handle = self
            .priming
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = handle.await;
        }
    }

    fn get(&self, roots: &[std::path::PathBuf]) -> Option<Measured> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.as_ref().filter(|m| m.roots == roots).cloned()
    }

    /// Walks `roots` now (a full scan of their journals, started when
    /// there are none yet) and keeps the result. Called only while no
    /// command runs: before one, after one, or ahead of the first.
    fn walk(&self, roots: &[std::path::PathBuf]) -> Measured {
        let journals = match self.get(roots) {
            Some(m) => m.journals,
            None => std::sync::Arc::new(
                roots
                    .iter()
                    .map(|r| crate::workspace::store::change_journal::Journal::start_whole(r).ok())
                    .collect(),
            ),
        };
        for j in journals.iter().flatten() {
            j.settle();
        }
        let usage = measure_all(roots, &mut |_| false, Some(&journals));
        self.walks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let measured = Measured {
            roots: roots.to_vec(),
            usage,
            journals,
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(measured.clone());
        measured
    }
}

/// Watches the workspace (and any other directory the container writes on
/// the host, counted with it) while one command runs (see the module
/// documentation for why a watchdog and not a size-limited filesystem):
/// the first poll over a limit puts the reason in `stop`.
pub(crate) struct Watchdog {
    /// Holds the reason once a limit is crossed.
    pub stop: tokio::sync::watch::Receiver<Option<String>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Set by the poll thread when it walked: its walk reset the journals,
    /// so the command's end is walked whatever they say then.
    walked: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    limits: WorkspaceLimits,
    base: Measured,
    /// The usage the command started from (the last measurement, with the
    /// free space of now).
    start: Usage,
    meter: Meter,
}

/// The pause between two polls; a walk is followed by a pause as long as
/// itself, so the watchdog takes at most about half a core.
/// [`Watchdog::finish`] cuts the pause short.
const POLL_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

impl Watchdog {
    /// Watches the roots through the command about to run, from the last
    /// measurement `meter` holds of them (a walk when it holds none, or
    /// when something changed below them since).
    pub async fn start(
        roots: Vec<std::path::PathBuf>,
        limits: WorkspaceLimits,
        meter: &Meter,
    ) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (tx, stop) = tokio::sync::watch::channel(None);
        let done = std::sync::Arc::new(AtomicBool::new(false));
        meter.primed().await;
        // Between commands: what an earlier command's removed directory kept
        // from being vouched for was walked when that command ended.
        let last = meter.get(&roots);
        if let Some(m) = &last {
            m.settle();
        }
        let base = match last.filter(Measured::is_quiet) {
            Some(m) => m,
            None => {
                // Changed since (the host edited or restored files), or
                // never measured: the truth first.
                let meter = meter.clone();
                let measured = roots.clone();
                tokio::task::spawn_blocking(move || meter.walk(&measured))
                    .await
                    .unwrap_or(Measured {
                        roots: roots.clone(),
                        usage: Usage::default(),
                        journals: Default::default(),
                    })
            }
        };
        let mut start = base.usage;
        start.free_bytes = roots.first().and_then(|r| free_bytes(r));
        let start = meter.anchored(start, &limits);
        let flag = done.clone();
        let walked = std::sync::Arc::new(AtomicBool::new(false));
        let walked_flag = walked.clone();
        let (watched, journals) = (roots, base.journals.clone());
        let thread = std::thread::Builder::new()
            .name("workspace-watchdog".into())
            .spawn(move || {
                let first = watched.first().map(|r| r.as_path());
                loop {
                    std::thread::park_timeout(POLL_PAUSE);
                    if flag.load(Ordering::Relaxed) {
                        return;
                    }
                    // The floor needs no walk: `statvfs` is its measure.
                    let floor = Usage {
                        free_bytes: first.and_then(free_bytes),
                        ..start
                    };
                    if let Some(reason) = limits.crossed(&start, &floor) {
                        let _ = tx.send(Some(reason));
                        return;
                    }
                    if quiet(&journals, watched.len()) {
                        continue;
                    }
                    let walk_began = std::time::Instant::now();
                    walked_flag.store(true, Ordering::Relaxed);
                    let mut crossed = None;
                    let usage = measure_all(
                        &watched,
                        &mut |partial| {
                            if flag.load(Ordering::Relaxed) {
                                return true;
                            }
                            crossed = crossed.take().or_else(|| limits.crossed(&start, partial));
                            crossed.is_some()
                        },
                        Some(&journals),
                    );
                    if flag.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Some(reason) = crossed.or_else(|| limits.crossed(&start, &usage)) {
                        let _ = tx.send(Some(reason));
                        return;
                    }
                    // As long a pause as the walk took, on top of the poll's.
                    std::thread::park_timeout(walk_began.elapsed());
                }
            })
            .ok();
        Self {
            stop,
            done,
            walked,
            thread,
            limits,
            base,
            start,
            meter: meter.clone(),
        }
    }

    /// Stops watching, and tells whether the command crossed a limit that
    /// no poll saw (it ended first). The roots are walked again only when
    /// something changed below them; otherwise the last measurement stands.
    pub async fn finish(mut self) -> Option<String> {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            // Out of its pause at once; within one directory of a walk.
            thread.thread().unpark();
            let _ = thread.join();
        }
        let (limits, base, meter, start) = (
            self.limits,
            self.base.clone(),
            self.meter.clone(),
            self.start,
        );
        if !self.walked.load(std::sync::atomic::Ordering::Relaxed) && base.is_quiet() {
            let floor = Usage {
                free_bytes: base.roots.first().and_then(|r| free_bytes(r)),
                ..base.usage
            };
            return limits.crossed(&start, &floor);
        }
        tokio::task::spawn_blocking(move || {
            let measured = meter.walk(&base.roots);
            limits.crossed(&start, &measured.usage)
        })
        .await
        .ok()
        .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_scale_with_the_source_and_overrides_win() {
        let small = WorkspaceLimits::new(10 << 20, &LimitOverrides::default());
        assert_eq!(small.max_bytes, MIN_DEFAULT_MAX_BYTES);
        assert_eq!(small.max_files, DEFAULT_MAX_FILES);
        assert_eq!(small.max_file_bytes, DEFAULT_MAX_FILE_BYTES);
        let big = WorkspaceLimits::new(3 << 30, &LimitOverrides::default());
        assert_eq!(big.max_bytes, 12 << 30);
        assert_eq!(small.max_checkpoint_bytes, MIN_DEFAULT_CHECKPOINT_BYTES);
        assert_eq!(big.max_checkpoint_bytes, 3 << 30);
        let set = WorkspaceLimits::new(
            3 << 30,
            &LimitOverrides {
                workspace_bytes: Some(5),
                workspace_files: Some(6),
                max_file_bytes: Some(7),
                min_free_bytes: Some(8),
                checkpoint_bytes: Some(9),
                tighten_only: false,
            },
        );
        assert_eq!(
            (
                set.max_bytes,
                set.max_files,
                set.max_file_bytes,
                set.min_free_bytes,
                set.max_checkpoint_bytes,
            ),
            (5, 6, 7, 8, 9)
        );
    }

    #[test]
    fn overrides_nobody_vouched_for_only_tighten() {
        let strict = |o: LimitOverrides| {
            WorkspaceLimits::new(
                10 << 20,
                &LimitOverrides {
                    tighten_only: true,
                    ..o
                },
            )
        };
        let defaults = WorkspaceLimits::new(10 << 20, &LimitOverrides::default());
        let looser = LimitOverrides {
            max_file_bytes: Some(u64::MAX),
            workspace_bytes: Some(u64::MAX),
            workspace_files: Some(u64::MAX),
            min_free_bytes: Some(1),
            checkpoint_bytes: Some(u64::MAX),
            tighten_only: false,
        };
        assert_eq!(strict(looser), defaults, "nothing loosens");
        assert_eq!(WorkspaceLimits::loosening(&looser).len(), 5);
        let tighter = LimitOverrides {
            max_file_bytes: Some(1 << 20),
            workspace_bytes: Some(64 << 20),
            workspace_files: Some(500),
            min_free_bytes: Some(4 << 30),
            checkpoint_bytes: Some(8 << 20),
            tighten_only: false,
        };
        let t = strict(tighter);
        assert_eq!(
            (
                t.max_file_bytes,
                t.max_bytes,
                t.max_files,
                t.min_free_bytes,
                t.max_checkpoint_bytes
            ),
            (1 << 20, 64 << 20, 500, 4 << 30, 8 << 20),
            "what tightens holds"
        );
        assert!(WorkspaceLimits::loosening(&tighter).is_empty());
    }

    #[test]
    fn a_limit_is_crossed_only_by_growth_past_it() {
        let limits = WorkspaceLimits {
            max_file_bytes: 1,
            max_bytes: 1000,
            max_files: 10,
            min_free_bytes: 100,
            max_checkpoint_bytes: 1,
        };
        let at = |bytes, files, free| Usage {
            bytes,
            files,
            free_bytes: Some(free),
        };
        assert_eq!(limits.crossed(&at(0, 0, 500), &at(1000, 10, 100)), None);
        let size = limits.crossed(&at(0, 0, 500), &at(3048, 1, 500));
        assert_eq!(
            size.as_deref(),
            Some("the workspace grew to 3.0 KB, over its size limit of 1000 bytes (by 2.0 KB)")
        );
        let files = limits.crossed(&at(0, 0, 500), &at(0, 15, 500));
        assert!(files.is_some_and(|m| m.contains("15 files") && m.contains("by 5")));
        let floor = limits.crossed(&at(0, 0, 500), &at(0, 0, 40));
        assert!(
            floor.is_some_and(|m| m.contains("below the floor") && m.contains("60 bytes under"))
        );
        // Already over when the command started: only further growth counts.
        assert_eq!(limits.crossed(&at(5000, 20, 500), &at(4000, 20, 500)), None);
        assert_eq!(limits.crossed(&at(5000, 20, 500), &at(5001, 20, 500)), None);
        let settled = 5000 + SETTLING_BYTES;
        assert_eq!(
            limits.crossed(&at(5000, 20, 500), &at(settled, 20, 500)),
            None
        );
        assert!(
            limits
                .crossed(&at(5000, 20, 500), &at(settled + 1, 20, 500))
                .is_some()
        );
        assert!(
            limits
                .crossed(&at(5000, 20, 500), &at(0, 21, 500))
                .is_some()
        );
        // Under the floor already: only a further fall counts.
        assert_eq!(limits.crossed(&at(0, 0, 50), &at(0, 0, 40)), None);
    }

    #[test]
    fn measuring_counts_entries_and_allocated_bytes_not_following_links() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("a/b")).expect("dirs");
        std::fs::write(dir.path().join("a/b/f"), vec![1u8; 64 << 10]).expect("file");
        std::os::unix::fs::symlink("/", dir.path().join("up")).expect("link");
        let sparse = std::fs::File::create(dir.path().join("sparse")).expect("sparse");
        sparse.set_len(1 << 30).expect("truncate");
        let usage = measure(dir.path(), &mut |_| false);
        assert_eq!(usage.files, 5);
        assert!(usage.bytes >= 64 << 10, "{usage:?}");
        assert!(
            usage.bytes < 1 << 20,
            "a sparse file counts for its data: {usage:?}"
        );
        assert!(usage.free_bytes.is_some());
    }

    /// A temporary workspace watched with a size limit of `max_mib` MiB,
    /// `max_files` entries and no floor.
    struct Watched {
        dir: tempfile::TempDir,
        limits: WorkspaceLimits,
        roots: Vec<std::path::PathBuf>,
        meter: Meter,
    }

    fn watched(max_mib: u64, max_files: u64) -> Watched {
        let dir = tempfile::tempdir().expect("tempdir");
        let limits = WorkspaceLimits {
            max_bytes: max_mib << 20,
            max_files,
            min_free_bytes: 0,
            ..WorkspaceLimits::default()
        };
        let roots = vec![dir.path().to_path_buf()];
        Watched {
            dir,
            limits,
            roots,
            meter: Meter::default(),
        }
    }

    fn walks(meter: &Meter) -> u64 {
        meter.walks.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn last_usage(meter: &Meter) -> Usage {
        meter.last.lock().unwrap().as_ref().expect("measured").usage
    }

    #[tokio::test]
    async fn a_command_that_changes_nothing_is_not_walked_and_any_change_is() {
        let Watched {
            dir,
            limits,
            roots,
            meter,
        } = watched(64, DEFAULT_MAX_FILES);
        std::fs::write(dir.path().join("a"), b"a").expect("file");
        std::fs::create_dir_all(dir.path().join(".git/objects")).expect("git dir");
        // The first command of a container walks before it runs.
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        assert_eq!((walks(&meter), last_usage(&meter).files), (1, 3));
        assert_eq!(w.finish().await, None);
        assert_eq!(walks(&meter), 1, "nothing changed: no walk after it");
        for _ in 0..3 {
            let w = Watchdog::start(roots.clone(), limits, &meter).await;
            assert_eq!(w.finish().await, None);
        }
        assert_eq!(walks(&meter), 1, "quiet commands are never walked");
        // A change anywhere, `.git` included, is walked when it ends.
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        std::fs::write(dir.path().join(".git/objects/pack"), vec![7u8; 8 << 20]).expect("write");
        assert_eq!(w.finish().await, None);
        assert_eq!(walks(&meter), 2);
        let after = last_usage(&meter);
        assert_eq!(after.files, 4);
        assert!(after.bytes >= 8 << 20, "{after:?}");
        // A directory made by a command is watched from then on.
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        std::fs::create_dir(dir.path().join("new")).expect("mkdir");
        assert_eq!(w.finish().await, None);
        assert_eq!(walks(&meter), 3);
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        std::fs::write(dir.path().join("new/inner"), b"x").expect("write");
        assert_eq!(w.finish().await, None);
        assert_eq!((walks(&meter), last_usage(&meter).files), (4, 6));
        // What the host changed between commands is measured before the next.
        std::fs::write(dir.path().join("edited"), b"by the host").expect("write");
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        assert_eq!((walks(&meter), last_usage(&meter).files), (5, 7));
        assert_eq!(w.finish().await, None);
        assert_eq!(walks(&meter), 5);
        // One that writes past the size limit is told, though no poll saw it.
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        std::fs::write(dir.path().join("c"), vec![7u8; 80 << 20]).expect("write");
        let reason = w.finish().await.expect("over the limit");
        assert!(reason.contains("over its size limit"), "{reason}");
    }

    #[tokio::test]
    async fn a_write_is_stopped_while_the_command_still_runs() {
        let Watched {
            dir,
            limits,
            roots,
            meter,
        } = watched(16, DEFAULT_MAX_FILES);
        let mut w = Watchdog::start(roots, limits, &meter).await;
        std::fs::write(dir.path().join("big"), vec![1u8; 32 << 20]).expect("write");
        let reason = tokio::time::timeout(std::time::Duration::from_secs(30), async {
            loop {
                if let Some(r) = w.stop.borrow().clone() {
                    return r;
                }
                w.stop.changed().await.expect("the watchdog tells");
            }
        })
        .await
        .expect("a poll sees it");
        assert!(reason.contains("over its size limit"), "{reason}");
        let _ = w.finish().await;
    }

    #[tokio::test]
    async fn writes_through_a_removed_directory_are_measured_when_the_command_ends() {
        use std::io::Write;
        let Watched {
            dir,
            limits,
            roots,
            meter,
        } = watched(16, DEFAULT_MAX_FILES);
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        std::fs::create_dir(dir.path().join("a")).expect("mkdir");
        let mut f = std::fs::File::create(dir.path().join("a/f")).expect("create");
        std::fs::hard_link(dir.path().join("a/f"), dir.path().join("g")).expect("ln");
        std::fs::remove_file(dir.path().join("a/f")).expect("rm");
        std::fs::remove_dir(dir.path().join("a")).expect("rmdir");
        // A poll walks the change and would have made the journal quiet.
        std::thread::sleep(std::time::Duration::from_millis(400));
        for _ in 0..32 {
            f.write_all(&[1u8; 1 << 20]).expect("write");
        }
        drop(f);
        let reason = w.finish().await.expect("measured when it ended");
        assert!(reason.contains("over its size limit"), "{reason}");
        // The next command starts from the truth.
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        assert!(last_usage(&meter).bytes >= 32 << 20);
        let _ = w.finish().await;
    }

    #[tokio::test]
    async fn a_walk_while_a_command_runs_does_not_leave_a_stale_figure() {
        let Watched {
            dir,
            limits,
            roots,
            meter,
        } = watched(16, 100);
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        std::fs::write(dir.path().join("big"), vec![1u8; 32 << 20]).expect("write");
        for i in 0..200 {
            std::fs::write(dir.path().join(format!("f{i}")), b"").expect("write");
        }
        assert!(w.finish().await.is_some(), "over both limits");
        // Everything removed, and a poll walks it before the command ends.
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        for entry in std::fs::read_dir(dir.path()).expect("list").flatten() {
            std::fs::remove_file(entry.path()).expect("rm");
        }
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert_eq!(w.finish().await, None);
        assert_eq!(last_usage(&meter).files, 0, "the end was measured");
        // Growing back past the limits is told again.
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        std::fs::write(dir.path().join("big2"), vec![1u8; 24 << 20]).expect("write");
        let reason = w.finish().await.expect("over the size limit again");
        assert!(reason.contains("over its size limit"), "{reason}");
    }

    #[tokio::test]
    async fn a_workspace_over_its_limit_cannot_creep_a_little_each_command() {
        let Watched {
            dir,
            limits,
            roots,
            meter,
        } = watched(16, DEFAULT_MAX_FILES);
        let w = Watchdog::start(roots.clone(), limits, &meter).await;
        std::fs::write(dir.path().join("big"), vec![1u8; 24 << 20]).expect("write");
        assert!(w.finish().await.is_some());
        // Each next command adds less than the settling allowance; together
        // they pass it, and that is told.
        let step = (SETTLING_BYTES / 2 + (1 << 20)) as usize;
        let mut told = None;
        for i in 0..3 {
            let w = Watchdog::start(roots.clone(), limits, &meter).await;
            std::fs::write(dir.path().join(format!("more{i}")), vec![1u8; step]).expect("write");
            told = told.or(w.finish().await);
        }
        assert!(told.is_some_and(|r| r.contains("over its size limit")));
    }
}
