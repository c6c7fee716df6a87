//! The stat cache that makes fingerprints and checkpoints incremental.
//!
//! For each file it remembers the `lstat` facts seen when the file was last
//! hashed and the resulting content SHA-256 and Git blob id. A file whose facts
//! are unchanged is not read again, with one exception, the *racy* case (as in
//! Git's index): file times have a coarse granularity, so a file modified
//! within [`RACY_WINDOW_NS`] before its hash was recorded could be changed
//! again without its facts changing. Such an entry is never trusted; the file
//! is read again on every scan until it is old enough.
//!
//! The cache is only an accelerator. On disk it is a header followed by
//! records, each with its own checksum: loading keeps the records before
//! the first damaged one (a missing file loads as an empty cache). After a
//! scan only the entries hashed anew are appended, and only those that a
//! later scan may trust (racy ones never are); the file is rewritten from
//! memory when it has grown to twice the live entries or was damaged.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

use crate::workspace::WorkspaceError;

/// How close to the recording time a file time must be to count as racy.
/// Generous on purpose: it covers filesystems with one- or two-second
/// timestamps, and costs only a re-read of recently changed files.
pub(crate) const RACY_WINDOW_NS: i64 = 2_000_000_000;

const MAGIC: &[u8; 8] = b"MCSTAT2\n";
/// Payload bytes of a record before the path.
const FIXED: usize = 8 * 4 + 4 + 32 + 20 + 8;
const CHECK: usize = 8;
/// Superseded records tolerated in the file before it is rewritten.
const SLACK: usize = 1024;

/// The `lstat` facts that identify a version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatKey {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub mode: u32,
}

/// The hashes recorded for one version of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedHash {
    pub key: StatKey,
    pub sha256: [u8; 32],
    pub blob: [u8; 20],
    /// Wall-clock time (ns since the epoch) at which the scan that hashed
    /// the file started.
    pub recorded_ns: i64,
}

impl CachedHash {
    /// Whether this entry may stand for a file whose facts are `key`.
    pub(crate) fn is_valid_for(&self, key: &StatKey) -> bool {
        let limit = self.recorded_ns.saturating_sub(RACY_WINDOW_NS);
        self.key == *key && key.mtime_ns < limit && key.ctime_ns < limit
    }
}

/// Relative path (bytes, `/`-separated) → hashes of its last known version.
#[derive(Debug, Default, Clone)]
pub struct StatCache {
    entries: HashMap<Vec<u8>, CachedHash>,
    /// Trustworthy entries recorded since the file was last written.
    unsaved: Vec<(Vec<u8>, CachedHash)>,
    /// Records in the file, if it is known to be intact and in this format.
    records_on_disk: Option<usize>,
}

