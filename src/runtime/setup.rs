//! Setting a run up: validate the repository, freeze its checks, make the
//! private workspace and checkpoint store, open the artifacts, start the
//! command container and the verifier.

use std::path::PathBuf;
use std::time::Instant;

use bollard::Docker;

use super::{EventBus, RunError, RunHooks, RunOptions};
use crate::agent::reducer::{Agent, AgentConfig};
use crate::model::ActionSource;
use crate::model::types::ModelId;
use crate::owner::{ProcessIdentity, write_owner_file};
use crate::sandbox::spec::{ContainerSpec, Role};
use crate::sandbox::{self, CommandContainer, SANDBOX_GID, SANDBOX_UID};
use crate::state::StateDir;
use crate::trace::{ArtifactDir, Manifest, ManifestCheck, ManifestLimits};
use crate::verify::{self, CheckSpec, Verifier, VerifierSettings};
use crate::workspace::{CheckpointStore, ExcludeSet, PrivateWorkspace, WorkspaceRoot};

/// Everything a started run owns.
pub struct Prepared {
    pub run_id: String,
    pub options: RunOptions,
    pub repo: PathBuf,
    pub state: StateDir,
    pub docker: Docker,
    pub workspace: PrivateWorkspace,
    pub root: WorkspaceRoot,
    pub checkpoints: CheckpointStore,
    pub baseline_checkpoint: git2::Oid,
    pub baseline_fingerprint: String,
    pub container: CommandContainer,
    pub verifier: Verifier,
    pub bootstrap: Vec<String>,
    pub checks: Vec<CheckSpec>,
    pub artifacts: ArtifactDir,
    pub bus: EventBus,
    pub source: Box<dyn ActionSource>,
    pub agent: Agent,
    pub hooks: RunHooks,
    pub started: Instant,
    pub deadline: tokio::time::Instant,
    pub image: String,
    /// The project's dependency-cache volume (written by the bootstrap only).
    pub cache_volume: Option<String>,
    /// Set when a person chose "approve the rest of the run".
    pub approve_all: bool,
    pub edit_seq: u32,
    pub call_seq: u32,
    pub last_fingerprint: String,
    /// The provider and model that answered last.
    pub model_used: Option<ModelId>,
}

impl Prepared {
    pub fn outputs_dir(&self) -> PathBuf {
        self.artifacts.path().join("outputs")
    }
}

pub fn new_run_id() -> String {
    format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S"),
        crate::ids::random_hex(3)
    )
}

/// The owner of the private workspace (the sandbox user) when we can give
/// files away, i.e. when running as root.
pub fn workspace_owner() -> Option<(u32, u32)> {
    rustix::process::geteuid()
        .is_root()
        .then_some((SANDBOX_UID, SANDBOX_GID))
}

/// Waits for a container that is no longer wanted and removes it.
async fn abandon(
    starting: tokio::task::JoinHandle<Result<CommandContainer, crate::sandbox::SandboxError>>,
) {
    if let Ok(Ok(container)) = starting.await {
        container.shutdown().await;
    }
}

