//! Setting a run up, phase by phase: check the inputs and freeze the checks,
//! open the state and artifact directories, claim the workspace directory,
//! start the containers while the workspace is copied and checkpointed, and
//! open the trace. A run that cannot start leaves nothing behind.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::bus::EventBus;
use super::parts::{Run, RunCounters, RunIdentity, RunSandbox, RunWorkspace, elapsed_ms};
use super::prefetch::Prefetching;
use super::steering::Steering;
use super::{RunChannels, RunError, RunOptions};
use crate::agent::effects::{AgentConfig, Effect, Input};
use crate::agent::reducer::Agent;
use crate::model::ActionSource;
use crate::model::types::ModelRequest;
use crate::owner::{ProcessIdentity, write_owner_file};
use crate::protocol::{PhaseDurations, PreparePhases, PreparedCopy, RunEvent};
use crate::sandbox::spec::{ContainerSpec, Role};
use crate::sandbox::{self, CommandContainer, SandboxError};
use crate::state::StateDir;
use crate::trace::{ArtifactDir, Manifest, ManifestCheck, ManifestInstruction, ManifestLimits};
use crate::verify::{self, CheckSpec, Verifier, VerifierSettings};
use crate::workspace::workspace_owner;
use crate::workspace::{
    CheckpointStore, CopyProgress, LimitOverrides, PrivateWorkspace, SecretPaths, WorkspaceLimits,
};
use bollard::Docker;

pub fn new_run_id() -> String {
    format!(
        "{}-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S"),
        crate::ids::random_hex(3)
    )
}

/// A run that goes on from a saved state instead of starting afresh.
pub(crate) struct Resuming {
    pub run_id: String,
    pub point: super::resume_point::ResumePoint,
}

pub(crate) async fn prepare(
    options: RunOptions,
    source: Box<dyn ActionSource>,
    channels: RunChannels,
) -> Result<Run, RunError> {
    prepare_with(options, source, channels, None).await
}

/// Sets a run up; with `resuming`, its workspace is rebuilt from the saved
/// checkpoint, its event log continued and its agent restored.
pub(crate) async fn prepare_with(
    options: RunOptions,
    source: Box<dyn ActionSource>,
    channels: RunChannels,
    resuming: Option<Resuming>,
) -> Result<Run, RunError> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + options.limits.timeout();
    let mut phases = PreparePhases::default();
    let progress = Progress(channels.subscribers.clone());
    let mut inputs = resolve_inputs(&options)?;
    // The servers' tools are in the first request, which may go out early.
    let mcp = start_mcp(&options, &mut inputs).await;
    progress.phase("model");
    // A model that cannot be reached stops the run before anything is
    // copied, built or started.
    source.preflight().await.map_err(RunError::Invalid)?;
    let needs = verify::preflight::requirements(&inputs.repo, &inputs.checks, &inputs.bootstrap);
    let (source, gate) = ask_early(&options, &inputs, source, resuming.is_none(), deadline);
    phases.inputs_ms = elapsed_ms(started);
    let run_id = resuming
        .as_ref()
        .map_or_else(new_run_id, |r| r.run_id.clone());
    let (state, artifacts) = open_dirs(&options, &inputs.repo, &run_id)?;
    // A run that cannot start leaves no half-made run directory behind
    // (a resumed run's is its own, and stays).
    let unmade = (resuming.is_none() && options.artifact_dir.is_none()).then(|| {
        Unmade(
            artifacts.path().to_path_buf(),
            sandbox::gc::workspace_owner_file(&state, &run_id),
        )
    });
    let key = receipt_key(&state)?;
    let t = Instant::now();
    progress.phase("image");
    let docker = sandbox::connect().await?;
    // The project's image (built where needed) and dependency cache.
    let image =
        sandbox::derived::resolve(&docker, &inputs.repo, &inputs.image_request, &mut |_| {})
            .await?;
    phases.image_ms = elapsed_ms(t);
    let claim = WorkspaceClaim::take(&state, &run_id, !inputs.bootstrap.is_empty())?;
    let parts = Parts {
        docker: &docker,
        image: &image,
        inputs: &inputs,
        needs: &needs,
        state: &state,
        run_id: &run_id,
    };
    let assembled = parts
        .make(
            &options,
            &claim,
            gate,
            &artifacts,
            &resuming,
            &progress,
            &mut phases,
        )
        .await;
    let (ws, container, verifier) = match assembled {
        Ok(parts) => parts,
        Err(e) => return Err(claim.released(e)),
    };
    let (bus, agent, counters) = open_trace(
        &options,
        &inputs,
        &run_id,
        &ws,
        &artifacts,
        &key,
        &*source,
        channels.subscribers,
        resuming,
    )?;
    let timeout_s = options.limits.timeout_ms / 1000;
    let download_key = inputs.project.as_ref().map(|p| p.hash.clone());
    if let Some(unmade) = unmade {
        std::mem::forget(unmade);
    }
    Ok(Run {
        id: RunIdentity {
            run_id,
            options,
            repo: inputs.repo,
            state,
            started,
            project: inputs.project,
            key,
            repo_hooks: inputs.repo_hooks,
        },
        sandbox: RunSandbox {
            docker,
            image,
            container,
            verifier,
            checks: inputs.checks,
            bootstrap: inputs.bootstrap,
            deps: claim.deps_dir(),
            bootstrap_network: inputs.bootstrap_network,
            download_key,
            mcp,
        },
        ws,
        artifacts,
        bus,
        source,
        agent,
        steering: Steering::new(channels.commands, deadline, timeout_s),
        counters: RunCounters {
            durations: PhaseDurations {
                prepare_ms: elapsed_ms(started),
                prepare: phases,
                ..PhaseDurations::default()
            },
            ..counters
        },
    })
}