impl StatCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding `entries` as they are, racy ones included (for
    /// facts handed to one scan, see `Fingerprinter::prime_next_scan`).
    pub(crate) fn from_entries(entries: HashMap<Vec<u8>, CachedHash>) -> Self {
        Self {
            entries,
            ..Self::default()
        }
    }

    /// Its entries, racy ones included.
    pub(crate) fn into_entries(self) -> HashMap<Vec<u8>, CachedHash> {
        self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, path: &[u8]) -> Option<&CachedHash> {
        self.entries.get(path)
    }

    pub(crate) fn entries(&self) -> &HashMap<Vec<u8>, CachedHash> {
        &self.entries
    }

    #[cfg(test)]
    pub(crate) fn take_entries(&mut self) -> HashMap<Vec<u8>, CachedHash> {
        std::mem::take(&mut self.entries)
    }

    #[cfg(test)]
    pub(crate) fn set_entries(&mut self, entries: HashMap<Vec<u8>, CachedHash>) {
        self.entries = entries;
        self.records_on_disk = None;
    }

    /// Forgets every entry whose blob is in `blobs` (deleted from the store
    /// it vouched for).
    pub(crate) fn forget_blobs(&mut self, blobs: &std::collections::HashSet<git2::Oid>) {
        let before = self.entries.len();
        self.entries
            .retain(|_, e| git2::Oid::from_bytes(&e.blob).map_or(true, |id| !blobs.contains(&id)));
        if self.entries.len() != before {
            self.records_on_disk = None;
        }
    }

    /// Records the files hashed by a scan (`fresh`) and forgets every path
    /// not among the files it saw (`seen`).
    pub(crate) fn update<'p>(
        &mut self,
        fresh: Vec<(Vec<u8>, CachedHash)>,
        seen: impl Iterator<Item = &'p [u8]> + Clone,
    ) {
        for (path, hash) in fresh {
            if hash.is_valid_for(&hash.key) {
                self.unsaved.push((path.clone(), hash));
            }
            self.entries.insert(path, hash);
        }
        if self.entries.len() > seen.clone().count() {
            let seen: std::collections::HashSet<&[u8]> = seen.collect();
            self.entries
                .retain(|path, _| seen.contains(path.as_slice()));
        }
    }

    /// Records the files hashed by a partial scan (`fresh`) and forgets the
    /// paths it found gone (`gone`).
    pub(crate) fn update_some(&mut self, fresh: Vec<(Vec<u8>, CachedHash)>, gone: &[Vec<u8>]) {
        for path in gone {
            self.entries.remove(path);
        }
        for (path, hash) in fresh {
            if hash.is_valid_for(&hash.key) {
                self.unsaved.push((path.clone(), hash));
            }
            self.entries.insert(path, hash);
        }
    }

    /// Brings the cache file up to date: appends the unsaved entries, or
    /// rewrites the file when it holds too many superseded records, is
    /// damaged or missing.
    pub(crate) fn persist(&mut self, path: &Path) -> Result<(), WorkspaceError> {
        let limit = 2 * self.entries.len() + SLACK;
        match self.records_on_disk {
            Some(_) if self.unsaved.is_empty() => Ok(()),
            Some(n) if n + self.unsaved.len() <= limit => {
                let mut body = Vec::with_capacity(self.unsaved.len() * (FIXED + 64));
                for (p, e) in &self.unsaved {
                    encode(&mut body, p, e);
                }
                self.records_on_disk = None;
                let mut file = std::fs::OpenOptions::new()
                    .append(true)
                    .open(path)
                    .map_err(|e| WorkspaceError::io(path, e))?;
                file.write_all(&body)
                    .map_err(|e| WorkspaceError::io(path, e))?;
                self.records_on_disk = Some(n + self.unsaved.len());
                self.unsaved.clear();
                Ok(())
            }
            _ => {
                self.records_on_disk = None;
                self.save(path)?;
                self.records_on_disk = Some(self.entries.len());
                self.unsaved.clear();
                Ok(())
            }
        }
    }

    /// Loads a cache file; records after the first damaged one (and a file
    /// in another format) are ignored.
    pub(crate) fn load(path: &Path) -> Self {
        let (entries, records_on_disk) = std::fs::read(path)
            .ok()
            .map(|bytes| decode(&bytes))
            .unwrap_or_default();
        Self {
            entries,
            unsaved: Vec::new(),
            records_on_disk,
        }
    }

    /// Writes the whole cache atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), WorkspaceError> {
        let mut body = Vec::with_capacity(16 + self.entries.len() * (FIXED + 64));
        body.extend_from_slice(MAGIC);
        for (p, e) in &self.entries {
            encode(&mut body, p, e);
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let mut tmp =
            tempfile::NamedTempFile::new_in(dir).map_err(|e| WorkspaceError::io(dir, e))?;
        tmp.write_all(&body)
            .map_err(|e| WorkspaceError::io(path, e))?;
        tmp.persist(path)
            .map_err(|e| WorkspaceError::io(path, e.error))?;
        Ok(())
    }
}

