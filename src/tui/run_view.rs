//! What the screen knows about a run: [`RunEvent`]s folded into view state.
//!
//! Pure data, no IO and no terminal: the app feeds every event through
//! [`RunView::apply`] and the panes draw from the result.

mod apply;
mod format;
mod matrix;
#[cfg(test)]
mod tests;

pub use format::{artifact_path, bytes, duration, short, tokens};
pub use matrix::{Attempt, CellState, Matrix};

use super::text::clean;
use crate::model::types::ModelId;
use crate::protocol::VerificationReason;
use crate::protocol::{Outcome, RunEvent};
use crate::protocol::{PlanItem, PlanStatus};

/// Where the run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// No run yet: the input box waits for a task.
    Idle,
    /// The task was submitted; the workspace and sandbox are being prepared.
    Starting,
    Running,
    Finished {
        outcome: Outcome,
        reason: String,
        duration_ms: u64,
    },
    /// The run could not start; nothing was changed.
    Failed(String),
}

/// What the sandbox is doing, for the status line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxState {
    Off,
    Starting,
    Bootstrapping,
    Ready,
    Running,
    Verifying,
    Removed,
}

impl SandboxState {
    pub fn label(self) -> &'static str {
        match self {
            SandboxState::Off => "off",
            SandboxState::Starting => "starting",
            SandboxState::Bootstrapping => "bootstrap",
            SandboxState::Ready => "ready",
            SandboxState::Running => "running",
            SandboxState::Verifying => "verifying",
            SandboxState::Removed => "removed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    Info,
    Warning,
    Error,
    /// Something the person typed.
    User,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolState {
    Running,
    Finished { ok: bool, duration_ms: u64 },
    Refused,
}

/// One line of the tool-call stream (expandable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEntry {
    Model {
        turn: u32,
        text: String,
        streaming: bool,
    },
    Tool {
        call_id: String,
        name: String,
        arguments: String,
        state: ToolState,
        summary: String,
        /// What the model saw (capped), shown when expanded.
        result: String,
        /// The full output, relative to the artifact directory.
        output_file: Option<String>,
    },
    Note {
        kind: NoteKind,
        text: String,
    },
    /// An answer of ask mode, shown whole.
    Answer {
        text: String,
    },
}

/// What the run has spent, as its replies reported it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Spend {
    /// Tokens and, when every reply was priced, the cost.
    pub totals: crate::protocol::TokenTotals,
    /// The budgets, when the run has them.
    pub max_tokens: u64,
    pub max_cost_micros: Option<u64>,
    /// The latest reply's counts.
    pub last: Option<crate::protocol::Usage>,
    pub replies: u32,
}

impl Spend {
    /// Counts one reply.
    pub fn add(&mut self, usage: &crate::protocol::Usage, cost_micros: Option<u64>) {
        self.totals.add(usage, cost_micros, self.replies == 0);
        self.last = Some(*usage);
        self.replies = self.replies.saturating_add(1);
    }

    /// The run's cost, when every reply was priced.
    pub fn cost(&self) -> Option<u64> {
        self.totals.cost_micros
    }
}

/// Everything the panes draw, folded from the run's events.
#[derive(Debug, Clone)]
pub struct RunView {
    pub repo: String,
    pub task: String,
    pub phase: Phase,
    pub run_id: Option<String>,
    pub artifact_dir: Option<String>,
    pub model: Option<ModelId>,
    pub turn: u32,
    pub max_turns: u32,
    /// Tokens and cost, in total and of the latest reply.
    pub spend: Spend,
    pub timeout_ms: u64,
    pub sandbox: SandboxState,
    /// The setting-up phase under way, before the run started.
    pub preparing: Option<String>,
    pub plan: Vec<PlanItem>,
    pub stream: Vec<StreamEntry>,
    /// The whole diff against the baseline, as last reported.
    pub diff: String,
    /// Bumped whenever `diff` changes, so a parse job can tell stale results apart.
    pub diff_generation: u64,
    pub changed_files: Vec<String>,
    pub matrix: Matrix,
    /// Bumped on every change, so a frame is only drawn when something changed.
    pub revision: u64,
    /// Approvals asked for calls to MCP servers' tools (not edits), by id.
    pub asked_calls: Vec<String>,
}

impl RunView {
    pub fn new(repo: impl Into<String>) -> RunView {
        RunView {
            repo: repo.into(),
            task: String::new(),
            phase: Phase::Idle,
            run_id: None,
            artifact_dir: None,
            model: None,
            turn: 0,
            max_turns: 0,
            spend: Spend::default(),
            timeout_ms: 0,
            sandbox: SandboxState::Off,
            preparing: None,
            plan: Vec::new(),
            stream: Vec::new(),
            diff: String::new(),
            diff_generation: 0,
            changed_files: Vec::new(),
            matrix: Matrix::default(),
            revision: 0,
            asked_calls: Vec::new(),
        }
    }

    /// A new run of `task` on the same repository: everything else is forgotten.
    pub fn start(&mut self, task: &str) {
        let repo = std::mem::take(&mut self.repo);
        let generation = self.diff_generation + 1;
        *self = RunView::new(repo);
        self.task = task.to_string();
        self.phase = Phase::Starting;
        self.sandbox = SandboxState::Starting;
        self.diff_generation = generation;
        self.revision = generation;
    }

    pub(crate) fn is_running(&self) -> bool {
        matches!(self.phase, Phase::Starting | Phase::Running)
    }

    /// An answer of ask mode, shown as the model's text.
    pub fn answer(&mut self, text: &str) {
        self.stream.push(StreamEntry::Answer { text: clean(text) });
        self.revision += 1;
    }

    pub fn note(&mut self, kind: NoteKind, text: impl Into<String>) {
        self.stream.push(StreamEntry::Note {
            kind,
            text: clean(&text.into()),
        });
        self.revision += 1;
    }

    /// The plan item being worked on, if any.
    pub(crate) fn current_plan_item(&self) -> Option<usize> {
        self.plan
            .iter()
            .position(|item| item.status == PlanStatus::InProgress)
    }

    fn tool_entry(&mut self, call_id: &str) -> Option<&mut StreamEntry> {
        self.stream
            .iter_mut()
            .rev()
            .find(|entry| matches!(entry, StreamEntry::Tool { call_id: id, .. } if id == call_id))
    }

    fn streaming_entry(&mut self, turn: u32) -> Option<&mut String> {
        match self.stream.last_mut() {
            Some(StreamEntry::Model {
                turn: t,
                text,
                streaming: true,
            }) if *t == turn => Some(text),
            _ => None,
        }
    }

    fn model_text(&mut self, turn: u32, delta: &str, streaming: bool) {
        if let Some(text) = self.streaming_entry(turn) {
            text.push_str(delta);
            return;
        }
        self.stream.push(StreamEntry::Model {
            turn,
            text: delta.to_string(),
            streaming,
        });
    }

    fn finish_model_text(&mut self, turn: u32, content: Option<&str>) {
        let content = content.map(str::trim).filter(|c| !c.is_empty());
        if let Some(text) = self.streaming_entry(turn) {
            if let Some(full) = content {
                *text = full.to_string();
            }
            if let Some(StreamEntry::Model { streaming, .. }) = self.stream.last_mut() {
                *streaming = false;
            }
            return;
        }
        if let Some(full) = content {
            self.model_text(turn, full, false);
        }
    }
}