pub async fn prepare(
    options: RunOptions,
    source: Box<dyn ActionSource>,
    mut hooks: RunHooks,
) -> Result<Prepared, RunError> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + options.limits.timeout();
    let repo = git2::Repository::open(&options.repo)
        .ok()
        .and_then(|r| r.workdir().map(PathBuf::from))
        .and_then(|p| p.canonicalize().ok())
        .ok_or_else(|| {
            RunError::Invalid(format!(
                "{} is not a Git repository with a working tree; run minicoder on one (git init creates one)",
                options.repo.display()
            ))
        })?;
    if options.task.trim().is_empty() {
        return Err(RunError::Invalid(
            "the task is empty: say what to do".into(),
        ));
    }
    let config = verify::load_config(&repo)?;
    let checks = verify::resolve_checks(&repo, config.as_ref(), &options.checks)?;
    let image_request = config
        .as_ref()
        .map(verify::ProjectConfig::image_request)
        .unwrap_or_default();
    let bootstrap = config.map(|c| c.bootstrap).unwrap_or_default();

    let run_id = new_run_id();
    let state = StateDir::from_env().map_err(|e| RunError::Invalid(e.to_string()))?;
    state
        .ensure()
        .map_err(|e| RunError::Invalid(format!("cannot create {}: {e}", state.root().display())))?;
    let artifact_root = options
        .artifact_dir
        .clone()
        .unwrap_or_else(|| state.runs_dir().join(&run_id));
    let artifacts = ArtifactDir::create(&artifact_root, &repo)?;

    let docker = sandbox::connect().await?;
    // The project's image (built where needed) and dependency cache (SPEC §6).
    let image = sandbox::derived::resolve(&docker, &repo, &image_request, &mut |_| {}).await?;
    let cache_volume =
        sandbox::caches::for_run(&docker, &repo, &image, !bootstrap.is_empty()).await?;

    // The owner file comes first, so `gc` never finds an ownerless workspace
    // of a live run.
    let ws_dir = state.workspace_dir(&run_id);
    std::fs::create_dir_all(state.workspaces_dir()).map_err(|e| {
        RunError::Invalid(format!(
            "cannot create {}: {e}",
            state.workspaces_dir().display()
        ))
    })?;
    write_owner_file(
        &sandbox::gc::workspace_owner_file(&state, &run_id),
        &ProcessIdentity::current(),
    )
    .map_err(|e| RunError::Invalid(format!("cannot write the workspace owner file: {e}")))?;
    // The containers start (≈ 200 ms each) while the workspace is copied and
    // checkpointed: the bind mount only needs the directory to exist.
    let owner = workspace_owner();
    std::fs::create_dir(&ws_dir)
        .map_err(|e| RunError::Invalid(format!("cannot create {}: {e}", ws_dir.display())))?;
    // (`PrivateWorkspace::create` gives it to the sandbox user once filled.)
    let mut spec = ContainerSpec::new(&image, &ws_dir, &run_id);
    spec.role = Role::Command;
    spec.network = options.network;
    spec.cache = cache_volume
        .clone()
        .map(|volume| sandbox::spec::CacheMount {
            volume,
            writable: false,
        });
    let starting = tokio::spawn(CommandContainer::start(docker.clone(), spec));
    let mut settings = VerifierSettings::new(
        image.clone(),
        ws_dir.clone(),
        run_id.clone(),
        checks.clone(),
        artifacts.path().join("outputs"),
        state
            .checkpoint_store_dir(&run_id)
            .with_extension("verify-cache"),
    );
    settings.allow_zero_tests = options.allow_zero_tests;
    settings.check_timeout = options.limits.command_timeout();
    settings.cache_volume = cache_volume.clone();
    let verifier = Verifier::new(docker.clone(), settings);
    let mut verifier = match verifier {
        Ok(v) => v,
        Err(e) => {
            abandon(starting).await;
            return Err(e.into());
        }
    };
    verifier.prewarm().await;
    let copied = {
        let (repo, ws_dir, state, run_id) =
            (repo.clone(), ws_dir.clone(), state.clone(), run_id.clone());
        tokio::task::spawn_blocking(move || -> Result<_, RunError> {
            let workspace = PrivateWorkspace::create(&repo, &ws_dir, owner)?;
            let root = workspace.root()?;
            let mut checkpoints = CheckpointStore::open(
                &state.checkpoint_store_dir(&run_id),
                workspace.path(),
                ExcludeSet::default(),
            )?;
            let baseline = checkpoints.create("baseline")?;
            Ok((workspace, root, checkpoints, baseline))
        })
        .await
        .map_err(|e| RunError::Invalid(format!("copying the workspace failed: {e}")))
        .and_then(|r| r)
    };
    let (workspace, root, checkpoints, baseline) = match copied {
        Ok(parts) => parts,
        Err(e) => {
            abandon(starting).await;
            verifier.shutdown().await;
            let _ = std::fs::remove_dir_all(&ws_dir);
            let _ = std::fs::remove_file(sandbox::gc::workspace_owner_file(&state, &run_id));
            return Err(e);
        }
    };
    let mut container = match starting.await {
        Ok(Ok(container)) => container,
        Ok(Err(e)) => {
            verifier.shutdown().await;
            return Err(e.into());
        }
        Err(e) => {
            verifier.shutdown().await;
            return Err(RunError::Invalid(format!(
                "starting the command container failed: {e}"
            )));
        }
    };
    // Pre-flight: a program the checks need and the image lacks stops the
    // run now, before any model turn (SPEC §6).
    let needs = verify::preflight::requirements(&repo, &checks, &bootstrap);
    if let Err(e) =
        verify::preflight::check(&mut container, &image, &needs, !bootstrap.is_empty()).await
    {
        tokio::join!(container.shutdown(), verifier.shutdown());
        let _ = std::fs::remove_dir_all(&ws_dir);
        let _ = std::fs::remove_file(sandbox::gc::workspace_owner_file(&state, &run_id));
        return Err(e.into());
    }

    let log = artifacts.create_event_log()?;
    let bus = EventBus::new(log, std::mem::take(&mut hooks.subscribers));
    let agent = Agent::new(AgentConfig {
        task: options.task.clone(),
        checks: checks
            .iter()
            .map(|c| format!("{}: {}", c.name, c.command))
            .collect(),
        max_turns: options.limits.max_turns,
        max_tokens: options.limits.max_tokens,
        context_limit: source.context_limit(),
        tools: crate::tools::specs(),
    });
    let manifest = Manifest {
        run_id: run_id.clone(),
        repo: repo.display().to_string(),
        task: options.task.clone(),
        baseline_commit: workspace.baseline().to_string(),
        baseline_fingerprint: baseline.fingerprint.to_string(),
        checks: checks
            .iter()
            .map(|c| ManifestCheck {
                name: c.name.clone(),
                command: c.command.clone(),
            })
            .collect(),
        bootstrap: bootstrap.clone(),
        model_chain: vec![source.current()],
        limits: ManifestLimits {
            max_turns: options.limits.max_turns,
            timeout_ms: options.limits.timeout_ms,
            command_timeout_ms: options.limits.command_timeout_ms,
            model_timeout_ms: options.limits.model_timeout_ms,
            max_tokens: options.limits.max_tokens,
            network: options.network,
            approval: format!("{:?}", options.approval).to_lowercase(),
        },
        created: chrono::Utc::now().to_rfc3339(),
        minicoder_version: env!("CARGO_PKG_VERSION").to_string(),
    };
    artifacts.write_manifest(&manifest)?;
    Ok(Prepared {
        run_id,
        repo,
        state,
        docker,
        root,
        baseline_checkpoint: baseline.id,
        baseline_fingerprint: baseline.fingerprint.to_string(),
        workspace,
        checkpoints,
        container,
        verifier,
        bootstrap,
        checks,
        artifacts,
        bus,
        source,
        agent,
        hooks,
        started,
        deadline,
        image,
        cache_volume,
        approve_all: false,
        edit_seq: 0,
        call_seq: 0,
        last_fingerprint: String::new(),
        model_used: None,
        options,
    })
}
