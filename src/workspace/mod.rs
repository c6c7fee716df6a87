//! The private workspace: copy, path confinement, fingerprint, checkpoints.

mod confine;
mod error;
mod fingerprint;
pub mod stat_cache;

pub use confine::{DirEntryInfo, EntryKind, EntryMetadata, WorkspaceRoot};
pub use error::WorkspaceError;
pub use fingerprint::{
    DEFAULT_EXCLUDES, EntryDigest, ExcludeSet, Fingerprint, FingerprintEntry, Fingerprinter,
    Snapshot, digest, fingerprint,
};
pub use stat_cache::StatCache;
