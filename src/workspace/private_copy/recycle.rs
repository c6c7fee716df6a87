//! An ended run's workspace made into its repository's next prepared copy.
//!
//! When a run ends, its workspace still holds the repository as the run's
//! copy found it, plus what the run did. Copying the source again, as a
//! fresh prepared copy does, costs what the run's own copy cost; a run
//! started at once after the last one ended (a retry, a script, a batch)
//! would wait for all of it. Cleaning the old workspace up costs what
//! reading it does, so the ended run hands its workspace on instead, and
//! the next run takes the result as it takes any prepared copy (refreshed
//! against the source, see the prepared module).
//!
//! Nothing the sandbox could have touched is trusted:
//!
//! | what the run left | what becomes of it |
//! |---|---|
//! | `.git` | removed whole; the taking run writes the baseline commit again |
//! | a directory of no baseline path | removed with all it holds |
//! | a file or link the baseline does not hold, a special file | removed |
//! | a baseline file | kept only if it is a regular file with one link, the copy's owner and permission bits, its baseline size, and its bytes hash to its baseline blob; else removed |
//! | a baseline link | kept only if it names its baseline target; else removed |
//! | a kept path whose source file changed since the run's copy read it | removed |
//!
//! The baseline's trees and blobs come from the run's checkpoint store,
//! which no container sees, never from the workspace. A kept path is
//! recorded with the source's facts read now, and only when the source file
//! has not changed since the run's copy began (its modification and change
//! times are older than that start less the racy window), so what is kept is
//! what the source holds; every path removed is copied again by the taking
//! run, as a refresh copies what changed. The workspace's new `.git` starts
//! with the store's packs (linked where the sandbox cannot change them,
//! copied where it could), from which the taking run commits the baseline.
//! (Tested with the prepared module's tests, which hold a taken copy
//! against a fresh one.)

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};
use serde::{Deserialize, Serialize};

use super::copy::{BaselineFacts, open_source, workdir_of};
use super::pack::Pack;
use super::prepared::{Meta, PrepareSettings, Recorded};
use sha2::Digest;

use crate::workspace::scan::fingerprint::{Hashing, hash_blob, now_ns};
use crate::workspace::scan::stat_cache::{CachedHash, RACY_WINDOW_NS, StatCache};
use crate::workspace::scan::walk::stat_key;
use crate::workspace::{CheckpointStore, ExcludeSet, WorkspaceError};

/// The file an ended run leaves beside its workspace for the process that
/// recycles it.
pub(crate) const HAND_OFF: &str = "hand-off.json";

/// What the ended run knows that its workspace cannot be trusted to say.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HandOff {
    /// The run's checkpoint store (its packs hold the baseline's objects).
    pub store: PathBuf,
    /// The baseline commit's tree.
    pub baseline_tree: String,
    /// When the run's copy began reading the source.
    pub as_of_ns: i64,
    /// The prepare settings the run's copy was made with (hex).
    pub settings: String,
}

impl HandOff {
    pub(crate) fn new(
        store: &Path,
        baseline_tree: Oid,
        as_of_ns: i64,
        settings: &PrepareSettings,
    ) -> Self {
        Self {
            store: store.to_path_buf(),
            baseline_tree: baseline_tree.to_string(),
            as_of_ns,
            settings: hex::encode(settings.key()),
        }
    }
}

/// What makes the prepared copy from the ended run's directory `recycled`
/// (its workspace and [`HAND_OFF`]), for `prepared::prepare_from`.
pub(crate) fn maker<'a>(
    source_repo: &'a Path,
    recycled: &'a Path,
    settings: &'a PrepareSettings,
) -> impl Fn(&Path, &Path) -> Result<(), WorkspaceError> + 'a {
    move |building, wanted| {
        let path = recycled.join(HAND_OFF);
        let text = std::fs::read(&path).map_err(|e| WorkspaceError::io(&path, e))?;
        let hand_off: HandOff = serde_json::from_slice(&text)
            .map_err(|e| WorkspaceError::io(&path, std::io::Error::other(e)))?;
        recycle(
            source_repo,
            &recycled.join("ws"),
            &hand_off,
            building,
            settings,
            Some(wanted),
        )
    }
}