fn is_empty_dir(dir: &Path) -> bool {
    std::fs::read_dir(dir).map_or(true, |mut entries| entries.next().is_none())
}

/// What earlier runs found the image to have (by its id). None with a
/// dependency folder that already holds something (a resumed run's venv
/// first on the `PATH`): that is not the image, and is looked for in full.
async fn found_needs(
    docker: &Docker,
    image: &str,
    state: &StateDir,
    claim: &WorkspaceClaim,
) -> Option<verify::preflight::FoundNeeds> {
    if !claim.deps_dir().is_none_or(|d| is_empty_dir(&d)) {
        return None;
    }
    let id = docker.inspect_image(image).await.ok()?.id?;
    Some(verify::preflight::FoundNeeds::new(
        &state.preflight_dir(),
        &id,
    ))
}

/// The first request goes out while the workspace is made, once the
/// command container has the programs the checks need (those it has or
/// lacks whatever the workspace holds); the agent takes its answer if it
/// asks exactly that once the run starts. Returns the source to use and the
/// gate to open, when a request went out.
fn ask_early(
    options: &RunOptions,
    inputs: &Inputs,
    source: Box<dyn ActionSource>,
    new_run: bool,
    deadline: tokio::time::Instant,
) -> (Box<dyn ActionSource>, Option<Gate>) {
    // Not before the person's hooks have seen the task and added to it: a
    // `UserPromptSubmit` hook may refuse the task before any model reads it.
    use crate::hooks::HookEvent;
    let hooked = !options.hooks.is_empty_for(HookEvent::SessionStart)
        || !options.hooks.is_empty_for(HookEvent::UserPromptSubmit);
    let early = (new_run && !hooked)
        .then(|| first_request(options, inputs, &*source))
        .flatten();
    match early {
        Some(request) => {
            let (gate, gated) = tokio::sync::oneshot::channel();
            let early = Prefetching::start(source, request, deadline.into_std(), gated);
            (Box::new(early) as Box<dyn ActionSource>, Some(gate))
        }
        None => (source, None),
    }
}

/// Opens the early request to the model (`true`) or drops it (`false`).
type Gate = tokio::sync::oneshot::Sender<bool>;

type Starting = tokio::task::JoinHandle<Result<CommandContainer, SandboxError>>;

/// What the set-up's parts share.
struct Parts<'a> {
    docker: &'a Docker,
    image: &'a str,
    inputs: &'a Inputs,
    /// What the checks and the bootstrap need of the image.
    needs: &'a [verify::preflight::Requirement],
    state: &'a StateDir,
    run_id: &'a str,
}

