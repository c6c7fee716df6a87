//! Run artifacts: manifest, state, the hash-chained event log, outputs,
//! patches, report and the HMAC receipt, all passed through the [`Redactor`].

mod error;
pub mod redact;

pub use error::TraceError;
pub use redact::{REDACTED, Redactor};
