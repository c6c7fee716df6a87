//! `receipt.json`: an HMAC-SHA256 receipt binding the baseline, the patch,
//! the verification evidence and fingerprint, and the event log's digest.
//! `apply` refuses a run whose receipt does not verify.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::TraceError;
use super::event_log::{digest, sha256_hex};
use super::receipt_key::ReceiptKey;
use crate::protocol::CheckReport;

pub const RECEIPT_VERSION: u32 = 1;

/// A signed receipt. Every field but `hmac` is covered by the HMAC; unknown
/// fields are refused when reading, so nothing unsigned can ride along.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receipt {
    pub version: u32,
    pub run_id: String,
    pub repo: String,
    pub baseline_commit: String,
    pub baseline_fingerprint: String,
    /// SHA-256 of `final.patch` as written.
    pub patch_sha256: String,
    /// The workspace fingerprint the patch was exported from.
    pub final_fingerprint: String,
    pub verification: ReceiptVerification,
    /// SHA-256 of `events.jsonl` when the receipt was signed.
    pub events_sha256: String,
    /// The agent's completion summary (redacted): what a commit message may
    /// quote, since `report.json` is not signed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// RFC 3339 UTC.
    pub created: String,
    /// Lowercase hex HMAC-SHA256 over the canonical JSON of the other fields.
    pub hmac: String,
}

/// The verification the receipt vouches for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptVerification {
    pub passed: bool,
    /// The workspace fingerprint the checks ran against.
    pub fingerprint: String,
    pub checks: Vec<ReceiptCheck>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptCheck {
    pub name: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub passed: bool,
}

impl From<&CheckReport> for ReceiptCheck {
    fn from(check: &CheckReport) -> Self {
        Self {
            name: check.name.clone(),
            command: check.command.clone(),
            exit_code: check.exit_code,
            passed: check.passed,
        }
    }
}

impl ReceiptVerification {
    /// What the latest verification of a run vouches for (nothing passed
    /// when there was none).
    pub(crate) fn from_result(result: Option<&crate::verify::VerificationResult>) -> Self {
        Self {
            passed: result.is_some_and(|v| v.passed),
            fingerprint: result
                .map(|v| v.fingerprint.to_string())
                .unwrap_or_default(),
            checks: result
                .map(|v| v.checks.iter().map(ReceiptCheck::from).collect())
                .unwrap_or_default(),
        }
    }
}

impl Receipt {
    /// Signs what `claims` states: its version, time and HMAC are set here.
    /// Give it redacted values (check commands): what is signed is written as is.
    pub fn sign(key: &ReceiptKey, claims: Receipt) -> Result<Self, TraceError> {
        let mut receipt = Receipt {
            version: RECEIPT_VERSION,
            created: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            hmac: String::new(),
            ..claims
        };
        receipt.hmac = super::signing::sign(key, &receipt)?;
        Ok(receipt)
    }

    /// Checks the HMAC (in constant time) and the version.
    pub fn verify(&self, key: &ReceiptKey) -> Result<(), TraceError> {
        if !super::signing::verify(key, self, &self.hmac) {
            return Err(TraceError::ReceiptTampered);
        }
        if self.version != RECEIPT_VERSION {
            return Err(TraceError::ReceiptVersion {
                found: self.version,
                expected: RECEIPT_VERSION,
            });
        }
        Ok(())
    }

    /// [`Receipt::verify`], then that `patch` is the patch it signed and
    /// `events_path` the event log it signed.
    pub fn verify_against(
        &self,
        key: &ReceiptKey,
        patch: &[u8],
        events_path: impl AsRef<Path>,
    ) -> Result<(), TraceError> {
        self.verify(key)?;
        let patch_sha256 = sha256_hex(patch);
        if patch_sha256 != self.patch_sha256 {
            return Err(TraceError::PatchMismatch {
                expected: self.patch_sha256.clone(),
                actual: patch_sha256,
            });
        }
        let events_sha256 = digest(events_path)?;
        if events_sha256 != self.events_sha256 {
            return Err(TraceError::EventsMismatch {
                expected: self.events_sha256.clone(),
                actual: events_sha256,
            });
        }
        Ok(())
    }

    /// Reads `receipt.json` (without verifying it).
    pub(crate) fn load(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(TraceError::io("read the receipt", path))?;
        serde_json::from_slice(&bytes).map_err(|source| TraceError::Parse {
            what: "receipt",
            path: path.to_path_buf(),
            source,
        })
    }

    /// The canonical JSON of every field but `hmac`: keys sorted, no spaces.
    #[cfg(test)]
    pub(crate) fn signed_text(&self) -> Result<String, TraceError> {
        super::signing::signed_text(self)
    }
}

#[cfg(test)]
#[path = "receipt_tests.rs"]
mod tests;
