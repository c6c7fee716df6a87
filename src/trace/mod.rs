//! Run artifacts: the manifest, state, the hash-chained event
//! log, outputs, patches, report and the HMAC receipt. Every text written
//! passes through the [`Redactor`].

pub mod artifacts;
mod error;
pub(crate) mod event_log;
pub mod manifest;
pub mod receipt;
pub(crate) mod receipt_key;
pub(crate) mod redact;
pub(crate) mod signing;

pub use artifacts::{ArtifactDir, StoredFile};
pub use error::TraceError;
pub use event_log::{ChainSummary, EventLog, GENESIS_PREV, digest, verify_chain};
pub use manifest::{
    MINICODER_VERSION, Manifest, ManifestCheck, ManifestInstruction, ManifestLimits,
};
pub use receipt::{RECEIPT_VERSION, Receipt, ReceiptCheck, ReceiptVerification};
pub use receipt_key::ReceiptKey;
pub use redact::{REDACTED, Redactor};
