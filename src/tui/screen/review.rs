//! The final review of the verified patch, per file and per hunk.

use super::delivery::RunRef;
use crate::tui::diff::{DiffModel, DiffViewState, ReviewSelection};

#[derive(Debug)]
pub struct Review {
    pub run: RunRef,
    /// The patch file reviewed (the run's `final.patch`).
    pub patch: String,
    pub model: DiffModel,
    pub selection: ReviewSelection,
    pub state: DiffViewState,
    pub artifact_dir: String,
    pub saved: Option<Result<String, String>>,
}
