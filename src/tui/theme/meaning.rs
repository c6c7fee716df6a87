//! The semantic names a theme gives styles to.

/// What a piece of the screen means; each meaning has one style in a [`super::Theme`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Meaning {
    Text,
    Border,
    BorderFocused,
    Title,
    Status,
    Selection,
    PlanPending,
    PlanInProgress,
    PlanDone,
    ToolOk,
    ToolError,
    ToolRunning,
    DiffAdded,
    DiffRemoved,
    DiffAddedWord,
    DiffRemovedWord,
    DiffHunk,
    CheckPass,
    CheckFail,
    CheckRunning,
    ApprovalBorder,
    HelpKey,
}

impl Meaning {
    /// Every meaning, in the order themes list them.
    pub(crate) const ALL: [Meaning; 22] = [
        Meaning::Text,
        Meaning::Border,
        Meaning::BorderFocused,
        Meaning::Title,
        Meaning::Status,
        Meaning::Selection,
        Meaning::PlanPending,
        Meaning::PlanInProgress,
        Meaning::PlanDone,
        Meaning::ToolOk,
        Meaning::ToolError,
        Meaning::ToolRunning,
        Meaning::DiffAdded,
        Meaning::DiffRemoved,
        Meaning::DiffAddedWord,
        Meaning::DiffRemovedWord,
        Meaning::DiffHunk,
        Meaning::CheckPass,
        Meaning::CheckFail,
        Meaning::CheckRunning,
        Meaning::ApprovalBorder,
        Meaning::HelpKey,
    ];

    /// The dotted key that names this meaning in a theme file, e.g. `ui.border.focused`.
    pub fn key(self) -> &'static str {
        match self {
            Meaning::Text => "ui.text",
            Meaning::Border => "ui.border",
            Meaning::BorderFocused => "ui.border.focused",
            Meaning::Title => "ui.title",
            Meaning::Status => "ui.status",
            Meaning::Selection => "ui.selection",
            Meaning::PlanPending => "plan.pending",
            Meaning::PlanInProgress => "plan.in_progress",
            Meaning::PlanDone => "plan.done",
            Meaning::ToolOk => "tool.ok",
            Meaning::ToolError => "tool.error",
            Meaning::ToolRunning => "tool.running",
            Meaning::DiffAdded => "diff.added",
            Meaning::DiffRemoved => "diff.removed",
            Meaning::DiffAddedWord => "diff.added.word",
            Meaning::DiffRemovedWord => "diff.removed.word",
            Meaning::DiffHunk => "diff.hunk",
            Meaning::CheckPass => "check.pass",
            Meaning::CheckFail => "check.fail",
            Meaning::CheckRunning => "check.running",
            Meaning::ApprovalBorder => "approval.border",
            Meaning::HelpKey => "help.key",
        }
    }

    /// The meaning a dotted key names, if any.
    pub(crate) fn from_key(key: &str) -> Option<Meaning> {
        Meaning::ALL
            .into_iter()
            .find(|meaning| meaning.key() == key)
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}
