//! A copy of a repository prepared ahead of its next run.
//!
//! Copying a large repository is most of what a run costs before the model
//! sees anything. Once a run on a repository has ended, a detached process
//! copies the source again — exactly as a run would, with its baseline
//! commit and a checkpoint store that already holds the baseline's objects
//! and a stat cache of the copied files — and keeps it in the state
//! directory. The next run on that repository *takes* it instead of copying:
//! it compares every source path with the `lstat` facts recorded when the
//! copy was made (Git's index rule: size, times, inode and mode, and a file
//! changed within [`RACY_WINDOW_NS`] of the copy's start counts as changed),
//! copies again what changed, removes what went, and moves the result into
//! the run's workspace. The result is the workspace a fresh copy would give
//! (same files, same baseline tree, same paths left out); when anything
//! changed, the baseline commit is written again in a fresh `.git` that
//! takes from the old one only the objects of the files kept (its packs
//! that hold nothing stale move over whole, the others are rewritten
//! without what is gone), so no object of a version that is gone stays in
//! the workspace's `.git`.
//!
//! A prepared copy is only an accelerator. It is taken whole or not at all:
//! one whose format, source path or settings (credential paths, per-file
//! limit, owner) differ from the run's, or where more than a quarter of the
//! files changed, is thrown away and the run copies from scratch; so is one
//! that fails to refresh for any reason. It is never attached to a
//! container before it is taken, and at most one run takes it: the claim is
//! a rename, under a lock that the preparing process holds too.
//!
//! Layout, in `<state>/prepared/<key of the source path>`: `lock` (flock),
//! and `ready/` holding `ws/` (the copy, `.git` included), `store/` (the
//! checkpoint store seed) and `meta` (what was copied, checksummed).

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use git2::Oid;
use sha2::{Digest, Sha256};

use super::copy::{
    Copier, KeptFile, left_out_reason, open_source, recopy_and_commit, source_paths, workdir_of,
};
use crate::workspace::confinement::secrets::{LeftOut, SecretPaths};
use crate::workspace::scan::fingerprint::now_ns;
use crate::workspace::scan::stat_cache::{CachedHash, RACY_WINDOW_NS, StatKey};
use crate::workspace::{CheckpointStore, ExcludeSet, PrivateWorkspace, WorkspaceError};

const MAGIC: &[u8; 8] = b"MCPREP4\n";
const READY: &str = "ready";
/// Made by a run waiting for a copy still being prepared: the preparing
/// process hands it over without settling first.
const WANTED: &str = "wanted";
pub(super) const META: &str = "meta";
/// What the copy recorded of the files it wrote, for a copy handed over
/// before it settled (a stat cache file, racy entries included).
pub(super) const PRIMED: &str = "primed";
/// Prepared copies kept at once (the most recently made).
pub(crate) const KEEP: usize = 3;

/// What a copy depends on besides the source: it is only taken by a run
/// with the same settings.
#[derive(Debug, Clone)]
pub(crate) struct PrepareSettings {
    pub secrets: SecretPaths,
    pub max_file_bytes: u64,
    pub owner: Option<(u32, u32)>,
}

impl PrepareSettings {
    pub(super) fn key(&self) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(MAGIC);
        for p in self.secrets.patterns() {
            h.update((p.len() as u64).to_le_bytes());
            h.update(p.as_bytes());
        }
        h.update(self.max_file_bytes.to_le_bytes());
        match self.owner {
            Some((u, g)) => {
                h.update([1]);
                h.update(u.to_le_bytes());
                h.update(g.to_le_bytes());
            }
            None => h.update([0]),
        }
        h.finalize().into()
    }
}

/// The directory of the prepared copy of `repo` under `root`.
pub(crate) fn prepared_dir(root: &Path, repo: &Path) -> PathBuf {
    let digest = Sha256::digest(repo.as_os_str().as_bytes());
    root.join(hex::encode(&digest[..16]))
}