/// One path of the baseline tree: its git mode and object.
#[derive(Debug, Clone, Copy)]
struct Wanted {
    mode: u32,
    id: Oid,
}

/// The bytes a recycled workspace may hold at most in one file before it
/// is not read (a file that big is copied again instead).
const MAX_HASHED: u64 = 1 << 30;

/// Makes `building` (which must not exist) a prepared copy from the ended
/// run's workspace `from_ws`, with `hand_off`'s facts; `source_repo` is the
/// repository both were made from. On error the caller throws `building`
/// away (and may prepare a copy the usual way).
fn recycle(
    source_repo: &Path,
    from_ws: &Path,
    hand_off: &HandOff,
    building: &Path,
    settings: &PrepareSettings,
    wanted_file: Option<&Path>,
) -> Result<(), WorkspaceError> {
    let bad = |why: &str| WorkspaceError::io(from_ws, std::io::Error::other(why.to_string()));
    if hand_off.settings != hex::encode(settings.key()) {
        return Err(bad("the ended run's copy was made with other settings"));
    }
    let started_ns = now_ns();
    let store = Repository::open_bare(&hand_off.store).map_err(WorkspaceError::git(
        "opening the ended run's checkpoint store",
    ))?;
    let tree = Oid::from_str(&hand_off.baseline_tree)
        .map_err(WorkspaceError::git("reading the baseline tree's id"))?;
    let baseline = baseline_paths(&store, tree)?;
    crate::state::private_dir(building).map_err(|e| WorkspaceError::io(building, e))?;
    let ws = building.join("ws");
    std::fs::rename(from_ws, &ws).map_err(|e| WorkspaceError::io(&ws, e))?;
    match std::fs::remove_dir_all(ws.join(".git")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(WorkspaceError::io(ws.join(".git"), e)),
    }
    let owner = expected_owner(settings.owner);
    let dirs: BTreeSet<&[u8]> = baseline
        .keys()
        .flat_map(|p| {
            p.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'/')
                .map(|(i, _)| &p[..i])
        })
        .collect();
    let mut candidates = Vec::with_capacity(baseline.len());
    // Directories the baseline does not hold (build outputs, dependencies)
    // move out whole and are removed in the background.
    let trash = building.with_file_name(format!("old-{}", crate::ids::random_hex(4)));
    let tree = Tree {
        baseline: &baseline,
        dirs: &dirs,
        owner,
        trash: &trash,
    };
    let cleaned = clean(&ws, &mut Vec::new(), &tree, &mut candidates);
    if trash.exists() {
        crate::sandbox::gc::remove_detached(&[&trash]);
    }
    cleaned?;
    let kept = verify(&ws, &store, &baseline, candidates, owner);

    let (mut files, allocated, facts) = record_kept(source_repo, &ws, hand_off, kept)?;
    let seeded = seed_git(&ws, building, hand_off, settings, started_ns, wanted_file)?;
    if !seeded {
        // Handed over before a stat cache could trust the files: the taking
        // run's baseline checkpoint takes what was read of them here.
        StatCache::from_entries(facts.0).save(&building.join(super::prepared::PRIMED))?;
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    super::prepared::write_meta(
        &building.join(super::prepared::META),
        &Meta {
            started_ns,
            allocated,
            baseline: Oid::ZERO_SHA1,
            settings: settings.key(),
            repo: source_repo.as_os_str().as_bytes().to_vec(),
            files,
            git_stale: true,
        },
    )
}

