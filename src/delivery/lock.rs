//! One apply or undo at a time on a repository: an exclusive `flock` on
//! `<state dir>/locks/<SHA-256 of the repository path>.lock`, released when
//! the process ends whatever way it ends.

use std::fs::File;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::DeliveryError;
use crate::state::StateDir;

#[derive(Debug)]
pub struct RepoLock {
    _file: File,
}

impl RepoLock {
    /// Takes the lock of `repo` or says who holds it; never waits.
    pub fn take(state: &StateDir, repo: &Path) -> Result<Self, DeliveryError> {
        let dir = state.root().join("locks");
        crate::state::private_dir(&dir).map_err(|e| DeliveryError::Io {
            what: format!("create {}", dir.display()),
            source: e,
        })?;
        let key = hex::encode(Sha256::digest(repo.as_os_str().as_encoded_bytes()));
        let path = dir.join(format!("{}.lock", &key[..32]));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| DeliveryError::Io {
                what: format!("open the lock {}", path.display()),
                source: e,
            })?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Self { _file: file }),
            Err(rustix::io::Errno::WOULDBLOCK) => Err(DeliveryError::Locked),
            Err(e) => Err(DeliveryError::Io {
                what: format!("lock {}", path.display()),
                source: e.into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_repository_is_refused_until_the_first_goes() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path());
        let first = RepoLock::take(&state, Path::new("/r")).unwrap();
        assert!(matches!(
            RepoLock::take(&state, Path::new("/r")),
            Err(DeliveryError::Locked)
        ));
        let _other = RepoLock::take(&state, Path::new("/other")).unwrap();
        drop(first);
        RepoLock::take(&state, Path::new("/r")).unwrap();
    }
}
