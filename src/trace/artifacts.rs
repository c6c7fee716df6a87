//! The artifact directory of one run. Every text written here
//! passes through the [`Redactor`].

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ReceiptKey;
use super::event_log::{EventLog, sha256_hex};
use super::manifest::Manifest;
use super::receipt::Receipt;
use super::{Redactor, TraceError};
use crate::protocol::RunReport;

pub(crate) const MANIFEST_FILE: &str = "manifest.json";
pub(crate) const STATE_FILE: &str = "state.json";
pub(crate) const EVENTS_FILE: &str = "events.jsonl";
pub(crate) const OUTPUTS_DIR: &str = "outputs";
pub(crate) const PATCHES_DIR: &str = "patches";
pub(crate) const FINAL_PATCH_FILE: &str = "final.patch";
pub(crate) const REPORT_FILE: &str = "report.json";
pub(crate) const RECEIPT_FILE: &str = "receipt.json";

/// Longest file name an output or patch gets.
const MAX_NAME_LEN: usize = 120;

/// A file written into the artifact directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// Relative to the artifact directory.
    pub relative_path: String,
    /// SHA-256 of the bytes on disk (after redaction).
    pub sha256: String,
    /// Whether redaction changed the text (a redacted patch may not apply).
    pub redacted: bool,
}

/// One run's artifact directory.
#[derive(Debug, Clone)]
pub struct ArtifactDir {
    root: PathBuf,
    redactor: Redactor,
}

impl ArtifactDir {
    /// Creates (or reopens, for `resume`) `dir` with `outputs/` and
    /// `patches/`, mode 0700. Refuses a directory inside `source_repo`, before
    /// creating anything. Redacts with [`Redactor::from_env`].
    pub fn create(
        dir: impl AsRef<Path>,
        source_repo: impl AsRef<Path>,
    ) -> Result<Self, TraceError> {
        let dir = dir.as_ref();
        let source_repo = source_repo.as_ref();
        let repo = source_repo
            .canonicalize()
            .map_err(TraceError::io("resolve the source repository", source_repo))?;
        let resolved = resolve_maybe_missing(dir)?;
        if resolved.starts_with(&repo) {
            return Err(TraceError::ArtifactDirInsideRepo {
                dir: resolved,
                repo,
            });
        }
        let mut builder = DirBuilder::new();
        builder.recursive(true).mode(0o700);
        for sub in [
            Path::new(""),
            Path::new(OUTPUTS_DIR),
            Path::new(PATCHES_DIR),
        ] {
            let path = resolved.join(sub);
            builder
                .create(&path)
                .map_err(TraceError::io("create the artifact directory", &path))?;
        }
        std::fs::set_permissions(&resolved, std::fs::Permissions::from_mode(0o700))
            .map_err(TraceError::io("restrict the artifact directory", &resolved))?;
        Ok(Self {
            root: resolved,
            redactor: Redactor::from_env(),
        })
    }

