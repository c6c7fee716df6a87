//! The end of every started run, whatever its outcome: export the patch
//! (partial work included), bind success to the verified fingerprint, remove
//! the containers, and write the report, state and receipt.

use std::time::Instant;

use sha2::{Digest, Sha256};

use super::driver::Durations;
use super::setup::Prepared;
use crate::agent::events::{Outcome, RunEvent};
use crate::agent::reducer::Agent;
use crate::trace::{
    ArtifactDir, PhaseDurations, Receipt, ReceiptCheck, ReceiptFields, ReceiptKey,
    ReceiptVerification, RecoverySummary, RunReport, TokenTotals, VerificationSummary,
    exit_code_for,
};
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
pub fn write_state(artifacts: &ArtifactDir, run_id: &str, agent: &Agent, finished: bool) {
    let stats = agent.stats();
    let state = serde_json::json!({
        "run_id": run_id,
        "status": if finished { "finished" } else { "running" },
        "turns": stats.turns,
        "tool_calls": stats.tool_calls,
        "tokens": {"input": stats.input_tokens, "output": stats.output_tokens},
        "plan": agent.plan().items,
        "validated_checkpoint": agent.validated_checkpoint(),
        "recovery": {"repair_cycles": stats.repair_cycles, "rollbacks": stats.rollbacks},
        "updated": chrono::Utc::now().to_rfc3339(),
    });
    let written = if finished {
        artifacts.write_state_durable(&state)
    } else {
        artifacts.write_state(&state)
    };
    if let Err(e) = written {
        tracing::warn!("writing state.json: {e}");
    }
}

/// Spooled command and check output is written raw by the sandbox while it
/// streams; before the run ends every file under `outputs/` is redacted in
/// place, so no artifact keeps a credential.
pub fn redact_outputs(artifacts: &ArtifactDir) {
    let Ok(entries) = std::fs::read_dir(artifacts.path().join("outputs")) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let redacted = artifacts.redactor().redact_bytes(&bytes);
        if redacted.as_bytes() != bytes.as_slice()
            && let Err(e) = std::fs::write(&path, redacted)
        {
            tracing::error!("redacting {}: {e}", path.display());
        }
    }
}

pub async fn finish(
    run: Prepared,
    mut ending: Ending,
    durations: Durations,
    last_verification: Option<VerificationResult>,
) -> RunReport {
    let Prepared {
        run_id,
        options,
        repo,
        state,
        docker,
        workspace,
        mut checkpoints,
        baseline_checkpoint,
        baseline_fingerprint,
        container,
        verifier,
        artifacts,
        mut bus,
        source,
        agent,
        started,
        model_used,
        ..
    } = run;

    // The complete diff against the baseline, partial work included.
    let export = checkpoints
        .export_patch(baseline_checkpoint)
        .unwrap_or_else(|e| {
            tracing::error!("exporting the patch: {e}");
            if ending.outcome == Outcome::Success {
                ending = Ending::new(
                    Outcome::Failure,
                    format!("the patch could not be exported: {e}"),
                );
            }
            crate::workspace::PatchExport::default()
        });
    let patch = export.patch;
    let final_fingerprint = checkpoints
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
                "the workspace changed after the passing verification; a new pass is required"
                    .into(),
            );
        }
        let credentials = artifacts.redactor().added_credentials(&patch);
        if !credentials.is_empty() {
            ending = Ending::new(
                Outcome::Failure,
                format!(
                    "the patch would add a credential ({}); it is refused",
                    credentials.join(", ")
                ),
            );
        }
        if !export.refused.is_empty() {
            ending = Ending::new(
                Outcome::Failure,
                format!(
                    "the workspace holds credential files or paths git refuses, which a patch may not add or change ({}); they are left out of final.patch, so the verified state is not the patch",
                    export.refused.join(", ")
                ),
            );
        }
    }
    redact_outputs(&artifacts);
    let stored = artifacts.write_final_patch(&patch);
    if let Err(e) = &stored {
        tracing::error!("writing final.patch: {e}");
    }
    let duration_ms = started.elapsed().as_millis() as u64;
    bus.emit(RunEvent::RunFinished {
        outcome: ending.outcome,
        reason: ending.reason.clone(),
        duration_ms,
    });
    drop(bus);

    // Teardown: nothing of the run is left running.
    let teardown = Instant::now();
    tokio::join!(container.shutdown(), verifier.shutdown());
    if let Err(e) = crate::sandbox::gc::remove_run(&docker, &run_id).await {
        tracing::warn!("checking for containers left by the run: {e}");
    }
    let teardown_ms = teardown.elapsed().as_millis() as u64;
    let _ = std::fs::remove_dir_all(workspace.path());
    let _ = std::fs::remove_file(crate::sandbox::gc::workspace_owner_file(&state, &run_id));

    let stats = agent.stats();
    let report = RunReport {
        run_id: run_id.clone(),
        outcome: ending.outcome,
        reason: ending.reason.clone(),
        exit_code: exit_code_for(ending.outcome),
        repo: repo.display().to_string(),
        task: options.task.clone(),
        model: model_used.unwrap_or_else(|| source.current()),
        turns: stats.turns,
        tokens: TokenTotals {
            input: stats.input_tokens,
            output: stats.output_tokens,
        },
        tool_calls: stats.tool_calls,
        verification: VerificationSummary {
            passed: last_verification.as_ref().is_some_and(|v| v.passed),
            checks: last_verification
                .as_ref()
                .map(|v| v.checks.clone())
                .unwrap_or_default(),
        },
        recovery: RecoverySummary {
            repair_cycles: stats.repair_cycles,
            rollbacks: stats.rollbacks,
        },
        changed_files: export.changed_files,
        artifact_dir: artifacts.path().display().to_string(),
        patch: artifacts.final_patch_path().display().to_string(),
        duration_ms,
        durations: PhaseDurations {
            bootstrap_ms: durations.bootstrap_ms,
            model_ms: durations.model_ms,
            tools_ms: durations.tools_ms,
            verification_ms: durations.verification_ms,
            teardown_ms,
        },
    };
    if let Err(e) = artifacts.write_report(&report) {
        tracing::error!("writing report.json: {e}");
    }
    write_state(&artifacts, &run_id, &agent, true);
    let receipt = ReceiptKey::load_or_create(&state).and_then(|key| {
        let events_sha256 = crate::trace::digest(artifacts.events_path())?;
        Receipt::sign(
            &key,
            ReceiptFields {
                run_id: run_id.clone(),
                repo: repo.display().to_string(),
                baseline_commit: workspace.baseline().to_string(),
                baseline_fingerprint,
                patch_sha256: stored
                    .as_ref()
                    .map(|s| s.sha256.clone())
                    .unwrap_or_else(|_| hex::encode(Sha256::digest(patch.as_bytes()))),
                final_fingerprint,
                verification: ReceiptVerification {
                    passed: last_verification.as_ref().is_some_and(|v| v.passed),
                    fingerprint: last_verification
                        .as_ref()
                        .map(|v| v.fingerprint.to_string())
                        .unwrap_or_default(),
                    checks: last_verification
                        .as_ref()
                        .map(|v| v.checks.iter().map(ReceiptCheck::from).collect())
                        .unwrap_or_default(),
                },
                events_sha256,
            },
        )
    });
    if let Err(e) = receipt.and_then(|r| artifacts.write_receipt(&r)) {
        tracing::error!("writing receipt.json: {e}");
    }
    report
}
