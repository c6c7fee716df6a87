//! What `show` says of a subset of a run's patch that was verified again:
//! its signed record, whether it was applied, and `--verify`'s checks of the
//! record and of the journal that names it.

use crate::delivery::subset_record::SubsetRecord;
use crate::runs::RunRecord;
use crate::state::StateDir;
use crate::trace::ReceiptKey;

/// The subset record for `show --json`: the record, or why it does not load.
pub(super) fn subset_json(run: &RunRecord, state: &StateDir) -> serde_json::Value {
    if !crate::delivery::subset::artifact_record(&run.dir).exists() {
        return serde_json::Value::Null;
    }
    let loaded = ReceiptKey::load_existing(state)
        .map_err(|e| e.to_string())
        .and_then(|key| SubsetRecord::load(&key, &run.dir).map_err(|e| e.to_string()));
    match loaded {
        Ok(Some((record, _))) => serde_json::to_value(record).unwrap_or_default(),
        Ok(None) => serde_json::Value::Null,
        Err(why) => serde_json::json!({ "error": why }),
    }
}

/// The subset of the patch verified again, if there was one.
pub(super) fn print_subset(run: &RunRecord, state: &StateDir) {
    if !crate::delivery::subset::artifact_record(&run.dir).exists() {
        return;
    }
    out!();
    let loaded = ReceiptKey::load_existing(state)
        .map_err(|e| e.to_string())
        .and_then(|key| SubsetRecord::load(&key, &run.dir).map_err(|e| e.to_string()));
    let (record, sha256) = match loaded {
        Ok(Some(found)) => found,
        Ok(None) => return,
        Err(why) => {
            out!("subset: {why}");
            return;
        }
    };
    let applied = ReceiptKey::load_existing(state)
        .ok()
        .and_then(|key| {
            crate::delivery::Journal::load(&key, &run.dir)
                .ok()
                .flatten()
        })
        .and_then(|j| j.subset)
        .is_some_and(|link| link.record_sha256 == sha256);
    out!(
        "subset ({}): {} ({} of {} hunks), verified again {}: {}",
        if applied { "applied" } else { "not applied" },
        record.chosen,
        record.hunks,
        record.total_hunks,
        record.verified,
        if record.passed {
            "every check passed"
        } else {
            "checks FAILED"
        }
    );
    out!(
        "  base:       the source as it was then with the subset applied ({})",
        if record.base_is_run_baseline {
            "the run's baseline"
        } else {
            "not the run's baseline: the source had changed"
        }
    );
    out!("  image:      {}", record.image);
    for c in &record.checks {
        out!(
            "  {:<6} {}  `{}`: {}",
            if c.passed { "pass" } else { "FAIL" },
            c.name,
            c.command,
            c.detail
        );
    }
    for f in &record.files {
        out!("  {f}");
    }
}