/// Appends one record: payload length (u32), payload, and the first
/// [`CHECK`] bytes of the payload's SHA-256.
fn encode(body: &mut Vec<u8>, path: &[u8], e: &CachedHash) {
    let start = body.len() + 4;
    body.extend_from_slice(
        &u32::try_from(FIXED + path.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    body.extend_from_slice(&e.key.size.to_le_bytes());
    body.extend_from_slice(&e.key.mtime_ns.to_le_bytes());
    body.extend_from_slice(&e.key.ctime_ns.to_le_bytes());
    body.extend_from_slice(&e.key.ino.to_le_bytes());
    body.extend_from_slice(&e.key.mode.to_le_bytes());
    body.extend_from_slice(&e.sha256);
    body.extend_from_slice(&e.blob);
    body.extend_from_slice(&e.recorded_ns.to_le_bytes());
    body.extend_from_slice(path);
    let sum = Sha256::digest(&body[start..]);
    body.extend_from_slice(&sum[..CHECK]);
}

/// The entries of a cache file, and its record count if it is intact.
fn decode(bytes: &[u8]) -> (HashMap<Vec<u8>, CachedHash>, Option<usize>) {
    let mut entries = HashMap::new();
    let mut r = Reader(bytes);
    if r.take(MAGIC.len()) != Some(MAGIC.as_slice()) {
        return (entries, None);
    }
    let mut records = 0;
    while !r.0.is_empty() {
        let Some((path, entry)) = record(&mut r) else {
            return (entries, None);
        };
        entries.insert(path, entry);
        records += 1;
    }
    (entries, Some(records))
}

fn record(r: &mut Reader<'_>) -> Option<(Vec<u8>, CachedHash)> {
    let len = usize::try_from(u32::from_le_bytes(r.array()?)).ok()?;
    let payload = r.take(len)?;
    let check = r.take(CHECK)?;
    if len < FIXED || Sha256::digest(payload)[..CHECK] != *check {
        return None;
    }
    let mut p = Reader(payload);
    let key = StatKey {
        size: p.u64()?,
        mtime_ns: p.i64()?,
        ctime_ns: p.i64()?,
        ino: p.u64()?,
        mode: u32::from_le_bytes(p.array()?),
    };
    let entry = CachedHash {
        key,
        sha256: p.array()?,
        blob: p.array()?,
        recorded_ns: p.i64()?,
    };
    Some((p.0.to_vec(), entry))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.array()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.array()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(mtime_ns: i64, recorded_ns: i64) -> CachedHash {
        CachedHash {
            key: StatKey {
                size: 3,
                mtime_ns,
                ctime_ns: mtime_ns,
                ino: 7,
                mode: 0o100644,
            },
            sha256: [1; 32],
            blob: [2; 20],
            recorded_ns,
        }
    }

    #[test]
    fn racy_entries_are_not_trusted() {
        let old = entry(1_000, 10 * RACY_WINDOW_NS);
        assert!(old.is_valid_for(&old.key));
        let racy = entry(10 * RACY_WINDOW_NS - 5, 10 * RACY_WINDOW_NS);
        assert!(!racy.is_valid_for(&racy.key));
        let mut other = old.key;
        other.size += 1;
        assert!(!old.is_valid_for(&other));
    }

    #[test]
    fn persist_appends_trusted_entries_and_rewrites_damaged_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("cache");
        let len = |f: &Path| std::fs::metadata(f).expect("stat").len();
        let old = 10 * RACY_WINDOW_NS;
        let both = [b"a".as_slice(), b"b".as_slice()];
        let mut cache = StatCache::new();
        let fresh = vec![
            (b"a".to_vec(), entry(1_000, old)),
            (b"b".to_vec(), entry(2_000, old)),
        ];
        cache.update(fresh, both.into_iter());
        cache.persist(&file).expect("first write");
        let full = len(&file);

        // A trusted re-hash is appended as one record; a racy one is not.
        let mut changed = entry(3_000, old);
        changed.sha256 = [9; 32];
        let racy = entry(old - 1, old);
        cache.update(
            vec![(b"a".to_vec(), changed), (b"b".to_vec(), racy)],
            both.into_iter(),
        );
        cache.persist(&file).expect("append");
        assert_eq!(len(&file), full + (4 + FIXED + 1 + CHECK) as u64);
        let loaded = StatCache::load(&file);
        assert_eq!(loaded.get(b"a"), Some(&changed));
        assert_eq!(loaded.get(b"b"), Some(&entry(2_000, old)));
        cache.persist(&file).expect("nothing new");
        assert_eq!(len(&file), full + (4 + FIXED + 1 + CHECK) as u64);

        // A torn append loses only itself, and the next persist rewrites.
        let mut bytes = std::fs::read(&file).expect("read");
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&file, &bytes).expect("write");
        let mut torn = StatCache::load(&file);
        assert_eq!(torn.get(b"a"), Some(&entry(1_000, old)));
        assert_eq!(torn.len(), 2);
        torn.persist(&file).expect("rewrite");
        assert_eq!(len(&file), full);

        // Paths no longer seen are forgotten.
        cache.update(Vec::new(), [b"a".as_slice()].into_iter());
        assert_eq!(cache.len(), 1);
        assert!(cache.get(b"b").is_none());
    }

    #[test]
    fn save_load_round_trip_and_corruption() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("cache");
        let mut cache = StatCache::new();
        let mut map = HashMap::new();
        map.insert(b"a/b\nc".to_vec(), entry(5, 99));
        map.insert(b"x".to_vec(), entry(6, 100));
        cache.set_entries(map);
        cache.save(&file).expect("save");
        let loaded = StatCache::load(&file);
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded.get(b"a/b\nc"), Some(&entry(5, 99)));
        let mut bytes = std::fs::read(&file).expect("read");
        bytes[20] ^= 1;
        std::fs::write(&file, &bytes).expect("write");
        assert!(StatCache::load(&file).is_empty());
        assert!(StatCache::load(&dir.path().join("missing")).is_empty());
    }
}
