//! The one error type of the workspace module.

use std::path::PathBuf;

/// Everything that can go wrong while copying, confining, fingerprinting or
/// checkpointing a workspace. Each message says what happened and, where the
/// user can act, what to do.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(
        "path `{path}` leads outside the workspace; paths must be relative to the workspace and stay inside it"
    )]
    PathEscape { path: PathBuf },

    #[error(
        "symlink `{path}` in the source repository points outside it (to `{target}`); remove or replace it before starting a run"
    )]
    OutsideSymlink { path: PathBuf, target: PathBuf },

    #[error(
        "`{path}` in the source repository is a nested repository that is not one of its submodules (or a submodule deeper than four levels); run on the inner repository, or add it as a submodule"
    )]
    Submodule { path: PathBuf },

    #[error(
        "`{path}` in the source repository is a {kind}; only regular files, directories and symlinks can be copied, remove it before starting a run"
    )]
    SpecialFile { path: PathBuf, kind: &'static str },

    #[error(
        "`{path}` in the source repository cannot be read by its owner (mode {mode:04o}); make it readable (chmod u+r), or leave it out of runs with a `secret_paths` pattern in .minicoder.json"
    )]
    Unreadable { path: PathBuf, mode: u32 },

    #[error(
        "`{path}` lies beyond a symlink in the source repository; git does not track such paths"
    )]
    BeyondSymlink { path: PathBuf },

    #[error(
        "the workspace destination `{path}` already exists and is not empty; choose a new run directory"
    )]
    DestinationNotEmpty { path: PathBuf },

    #[error("the stat cache file `{path}` must live outside the workspace")]
    CacheInsideWorkspace { path: PathBuf },

    #[error(
        "the patch would touch `{path}`, a credential file or a path git refuses; it cannot be exported"
    )]
    RefusedPath { path: String },

    #[error("no checkpoint `{id}` in the checkpoint store")]
    UnknownCheckpoint { id: String },

    #[error(
        "checkpoint `{id}` was pruned to keep the run's checkpoints within their budget; its files are gone"
    )]
    CheckpointPruned { id: String },

    #[error("`{path}`: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("git: {context}: {source}")]
    Git {
        context: String,
        #[source]
        source: git2::Error,
    },
}

impl WorkspaceError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: impl Into<std::io::Error>) -> Self {
        Self::Io {
            path: path.into(),
            source: source.into(),
        }
    }

    /// An I/O error without a real path gets `path`.
    pub(crate) fn at(self, path: PathBuf) -> Self {
        match self {
            Self::Io { path: p, source } if p.as_os_str() == "." => Self::Io { path, source },
            other => other,
        }
    }

    /// Whether this is the I/O error of a path that does not exist.
    pub(crate) fn is_not_found(&self) -> bool {
        matches!(self, Self::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    pub(crate) fn git(context: impl Into<String>) -> impl FnOnce(git2::Error) -> Self {
        let context = context.into();
        move |source| Self::Git { context, source }
    }
}
