//! Workspace fingerprints.
//!
//! A [`Fingerprint`] is the SHA-256 of the sorted list of the workspace's
//! files and symlinks, each as (relative path, kind, mode, content SHA-256 or
//! link target). `.git` (at any depth, whatever its kind) and the directories
//! named in an [`ExcludeSet`] are left out. Directories themselves are not
//! entries (an empty directory does not change the fingerprint, as in Git),
//! and neither are fifos, sockets and devices, which are never opened.
//!
//! Modes are Git's: `0o100644`, `0o100755` (any execute bit set) or
//! `0o120000` (symlink), so a fingerprint survives a round trip through a
//! checkpoint.
//!
//! # Byte encoding (version 1)
//!
//! The digest input is `b"minicoder-fingerprint-v1\0"` followed, for each
//! entry in ascending byte order of its path, by:
//!
//! | field | encoding |
//! | --- | --- |
//! | path length | u64, little endian |
//! | path | bytes, `/`-separated, relative to the workspace |
//! | kind | one byte: 1 file, 2 symlink, 3 file over the size limit |
//! | mode | u32, little endian |
//! | payload length | u64, little endian |
//! | payload | 32-byte content SHA-256 (file), link target bytes (symlink), or size (u64) and mtime in ns (i64), both little endian (file over the limit) |
//!
//! Every variable-length field is length-prefixed, so no choice of names
//! (newlines, NULs in targets) can make two different lists collide.
//!
//! Scans are incremental through a [`StatCache`]; see that module for the
//! racy-file rule.
//!
//! Files are read in fixed-size chunks, never whole. A file larger than the
//! per-file limit ([`DEFAULT_MAX_FILE_BYTES`] unless set) is not read at
//! all: it stands in the fingerprint by its size and modification time
//! ([`EntryDigest::Oversize`]), and checkpoints leave it out.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid};
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use sha2::{Digest, Sha256};

use super::ignored::ExcludeSet;
use super::stat_cache::{CachedHash, StatCache, StatKey};
use super::walk::{
    Found, OnDir, ScanCounts, Start, io_error, open_dir_below, open_dir_beneath, stat_key,
    walk_from,
};
use crate::workspace::{EntryKind, WorkspaceError, verify_component};

/// Files larger than this are fingerprinted by size and modification time
/// only, and left out of checkpoints (`max_file_bytes` in `.minicoder.json`).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 100 << 20;
/// The read size of hashing and storing.
pub(crate) const CHUNK: usize = 256 << 10;

pub(crate) const MODE_FILE: u32 = 0o100644;
pub(crate) const MODE_EXEC: u32 = 0o100755;
pub(crate) const MODE_LINK: u32 = 0o120000;

/// The SHA-256 fingerprint of a workspace; displays as lowercase hex.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(self.0))
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = hex::FromHexError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0; 32];
        hex::decode_to_slice(s, &mut out)?;
        Ok(Self(out))
    }
}

/// What an entry holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryDigest {
    /// SHA-256 of a file's bytes.
    Content([u8; 32]),
    /// A symlink's target, as stored.
    LinkTarget(PathBuf),
    /// A file over the per-file limit: never read, known by its size and
    /// modification time; its blob id is zero and no checkpoint holds it.
    Oversize { size: u64, mtime_ns: i64 },
}

/// One file or symlink of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintEntry {
    /// Relative to the workspace, `/`-separated.
    pub path: PathBuf,
    /// [`EntryKind::File`] or [`EntryKind::Symlink`].
    pub kind: EntryKind,
    /// Git mode: `0o100644`, `0o100755` or `0o120000`.
    pub mode: u32,
    pub digest: EntryDigest,
    /// Git blob id of the content or link target (zero for
    /// [`EntryDigest::Oversize`]).
    pub blob: Oid,
}

impl FingerprintEntry {
    /// Whether the file is over the per-file limit (never read or stored).
    pub(crate) fn is_oversize(&self) -> bool {
        matches!(self.digest, EntryDigest::Oversize { .. })
    }
}

