//! The apply journal: what `apply` wrote, so that `undo` can put it back.
//!
//! `<artifact dir>/apply/journal.json` lists every path written with its
//! pre-image (kind, mode, SHA-256 of the content, the content itself in
//! `apply/pre/<sha256>`) and its post-image, whether the run was applied
//! unverified and the commit made, if any. It is authenticated with
//! HMAC-SHA256 under the receipt key (with its own domain prefix, so no
//! receipt's HMAC can pass for a journal's): a journal changed by hand, or
//! a pre-image file that no longer matches its hash, is refused.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::DeliveryError;
use super::image::Image;
use crate::trace::ReceiptKey;
use crate::workspace::{quote_path, unquote_path};

pub use crate::runs::{APPLY_JOURNAL_DIR as JOURNAL_DIR, APPLY_JOURNAL_FILE as JOURNAL_FILE};
const PRE_DIR: &str = "pre";
const DOMAIN: &[u8] = b"minicoder apply journal v1\n";
pub(crate) const JOURNAL_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Journal {
    pub version: u32,
    pub run_id: String,
    /// The source repository written to.
    pub repo: String,
    /// RFC 3339 UTC.
    pub applied: String,
    /// Applied with `--unverified` (the run did not succeed).
    pub unverified: bool,
    /// SHA-256 of the `receipt.json` the apply checked.
    pub receipt_sha256: String,
    /// The commit `--commit` made in the source.
    pub commit: Option<String>,
    /// A subset of the run's patch, verified again: its signed record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset: Option<SubsetLink>,
    pub entries: Vec<JournalEntry>,
    /// Lowercase hex HMAC-SHA256 of the other fields.
    pub hmac: String,
}

/// The subset-verification record an apply of a subset rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubsetLink {
    /// SHA-256 of `apply/subset-verification.json` as written.
    pub record_sha256: String,
    /// SHA-256 of the subset's patch (`apply/subset.patch`).
    pub patch_sha256: String,
    /// Whether its checks passed (`false`: applied with `--unverified`).
    pub passed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalEntry {
    /// Quoted as git quotes paths.
    pub path: String,
    pub pre: Recorded,
    pub post: Recorded,
    /// A three-way merge of the user's edit and the run's.
    pub merged: bool,
}

/// An image by its kind, mode and hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recorded {
    /// `absent`, `file` or `symlink`.
    pub kind: String,
    /// Permission bits of a file, 0 otherwise.
    pub mode: u32,
    /// SHA-256 of the content or link target; empty when absent.
    pub sha256: String,
}

impl Recorded {
    pub fn of(image: &Image) -> Self {
        Self {
            kind: image.kind().to_string(),
            mode: match image {
                Image::File { mode, .. } => *mode,
                _ => 0,
            },
            sha256: image.sha256().unwrap_or_default(),
        }
    }

    /// Whether `image` is what this records.
    pub fn matches(&self, image: &Image) -> bool {
        *self == Self::of(image)
    }
}

impl JournalEntry {
    pub(crate) fn path_bytes(&self) -> Result<Vec<u8>, DeliveryError> {
        unquote_path(&self.path).ok_or_else(|| DeliveryError::JournalTampered {
            why: format!("the path {:?} is malformed", self.path),
        })
    }
}

/// Where the journal of a run lives.
pub fn dir(artifact_dir: &Path) -> PathBuf {
    artifact_dir.join(JOURNAL_DIR)
}

impl crate::trace::signing::SealedJson for Journal {
    const DOMAIN: &'static [u8] = DOMAIN;
    fn hmac(&self) -> &str {
        &self.hmac
    }
    fn hmac_mut(&mut self) -> &mut String {
        &mut self.hmac
    }
}

impl Journal {
    pub fn new(run_id: &str, repo: &Path, unverified: bool, receipt_sha256: String) -> Self {
        Self {
            version: JOURNAL_VERSION,
            run_id: run_id.to_string(),
            repo: repo.display().to_string(),
            applied: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            unverified,
            receipt_sha256,
            commit: None,
            subset: None,
            entries: Vec::new(),
            hmac: String::new(),
        }
    }

