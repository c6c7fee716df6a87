//! The runs browser's state: the runs of this repository, and the one opened.

use std::sync::Arc;

use crate::protocol::CheckReport;
use crate::tui::diff::{DiffModel, DiffViewState};

/// One run of this repository, as the runs browser lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEntry {
    pub id: String,
    /// The run's artifact directory.
    pub dir: String,
    /// `45s`, `12m`, `3h`, `5d`.
    pub age: String,
    pub task: String,
    /// `success`, `failure`, `cancelled`, `running` or `interrupted`.
    pub outcome: String,
    /// Whether the final verification passed (`None`: no report).
    pub verified: Option<bool>,
    pub applied: bool,
    pub changed_files: Vec<String>,
}

/// A run opened in the browser: its diff, verification matrix and events.
#[derive(Debug, Clone)]
pub struct RunDetail {
    pub entry: RunEntry,
    pub reason: String,
    pub summary: Option<String>,
    pub patch: Arc<DiffModel>,
    pub checks: Vec<CheckReport>,
    /// One line per event, made safe to draw.
    pub events: Vec<String>,
    /// Earlier events not read (the log is read from its end, bounded).
    pub events_skipped: usize,
}

/// What the opened run shows: one section at a time, Tab moves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    Diff,
    Verification,
    Events,
}

impl Section {
    pub fn title(self) -> &'static str {
        match self {
            Section::Diff => "Diff",
            Section::Verification => "Verification",
            Section::Events => "Events",
        }
    }

    pub(crate) fn next(self) -> Section {
        match self {
            Section::Diff => Section::Verification,
            Section::Verification => Section::Events,
            Section::Events => Section::Diff,
        }
    }
}

/// A run opened from the list.
#[derive(Debug)]
pub struct OpenRun {
    pub detail: RunDetail,
    pub diff_state: DiffViewState,
    pub section: Section,
    /// The scroll of the verification and events sections.
    pub scroll: usize,
}

/// The runs of this repository, newest first.
#[derive(Debug, Default)]
pub struct Browser {
    pub runs: Vec<RunEntry>,
    pub selected: usize,
    /// A list or a run is being read.
    pub loading: bool,
    pub error: Option<String>,
    pub open: Option<OpenRun>,
}

impl Browser {
    pub(crate) fn selected(&self) -> Option<&RunEntry> {
        self.runs.get(self.selected)
    }
}
