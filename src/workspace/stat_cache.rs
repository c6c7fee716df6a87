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
//! The cache is only an accelerator: a missing, truncated or corrupt cache
//! file loads as an empty cache, and every entry carries its own checksum.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::WorkspaceError;

/// How close to the recording time a file time must be to count as racy.
/// Generous on purpose: it covers filesystems with one- or two-second
/// timestamps, and costs only a re-read of recently changed files.
pub const RACY_WINDOW_NS: i64 = 2_000_000_000;

const MAGIC: &[u8; 8] = b"MCSTAT1\n";

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
    pub fn is_valid_for(&self, key: &StatKey) -> bool {
        let limit = self.recorded_ns.saturating_sub(RACY_WINDOW_NS);
        self.key == *key && key.mtime_ns < limit && key.ctime_ns < limit
    }
}

/// Relative path (bytes, `/`-separated) → hashes of its last known version.
#[derive(Debug, Default, Clone)]
pub struct StatCache {
    entries: HashMap<Vec<u8>, CachedHash>,
}

impl StatCache {
    pub fn new() -> Self {
        Self::default()
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

    pub(crate) fn take_entries(&mut self) -> HashMap<Vec<u8>, CachedHash> {
        std::mem::take(&mut self.entries)
    }

    pub(crate) fn set_entries(&mut self, entries: HashMap<Vec<u8>, CachedHash>) {
        self.entries = entries;
    }

    /// Loads a cache file; anything unreadable yields an empty cache.
    pub fn load(path: &Path) -> Self {
        let entries = std::fs::read(path)
            .ok()
            .and_then(|bytes| decode(&bytes))
            .unwrap_or_default();
        Self { entries }
    }

    /// Writes the cache atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), WorkspaceError> {
        let mut body = Vec::with_capacity(16 + self.entries.len() * 160);
        body.extend_from_slice(MAGIC);
        body.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for (p, e) in &self.entries {
            body.extend_from_slice(&(p.len() as u64).to_le_bytes());
            body.extend_from_slice(p);
            body.extend_from_slice(&e.key.size.to_le_bytes());
            body.extend_from_slice(&e.key.mtime_ns.to_le_bytes());
            body.extend_from_slice(&e.key.ctime_ns.to_le_bytes());
            body.extend_from_slice(&e.key.ino.to_le_bytes());
            body.extend_from_slice(&e.key.mode.to_le_bytes());
            body.extend_from_slice(&e.sha256);
            body.extend_from_slice(&e.blob);
            body.extend_from_slice(&e.recorded_ns.to_le_bytes());
        }
        let sum = Sha256::digest(&body);
        body.extend_from_slice(&sum);
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

fn decode(bytes: &[u8]) -> Option<HashMap<Vec<u8>, CachedHash>> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(32)?)?;
    if Sha256::digest(body).as_slice() != sum {
        return None;
    }
    let mut r = Reader(body);
    if r.take(MAGIC.len())? != MAGIC {
        return None;
    }
    let count = r.u64()?;
    let mut entries = HashMap::with_capacity(usize::try_from(count).ok()?.min(1 << 24));
    for _ in 0..count {
        let len = usize::try_from(r.u64()?).ok()?;
        let path = r.take(len)?.to_vec();
        let key = StatKey {
            size: r.u64()?,
            mtime_ns: r.i64()?,
            ctime_ns: r.i64()?,
            ino: r.u64()?,
            mode: u32::from_le_bytes(r.array()?),
        };
        let entry = CachedHash {
            key,
            sha256: r.array()?,
            blob: r.array()?,
            recorded_ns: r.i64()?,
        };
        entries.insert(path, entry);
    }
    r.0.is_empty().then_some(entries)
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