impl Parts<'_> {
    /// The workspace, the command container and the verifier, made side by
    /// side.
    #[allow(clippy::too_many_arguments)]
    async fn make(
        &self,
        options: &RunOptions,
        claim: &WorkspaceClaim,
        gate: Option<Gate>,
        artifacts: &ArtifactDir,
        resuming: &Option<Resuming>,
        progress: &Progress,
        phases: &mut PreparePhases,
    ) -> Result<(RunWorkspace, CommandContainer, Verifier), RunError> {
        let found = found_needs(self.docker, self.image, self.state, claim).await;
        // What earlier runs did not find is looked for once the workspace is
        // made (read now: what this run's own early look learns is not taken
        // for an earlier run's knowledge, so the look stays ahead of the start).
        let unknown = match &found {
            Some(found) => found.unknown(self.needs),
            None => self.needs.to_vec(),
        };
        let starting = self
            .start_container(options, claim, gate, found.as_ref())
            .await;
        let settings = self.verifier_settings(options, claim, artifacts);
        self.assemble(starting, settings, resuming, progress, phases, unknown)
            .await
    }

    /// Starts the command container (≈ 200 ms) while the workspace is copied
    /// and checkpointed: the bind mount only needs the directory to exist.
    /// The gate opens now when an earlier run found every workspace-free need
    /// in this image; else once this container is up and has them.
    async fn start_container(
        &self,
        options: &RunOptions,
        claim: &WorkspaceClaim,
        gate: Option<Gate>,
        found: Option<&verify::preflight::FoundNeeds>,
    ) -> Starting {
        let mut spec = ContainerSpec::new(self.image, &claim.dir, self.run_id);
        spec.role = Role::Command;
        spec.network = options.network;
        spec.deps = claim.deps_dir();
        // What the image alone can be asked for before the workspace is
        // there; the gate waits on what no workspace can meet.
        let early_needs: Vec<_> = self
            .needs
            .iter()
            .filter(|r| r.need.image_test().is_some())
            .cloned()
            .collect();
        let free_needs: Vec<_> = early_needs
            .iter()
            .filter(|r| r.need.is_workspace_free())
            .cloned()
            .collect();
        // The gate opens now when every need it waits on is known met;
        // the container is asked for what is still to learn either way.
        let gate = match gate {
            Some(gate) if found.is_some_and(|f| f.has_all(&free_needs)) => {
                let _ = gate.send(true);
                None
            }
            gate => gate,
        };
        let learn = found.filter(|f| !f.has_all(&early_needs)).cloned();
        // What a dependency folder already holds (a resumed run's venv on the
        // `PATH`) is not the image's: needs are recorded only without it.
        let deps_empty = claim.deps_dir().is_none_or(|d| is_empty_dir(&d));
        let docker = self.docker.clone();
        tokio::spawn(async move {
            let mut container = CommandContainer::start(docker, spec).await?;
            if gate.is_none() && learn.is_none() {
                return Ok(container);
            }
            let missing =
                verify::preflight::find_missing_in_image(&mut container, &early_needs).await;
            let met: Vec<_> = match &missing {
                Ok(missing) => early_needs
                    .iter()
                    .filter(|r| !missing.contains(r))
                    .cloned()
                    .collect(),
                Err(_) => Vec::new(),
            };
            if deps_empty && let Some(found) = learn {
                found.record(&met);
            }
            if let Some(gate) = gate {
                let free_met = free_needs.iter().all(|r| met.contains(r));
                let _ = gate.send(missing.is_ok() && free_met);
            }
            Ok::<_, SandboxError>(container)
        })
    }

    fn verifier_settings(
        &self,
        options: &RunOptions,
        claim: &WorkspaceClaim,
        artifacts: &ArtifactDir,
    ) -> VerifierSettings {
        let mut settings = VerifierSettings::new(
            self.image.to_string(),
            claim.dir.clone(),
            self.run_id.to_string(),
            self.inputs.checks.clone(),
            artifacts.path().join("outputs"),
            self.state.stat_cache_paths(self.run_id)[0].clone(),
        );
        settings.allow_zero_tests = options.allow_zero_tests;
        settings.check_timeout = options.limits.command_timeout();
        settings.deps = claim.deps_dir();
        settings
    }

    /// Starts the verifier while the workspace is made, then waits for the
    /// command container and runs the pre-flight: a program the checks need
    /// and the image lacks stops the run now, before any model turn. On an
    /// error everything started is stopped (the claim is the caller's).
    async fn assemble(
        &self,
        starting: Starting,
        settings: VerifierSettings,
        resuming: &Option<Resuming>,
        progress: &Progress,
        phases: &mut PreparePhases,
        unknown: Vec<verify::preflight::Requirement>,
    ) -> Result<(RunWorkspace, CommandContainer, Verifier), RunError> {
        let ws_dir = settings.workspace.clone();
        let (verifier, made) = tokio::join!(start_verifier(self.docker, settings), async {
            match resuming {
                Some(r) => {
                    rebuild_workspace(self.inputs, &ws_dir, self.state, self.run_id, &r.point).await
                }
                None => {
                    copy_workspace(self.inputs, &ws_dir, self.state, self.run_id, progress).await
                }
            }
        });
        let mut verifier = match verifier {
            Ok(v) => v,
            Err(e) => {
                abandon(starting).await;
                drop(made);
                return Err(e.into());
            }
        };
        let ws = match made {
            Ok(made) => {
                (phases.copy_ms, phases.checkpoint_ms) = (made.copy_ms, made.checkpoint_ms);
                phases.prepared_copy = made.refreshed.map(|r| PreparedCopy {
                    copied: r.copied,
                    removed: r.removed,
                    waited_ms: r.waited_ms,
                    compare_ms: r.compare_ms,
                    recopy_ms: r.recopy_ms,
                });
                made.ws
            }
            Err(e) => {
                abandon(starting).await;
                verifier.shutdown().await;
                return Err(e);
            }
        };
        let t = Instant::now();
        progress.phase("sandbox");
        let mut container = match starting.await {
            Ok(Ok(container)) => container,
            failed => {
                verifier.shutdown().await;
                drop(ws);
                return Err(match failed {
                    Ok(Err(e)) => e.into(),
                    _ => RunError::Invalid("starting the command container failed".into()),
                });
            }
        };
        phases.sandbox_ms += elapsed_ms(t);
        // From now on every command and every check is held to the limits.
        container.set_limits(Some(ws.limits));
        verifier.set_limits(ws.limits);
        verifier.set_excludes(ws.checkpoints.excludes().clone());
        let t = Instant::now();
        progress.phase("preflight");
        let bootstraps = !self.inputs.bootstrap.is_empty();
        // Only what the image was never found to have is looked for.
        let checked =
            verify::preflight::check(&mut container, self.image, &unknown, bootstraps).await;
        if let Err(e) = checked {
            tokio::join!(container.shutdown(), verifier.shutdown());
            drop(ws);
            return Err(e.into());
        }
        phases.preflight_ms = elapsed_ms(t);
        Ok((ws, container, verifier))
    }
}

