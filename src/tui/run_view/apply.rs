//! [`RunView::apply`], one function per group of events.

use super::*;

impl RunView {
    /// Folds one event into the view.
    pub fn apply(&mut self, event: &RunEvent) {
        self.revision += 1;
        match event {
            RunEvent::RunStarted { .. }
            | RunEvent::RunPreparing { .. }
            | RunEvent::ProjectConfig { .. }
            | RunEvent::BootstrapStarted { .. }
            | RunEvent::BootstrapFinished { .. }
            | RunEvent::InstructionsLoaded { .. }
            | RunEvent::CheckpointCreated { .. }
            | RunEvent::RunResumed { .. }
            | RunEvent::CheckpointRestored { .. }
            | RunEvent::RunFinished { .. } => self.run_event(event),
            RunEvent::ModelRequest { .. }
            | RunEvent::ModelDelta { .. }
            | RunEvent::ModelResponse { .. }
            | RunEvent::ModelRetry { .. }
            | RunEvent::ModelFallback { .. }
            | RunEvent::ContextCompacted { .. } => self.model_event(event),
            RunEvent::PlanUpdated { .. }
            | RunEvent::ToolStarted { .. }
            | RunEvent::ToolFinished { .. }
            | RunEvent::PolicyRefused { .. }
            | RunEvent::HookRan { .. }
            | RunEvent::ToolRewritten { .. }
            | RunEvent::AgentCorrection { .. }
            | RunEvent::WorkspaceChanged { .. } => self.work_event(event),
            RunEvent::VerificationStarted { .. }
            | RunEvent::VerificationCheck { .. }
            | RunEvent::VerificationFinished { .. } => self.verification_event(event),
            RunEvent::CommandRejected { .. }
            | RunEvent::ApprovalRequested { .. }
            | RunEvent::ApprovalResolved { .. } => self.conversation_event(event),
        }
    }

    /// The run itself: set-up, bootstrap, instructions, checkpoints, the end.
    fn run_event(&mut self, event: &RunEvent) {
        match event {
            RunEvent::RunStarted {
                run_id,
                repo,
                task,
                artifact_dir,
                max_turns,
                timeout_ms,
                max_tokens,
                max_cost_micros,
                checks,
                source,
                ..
            } => {
                self.spend.max_tokens = *max_tokens;
                self.spend.max_cost_micros = *max_cost_micros;
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
            RunEvent::CheckpointCreated { .. } | RunEvent::RunResumed { .. } => {}
            RunEvent::CheckpointRestored { id, reason } => self.note(
                NoteKind::Warning,
                format!("restored checkpoint {}: {reason}", short(id)),
            ),
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
            RunEvent::RunFinished {
                outcome,
                reason,
                duration_ms,
            } => self.finish(Phase::Finished {
                outcome: *outcome,
                reason: reason.clone(),
                duration_ms: *duration_ms,
            }),
            _ => {}
        }
    }

    /// The run ended: the sandbox is gone, and what was still going stopped.
    fn finish(&mut self, phase: Phase) {
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
        self.phase = phase;
    }

    /// The model: requests, streamed text, responses, retries and fallbacks, compaction.
    fn model_event(&mut self, event: &RunEvent) {
        match event {
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
                cost_micros,
                ..
            } => {
                self.model = Some(model.clone());
                self.spend.add(usage, *cost_micros);
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
            _ => {}
        }
    }

    /// The agent's work: the plan, tool calls, refusals, the workspace's diff.
    fn work_event(&mut self, event: &RunEvent) {
        match event {
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
            RunEvent::HookRan {
                hook,
                event,
                exit,
                decision,
                ..
            } if !matches!(decision.as_str(), "continue" | "allow") => {
                let exit = exit.map_or(String::new(), |c| format!(", exit {c}"));
                self.note(
                    NoteKind::Warning,
                    format!("hook {event} {decision}{exit}: `{}`", clean(hook)),
                )
            }
            RunEvent::ToolRewritten {
                name, arguments, ..
            } => self.note(
                NoteKind::Warning,
                format!("a hook rewrote {name}: {}", clean(arguments)),
            ),
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
            _ => {}
        }
    }

    /// Verification: one matrix column per attempt, one cell per check.
    fn verification_event(&mut self, event: &RunEvent) {
        match event {
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
            _ => {}
        }
    }

    /// What the person said and was asked: rejected commands, approvals.
    fn conversation_event(&mut self, event: &RunEvent) {
        match event {
            RunEvent::CommandRejected { reason, .. } => {
                self.note(NoteKind::Warning, reason.clone())
            }
            RunEvent::ApprovalRequested { id, path, call, .. } => {
                if call.is_some() {
                    self.asked_calls.push(id.clone());
                }
                self.note(NoteKind::Info, format!("waiting for approval of {path}"))
            }
            RunEvent::ApprovalResolved {
                id,
                approved,
                reason,
            } => {
                let what = if self.asked_calls.contains(id) {
                    "call"
                } else {
                    "edit"
                };
                let text = match (approved, reason) {
                    (true, _) => format!("{what} approved"),
                    (false, Some(r)) => format!("{what} refused: {r}"),
                    (false, None) => format!("{what} refused"),
                };
                let kind = if *approved {
                    NoteKind::Info
                } else {
                    NoteKind::Warning
                };
                self.note(kind, text);
            }
            _ => {}
        }
    }
}
