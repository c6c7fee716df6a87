//! `minicoder show RUN --verify`: the event chain, the manifest, the receipt's
//! HMAC, and that the patch and the event log are the ones the receipt signed,
//! re-checked one by one.

use std::path::Path;

use crate::delivery::subset_record::SubsetRecord;
use crate::runs::RunRecord;
use crate::state::StateDir;
use crate::trace::artifacts::{EVENTS_FILE, FINAL_PATCH_FILE, MANIFEST_FILE, RECEIPT_FILE};
use crate::trace::{Receipt, ReceiptKey, verify_chain};

/// One re-check of `show --verify`.
#[derive(Debug)]
pub(super) struct Check {
    pub what: &'static str,
    pub ok: bool,
    pub detail: String,
}

impl Check {
    fn failed(what: &'static str, detail: impl ToString) -> Check {
        Check {
            what,
            ok: false,
            detail: detail.to_string(),
        }
    }

    /// Passed with `passed`, or failed with the error.
    fn of<E: ToString>(what: &'static str, result: Result<(), E>, passed: &str) -> Check {
        match result {
            Ok(()) => Check {
                what,
                ok: true,
                detail: passed.into(),
            },
            Err(e) => Check::failed(what, e),
        }
    }
}

/// Re-checks the event chain, the receipt's HMAC, and that the patch and the
/// event log are the ones the receipt signed.
pub(super) fn verify(run: &RunRecord, state: &StateDir) -> Vec<Check> {
    let events = run.dir.join(EVENTS_FILE);
    let mut checks = vec![match verify_chain(&events) {
        Ok(summary) => Check {
            what: "events chain",
            ok: true,
            detail: format!("{} lines, each linked to the one before", summary.lines),
        },
        Err(e) => Check::failed("events chain", e),
    }];
    let receipt = match Receipt::load(run.dir.join(RECEIPT_FILE)) {
        Ok(r) => r,
        Err(e) => {
            let why = if run.finished() {
                e.to_string()
            } else {
                "none: the run has not finished, so nothing vouches for its patch".to_string()
            };
            checks.push(Check::failed("receipt", why));
            return checks;
        }
    };
    let key = match ReceiptKey::load_existing(state) {
        Ok(k) => k,
        Err(e) => {
            checks.push(Check::failed("receipt", e));
            return checks;
        }
    };
    let manifest = run.manifest.verify(&key, &run.dir.join(MANIFEST_FILE));
    checks.push(Check::of(
        "manifest",
        manifest,
        "the run's inputs are as it started (signed)",
    ));
    checks.push(Check::of(
        "receipt",
        receipt.verify(&key),
        "its HMAC verifies under this machine's key",
    ));
    checks.push(patch_hash(&run.dir.join(FINAL_PATCH_FILE), &receipt));
    checks.push(events_digest(&events, &receipt));
    checks.extend(verify_apply(run, &key));
    // The same verdict as `apply` reaches, in one call.
    if checks.iter().all(|c| c.ok)
        && let Err(e) = receipt.verify_against(
            &key,
            &std::fs::read(run.dir.join(FINAL_PATCH_FILE)).unwrap_or_default(),
            &events,
        )
    {
        checks.push(Check::failed("receipt", e));
    }
    checks
}

/// Whether `final.patch` is the patch the receipt signed.
fn patch_hash(patch: &Path, receipt: &Receipt) -> Check {
    match std::fs::read(patch) {
        Ok(bytes) => {
            let actual = crate::trace::event_log::sha256_hex(&bytes);
            Check {
                what: "patch hash",
                ok: actual == receipt.patch_sha256,
                detail: if actual == receipt.patch_sha256 {
                    format!("final.patch is the patch the receipt signed ({actual})")
                } else {
                    format!(
                        "final.patch changed since the receipt was signed: sha256 {actual}, signed {}",
                        receipt.patch_sha256
                    )
                },
            }
        }
        Err(e) => Check::failed("patch hash", format!("cannot read final.patch: {e}")),
    }
}

/// Whether `events.jsonl` is the log the receipt signed.
fn events_digest(events: &Path, receipt: &Receipt) -> Check {
    match crate::trace::digest(events) {
        Ok(actual) if actual == receipt.events_sha256 => Check {
            what: "events digest",
            ok: true,
            detail: "events.jsonl is the log the receipt signed".into(),
        },
        Ok(actual) => Check::failed(
            "events digest",
            format!(
                "events.jsonl changed since the receipt was signed: sha256 {actual}, signed {}",
                receipt.events_sha256
            ),
        ),
        Err(e) => Check::failed("events digest", e),
    }
}

/// The subset record, when there is one, and the apply journal beside it:
/// each must verify, and a journal of a subset must name the record there.
fn verify_apply(run: &RunRecord, key: &ReceiptKey) -> Vec<Check> {
    let mut checks = Vec::new();
    if !crate::delivery::subset::artifact_record(&run.dir).exists() {
        let names_one = crate::delivery::Journal::load(key, &run.dir)
            .ok()
            .flatten()
            .is_some_and(|j| j.subset.is_some());
        if names_one {
            checks.push(Check {
                what: "subset record",
                ok: false,
                detail: "the apply journal names a subset record that is not there".into(),
            });
        }
        return checks;
    }
    let journal = match crate::delivery::Journal::load(key, &run.dir) {
        Ok(journal) => {
            if journal.is_some() {
                checks.push(Check {
                    what: "apply journal",
                    ok: true,
                    detail: "its HMAC verifies under this machine's key".into(),
                });
            }
            journal
        }
        Err(e) => {
            checks.push(Check {
                what: "apply journal",
                ok: false,
                detail: e.to_string(),
            });
            None
        }
    };
    let link = journal.and_then(|j| j.subset);
    checks.push(match SubsetRecord::load(key, &run.dir) {
        Ok(Some((record, sha256))) => match &link {
            Some(link) if link.record_sha256 != sha256 => Check {
                what: "subset record",
                ok: false,
                detail: format!(
                    "the apply journal names the record {}, the record there is {sha256}",
                    link.record_sha256
                ),
            },
            _ => Check {
                what: "subset record",
                ok: true,
                detail: format!(
                    "its HMAC verifies and subset.patch is the patch it signed ({}; checks {})",
                    record.chosen,
                    if record.passed { "passed" } else { "failed" }
                ),
            },
        },
        Ok(None) => Check {
            what: "subset record",
            ok: false,
            detail: "the subset record vanished while it was checked".into(),
        },
        Err(e) => Check {
            what: "subset record",
            ok: false,
            detail: e.to_string(),
        },
    });
    checks
}
