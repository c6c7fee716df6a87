//! The one error type of the trace module.

use std::path::PathBuf;

/// Everything that can go wrong while writing or checking a run's artifacts.
/// Each message says what happened and what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("could not {action} `{path}`: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "the artifact directory `{dir}` is inside the source repository `{repo}`; choose an --artifact-dir outside the repository (a run never writes to its source)"
    )]
    ArtifactDirInsideRepo { dir: PathBuf, repo: PathBuf },

    #[error(
        "`{path}` already exists: the manifest of a run is written once and never replaced; start a new run or resume this one"
    )]
    ManifestExists { path: PathBuf },

    #[error(
        "the event log `{path}` already exists; open it with EventLog::open_append to continue a run, or choose a new artifact directory"
    )]
    EventLogExists { path: PathBuf },

    #[error(
        "artifact name `{name}` is not usable as a file name; use letters, digits, `.`, `_` and `-` only, without `..`"
    )]
    InvalidName { name: String },

    #[error("could not serialize {what} to JSON: {source}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },

    #[error(
        "the event log `{path}` is broken at line {line}: {reason}; the trace was changed after it was written and cannot be trusted"
    )]
    ChainBroken {
        path: PathBuf,
        line: u64,
        reason: String,
    },

    #[error(
        "the receipt key `{path}` can be read or written by other users (mode {mode:o}); run `chmod 600 {path}` (and check who else could have read it)"
    )]
    KeyTooOpen { path: PathBuf, mode: u32 },

    #[error(
        "the receipt key `{path}` is unusable: {reason}; remove it to create a new key (receipts signed with the old key will no longer verify)"
    )]
    KeyInvalid { path: PathBuf, reason: String },

    #[error("could not read 32 random bytes from /dev/urandom for the receipt key: {source}")]
    NoRandomness {
        #[source]
        source: std::io::Error,
    },

    #[error(
        "the receipt does not match its HMAC: it was changed after signing or signed with another key; do not apply this run"
    )]
    ReceiptTampered,

    #[error(
        "the run's manifest ({path}) does not match its signature: its inputs (task, checks, limits, network, model) were changed after the run started, or it was signed with another key; the run cannot be resumed or applied"
    )]
    ManifestTampered { path: PathBuf },

    #[error(
        "the run's manifest ({path}) is not signed: it was written by an older minicoder, whose runs cannot be resumed or applied by this one"
    )]
    ManifestUnsigned { path: PathBuf },

    #[error(
        "the receipt key `{path}` is missing: what it signed (receipts, manifests, journals) can no longer be checked. If the state directory was moved or cleaned, put the key back; nothing signed before can be trusted without it"
    )]
    KeyMissing { path: PathBuf },

    #[error(
        "the receipt has version {found}, this minicoder reads version {expected}; use a matching minicoder"
    )]
    ReceiptVersion { found: u32, expected: u32 },

    #[error(
        "the patch does not match the receipt (receipt sha256 {expected}, patch sha256 {actual}): final.patch was changed after verification; do not apply it"
    )]
    PatchMismatch { expected: String, actual: String },

    #[error(
        "the event log does not match the receipt (receipt sha256 {expected}, events.jsonl sha256 {actual}): the trace was changed after the run; do not trust this run"
    )]
    EventsMismatch { expected: String, actual: String },

    #[error(
        "the receipt holds text that the redactor would hide ({what}); sign a receipt built from redacted values so that what is on disk is what was signed"
    )]
    ReceiptHoldsSecret { what: String },

    #[error("`{path}` is not a valid {what}: {source}; it may be truncated or edited by hand")]
    Parse {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl TraceError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io {
            action,
            path,
            source,
        }
    }

    pub(crate) fn serialize(what: &'static str) -> impl FnOnce(serde_json::Error) -> Self {
        move |source| Self::Serialize { what, source }
    }
}
