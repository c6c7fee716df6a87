//! Run artifacts: manifest, state, the hash-chained event log, outputs,
//! patches, report and the HMAC receipt, all passed through the [`Redactor`].

mod error;
pub mod event_log;
pub mod redact;

pub use error::TraceError;
pub use event_log::{ChainSummary, EventLog, GENESIS_PREV, digest, verify_chain};
pub use redact::{REDACTED, Redactor};