/// The result of one scan.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub fingerprint: Fingerprint,
    /// Sorted by path bytes.
    pub entries: Vec<FingerprintEntry>,
    /// How many files were read because the cache could not vouch for them.
    pub rehashed: usize,
}

/// Gives the blob id of `size` bytes read from a reader (and may store
/// them somewhere).
pub(crate) type BlobSink<'a> = dyn FnMut(&mut dyn Read, u64) -> Result<Oid, WorkspaceError> + 'a;

/// The Git blob id of `size` bytes from `reader`, hashed in chunks.
pub(crate) fn hash_blob(reader: &mut dyn Read, size: u64) -> Result<Oid, WorkspaceError> {
    use sha1::Digest as _;
    let mut h = sha1::Sha1::new();
    h.update(format!("blob {size}\0").as_bytes());
    std::io::copy(reader, &mut h).map_err(|e| WorkspaceError::io(Path::new("."), e))?;
    Oid::from_bytes(&h.finalize()).map_err(WorkspaceError::git("hashing a blob"))
}

/// Stores `size` bytes from `reader` as a blob of `odb`, streamed in chunks.
pub(crate) fn store_blob(
    odb: &git2::Odb<'_>,
    reader: &mut dyn Read,
    size: u64,
) -> Result<Oid, WorkspaceError> {
    let len = usize::try_from(size).map_err(|_| {
        WorkspaceError::io(
            Path::new("."),
            std::io::Error::other("a file too large for this platform"),
        )
    })?;
    let mut w = odb
        .writer(len, ObjectType::Blob)
        .map_err(WorkspaceError::git("storing a blob"))?;
    let mut buf = vec![0; CHUNK];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(WorkspaceError::io(Path::new("."), e)),
        };
        w.write_all(&buf[..n])
            .map_err(|e| WorkspaceError::io(Path::new("."), e))?;
    }
    w.finalize().map_err(WorkspaceError::git("storing a blob"))
}

/// Blobs up to this size are hashed before they are stored, and not stored
/// when the database holds them already; larger ones are streamed in.
const HASH_FIRST: u64 = 4 << 20;

/// [`store_blob`], except that a blob `odb` already holds is only hashed: a
/// file read again because the stat cache could not vouch for it (a racy
/// entry, a new checkpoint store on adopted objects) costs no write.
pub(crate) fn store_new_blob(
    odb: &git2::Odb<'_>,
    reader: &mut dyn Read,
    size: u64,
) -> Result<Oid, WorkspaceError> {
    if size > HASH_FIRST {
        return store_blob(odb, reader, size);
    }
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    reader
        .take(size)
        .read_to_end(&mut data)
        .map_err(|e| WorkspaceError::io(Path::new("."), e))?;
    if data.len() as u64 != size {
        return Err(WorkspaceError::io(
            Path::new("."),
            std::io::Error::other("the file shrank while it was read"),
        ));
    }
    let id = hash_blob(&mut data.as_slice(), size)?;
    if odb.exists(id) {
        return Ok(id);
    }
    odb.write(ObjectType::Blob, &data)
        .map_err(WorkspaceError::git("storing a blob"))
}

/// Passes on exactly `size` bytes of `inner`, hashing them with SHA-256 on
/// the way; a file that ends early is an error.
/// A reader of exactly `left` bytes of `inner` that hashes them with
/// SHA-256 as they pass (a file that shrinks meanwhile is an error; one
/// that grows is read no further).
pub(in crate::workspace) struct Hashing<R> {
    pub(in crate::workspace) inner: R,
    pub(in crate::workspace) left: u64,
    pub(in crate::workspace) sha: Sha256,
}

impl<R> Hashing<R> {
    pub(in crate::workspace) fn new(inner: R, size: u64) -> Self {
        Self {
            inner,
            left: size,
            sha: Sha256::new(),
        }
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(std::io::Error::other("the file shrank while it was read"));
        }
        self.sha.update(&buf[..n]);
        self.left -= n as u64;
        Ok(n)
    }
}