/// One copied path as the copy recorded it.
pub(super) struct Recorded {
    pub(super) path: Vec<u8>,
    /// Git's mode of the copy, its size, and a symlink's target.
    pub(super) mode: u32,
    pub(super) size: u64,
    pub(super) target: Option<Vec<u8>>,
    /// The source's facts, read before anything was copied.
    pub(super) source: StatKey,
    /// The blob of the baseline (none for a file over the per-file limit).
    pub(super) blob: Option<Oid>,
}

impl Recorded {
    fn kept(&self) -> KeptFile {
        KeptFile {
            path: self.path.clone(),
            mode: self.mode,
            size: self.size,
            target: self.target.clone(),
            blob: self.blob,
        }
    }
}

/// What [`take`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refreshed {
    /// Source paths copied again (changed or new).
    pub copied: u64,
    /// Paths removed (gone from the source or left out now).
    pub removed: u64,
    /// Whether the baseline commit was written again.
    pub rebased: bool,
    /// Waiting for a copy still being prepared.
    pub waited_ms: u64,
    /// Listing the source (its status) and comparing each path's facts.
    pub compare_ms: u64,
    /// Copying what changed and writing the baseline again.
    pub recopy_ms: u64,
}

/// Why a prepared copy was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotTaken {
    /// There is none (or another run took it).
    Missing,
    /// It was made for other settings or another format.
    Stale,
    /// Too much of the source changed since.
    TooManyChanges,
    /// Refreshing it failed (the run copies from scratch).
    Failed(String),
}

/// A taken copy: the workspace (moved to the run's directory) and the
/// checkpoint store seed (moved to the run's store directory).
pub(crate) struct Taken {
    pub workspace: PrivateWorkspace,
    pub refreshed: Refreshed,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn key_of(meta: &std::fs::Metadata) -> StatKey {
    StatKey {
        size: meta.size(),
        mtime_ns: meta.mtime().saturating_mul(1_000_000_000) + meta.mtime_nsec(),
        ctime_ns: meta.ctime().saturating_mul(1_000_000_000) + meta.ctime_nsec(),
        ino: meta.ino(),
        mode: meta.mode(),
    }
}

/// The lock of a prepared copy's directory, held while it is made or taken.
struct Lock {
    _file: std::fs::File,
}

/// How long a preparation waits for the lock before it leaves the
/// directory to whoever holds it.
const PROBE_GRACE: Duration = Duration::from_millis(200);

impl Lock {
    fn open(dir: &Path) -> Result<std::fs::File, WorkspaceError> {
        crate::state::private_dir(dir).map_err(|e| WorkspaceError::io(dir, e))?;
        let path = dir.join("lock");
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| WorkspaceError::io(&path, e))
    }

