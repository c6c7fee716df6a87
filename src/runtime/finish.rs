//! The end of every started run, whatever its outcome: export the patch
//! (partial work included), bind success to the verified fingerprint, remove
//! the containers, and write the report, state and receipt.

use std::time::Instant;

use super::driver::Durations;
use super::setup::Prepared;
use super::tool_exec::changed_files;
use crate::agent::events::{Outcome, RunEvent};
use crate::trace::{Receipt, ReceiptFields, RunReport};
use crate::verify::VerificationResult;

pub struct Ending {
    pub outcome: Outcome,
    pub reason: String,
}

impl Ending {
    pub fn new(outcome: Outcome, reason: String) -> Self {
        Self { outcome, reason }
    }
}

/// The latest state, replaced atomically.
pub fn write_state(run: &Prepared, finished: bool) {
    let stats = run.agent.stats();
    let state = serde_json::json!({
        "run_id": run.run_id,
        "status": if finished { "finished" } else { "running" },
        "turns": stats.turns,
        "tool_calls": stats.tool_calls,
        "tokens": {"input": stats.input_tokens, "output": stats.output_tokens},
        "plan": run.agent.plan().items,
        "validated_checkpoint": run.agent.validated_checkpoint(),
        "recovery": {"repair_cycles": stats.repair_cycles, "rollbacks": stats.rollbacks},
        "updated": chrono::Utc::now().to_rfc3339(),
    });
    if let Err(e) = run.artifacts.write_state(&state) {
        tracing::warn!("writing state.json: {e}");
    }
}

pub async fn finish(
    mut run: Prepared,
    mut ending: Ending,
    durations: Durations,
    last_verification: Option<VerificationResult>,
) -> RunReport {
    // The complete diff against the baseline, partial work included.
    let patch = match run.checkpoints.diff_to_workspace(run.baseline_checkpoint) {
        Ok(p) => p,
        Err(e) => {
            tracing::error!("exporting the patch: {e}");
            if ending.outcome == Outcome::Success {
                ending = Ending::new(Outcome::Failure, format!("the patch could not be exported: {e}"));
            }
            String::new()
        }
    };
    let final_fingerprint = run
        .checkpoints
        .scan()
        .map(|s| s.fingerprint.to_string())
        .unwrap_or_default();
    if ending.outcome == Outcome::Success {
        let verified = last_verification
            .as_ref()
            .filter(|v| v.passed)
            .map(|v| v.fingerprint.to_string());
        if verified.as_deref() != Some(final_fingerprint.as_str()) {
            ending = Ending::new(
                Outcome::Failure,
                "the workspace changed after the passing verification; a new pass is required".into(),
            );
        }
        let credentials = crate::trace::added_credentials(&patch);
        if !credentials.is_empty() {
            ending = Ending::new(
                Outcome::Failure,
                format!("the patch would add a credential ({}); it is refused", credentials.join(", ")),
            );
        }
    }
    let patch_path = run.artifacts.write_final_patch(&patch);
    let changed = changed_files(&patch);
    let duration_ms = run.started.elapsed().as_millis() as u64;
    run.bus.emit(RunEvent::RunFinished {
        outcome: ending.outcome,
        reason: ending.reason.clone(),
        duration_ms,
    });

    // Teardown: nothing of the run is left running.
    let teardown = Instant::now();
    let Prepared {
        container,
        verifier,
        ..
    } = run.take_sandbox();
    tokio::join!(container.shutdown(), verifier.shutdown());
    let teardown_ms = teardown.elapsed().as_millis() as u64;
    let _ = std::fs::remove_dir_all(run.workspace.path());
    let _ = std::fs::remove_file(crate::sandbox::gc::workspace_owner_file(&run.state, &run.run_id));

    let stats = run.agent.stats();
    let model = run.model_used.clone().unwrap_or_else(|| run.source.current());
    let report = RunReport::new(crate::trace::ReportFields {
        run_id: run.run_id.clone(),
        outcome: ending.outcome,
        reason: ending.reason.clone(),
        repo: run.repo.display().to_string(),
        task: run.options.task.clone(),
        model,
        turns: stats.turns,
        input_tokens: stats.input_tokens,
        output_tokens: stats.output_tokens,
        tool_calls: stats.tool_calls,
        verification: last_verification.as_ref().map(|v| (v.passed, v.checks.clone())),
        repair_cycles: stats.repair_cycles,
        rollbacks: stats.rollbacks,
        changed_files: changed,
        artifact_dir: run.artifacts.path().display().to_string(),
        patch: patch_path.map(|p| p.display().to_string()).unwrap_or_default(),
        duration_ms,
        bootstrap_ms: durations.bootstrap_ms,
        model_ms: durations.model_ms,
        tools_ms: durations.tools_ms,
        verification_ms: durations.verification_ms,
        teardown_ms,
    });
    if let Err(e) = run.artifacts.write_report(&report) {
        tracing::error!("writing report.json: {e}");
    }
    write_state(&run, true);
    let receipt = crate::trace::load_or_create_key(run.state.root()).and_then(|key| {
        let events = run.artifacts.path().join("events.jsonl");
        Receipt::sign(
            &key,
            ReceiptFields {
                run_id: run.run_id.clone(),
                repo: run.repo.display().to_string(),
                baseline_commit: run.workspace.baseline().to_string(),
                baseline_fingerprint: run.baseline_fingerprint.clone(),
                patch: patch.as_bytes(),
                final_fingerprint: final_fingerprint.clone(),
                verification: last_verification.as_ref(),
                events_path: &events,
            },
        )
    });
    match receipt.and_then(|r| run.artifacts.write_receipt(&r)) {
        Ok(_) => {}
        Err(e) => tracing::error!("writing receipt.json: {e}"),
    }
    report
}
