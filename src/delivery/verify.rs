//! What `apply` checks before it reads the source: the receipt's HMAC under
//! the state directory's key, the patch's hash, the event log's chain and
//! digest, that the receipt belongs to this run and repository, and that
//! the run succeeded (its report and the signed verification both say so).

use crate::protocol::Outcome;
use crate::runs::RunRecord;
use crate::trace::artifacts::{EVENTS_FILE, FINAL_PATCH_FILE, MANIFEST_FILE, RECEIPT_FILE};
use crate::trace::{Receipt, ReceiptKey, digest, verify_chain};

use super::DeliveryError;

/// A run whose artifacts check out.
#[derive(Debug, Clone)]
pub(crate) struct VerifiedRun {
    /// SHA-256 of `receipt.json` as it is on disk.
    pub receipt_sha256: String,
    /// `final.patch`, exactly as signed.
    pub patch: Vec<u8>,
    /// Whether the run succeeded; `false` only with `unverified`.
    pub succeeded: bool,
    /// The agent's summary as the receipt signed it.
    pub summary: String,
}

pub(crate) fn verify_run(
    key: &ReceiptKey,
    run: &RunRecord,
    unverified: bool,
) -> Result<VerifiedRun, DeliveryError> {
    let refuse = |what: String| DeliveryError::Unverified(what);
    // The run's inputs as it started: any change to them since is refused.
    run.manifest
        .verify(key, &run.dir.join(MANIFEST_FILE))
        .map_err(|e| refuse(e.to_string()))?;
    let receipt_path = run.dir.join(RECEIPT_FILE);
    let receipt_bytes = std::fs::read(&receipt_path).map_err(|e| {
        refuse(format!(
            "receipt.json cannot be read ({e}); a run that did not end has no receipt"
        ))
    })?;
    let receipt: Receipt = serde_json::from_slice(&receipt_bytes)
        .map_err(|e| refuse(format!("receipt.json does not parse ({e})")))?;
    receipt.verify(key).map_err(|e| {
        refuse(format!(
            "the receipt's HMAC does not verify under this state directory's key: {e}"
        ))
    })?;
    let patch = std::fs::read(run.dir.join(FINAL_PATCH_FILE))
        .map_err(|e| refuse(format!("final.patch cannot be read ({e})")))?;
    let patch_sha256 = crate::trace::event_log::sha256_hex(&patch);
    if patch_sha256 != receipt.patch_sha256 {
        return Err(refuse(format!(
            "final.patch does not match the receipt (SHA-256 {patch_sha256}, the receipt signed {})",
            receipt.patch_sha256
        )));
    }
    let events = run.dir.join(EVENTS_FILE);
    verify_chain(&events).map_err(|e| refuse(format!("the event log's chain is broken: {e}")))?;
    let events_sha256 =
        digest(&events).map_err(|e| refuse(format!("the event log cannot be read: {e}")))?;
    if events_sha256 != receipt.events_sha256 {
        return Err(refuse(format!(
            "events.jsonl does not match the receipt's digest (SHA-256 {events_sha256}, the receipt signed {})",
            receipt.events_sha256
        )));
    }
    if receipt.run_id != run.id {
        return Err(refuse(format!(
            "the receipt is for run {}, not {}",
            receipt.run_id, run.id
        )));
    }
    if receipt.repo != run.manifest.repo {
        return Err(refuse(format!(
            "the receipt is for the repository {}, the manifest names {}",
            receipt.repo, run.manifest.repo
        )));
    }
    // What passed must be what the run froze: no other checks vouch.
    let frozen: Vec<(&str, &str)> = run
        .manifest
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.command.as_str()))
        .collect();
    let signed: Vec<(&str, &str)> = receipt
        .verification
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.command.as_str()))
        .collect();
    if receipt.verification.passed && frozen != signed {
        return Err(refuse(format!(
            "the receipt vouches for the checks {} but the run froze {}",
            names(&signed),
            names(&frozen)
        )));
    }
    let succeeded = receipt.verification.passed
        && run
            .report
            .as_ref()
            .is_some_and(|r| r.outcome == Outcome::Success);
    if !succeeded && !unverified {
        let outcome = run
            .report
            .as_ref()
            .map(|r| {
                format!(
                    "{}: {}",
                    format!("{:?}", r.outcome).to_lowercase(),
                    r.reason
                )
            })
            .unwrap_or_else(|| "no report".into());
        return Err(refuse(format!(
            "the run did not succeed ({outcome}; signed verification passed: {}); --unverified applies its patch anyway",
            receipt.verification.passed
        )));
    }
    Ok(VerifiedRun {
        receipt_sha256: crate::trace::event_log::sha256_hex(&receipt_bytes),
        patch,
        succeeded,
        summary: receipt.summary,
    })
}

fn names(checks: &[(&str, &str)]) -> String {
    if checks.is_empty() {
        return "none".to_string();
    }
    checks
        .iter()
        .map(|(name, command)| format!("{name} (`{command}`)"))
        .collect::<Vec<_>>()
        .join(", ")
}