    fn try_take(dir: &Path) -> Result<Option<Self>, WorkspaceError> {
        let file = Self::open(dir)?;
        match rustix::fs::flock(
            file.as_fd(),
            rustix::fs::FlockOperation::NonBlockingLockExclusive,
        ) {
            Ok(()) => Ok(Some(Self { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(WorkspaceError::io(
                dir.join("lock"),
                std::io::Error::from(e),
            )),
        }
    }

    /// Waits up to `patience` for a copy being prepared.
    fn wait(dir: &Path, patience: Duration) -> Result<Option<Self>, WorkspaceError> {
        let until = Instant::now() + patience;
        loop {
            if let Some(lock) = Self::try_take(dir)? {
                return Ok(Some(lock));
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }
}

/// Whether a copy of `repo` is being prepared right now.
pub(crate) fn is_preparing(root: &Path, repo: &Path) -> bool {
    let dir = prepared_dir(root, repo);
    dir.is_dir() && matches!(Lock::try_take(&dir), Ok(None))
}

/// Prepares a copy of `source_repo` in `dir` for the next run; `false`
/// when another process holds the directory. Replaces an earlier copy.
#[cfg(test)]
pub(crate) fn prepare(
    source_repo: &Path,
    dir: &Path,
    settings: &PrepareSettings,
) -> Result<bool, WorkspaceError> {
    prepare_from(source_repo, dir, settings, None)
}

/// Makes a prepared copy in its first argument (a directory that does not
/// exist yet) some other way than copying the source afresh; the second is
/// the file a run waiting for the copy makes.
pub(crate) type MakeFrom<'a> = &'a dyn Fn(&Path, &Path) -> Result<(), WorkspaceError>;

/// [`prepare`] — made by `recycled`'s maker from the directory it names (a
/// `recycle-*` directory of `dir`, see the recycle module) where one is
/// given, and the usual way when that fails. The recycled directory is
/// gone either way.
pub(crate) fn prepare_from(
    source_repo: &Path,
    dir: &Path,
    settings: &PrepareSettings,
    recycled: Option<(&Path, MakeFrom<'_>)>,
) -> Result<bool, WorkspaceError> {
    // A probe (`is_preparing`, gc) holds the lock for an instant: that is
    // no other preparation, so it is waited out; a preparation under way
    // holds it for seconds.
    let asking = std::time::SystemTime::now();
    let Some(_lock) = Lock::wait(dir, PROBE_GRACE)? else {
        if let Some((r, _)) = recycled {
            crate::sandbox::gc::remove_detached(&[r]);
        }
        return Ok(false);
    };
    clear_leftovers(dir);
    // A wish from before this preparation asked for the lock is stale; one
    // made since (a run that found the lock taken) is for this copy.
    let wanted = dir.join(WANTED);
    if std::fs::metadata(&wanted)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t < asking)
    {
        let _ = std::fs::remove_file(&wanted);
    }
    let building = dir.join(format!("building-{}", crate::ids::random_hex(4)));
    let mut made = Err(WorkspaceError::io(
        dir,
        std::io::Error::other("nothing to recycle"),
    ));
    if let Some((r, make)) = recycled {
        made = make(&building, &dir.join(WANTED));
        if let Err(e) = &made {
            tracing::info!("the ended run's workspace was not recycled: {e}");
            let _ = std::fs::remove_dir_all(&building);
        }
        crate::sandbox::gc::remove_detached(&[r]);
    }
    if made.is_err() {
        made = build(source_repo, &building, settings);
    }
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&building);
        return Err(e);
    }
    let ready = dir.join(READY);
    if ready.exists() {
        let old = dir.join(format!("old-{}", crate::ids::random_hex(4)));
        std::fs::rename(&ready, &old).map_err(|e| WorkspaceError::io(&ready, e))?;
        let _ = std::fs::remove_dir_all(&old);
    }
    std::fs::rename(&building, &ready).map_err(|e| WorkspaceError::io(&ready, e))?;
    Ok(true)
}

/// What a killed process left (under the lock): half-made copies, old
/// ones, and a copy a run took and did not finish with within an hour.
fn clear_leftovers(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let stale = name.starts_with("building-")
            || name.starts_with("old-")
            || ((name.starts_with("taking-") || name.starts_with("recycle-"))
                && entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|e| e > Duration::from_secs(3600))));
        if stale {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn build(
    source_repo: &Path,
    building: &Path,
    settings: &PrepareSettings,
) -> Result<(), WorkspaceError> {
    let started_ns = now_ns();
    let source = open_source(source_repo)?;
    let workdir = workdir_of(&source, source_repo)?;
    let (paths, _) = source_paths(&source, &settings.secrets)?;
    drop(source);
    // The source's facts before anything is copied: a file changed later
    // is newer than the copy's start, so a refresh copies it again.
    let mut keys = Vec::with_capacity(paths.len());
    for rel in &paths {
        if left_out_reason(rel, &settings.secrets).is_some() {
            continue;
        }
        if let Ok(meta) = std::fs::symlink_metadata(workdir.join(OsStr::from_bytes(rel))) {
            keys.push((rel, key_of(&meta)));
        }
    }
    let ws = building.join("ws");
    let mut workspace = PrivateWorkspace::create_limited(
        source_repo,
        &ws,
        settings.owner,
        &settings.secrets,
        settings.max_file_bytes,
        &mut |_| {},
    )?;
    let blobs: std::collections::HashMap<Vec<u8>, Oid> = git2::Repository::open(&ws)
        .and_then(|repo| repo.index())
        .map_err(WorkspaceError::git("reading the copy's index"))?
        .iter()
        .map(|e| (e.path, e.id))
        .collect();
    let mut recorded = Vec::with_capacity(keys.len());
    for (rel, source) in keys {
        let at = ws.join(OsStr::from_bytes(rel));
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            continue;
        };
        let (mode, size, target) = if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&at)
                .map_err(|e| WorkspaceError::io(&at, e))?
                .into_os_string()
                .into_vec();
            (0o120000, target.len() as u64, Some(target))
        } else if meta.is_file() {
            let exec = meta.mode() & 0o111 != 0;
            (if exec { 0o100755 } else { 0o100644 }, meta.size(), None)
        } else {
            continue;
        };
        recorded.push(Recorded {
            path: rel.clone(),
            mode,
            size,
            target,
            source,
            blob: blobs.get(rel.as_slice()).copied(),
        });
    }
    let copied_ns = now_ns();
    // The store seed: the baseline's objects, and a stat cache that a
    // later scan trusts, so the run's baseline checkpoint reads nothing
    // again. Entries are trusted only once the files are older than the
    // racy window.
    let mut store = CheckpointStore::open(&building.join("store"), &ws, ExcludeSet::default())?
        .with_secret_paths(settings.secrets.clone())
        .with_max_file_bytes(settings.max_file_bytes);
    store.adopt_pack(workspace.baseline_pack())?;
    // Settling until the files are older than the racy window, unless a
    // run is waiting for the copy: it is handed over at once, its stat
    // cache then trusting fewer entries (the run hashes those again).
    let wanted = building.parent().map(|d| d.join(WANTED));
    let until = copied_ns + RACY_WINDOW_NS + 50_000_000;
    let mut handed_over = false;
    while now_ns() < until && !handed_over {
        handed_over = wanted.as_ref().is_some_and(|w| w.exists());
        let left = u64::try_from(until - now_ns()).unwrap_or(0);
        if !handed_over {
            std::thread::sleep(Duration::from_nanos(left.min(20_000_000)));
        }
    }
    if handed_over {
        // No scan would trust these files yet: the run's baseline
        // checkpoint takes what the copy recorded of them instead (the
        // facts of each file as written, with its hashes), as it does
        // after a copy of its own; nothing runs in the copy meanwhile.
        let facts = workspace.take_baseline_facts();
        crate::workspace::scan::stat_cache::StatCache::from_entries(facts.0)
            .save(&building.join(PRIMED))?;
    } else {
        store.scan()?;
    }
    drop(store);
    write_meta(
        &building.join(META),
        &Meta {
            started_ns,
            allocated: workspace.allocated_bytes(),
            baseline: workspace.baseline(),
            settings: settings.key(),
            repo: source_repo.as_os_str().as_bytes().to_vec(),
            files: recorded,
            git_stale: false,
        },
    )
}