/// Scans a workspace repeatedly, re-reading only files that changed.
#[derive(Debug)]
pub struct Fingerprinter {
    workspace: PathBuf,
    excludes: ExcludeSet,
    cache: StatCache,
    cache_file: Option<PathBuf>,
    max_file_bytes: u64,
    counts: ScanCounts,
    /// Facts the next scan takes as known without the racy rule (see
    /// [`Self::prime_next_scan`]).
    primed: std::collections::HashMap<Vec<u8>, CachedHash>,
}

/// The recording time of a primed entry while the walk consults it: valid
/// for any facts equal to its own.
const PRIMED: i64 = i64::MAX;

/// What one scan found beside its snapshot.
#[derive(Debug, Default)]
pub(crate) struct ScanFacts {
    /// Files with more than one name: a write through another name is
    /// not seen as a change of theirs.
    pub linked: Vec<Vec<u8>>,
    /// For a partial scan: the paths examined, each with a `/` appended,
    /// sorted, none below another.
    pub roots: Vec<Vec<u8>>,
}

/// The entries of the files [`Fingerprinter::digest_found`] examined.
struct Digested {
    entries: Vec<FingerprintEntry>,
    fresh: Vec<(Vec<u8>, CachedHash)>,
    rehashed: usize,
    linked: Vec<Vec<u8>>,
}

impl Fingerprinter {
    /// A fingerprinter whose cache lives in memory only.
    pub fn new(workspace: impl Into<PathBuf>, excludes: ExcludeSet) -> Self {
        Self {
            workspace: workspace.into(),
            excludes,
            cache: StatCache::new(),
            cache_file: None,
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            counts: ScanCounts::default(),
            primed: Default::default(),
        }
    }

    /// Content hashes and blob ids the next scan, and only that one, takes
    /// for each file whose `lstat` facts are still exactly those given,
    /// without reading it, however recent it is: what the workspace copy
    /// recorded of the files it had just written, when nothing can have run
    /// in the workspace since. The scan records them in the cache with
    /// their own recording time (when the facts were taken), so every later
    /// scan applies the racy rule to them. The blobs must be in the store
    /// the sink writes to.
    pub(crate) fn prime_next_scan(
        &mut self,
        facts: std::collections::HashMap<Vec<u8>, CachedHash>,
    ) {
        self.primed = facts;
    }

    /// The directory names left out.
    pub(crate) fn excludes(&self) -> &ExcludeSet {
        &self.excludes
    }

