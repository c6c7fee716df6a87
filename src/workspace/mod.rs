//! The private workspace: copy (credential files left out), path confinement,
//! git-like path rules, fingerprint, checkpoints and the exported patch.
//!
//! | folder or file | what it holds |
//! | --- | --- |
//! | `private_copy/` | the copy a run works on: made, bounded, prepared ahead, rebuilt, removed |
//! | `store/` | checkpoints in a private bare repository, their trees, the change journal, the patch |
//! | `scan/` | fingerprints, the walk behind them, the stat cache, what the ignore rules leave out |
//! | `confinement/` | kernel-confined access, git's path rules, protected configuration, credentials |
//! | `error.rs` | the one error type of the workspace |
//!
//! Each folder's `mod.rs` lists its files.

mod confinement;
mod error;
mod private_copy;
mod scan;
mod store;

pub(crate) use confinement::protected;
pub use private_copy::limits;
pub(crate) use private_copy::prepared;
pub(crate) use private_copy::recycle;

pub use confinement::confine::{DirEntryInfo, EntryKind, EntryMetadata, WorkspaceRoot};
pub use confinement::git_path::{
    quote as quote_path, unquote as unquote_path, unquote_prefix as unquote_path_prefix,
    verify_component, verify_path,
};
pub use confinement::secrets::{
    DEFAULT_SECRET_PATHS, LeftOut, REASON_CREDENTIAL, REASON_GIT_REFUSES, SecretPaths,
};
pub use error::WorkspaceError;
pub(crate) use private_copy::copy::copied_as_they_are;
pub use private_copy::copy::{CopyProgress, PrivateWorkspace, submodules_of};
pub use private_copy::limits::{LimitOverrides, Usage, WorkspaceLimits};
pub(crate) use private_copy::rebuild::{RebuildFrom, baseline_commit_raw};
pub(crate) use private_copy::remove::remove_detached;
pub(crate) use private_copy::sandbox_user::workspace_owner;
pub use private_copy::sandbox_user::{SANDBOX_GID, SANDBOX_UID};
pub use scan::fingerprint::{
    DEFAULT_MAX_FILE_BYTES, EntryDigest, Fingerprint, FingerprintEntry, Fingerprinter, Snapshot,
    digest, fingerprint,
};
pub(crate) use scan::ignored::read_bounded;
pub use scan::ignored::{
    DEFAULT_EXCLUDES, ExcludeSet, IgnoreRules, ignored_entries, remove_new_ignored, run_excludes,
    source_excludes,
};
pub use scan::stat_cache::StatCache;
pub(crate) use store::checkpoint::export_from;
pub use store::checkpoint::{
    Checkpoint, CheckpointStore, MAX_PATCH_BYTES, PatchExport, human_bytes,
};
