//! The verification matrix as the screen knows it: checks × attempts.

use crate::protocol::{CheckReport, VerificationReason};

/// One cell of the verification matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellState {
    Pending,
    Running,
    Done(CheckReport),
    /// The run ended before this check finished (a baseline it no longer needed).
    Stopped,
}

/// One verification: a column of the matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub number: u32,
    pub reason: VerificationReason,
    /// One cell per check, in the order of [`Matrix::checks`].
    pub cells: Vec<CellState>,
    pub passed: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Matrix {
    pub checks: Vec<String>,
    pub attempts: Vec<Attempt>,
}

impl Matrix {
    pub(super) fn check_index(&mut self, name: &str) -> usize {
        match self.checks.iter().position(|c| c == name) {
            Some(i) => i,
            None => {
                self.checks.push(name.to_string());
                for attempt in &mut self.attempts {
                    attempt.cells.push(CellState::Pending);
                }
                self.checks.len() - 1
            }
        }
    }

    pub(super) fn attempt_mut(&mut self, number: u32) -> Option<&mut Attempt> {
        self.attempts.iter_mut().rev().find(|a| a.number == number)
    }

    /// Checks run in order, so the first pending cell of an unfinished attempt is the one running.
    pub(super) fn mark_running(attempt: &mut Attempt) {
        if attempt.passed.is_some() {
            return;
        }
        for cell in &mut attempt.cells {
            match cell {
                CellState::Running => return,
                CellState::Pending => {
                    *cell = CellState::Running;
                    return;
                }
                CellState::Done(_) | CellState::Stopped => {}
            }
        }
    }
}