/// Opens the event log (created, or continued for a resumed run), writes a
/// new run's manifest and makes (or restores) its agent.
#[allow(clippy::too_many_arguments)]
fn open_trace(
    options: &RunOptions,
    inputs: &Inputs,
    run_id: &str,
    ws: &RunWorkspace,
    artifacts: &ArtifactDir,
    key: &crate::trace::ReceiptKey,
    source: &dyn ActionSource,
    subscribers: Vec<tokio::sync::mpsc::UnboundedSender<RunEvent>>,
    resuming: Option<Resuming>,
) -> Result<(EventBus, Agent, RunCounters), RunError> {
    let mut counters = RunCounters::default();
    if resuming.is_none() {
        // A command that changes nothing the run would deliver (it only
        // builds what the repository ignores) reports no change.
        counters.last_fingerprint = ws.baseline_fingerprint.clone();
    }
    let agent = match resuming {
        Some(r) => {
            let log = artifacts.open_event_log()?;
            let mut agent = r.point.agent;
            agent.set_approval(options.approval);
            agent.set_hooks(hook_points(options, inputs));
            agent.set_external(external_tools(options, inputs));
            agent.resume_budgets(
                (*options.prices).clone(),
                Some(options.limits.max_tokens),
                options.limits.max_cost_micros,
            );
            counters.edit_seq = r.point.edit_seq;
            counters.call_seq = r.point.call_seq;
            return Ok((EventBus::new(log, subscribers), agent, counters));
        }
        None => {
            // Only the root is looked at now: subdirectories as the agent reaches them.
            let root_instructions =
                super::instructions::read(&ws.root, &[crate::agent::instructions::lookup("")]);
            let mut config = agent_config(options, inputs, source.context_limit());
            config.instructions = root_instructions;
            Agent::new(config)
        }
    };
    let log = artifacts.create_event_log()?;
    let mut manifest = manifest(run_id, options, inputs, ws, source.current());
    manifest.instructions = agent
        .instructions()
        .iter()
        .map(|d| ManifestInstruction {
            path: d.path.clone(),
            bytes: d.bytes,
            truncated: d.truncated,
        })
        .collect();
    artifacts.write_manifest(&manifest, key)?;
    Ok((EventBus::new(log, subscribers), agent, counters))
}

/// The artifact directory of a run being set up and the owner file written
/// before it: removed if the set-up fails (forgotten once the run starts).
struct Unmade(PathBuf, PathBuf);

impl Drop for Unmade {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_file(&self.1);
    }
}

/// What the repository and the options say the run is.
struct Inputs {
    repo: PathBuf,
    checks: Vec<CheckSpec>,
    bootstrap: Vec<String>,
    /// Credential paths left out of the workspace.
    secrets: SecretPaths,
    /// The image or packages `.minicoder.json` asks for.
    image_request: sandbox::derived::ImageRequest,
    /// The workspace limits `.minicoder.json` sets.
    limits: LimitOverrides,
    /// Whether the bootstrap gets the network: trusted for it, and not
    /// switched off.
    bootstrap_network: bool,
    /// The repository's own configuration and how far it is honoured.
    project: Option<crate::protocol::ProjectTrust>,
    /// The repository's hooks, read only when its configuration is trusted.
    repo_hooks: crate::hooks::HooksConfig,
    /// The tools of the person's MCP servers that started, and which of
    /// them run without asking.
    external: (Vec<crate::model::types::ToolSpec>, Vec<String>),
}

/// Checks the repository and the task, and freezes the checks.
fn resolve_inputs(options: &RunOptions) -> Result<Inputs, RunError> {
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
    let files = verify::load_project(&repo)?;
    let (trust, mut notes) = trust_for(&repo, &files, options.trust.as_ref())?;
    let honoured = files.honour(trust);
    let config = honoured.config.as_ref();
    let checks = verify::resolve_checks(&repo, config, &options.checks)?;
    let secrets = verify::secret_paths(&repo, config)?;
    let image_request = honoured.image_request();
    let limits = config.map(|c| c.limits).unwrap_or_default();
    let bootstrap = config.map(|c| c.bootstrap.clone()).unwrap_or_default();
    let network = trust.is_some_and(|t| t.network);
    let project = files.hash.map(|hash| {
        notes.extend(honoured.ignored.iter().cloned());
        crate::protocol::ProjectTrust {
            hash,
            trusted: trust.is_some(),
            network,
            ignored: notes,
        }
    });
    let repo_hooks = match trust {
        Some(_) => repo_hooks(&repo)?,
        None => crate::hooks::HooksConfig::default(),
    };
    Ok(Inputs {
        repo_hooks,
        external: Default::default(),
        limits,
        repo,
        checks,
        bootstrap,
        secrets,
        image_request,
        bootstrap_network: network && options.bootstrap_network,
        project,
    })
}

/// The hooks of `repo`'s `.minicoder/hooks.json` (bounded, never through a
/// link; none without the file).
fn repo_hooks(repo: &Path) -> Result<crate::hooks::HooksConfig, RunError> {
    let path = repo.join(".minicoder").join(crate::hooks::config::FILE);
    let text = verify::config::read_config_text(&path)?;
    match text {
        None => Ok(crate::hooks::HooksConfig::default()),
        Some(text) => crate::hooks::HooksConfig::parse(&text)
            .map_err(|e| RunError::Invalid(format!("{}: {e}", path.display()))),
    }
}

