//! The bootstrap phase: the configured `bootstrap` commands run
//! in order, in one container of their own, before the agent starts (only
//! when the person trusts the repository's configuration). They get the
//! network only when it is trusted for it (and not switched off with
//! `MINICODER_BOOTSTRAP_NETWORK=false`), never any host credential (the
//! container environment is fixed), and are held to the workspace limits.
//! The first failure stops it. Around the commands the project's download
//! cache is seeded into the run's dependency directory and stored back,
//! downloads only (see [`crate::sandbox::caches`]).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::Docker;

use super::VerifyError;
use super::outcome::{abnormal_end, millis, output_file};
use crate::sandbox::spec::Role;
use crate::sandbox::{CommandContainer, CommandOutcome, CommandRequest, ContainerSpec};

/// The variable that turns the bootstrap network off.
pub const BOOTSTRAP_NETWORK_ENV: &str = "MINICODER_BOOTSTRAP_NETWORK";
/// The per-command timeout of bootstrap commands unless configured.
pub const DEFAULT_BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(600);

/// Whether bootstrap commands get the network, from the value of
/// `MINICODER_BOOTSTRAP_NETWORK`: `false`, `0`, `no` or `off` says no;
/// anything else (or nothing) yes.
pub fn bootstrap_network(value: Option<&str>) -> bool {
    value.is_none_or(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "false" | "0" | "no" | "off"
        )
    })
}

/// Where and how the bootstrap runs.
#[derive(Debug, Clone)]
pub struct BootstrapSettings {
    pub image: String,
    /// Host path of the private workspace.
    pub workspace: PathBuf,
    pub run_id: String,
    pub network: bool,
    /// Output is spooled here as `bootstrap-<n>.stdout/.stderr`.
    pub outputs_dir: PathBuf,
    /// Per command.
    pub timeout: Duration,
    /// The project's download cache volume: only the bootstrap mounts it.
    pub downloads: Option<String>,
    /// The run's dependency directory (`/deps`), written by the bootstrap.
    pub deps: Option<PathBuf>,
    /// The workspace limits the bootstrap is held to.
    pub limits: Option<crate::workspace::WorkspaceLimits>,
}

/// One bootstrap command as it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapOutput {
    pub command: String,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// Relative to the artifact directory (see [`super::VerifierSettings::outputs_dir`]).
    pub output_file: Option<String>,
}

/// How the bootstrap went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapResult {
    pub passed: bool,
    pub duration_ms: u64,
    /// What failed, for people and for the `bootstrap.finished` event.
    pub failure: Option<String>,
    /// The commands that ran, up to and including the failed one.
    pub outputs: Vec<BootstrapOutput>,
}

/// Runs `commands` in order in one bootstrap container, stopping at the first
/// failure. No command means an immediate pass without a container.
pub async fn run_bootstrap(
    docker: Docker,
    settings: &BootstrapSettings,
    commands: &[String],
) -> Result<BootstrapResult, VerifyError> {
    let started = Instant::now();
    let mut result = BootstrapResult {
        passed: true,
        duration_ms: 0,
        failure: None,
        outputs: Vec::new(),
    };
    if commands.is_empty() {
        return Ok(result);
    }
    crate::state::private_dir(&settings.outputs_dir).map_err(|source| VerifyError::Outputs {
        path: settings.outputs_dir.clone(),
        source,
    })?;
    let mut spec = ContainerSpec::new(
        settings.image.clone(),
        settings.workspace.clone(),
        settings.run_id.clone(),
    );
    spec.role = Role::Bootstrap;
    spec.network = settings.network;
    spec.downloads = settings.downloads.clone();
    spec.deps = settings.deps.clone();
    spec.workspace_limits = settings.limits;
    let mut container = CommandContainer::start(docker.clone(), spec).await?;
    let caching = settings.downloads.is_some() && settings.deps.is_some();
    if caching {
        let seeded = container
            .run(CommandRequest::new(crate::sandbox::caches::SEED_SCRIPT).timeout(settings.timeout))
            .await;
        if !seeded.as_ref().is_ok_and(CommandOutcome::success) {
            tracing::warn!("seeding the dependency directory from the download cache failed");
        }
    }
    let stored = run_commands(&mut container, settings, commands, &mut result).await;
    if let Err(e) = stored {
        container.shutdown().await;
        return Err(e);
    }
    if let (true, Some(volume)) = (caching, &settings.downloads) {
        let kept = container
            .run(
                CommandRequest::new(crate::sandbox::caches::STORE_SCRIPT).timeout(settings.timeout),
            )
            .await;
        if !kept.as_ref().is_ok_and(CommandOutcome::success) {
            // What is left in the cache cannot be vouched for: it goes.
            tracing::warn!("the download cache could not be stored back and cleaned; removing it");
            container.shutdown().await;
            let _ = crate::sandbox::caches::remove_volume(&docker, volume).await;
            result.duration_ms = millis(started.elapsed());
            return Ok(result);
        }
    }
    container.shutdown().await;
    result.duration_ms = millis(started.elapsed());
    Ok(result)
}

/// Runs the commands in order, stopping at the first failure.
async fn run_commands(
    container: &mut CommandContainer,
    settings: &BootstrapSettings,
    commands: &[String],
    result: &mut BootstrapResult,
) -> Result<(), VerifyError> {
    for (i, command) in commands.iter().enumerate() {
        let request = CommandRequest::new(command)
            .timeout(settings.timeout)
            .spool_to(&settings.outputs_dir, &format!("bootstrap-{}", i + 1));
        let outcome = container.run(request).await?;
        result.outputs.push(BootstrapOutput {
            command: command.clone(),
            exit_code: outcome.exit_code,
            timed_out: outcome.timed_out,
            duration_ms: millis(outcome.duration),
            output_file: output_file(&outcome, &settings.outputs_dir),
        });
        if !outcome.success() {
            let how = abnormal_end(&outcome, settings.timeout).unwrap_or_else(|| {
                match outcome.exit_code {
                    Some(code) => format!("exited with code {code}"),
                    None => "ended without an exit code".to_string(),
                }
            });
            result.passed = false;
            // Why, where a person sees it: the telling line of its output
            // and the file that holds all of it.
            let why = crate::verify::first_error::first_error(
                &outcome.stderr.text(),
                &outcome.stdout.text(),
            )
            .map(|line| format!(": {line}"))
            .unwrap_or_default();
            let file = output_file(&outcome, &settings.outputs_dir)
                .map(|f| format!(" (all of it in {f})"))
                .unwrap_or_default();
            result.failure = Some(format!(
                "bootstrap command {} `{command}` {how}{why}{file}",
                i + 1
            ));
            break;
        }
    }
    Ok(())
}
