//! The diff viewer: a unified diff parsed into files, hunks and lines with word-level
//! highlights, a pane that shows it, and the per-hunk review that builds the patch to
//! apply.
//!
//! Parsing and highlighting happen once, off the UI thread ([`DiffModel::parse`]); a
//! frame then only visits the rows it shows, so even a diff of thousands of lines draws
//! in well under a millisecond.

mod draw;
mod emphasis;
mod model;
mod parse;
mod paths;
mod render;
mod review;
mod rows;
mod state;

pub use model::{DiffLine, DiffModel, FileDiff, FileStatus, Hunk, LineKind};
pub use render::{DiffView, patch_height, render_diff, render_patch};
pub use review::ReviewSelection;
pub use state::DiffViewState;

#[cfg(test)]
mod tests;
