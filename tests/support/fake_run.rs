//! A finished run built with the library's own writers: a private
//! workspace, the checkpoint store's exported patch, the artifact directory,
//! the event log, a report and a signed receipt. For tests and benches of
//! `apply` that are not about making runs.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use minicoder::protocol::{
    ModelId, Outcome, PhaseDurations, RecoverySummary, RunEvent, RunReport, TokenTotals,
    VerificationSummary, exit_code_for,
};
use minicoder::state::StateDir;
use minicoder::trace::{
    ArtifactDir, Manifest, ManifestLimits, Receipt, ReceiptKey, ReceiptVerification,
};
use minicoder::workspace::{CheckpointStore, ExcludeSet, PrivateWorkspace};

/// Makes run `id` of `repo_dir` in `state`: the agent did `edit` to its
/// workspace (at `workspace`, kept) and the run ended with `outcome`.
/// Returns the artifact directory.
pub fn make_run(
    state: &StateDir,
    repo_dir: &Path,
    workspace: &Path,
    id: &str,
    outcome: Outcome,
    edit: impl FnOnce(&Path),
) -> PathBuf {
    make_run_with_checks(state, repo_dir, workspace, id, outcome, &[], edit)
}

/// [`make_run`] with `checks` (name, command) frozen in its manifest and
/// passed in its receipt.
pub fn make_run_with_checks(
    state: &StateDir,
    repo_dir: &Path,
    workspace: &Path,
    id: &str,
    outcome: Outcome,
    checks: &[(&str, &str)],
    edit: impl FnOnce(&Path),
) -> PathBuf {
    let ws = PrivateWorkspace::create(repo_dir, workspace, None).unwrap();
    let mut store = CheckpointStore::open(
        &state.checkpoint_store_dir(id),
        workspace,
        ExcludeSet::default(),
    )
    .unwrap();
    let baseline = store.create("baseline").unwrap();
    edit(workspace);
    let export = store.export_patch(baseline.id).unwrap();

    let artifacts = ArtifactDir::create(state.runs_dir().join(id), repo_dir).unwrap();
    let key = ReceiptKey::load_or_create(state).unwrap().0;
    let repo = repo_dir.canonicalize().unwrap().display().to_string();
    artifacts
        .write_manifest(
            &Manifest {
                run_id: id.into(),
                repo: repo.clone(),
                task: "Fix the greeting".into(),
                baseline_commit: ws.baseline().to_string(),
                baseline_fingerprint: baseline.fingerprint.to_string(),
                checks: checks
                    .iter()
                    .map(|(name, command)| minicoder::trace::ManifestCheck {
                        name: (*name).into(),
                        command: (*command).into(),
                    })
                    .collect(),
                checks_from_flags: false,
                bootstrap: Vec::new(),
                model_chain: Vec::new(),
                limits: ManifestLimits {
                    max_turns: 1,
                    timeout_ms: 1,
                    command_timeout_ms: 60_000,
                    model_timeout_ms: 1,
                    max_tokens: 1,
                    max_cost_micros: None,
                    network: false,
                    approval: "never".into(),
                    allow_config_edits: false,
                    workspace: None,
                },
                left_out: Vec::new(),
                instructions: Vec::new(),
                project: None,
                source_head: None,
                hmac: String::new(),
                created: "2026-12-01T00:00:00Z".into(),
                minicoder_version: "test".into(),
            },
            &key,
        )
        .unwrap();
    let mut events = artifacts.create_event_log().unwrap();
    for event in [
        RunEvent::RunStarted {
            run_id: id.into(),
            repo: repo.clone(),
            task: "Fix the greeting".into(),
            baseline_commit: String::new(),
            fingerprint: String::new(),
            artifact_dir: String::new(),
            max_turns: 1,
            timeout_ms: 1,
            max_tokens: 0,
            max_cost_micros: None,
            checks: Vec::new(),
            source: Default::default(),
        },
        RunEvent::RunFinished {
            outcome,
            reason: "done".into(),
            duration_ms: 1,
        },
    ] {
        events.append(&event).unwrap();
    }
    drop(events);
    let stored = artifacts.write_final_patch(&export.patch).unwrap();
    let passed = outcome == Outcome::Success;
    artifacts
        .write_report(&RunReport {
            run_id: id.into(),
            outcome,
            reason: "verified: tests passed".into(),
            exit_code: exit_code_for(outcome),
            repo: repo.clone(),
            task: "Fix the greeting".into(),
            model: ModelId {
                provider: "scripted".into(),
                model: "script".into(),
            },
            turns: 1,
            tokens: TokenTotals::default(),
            tool_calls: 1,
            source: Default::default(),
            summary: Some("the greeting is fixed".into()),
            verification: VerificationSummary {
                passed,
                checks: Vec::new(),
            },
            recovery: RecoverySummary::default(),
            changed_files: export.changed_files.clone(),
            changed_total: None,
            artifact_dir: artifacts.path().display().to_string(),
            patch: artifacts.final_patch_path().display().to_string(),
            duration_ms: 1,
            durations: PhaseDurations::default(),
        })
        .unwrap();
    let receipt = Receipt::sign(
        &key,
        Receipt {
            run_id: id.into(),
            repo,
            baseline_commit: ws.baseline().to_string(),
            baseline_fingerprint: baseline.fingerprint.to_string(),
            patch_sha256: stored.sha256,
            final_fingerprint: String::new(),
            // What passed is what the manifest froze.
            verification: ReceiptVerification {
                passed,
                fingerprint: String::new(),
                checks: checks
                    .iter()
                    .map(|(name, command)| minicoder::trace::ReceiptCheck {
                        name: (*name).into(),
                        command: (*command).into(),
                        exit_code: Some(if passed { 0 } else { 1 }),
                        passed,
                    })
                    .collect(),
            },
            events_sha256: minicoder::trace::digest(artifacts.events_path()).unwrap(),
            ..Receipt::default()
        },
    )
    .unwrap();
    artifacts.write_receipt(&receipt).unwrap();
    artifacts.path().to_path_buf()
}
