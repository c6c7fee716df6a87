//! What goes into the agent ([`Input`]) and what comes out of it
//! ([`Effect`]): the whole interface between the reducer and the driver that
//! performs its effects. Every input is a fact (a result, an answer, a
//! signal); every decision about it is the reducer's.

use serde::{Deserialize, Serialize};

use super::instructions::{InstructionDoc, InstructionLookup};
use super::run_state::FileChange;
use crate::model::types::{ModelReply, ModelRequest, ToolCall, ToolSpec};
use crate::protocol::{ApprovalDecision, ApprovalMode, Outcome, RunEvent, VerificationReason};

/// How long an edit waits for a person before it counts as refused.
pub(crate) const APPROVAL_TIMEOUT_MS: u64 = 30 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentConfig {
    pub task: String,
    /// The frozen checks, as `name: command`, for the runtime contract.
    pub checks: Vec<String>,
    pub max_turns: u32,
    pub max_tokens: u64,
    /// Context budget in tokens (the smallest ceiling of the model chain).
    pub context_limit: u64,
    pub tools: Vec<ToolSpec>,
    /// Commands run before the agent starts; empty for none.
    #[serde(default)]
    pub bootstrap: Vec<String>,
    /// Whether the bootstrap phase has network.
    #[serde(default)]
    pub bootstrap_network: bool,
    /// Who approves edits.
    #[serde(default = "default_approval")]
    pub approval: ApprovalMode,
    /// How long an edit waits for an answer before it is refused.
    #[serde(default = "default_approval_timeout")]
    pub approval_timeout_ms: u64,
    /// The project instructions found at the workspace root when the run
    /// started (each already cut to its bound).
    #[serde(default)]
    pub instructions: Vec<InstructionDoc>,
    /// Which of the person's hooks the agent asks for.
    #[serde(default)]
    pub hooks: HookPoints,
    /// Tools of the person's MCP servers (offered in `tools` as
    /// `mcp__SERVER__TOOL`): which run without asking, and whether anyone
    /// can be asked.
    #[serde(default)]
    pub external: ExternalTools,
    /// Prices by model, from `config.toml` (empty: costs unknown).
    #[serde(default)]
    pub prices: crate::protocol::PriceTable,
    /// The cost budget, in millionths of a dollar.
    #[serde(default)]
    pub max_cost_micros: Option<u64>,
}

/// What the agent needs to know of the person's MCP servers' tools: they
/// run outside the sandbox, so each call asks the person first unless the
/// tool is allow-listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExternalTools {
    /// Tools that run without asking.
    pub allowed: Vec<String>,
    /// Someone can answer a question (the session, or the person's
    /// `PermissionRequest` hooks); else a call that would ask is refused.
    pub can_ask: bool,
}

/// The hook points the person configured hooks for: the agent asks the
/// driver to run them only there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookPoints {
    /// `PreToolUse`: before every tool the driver runs (not the plan or a
    /// completion request, which the agent answers itself).
    pub pre_tool_use: bool,
    /// `Stop`: when a run is about to end verified.
    #[serde(default)]
    pub stop: bool,
    /// `PreCompact` (the agent waits for them) and `PostCompact`.
    #[serde(default)]
    pub pre_compact: bool,
    #[serde(default)]
    pub post_compact: bool,
}

fn default_approval() -> ApprovalMode {
    ApprovalMode::Never
}

fn default_approval_timeout() -> u64 {
    APPROVAL_TIMEOUT_MS
}

impl AgentConfig {
    /// A configuration without bootstrap or approvals.
    pub fn new(task: impl Into<String>, checks: Vec<String>, tools: Vec<ToolSpec>) -> Self {
        Self {
            task: task.into(),
            checks,
            max_turns: 50,
            max_tokens: 2_000_000,
            context_limit: 1_000_000,
            tools,
            bootstrap: Vec::new(),
            bootstrap_network: false,
            approval: ApprovalMode::Never,
            approval_timeout_ms: APPROVAL_TIMEOUT_MS,
            instructions: Vec::new(),
            hooks: HookPoints::default(),
            external: ExternalTools::default(),
            prices: crate::protocol::PriceTable::default(),
            max_cost_micros: None,
        }
    }

    /// Whether `name` is an offered tool of an MCP server.
    pub fn offers_external(&self, name: &str) -> bool {
        name.starts_with("mcp__") && self.tools.iter().any(|t| t.name == name)
    }
}

