//! The private workspace: copy (credential files left out), path confinement,
//! git-like path rules, fingerprint, checkpoints and the exported patch.

mod checkpoint;
mod confine;
mod copy;
mod error;
mod fingerprint;
mod git_path;
mod ignored;
mod journal;
pub mod limits;
mod pack;
pub(crate) mod prepared;
pub(crate) mod protected;
mod rebuild;
pub(crate) mod recycle;
mod remove;
mod sandbox_user;
mod secrets;
mod source_state;
pub(crate) mod stat_cache;
mod tree;
mod walk;

pub(crate) use checkpoint::export_from;
pub use checkpoint::{Checkpoint, CheckpointStore, MAX_PATCH_BYTES, PatchExport, human_bytes};
pub use confine::{DirEntryInfo, EntryKind, EntryMetadata, WorkspaceRoot};
pub(crate) use copy::copied_as_they_are;
pub use copy::{CopyProgress, PrivateWorkspace, submodules_of};
pub use error::WorkspaceError;
pub use fingerprint::{
    DEFAULT_MAX_FILE_BYTES, EntryDigest, Fingerprint, FingerprintEntry, Fingerprinter, Snapshot,
    digest, fingerprint,
};
pub use git_path::{
    quote as quote_path, unquote as unquote_path, unquote_prefix as unquote_path_prefix,
    verify_component, verify_path,
};
pub(crate) use ignored::read_bounded;
pub use ignored::{
    DEFAULT_EXCLUDES, ExcludeSet, IgnoreRules, ignored_entries, remove_new_ignored, run_excludes,
    source_excludes,
};
pub use limits::{LimitOverrides, Usage, WorkspaceLimits};
pub(crate) use rebuild::{RebuildFrom, baseline_commit_raw};
pub(crate) use remove::remove_detached;
pub(crate) use sandbox_user::workspace_owner;
pub use sandbox_user::{SANDBOX_GID, SANDBOX_UID};
pub use secrets::{
    DEFAULT_SECRET_PATHS, LeftOut, REASON_CREDENTIAL, REASON_GIT_REFUSES, SecretPaths,
};
pub use stat_cache::StatCache;
