//! The one channel into a run, and the run's deadline. Every blocking effect
//! runs through [`Steering::race`]: it ends early on a cancel command, the
//! deadline, or background work that must be heard at once (a baseline that
//! found the environment broken), and keeps every other command that
//! arrives meanwhile, in order, for the agent once the effect is done.

use std::collections::VecDeque;
use std::future::Future;

use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::agent::effects::Input;
use crate::protocol::Command;

/// Why a blocking effect did not finish.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Interrupted {
    Cancelled,
    TimedOut,
    /// Background work has news that ends the effect (see [`Steering::alarm`]).
    Background,
}

pub(crate) struct Steering {
    commands: UnboundedReceiver<Command>,
    open: bool,
    /// Commands that arrived while an effect was in flight.
    buffered: VecDeque<Command>,
    /// Cancelled with the run, for work that outlives one effect (the
    /// background baseline verification).
    cancel: CancellationToken,
    /// Set by background work whose result must interrupt the effect in
    /// flight; heard once.
    alarm: CancellationToken,
    alarm_heard: bool,
    pub(crate) deadline: Instant,
    timeout_s: u64,
}

impl Steering {
    pub(crate) fn new(
        commands: UnboundedReceiver<Command>,
        deadline: Instant,
        timeout_s: u64,
    ) -> Self {
        Self {
            commands,
            open: true,
            buffered: VecDeque::new(),
            cancel: CancellationToken::new(),
            alarm: CancellationToken::new(),
            alarm_heard: false,
            deadline,
            timeout_s,
        }
    }

    pub(crate) fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// The token background work sets to interrupt the effect in flight.
    pub(crate) fn alarm(&self) -> CancellationToken {
        self.alarm.clone()
    }

    /// Whether the alarm went off and was not taken yet; taking it.
    pub(crate) fn take_alarm(&mut self) -> bool {
        let fresh = self.alarm.is_cancelled() && !self.alarm_heard;
        self.alarm_heard |= fresh;
        fresh
    }

    /// Runs `work` unless the run is cancelled, its deadline passes, or the
    /// alarm goes off first.
    pub(crate) async fn race<T>(
        &mut self,
        work: impl Future<Output = T>,
    ) -> Result<T, Interrupted> {
        tokio::pin!(work);
        loop {
            tokio::select! {
                out = &mut work => return Ok(out),
                command = self.commands.recv(), if self.open => match command {
                    Some(Command::Cancel) => {
                        self.cancel.cancel();
                        return Err(Interrupted::Cancelled);
                    }
                    Some(other) => self.buffered.push_back(other),
                    None => self.open = false,
                },
                () = tokio::time::sleep_until(self.deadline) => return Err(Interrupted::TimedOut),
                () = self.alarm.cancelled(), if !self.alarm_heard => {
                    return Err(Interrupted::Background);
                }
            }
        }
    }

    /// The inputs of the commands that arrived and were not taken yet, in order.
    pub(crate) fn pending(&mut self) -> Vec<Input> {
        while self.open {
            match self.commands.try_recv() {
                Ok(command) => self.buffered.push_back(command),
                Err(tokio::sync::mpsc::error::TryRecvError::Empty) => break,
                Err(tokio::sync::mpsc::error::TryRecvError::Disconnected) => self.open = false,
            }
        }
        let commands: Vec<Command> = self.buffered.drain(..).collect();
        commands.into_iter().map(|c| self.input(c)).collect()
    }

    /// Waits for the next command until `until` (or the deadline): its input,
    /// `CommandsClosed` when nobody can send any more, or `timed_out` at `until`.
    pub(crate) async fn next_until(&mut self, until: Instant, timed_out: Input) -> Input {
        if let Some(command) = self.buffered.pop_front() {
            return self.input(command);
        }
        if !self.open {
            return Input::CommandsClosed;
        }
        tokio::select! {
            command = self.commands.recv() => match command {
                Some(command) => self.input(command),
                None => {
                    self.open = false;
                    Input::CommandsClosed
                }
            },
            () = tokio::time::sleep_until(until) => timed_out,
            () = tokio::time::sleep_until(self.deadline) => self.timed_out(),
        }
    }

    fn input(&mut self, command: Command) -> Input {
        match command {
            Command::Approval { id, decision } => Input::Approval { id, decision },
            Command::FollowUp { text } => Input::FollowUp(text),
            Command::Cancel => {
                self.cancel.cancel();
                cancelled()
            }
        }
    }

    /// The input of an interrupted effect.
    pub(crate) fn interrupted(&self, why: Interrupted) -> Input {
        match why {
            Interrupted::Cancelled => cancelled(),
            Interrupted::TimedOut => self.timed_out(),
            // The driver replaces it with what the background work found.
            Interrupted::Background => Input::Failed {
                kind: crate::agent::effects::FailureKind::Environment,
                reason: "background work interrupted the run".into(),
            },
        }
    }

    fn timed_out(&self) -> Input {
        Input::TimedOut {
            reason: format!("the run's time budget ({} s) ran out", self.timeout_s),
        }
    }
}

fn cancelled() -> Input {
    Input::Cancelled {
        reason: "cancelled by the user".into(),
    }
}