/// How far the person trusts the configuration `files` of `repo`: given
/// for this run (at the hash they saw), or recorded by `minicoder trust` at
/// this hash. With what to tell them when trust was given at another hash.
fn trust_for(
    repo: &Path,
    files: &verify::ProjectFiles,
    grant: Option<&super::options::TrustGrant>,
) -> Result<(Option<verify::Trust>, Vec<String>), RunError> {
    let Some(hash) = files.hash.as_deref() else {
        return Ok((None, Vec::new()));
    };
    let changed = |then: &str| {
        format!(
            "the configuration changed since it was trusted (then {}, now {}): nothing of it that needs trust is honoured until it is trusted again",
            short_hash(then),
            short_hash(hash)
        )
    };
    if let Some(grant) = grant {
        return Ok(match &grant.hash {
            Some(seen) if seen != hash => (None, vec![changed(seen)]),
            _ => (
                Some(verify::Trust {
                    network: grant.network,
                }),
                Vec::new(),
            ),
        });
    }
    let state = StateDir::from_env().map_err(|e| RunError::Invalid(e.to_string()))?;
    let store = verify::TrustStore::load(&state).map_err(RunError::Invalid)?;
    if let Some(trust) = store.lookup(repo, hash) {
        return Ok((Some(trust), Vec::new()));
    }
    let notes = store
        .entry(repo)
        .map(|e| vec![changed(&e.hash)])
        .unwrap_or_default();
    Ok((None, notes))
}

/// The first 12 characters of a configuration hash, as shown to people.
pub fn short_hash(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn open_dirs(
    options: &RunOptions,
    repo: &Path,
    run_id: &str,
) -> Result<(StateDir, ArtifactDir), RunError> {
    let state = StateDir::from_env().map_err(|e| RunError::Invalid(e.to_string()))?;
    state
        .ensure()
        .map_err(|e| RunError::Invalid(format!("cannot create {}: {e}", state.root().display())))?;
    let artifact_root = options
        .artifact_dir
        .clone()
        .unwrap_or_else(|| state.runs_dir().join(run_id));
    if options.artifact_dir.is_none() {
        // Written before the run directory, which has no manifest for a
        // while: `gc` removes a run directory without one only when this
        // names a dead process.
        let owner = sandbox::gc::workspace_owner_file(&state, run_id);
        crate::state::private_dir(&state.workspaces_dir())
            .and_then(|()| write_owner_file(&owner, &ProcessIdentity::current()))
            .map_err(|e| RunError::Invalid(format!("cannot write {}: {e}", owner.display())))?;
    }
    let artifacts = ArtifactDir::create(&artifact_root, repo)?;
    Ok((state, artifacts))
}

/// The workspace directory of a run (and, for a run with a bootstrap, its
/// dependency directory `<run>-deps`), each with its owner file written
/// first, so `gc` never finds an ownerless directory of a live run.
pub(crate) struct WorkspaceClaim {
    pub(crate) dir: PathBuf,
    owner_file: PathBuf,
    deps: Option<(PathBuf, PathBuf)>,
}

impl WorkspaceClaim {
    pub(crate) fn take(state: &StateDir, run_id: &str, with_deps: bool) -> Result<Self, RunError> {
        let dir = state.workspace_dir(run_id);
        let invalid = |what: &Path, e: std::io::Error| {
            RunError::Invalid(format!("cannot create {}: {e}", what.display()))
        };
        crate::state::private_dir(&state.workspaces_dir())
            .map_err(|e| invalid(&state.workspaces_dir(), e))?;
        let owner_file = sandbox::gc::workspace_owner_file(state, run_id);
        write_owner_file(&owner_file, &ProcessIdentity::current()).map_err(|e| {
            RunError::Invalid(format!("cannot write the workspace owner file: {e}"))
        })?;
        // (`PrivateWorkspace::create` gives it to the sandbox user once filled.)
        std::fs::create_dir(&dir).map_err(|e| invalid(&dir, e))?;
        let mut claim = Self {
            dir,
            owner_file,
            deps: None,
        };
        if with_deps {
            let name = format!("{run_id}-deps");
            let (deps, owner) = (
                state.workspace_dir(&name),
                sandbox::gc::workspace_owner_file(state, &name),
            );
            let made = write_owner_file(&owner, &ProcessIdentity::current())
                .and_then(|()| std::fs::create_dir(&deps))
                .and_then(|()| match workspace_owner() {
                    // Empty, and written only by the bootstrap's container.
                    Some((uid, gid)) => std::os::unix::fs::chown(&deps, Some(uid), Some(gid)),
                    None => Ok(()),
                });
            claim.deps = Some((deps.clone(), owner));
            if let Err(e) = made {
                claim.release();
                return Err(invalid(&deps, e));
            }
        }
        Ok(claim)
    }

    /// The dependency directory, if the run has one.
    fn deps_dir(&self) -> Option<PathBuf> {
        self.deps.as_ref().map(|(dir, _)| dir.clone())
    }

    /// [`Self::release`], passing `error` on.
    fn released(self, error: RunError) -> RunError {
        self.release();
        error
    }

    pub(crate) fn release(self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.owner_file);
        if let Some((dir, owner)) = &self.deps {
            let _ = std::fs::remove_dir_all(dir);
            let _ = std::fs::remove_file(owner);
        }
    }
}

async fn start_verifier(
    docker: &Docker,
    settings: VerifierSettings,
) -> Result<Verifier, crate::verify::VerifyError> {
    let mut verifier = Verifier::new(docker.clone(), settings)?;
    verifier.prewarm().await;
    Ok(verifier)
}