/// Takes the prepared copy of `source_repo` in `dir`, if there is one made
/// with `settings`: refreshes it against the source, moves its files into
/// `dest` (an existing empty directory, possibly already mounted into a
/// container) and its checkpoint store seed to `store_dir` (which must not
/// exist). Waits up to `patience` for a copy still being prepared. Any
/// failure throws the copy away and says so: the caller copies afresh.
pub(crate) fn take(
    source_repo: &Path,
    dir: &Path,
    settings: &PrepareSettings,
    dest: &Path,
    store_dir: &Path,
    patience: Duration,
) -> Result<Taken, NotTaken> {
    if !dir.join(READY).exists() && !dir.join("lock").exists() {
        return Err(NotTaken::Missing);
    }
    let waited = Instant::now();
    let lock = match Lock::try_take(dir).map_err(|e| NotTaken::Failed(e.to_string()))? {
        Some(lock) => Some(lock),
        None => {
            // Being prepared: the copy is further along than one started
            // now would be; the preparing process is asked to hand it over
            // as soon as its files are copied.
            let _ = crate::state::write_private_file(&dir.join(WANTED), b"");
            Lock::wait(dir, patience).map_err(|e| NotTaken::Failed(e.to_string()))?
        }
    };
    let _ = std::fs::remove_file(dir.join(WANTED));
    let Some(lock) = lock else {
        return Err(NotTaken::Missing);
    };
    let waited_ms = ms(waited.elapsed());
    let ready = dir.join(READY);
    let taking = dir.join(format!("taking-{}", crate::ids::random_hex(4)));
    match std::fs::rename(&ready, &taking) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NotTaken::Missing),
        Err(e) => return Err(NotTaken::Failed(e.to_string())),
    }
    drop(lock);
    let mut taken = refresh_and_move(source_repo, &taking, settings, dest, store_dir);
    if let Ok(t) = &mut taken {
        t.refreshed.waited_ms = waited_ms;
    }
    if taken.is_err() {
        // Whatever was moved already goes back out of the run's way.
        clear_dir(dest);
        let _ = std::fs::remove_dir_all(store_dir);
    }
    crate::workspace::remove_detached(&[&taking]);
    taken
}

