//! `minicoder resume`: a run killed at any moment, or one that ended and is
//! given a follow-up, continued from its last resume point (see
//! [`super::resume_point`]) with its inputs as they were signed.

use std::path::PathBuf;

use super::RunError::{self, Invalid};
use super::resume_point::{ResumePoint, load, log_tail, note};
use crate::protocol::{ApprovalMode, RunEvent};
use crate::runs::RunRecord;
use crate::state::StateDir;
use crate::trace::{Manifest, ReceiptKey};

/// What `resume` was asked to do.
pub struct ResumeRequest {
    pub run: RunRecord,
    /// A new instruction; required to continue a run that succeeded.
    pub follow_up: Option<String>,
    /// Go on with the repository's checks as they are now, when they changed.
    pub new_checks: bool,
    /// When edits are approved from now on (else as the run had it).
    pub approval: Option<ApprovalMode>,
    /// Trust in the repository's configuration for this resumed run.
    pub trust: Option<super::TrustGrant>,
    /// A larger token budget (`--max-tokens`).
    pub max_tokens: Option<u64>,
    /// A larger cost budget (`--max-cost`), in millionths of a dollar.
    pub max_cost_micros: Option<u64>,
}

/// Continues `req.run` to its end and returns the report. `Err` only when
/// it could not be resumed: nothing was changed then, and the reason says
/// what to do.
pub async fn resume(
    req: ResumeRequest,
    source: Box<dyn crate::model::ActionSource>,
    channels: super::RunChannels,
) -> Result<crate::protocol::RunReport, RunError> {
    let state = StateDir::from_env().map_err(|e| Invalid(e.to_string()))?;
    let run = &req.run;
    let follow_up = req.follow_up.clone().filter(|t| !t.trim().is_empty());
    refuse_unresumable(&state, run, follow_up.is_some())?;
    // The run's inputs and saved state, as minicoder wrote them.
    let key = ReceiptKey::load_existing(&state).map_err(|e| Invalid(e.to_string()))?;
    run.manifest
        .verify(&key, &run.dir.join(crate::trace::artifacts::MANIFEST_FILE))
        .map_err(|e| Invalid(e.to_string()))?;
    let store = state.checkpoint_store_dir(&run.id);
    let point = load(&store, &key).map_err(Invalid)?;
    if point.run_id != run.id {
        return Err(Invalid(format!(
            "the saved state in {} belongs to run {}, not {}",
            store.display(),
            point.run_id,
            run.id
        )));
    }
    let mut options = options_as_signed(&req);
    // The person's hooks as they are now (a resumed agent asks for the
    // points it was started with; a file that cannot be read stops here
    // rather than let a veto lapse).
    options.hooks = std::sync::Arc::new(
        crate::hooks::Hooks::load(crate::state::config_dir_from_env().as_deref())
            .map_err(|e| RunError::Invalid(format!("your hooks: {e}")))?,
    );
    // And the person's MCP servers as they are now.
    options.mcp = std::sync::Arc::new(
        crate::mcp_client::McpConfig::load(crate::state::config_dir_from_env().as_deref())
            .map_err(|e| RunError::Invalid(format!("your MCP servers: {e}")))?,
    );
    // The follow-up goes through the person's UserPromptSubmit hooks before
    // anything of the run is started again.
    if let Some(text) = &follow_up {
        super::hooks::screen_resume_follow_up(&options, &run.id, text).await?;
    }
    options.prices = std::sync::Arc::new(
        crate::state::prices(crate::state::config_dir_from_env().as_deref()).map_err(Invalid)?,
    );
    let raised = raise_budgets(&req, &mut options)?;
    let new_checks = checks_to_use(&req, &mut options)?;
    let tail = log_tail(&run.dir.join("events.jsonl"));
    let note = note(&point, &tail, follow_up.is_some());
    // What the dead process left: its workspace (never its store).
    for name in [run.id.clone(), format!("{}-deps", run.id)] {
        let dir = state.workspace_dir(&name);
        if dir.exists() {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
    let checkpoint = point.checkpoint.clone();
    let mut prepared = prepare(options, source, channels, run, point).await?;
    if new_checks || raised {
        record_changes(&prepared, &run.manifest, &key);
    }
    // The run is under way again: its earlier end is no longer its end.
    for done in ["report.json", "receipt.json"] {
        let _ = std::fs::remove_file(run.dir.join(done));
    }
    prepared.bus.emit(RunEvent::RunResumed {
        run_id: run.id.clone(),
        checkpoint,
        interrupted: tail.interrupted,
        follow_up: follow_up.clone(),
        new_checks,
    });
    Ok(super::driver::drive_from(
        prepared,
        crate::agent::effects::Input::Resumed { note, follow_up },
    )
    .await)
}

async fn prepare(
    options: super::RunOptions,
    source: Box<dyn crate::model::ActionSource>,
    channels: super::RunChannels,
    run: &RunRecord,
    point: ResumePoint,
) -> Result<super::parts::Run, RunError> {
    let resuming = super::setup::Resuming {
        run_id: run.id.clone(),
        point,
    };
    super::setup::prepare_with(options, source, channels, Some(resuming)).await
}

/// Refuses a run that is live elsewhere, applied to its source, or that
/// succeeded and is given no follow-up.
fn refuse_unresumable(state: &StateDir, run: &RunRecord, follow_up: bool) -> Result<(), RunError> {
    if crate::runs::is_live(state, &run.id) {
        return Err(Invalid(format!(
            "run {} is still going in another minicoder process",
            run.id
        )));
    }
    if run
        .dir
        .join(crate::runs::APPLY_JOURNAL_DIR)
        .join(crate::runs::APPLY_JOURNAL_FILE)
        .exists()
    {
        return Err(Invalid(format!(
            "run {0} is applied to its source; `minicoder undo {0}` first, or start a new run",
            run.id
        )));
    }
    if let Some(report) = &run.report
        && report.outcome == crate::protocol::Outcome::Success
        && !follow_up
    {
        return Err(Invalid(format!(
            "run {0} succeeded: there is nothing to resume; `minicoder resume {0} \"FOLLOW-UP\"` continues it with a new instruction",
            run.id
        )));
    }
    Ok(())
}

/// The run's options as its signed manifest has them.
fn options_as_signed(req: &ResumeRequest) -> super::RunOptions {
    let manifest = &req.run.manifest;
    let repo = PathBuf::from(&manifest.repo);
    let mut options = super::RunOptions::new(&repo, &manifest.task);
    options.limits = super::Limits {
        max_turns: manifest.limits.max_turns,
        timeout_ms: manifest.limits.timeout_ms,
        command_timeout_ms: manifest.limits.command_timeout_ms,
        model_timeout_ms: manifest.limits.model_timeout_ms,
        max_tokens: manifest.limits.max_tokens,
        max_cost_micros: manifest.limits.max_cost_micros,
    };
    options.network = manifest.limits.network;
    options.artifact_dir = Some(req.run.dir.clone());
    options.trust = req.trust.clone();
    options.bootstrap_network = crate::verify::bootstrap_network(
        std::env::var(crate::verify::BOOTSTRAP_NETWORK_ENV)
            .ok()
            .as_deref(),
    );
    options.approval = req
        .approval
        .unwrap_or(match manifest.limits.approval.as_str() {
            "each" => ApprovalMode::Each,
            "final" => ApprovalMode::Final,
            _ => ApprovalMode::Never,
        });
    options
}

/// Sets `options.checks` to the frozen checks, or to none (the repository's
/// checks as they are now) when they changed and `--new-checks` asks for
/// them; `Ok(true)` in that case. Changed checks without it refuse.
fn checks_to_use(req: &ResumeRequest, options: &mut super::RunOptions) -> Result<bool, RunError> {
    let run = &req.run;
    let manifest = &run.manifest;
    let repo = PathBuf::from(&manifest.repo);
    let frozen: Vec<(String, String)> = manifest
        .checks
        .iter()
        .map(|c| (c.name.clone(), c.command.clone()))
        .collect();
    let new_checks = if manifest.checks_from_flags {
        false
    } else {
        let config = crate::verify::load_config(&repo)?;
        let now: Vec<(String, String)> =
            crate::verify::resolve_checks(&repo, config.as_ref(), &[])?
                .into_iter()
                .map(|c| (c.name, c.command))
                .collect();
        if now != frozen && !req.new_checks {
            let list = |c: &[(String, String)]| {
                c.iter()
                    .map(|(n, cmd)| format!("{n}: {cmd}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            };
            return Err(Invalid(format!(
                "the repository's checks changed since run {} started (then: {}; now: {}); `--new-checks` resumes with the new ones",
                run.id,
                list(&frozen),
                list(&now)
            )));
        }
        now != frozen
    };
    options.checks = if new_checks { Vec::new() } else { frozen };
    Ok(new_checks)
}

/// The budgets the person raised for the resumed run (`Ok(true)` when
/// one was); a lower one than the run had is refused, since the run may
/// have used it already.
fn raise_budgets(req: &ResumeRequest, options: &mut super::RunOptions) -> Result<bool, RunError> {
    let limits = &mut options.limits;
    let mut raised = false;
    if let Some(n) = req.max_tokens {
        if n < limits.max_tokens {
            return Err(Invalid(format!(
                "--max-tokens {n} is below the run's budget of {} tokens; resume raises a budget, never lowers it",
                limits.max_tokens
            )));
        }
        raised |= n > limits.max_tokens;
        limits.max_tokens = n;
    }
    if let Some(n) = req.max_cost_micros {
        if let Some(old) = limits.max_cost_micros
            && n < old
        {
            return Err(Invalid(format!(
                "--max-cost {} is below the run's budget of {}; resume raises a budget, never lowers it",
                crate::protocol::format_usd(n),
                crate::protocol::format_usd(old)
            )));
        }
        raised |= limits.max_cost_micros != Some(n);
        limits.max_cost_micros = Some(n);
    }
    options.check_cost_budget().map_err(Invalid)?;
    Ok(raised)
}

/// The person chose new checks or larger budgets: the manifest says so,
/// signed.
fn record_changes(prepared: &super::parts::Run, manifest: &Manifest, key: &ReceiptKey) {
    let mut changed = manifest.clone();
    changed.limits.max_tokens = prepared.id.options.limits.max_tokens;
    changed.limits.max_cost_micros = prepared.id.options.limits.max_cost_micros;
    changed.checks = prepared
        .sandbox
        .checks
        .iter()
        .map(|c| crate::trace::ManifestCheck {
            name: c.name.clone(),
            command: c.command.clone(),
        })
        .collect();
    if let Err(e) = prepared.artifacts.replace_manifest(&changed, key) {
        tracing::warn!("recording the new checks or budgets in the manifest: {e}");
    }
}
