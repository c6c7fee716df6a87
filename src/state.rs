//! Where minicoder keeps its private state: run artifacts, private workspaces,
//! checkpoint stores and the receipt key. Never inside a source repository.

use std::path::{Path, PathBuf};

/// The root of minicoder's private state.
///
/// Resolved from `MINICODER_STATE_DIR`, else `$XDG_STATE_HOME/minicoder`, else
/// `~/.local/state/minicoder`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The state directory chosen by the environment.
    pub fn from_env() -> Result<Self, StateDirError> {
        if let Some(dir) = non_empty_env("MINICODER_STATE_DIR") {
            return Ok(Self::new(dir));
        }
        if let Some(dir) = non_empty_env("XDG_STATE_HOME") {
            return Ok(Self::new(PathBuf::from(dir).join("minicoder")));
        }
        match non_empty_env("HOME") {
            Some(home) => Ok(Self::new(
                PathBuf::from(home).join(".local/state/minicoder"),
            )),
            None => Err(StateDirError::NoHome),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/.agent/runs`: one folder of artifacts per run.
    pub fn runs_dir(&self) -> PathBuf {
        self.root.join(".agent").join("runs")
    }

    /// `<root>/workspaces`: one private copy of the source per run.
    pub(crate) fn workspaces_dir(&self) -> PathBuf {
        self.root.join("workspaces")
    }

    /// The private workspace of one run.
    pub fn workspace_dir(&self, run_id: &str) -> PathBuf {
        self.workspaces_dir().join(run_id)
    }

    /// `<root>/preflight`: the programs found in each image, by image id.
    pub(crate) fn preflight_dir(&self) -> PathBuf {
        self.root.join("preflight")
    }

    /// `<root>/prepared`: copies of repositories made ahead of their next
    /// run, never attached to a container before a run takes one.
    pub(crate) fn prepared_dir(&self) -> PathBuf {
        self.root.join("prepared")
    }

    /// `<root>/checkpoints`: one private Git object store per run, never
    /// attached to a container.
    pub(crate) fn checkpoints_dir(&self) -> PathBuf {
        self.root.join("checkpoints")
    }

    /// The checkpoint store of one run.
    pub fn checkpoint_store_dir(&self, run_id: &str) -> PathBuf {
        self.checkpoints_dir().join(format!("{run_id}.git"))
    }

    /// The fingerprint stat caches of one run's verifiers (pure caches,
    /// beside its checkpoint store).
    pub fn stat_cache_paths(&self, run_id: &str) -> [PathBuf; 2] {
        let store = self.checkpoint_store_dir(run_id);
        [
            store.with_extension("verify-cache"),
            store.with_extension("baseline-cache"),
        ]
    }

    /// Creates the root (mode 0700) if it is missing.
    pub fn ensure(&self) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    #[error(
        "cannot choose a state directory: none of MINICODER_STATE_DIR, XDG_STATE_HOME or HOME is set; set one of them"
    )]
    NoHome,
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_under_the_root() {
        let s = StateDir::new("/s");
        assert_eq!(s.runs_dir(), PathBuf::from("/s/.agent/runs"));
        assert_eq!(s.workspace_dir("r1"), PathBuf::from("/s/workspaces/r1"));
        assert_eq!(
            s.checkpoint_store_dir("r1"),
            PathBuf::from("/s/checkpoints/r1.git")
        );
    }
}
