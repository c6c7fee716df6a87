//! The end of every started run, whatever its outcome: the patch is exported
//! (partial work included) and reported to the agent, which gives the final
//! verdict; then the containers are removed and the report, state and
//! receipt written.

use std::time::Instant;

use sha2::{Digest, Sha256};

use super::parts::{Run, RunCounters, RunIdentity, RunWorkspace};
use crate::agent::effects::{Input, PatchFacts};
use crate::agent::reducer::Agent;
use crate::model::ActionSource;
use crate::protocol::{
    Outcome, RecoverySummary, RunEvent, RunReport, TokenTotals, VerificationSummary, exit_code_for,
};
use crate::trace::{ArtifactDir, Receipt, ReceiptVerification, StoredFile};
use crate::verify::VerificationResult;
use crate::workspace::{MAX_PATCH_BYTES, PatchExport, human_bytes};

/// The exported patch and the workspace it came from.
pub(crate) struct Conclusion {
    pub export: PatchExport,
    pub fingerprint: String,
    pub stored: Result<StoredFile, String>,
}

/// The latest state, replaced atomically.
pub(crate) fn write_state(artifacts: &ArtifactDir, run_id: &str, agent: &Agent, finished: bool) {
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
fn redact_outputs(artifacts: &ArtifactDir) {
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

/// Exports the complete diff against the baseline, partial work included, and
/// tells the agent what it is: the final fingerprint, the credentials it
/// would add, the paths it had to leave out, or why it could not be exported.
pub(crate) fn conclude(run: &mut Run) -> (Conclusion, Input) {
    let (export, export_error) = match run.ws.checkpoints.export_patch(run.ws.baseline) {
        Ok(export) if !export.is_complete() => {
            // Never a silent partial patch: final.patch stays empty.
            let error = format!(
                "the patch is {}, over the {} limit of final.patch ({} files changed); nothing was exported",
                human_bytes(export.patch_bytes),
                human_bytes(MAX_PATCH_BYTES as u64),
                export.changed_files.len()
            );
            tracing::error!("{error}");
            let export = PatchExport {
                changed_files: export.changed_files,
                ..PatchExport::default()
            };
            (export, Some(error))
        }
        Ok(export) => (export, None),
        Err(e) => {
            tracing::error!("exporting the patch: {e}");
            (PatchExport::default(), Some(e.to_string()))
        }
    };
    let fingerprint = run
        .ws
        .checkpoints
        .scan()
        .map(|s| s.fingerprint.to_string())
        .unwrap_or_default();
    let credentials = run.artifacts.redactor().added_credentials(&export.patch);
    redact_outputs(&run.artifacts);
    let stored = run
        .artifacts
        .write_final_patch(&export.patch)
        .map_err(|e| e.to_string());
    if let Err(e) = &stored {
        tracing::error!("writing final.patch: {e}");
    }
    let input = Input::Concluded(PatchFacts {
        fingerprint: fingerprint.clone(),
        credentials,
        left_out: export.refused.clone(),
        too_large: export.too_large.clone(),
        export_error,
    });
    (
        Conclusion {
            export,
            fingerprint,
            stored,
        },
        input,
    )
}

/// Reports the final verdict, removes the containers, writes the report,
/// the state and the receipt, and then has the workspace removed.
pub(crate) async fn finish(
    mut run: Run,
    (outcome, reason): (Outcome, String),
    conclusion: Option<Conclusion>,
    last_verification: Option<VerificationResult>,
    baseline: Option<super::baseline::BaselineJob>,
) -> RunReport {
    let conclusion = match conclusion {
        Some(c) => c,
        None => conclude(&mut run).0,
    };
    super::resume_point::save(&mut run, "the end");
    super::hooks::session_end(&mut run, &format!("{outcome:?}").to_lowercase(), &reason).await;
    let duration_ms = run.id.started.elapsed().as_millis() as u64;
    run.bus.emit(RunEvent::RunFinished {
        outcome,
        reason: reason.clone(),
        duration_ms,
    });
    let Run {
        id,
        sandbox,
        mut ws,
        artifacts,
        bus,
        source,
        agent,
        mut counters,
        ..
    } = run;
    drop(bus);

    // Nothing changes the workspace any more.
    ws.checkpoints.unwatch_in_background();
    // Teardown: nothing of the run is left running.
    let teardown = Instant::now();
    let deps = sandbox.deps.clone();
    tokio::join!(
        sandbox.container.shutdown(),
        sandbox.verifier.shutdown(),
        sandbox.mcp.stop(),
        async {
            if let Some(job) = baseline {
                job.join().await;
            }
        }
    );
    // Only a workspace no container can still write becomes the next run's
    // copy (its files are trusted as read then).
    let all_gone = match crate::sandbox::gc::remove_run(&sandbox.docker, &id.run_id).await {
        Ok(0) => true,
        Ok(_) => crate::sandbox::gc::none_left(&sandbox.docker, &id.run_id).await,
        Err(e) => {
            tracing::warn!("checking for containers left by the run: {e}");
            false
        }
    };
    counters.durations.teardown_ms = teardown.elapsed().as_millis() as u64;

    let report = build_report(
        &id,
        &ws,
        &artifacts,
        &agent,
        &*source,
        counters,
        &conclusion,
        (outcome, reason, duration_ms),
        last_verification.as_ref(),
    );
    if let Err(e) = artifacts.write_report(&report) {
        tracing::error!("writing report.json: {e}");
    }
    write_state(&artifacts, &id.run_id, &agent, true);
    write_receipt(
        &id,
        &ws,
        &artifacts,
        &report,
        &conclusion,
        last_verification.as_ref(),
    );
    retire(&id, ws, deps.as_deref(), all_gone);
    report
}

/// The run's report, from what the run ended as and what it counted.
#[allow(clippy::too_many_arguments)]
fn build_report(
    id: &RunIdentity,
    ws: &RunWorkspace,
    artifacts: &ArtifactDir,
    agent: &Agent,
    source: &dyn ActionSource,
    counters: RunCounters,
    conclusion: &Conclusion,
    ended: (Outcome, String, u64),
    last_verification: Option<&VerificationResult>,
) -> RunReport {
    let (outcome, reason, duration_ms) = ended;
    let stats = agent.stats();
    let verification = VerificationSummary {
        passed: last_verification.is_some_and(|v| v.passed),
        checks: last_verification
            .as_ref()
            .map(|v| v.checks.clone())
            .unwrap_or_default(),
    };
    RunReport {
        run_id: id.run_id.clone(),
        outcome,
        reason,
        exit_code: exit_code_for(outcome),
        repo: id.repo.display().to_string(),
        task: id.options.task.clone(),
        model: counters.model_used.unwrap_or_else(|| source.current()),
        turns: stats.turns,
        tokens: TokenTotals {
            input: stats.input_tokens,
            output: stats.output_tokens,
            cached: stats.cached_tokens,
            cost_micros: agent.cost_micros(),
            estimated: stats.estimated_replies > 0,
        },
        tool_calls: stats.tool_calls,
        verification,
        recovery: RecoverySummary {
            repair_cycles: stats.repair_cycles,
            rollbacks: stats.rollbacks,
        },
        changed_files: conclusion
            .export
            .changed_files
            .iter()
            .take(super::tool_exec::MAX_LISTED_PATHS)
            .cloned()
            .collect(),
        changed_total: (conclusion.export.changed_files.len() > super::tool_exec::MAX_LISTED_PATHS)
            .then_some(conclusion.export.changed_files.len() as u64),
        artifact_dir: artifacts.path().display().to_string(),
        patch: artifacts.final_patch_path().display().to_string(),
        duration_ms,
        durations: counters.durations,
        source: ws.source.clone(),
        summary: agent.completion_summary().map(str::to_string),
    }
}

/// Signs and writes the run's receipt: what a later `apply` holds the patch,
/// the events and the verification to.
fn write_receipt(
    id: &RunIdentity,
    ws: &RunWorkspace,
    artifacts: &ArtifactDir,
    report: &RunReport,
    conclusion: &Conclusion,
    last_verification: Option<&VerificationResult>,
) {
    let receipt = crate::trace::digest(artifacts.events_path()).and_then(|events_sha256| {
        Receipt::sign(
            &id.key,
            Receipt {
                run_id: id.run_id.clone(),
                repo: report.repo.clone(),
                baseline_commit: ws.workspace.baseline().to_string(),
                baseline_fingerprint: ws.baseline_fingerprint.clone(),
                patch_sha256: conclusion
                    .stored
                    .as_ref()
                    .map(|s| s.sha256.clone())
                    .unwrap_or_else(|_| {
                        hex::encode(Sha256::digest(conclusion.export.patch.as_bytes()))
                    }),
                final_fingerprint: conclusion.fingerprint.clone(),
                verification: ReceiptVerification::from_result(last_verification),
                events_sha256,
                summary: artifacts
                    .redactor()
                    .redact(report.summary.as_deref().unwrap_or_default())
                    .into_owned(),
                ..Receipt::default()
            },
        )
    });
    if let Err(e) = receipt.and_then(|r| artifacts.write_receipt(&r)) {
        tracing::error!("writing receipt.json: {e}");
    }
}

/// Removes the dependency folder, compacts the checkpoint store to what a
/// resume or `apply --merge` can use, and hands the workspace on to become
/// the repository's next prepared copy.
fn retire(
    id: &RunIdentity,
    ws: RunWorkspace,
    deps: Option<&std::path::Path>,
    containers_gone: bool,
) {
    if let Some(deps) = deps {
        crate::sandbox::gc::remove_detached(&[deps]);
        let _ = std::fs::remove_file(deps.with_extension("owner"));
    }
    // Retention: the store keeps only what a resume or `apply --merge` can use.
    let hand_off = super::prepare_next::hand_off(&ws).filter(|_| containers_gone);
    let mut checkpoints = ws.checkpoints;
    if let Err(e) = checkpoints.compact() {
        tracing::warn!("compacting the checkpoint store: {e}");
    }
    drop(checkpoints);
    crate::runs::release_stores(&id.state, &id.run_id, false);
    // The workspace goes once the run has reported, without holding up the
    // process's exit: it becomes the next run's prepared copy, made in the
    // background, so that run does not copy while its user waits.
    let (files, bytes) = (ws.workspace.copied_files(), ws.workspace.allocated_bytes());
    super::prepare_next::hand_on(
        &id.state,
        &id.repo,
        ws.workspace.path(),
        hand_off,
        files,
        bytes,
    );
    let _ = std::fs::remove_file(crate::sandbox::gc::workspace_owner_file(
        &id.state, &id.run_id,
    ));
}
