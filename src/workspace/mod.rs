//! The private workspace: copy, path confinement, fingerprint, checkpoints.

mod confine;
mod error;

pub use confine::{DirEntryInfo, EntryKind, EntryMetadata, WorkspaceRoot};
pub use error::WorkspaceError;