/// Empties `dir`, keeping it (it may be mounted).
fn clear_dir(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir_all(&path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

fn refresh_and_move(
    source_repo: &Path,
    taking: &Path,
    settings: &PrepareSettings,
    dest: &Path,
    store_dir: &Path,
) -> Result<Taken, NotTaken> {
    let failed = |e: WorkspaceError| NotTaken::Failed(e.to_string());
    let started = Instant::now();
    let meta = read_meta(&taking.join(META)).ok_or(NotTaken::Stale)?;
    if meta.settings != settings.key() || meta.repo != source_repo.as_os_str().as_bytes() {
        return Err(NotTaken::Stale);
    }
    let ws = taking.join("ws");
    let source = open_source(source_repo).map_err(failed)?;
    let workdir = workdir_of(&source, source_repo).map_err(failed)?;
    let (paths, source_state) = source_paths(&source, &settings.secrets).map_err(failed)?;
    drop(source);
    // Only to judge links again: it copies nothing.
    let checker = Copier::new(&workdir, &ws, None, settings.max_file_bytes, 0).map_err(failed)?;

    let Compared {
        keep,
        again,
        replaced,
        gone,
        left_out,
    } = compare(&meta, &paths, settings, &workdir, &checker).map_err(failed)?;
    let changes = again.len() + gone.len();
    if changes > (meta.files.len() / 4).max(64) {
        return Err(NotTaken::TooManyChanges);
    }
    let mut allocated = meta.allocated;
    for rel in replaced.iter().chain(&gone) {
        let freed = remove_recorded(&ws, Path::new(OsStr::from_bytes(rel))).map_err(failed)?;
        allocated = allocated.saturating_sub(freed);
    }
    let mut refreshed = Refreshed {
        copied: 0,
        removed: gone.len() as u64,
        rebased: changes > 0 || meta.git_stale,
        waited_ms: 0,
        compare_ms: ms(started.elapsed()),
        recopy_ms: 0,
    };
    let recopying = Instant::now();
    let mut baseline = meta.baseline;
    let mut files = keep.len() as u64;
    if changes > 0 || meta.git_stale {
        // A fresh `.git`, taking from the old one only the objects of the
        // files kept: nothing of a version that is gone stays reachable,
        // or readable, in the workspace's `.git`.
        let (git, old) = (ws.join(".git"), taking.join("old-git"));
        std::fs::rename(&git, &old).map_err(|e| failed(WorkspaceError::io(&git, e)))?;
        let kept = keep.iter().map(|r| r.kept()).collect();
        let made = recopy_and_commit(
            &workdir,
            &ws,
            settings.owner,
            settings.max_file_bytes,
            &again,
            kept,
            &old.join("objects/pack"),
        );
        let _ = std::fs::remove_dir_all(&old);
        let (commit, recopied) = made.map_err(failed)?;
        baseline = commit;
        refreshed.copied = recopied.len() as u64;
        files += recopied.len() as u64;
        let back: std::collections::HashSet<&[u8]> =
            recopied.iter().map(|(p, _)| p.as_slice()).collect();
        // Tracked, but gone from the working tree.
        refreshed.removed += replaced.iter().filter(|p| !back.contains(**p)).count() as u64;
        for (_, bytes) in &recopied {
            allocated = allocated.saturating_add(*bytes);
        }
        refreshed.recopy_ms = ms(recopying.elapsed());
    }
    let (mut primed, unmoved) = primed_before_move(taking, &ws, &keep);
    move_into_place(&ws, dest, settings.owner, &taking.join("store"), store_dir).map_err(failed)?;
    carry_ctimes(dest, &mut primed, unmoved);
    let workspace = PrivateWorkspace::from_prepared(
        dest.to_path_buf(),
        baseline,
        settings.owner,
        left_out,
        allocated,
        files,
        source_state,
    )
    .with_as_of(meta.started_ns)
    .with_baseline_facts(super::copy::BaselineFacts(primed));
    Ok(Taken {
        workspace,
        refreshed,
    })
}

/// Path → what a copy recorded of the file it wrote there.
type Primed = std::collections::HashMap<Vec<u8>, CachedHash>;

/// What a copy handed over before it settled recorded of the files kept
/// (a file copied again, or changed since, has other facts and is read
/// again), and of those at the top, the facts just before the move.
fn primed_before_move(
    taking: &Path,
    ws: &Path,
    keep: &[&Recorded],
) -> (Primed, Vec<(Vec<u8>, StatKey)>) {
    let kept: std::collections::HashSet<&[u8]> = keep.iter().map(|r| r.path.as_slice()).collect();
    let mut primed =
        crate::workspace::scan::stat_cache::StatCache::load(&taking.join(PRIMED)).into_entries();
    primed.retain(|rel, _| kept.contains(rel.as_slice()));
    let unmoved = primed
        .iter()
        .filter(|(rel, fact)| {
            !rel.contains(&b'/')
                && std::fs::symlink_metadata(ws.join(OsStr::from_bytes(rel)))
                    .is_ok_and(|m| key_of(&m) == fact.key)
        })
        .map(|(rel, fact)| (rel.clone(), fact.key))
        .collect();
    (primed, unmoved)
}

/// Moving the files at the top gave them a new ctime: carried over only for
/// those whose facts were exactly the recorded ones just before, and are
/// now but for the ctime.
fn carry_ctimes(dest: &Path, primed: &mut Primed, unmoved: Vec<(Vec<u8>, StatKey)>) {
    for (rel, before) in unmoved {
        let Ok(now) = std::fs::symlink_metadata(dest.join(OsStr::from_bytes(&rel))) else {
            continue;
        };
        let now = key_of(&now);
        let moved_only = StatKey {
            ctime_ns: before.ctime_ns,
            ..now
        } == before;
        if let Some(fact) = primed.get_mut(&rel)
            && moved_only
        {
            fact.key.ctime_ns = now.ctime_ns;
        }
    }
}

/// The source's paths held against what the prepared copy recorded.
struct Compared<'m, 'p> {
    /// Unchanged since the copy (and old enough to be trusted so).
    keep: Vec<&'m Recorded>,
    /// To copy again: new, changed, or too recent to judge.
    again: Vec<&'p Path>,
    /// Of `again`, those the copy holds an older version of.
    replaced: std::collections::HashSet<&'p [u8]>,
    /// What the copy holds and the source no longer gives.
    gone: Vec<&'m [u8]>,
    left_out: Vec<LeftOut>,
}

fn compare<'m, 'p>(
    meta: &'m Meta,
    paths: &'p std::collections::BTreeSet<Vec<u8>>,
    settings: &PrepareSettings,
    workdir: &Path,
    checker: &Copier,
) -> Result<Compared<'m, 'p>, WorkspaceError> {
    let mut known: std::collections::HashMap<&[u8], &Recorded> =
        meta.files.iter().map(|r| (r.path.as_slice(), r)).collect();
    let trusted_before = meta.started_ns.saturating_sub(RACY_WINDOW_NS);
    let mut left_out = Vec::new();
    let mut keep: Vec<&Recorded> = Vec::with_capacity(paths.len());
    let mut again: Vec<&Path> = Vec::new();
    let mut replaced = std::collections::HashSet::new();
    for rel in paths {
        let recorded = known.remove(rel.as_slice());
        // A path the copy holds was not left out, with the same settings.
        if recorded.is_none()
            && let Some(reason) = left_out_reason(rel, &settings.secrets)
        {
            left_out.push(LeftOut::new(rel, reason));
            continue;
        }
        let path = Path::new(OsStr::from_bytes(rel));
        let current = std::fs::symlink_metadata(workdir.join(path))
            .ok()
            .map(|m| key_of(&m));
        match (recorded, current) {
            (Some(r), Some(now))
                if now == r.source
                    && now.mtime_ns < trusted_before
                    && now.ctime_ns < trusted_before =>
            {
                if let Some(target) = &r.target {
                    // Whether a link stays inside depends on other paths too.
                    checker.check_link(path, Path::new(OsStr::from_bytes(target)))?;
                }
                keep.push(r);
            }
            (old, _) => {
                if old.is_some() {
                    replaced.insert(rel.as_slice());
                }
                again.push(path);
            }
        }
    }
    Ok(Compared {
        keep,
        again,
        replaced,
        gone: known.keys().copied().collect(),
        left_out,
    })
}

/// Removes a path the copy holds that changed or went: the bytes it held.
fn remove_recorded(ws: &Path, rel: &Path) -> Result<u64, WorkspaceError> {
    let held =
        std::fs::symlink_metadata(ws.join(rel)).map_or(0, |m| m.blocks().saturating_mul(512));
    remove_path(ws, rel)?;
    Ok(held)
}

/// Moves the refreshed copy `ws` into the run's directory `dest` (which
/// may already be mounted, so its entries move, not the directory) and its
/// checkpoint store `seed` to `store_dir`.
fn move_into_place(
    ws: &Path,
    dest: &Path,
    owner: Option<(u32, u32)>,
    seed: &Path,
    store_dir: &Path,
) -> Result<(), WorkspaceError> {
    let entries = std::fs::read_dir(ws).map_err(|e| WorkspaceError::io(ws, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| WorkspaceError::io(ws, e))?;
        let to = dest.join(entry.file_name());
        std::fs::rename(entry.path(), &to).map_err(|e| WorkspaceError::io(&to, e))?;
    }
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::lchown(dest, Some(uid), Some(gid))
            .map_err(|e| WorkspaceError::io(dest, e))?;
    }
    if let Some(parent) = store_dir.parent() {
        crate::state::private_dir(parent).map_err(|e| WorkspaceError::io(parent, e))?;
    }
    std::fs::rename(seed, store_dir).map_err(|e| WorkspaceError::io(store_dir, e))
}

/// Removes one copied path and the directories it leaves empty.
fn remove_path(ws: &Path, rel: &Path) -> Result<(), WorkspaceError> {
    let path = ws.join(rel);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(WorkspaceError::io(&path, e)),
    }
    for dir in rel.ancestors().skip(1) {
        if dir.as_os_str().is_empty() || std::fs::remove_dir(ws.join(dir)).is_err() {
            break;
        }
    }
    Ok(())
}

