//! The change journal: which paths of the workspace may have changed since
//! the last checkpoint, so a checkpoint examines only those (and none at
//! all when nothing changed) instead of walking the whole workspace.
//!
//! # How it knows
//!
//! An inotify instance on the host watches every directory a scan reads:
//! all of the workspace except `.git`, the excluded directories and what
//! git refuses, which no checkpoint holds. A background thread drains the
//! instance continuously (so the kernel's queue does not overflow while a
//! command runs) into a bounded set of dirty paths; a checkpoint drains it
//! once more, takes the set and examines each path as a full scan would
//! (a directory with everything below it). The events are queued by the
//! system call that made the change, before it returns, so every change
//! made before a checkpoint starts is in the set it takes.
//!
//! # Why that is enough
//!
//! The workspace changes only while a command runs in the container (its
//! supervisor kills every process after each command, so nothing writes
//! between commands) or when a host tool writes it, and inotify sees the
//! writes of both, whatever process makes them. Every change of a file's
//! content needs a file descriptor open for writing, and its last close,
//! explicit or at process death, fires `IN_CLOSE_WRITE`; that includes
//! writes through a shared memory mapping, which fire no `IN_MODIFY` but
//! hold the file open until they are unmapped. `truncate` by path fires
//! `IN_MODIFY`, `chmod` fires `IN_ATTRIB`, and creating, deleting or
//! renaming an entry fires an event in its directory. A dirty file is then
//! judged with the stat cache and its racy rule, as in a full scan.
//!
//! # When it cannot vouch
//!
//! The journal then asks for a full scan (the walk of every directory that
//! a checkpoint without a journal makes), and the full scan watches every
//! directory again: before the first checkpoint; when inotify is not
//! available or the watch limit is reached (then for good); on
//! `IN_Q_OVERFLOW`; when a directory is moved or renamed (the paths of the
//! watches below it are stale); when the workspace root itself is deleted
//! or moved; when an event names a watch it does not know; when more paths
//! are dirty than its bound; and when a dirty file turns out to have more
//! than one name (a write through another name fires events for that name
//! only). The files with several names that a full scan finds are examined
//! at every checkpoint. A directory created while a command runs is
//! watched as soon as its creation is seen, and examined whole at the next
//! checkpoint (entries may have been made in it before it was watched).
//!
//! Nothing from the workspace is trusted: names are bytes, and every
//! directory is watched through a descriptor opened below the root one
//! component at a time without following symlinks, so a directory swapped
//! for a symlink cannot make the journal watch anything outside.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustix::event::{EventfdFlags, PollFd, PollFlags};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::workspace::scan::walk::open_dir_below;
use crate::workspace::{ExcludeSet, verify_component};

/// Dirty paths kept before the journal gives up and asks for a full scan.
pub(crate) const DEFAULT_BOUND: usize = 100_000;

const EVENT_BUFFER: usize = 64 * 1024;

/// What changed since the journal was last asked.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Changes {
    /// The journal cannot vouch: scan everything.
    Everything,
    /// These paths (relative, `/`-separated) and nothing else; a directory
    /// among them stands for everything below it.
    Paths(HashSet<Vec<u8>>),
}

/// A running journal of one workspace.
pub(crate) struct Journal {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("workspace", &self.shared.workspace)
            .finish()
    }
}

struct Shared {
    inotify: OwnedFd,
    /// Readable once the journal is dropped: the thread ends.
    stop: OwnedFd,
    workspace: PathBuf,
    excludes: ExcludeSet,
    /// Every directory is watched, `.git` and excluded ones too (for the
    /// workspace limits, which count everything).
    whole: bool,
    bound: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The workspace root, opened by the latest full scan.
    root: Option<OwnedFd>,
    /// Watch → the relative path of its directory (empty for the root).
    dirs: HashMap<i32, Vec<u8>>,
    root_wd: Option<i32>,
    dirty: HashSet<Vec<u8>>,
    /// A full scan is needed.
    everything: bool,
    /// The journal can no longer vouch for anything (no more watches).
    broken: bool,
    /// A directory was removed since [`Journal::settle`]: a full scan made
    /// meanwhile does not vouch either (see [`Shared::note`]).
    dir_removed: bool,
    /// During a full scan: the watches it has (re)made.
    pass: Option<HashSet<i32>>,
    /// Watches removed whose last events may still be queued.
    forgotten: HashSet<i32>,
}

fn watch_flags() -> WatchFlags {
    WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::EXCL_UNLINK
}