/// Copies the source into the workspace (credential files left out) and
/// takes the baseline checkpoint; with the milliseconds each took. A copy
/// prepared after an earlier run on the repository is taken instead of
/// copying when there is one (refreshed against the source first).
async fn copy_workspace(
    inputs: &Inputs,
    ws_dir: &Path,
    state: &StateDir,
    run_id: &str,
    progress: &Progress,
) -> Result<Made, RunError> {
    let progress = progress.clone();
    let (repo, ws_dir, store, secrets, overrides) = (
        inputs.repo.clone(),
        ws_dir.to_path_buf(),
        state.checkpoint_store_dir(run_id),
        inputs.secrets.clone(),
        inputs.limits,
    );
    let prepared_root = state.prepared_dir();
    tokio::task::spawn_blocking(move || -> Result<Made, RunError> {
        let t = Instant::now();
        let taken = take_prepared(
            &prepared_root,
            &repo,
            &secrets,
            &overrides,
            &ws_dir,
            &store,
            &progress,
        );
        let (mut workspace, refreshed) = match taken {
            Some(taken) => (taken.workspace, Some(taken.refreshed)),
            None => {
                let mut shown = 0;
                let max_file_bytes = WorkspaceLimits::new(0, &overrides).max_file_bytes;
                let workspace = PrivateWorkspace::create_limited(
                    &repo,
                    &ws_dir,
                    workspace_owner(),
                    &secrets,
                    max_file_bytes,
                    &mut |done| {
                        // Every tenth of the way (the counts are in each event).
                        let tenth = (done.files * 10).checked_div(done.total).unwrap_or(10);
                        if tenth > shown || done.files == 1 {
                            shown = tenth;
                            progress.copy(done);
                        }
                    },
                )?;
                (workspace, None)
            }
        };
        let copy_ms = elapsed_ms(t);
        // As the copy found it, listing the source.
        let source = workspace.source_state().clone();
        // The copy's size stands for the source's (the default size limit
        // is 4 times it).
        let limits = WorkspaceLimits::new(workspace.allocated_bytes(), &overrides);
        let t = Instant::now();
        progress.phase("checkpoint");
        let root = workspace.root()?;
        // What commands create that the repository ignores is not the
        // agent's change: the rules as they are at the baseline.
        let excludes = crate::workspace::run_excludes(
            &workspace.path().join(".git"),
            workspace.baseline(),
            &repo,
        );
        let mut checkpoints = CheckpointStore::open(&store, workspace.path(), excludes)?
            .with_secret_paths(secrets)
            .with_max_file_bytes(limits.max_file_bytes)
            .with_checkpoint_budget(limits.max_checkpoint_bytes)
            .watch();
        // The baseline's blobs, packed once by the copy, and the hashes
        // the copy took on the way (nothing ran in the workspace since):
        // the checkpoint reads no file again. (A prepared copy's store
        // holds the blobs already, with a stat cache, or the hashes when
        // it was handed over before it settled.)
        checkpoints.adopt_baseline(&mut workspace)?;
        let baseline = checkpoints.create("baseline")?;
        let baseline_raw =
            crate::workspace::baseline_commit_raw(workspace.path(), workspace.baseline())?;
        let ws = RunWorkspace {
            workspace,
            root,
            checkpoints,
            baseline: baseline.id,
            baseline_fingerprint: baseline.fingerprint.to_string(),
            source,
            limits,
            baseline_raw,
        };
        Ok(Made {
            ws,
            copy_ms,
            checkpoint_ms: elapsed_ms(t),
            refreshed,
        })
    })
    .await
    .map_err(|e| RunError::Invalid(format!("copying the workspace failed: {e}")))?
}

/// A workspace made for a run, and what making it took.
struct Made {
    ws: RunWorkspace,
    copy_ms: u64,
    checkpoint_ms: u64,
    /// What refreshing a prepared copy did, when one was taken.
    refreshed: Option<crate::workspace::prepared::Refreshed>,
}

/// The copy prepared for this repository's next run, refreshed and moved
/// into the run's workspace and store directories; `None` to copy afresh.
fn take_prepared(
    root: &Path,
    repo: &Path,
    secrets: &crate::workspace::SecretPaths,
    overrides: &LimitOverrides,
    ws_dir: &Path,
    store: &Path,
    progress: &Progress,
) -> Option<crate::workspace::prepared::Taken> {
    use crate::workspace::prepared::{self, NotTaken};
    if !super::prepare_next::enabled() {
        return None;
    }
    let dir = prepared::prepared_dir(root, repo);
    if !dir.is_dir() {
        return None;
    }
    progress.phase("refresh");
    let settings = super::prepare_next::settings(secrets, overrides, workspace_owner());
    // A copy still being made is worth waiting for: it is further along
    // than a copy started now would be, and it is handed over as soon as
    // its files are copied.
    let patience = std::time::Duration::from_secs(120);
    match prepared::take(repo, &dir, &settings, ws_dir, store, patience) {
        Ok(taken) => Some(taken),
        Err(NotTaken::Missing) => None,
        Err(why) => {
            tracing::info!("the prepared copy was not used: {why:?}");
            None
        }
    }
}