    /// `lstat`s, directories read and files read by this fingerprinter's
    /// scans so far.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        self.counts.get()
    }

    /// Files larger than `bytes` are fingerprinted by size and mtime only.
    #[cfg(test)]
    pub(crate) fn with_max_file_bytes(mut self, bytes: u64) -> Self {
        self.set_max_file_bytes(bytes);
        self
    }

    /// Changes the per-file limit. Cached hashes stay valid: the cache
    /// never holds a file over the limit in force when it was scanned, and
    /// a lower limit is applied to every file the cache vouches for.
    /// Scans from now on leave out what `excludes` does; the stat cache
    /// stays valid (it is keyed by path).
    pub fn set_excludes(&mut self, excludes: ExcludeSet) {
        self.excludes = excludes;
    }

    pub(crate) fn set_max_file_bytes(&mut self, bytes: u64) {
        self.max_file_bytes = bytes;
    }

    pub(crate) fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// Forgets cached hashes whose blobs were deleted from the store.
    pub(crate) fn forget_blobs(&mut self, blobs: &std::collections::HashSet<Oid>) {
        self.cache.forget_blobs(blobs);
    }

    /// Loads the cache from `file` (which must be outside the workspace) and
    /// brings it up to date there after every scan (see [`StatCache`]).
    pub fn with_cache_file(mut self, file: impl Into<PathBuf>) -> Result<Self, WorkspaceError> {
        let file = file.into();
        let inside = match (
            std::path::absolute(&file),
            std::path::absolute(&self.workspace),
        ) {
            (Ok(f), Ok(w)) => f.starts_with(w),
            _ => false,
        };
        if inside {
            return Err(WorkspaceError::CacheInsideWorkspace { path: file });
        }
        self.cache = StatCache::load(&file);
        self.cache_file = Some(file);
        Ok(self)
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    pub fn cache(&self) -> &StatCache {
        &self.cache
    }

    /// Fingerprints the workspace now.
    pub fn scan(&mut self) -> Result<Snapshot, WorkspaceError> {
        self.scan_with(&mut hash_blob)
    }

    /// Like [`Self::scan`], with blob ids of re-read files from `sink`. Blob
    /// ids of unchanged files come from the cache, so a sink that stores
    /// blobs must own the cache (one `Fingerprinter` per object store).
    pub(crate) fn scan_with(
        &mut self,
        sink: &mut BlobSink<'_>,
    ) -> Result<Snapshot, WorkspaceError> {
        Ok(self.scan_hooked(sink, None)?.0)
    }

    fn open_root(&self) -> Result<OwnedFd, WorkspaceError> {
        rustix::fs::open(
            &self.workspace,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WorkspaceError::io(&self.workspace, e))
    }

    /// [`Self::scan_with`], calling `on_dir` with every directory read.
    pub(crate) fn scan_hooked(
        &mut self,
        sink: &mut BlobSink<'_>,
        on_dir: Option<&OnDir<'_>>,
    ) -> Result<(Snapshot, ScanFacts), WorkspaceError> {
        let started_ns = now_ns();
        let root = self.open_root()?;
        let primed = std::mem::take(&mut self.primed);
        let merged;
        let vouched = if primed.is_empty() {
            self.cache.entries()
        } else {
            let mut all = self.cache.entries().clone();
            all.extend(primed.iter().map(|(path, hash)| {
                let hash = CachedHash {
                    recorded_ns: PRIMED,
                    ..*hash
                };
                (path.clone(), hash)
            }));
            merged = all;
            &merged
        };
        let found = walk_from(
            &root,
            &self.workspace,
            &self.excludes,
            vouched,
            vec![Start::root()],
            on_dir,
            &self.counts,
        )?;
        let done = self.digest_found(&root, found, sink, started_ns, &primed)?;
        let files = done.entries.iter().filter(|e| e.kind == EntryKind::File);
        self.cache
            .update(done.fresh, files.map(|e| e.path.as_os_str().as_bytes()));
        if let Some(file) = &self.cache_file {
            self.cache.persist(file)?;
        }
        Ok((
            Snapshot {
                fingerprint: digest(&done.entries),
                entries: done.entries,
                rehashed: done.rehashed,
            },
            ScanFacts {
                linked: done.linked,
                roots: Vec::new(),
            },
        ))
    }

    /// The snapshot a full scan would give now, from `old` (the entries of
    /// an earlier snapshot) and the paths that may have changed since:
    /// only those paths (and, for directories, everything below them) are
    /// examined again. A path is relative, `/`-separated.
    pub(crate) fn rescan(
        &mut self,
        sink: &mut BlobSink<'_>,
        old: Vec<FingerprintEntry>,
        dirty: impl IntoIterator<Item = Vec<u8>>,
        on_dir: Option<&OnDir<'_>>,
    ) -> Result<(Snapshot, ScanFacts), WorkspaceError> {
        let started_ns = now_ns();
        let root = self.open_root()?;
        // Each path with a `/` appended, sorted; a path below another is
        // covered by it and dropped.
        let mut keys: Vec<Vec<u8>> = dirty
            .into_iter()
            .filter(|p| is_relative_path(p))
            .map(|mut p| {
                p.push(b'/');
                p
            })
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let mut roots: Vec<Vec<u8>> = Vec::with_capacity(keys.len());
        for key in keys {
            if roots.last().is_some_and(|r| key.starts_with(r)) {
                continue;
            }
            roots.push(key);
        }
        let mut found = Vec::new();
        let mut starts = Vec::new();
        for key in &roots {
            self.resolve(&root, &key[..key.len() - 1], &mut found, &mut starts)?;
        }
        found.extend(walk_from(
            &root,
            &self.workspace,
            &self.excludes,
            self.cache.entries(),
            starts,
            on_dir,
            &self.counts,
        )?);
        let done = self.digest_found(&root, found, sink, started_ns, &Default::default())?;

        // Whether `path` is one of the roots or below one. The roots are
        // sorted and none is a prefix of another, so the only candidate is
        // the greatest root not after `path/`.
        let covered = |path: &[u8]| {
            let with_slash = || path.iter().chain(std::iter::once(&b'/'));
            let i = roots.partition_point(|r| r.iter().cmp(with_slash()).is_le());
            i > 0
                && with_slash()
                    .take(roots[i - 1].len())
                    .eq(roots[i - 1].iter())
        };
        let new_files: HashSet<&[u8]> = done
            .entries
            .iter()
            .filter(|e| e.kind == EntryKind::File)
            .map(|e| e.path.as_os_str().as_bytes())
            .collect();
        let mut gone = Vec::new();
        let mut merged = Vec::with_capacity(old.len() + done.entries.len());
        let mut fresh_entries = done.entries.iter().peekable();
        for e in old {
            let path = e.path.as_os_str().as_bytes();
            if covered(path) {
                if e.kind == EntryKind::File && !new_files.contains(path) {
                    gone.push(path.to_vec());
                }
                continue;
            }
            while let Some(n) = fresh_entries.next_if(|n| n.path.as_os_str().as_bytes() < path) {
                merged.push(n.clone());
            }
            merged.push(e);
        }
        merged.extend(fresh_entries.cloned());
        drop(new_files);
        self.cache.update_some(done.fresh, &gone);
        if let Some(file) = &self.cache_file {
            self.cache.persist(file)?;
        }
        Ok((
            Snapshot {
                fingerprint: digest(&merged),
                entries: merged,
                rehashed: done.rehashed,
            },
            ScanFacts {
                linked: done.linked,
                roots,
            },
        ))
    }

    /// Examines the one path `rel` as a full scan would: a file or symlink
    /// is added to `found`, a directory to `starts`; anything a scan would
    /// not reach (gone, below a symlink, excluded, refused by git) adds
    /// nothing.
    fn resolve(
        &self,
        root: &OwnedFd,
        rel: &[u8],
        found: &mut Vec<Found>,
        starts: &mut Vec<Start>,
    ) -> Result<(), WorkspaceError> {
        let name_start = rel.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1);
        let dir = &rel[..name_start.saturating_sub(1)];
        let name = &rel[name_start..];
        let reachable = |c: &[u8]| {
            c != b".git"
                && verify_component(c, false)
                && !self.excludes.excludes_dir(OsStr::from_bytes(c))
        };
        if name == b".git"
            || !dir
                .split(|&b| b == b'/')
                .filter(|c| !c.is_empty())
                .all(reachable)
        {
            return Ok(());
        }
        let absent = |e: rustix::io::Errno| {
            matches!(
                e,
                rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP
            )
        };
        let parent = match open_dir_below(root.as_fd(), dir) {
            Ok(fd) => fd,
            Err(e) if absent(e) => return Ok(()),
            Err(e) => return Err(io_error(&self.workspace, dir, e)),
        };
        self.counts.stat();
        let st =
            match rustix::fs::statat(&parent, OsStr::from_bytes(name), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(e) if absent(e) => return Ok(()),
                Err(e) => return Err(io_error(&self.workspace, rel, e)),
            };
        let file_type = FileType::from_raw_mode(st.st_mode);
        if self.excludes.ignores(rel, file_type == FileType::Directory) {
            return Ok(());
        }
        match file_type {
            FileType::RegularFile if verify_component(name, false) => {
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
            }
            FileType::Symlink if verify_component(name, true) => {
                let target = rustix::fs::readlinkat(&parent, OsStr::from_bytes(name), Vec::new())
                    .map_err(|e| io_error(&self.workspace, rel, e))?;
                found.push(Found::Symlink {
                    rel: rel.to_vec(),
                    target: target.into_bytes(),
                });
            }
            FileType::Directory if reachable(name) => {
                starts.push(Start::below(parent, rel, name_start));
            }
            _ => {}
        }
        Ok(())
    }

    /// Reads what the cache could not vouch for among `found`, giving the
    /// entries sorted by path.
    fn digest_found(
        &self,
        root: &OwnedFd,
        found: Vec<Found>,
        sink: &mut BlobSink<'_>,
        started_ns: i64,
        primed: &std::collections::HashMap<Vec<u8>, CachedHash>,
    ) -> Result<Digested, WorkspaceError> {
        let mut reader = Reader {
            root,
            workspace: &self.workspace,
            open: None,
        };
        let mut entries = Vec::with_capacity(found.len());
        let mut fresh = Vec::new();
        let mut rehashed = 0;
        let mut linked = Vec::new();
        for item in found {
            match item {
                Found::File {
                    rel,
                    name_start,
                    cached,
                    linked: many,
                } => {
                    if many {
                        linked.push(rel.clone());
                    }
                    let limit = self.max_file_bytes;
                    let hash = match cached.filter(|h| h.key.size <= limit) {
                        // Vouched for by the primed facts (they stand
                        // before the cache's): recorded as when they were
                        // taken, so later scans judge the file racy from then.
                        Some(hash) if primed.contains_key(&rel) => {
                            let recorded_ns = primed
                                .get(&rel)
                                .map_or(started_ns, |h| h.recorded_ns.min(started_ns));
                            let hash = CachedHash {
                                recorded_ns,
                                ..hash
                            };
                            fresh.push((rel.clone(), hash));
                            hash
                        }
                        Some(hash) => hash,
                        None => {
                            let (key, file) = reader.open(&rel, name_start)?;
                            if key.size > self.max_file_bytes {
                                entries.push(FingerprintEntry {
                                    path: PathBuf::from(OsString::from_vec(rel)),
                                    kind: EntryKind::File,
                                    mode: git_mode(key.mode),
                                    digest: EntryDigest::Oversize {
                                        size: key.size,
                                        mtime_ns: key.mtime_ns,
                                    },
                                    blob: Oid::ZERO_SHA1,
                                });
                                continue;
                            }
                            rehashed += 1;
                            self.counts.read();
                            let mut hashing = Hashing::new(
                                std::io::BufReader::with_capacity(CHUNK, file),
                                key.size,
                            );
                            let blob = sink(&mut hashing, key.size)
                                .map_err(|e| e.at(self.workspace.join(OsStr::from_bytes(&rel))))?;
                            if hashing.left != 0 {
                                return Err(io_error(
                                    &self.workspace,
                                    &rel,
                                    std::io::Error::other("the file shrank while it was read"),
                                ));
                            }
                            let hash = CachedHash {
                                key,
                                sha256: hashing.sha.finalize().into(),
                                blob: oid_bytes(blob),
                                recorded_ns: started_ns,
                            };
                            fresh.push((rel.clone(), hash));
                            hash
                        }
                    };
                    entries.push(FingerprintEntry {
                        path: PathBuf::from(OsString::from_vec(rel)),
                        kind: EntryKind::File,
                        mode: git_mode(hash.key.mode),
                        digest: EntryDigest::Content(hash.sha256),
                        blob: Oid::from_bytes(&hash.blob)
                            .map_err(WorkspaceError::git("reading a cached blob id"))?,
                    });
                }
                Found::Symlink { rel, target } => {
                    let blob = sink(&mut target.as_slice(), target.len() as u64)?;
                    entries.push(FingerprintEntry {
                        path: PathBuf::from(OsString::from_vec(rel)),
                        kind: EntryKind::Symlink,
                        mode: MODE_LINK,
                        digest: EntryDigest::LinkTarget(PathBuf::from(OsString::from_vec(target))),
                        blob,
                    });
                }
            }
        }
        entries.sort_unstable_by(|a, b| {
            a.path
                .as_os_str()
                .as_bytes()
                .cmp(b.path.as_os_str().as_bytes())
        });
        Ok(Digested {
            entries,
            fresh,
            rehashed,
            linked,
        })
    }
}

