//! The private key that signs receipts: `<state dir>/receipt.key`, 32 random
//! bytes, mode 0600, owned by the user. A key others can read is refused.

use std::fs::{DirBuilder, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::TraceError;
use crate::state::StateDir;

pub(crate) const RECEIPT_KEY_FILE: &str = "receipt.key";
pub(crate) const RECEIPT_KEY_LEN: usize = 32;

/// The receipt signing key. Its `Debug` never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct ReceiptKey {
    bytes: [u8; RECEIPT_KEY_LEN],
}

impl std::fmt::Debug for ReceiptKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReceiptKey([hidden])")
    }
}

impl ReceiptKey {
    /// A key from given bytes (tests and embedders).
    pub fn from_bytes(bytes: [u8; RECEIPT_KEY_LEN]) -> Self {
        Self { bytes }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Where the key of a state directory lives.
    pub fn path_in(state: &StateDir) -> PathBuf {
        state.root().join(RECEIPT_KEY_FILE)
    }

    /// The state directory's key, created if missing; whether it was made
    /// now. Only a new run makes a key: everything that checks what was
    /// signed uses [`ReceiptKey::load_existing`].
    pub fn load_or_create(state: &StateDir) -> Result<(Self, bool), TraceError> {
        state
            .ensure()
            .map_err(TraceError::io("create the state directory", state.root()))?;
        let path = Self::path_in(state);
        match Self::load(&path) {
            Err(TraceError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Self::create_at(&path).map(|key| (key, true))
            }
            other => other.map(|key| (key, false)),
        }
    }

    /// The state directory's key, which must exist: a missing key is never
    /// made again here, since what it signed could then never verify and a
    /// new key would hide that.
    pub fn load_existing(state: &StateDir) -> Result<Self, TraceError> {
        let path = Self::path_in(state);
        match Self::load(&path) {
            Err(TraceError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Err(TraceError::KeyMissing { path })
            }
            other => other,
        }
    }

    /// The key at `path`, created (0600, 32 bytes from /dev/urandom) if
    /// missing. Two processes creating it at once end up with the same key:
    /// the file appears whole, by a hard link, or not at all.
    pub fn load_or_create_at(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        match Self::load(path) {
            Err(TraceError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Self::create_at(path)
            }
            other => other,
        }
    }

    /// The existing key at `path`: a regular file (not a symlink) of 32 bytes,
    /// owned by this user, with no permissions for group or others.
    pub(crate) fn load(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let invalid = |reason: String| TraceError::KeyInvalid {
            path: path.to_path_buf(),
            reason,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|source| {
                if source.raw_os_error() == Some(libc::ELOOP) {
                    invalid("it is a symlink".to_string())
                } else {
                    TraceError::Io {
                        action: "open the receipt key",
                        path: path.to_path_buf(),
                        source,
                    }
                }
            })?;
        let meta = file
            .metadata()
            .map_err(TraceError::io("inspect the receipt key", path))?;
        if !meta.is_file() {
            return Err(invalid("it is not a regular file".to_string()));
        }
        let mode = meta.mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(TraceError::KeyTooOpen {
                path: path.to_path_buf(),
                mode,
            });
        }
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            return Err(invalid(format!(
                "it is owned by uid {}, not by this user (uid {me})",
                meta.uid()
            )));
        }
        let mut bytes = Vec::with_capacity(RECEIPT_KEY_LEN);
        file.read_to_end(&mut bytes)
            .map_err(TraceError::io("read the receipt key", path))?;
        let bytes: [u8; RECEIPT_KEY_LEN] = bytes.try_into().map_err(|b: Vec<u8>| {
            invalid(format!("it holds {} bytes, not {RECEIPT_KEY_LEN}", b.len()))
        })?;
        Ok(Self { bytes })
    }

    fn create_at(path: &Path) -> Result<Self, TraceError> {
        let mut bytes = [0u8; RECEIPT_KEY_LEN];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|source| TraceError::NoRandomness { source })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(TraceError::io(
                "create the directory of the receipt key",
                dir,
            ))?;
        let tmp = dir.join(format!(
            ".{RECEIPT_KEY_FILE}.{}.tmp",
            crate::ids::random_hex(6)
        ));
        let written = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()))
            .map_err(TraceError::io("write the new receipt key", &tmp));
        let linked = written.and_then(|()| match std::fs::hard_link(&tmp, path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(source) => Err(TraceError::Io {
                action: "install the receipt key",
                path: path.to_path_buf(),
                source,
            }),
        });
        // The temporary name goes whatever happened; the key (if linked) stays.
        let _ = std::fs::remove_file(&tmp);
        if linked? {
            Ok(Self { bytes })
        } else {
            // Another process installed its key first: use that one.
            Self::load(path)
        }
    }
}