    /// Redacts with `redactor` instead of the one built from the environment.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    pub fn events_path(&self) -> PathBuf {
        self.root.join(EVENTS_FILE)
    }

    pub fn final_patch_path(&self) -> PathBuf {
        self.root.join(FINAL_PATCH_FILE)
    }

    pub fn receipt_path(&self) -> PathBuf {
        self.root.join(RECEIPT_FILE)
    }

    /// A new `events.jsonl` redacting with this directory's redactor.
    pub fn create_event_log(&self) -> Result<EventLog, TraceError> {
        Ok(EventLog::create(self.events_path())?.with_redactor(self.redactor.clone()))
    }

    /// The existing `events.jsonl`, verified, to continue (resume).
    pub fn open_event_log(&self) -> Result<EventLog, TraceError> {
        Ok(EventLog::open_append(self.events_path())?.with_redactor(self.redactor.clone()))
    }

    /// Writes `manifest.json` once (read-only afterwards); refuses to replace it.
    /// Writes `manifest.json` once (0400), redacted and then signed with
    /// `key`, so what is signed is what is on disk.
    pub fn write_manifest(&self, manifest: &Manifest, key: &ReceiptKey) -> Result<(), TraceError> {
        let path = self.root.join(MANIFEST_FILE);
        let text = self.signed_manifest(manifest, key)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(&path)
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::AlreadyExists {
                    TraceError::ManifestExists { path: path.clone() }
                } else {
                    TraceError::Io {
                        action: "create the manifest",
                        path: path.clone(),
                        source,
                    }
                }
            })?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(TraceError::io("write the manifest", &path))
    }

    /// Replaces `manifest.json` with `manifest` signed anew: only for what a
    /// person asked to change (`resume --new-checks`).
    pub(crate) fn replace_manifest(
        &self,
        manifest: &Manifest,
        key: &ReceiptKey,
    ) -> Result<(), TraceError> {
        let path = self.root.join(MANIFEST_FILE);
        let text = self.signed_manifest(manifest, key)?;
        let tmp = self.root.join(format!("{MANIFEST_FILE}.tmp"));
        let _ = std::fs::remove_file(&tmp);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o400)
            .open(&tmp)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())
                    .and_then(|()| file.sync_all())
            })
            .map_err(TraceError::io("write the manifest", &tmp))?;
        std::fs::rename(&tmp, &path).map_err(TraceError::io("replace the manifest", &path))
    }

    /// The manifest as written: redacted, then signed.
    fn signed_manifest(&self, manifest: &Manifest, key: &ReceiptKey) -> Result<String, TraceError> {
        let text = self.redacted_json("the manifest", manifest)?;
        let redacted: Manifest =
            serde_json::from_str(&text).map_err(|source| TraceError::Parse {
                what: "redacted manifest",
                path: self.root.join(MANIFEST_FILE),
                source,
            })?;
        let signed = redacted.sign(key)?;
        let mut text =
            serde_json::to_string_pretty(&signed).map_err(TraceError::serialize("the manifest"))?;
        text.push('\n');
        Ok(text)
    }

    pub fn read_manifest(&self) -> Result<Manifest, TraceError> {
        read_json(&self.root.join(MANIFEST_FILE), "manifest")
    }

    /// Replaces `state.json` atomically: `state.json.tmp`, fsync, rename.
    pub fn write_state(&self, state: &impl Serialize) -> Result<(), TraceError> {
        let text = self.redacted_json("the run state", state)?;
        self.write_atomic(STATE_FILE, text.as_bytes(), Durability::Replace)
    }

    /// Like [`Self::write_state`], and forces it to disk: for the final state.
    pub(crate) fn write_state_durable(&self, state: &impl Serialize) -> Result<(), TraceError> {
        let text = self.redacted_json("the run state", state)?;
        self.write_atomic(STATE_FILE, text.as_bytes(), Durability::Sync)
    }

    pub fn read_state<S: DeserializeOwned>(&self) -> Result<S, TraceError> {
        read_json(&self.root.join(STATE_FILE), "run state")
    }

    /// Writes the redacted `bytes` to `outputs/<name>`; returns the path
    /// relative to the artifact directory.
    pub fn write_output(&self, name: &str, bytes: &[u8]) -> Result<String, TraceError> {
        check_name(name)?;
        let relative = format!("{OUTPUTS_DIR}/{name}");
        let text = self.redactor.redact_bytes(bytes);
        self.write_private(&relative, text.as_bytes())?;
        Ok(relative)
    }

    /// Writes an attempted edit to `patches/<seq:04>-<name>.patch` (characters
    /// outside `[A-Za-z0-9._-]` in `name` become `_`); returns the relative path.
    pub fn write_patch(&self, seq: u32, name: &str, patch: &str) -> Result<String, TraceError> {
        let relative = format!(
            "{PATCHES_DIR}/{seq:04}-{}.patch",
            crate::ids::file_safe(name, MAX_NAME_LEN)
        );
        let text = self.redactor.redact(patch);
        self.write_private(&relative, text.as_bytes())?;
        Ok(relative)
    }

    /// Writes (or replaces) `final.patch`, atomically.
    pub fn write_final_patch(&self, patch: &str) -> Result<StoredFile, TraceError> {
        let text = self.redactor.redact(patch);
        self.write_atomic(FINAL_PATCH_FILE, text.as_bytes(), Durability::Sync)?;
        Ok(StoredFile {
            relative_path: FINAL_PATCH_FILE.to_string(),
            sha256: sha256_hex(text.as_bytes()),
            redacted: text != patch,
        })
    }

    /// Writes (or replaces) `report.json`, atomically.
    pub fn write_report(&self, report: &RunReport) -> Result<(), TraceError> {
        let text = self.redacted_json("the report", report)?;
        self.write_atomic(REPORT_FILE, text.as_bytes(), Durability::Sync)
    }

    pub fn read_report(&self) -> Result<RunReport, TraceError> {
        read_json(&self.root.join(REPORT_FILE), "report")
    }

    /// Writes (or replaces) `receipt.json`, atomically. Redaction cannot be
    /// applied to a signed receipt, so one holding text the redactor would
    /// hide is refused instead.
    pub fn write_receipt(&self, receipt: &Receipt) -> Result<(), TraceError> {
        let text =
            serde_json::to_string_pretty(receipt).map_err(TraceError::serialize("the receipt"))?;
        if self.redactor.finds_credentials(&text) {
            return Err(TraceError::ReceiptHoldsSecret {
                what: "a field of receipt.json".to_string(),
            });
        }
        self.write_atomic(
            RECEIPT_FILE,
            format!("{text}\n").as_bytes(),
            Durability::Sync,
        )
    }

    pub fn read_receipt(&self) -> Result<Receipt, TraceError> {
        Receipt::load(self.receipt_path())
    }

    fn redacted_json(
        &self,
        what: &'static str,
        value: &impl Serialize,
    ) -> Result<String, TraceError> {
        let text = serde_json::to_string_pretty(value).map_err(TraceError::serialize(what))?;
        let mut text = self.redactor.redact(&text).into_owned();
        text.push('\n');
        Ok(text)
    }

    /// Creates or truncates a 0600 file.
    fn write_private(&self, relative: &str, bytes: &[u8]) -> Result<(), TraceError> {
        let path = self.root.join(relative);
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)
            .and_then(|mut file| file.write_all(bytes))
            .map_err(TraceError::io("write the artifact", &path))
    }

    /// Write `<name>.tmp`, rename over `<name>`: a reader (or a process that
    /// crashed and restarts) sees the old content or the new, never a mix.
    /// With [`Durability::Sync`] the file and the directory are also fsynced,
    /// so the new content survives a power loss; per-step state writes skip
    /// that (two fsyncs cost milliseconds a step here, and the event log is not
    /// synced per line either).
    fn write_atomic(
        &self,
        name: &str,
        bytes: &[u8],
        durability: Durability,
    ) -> Result<(), TraceError> {
        let path = self.root.join(name);
        let tmp = self.root.join(format!("{name}.tmp"));
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(TraceError::io("create the temporary file", &tmp))?;
        let sync = durability == Durability::Sync;
        file.write_all(bytes)
            .and_then(|()| if sync { file.sync_all() } else { Ok(()) })
            .map_err(TraceError::io("write the temporary file", &tmp))?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(TraceError::io("replace", &path))?;
        if !sync {
            return Ok(());
        }
        File::open(&self.root)
            .and_then(|dir| dir.sync_all())
            .map_err(TraceError::io("sync the artifact directory", &self.root))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    Replace,
    Sync,
}

