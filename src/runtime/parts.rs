//! What a started run owns, grouped by what it is: who the run is, its
//! containers, its workspace, its trace, and the driver's counters.

use std::path::PathBuf;
use std::time::Instant;

use bollard::Docker;

use super::RunOptions;
use super::bus::EventBus;
use super::steering::Steering;
use crate::agent::reducer::Agent;
use crate::model::ActionSource;
use crate::protocol::{ModelId, PhaseDurations};
use crate::sandbox::CommandContainer;
use crate::state::StateDir;
use crate::tools::PreparedEdit;
use crate::trace::ArtifactDir;
use crate::verify::{CheckSpec, Verifier};
use crate::workspace::{CheckpointStore, PrivateWorkspace, WorkspaceRoot};

/// Who the run is: its id, its inputs, where it keeps its state, its clock.
pub(crate) struct RunIdentity {
    pub run_id: String,
    pub options: RunOptions,
    /// The source repository's work tree (canonical).
    pub repo: PathBuf,
    pub state: StateDir,
    pub started: Instant,
    /// The repository's own configuration and how far the run honours it.
    pub project: Option<crate::protocol::ProjectTrust>,
    /// Signs the manifest, the resume points and the receipt.
    pub key: crate::trace::ReceiptKey,
    /// The hooks of the repository's own `.minicoder/hooks.json`, when the
    /// person trusts its configuration: they run in the command container.
    pub repo_hooks: crate::hooks::HooksConfig,
}

/// The run's containers.
pub(crate) struct RunSandbox {
    /// The person's MCP servers, started with the run.
    pub mcp: crate::mcp_client::McpServers,
    pub docker: Docker,
    pub image: String,
    pub container: CommandContainer,
    pub verifier: Verifier,
    pub checks: Vec<CheckSpec>,
    pub bootstrap: Vec<String>,
    /// The project's dependency-cache volume (written by the bootstrap only).
    /// Whether the bootstrap gets the network (trusted for it).
    pub bootstrap_network: bool,
    /// The run's dependency directory, when it has a bootstrap.
    pub deps: Option<PathBuf>,
    /// The download cache's key (the configuration's hash), when the
    /// repository has a configuration.
    pub download_key: Option<String>,
}

/// The private workspace and its checkpoints.
pub(crate) struct RunWorkspace {
    pub workspace: PrivateWorkspace,
    pub root: WorkspaceRoot,
    pub checkpoints: CheckpointStore,
    pub baseline: git2::Oid,
    pub baseline_fingerprint: String,
    /// The source's HEAD and what of its working tree is not in HEAD.
    pub source: crate::protocol::SourceState,
    /// What the workspace may grow to while a command runs.
    pub limits: crate::workspace::WorkspaceLimits,
    /// The raw bytes of the workspace repository's baseline commit, read
    /// before any command ran (a resumed workspace gets the same commit).
    pub baseline_raw: Vec<u8>,
}

/// What the driver counts and keeps between effects.
#[derive(Default)]
pub(crate) struct RunCounters {
    pub edit_seq: u32,
    /// Numbers every tool call of the run: model call ids repeat across turns.
    pub call_seq: u32,
    pub last_fingerprint: String,
    /// The provider and model that answered last.
    pub model_used: Option<ModelId>,
    /// The workspace's diff stat, when it changed since the agent last got it.
    pub diff_stat: Option<Vec<crate::agent::run_state::FileChange>>,
    /// The checked edit waiting to be applied, by call id.
    pub prepared_edit: Option<(String, PreparedEdit)>,
    pub durations: PhaseDurations,
    /// Files over the per-file limit the model was told about: size, mtime.
    pub known_oversize: std::collections::BTreeMap<PathBuf, (u64, i64)>,
}

/// Everything a started run owns.
pub(crate) struct Run {
    pub id: RunIdentity,
    pub sandbox: RunSandbox,
    pub ws: RunWorkspace,
    pub artifacts: ArtifactDir,
    pub bus: EventBus,
    pub source: Box<dyn ActionSource>,
    pub agent: Agent,
    pub steering: Steering,
    pub counters: RunCounters,
}

impl Run {
    pub fn outputs_dir(&self) -> PathBuf {
        self.artifacts.path().join("outputs")
    }
}

/// Milliseconds since `since`.
pub(crate) fn elapsed_ms(since: std::time::Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}