/// The kept paths recorded with the source's facts, trusted only where the
/// source did not change since the run's copy read it (any other kept path
/// is removed, to be copied again); with the bytes the kept files take, and
/// what was read of each kept file.
fn record_kept(
    source_repo: &Path,
    ws: &Path,
    hand_off: &HandOff,
    kept: Vec<Kept<'_>>,
) -> Result<(Vec<Recorded>, u64, BaselineFacts), WorkspaceError> {
    let source = open_source(source_repo)?;
    let workdir = workdir_of(&source, source_repo)?;
    drop(source);
    let trusted_before = hand_off.as_of_ns.saturating_sub(RACY_WINDOW_NS);
    let mut files = Vec::with_capacity(kept.len());
    let mut facts = HashMap::with_capacity(kept.len());
    let mut allocated = 0u64;
    for k in kept {
        let path = Path::new(OsStr::from_bytes(k.rel));
        let now = std::fs::symlink_metadata(workdir.join(path))
            .ok()
            .map(|m| super::prepared::key_of(&m));
        let unchanged =
            now.is_some_and(|k| k.mtime_ns < trusted_before && k.ctime_ns < trusted_before);
        let (Some(key), true) = (now, unchanged) else {
            remove_file(ws, path)?;
            continue;
        };
        if let Ok(m) = std::fs::symlink_metadata(ws.join(path)) {
            allocated = allocated.saturating_add(m.blocks().saturating_mul(512));
        }
        if let Some(read) = k.facts {
            facts.insert(k.rel.to_vec(), read);
        }
        files.push(Recorded {
            path: k.rel.to_vec(),
            mode: k.want.mode,
            size: k.size,
            target: k.target,
            source: key,
            blob: Some(k.want.id),
        });
    }
    Ok((files, allocated, BaselineFacts(facts)))
}

/// The baseline's objects for the taking run's `.git`, and the seed of its
/// checkpoint store, scanned so that a later scan trusts its stat cache;
/// `false` when a run is waiting and the scan was left out.
fn seed_git(
    ws: &Path,
    building: &Path,
    hand_off: &HandOff,
    settings: &PrepareSettings,
    started_ns: i64,
    wanted_file: Option<&Path>,
) -> Result<bool, WorkspaceError> {
    let objects = ws.join(".git").join("objects");
    let mut packs = Vec::new();
    let store_packs = hand_off.store.join("objects").join("pack");
    for entry in std::fs::read_dir(&store_packs).map_err(|e| WorkspaceError::io(&store_packs, e))? {
        let entry = entry.map_err(|e| WorkspaceError::io(&store_packs, e))?;
        let pack = entry.path();
        if pack.extension().is_some_and(|x| x == "pack") {
            let index = pack.with_extension("idx");
            packs.push(Pack { pack, index }.share_into(&objects)?);
        }
    }
    let mut seed = CheckpointStore::open(&building.join("store"), ws, ExcludeSet::default())?
        .with_secret_paths(settings.secrets.clone())
        .with_max_file_bytes(settings.max_file_bytes);
    seed.adopt_pack(&packs)?;
    // The stat cache a later scan trusts, unless a run is waiting.
    let until = started_ns + RACY_WINDOW_NS + 50_000_000;
    let waiting = || wanted_file.is_some_and(|w| w.exists());
    while now_ns() < until && !waiting() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if waiting() {
        return Ok(false);
    }
    seed.scan()?;
    Ok(true)
}

/// Every file and link of `tree` (read from `store`), by path.
fn baseline_paths(
    store: &Repository,
    tree: Oid,
) -> Result<BTreeMap<Vec<u8>, Wanted>, WorkspaceError> {
    let mut out = BTreeMap::new();
    let mut todo = vec![(Vec::new(), tree)];
    while let Some((prefix, id)) = todo.pop() {
        let tree = store
            .find_tree(id)
            .map_err(WorkspaceError::git("reading the baseline tree"))?;
        for entry in tree.iter() {
            let mut path = prefix.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(entry.name_bytes());
            let mode = u32::try_from(entry.filemode()).unwrap_or(0);
            match (entry.kind(), mode) {
                (Some(ObjectType::Tree), _) => todo.push((path, entry.id())),
                (Some(ObjectType::Blob), 0o100644 | 0o100755 | 0o120000) => {
                    out.insert(
                        path,
                        Wanted {
                            mode,
                            id: entry.id(),
                        },
                    );
                }
                _ => {
                    return Err(WorkspaceError::io(
                        Path::new(OsStr::from_bytes(&path)),
                        std::io::Error::other("a baseline entry a recycled copy cannot hold"),
                    ));
                }
            }
        }
    }
    Ok(out)
}