impl Journal {
    /// Starts a journal of `workspace`; it vouches for nothing until the
    /// first full scan has watched every directory.
    pub(crate) fn start(
        workspace: &Path,
        excludes: &ExcludeSet,
        bound: usize,
    ) -> Result<Self, Errno> {
        Self::start_with(workspace, excludes, bound, false)
    }

    /// A journal of every directory below `root`, whatever its name: it
    /// says whether anything at all changed there.
    pub(crate) fn start_whole(root: &Path) -> Result<Self, Errno> {
        Self::start_with(root, &ExcludeSet::default(), 1, true)
    }

    fn start_with(
        workspace: &Path,
        excludes: &ExcludeSet,
        bound: usize,
        whole: bool,
    ) -> Result<Self, Errno> {
        let inotify = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        let stop = rustix::event::eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        let shared = Arc::new(Shared {
            inotify,
            stop,
            workspace: workspace.to_path_buf(),
            excludes: excludes.clone(),
            whole,
            bound,
            state: Mutex::new(State {
                everything: true,
                ..State::default()
            }),
        });
        let drainer = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("journal".into())
            .spawn(move || drainer.run())
            .map_err(|_| Errno::AGAIN)?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Drains the events queued so far and takes what changed.
    pub(crate) fn take(&self) -> Changes {
        let mut state = self.shared.lock();
        self.shared.drain(&mut state);
        if state.everything || state.broken {
            return Changes::Everything;
        }
        Changes::Paths(std::mem::take(&mut state.dirty))
    }

    /// Drains the events queued so far and tells whether nothing changed
    /// since the last full scan, keeping what it knows. After a directory
    /// was removed, never until [`Self::settle`].
    pub(crate) fn is_quiet(&self) -> bool {
        let mut state = self.shared.lock();
        self.shared.drain(&mut state);
        !state.everything && !state.broken && !state.dir_removed && state.dirty.is_empty()
    }

    /// Says that no process that could hold a descriptor into the tree is
    /// alive (between two commands): a directory removed before no longer
    /// keeps the journal from vouching once a full scan has been made.
    pub(crate) fn settle(&self) {
        let mut state = self.shared.lock();
        self.shared.drain(&mut state);
        state.dir_removed = false;
    }

    /// Before a full scan: what is queued is covered by the scan, and the
    /// scan's directories are watched again through [`Self::watch_dir`].
    pub(crate) fn begin_full_scan(&self) {
        let mut state = self.shared.lock();
        self.shared.drain(&mut state);
        state.dirty.clear();
        state.everything = false;
        state.pass = Some(HashSet::new());
        state.root = rustix::fs::open(
            &self.shared.workspace,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok();
        if state.root.is_none() {
            state.everything = true;
        }
    }

    /// After a full scan: the watches it did not make are removed; a scan
    /// that failed leaves the journal asking for another.
    pub(crate) fn end_full_scan(&self, ok: bool) {
        let mut state = self.shared.lock();
        let made = state.pass.take().unwrap_or_default();
        let stale: Vec<i32> = state
            .dirs
            .keys()
            .filter(|wd| !made.contains(wd))
            .copied()
            .collect();
        for wd in stale {
            state.dirs.remove(&wd);
            if inotify::remove_watch(&self.shared.inotify, wd).is_ok() {
                state.forgotten.insert(wd);
            }
        }
        if !ok {
            state.everything = true;
        }
        self.shared.drain(&mut state);
    }

    /// Watches the directory open as `dir`, at `rel` in the workspace.
    pub(crate) fn watch_dir(&self, dir: BorrowedFd<'_>, rel: &[u8]) {
        let mut state = self.shared.lock();
        self.shared.watch(&mut state, dir, rel);
    }

    /// Asks for a full scan next time.
    pub(crate) fn invalidate(&self) {
        self.shared.lock().everything = true;
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = rustix::io::write(&self.shared.stop, &1u64.to_ne_bytes());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The background thread: drains events as they come until stopped.
    fn run(&self) {
        loop {
            let mut fds = [
                PollFd::new(&self.inotify, PollFlags::IN),
                PollFd::new(&self.stop, PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, None) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(_) => {
                    let mut state = self.lock();
                    state.broken = true;
                    return;
                }
            }
            if !fds[1].revents().is_empty() {
                return;
            }
            let mut state = self.lock();
            self.drain(&mut state);
        }
    }

    /// Reads every queued event into `state`.
    fn drain(&self, state: &mut State) {
        let mut buf = vec![MaybeUninit::<u8>::uninit(); EVENT_BUFFER];
        let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
        loop {
            match reader.next() {
                Ok(event) => {
                    let name = event.file_name().map(|n| n.to_bytes().to_vec());
                    self.note(state, event.wd(), event.events(), name.as_deref());
                }
                Err(Errno::AGAIN) => return,
                Err(Errno::INTR) => {}
                Err(_) => {
                    state.everything = true;
                    return;
                }
            }
        }
    }

    /// Records one event.
    fn note(&self, state: &mut State, wd: i32, flags: ReadFlags, name: Option<&[u8]>) {
        if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
            state.everything = true;
            return;
        }
        if state.forgotten.contains(&wd) {
            if flags.contains(ReadFlags::IGNORED) {
                state.forgotten.remove(&wd);
            }
            return;
        }
        if flags.contains(ReadFlags::DELETE | ReadFlags::ISDIR)
            || (flags.contains(ReadFlags::DELETE_SELF) && state.root_wd != Some(wd))
        {
            // A descriptor opened through a name in that directory writes
            // on, firing events nobody watches, while the file may live on
            // under another name: nothing is vouched for until a scan made
            // once no process of the sandbox can hold such a descriptor.
            state.dir_removed = true;
            state.everything = true;
            return;
        }
        if flags.contains(ReadFlags::IGNORED) {
            // The directory is gone (or unmounted): its own removal is an
            // event of its parent's.
            state.dirs.remove(&wd);
            if state.root_wd == Some(wd) {
                state.root_wd = None;
                state.everything = true;
            }
            return;
        }
        if state.everything {
            return;
        }
        let Some(dir) = state.dirs.get(&wd) else {
            state.everything = true;
            return;
        };
        if flags.intersects(ReadFlags::MOVE_SELF)
            || (flags.intersects(ReadFlags::MOVED_FROM | ReadFlags::MOVED_TO)
                && flags.contains(ReadFlags::ISDIR))
        {
            state.everything = true;
            return;
        }
        if flags.contains(ReadFlags::DELETE_SELF) {
            if dir.is_empty() {
                state.everything = true;
            } else {
                let dir = dir.clone();
                self.mark(state, dir);
            }
            return;
        }
        let Some(name) = name.filter(|n| !n.is_empty() && !n.contains(&b'/')) else {
            // An event of the directory itself (its mode): its entries
            // are the same.
            return;
        };
        let mut rel = dir.clone();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(name);
        if flags.contains(ReadFlags::CREATE | ReadFlags::ISDIR) && self.reachable(name) {
            // Watched at once; what was made in it before is found when it
            // is examined whole.
            if let Some(root) = &state.root
                && let Ok(fd) = open_dir_below(root.as_fd(), &rel)
            {
                self.watch(state, fd.as_fd(), &rel);
            }
        }
        self.mark(state, rel);
    }

    /// Whether a scan reads a directory called `name`.
    fn reachable(&self, name: &[u8]) -> bool {
        self.whole
            || (name != b".git"
                && verify_component(name, false)
                && !self.excludes.excludes_dir(OsStr::from_bytes(name)))
    }

    fn mark(&self, state: &mut State, rel: Vec<u8>) {
        if state.dirty.len() >= self.bound && !state.dirty.contains(&rel) {
            state.dirty.clear();
            state.everything = true;
            return;
        }
        state.dirty.insert(rel);
    }

    fn watch(&self, state: &mut State, dir: BorrowedFd<'_>, rel: &[u8]) {
        if state.broken {
            return;
        }
        // The descriptor's own directory, whatever its path has become.
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        match inotify::add_watch(&self.inotify, &path, watch_flags()) {
            Ok(wd) => {
                state.forgotten.remove(&wd);
                state.dirs.insert(wd, rel.to_vec());
                if rel.is_empty() {
                    state.root_wd = Some(wd);
                }
                if let Some(pass) = &mut state.pass {
                    pass.insert(wd);
                }
            }
            Err(e) => {
                if !state.broken {
                    tracing::info!(
                        "watching the workspace for changes stopped ({e}): every checkpoint scans it whole"
                    );
                }
                state.broken = true;
                // Its watches count against the user's limit: give them back.
                for (wd, _) in state.dirs.drain() {
                    let _ = inotify::remove_watch(&self.inotify, wd);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "change_journal_tests.rs"]
mod tests;
