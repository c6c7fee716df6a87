//! The subset-verification record: what a subset of a run's patch was, what
//! it was verified on and how every check went, signed like the journal.
//!
//! `<artifact dir>/apply/subset-verification.json` holds it and
//! `apply/subset.patch` the subset's patch; the record names the patch's
//! SHA-256, the HMAC-SHA256 under the receipt key (with its own domain
//! prefix) covers every other field, and the apply journal of a subset
//! names the record's SHA-256.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::DeliveryError;
use super::journal::Recorded;
use crate::trace::ReceiptKey;

pub const RECORD_FILE: &str = "subset-verification.json";
pub const PATCH_FILE: &str = "subset.patch";
const DOMAIN: &[u8] = b"minicoder subset verification v1\n";
pub(crate) const RECORD_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubsetRecord {
    pub version: u32,
    pub run_id: String,
    pub repo: String,
    /// SHA-256 of the `receipt.json` whose patch the subset is part of.
    pub receipt_sha256: String,
    /// SHA-256 of `subset.patch`.
    pub patch_sha256: String,
    /// How it was chosen: `hunks 1,3`, `paths a.py` or `reviewed patch`.
    pub chosen: String,
    /// Hunks chosen (a whole file counts once) and in the run's patch.
    pub hunks: usize,
    pub total_hunks: usize,
    /// The files it changes, as `apply` lists them (`M path`).
    pub files: Vec<String>,
    /// The base the checks ran on: the source as it was when verified.
    pub base_fingerprint: String,
    /// The run's baseline, and whether the base was it.
    pub run_baseline_fingerprint: String,
    pub base_is_run_baseline: bool,
    pub image: String,
    /// Every path the subset writes and the image it had when the checks
    /// passed: apply writes exactly these.
    pub writes: Vec<RecordedWrite>,
    pub checks: Vec<RecordedCheck>,
    pub passed: bool,
    /// RFC 3339 UTC.
    pub verified: String,
    /// Lowercase hex HMAC-SHA256 of the other fields.
    pub hmac: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedWrite {
    /// Quoted as git quotes paths.
    pub path: String,
    pub post: Recorded,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedCheck {
    pub name: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub passed: bool,
    /// Why it failed, or its duration.
    pub detail: String,
}

/// Where the record of a run lives.
pub fn record_path(artifact_dir: &Path) -> PathBuf {
    super::journal::dir(artifact_dir).join(RECORD_FILE)
}

pub fn patch_path(artifact_dir: &Path) -> PathBuf {
    super::journal::dir(artifact_dir).join(PATCH_FILE)
}

impl crate::trace::signing::SealedJson for SubsetRecord {
    const DOMAIN: &'static [u8] = DOMAIN;
    fn hmac(&self) -> &str {
        &self.hmac
    }
    fn hmac_mut(&mut self) -> &mut String {
        &mut self.hmac
    }
}

impl SubsetRecord {
    /// Signs the record and writes it with the subset's patch; returns the
    /// SHA-256 of the record as written.
    pub(crate) fn write(
        &mut self,
        key: &ReceiptKey,
        artifact_dir: &Path,
        patch: &[u8],
    ) -> Result<String, DeliveryError> {
        let dir = super::journal::dir(artifact_dir);
        crate::state::private_dir(&dir).map_err(|e| DeliveryError::Io {
            what: format!("create {}", dir.display()),
            source: e,
        })?;
        self.patch_sha256 = crate::trace::event_log::sha256_hex(patch);
        crate::trace::signing::seal(key, self).map_err(|e| DeliveryError::Journal {
            why: format!("cannot sign the subset record: {e}"),
        })?;
        let text = serde_json::to_vec_pretty(self).map_err(|e| DeliveryError::Journal {
            why: format!("cannot serialize the subset record: {e}"),
        })?;
        install(&patch_path(artifact_dir), patch)?;
        install(&record_path(artifact_dir), &text)?;
        Ok(crate::trace::event_log::sha256_hex(&text))
    }

    /// The record of the run in `artifact_dir`, if any, verified with its
    /// patch; with the record's SHA-256.
    pub fn load(
        key: &ReceiptKey,
        artifact_dir: &Path,
    ) -> Result<Option<(Self, String)>, DeliveryError> {
        let refuse = |why: String| DeliveryError::Unverified(format!("the subset record {why}"));
        let path = record_path(artifact_dir);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(refuse(format!("cannot be read ({e})"))),
        };
        let record: SubsetRecord =
            serde_json::from_slice(&bytes).map_err(|e| refuse(format!("does not parse ({e})")))?;
        if !crate::trace::signing::is_sealed(key, &record) {
            return Err(refuse(
                "does not verify: its HMAC does not match its content".into(),
            ));
        }
        if record.version != RECORD_VERSION {
            return Err(refuse(format!(
                "is of version {}, not {RECORD_VERSION}",
                record.version
            )));
        }
        let patch = std::fs::read(patch_path(artifact_dir))
            .map_err(|e| refuse(format!("names a subset.patch that cannot be read ({e})")))?;
        let actual = crate::trace::event_log::sha256_hex(&patch);
        if actual != record.patch_sha256 {
            return Err(refuse(format!(
                "signed subset.patch with SHA-256 {}, the file has {actual}",
                record.patch_sha256
            )));
        }
        Ok(Some((record, crate::trace::event_log::sha256_hex(&bytes))))
    }
}

/// Writes `bytes` to a temporary file beside `path` (mode 0600) and renames
/// it into place.
fn install(path: &Path, bytes: &[u8]) -> Result<(), DeliveryError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| DeliveryError::Io {
            what: format!("write {}", path.display()),
            source: e,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SubsetRecord {
        SubsetRecord {
            version: RECORD_VERSION,
            run_id: "run-1".into(),
            repo: "/repo".into(),
            receipt_sha256: "ab".into(),
            patch_sha256: String::new(),
            chosen: "hunks 1".into(),
            hunks: 1,
            total_hunks: 2,
            files: vec!["M a.py".into()],
            base_fingerprint: "f".into(),
            run_baseline_fingerprint: "f".into(),
            base_is_run_baseline: true,
            image: "img".into(),
            writes: Vec::new(),
            checks: vec![RecordedCheck {
                name: "tests".into(),
                command: "pytest".into(),
                exit_code: Some(0),
                passed: true,
                detail: "1.0 s".into(),
            }],
            passed: true,
            verified: "2026-12-01T00:00:00Z".into(),
            hmac: String::new(),
        }
    }

    #[test]
    fn a_written_record_loads_and_a_changed_one_or_patch_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let key = ReceiptKey::from_bytes([3; 32]);
        let mut record = sample();
        let sha = record.write(&key, tmp.path(), b"the patch\n").unwrap();
        let (loaded, loaded_sha) = SubsetRecord::load(&key, tmp.path()).unwrap().unwrap();
        assert_eq!(loaded, record);
        assert_eq!(loaded_sha, sha);
        assert!(SubsetRecord::load(&ReceiptKey::from_bytes([4; 32]), tmp.path()).is_err());

        std::fs::write(patch_path(tmp.path()), b"another patch\n").unwrap();
        let why = SubsetRecord::load(&key, tmp.path())
            .unwrap_err()
            .to_string();
        assert!(why.contains("signed subset.patch"), "{why}");
        std::fs::write(patch_path(tmp.path()), b"the patch\n").unwrap();

        let path = record_path(tmp.path());
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"passed\": true", "\"passed\": false")).unwrap();
        let why = SubsetRecord::load(&key, tmp.path())
            .unwrap_err()
            .to_string();
        assert!(why.contains("HMAC"), "{why}");
    }
}
