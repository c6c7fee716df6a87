//! Which repositories' configurations the person trusts: `trust.json` in
//! the state directory (0600), one entry per repository, each at the hash of
//! the configuration it was given for (see [`super::project`]). A changed
//! configuration is not trusted until the person trusts it again; `minicoder
//! trust` / `untrust` manage the entries and `doctor` lists them.
//!
//! The file is the person's, never the repository's: nothing a run does
//! can reach it (the state directory is never mounted into a container).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::state::StateDir;

/// How far the person trusts a repository's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Trust {
    /// The bootstrap and the recipe's build steps get the network.
    pub network: bool,
}

const VERSION: u32 = 1;
/// The most of `trust.json` that is read.
const MAX_BYTES: u64 = 4 << 20;

/// One trusted repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrustEntry {
    /// The repository's working tree (canonical path).
    pub repo: String,
    /// The configuration hash the trust was given at.
    pub hash: String,
    /// Trusted with network for its bootstrap and recipe.
    pub network: bool,
    /// RFC 3339 UTC.
    pub trusted_at: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    version: u32,
    #[serde(default)]
    repos: Vec<TrustEntry>,
}

/// The trusted repositories of a state directory.
#[derive(Debug)]
pub struct TrustStore {
    path: PathBuf,
    entries: Vec<TrustEntry>,
}

impl TrustStore {
    /// Reads the store of `state` (empty when there is none yet). A file
    /// others could have written, or one that does not parse, is refused:
    /// trusting nothing is the safe reading, and the message says the fix.
    pub fn load(state: &StateDir) -> Result<Self, String> {
        let path = state.trust_file();
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Self {
                    path,
                    entries: Vec::new(),
                });
            }
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
        let me = rustix::process::geteuid().as_raw();
        if !meta.is_file() || meta.uid() != me || meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} is not a private file of this user (mode {:o}, uid {}); remove it and trust the repositories again (`minicoder trust REPO`)",
                path.display(),
                meta.mode() & 0o777,
                meta.uid()
            ));
        }
        let mut bytes = Vec::new();
        file.take(MAX_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if bytes.len() as u64 > MAX_BYTES {
            return Err(format!(
                "{} is too large to be a trust list",
                path.display()
            ));
        }
        let parsed: TrustFile = serde_json::from_slice(&bytes).map_err(|e| {
            format!(
                "{} does not parse ({e}); remove it and trust the repositories again",
                path.display()
            )
        })?;
        if parsed.version != VERSION {
            return Err(format!(
                "{} was written by another version of minicoder (format {}, this one reads {VERSION})",
                path.display(),
                parsed.version
            ));
        }
        Ok(Self {
            path,
            entries: parsed.repos,
        })
    }

    /// Every trusted repository, in the order they were trusted.
    pub fn entries(&self) -> &[TrustEntry] {
        &self.entries
    }

    /// The entry of `repo`, whatever hash it was given at.
    pub fn entry(&self, repo: &Path) -> Option<&TrustEntry> {
        let key = key(repo);
        self.entries.iter().find(|e| e.repo == key)
    }

    /// How far `repo` is trusted at `hash` (`None`: not at that hash).
    pub fn lookup(&self, repo: &Path, hash: &str) -> Option<Trust> {
        self.entry(repo)
            .filter(|e| e.hash == hash)
            .map(|e| Trust { network: e.network })
    }

    /// Trusts `repo` at `hash` (replacing what it had).
    pub fn trust(&mut self, repo: &Path, hash: &str, trust: Trust) {
        let key = key(repo);
        self.entries.retain(|e| e.repo != key);
        self.entries.push(TrustEntry {
            repo: key,
            hash: hash.to_string(),
            network: trust.network,
            trusted_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        });
    }

    /// Stops trusting `repo`; whether it was trusted.
    pub fn untrust(&mut self, repo: &Path) -> bool {
        let key = key(repo);
        let before = self.entries.len();
        self.entries.retain(|e| e.repo != key);
        before != self.entries.len()
    }

    /// Writes the store back (0600, replaced whole).
    pub fn save(&self) -> Result<(), String> {
        if let Some(dir) = self.path.parent() {
            crate::state::private_dir(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let file = TrustFile {
            version: VERSION,
            repos: self.entries.clone(),
        };
        let mut bytes = serde_json::to_vec_pretty(&file).map_err(|e| e.to_string())?;
        bytes.push(b'\n');
        crate::state::write_private_file(&self.path, &bytes)
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}

/// The key of a repository: its canonical path.
fn key(repo: &Path) -> String {
    repo.canonicalize()
        .unwrap_or_else(|_| repo.to_path_buf())
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn trust_is_per_repository_at_a_hash_and_survives_a_reload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().join("state"));
        state.ensure().expect("state");
        let repo = tempfile::tempdir().expect("repo");
        let mut store = TrustStore::load(&state).expect("empty");
        assert!(store.lookup(repo.path(), "h1").is_none());
        store.trust(repo.path(), "h1", Trust { network: true });
        store.save().expect("save");
        let mode = std::fs::metadata(state.trust_file())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let mut store = TrustStore::load(&state).expect("reload");
        assert_eq!(
            store.lookup(repo.path(), "h1"),
            Some(Trust { network: true })
        );
        assert_eq!(store.lookup(repo.path(), "h2"), None, "another hash");
        store.trust(repo.path(), "h2", Trust { network: false });
        assert_eq!(store.entries().len(), 1, "one entry per repository");
        assert!(store.untrust(repo.path()));
        assert!(!store.untrust(repo.path()));
    }

    #[test]
    fn a_file_others_could_write_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().join("state"));
        state.ensure().expect("state");
        std::fs::write(state.trust_file(), r#"{"version":1,"repos":[]}"#).expect("write");
        std::fs::set_permissions(state.trust_file(), std::fs::Permissions::from_mode(0o666))
            .expect("chmod");
        let err = TrustStore::load(&state).expect_err("refused");
        assert!(err.contains("not a private file"), "{err}");
        std::fs::set_permissions(state.trust_file(), std::fs::Permissions::from_mode(0o600))
            .expect("chmod");
        std::fs::write(state.trust_file(), "{nope").expect("write");
        assert!(TrustStore::load(&state).is_err());
    }
}