/// The owner a copied file has: the sandbox's user where files are given
/// to it, else this process's.
fn expected_owner(owner: Option<(u32, u32)>) -> (u32, u32) {
    match owner.filter(|_| rustix::process::geteuid().is_root()) {
        Some(o) => o,
        None => (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        ),
    }
}

/// What [`clean`] holds a workspace's entries against.
struct Tree<'a> {
    baseline: &'a BTreeMap<Vec<u8>, Wanted>,
    dirs: &'a BTreeSet<&'a [u8]>,
    owner: (u32, u32),
    /// Where directories that go are moved (made when first needed).
    trash: &'a Path,
}

/// Removes from the directory `rel` of `ws` whatever the baseline does not
/// hold there, gives the directories kept the copy's owner and bits, and
/// lists the files and links left to verify.
fn clean(
    ws: &Path,
    rel: &mut Vec<u8>,
    tree: &Tree<'_>,
    candidates: &mut Vec<Vec<u8>>,
) -> Result<(), WorkspaceError> {
    let dir = ws.join(OsStr::from_bytes(rel));
    for entry in std::fs::read_dir(&dir).map_err(|e| WorkspaceError::io(&dir, e))? {
        let entry = entry.map_err(|e| WorkspaceError::io(&dir, e))?;
        let kind = entry
            .file_type()
            .map_err(|e| WorkspaceError::io(entry.path(), e))?;
        let len = rel.len();
        if !rel.is_empty() {
            rel.push(b'/');
        }
        rel.extend_from_slice(entry.file_name().as_bytes());
        let path = entry.path();
        if kind.is_dir() && tree.dirs.contains(rel.as_slice()) {
            set_dir(&path, tree.owner)?;
            clean(ws, rel, tree, candidates)?;
        } else if kind.is_dir() {
            crate::state::private_dir(tree.trash).map_err(|e| WorkspaceError::io(tree.trash, e))?;
            let to = tree.trash.join(crate::ids::random_hex(8));
            std::fs::rename(&path, &to).map_err(|e| WorkspaceError::io(&path, e))?;
        } else {
            let fits = tree.baseline.get(rel.as_slice()).is_some_and(|w| {
                (w.mode == 0o120000 && kind.is_symlink()) || (w.mode != 0o120000 && kind.is_file())
            });
            if fits {
                candidates.push(rel.clone());
            } else {
                std::fs::remove_file(&path).map_err(|e| WorkspaceError::io(&path, e))?;
            }
        }
        rel.truncate(len);
    }
    Ok(())
}

fn set_dir(path: &Path, (uid, gid): (u32, u32)) -> Result<(), WorkspaceError> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .map_err(|e| WorkspaceError::io(path, e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| WorkspaceError::io(path, e))
}

/// A file or link the baseline holds, with what the store says of it.
struct Candidate {
    rel: Vec<u8>,
    want: Wanted,
    /// The blob's size, and a link's target; `None` when the store cannot
    /// say (the path is then copied again).
    facts: Option<(u64, Option<Vec<u8>>)>,
}

/// A path kept: it holds its baseline content.
struct Kept<'b> {
    rel: &'b [u8],
    want: Wanted,
    size: u64,
    target: Option<Vec<u8>>,
    /// For a file: its facts and hashes as read here.
    facts: Option<CachedHash>,
}

