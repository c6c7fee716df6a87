//! What the screen knows about a run: [`RunEvent`]s folded into view state.
//!
//! Pure data, no IO and no terminal: the app feeds every event through
//! [`RunView::apply`] and the panes draw from the result.

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
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_estimated: bool,
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
            tokens_in: 0,
            tokens_out: 0,
            tokens_estimated: false,
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

    /// Folds one event into the view.
    pub fn apply(&mut self, event: &RunEvent) {
        self.revision += 1;
        match event {
            RunEvent::RunStarted {
                run_id,
                repo,
                task,
                artifact_dir,
                max_turns,
                timeout_ms,
                checks,
                source,
                ..
            } => {
                if let Some(notice) = source.dirty_notice() {
                    self.note(NoteKind::Warning, notice);
                }
                self.phase = Phase::Running;
                self.preparing = None;
                self.run_id = Some(run_id.clone());
                self.repo = repo.clone();
                self.task = clean(task);
                self.artifact_dir = Some(artifact_dir.clone());
                self.max_turns = *max_turns;
                self.timeout_ms = *timeout_ms;
                self.sandbox = SandboxState::Ready;
                for check in checks {
                    self.matrix.check_index(check);
                }
            }
            RunEvent::RunPreparing {
                phase,
                done,
                total,
                bytes,
            } => {
                self.preparing = Some(crate::protocol::preparing_text(
                    phase, *done, *total, *bytes,
                ));
            }
            RunEvent::ProjectConfig {
                trusted, ignored, ..
            } => {
                if let Some(notice) = crate::protocol::project_notice(*trusted, ignored) {
                    self.note(NoteKind::Warning, clean(&notice));
                }
            }
            RunEvent::BootstrapStarted { commands, network } => {
                self.sandbox = SandboxState::Bootstrapping;
                let net = if *network { "with" } else { "without" };
                self.note(
                    NoteKind::Info,
                    format!("bootstrap {net} network: {}", commands.join(" && ")),
                );
            }
            RunEvent::BootstrapFinished {
                passed,
                duration_ms,
                failure,
            } => {
                self.sandbox = SandboxState::Ready;
                let text = match failure {
                    Some(f) => format!("bootstrap failed after {}: {f}", duration(*duration_ms)),
                    None => format!("bootstrap finished in {}", duration(*duration_ms)),
                };
                let kind = if *passed {
                    NoteKind::Info
                } else {
                    NoteKind::Error
                };
                self.note(kind, text);
            }
            RunEvent::ModelRequest { turn, model, .. } => {
                self.turn = *turn;
                self.model = Some(model.clone());
            }
            RunEvent::ModelDelta { turn, text } => self.model_text(*turn, &clean(text), true),
            RunEvent::ModelResponse {
                turn,
                model,
                content,
                usage,
                ..
            } => {
                self.model = Some(model.clone());
                self.tokens_in += usage.input;
                self.tokens_out += usage.output;
                self.tokens_estimated |= usage.estimated;
                self.finish_model_text(*turn, content.as_deref().map(clean).as_deref());
            }
            RunEvent::ModelRetry {
                model,
                attempt,
                reason,
                delay_ms,
            } => self.note(
                NoteKind::Warning,
                format!(
                    "{}/{}: retry {attempt} in {}: {reason}",
                    model.provider,
                    model.model,
                    duration(*delay_ms)
                ),
            ),
            RunEvent::ModelFallback { from, to, reason } => {
                self.model = Some(to.clone());
                self.note(
                    NoteKind::Warning,
                    format!(
                        "falling back from {}/{} to {}/{}: {reason}",
                        from.provider, from.model, to.provider, to.model
                    ),
                );
            }
            RunEvent::PlanUpdated { items } => self.plan = items.clone(),
            RunEvent::ToolStarted {
                call_id,
                name,
                arguments,
            } => {
                if name == "run_shell" {
                    self.sandbox = SandboxState::Running;
                }
                self.stream.push(StreamEntry::Tool {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    arguments: clean(arguments),
                    state: ToolState::Running,
                    summary: String::new(),
                    result: String::new(),
                    output_file: None,
                });
            }
            RunEvent::ToolFinished {
                call_id,
                ok,
                summary,
                result,
                output_file,
                duration_ms,
                ..
            } => {
                if self.sandbox == SandboxState::Running {
                    self.sandbox = SandboxState::Ready;
                }
                if let Some(StreamEntry::Tool {
                    state,
                    summary: s,
                    result: r,
                    output_file: o,
                    ..
                }) = self.tool_entry(call_id)
                {
                    *state = ToolState::Finished {
                        ok: *ok,
                        duration_ms: *duration_ms,
                    };
                    *s = clean(summary);
                    *r = clean(result);
                    *o = output_file.clone();
                }
            }
            RunEvent::PolicyRefused {
                call_id,
                name,
                reason,
            } => match self.tool_entry(call_id) {
                Some(StreamEntry::Tool { state, summary, .. }) => {
                    *state = ToolState::Refused;
                    *summary = clean(reason);
                }
                _ => self.note(NoteKind::Warning, format!("{name} refused: {reason}")),
            },
            RunEvent::AgentCorrection { message, .. } => {
                self.note(NoteKind::Warning, format!("correction: {message}"))
            }
            RunEvent::WorkspaceChanged {
                changed_files,
                diff,
                ..
            } => {
                if *diff != self.diff {
                    self.diff = diff.clone();
                    self.diff_generation += 1;
                }
                self.changed_files = changed_files.clone();
            }
            RunEvent::CheckpointCreated { .. } | RunEvent::RunResumed { .. } => {}
            RunEvent::CheckpointRestored { id, reason } => self.note(
                NoteKind::Warning,
                format!("restored checkpoint {}: {reason}", short(id)),
            ),
            RunEvent::VerificationStarted {
                attempt,
                reason,
                checks,
            } => {
                if *reason != VerificationReason::Baseline {
                    self.sandbox = SandboxState::Verifying;
                }
                let mut cells = vec![CellState::Pending; self.matrix.checks.len()];
                for check in checks {
                    let i = self.matrix.check_index(check);
                    if cells.len() <= i {
                        cells.resize(i + 1, CellState::Pending);
                    }
                }
                let mut column = Attempt {
                    number: *attempt,
                    reason: *reason,
                    cells,
                    passed: None,
                };
                Matrix::mark_running(&mut column);
                self.matrix.attempts.push(column);
            }
            RunEvent::VerificationCheck { attempt, check } => {
                let i = self.matrix.check_index(&check.name);
                if let Some(column) = self.matrix.attempt_mut(*attempt) {
                    if column.cells.len() <= i {
                        column.cells.resize(i + 1, CellState::Pending);
                    }
                    column.cells[i] = CellState::Done(check.clone());
                    Matrix::mark_running(column);
                }
            }
            RunEvent::VerificationFinished {
                attempt,
                reason,
                passed,
                ..
            } => {
                if *reason != VerificationReason::Baseline {
                    self.sandbox = SandboxState::Ready;
                }
                if let Some(column) = self.matrix.attempt_mut(*attempt) {
                    column.passed = Some(*passed);
                    for cell in &mut column.cells {
                        if *cell == CellState::Running {
                            *cell = CellState::Pending;
                        }
                    }
                }
            }
            RunEvent::InstructionsLoaded {
                path,
                bytes,
                truncated,
            } => {
                let cut = if *truncated { ", cut" } else { "" };
                self.note(
                    NoteKind::Info,
                    format!("instructions {path} ({}{cut})", format::bytes(*bytes)),
                )
            }
            RunEvent::ContextCompacted {
                before_tokens,
                after_tokens,
                messages_compacted,
            } => self.note(
                NoteKind::Info,
                format!(
                    "context compacted: {messages_compacted} messages, {} → {} tokens",
                    tokens(*before_tokens),
                    tokens(*after_tokens)
                ),
            ),
            RunEvent::CommandRejected { reason, .. } => {
                self.note(NoteKind::Warning, reason.clone())
            }
            RunEvent::ApprovalRequested { path, .. } => {
                self.note(NoteKind::Info, format!("waiting for approval of {path}"))
            }
            RunEvent::ApprovalResolved {
                approved, reason, ..
            } => {
                let text = match (approved, reason) {
                    (true, _) => "edit approved".to_string(),
                    (false, Some(r)) => format!("edit refused: {r}"),
                    (false, None) => "edit refused".to_string(),
                };
                let kind = if *approved {
                    NoteKind::Info
                } else {
                    NoteKind::Warning
                };
                self.note(kind, text);
            }
            RunEvent::RunFinished {
                outcome,
                reason,
                duration_ms,
            } => {
                self.sandbox = SandboxState::Removed;
                for attempt in &mut self.matrix.attempts {
                    if attempt.passed.is_none() {
                        for cell in &mut attempt.cells {
                            if matches!(cell, CellState::Running | CellState::Pending) {
                                *cell = CellState::Stopped;
                            }
                        }
                    }
                }
                for entry in &mut self.stream {
                    if let StreamEntry::Model { streaming, .. } = entry {
                        *streaming = false;
                    }
                }
                self.phase = Phase::Finished {
                    outcome: *outcome,
                    reason: reason.clone(),
                    duration_ms: *duration_ms,
                };
            }
        }
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