/// Removes prepared copies beyond the [`KEEP`] most recent, and every one
/// whose source is gone; with `older_than`, also those made before it.
pub(crate) fn prune(root: &Path, older_than: Option<std::time::SystemTime>) -> u64 {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut copies: Vec<(std::time::SystemTime, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| {
            let made = std::fs::metadata(e.path().join(READY))
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (made, e.path())
        })
        .collect();
    copies.sort_by_key(|c| std::cmp::Reverse(c.0));
    let mut removed = 0;
    for (i, (made, dir)) in copies.iter().enumerate() {
        let source_gone = read_meta(&dir.join(READY).join(META))
            .is_some_and(|m| !Path::new(OsStr::from_bytes(&m.repo)).join(".git").exists());
        let old = older_than.is_some_and(|t| *made < t);
        if i >= KEEP || source_gone || old {
            // Not while it is being made or taken.
            if let Ok(Some(_lock)) = Lock::try_take(dir) {
                let ready = dir.join(READY);
                if ready.exists() {
                    let trash = dir.join(format!("old-{}", crate::ids::random_hex(4)));
                    if std::fs::rename(&ready, &trash).is_ok() {
                        removed += 1;
                        crate::workspace::remove_detached(&[&trash]);
                    }
                }
            }
        }
    }
    removed
}