/// One check of a verification as the driver saw it: its verdict and a
/// bounded part of its output (beginning and end), for the agent to pick
/// the telling lines from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckOutput {
    pub name: String,
    pub exit_code: Option<i32>,
    pub passed: bool,
    pub failure: Option<String>,
    pub output: String,
}

/// What kind of work failed, for the reducer to decide what the failure means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The model chain gave up (after its retries and fallbacks).
    Model,
    /// The command sandbox broke (not a command failing: the container itself).
    Sandbox,
    /// The verifier could not run the checks.
    Verification,
    /// A checkpoint could not be taken.
    Checkpoint,
    /// The validated checkpoint could not be restored.
    Restore,
    /// The baseline could not be recorded again after the bootstrap.
    Baseline,
    /// A check could not even run on the baseline (exit 126/127): the
    /// environment is wrong, not the code.
    Environment,
}

/// What the exported patch is, for the final verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PatchFacts {
    /// The fingerprint of the workspace the patch was exported from.
    pub fingerprint: String,
    /// The kinds of credential the patch would add (never their values).
    pub credentials: Vec<String>,
    /// Workspace paths the patch had to leave out (credential files, paths
    /// git refuses), so the patch is not the workspace that was verified.
    pub left_out: Vec<String>,
    /// Files over the per-file limit that changed, which no patch carries
    /// (each named with why).
    pub too_large: Vec<String>,
    /// Why the patch could not be exported.
    pub export_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The workspace exists and its baseline checkpoint is taken.
    Start {
        baseline_checkpoint: String,
    },
    /// The bootstrap commands ended.
    BootstrapFinished {
        passed: bool,
        failure: Option<String>,
        duration_ms: u64,
    },
    /// The baseline was taken again after the bootstrap ([`Effect::Rebaseline`]).
    Rebaselined {
        checkpoint: String,
    },
    /// A checkpoint asked for by [`Effect::Checkpoint`] exists; `validated`
    /// as the effect asked.
    CheckpointCreated {
        id: String,
        validated: bool,
    },
    ModelReplied(ModelReply),
    /// The `PreToolUse` hooks of a call ran: `refused` with the reason the
    /// model is told (a block, a deny, an ask no one can answer here, a
    /// stop), or the call goes on, with the arguments a hook rewrote.
    PreToolHooksRan {
        call_id: String,
        refused: Option<String>,
        arguments: Option<String>,
        /// A hook asks for the person's confirmation, with its reason.
        ask: Option<String>,
    },
    /// The `PreCompact` hooks ran; what they add is kept for the next turn.
    PreCompactHooksRan {
        context: Vec<String>,
    },
    /// The `Stop` hooks ran; `refused` with the reason when one blocks the end.
    StopHooksRan {
        refused: Option<String>,
    },
    /// A tool call ended (for `edit_file`: applied, or its patch did not fit).
    ToolFinished {
        call_id: String,
        ok: bool,
        content: String,
    },
    /// `edit_file`'s patch fits the workspace and is ready to apply; the
    /// credentials it would add (kinds, never values) are listed, and whether
    /// its path is a credential file kept out of the workspace.
    EditPrepared {
        call_id: String,
        path: String,
        patch: String,
        credentials: Vec<String>,
        credential_file: bool,
    },
    Verified {
        reason: VerificationReason,
        passed: bool,
        /// The workspace fingerprint the verdict is bound to.
        fingerprint: String,
        /// What the model is told: failing checks, exit codes, bounded output.
        feedback: String,
        /// Each check, for the run state's latest verification.
        checks: Vec<CheckOutput>,
    },
    /// The workspace changed: its whole diff stat against the baseline.
    WorkspaceChanged {
        files: Vec<FileChange>,
    },
    /// The instruction files [`Effect::ReadInstructions`] found (none for
    /// directories without one).
    InstructionsRead {
        docs: Vec<InstructionDoc>,
    },
    Restored {
        id: String,
    },
    /// The run's patch is exported.
    Concluded(PatchFacts),
    /// A person answered `approval.requested { id }`.
    Approval {
        id: String,
        decision: ApprovalDecision,
    },
    /// Nobody answered the approval in time.
    ApprovalTimedOut {
        id: String,
    },
    /// Nobody can send commands any more (the front end is gone).
    CommandsClosed,
    /// What the person's hooks add to the conversation (`SessionStart`,
    /// `UserPromptSubmit`): sent with the next turn.
    HookContext {
        event: String,
        text: String,
    },
    /// A message typed by the person while the run works; sent with the next turn.
    FollowUp(String),
    /// The run goes on after an interruption, or after it finished, from a
    /// saved state whose workspace is back as it was then: `note` says what
    /// happened in between, `follow_up` is a new instruction.
    Resumed {
        note: String,
        follow_up: Option<String>,
    },
    /// Work the driver performed failed.
    Failed {
        kind: FailureKind,
        reason: String,
    },
    Cancelled {
        reason: String,
    },
    TimedOut {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Emit(RunEvent),
    /// Run the bootstrap commands; the result comes back as `BootstrapFinished`.
    Bootstrap,
    /// Take the baseline checkpoint again, after the bootstrap: what it wrote
    /// is baseline, never the agent's change.
    Rebaseline,
    /// Take a checkpoint; `validated` means the agent will mark it a
    /// verified-good state once it exists.
    Checkpoint {
        reason: String,
        validated: bool,
    },
    /// Verify the baseline in the background, on its own copy of the baseline
    /// checkpoint, while the agent works; the result comes back as
    /// `Verified { reason: Baseline, .. }` whenever it is ready.
    VerifyBaseline {
        attempt: u32,
    },
    /// Wait for the background baseline verdict (and for commands meanwhile).
    AwaitBaseline,
    /// Mark an existing checkpoint as a verified-good state.
    MarkValidated {
        checkpoint: String,
    },
    CallModel(ModelRequest),
    /// Look for project instructions in these directories, reading (bounded)
    /// the first candidate of each that exists; the result comes back as
    /// `InstructionsRead`.
    ReadInstructions {
        lookups: Vec<InstructionLookup>,
    },
    /// Run the `PreToolUse` hooks of `call`; the verdict comes back as
    /// `PreToolHooksRan`.
    PreToolHooks(ToolCall),
    /// Run the `PreCompact` hooks: the context is about to be compacted
    /// (`tokens` its estimate). They answer with `PreCompactHooksRan`.
    PreCompactHooks {
        tokens: u64,
    },
    /// Run the `PostCompact` hooks (heard, not waited for).
    PostCompactHooks {
        before_tokens: u64,
        after_tokens: u64,
        messages_compacted: usize,
    },
    /// Run the `Stop` hooks: the run is about to end verified. The verdict
    /// comes back as `StopHooksRan`.
    StopHooks {
        stop_hook_active: bool,
    },
    /// Run one tool. For `edit_file` this checks the patch against the
    /// workspace and reports `EditPrepared`; applying it is [`Effect::ApplyEdit`].
    RunTool(ToolCall),
    /// Apply a prepared (and, where needed, approved) edit.
    ApplyEdit {
        call: ToolCall,
        path: String,
        patch: String,
    },
    /// Wait for the person to answer approval `id` (or for its timeout).
    AwaitApproval {
        id: String,
        timeout_ms: u64,
    },
    Verify {
        reason: VerificationReason,
        attempt: u32,
    },
    /// A verification failed: have a fresh verifier container ready for the next.
    PrewarmVerifier,
    Restore {
        checkpoint: String,
    },
    /// The agent decided the outcome: export the patch and report the final
    /// workspace as `Concluded` (which may still turn a success into a failure).
    Finish {
        outcome: Outcome,
        reason: String,
    },
    /// The outcome is final: tear down and write the report.
    End {
        outcome: Outcome,
        reason: String,
    },
}

impl Effect {
    /// Whether the driver waits on this effect for an input.
    pub(crate) fn is_wait(&self) -> bool {
        matches!(self, Effect::AwaitApproval { .. } | Effect::AwaitBaseline)
    }
}

/// Counters for the report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AgentStats {
    pub turns: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Input tokens the providers served from their prompt caches.
    pub cached_tokens: u64,
    /// What the priced replies cost, in millionths of a dollar.
    pub cost_micros: u64,
    /// Replies whose counts were estimated (the provider reported none).
    pub estimated_replies: u32,
    pub tool_calls: u32,
    pub repair_cycles: u32,
    pub rollbacks: u32,
    pub verifications: u32,
}