/// Whether `p` is a relative path of non-empty components, none `.` or `..`.
fn is_relative_path(p: &[u8]) -> bool {
    !p.is_empty()
        && p.split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

/// Fingerprints `workspace` from scratch, without any cache.
pub fn fingerprint(workspace: &Path, excludes: &ExcludeSet) -> Result<Snapshot, WorkspaceError> {
    Fingerprinter::new(workspace, excludes.clone()).scan()
}

/// The digest of a sorted entry list, in the documented encoding.
pub fn digest(entries: &[FingerprintEntry]) -> Fingerprint {
    let mut h = Sha256::new();
    h.update(b"minicoder-fingerprint-v1\0");
    for e in entries {
        let path = e.path.as_os_str().as_bytes();
        h.update((path.len() as u64).to_le_bytes());
        h.update(path);
        let kind = match (&e.digest, e.kind) {
            (EntryDigest::Oversize { .. }, _) => 3,
            (_, EntryKind::Symlink) => 2,
            _ => 1,
        };
        h.update([kind]);
        h.update(e.mode.to_le_bytes());
        let facts;
        let payload: &[u8] = match &e.digest {
            EntryDigest::Content(sum) => sum,
            EntryDigest::LinkTarget(t) => t.as_os_str().as_bytes(),
            EntryDigest::Oversize { size, mtime_ns } => {
                let mut b = [0; 16];
                b[..8].copy_from_slice(&size.to_le_bytes());
                b[8..].copy_from_slice(&mtime_ns.to_le_bytes());
                facts = b;
                &facts
            }
        };
        h.update((payload.len() as u64).to_le_bytes());
        h.update(payload);
    }
    Fingerprint(h.finalize().into())
}

/// Reads the files the cache could not vouch for, reopening their
/// directories from the root without following symlinks.
struct Reader<'a> {
    root: &'a OwnedFd,
    workspace: &'a Path,
    /// The directory opened last, by relative path (files of one directory
    /// usually come together).
    open: Option<(Vec<u8>, OwnedFd)>,
}