/// The candidates that hold their baseline content; the others are
/// removed. Read on two threads.
fn verify<'b>(
    ws: &Path,
    store: &Repository,
    baseline: &'b BTreeMap<Vec<u8>, Wanted>,
    candidates: Vec<Vec<u8>>,
    owner: (u32, u32),
) -> Vec<Kept<'b>> {
    // Sizes and link targets from the store, before any thread reads.
    let odb = store.odb().ok();
    let candidates: Vec<Candidate> = candidates
        .into_iter()
        .filter_map(|rel| {
            let want = *baseline.get(&rel)?;
            let size = odb
                .as_ref()
                .and_then(|o| o.read_header(want.id).ok())
                .map(|(n, _)| n as u64);
            let target = (want.mode == 0o120000)
                .then(|| store.find_blob(want.id).ok().map(|b| b.content().to_vec()))
                .flatten();
            Some(Candidate {
                rel,
                want,
                facts: size.map(|s| (s, target)),
            })
        })
        .collect();
    let check = |part: &[Candidate]| -> Vec<Option<Held>> {
        part.iter()
            .map(|c| {
                c.facts.as_ref().and_then(|(size, target)| {
                    let at = ws.join(OsStr::from_bytes(&c.rel));
                    holds(&at, c.want, *size, target.as_deref(), owner)
                })
            })
            .collect()
    };
    let (a, b) = candidates.split_at(candidates.len().div_ceil(2));
    let verdicts = std::thread::scope(|s| {
        let other = s.spawn(|| check(b));
        let mut first = check(a);
        first.extend(
            other
                .join()
                .unwrap_or_else(|_| (0..b.len()).map(|_| None).collect()),
        );
        first
    });
    let mut kept = Vec::with_capacity(candidates.len());
    for (c, held) in candidates.into_iter().zip(verdicts) {
        let (Some((rel, _)), Some(held), Some((size, target))) =
            (baseline.get_key_value(&c.rel), held, c.facts)
        else {
            let _ = remove_file(ws, Path::new(OsStr::from_bytes(&c.rel)));
            continue;
        };
        kept.push(Kept {
            rel: rel.as_slice(),
            want: c.want,
            size,
            target,
            facts: match held {
                Held::File(hash) => Some(hash),
                Held::Link => None,
            },
        });
    }
    kept
}

/// What [`holds`] found of a path that holds its baseline version.
enum Held {
    Link,
    /// A file: its facts and hashes as read (unchanged while it was read).
    File(CachedHash),
}

/// Whether the file or link at `path` is exactly its baseline version as a
/// copy writes it (`None`: it is not).
fn holds(
    path: &Path,
    want: Wanted,
    size: u64,
    target: Option<&[u8]>,
    owner: (u32, u32),
) -> Option<Held> {
    use rustix::fs::{Mode, OFlags};
    if want.mode == 0o120000 {
        let meta = std::fs::symlink_metadata(path).ok()?;
        let same = meta.file_type().is_symlink()
            && (meta.uid(), meta.gid()) == owner
            && std::fs::read_link(path).is_ok_and(|t| Some(t.as_os_str().as_bytes()) == target);
        return same.then_some(Held::Link);
    }
    if size > MAX_HASHED {
        return None;
    }
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let perm = if want.mode == 0o100755 { 0o755 } else { 0o644 };
    let regular =
        rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile;
    if !regular
        || st.st_nlink != 1
        || (st.st_uid, st.st_gid) != owner
        || st.st_mode & 0o7777 != perm
        || u64::try_from(st.st_size).ok() != Some(size)
    {
        return None;
    }
    let recorded_ns = now_ns();
    let mut file = Hashing::new(std::fs::File::from(fd), size);
    let blob = hash_blob(&mut file, size)
        .ok()
        .filter(|id| *id == want.id && file.left == 0)?;
    let key = stat_key(&st);
    // Read whole and unchanged meanwhile: these facts stand for these bytes.
    let after = rustix::fs::fstat(&file.inner).ok()?;
    if stat_key(&after) != key {
        return None;
    }
    Some(Held::File(CachedHash {
        key,
        sha256: file.sha.finalize().into(),
        blob: crate::workspace::scan::fingerprint::oid_bytes(blob),
        recorded_ns,
    }))
}

fn remove_file(ws: &Path, rel: &Path) -> Result<(), WorkspaceError> {
    let path = ws.join(rel);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WorkspaceError::io(&path, e)),
    }
}