fn read_json<T: DeserializeOwned>(path: &Path, what: &'static str) -> Result<T, TraceError> {
    let bytes = std::fs::read(path).map_err(TraceError::io("read", path))?;
    serde_json::from_slice(&bytes).map_err(|source| TraceError::Parse {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// A name used as is: `[A-Za-z0-9._-]`, not starting with `.`, bounded.
fn check_name(name: &str) -> Result<(), TraceError> {
    let usable = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if usable {
        Ok(())
    } else {
        Err(TraceError::InvalidName {
            name: name.to_string(),
        })
    }
}

/// The absolute, symlink-free form of `path`, which may not exist yet: the
/// nearest existing ancestor is canonicalized and the missing rest (which
/// cannot hold symlinks) is applied lexically.
pub(crate) fn resolve_maybe_missing(path: &Path) -> Result<PathBuf, TraceError> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map_err(TraceError::io("read the current directory for", path))?
            .join(path)
    };
    let mut existing = absolute.as_path();
    let mut missing: Vec<Component<'_>> = Vec::new();
    let base = loop {
        match existing.canonicalize() {
            Ok(resolved) => break resolved,
            Err(source) if source.kind() == std::io::ErrorKind::NotFound => {
                match (existing.parent(), existing.components().next_back()) {
                    (Some(parent), Some(last)) => {
                        missing.push(last);
                        existing = parent;
                    }
                    _ => {
                        return Err(TraceError::Io {
                            action: "resolve the artifact directory",
                            path: absolute.clone(),
                            source,
                        });
                    }
                }
            }
            Err(source) => {
                return Err(TraceError::Io {
                    action: "resolve the artifact directory",
                    path: absolute.clone(),
                    source,
                });
            }
        }
    };
    let mut resolved = base;
    for component in missing.into_iter().rev() {
        match component {
            Component::ParentDir => {
                resolved.pop();
            }
            Component::CurDir => {}
            other => resolved.push(other.as_os_str()),
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_names_are_made_file_safe() {
        assert_eq!(
            crate::ids::file_safe("edit-src/a.py", MAX_NAME_LEN),
            "edit-src_a.py"
        );
        assert_eq!(crate::ids::file_safe("../x y", MAX_NAME_LEN), "_.._x_y");
        assert_eq!(crate::ids::file_safe("", MAX_NAME_LEN), "_");
    }

    #[test]
    fn output_names_are_checked() {
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(check_name("0003-run_shell.stdout.txt").is_ok());
    }

    #[test]
    fn missing_paths_resolve_through_existing_symlinks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let real = dir.path().join("real");
        std::fs::create_dir(&real).expect("mkdir");
        std::os::unix::fs::symlink(&real, dir.path().join("link")).expect("symlink");
        let resolved =
            resolve_maybe_missing(&dir.path().join("link/new/../other")).expect("resolve");
        assert_eq!(resolved, real.canonicalize().expect("canon").join("other"));
    }
}
