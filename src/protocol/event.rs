//! [`RunEvent`]: the only way a run speaks. The `events.jsonl` writer, the
//! headless printer and the TUI are consumers of the same stream.
//!
//! On disk each event becomes one line `{"seq", "ts", "type", ...fields, "prev"}`
//! (see `trace::EventLog`); `type` is the dotted name below.

use serde::{Deserialize, Serialize};

use super::model::{ModelId, Usage};
use super::plan::PlanItem;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Success,
    Failure,
    Cancelled,
    /// A token or cost budget was used up (`resume` with a larger one goes
    /// on).
    Budget,
}

/// Why a verification ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerificationReason {
    /// The input baseline, before the agent starts.
    Baseline,
    /// The agent asked for completion.
    Completion,
    /// A validated checkpoint was restored and is verified again.
    AfterRestore,
}

/// Why a tool call waits for the person (rather than an edit).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallApproval {
    /// A tool of one of the person's MCP servers, which runs outside the
    /// sandbox, as them.
    pub outside_sandbox: bool,
    /// What a `PreToolUse` hook that asked for the person said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One check of a verification matrix, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    pub name: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub passed: bool,
    pub duration_ms: u64,
    /// Why it failed beyond its exit code: zero tests, a changed workspace, a timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// For a failing check, the first meaningful line of its stderr (else the
    /// first failure line of its stdout), control characters removed: what a
    /// person needs to see beside the exit code (`sh: 1: npm: not found`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    /// The full (redacted) output, relative to the artifact directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_file: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum RunEvent {
    /// A phase of setting the run up, before `run.started` (live only: the
    /// event log does not exist yet). `phase` is `model`, `image`, `copy`,
    /// `checkpoint`, `sandbox` or `preflight`; for `copy`, `done` of `total`
    /// files and `bytes` so far.
    #[serde(rename = "run.preparing")]
    RunPreparing {
        phase: String,
        #[serde(default)]
        done: u64,
        #[serde(default)]
        total: u64,
        #[serde(default)]
        bytes: u64,
    },
    #[serde(rename = "run.started")]
    RunStarted {
        run_id: String,
        repo: String,
        task: String,
        baseline_commit: String,
        fingerprint: String,
        artifact_dir: String,
        max_turns: u32,
        timeout_ms: u64,
        /// The token budget (0 in logs written before it was recorded).
        #[serde(default)]
        max_tokens: u64,
        /// The cost budget, in millionths of a dollar.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_cost_micros: Option<u64>,
        checks: Vec<String>,
        /// The source's HEAD and what of its working tree is not in HEAD.
        #[serde(default)]
        source: super::source::SourceState,
    },
    /// The run goes on after an interruption (or, with a follow-up, after
    /// it finished), from a saved state; `run.started` follows.
    #[serde(rename = "run.resumed")]
    RunResumed {
        run_id: String,
        /// The checkpoint the workspace was rebuilt from.
        checkpoint: String,
        /// What was in flight when the run stopped, as the log shows it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        interrupted: Vec<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        follow_up: Option<String>,
        /// Whether the checks were changed on purpose (`--new-checks`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        new_checks: bool,
    },
    /// The repository's own configuration and how far this run honours it
    /// (right after `run.started`, when the repository has one).
    #[serde(rename = "project.config")]
    ProjectConfig {
        hash: String,
        trusted: bool,
        #[serde(default)]
        network: bool,
        /// What needed trust and is not honoured, one line each.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ignored: Vec<String>,
    },
    #[serde(rename = "bootstrap.started")]
    BootstrapStarted {
        commands: Vec<String>,
        network: bool,
    },
    #[serde(rename = "bootstrap.finished")]
    BootstrapFinished {
        passed: bool,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failure: Option<String>,
    },
    #[serde(rename = "model.request")]
    ModelRequest {
        turn: u32,
        model: ModelId,
        messages: usize,
        estimated_input_tokens: u64,
    },
    /// Streamed text of the reply, as it arrives (not written to events.jsonl).
    #[serde(rename = "model.delta")]
    ModelDelta { turn: u32, text: String },
    #[serde(rename = "model.response")]
    ModelResponse {
        turn: u32,
        model: ModelId,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        tool_calls: Vec<ToolCallSummary>,
        usage: Usage,
        /// What the reply cost, in millionths of a dollar, when its model
        /// has a price.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_micros: Option<u64>,
        duration_ms: u64,
    },
    #[serde(rename = "model.retry")]
    ModelRetry {
        model: ModelId,
        attempt: u32,
        reason: String,
        delay_ms: u64,
    },
    #[serde(rename = "model.fallback")]
    ModelFallback {
        from: ModelId,
        to: ModelId,
        reason: String,
    },
    #[serde(rename = "plan.updated")]
    PlanUpdated { items: Vec<PlanItem> },
    #[serde(rename = "tool.started")]
    ToolStarted {
        call_id: String,
        name: String,
        arguments: String,
    },
    #[serde(rename = "tool.finished")]
    ToolFinished {
        call_id: String,
        name: String,
        ok: bool,
        /// One line for lists: "exit 0 in 412 ms", "12 matches", ...
        summary: String,
        /// What the model saw (capped).
        result: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_file: Option<String>,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        changed_files: Vec<String>,
    },
    #[serde(rename = "policy.refused")]
    PolicyRefused {
        call_id: String,
        name: String,
        reason: String,
    },
    /// One of the person's hooks ran (see the hooks module for the contract).
    #[serde(rename = "hook.ran")]
    HookRan {
        /// The command, or an in-process handler's name.
        hook: String,
        event: String,
        /// The call it was about, for tool events.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// Its exit status; `None` for an in-process handler or a killed hook.
        exit: Option<i32>,
        /// `continue`, `block`, `allow`, `deny`, `ask`, `rewrite`, `stop` or `error`.
        decision: String,
        duration_ms: u64,
    },
    /// A `PreToolUse` hook rewrote a call: it runs with these arguments.
    #[serde(rename = "tool.rewritten")]
    ToolRewritten {
        call_id: String,
        name: String,
        arguments: String,
    },
    #[serde(rename = "agent.correction")]
    AgentCorrection { turn: u32, message: String },
    #[serde(rename = "workspace.changed")]
    WorkspaceChanged {
        fingerprint: String,
        /// The changed paths, or the first of them when there are many.
        changed_files: Vec<String>,
        /// How many paths changed, when `changed_files` lists only the first.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        changed_total: Option<u64>,
        /// The diff against the baseline, for live review: whole, or the
        /// files that fit in a bounded size.
        diff: String,
        /// The length of the whole diff, when `diff` holds only part of it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff_total_bytes: Option<u64>,
    },
    #[serde(rename = "checkpoint.created")]
    CheckpointCreated {
        id: String,
        reason: String,
        fingerprint: String,
        /// Earlier checkpoints pruned to keep the store within its budget.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pruned: Vec<String>,
        /// Bytes of file content the pruning deleted.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        freed_bytes: Option<u64>,
    },
    #[serde(rename = "checkpoint.restored")]
    CheckpointRestored { id: String, reason: String },
    #[serde(rename = "verification.started")]
    VerificationStarted {
        attempt: u32,
        reason: VerificationReason,
        checks: Vec<String>,
    },
    #[serde(rename = "verification.check")]
    VerificationCheck { attempt: u32, check: CheckReport },
    #[serde(rename = "verification.finished")]
    VerificationFinished {
        attempt: u32,
        reason: VerificationReason,
        passed: bool,
        fingerprint: String,
    },
    /// A project instruction file (`AGENTS.md` and the like) entered the
    /// context: at the start for the root, later for a directory the agent
    /// works in.
    #[serde(rename = "instructions.loaded")]
    InstructionsLoaded {
        path: String,
        /// The file's size.
        bytes: u64,
        /// Whether it was cut to its bound.
        truncated: bool,
    },
    #[serde(rename = "context.compacted")]
    ContextCompacted {
        before_tokens: u64,
        after_tokens: u64,
        messages_compacted: usize,
    },
    #[serde(rename = "approval.requested")]
    ApprovalRequested {
        id: String,
        call_id: String,
        /// The file to edit; for a call, the tool's name.
        path: String,
        /// The edit's patch; for a call, its arguments.
        patch: String,
        /// A tool call to be allowed, rather than an edit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call: Option<CallApproval>,
    },
    #[serde(rename = "approval.resolved")]
    ApprovalResolved {
        id: String,
        approved: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A command the run could not take (a late or repeated approval answer).
    #[serde(rename = "command.rejected")]
    CommandRejected { command: String, reason: String },
    #[serde(rename = "run.finished")]
    RunFinished {
        outcome: Outcome,
        reason: String,
        duration_ms: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallSummary {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// What a person is told of a repository configuration the run did not
/// honour in full (`None` when everything was honoured).
pub fn project_notice(trusted: bool, ignored: &[String]) -> Option<String> {
    if ignored.is_empty() {
        return None;
    }
    let whose = if trusted {
        "the repository's configuration is trusted, but"
    } else {
        "the repository's configuration is not trusted, so the run uses the default image and limits and ignores what it asks for beyond the sandbox:"
    };
    Some(format!(
        "{whose} {}; `minicoder trust` (or --trust-project) honours it once you have read it",
        ignored.join("; ")
    ))
}

/// What a `run.preparing` event says: "copying 4,916 files, 104 MB … 62 %",
/// "checkpoint", "starting sandbox", ….
pub fn preparing_text(phase: &str, done: u64, total: u64, bytes: u64) -> String {
    match phase {
        "model" => "checking the model".to_string(),
        "image" => "finding the sandbox image".to_string(),
        "copy" => {
            let percent = (done.min(total) * 100).checked_div(total).unwrap_or(100);
            format!(
                "copying {} files, {} … {percent} %",
                grouped(total),
                size(bytes)
            )
        }
        "checkpoint" => "checkpoint".to_string(),
        "refresh" => "refreshing the copy prepared after the last run".to_string(),
        "sandbox" => "starting sandbox".to_string(),
        "preflight" => "checking the image has what the checks need".to_string(),
        other => other.to_string(),
    }
}

/// `4916` → `4,916`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `104 MB`, `3.2 MB`, `12 KB`.
fn size(bytes: u64) -> String {
    const MB: u64 = 1 << 20;
    if bytes >= 10 * MB {
        format!("{} MB", bytes / MB)
    } else if bytes >= MB {
        format!("{}.{} MB", bytes / MB, bytes % MB * 10 / MB)
    } else {
        format!("{} KB", bytes.div_ceil(1024))
    }
}

impl RunEvent {
    /// The dotted type name, as written in `events.jsonl`.
    #[cfg(test)]
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            RunEvent::RunPreparing { .. } => "run.preparing",
            RunEvent::RunStarted { .. } => "run.started",
            RunEvent::RunResumed { .. } => "run.resumed",
            RunEvent::ProjectConfig { .. } => "project.config",
            RunEvent::BootstrapStarted { .. } => "bootstrap.started",
            RunEvent::BootstrapFinished { .. } => "bootstrap.finished",
            RunEvent::ModelRequest { .. } => "model.request",
            RunEvent::ModelDelta { .. } => "model.delta",
            RunEvent::ModelResponse { .. } => "model.response",
            RunEvent::ModelRetry { .. } => "model.retry",
            RunEvent::ModelFallback { .. } => "model.fallback",
            RunEvent::PlanUpdated { .. } => "plan.updated",
            RunEvent::ToolStarted { .. } => "tool.started",
            RunEvent::ToolFinished { .. } => "tool.finished",
            RunEvent::PolicyRefused { .. } => "policy.refused",
            RunEvent::HookRan { .. } => "hook.ran",
            RunEvent::ToolRewritten { .. } => "tool.rewritten",
            RunEvent::AgentCorrection { .. } => "agent.correction",
            RunEvent::WorkspaceChanged { .. } => "workspace.changed",
            RunEvent::CheckpointCreated { .. } => "checkpoint.created",
            RunEvent::CheckpointRestored { .. } => "checkpoint.restored",
            RunEvent::VerificationStarted { .. } => "verification.started",
            RunEvent::VerificationCheck { .. } => "verification.check",
            RunEvent::VerificationFinished { .. } => "verification.finished",
            RunEvent::InstructionsLoaded { .. } => "instructions.loaded",
            RunEvent::ContextCompacted { .. } => "context.compacted",
            RunEvent::ApprovalRequested { .. } => "approval.requested",
            RunEvent::ApprovalResolved { .. } => "approval.resolved",
            RunEvent::CommandRejected { .. } => "command.rejected",
            RunEvent::RunFinished { .. } => "run.finished",
        }
    }

    /// Whether the event belongs in `events.jsonl` (streamed deltas do not:
    /// the complete text is in `model.response`).
    pub(crate) fn is_persisted(&self) -> bool {
        !matches!(
            self,
            RunEvent::ModelDelta { .. } | RunEvent::RunPreparing { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preparation_reads_with_counts() {
        assert_eq!(
            preparing_text("copy", 3048, 4916, 104 << 20),
            "copying 4,916 files, 104 MB … 62 %"
        );
        assert_eq!(
            preparing_text("copy", 0, 0, 0),
            "copying 0 files, 0 KB … 100 %"
        );
        assert_eq!(
            preparing_text("copy", 1, 2, 3 << 19),
            "copying 2 files, 1.5 MB … 50 %"
        );
        assert_eq!(preparing_text("sandbox", 0, 0, 0), "starting sandbox");
        let e = RunEvent::RunPreparing {
            phase: "checkpoint".into(),
            done: 0,
            total: 0,
            bytes: 0,
        };
        assert_eq!(e.type_name(), "run.preparing");
        assert!(!e.is_persisted());
    }

    #[test]
    fn events_serialize_with_their_dotted_type() {
        let e = RunEvent::CheckpointRestored {
            id: "abc".into(),
            reason: "third failed completion".into(),
        };
        let json = serde_json::to_value(&e).expect("json");
        assert_eq!(json["type"], "checkpoint.restored");
        assert_eq!(json["type"], e.type_name());
        let back: RunEvent = serde_json::from_value(json).expect("parse");
        assert_eq!(back, e);
    }

    #[test]
    fn every_type_name_round_trips_through_serde() {
        let samples = [
            RunEvent::ModelDelta {
                turn: 1,
                text: "x".into(),
            },
            RunEvent::PlanUpdated { items: vec![] },
            RunEvent::RunFinished {
                outcome: Outcome::Cancelled,
                reason: "Ctrl-C".into(),
                duration_ms: 5,
            },
        ];
        for e in samples {
            let json = serde_json::to_value(&e).expect("json");
            assert_eq!(json["type"], e.type_name());
        }
        assert!(
            !RunEvent::ModelDelta {
                turn: 1,
                text: String::new()
            }
            .is_persisted()
        );
    }
}