/// Rebuilds the workspace of a resumed run from its saved checkpoint, with
/// the baseline commit it started from; the store keeps its checkpoints.
async fn rebuild_workspace(
    inputs: &Inputs,
    ws_dir: &Path,
    state: &StateDir,
    run_id: &str,
    point: &super::resume_point::ResumePoint,
) -> Result<Made, RunError> {
    let (ws_dir, store, secrets, overrides, point, source) = (
        ws_dir.to_path_buf(),
        state.checkpoint_store_dir(run_id),
        inputs.secrets.clone(),
        inputs.limits,
        point.clone(),
        inputs.repo.clone(),
    );
    tokio::task::spawn_blocking(move || -> Result<Made, RunError> {
        let t = Instant::now();
        let oid = |hex: &str, what: &str| {
            git2::Oid::from_str(hex)
                .map_err(|_| RunError::Invalid(format!("the saved state names no valid {what}")))
        };
        let at = oid(&point.checkpoint, "checkpoint")?;
        let baseline = oid(&point.baseline_checkpoint, "baseline checkpoint")?;
        let commit = oid(&point.workspace_baseline, "baseline commit")?;
        let raw = hex::decode(&point.workspace_baseline_raw)
            .map_err(|_| RunError::Invalid("the saved baseline commit is not hex".into()))?;
        // The stat cache describes the old workspace's files.
        for cache in crate::workspace::CheckpointStore::cache_files(&store) {
            let _ = std::fs::remove_file(cache);
        }
        let max_file_bytes = WorkspaceLimits::new(0, &overrides).max_file_bytes;
        let excludes = crate::workspace::run_excludes(&store, baseline, &source);
        let checkpoints = CheckpointStore::open(&store, &ws_dir, excludes)?
            .with_secret_paths(secrets)
            .with_max_file_bytes(max_file_bytes);
        let fallback = checkpoints.tree_of(baseline)?;
        let from = crate::workspace::RebuildFrom {
            store: &checkpoints,
            at,
            baseline: commit,
            raw_commit: &raw,
            fallback_tree: fallback,
        };
        let workspace = PrivateWorkspace::rebuild(&ws_dir, workspace_owner(), &from, Vec::new())?;
        let copy_ms = elapsed_ms(t);
        let copied = crate::workspace::limits::measure(workspace.path(), &mut |_| false);
        let limits = WorkspaceLimits::new(copied.bytes, &overrides);
        let checkpoints = checkpoints
            .with_checkpoint_budget(limits.max_checkpoint_bytes)
            .watch();
        let root = workspace.root()?;
        let ws = RunWorkspace {
            workspace,
            root,
            checkpoints,
            baseline,
            baseline_fingerprint: point.baseline_fingerprint.clone(),
            source: point.source.clone(),
            limits,
            baseline_raw: raw,
        };
        Ok(Made {
            ws,
            copy_ms,
            checkpoint_ms: 0,
            refreshed: None,
        })
    })
    .await
    .map_err(|e| RunError::Invalid(format!("rebuilding the workspace failed: {e}")))?
}

/// Tells the run's subscribers which phase of setting up is under way
/// (`run.preparing`, live only: the event log does not exist yet).
#[derive(Clone)]
struct Progress(Vec<tokio::sync::mpsc::UnboundedSender<RunEvent>>);

impl Progress {
    fn send(&self, event: RunEvent) {
        for subscriber in &self.0 {
            let _ = subscriber.send(event.clone());
        }
    }

    fn phase(&self, phase: &str) {
        self.send(RunEvent::RunPreparing {
            phase: phase.to_string(),
            done: 0,
            total: 0,
            bytes: 0,
        });
    }

    fn copy(&self, done: CopyProgress) {
        self.send(RunEvent::RunPreparing {
            phase: "copy".to_string(),
            done: done.files,
            total: done.total,
            bytes: done.bytes,
        });
    }
}

/// Waits for a container that is no longer wanted and removes it.
async fn abandon(starting: tokio::task::JoinHandle<Result<CommandContainer, SandboxError>>) {
    if let Ok(Ok(container)) = starting.await {
        container.shutdown().await;
    }
}

/// The request a new run's agent makes first, when it can be known before
/// the workspace is: no bootstrap comes before it, and the root's
/// instruction files are read from the source as the copy will hold them.
fn first_request(
    options: &RunOptions,
    inputs: &Inputs,
    source: &dyn ActionSource,
) -> Option<ModelRequest> {
    if !inputs.bootstrap.is_empty() {
        return None;
    }
    let instructions = super::instructions::read_root_from_source(&inputs.repo, &inputs.secrets)?;
    let mut config = agent_config(options, inputs, source.context_limit());
    config.instructions = instructions;
    let mut agent = Agent::new(config);
    // (The baseline's id is not in any request.)
    let start = Input::Start {
        baseline_checkpoint: String::new(),
    };
    agent
        .handle(start)
        .into_iter()
        .find_map(|effect| match effect {
            Effect::CallModel(request) => Some(request),
            _ => None,
        })
}

fn agent_config(options: &RunOptions, inputs: &Inputs, context_limit: u64) -> AgentConfig {
    let checks = inputs
        .checks
        .iter()
        .map(|c| format!("{}: {}", c.name, c.command))
        .collect();
    let mut tools = crate::tools::specs();
    tools.extend(inputs.external.0.iter().cloned());
    let mut config = AgentConfig::new(options.task.clone(), checks, tools);
    config.external = external_tools(options, inputs);
    config.max_turns = options.limits.max_turns;
    config.max_tokens = options.limits.max_tokens;
    config.max_cost_micros = options.limits.max_cost_micros;
    config.prices = (*options.prices).clone();
    config.context_limit = context_limit;
    config.bootstrap = inputs.bootstrap.clone();
    config.bootstrap_network = inputs.bootstrap_network;
    config.approval = options.approval;
    config.hooks = hook_points(options, inputs);
    config
}