pub(super) struct Meta {
    pub(super) started_ns: i64,
    pub(super) allocated: u64,
    pub(super) baseline: Oid,
    pub(super) settings: [u8; 32],
    pub(super) repo: Vec<u8>,
    pub(super) files: Vec<Recorded>,
    /// The copy's `.git` holds only the baseline's packs (a recycled
    /// workspace): the taking run writes the baseline commit again.
    pub(super) git_stale: bool,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u64).to_le_bytes());
    out.extend_from_slice(b);
}

pub(super) fn write_meta(path: &Path, meta: &Meta) -> Result<(), WorkspaceError> {
    let mut out = Vec::with_capacity(64 + meta.files.len() * 96);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&meta.started_ns.to_le_bytes());
    out.extend_from_slice(&meta.allocated.to_le_bytes());
    out.extend_from_slice(meta.baseline.as_bytes());
    out.extend_from_slice(&meta.settings);
    out.push(u8::from(meta.git_stale));
    put_bytes(&mut out, &meta.repo);
    out.extend_from_slice(&(meta.files.len() as u64).to_le_bytes());
    for r in &meta.files {
        put_bytes(&mut out, &r.path);
        out.extend_from_slice(&r.mode.to_le_bytes());
        out.extend_from_slice(&r.size.to_le_bytes());
        match &r.target {
            Some(t) => {
                out.push(1);
                put_bytes(&mut out, t);
            }
            None => out.push(0),
        }
        let k = &r.source;
        out.extend_from_slice(&k.size.to_le_bytes());
        out.extend_from_slice(&k.mtime_ns.to_le_bytes());
        out.extend_from_slice(&k.ctime_ns.to_le_bytes());
        out.extend_from_slice(&k.ino.to_le_bytes());
        out.extend_from_slice(&k.mode.to_le_bytes());
        match r.blob {
            Some(id) => {
                out.push(1);
                out.extend_from_slice(id.as_bytes());
            }
            None => out.push(0),
        }
    }
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    std::fs::write(path, out).map_err(|e| WorkspaceError::io(path, e))
}