impl Reader<'_> {
    /// Opens a regular file without following a symlink or blocking on a
    /// fifo swapped in since it was examined; the facts returned are those
    /// of the file actually opened.
    fn open(
        &mut self,
        rel: &[u8],
        name_start: usize,
    ) -> Result<(StatKey, std::fs::File), WorkspaceError> {
        let (dir, name) = rel.split_at(name_start);
        let reuse = matches!(&self.open, Some((path, _)) if path.as_slice() == dir);
        if !reuse {
            let fd = open_dir_beneath(self.root.as_fd(), dir, self.workspace)?;
            self.open = Some((dir.to_vec(), fd));
        }
        let Some((_, dir_fd)) = &self.open else {
            return Err(io_error(
                self.workspace,
                rel,
                std::io::Error::other("directory not open"),
            ));
        };
        let fd = rustix::fs::openat(
            dir_fd.as_fd(),
            OsStr::from_bytes(name),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io_error(self.workspace, rel, e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| io_error(self.workspace, rel, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(io_error(
                self.workspace,
                rel,
                std::io::Error::other("changed into a non-regular file during the scan"),
            ));
        }
        Ok((stat_key(&st), std::fs::File::from(fd)))
    }
}

/// Git's mode for a regular file with `st_mode`.
fn git_mode(st_mode: u32) -> u32 {
    if st_mode & 0o111 != 0 {
        MODE_EXEC
    } else {
        MODE_FILE
    }
}

pub(in crate::workspace) fn oid_bytes(oid: Oid) -> [u8; 20] {
    let mut out = [0; 20];
    let b = oid.as_bytes();
    let n = b.len().min(20);
    out[..n].copy_from_slice(&b[..n]);
    out
}

/// Now, in nanoseconds since the epoch (0 before it).
pub(in crate::workspace) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[cfg(test)]
#[path = "fingerprint_tests.rs"]
pub(crate) mod tests;
