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
//! How they are enforced: a watchdog on the host polls the workspace while
//! a command runs ([`measure`]: `statvfs` plus a walk that `lstat`s every
//! entry) and has the supervisor stop the command at the first poll over a
//! limit. The alternative, a size-limited filesystem per run (a loop-mounted
//! image or a quota'd volume), would stop writes in the kernel, but needs
//! root or a storage driver with quotas on the host, changes where the
//! workspace lives, and has no file-count limit short of an inode count
//! fixed at creation; the watchdog works wherever minicoder runs. Its cost
//! is the walk: a workspace of 200,000 entries takes a fraction of a second
//! (measured in the README), and polls never overlap, so between two polls a
//! command can overshoot a size limit by what it writes in one walk's time.
//! The free-space floor bounds that overshoot on a nearly full disk.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};

use super::checkpoint::human_bytes;
use super::fingerprint::DEFAULT_MAX_FILE_BYTES;

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
/// moves `st_blocks` a little after a command has ended.
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
    let mut usage = Usage {
        free_bytes: free_bytes(workspace),
        ..Usage::default()
    };
    let Ok(root) = rustix::fs::open(
        workspace,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return usage;
    };
    let mut stack: Vec<OwnedFd> = vec![root];
    while let Some(dir) = stack.pop() {
        if give_up(&usage) {
            break;
        }
        walk_dir(dir.as_fd(), &mut usage, &mut stack);
    }
    usage
}

fn walk_dir(dir: BorrowedFd<'_>, usage: &mut Usage, stack: &mut Vec<OwnedFd>) {
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
            stack.push(fd);
        }
    }
}

/// Free bytes for unprivileged users on the filesystem of `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    Some(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Measures every root in `roots` as one: their entries and bytes added up,
/// the free space of the first one's filesystem.
fn measure_all(roots: &[std::path::PathBuf], give_up: &mut dyn FnMut(&Usage) -> bool) -> Usage {
    let mut total = Usage::default();
    for (i, root) in roots.iter().enumerate() {
        let (bytes, files) = (total.bytes, total.files);
        let mut stop = false;
        let usage = measure(root, &mut |partial| {
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
        });
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

/// Watches the workspace (and any other directory the container writes on
/// the host, counted with it) while one command runs (see the module
/// documentation for why a watchdog and not a size-limited filesystem):
/// the first poll over a limit puts the reason in `stop`.
pub(crate) struct Watchdog {
    /// Holds the reason once a limit is crossed.
    pub stop: tokio::sync::watch::Receiver<Option<String>>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    roots: Vec<std::path::PathBuf>,
    limits: WorkspaceLimits,
    start: Usage,
}

/// The pause between two polls when a walk is quick; a slow walk is
/// followed by a pause as long as itself, so the watchdog takes at most
/// about half a core. [`Watchdog::finish`] cuts the pause short.
const POLL_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);

impl Watchdog {
    /// Measures the roots as the command finds them, then polls them.
    pub async fn start(roots: Vec<std::path::PathBuf>, limits: WorkspaceLimits) -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (tx, stop) = tokio::sync::watch::channel(None);
        let done = std::sync::Arc::new(AtomicBool::new(false));
        let measured = roots.clone();
        let start = tokio::task::spawn_blocking(move || measure_all(&measured, &mut |_| false))
            .await
            .unwrap_or_default();
        let flag = done.clone();
        let watched = roots.clone();
        let thread = std::thread::Builder::new()
            .name("workspace-watchdog".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    let began = std::time::Instant::now();
                    let mut crossed = None;
                    let usage = measure_all(&watched, &mut |partial| {
                        if flag.load(Ordering::Relaxed) {
                            return true;
                        }
                        crossed = crossed.take().or_else(|| limits.crossed(&start, partial));
                        crossed.is_some()
                    });
                    if flag.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Some(reason) = crossed.or_else(|| limits.crossed(&start, &usage)) {
                        let _ = tx.send(Some(reason));
                        return;
                    }
                    // Woken early by `finish`.
                    std::thread::park_timeout(began.elapsed().max(POLL_PAUSE));
                }
            })
            .ok();
        Self {
            stop,
            done,
            thread,
            roots,
            limits,
            start,
        }
    }

    /// Stops watching, and measures once more: a limit crossed by a
    /// command that ended before a poll saw it is reported too.
    pub async fn finish(mut self) -> Option<String> {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        let thread = self.thread.take();
        let (roots, limits, start) = (self.roots.clone(), self.limits, self.start);
        tokio::task::spawn_blocking(move || {
            if let Some(thread) = thread {
                // Out of its pause at once; within one directory of a walk.
                thread.thread().unpark();
                let _ = thread.join();
            }
            let mut crossed = None;
            let usage = measure_all(&roots, &mut |partial| {
                crossed = crossed.take().or_else(|| limits.crossed(&start, partial));
                crossed.is_some()
            });
            crossed.or_else(|| limits.crossed(&start, &usage))
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
}