/// Reads what [`write_meta`] wrote; `None` for anything else.
fn read_meta(path: &Path) -> Option<Meta> {
    let data = std::fs::read(path).ok()?;
    let (body, sum) = data.split_at(data.len().checked_sub(32)?);
    if Sha256::digest(body).as_slice() != sum {
        return None;
    }
    let mut r = Reader(body);
    if r.take(8)? != MAGIC {
        return None;
    }
    let started_ns = r.i64()?;
    let allocated = r.u64()?;
    let baseline = Oid::from_bytes(r.take(20)?).ok()?;
    let settings = r.take(32)?.try_into().ok()?;
    let git_stale = r.take(1)?[0] != 0;
    let repo = r.bytes()?.to_vec();
    let count = usize::try_from(r.u64()?).ok()?;
    let mut files = Vec::with_capacity(count.min(1 << 20));
    for _ in 0..count {
        let path = r.bytes()?.to_vec();
        let mode = r.u32()?;
        let size = r.u64()?;
        let target = match r.take(1)?[0] {
            1 => Some(r.bytes()?.to_vec()),
            _ => None,
        };
        let source = StatKey {
            size: r.u64()?,
            mtime_ns: r.i64()?,
            ctime_ns: r.i64()?,
            ino: r.u64()?,
            mode: r.u32()?,
        };
        let blob = match r.take(1)?[0] {
            1 => Some(Oid::from_bytes(r.take(20)?).ok()?),
            _ => None,
        };
        files.push(Recorded {
            path,
            mode,
            size,
            target,
            source,
            blob,
        });
    }
    Some(Meta {
        started_ns,
        allocated,
        baseline,
        settings,
        repo,
        files,
        git_stale,
    })
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        self.take(n)
    }
}

#[cfg(test)]
#[path = "prepared_tests.rs"]
mod tests;