    pub(crate) fn record(&mut self, path: &[u8], pre: &Image, post: &Image, merged: bool) {
        self.entries.push(JournalEntry {
            path: quote_path(path).into_owned(),
            pre: Recorded::of(pre),
            post: Recorded::of(post),
            merged,
        });
    }

    /// Signs and writes the journal (atomically) with the pre-images it
    /// lists, which must be given in `pre_images` (content by SHA-256).
    pub fn write(
        &mut self,
        key: &ReceiptKey,
        artifact_dir: &Path,
        pre_images: &[&Image],
    ) -> Result<(), DeliveryError> {
        let dir = dir(artifact_dir);
        let pre_dir = dir.join(PRE_DIR);
        crate::state::private_dir(&pre_dir).map_err(|e| DeliveryError::Io {
            what: format!("create {}", pre_dir.display()),
            source: e,
        })?;
        for image in pre_images {
            if let (Some(content), Some(hash)) = (image.content(), image.sha256()) {
                let path = pre_dir.join(&hash);
                if !path.exists() {
                    write_private(&path, content)?;
                }
            }
        }
        crate::trace::signing::seal(key, self).map_err(|e| DeliveryError::Journal {
            why: format!("cannot sign it: {e}"),
        })?;
        let text = serde_json::to_vec_pretty(self).map_err(|e| DeliveryError::Journal {
            why: format!("cannot serialize it: {e}"),
        })?;
        let tmp = dir.join(format!("{JOURNAL_FILE}.tmp"));
        write_private(&tmp, &text)?;
        // One sync of the file system makes the pre-images and the journal
        // durable together (a sync per pre-image costs a disk flush each).
        std::fs::File::open(&dir)
            .and_then(|d| rustix::fs::syncfs(&d).map_err(std::io::Error::from))
            .map_err(|e| DeliveryError::Io {
                what: format!("sync {}", dir.display()),
                source: e,
            })?;
        let path = dir.join(JOURNAL_FILE);
        std::fs::rename(&tmp, &path).map_err(|e| DeliveryError::Io {
            what: format!("install {}", path.display()),
            source: e,
        })?;
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| DeliveryError::Io {
                what: format!("sync {}", dir.display()),
                source: e,
            })
    }

    /// The journal of the run in `artifact_dir`, if there is one, verified.
    pub fn load(key: &ReceiptKey, artifact_dir: &Path) -> Result<Option<Self>, DeliveryError> {
        let path = dir(artifact_dir).join(JOURNAL_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(DeliveryError::Io {
                    what: format!("read {}", path.display()),
                    source: e,
                });
            }
        };
        let journal: Journal =
            serde_json::from_slice(&bytes).map_err(|e| DeliveryError::JournalTampered {
                why: format!("it does not parse ({e})"),
            })?;
        if !crate::trace::signing::is_sealed(key, &journal) {
            return Err(DeliveryError::JournalTampered {
                why: "its HMAC does not match its content".into(),
            });
        }
        if journal.version != JOURNAL_VERSION {
            return Err(DeliveryError::JournalTampered {
                why: format!("version {} is not {JOURNAL_VERSION}", journal.version),
            });
        }
        Ok(Some(journal))
    }

    /// The pre-image an entry records, read back and checked against its hash.
    pub(crate) fn pre_image(
        &self,
        artifact_dir: &Path,
        entry: &JournalEntry,
    ) -> Result<Image, DeliveryError> {
        let pre = &entry.pre;
        if pre.kind == "absent" {
            return Ok(Image::Absent);
        }
        let path = dir(artifact_dir).join(PRE_DIR).join(&pre.sha256);
        let bytes = std::fs::read(&path).map_err(|e| DeliveryError::JournalTampered {
            why: format!("the pre-image of {} cannot be read ({e})", entry.path),
        })?;
        if hex::encode(Sha256::digest(&bytes)) != pre.sha256 {
            return Err(DeliveryError::JournalTampered {
                why: format!("the pre-image of {} does not match its hash", entry.path),
            });
        }
        match pre.kind.as_str() {
            "file" => Ok(Image::File {
                bytes,
                mode: pre.mode,
            }),
            "symlink" => Ok(Image::Symlink { target: bytes }),
            other => Err(DeliveryError::JournalTampered {
                why: format!("unknown kind {other:?}"),
            }),
        }
    }

    /// Sets the journal aside once undone (kept, under a name with the time):
    /// the run can be applied again.
    pub(crate) fn retire(artifact_dir: &Path) -> Result<(), DeliveryError> {
        let dir = dir(artifact_dir);
        let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%3fZ");
        let from = dir.join(JOURNAL_FILE);
        let to = dir.join(format!("journal.undone-{stamp}.json"));
        std::fs::rename(&from, &to).map_err(|e| DeliveryError::Io {
            what: format!("set aside {}", from.display()),
            source: e,
        })
    }

    /// Removes the journal of an apply that was rolled back.
    pub(crate) fn discard(artifact_dir: &Path) {
        let _ = std::fs::remove_file(dir(artifact_dir).join(JOURNAL_FILE));
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), DeliveryError> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|e| DeliveryError::Io {
            what: format!("write {}", path.display()),
            source: e,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ReceiptKey {
        ReceiptKey::from_bytes([7; 32])
    }

    fn sample(dir: &Path) -> Journal {
        let pre = Image::File {
            bytes: b"before\n".to_vec(),
            mode: 0o644,
        };
        let post = Image::File {
            bytes: b"after\n".to_vec(),
            mode: 0o644,
        };
        let mut j = Journal::new("run-1", Path::new("/repo"), false, "ab".into());
        j.record(b"src/a.py", &pre, &post, false);
        j.record(b"new.txt", &Image::Absent, &post, false);
        j.write(&key(), dir, &[&pre]).unwrap();
        j
    }

    #[test]
    fn a_written_journal_loads_with_its_pre_images() {
        let tmp = tempfile::tempdir().unwrap();
        let written = sample(tmp.path());
        let loaded = Journal::load(&key(), tmp.path()).unwrap().unwrap();
        assert_eq!(loaded, written);
        assert_eq!(
            loaded.pre_image(tmp.path(), &loaded.entries[0]).unwrap(),
            Image::File {
                bytes: b"before\n".to_vec(),
                mode: 0o644
            }
        );
        assert_eq!(
            loaded.pre_image(tmp.path(), &loaded.entries[1]).unwrap(),
            Image::Absent
        );
    }

    #[test]
    fn a_journal_changed_by_hand_or_under_another_key_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        sample(tmp.path());
        assert!(matches!(
            Journal::load(&ReceiptKey::from_bytes([8; 32]), tmp.path()),
            Err(DeliveryError::JournalTampered { .. })
        ));
        let path = dir(tmp.path()).join(JOURNAL_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"mode\": 420", "\"mode\": 2541")).unwrap();
        match Journal::load(&key(), tmp.path()) {
            Err(DeliveryError::JournalTampered { why }) => assert!(why.contains("HMAC"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_pre_image_that_no_longer_matches_its_hash_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let j = sample(tmp.path());
        let hash = &j.entries[0].pre.sha256;
        std::fs::write(dir(tmp.path()).join(PRE_DIR).join(hash), b"forged").unwrap();
        assert!(matches!(
            j.pre_image(tmp.path(), &j.entries[0]),
            Err(DeliveryError::JournalTampered { .. })
        ));
    }

    #[test]
    fn recorded_images_compare_kind_mode_and_content() {
        let a = Image::File {
            bytes: b"x".to_vec(),
            mode: 0o644,
        };
        let r = Recorded::of(&a);
        assert!(r.matches(&a));
        assert!(!r.matches(&Image::File {
            bytes: b"x".to_vec(),
            mode: 0o755
        }));
        assert!(!r.matches(&Image::Symlink {
            target: b"x".to_vec()
        }));
        assert!(Recorded::of(&Image::Absent).matches(&Image::Absent));
    }
}
