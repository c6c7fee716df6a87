//! What an apply or undo is asked to do, and its state on screen.

use super::runs::RunEntry;

/// Which run an apply or undo acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRef {
    pub id: String,
    /// The run's artifact directory.
    pub dir: String,
    pub task: String,
}

impl RunRef {
    pub(crate) fn of(entry: &RunEntry) -> RunRef {
        RunRef {
            id: entry.id.clone(),
            dir: entry.dir.clone(),
            task: entry.task.clone(),
        }
    }
}

/// The hunks a review chose, numbered as [`crate::delivery::hunks`] numbers
/// them; delivery makes the patch of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenHunks {
    /// From 1, in patch order.
    pub numbers: Vec<usize>,
    /// How many choices the review offered: the patch that is applied must
    /// offer as many, or the numbers would not mean what was seen.
    pub of: usize,
}

/// An apply for the session loop to perform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyRequest {
    pub run: RunRef,
    /// The chosen hunks, when they are not the whole patch: they were not
    /// what was verified, so they are verified again before they are written.
    pub subset: Option<ChosenHunks>,
    /// Merge three ways where the source changed since the run's baseline.
    pub merge: bool,
    /// Apply what did not pass verification: only on the person's explicit choice.
    pub unverified: bool,
}

/// One check of a subset's verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// What the applied patch was verified as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verified {
    /// The run's verified patch, whole.
    Run,
    /// The chosen hunks passed the run's checks again.
    Subset(Vec<CheckLine>),
    /// Applied although it did not pass (or was not) verified, as chosen.
    Unverified(Vec<CheckLine>),
}

/// A finished apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// `(letter, path)`: A, M, D, R, C.
    pub changes: Vec<(char, String)>,
    /// Paths merged three ways with the person's edits.
    pub merged: Vec<String>,
    pub verified: Verified,
}

/// Why nothing was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyFailure {
    /// The chosen hunks did not pass the checks, or could not be verified.
    SubsetFailed {
        why: String,
        checks: Vec<CheckLine>,
    },
    /// The run itself did not pass verification.
    Unverified(String),
    /// The source changed where the patch changes it, in these paths.
    Overlap(Vec<String>),
    /// These files do not merge cleanly.
    Unmerged(Vec<String>),
    Other(String),
}

impl ApplyFailure {
    /// Whether applying anyway is a choice to offer.
    pub(crate) fn can_override(&self) -> bool {
        matches!(
            self,
            ApplyFailure::SubsetFailed { .. } | ApplyFailure::Unverified(_)
        )
    }
}

/// A finished undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// `restored PATH` or `removed PATH`.
    pub restored: Vec<String>,
    /// Changed since the apply, left as they are.
    pub skipped: Vec<String>,
}

/// An apply or undo on screen: going, or its result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryState {
    Applying { progress: Option<String> },
    Applied(Applied),
    ApplyFailed(ApplyFailure),
    Undoing { force: bool },
    Undone(Undone),
    UndoFailed(String),
}

/// The apply or undo the delivery screen shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub run: RunRef,
    /// The apply that led here, to try again with `--merge` or unverified.
    pub request: Option<ApplyRequest>,
    pub state: DeliveryState,
}

impl Delivery {
    pub fn is_working(&self) -> bool {
        matches!(
            self.state,
            DeliveryState::Applying { .. } | DeliveryState::Undoing { .. }
        )
    }
}

/// The apply or undo on screen, and what this session applied.
#[derive(Debug, Default)]
pub struct Deliveries {
    pub shown: Option<Delivery>,
    /// The run applied in this session and not undone: `u` undoes it.
    pub applied_run: Option<RunRef>,
}

impl Deliveries {
    /// An apply or undo is going: another waits for it.
    pub fn is_working(&self) -> bool {
        self.shown.as_ref().is_some_and(Delivery::is_working)
    }
}
