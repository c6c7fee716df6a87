//! Choosing hunks before a patch is applied.
//!
//! The choices are numbered by [`crate::delivery::hunks`], the one rule of
//! what can be chosen apart (each hunk of a modified or renamed file; an
//! added, deleted or binary file and a change without hunks whole). The
//! review hands those numbers to delivery, which makes the patch of them.

use super::model::DiffModel;
use crate::delivery::hunks::{self, Choice};

/// Which numbered choices of a [`DiffModel`] are chosen; all are at the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewSelection {
    /// The choices in number order (number `n` is index `n - 1`).
    choices: Vec<Choice>,
    chosen: Vec<bool>,
}

impl ReviewSelection {
    pub fn new(model: &DiffModel) -> Self {
        let choices = hunks::number(
            model
                .files
                .iter()
                .map(|file| (file.is_whole_unit(), file.hunks.len())),
        );
        let chosen = vec![true; choices.len()];
        ReviewSelection { choices, chosen }
    }

    /// The index of the choice that holds hunk `hunk` of file `file`.
    fn index(&self, file: usize, hunk: usize) -> Option<usize> {
        self.choices
            .iter()
            .position(|&(f, h)| f == file && h.is_none_or(|h| h == hunk))
    }

    /// Flips hunk `hunk` of file `file` (the whole file when it is one unit).
    pub fn toggle(&mut self, file: usize, hunk: usize) {
        if let Some(i) = self.index(file, hunk) {
            self.chosen[i] = !self.chosen[i];
        }
    }

    /// Chooses every hunk if any is left out, else leaves every hunk out.
    pub(crate) fn toggle_all(&mut self) {
        let all = self.chosen.iter().all(|flag| *flag);
        self.chosen.fill(!all);
    }

    /// Whether hunk `hunk` of file `file` is chosen (false for indices out of range).
    pub(crate) fn is_included(&self, file: usize, hunk: usize) -> bool {
        self.index(file, hunk).is_some_and(|i| self.chosen[i])
    }

    /// (chosen choices, all choices); a whole-unit file counts as one.
    pub fn chosen(&self) -> (usize, usize) {
        let count = self.chosen.iter().filter(|flag| **flag).count();
        (count, self.chosen.len())
    }

    /// The numbers of the chosen hunks, from 1, as delivery numbers them.
    pub fn numbers(&self) -> Vec<usize> {
        (1..=self.chosen.len())
            .filter(|n| self.chosen[n - 1])
            .collect()
    }
}