/// Starts the person's MCP servers (none configured: nothing to do) and
/// offers their tools. A server that does not start is left out, said in
/// the log and on stderr.
async fn start_mcp(options: &RunOptions, inputs: &mut Inputs) -> crate::mcp_client::McpServers {
    if options.mcp.servers.is_empty() {
        return Default::default();
    }
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    let started = crate::mcp_client::start(&options.mcp, &env).await;
    for note in &started.notes {
        tracing::warn!("{note}");
    }
    inputs.external = (started.specs, started.allowed);
    started.servers
}

/// Which MCP tools run without asking, and whether anyone can be asked.
fn external_tools(options: &RunOptions, inputs: &Inputs) -> crate::agent::effects::ExternalTools {
    crate::agent::effects::ExternalTools {
        allowed: inputs.external.1.clone(),
        can_ask: options.interactive
            || !options
                .hooks
                .is_empty_for(crate::hooks::HookEvent::PermissionRequest),
    }
}

/// The points the person or the (trusted) repository has hooks for.
fn hook_points(options: &RunOptions, inputs: &Inputs) -> crate::agent::effects::HookPoints {
    use crate::hooks::HookEvent;
    let any = |event| !options.hooks.is_empty_for(event) || inputs.repo_hooks.has(event);
    let person = |event| !options.hooks.is_empty_for(event);
    crate::agent::effects::HookPoints {
        pre_tool_use: any(HookEvent::PreToolUse),
        stop: any(HookEvent::Stop),
        pre_compact: person(HookEvent::PreCompact),
        post_compact: person(HookEvent::PostCompact),
    }
}

fn manifest(
    run_id: &str,
    options: &RunOptions,
    inputs: &Inputs,
    ws: &RunWorkspace,
    model: crate::protocol::ModelId,
) -> Manifest {
    Manifest {
        run_id: run_id.to_string(),
        repo: inputs.repo.display().to_string(),
        task: options.task.clone(),
        baseline_commit: ws.workspace.baseline().to_string(),
        baseline_fingerprint: ws.baseline_fingerprint.clone(),
        source_head: ws.source.head.clone(),
        checks: inputs
            .checks
            .iter()
            .map(|c| ManifestCheck {
                name: c.name.clone(),
                command: c.command.clone(),
            })
            .collect(),
        checks_from_flags: !options.checks.is_empty(),
        bootstrap: inputs.bootstrap.clone(),
        model_chain: vec![model],
        limits: ManifestLimits {
            max_turns: options.limits.max_turns,
            timeout_ms: options.limits.timeout_ms,
            command_timeout_ms: options.limits.command_timeout_ms,
            model_timeout_ms: options.limits.model_timeout_ms,
            max_tokens: options.limits.max_tokens,
            max_cost_micros: options.limits.max_cost_micros,
            network: options.network,
            approval: format!("{:?}", options.approval).to_lowercase(),
            allow_config_edits: options.allow_config_edits,
            workspace: Some(ws.limits),
        },
        left_out: ws.workspace.left_out().to_vec(),
        instructions: Vec::new(),
        project: inputs.project.clone(),
        created: chrono::Utc::now().to_rfc3339(),
        minicoder_version: env!("CARGO_PKG_VERSION").to_string(),
        hmac: String::new(),
    }
}

/// The state directory's signing key; made when there is none, with a
/// warning when runs signed with an earlier key exist (they no longer verify).
fn receipt_key(state: &StateDir) -> Result<crate::trace::ReceiptKey, RunError> {
    let (key, made) = crate::trace::ReceiptKey::load_or_create(state)?;
    if made {
        let earlier = std::fs::read_dir(state.runs_dir())
            .map(|entries| entries.count())
            .unwrap_or(0)
            .saturating_sub(1);
        if earlier > 0 {
            tracing::warn!(
                "made a new receipt key at {}: the receipts and manifests of the {earlier} earlier run(s) were signed with another key and can no longer be verified, resumed or applied",
                crate::trace::ReceiptKey::path_in(state).display()
            );
        }
    }
    Ok(key)
}

/// The run's start, as its first event.
pub(crate) fn started_event(run: &Run) -> RunEvent {
    RunEvent::RunStarted {
        run_id: run.id.run_id.clone(),
        repo: run.id.repo.display().to_string(),
        task: run.id.options.task.clone(),
        baseline_commit: run.ws.workspace.baseline().to_string(),
        fingerprint: run.ws.baseline_fingerprint.clone(),
        artifact_dir: run.artifacts.path().display().to_string(),
        max_turns: run.id.options.limits.max_turns,
        timeout_ms: run.id.options.limits.timeout_ms,
        max_tokens: run.id.options.limits.max_tokens,
        max_cost_micros: run.id.options.limits.max_cost_micros,
        checks: run.sandbox.checks.iter().map(|c| c.name.clone()).collect(),
        source: run.ws.source.clone(),
    }
}
