//! The bootstrap phase: the configured `bootstrap` commands run
//! in order, in one container of their own, before the agent starts. They get
//! the network unless `MINICODER_BOOTSTRAP_NETWORK=false`, and never any host
//! credential (the container environment is fixed). The first failure stops it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bollard::Docker;

use super::VerifyError;
use super::outcome::{abnormal_end, millis, output_file};
use crate::sandbox::spec::Role;
use crate::sandbox::{CommandContainer, CommandRequest, ContainerSpec};

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
    /// The project's dependency-cache volume: the bootstrap writes it.
    pub cache_volume: Option<String>,
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
    std::fs::create_dir_all(&settings.outputs_dir).map_err(|source| VerifyError::Outputs {
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
    spec.cache = settings
        .cache_volume
        .clone()
        .map(|volume| crate::sandbox::spec::CacheMount {
            volume,
            writable: true,
        });
    let mut container = CommandContainer::start(docker, spec).await?;
    for (i, command) in commands.iter().enumerate() {
        let request = CommandRequest::new(command)
            .timeout(settings.timeout)
            .spool_to(&settings.outputs_dir, &format!("bootstrap-{}", i + 1));
        let outcome = match container.run(request).await {
            Ok(outcome) => outcome,
            Err(e) => {
                container.shutdown().await;
                return Err(e.into());
            }
        };
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
            result.failure = Some(format!("bootstrap command {} `{command}` {how}", i + 1));
            break;
        }
    }
    container.shutdown().await;
    result.duration_ms = millis(started.elapsed());
    Ok(result)
}
