//! What a key can do, by name, and the contexts keys are bound in.

/// A named thing a key does; keymap files write these in kebab case (`focus-next`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    Quit,
    Cancel,
    Help,
    FocusNext,
    FocusPrev,
    Zoom,
    ScrollUp,
    ScrollDown,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Expand,
    NextFile,
    PrevFile,
    NextHunk,
    PrevHunk,
    Approve,
    Refuse,
    ApproveAll,
    Dismiss,
    ToggleHunk,
    ToggleAll,
    Apply,
    Submit,
    ShowOutput,
    FocusInput,
    ShowApproval,
    ScrollLeft,
    ScrollRight,
    Undo,
    ListRuns,
    Open,
    SavePatch,
    Resume,
}

/// Every action with its name in keymap files and its line in the help overlay.
const ACTIONS: [(Action, &str, &str); 35] = [
    (Action::Quit, "quit", "quit minicoder"),
    (Action::Cancel, "cancel", "cancel the run (twice: quit)"),
    (Action::Help, "help", "show every key"),
    (Action::FocusNext, "focus-next", "focus the next pane"),
    (Action::FocusPrev, "focus-prev", "focus the previous pane"),
    (Action::Zoom, "zoom", "zoom the focused pane"),
    (Action::ScrollUp, "scroll-up", "scroll up"),
    (Action::ScrollDown, "scroll-down", "scroll down"),
    (Action::PageUp, "page-up", "scroll up a page"),
    (Action::PageDown, "page-down", "scroll down a page"),
    (Action::Top, "top", "go to the top"),
    (Action::Bottom, "bottom", "go to the bottom"),
    (Action::Expand, "expand", "expand or collapse the selection"),
    (Action::NextFile, "next-file", "next file"),
    (Action::PrevFile, "prev-file", "previous file"),
    (Action::NextHunk, "next-hunk", "next hunk"),
    (Action::PrevHunk, "prev-hunk", "previous hunk"),
    (Action::Approve, "approve", "apply this edit"),
    (
        Action::Refuse,
        "refuse",
        "refuse this edit, with an optional reason",
    ),
    (
        Action::ApproveAll,
        "approve-all",
        "approve the rest of the run",
    ),
    (Action::Dismiss, "dismiss", "close"),
    (
        Action::ToggleHunk,
        "toggle-hunk",
        "include or exclude this hunk",
    ),
    (
        Action::ToggleAll,
        "toggle-all",
        "include or exclude every hunk",
    ),
    (Action::Apply, "apply", "apply to the source"),
    (Action::Submit, "submit", "send the task or follow-up"),
    (Action::ShowOutput, "show-output", "show the full output"),
    (
        Action::FocusInput,
        "focus-input",
        "type a task or a follow-up",
    ),
    (
        Action::ShowApproval,
        "show-approval",
        "show the edit waiting for approval",
    ),
    (Action::ScrollLeft, "scroll-left", "scroll the lines left"),
    (
        Action::ScrollRight,
        "scroll-right",
        "scroll the lines right",
    ),
    (Action::Undo, "undo", "undo the apply (asks first)"),
    (Action::ListRuns, "runs", "list this repository's runs"),
    (Action::Open, "open", "open the selected run"),
    (
        Action::SavePatch,
        "save-patch",
        "save the chosen hunks as a patch file",
    ),
    (Action::Resume, "resume", "resume the run where it stopped"),
];

impl Action {
    /// The action's name in keymap files.
    pub fn name(self) -> &'static str {
        ACTIONS
            .iter()
            .find(|(action, _, _)| *action == self)
            .map_or("", |(_, name, _)| name)
    }

    /// One line saying what the action does, for the help overlay.
    pub fn description(self) -> &'static str {
        ACTIONS
            .iter()
            .find(|(action, _, _)| *action == self)
            .map_or("", |(_, _, description)| description)
    }

    /// The action a keymap file names, if any.
    pub(crate) fn from_name(name: &str) -> Option<Action> {
        ACTIONS
            .iter()
            .find(|(_, known, _)| *known == name)
            .map(|(action, _, _)| *action)
    }

    /// Every action name, for error messages.
    pub fn names() -> Vec<&'static str> {
        ACTIONS.iter().map(|(_, name, _)| *name).collect()
    }
}

/// Where keys are read: the global map applies everywhere unless a context binds the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Context {
    Global,
    Input,
    Stream,
    Diff,
    Matrix,
    Plan,
    Approval,
    Review,
    Runs,
    Show,
    Help,
}

impl Context {
    pub(crate) const ALL: [Context; 11] = [
        Context::Global,
        Context::Input,
        Context::Stream,
        Context::Diff,
        Context::Matrix,
        Context::Plan,
        Context::Approval,
        Context::Review,
        Context::Runs,
        Context::Show,
        Context::Help,
    ];

    /// The context's table name in keymap files.
    pub fn name(self) -> &'static str {
        match self {
            Context::Global => "global",
            Context::Input => "input",
            Context::Stream => "stream",
            Context::Diff => "diff",
            Context::Matrix => "matrix",
            Context::Plan => "plan",
            Context::Approval => "approval",
            Context::Review => "review",
            Context::Runs => "runs",
            Context::Show => "show",
            Context::Help => "help",
        }
    }

    /// How the help names the context: by the title of its pane on screen.
    pub fn title(self) -> &'static str {
        match self {
            Context::Global => "Everywhere",
            Context::Input => "Task / Follow-up",
            Context::Stream => "Activity",
            Context::Diff => "Diff",
            Context::Matrix => "Verification",
            Context::Plan => "Plan",
            Context::Approval => "Approval",
            Context::Review => "Review",
            Context::Runs => "Runs",
            Context::Show => "Run",
            Context::Help => "Help",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Context> {
        Context::ALL
            .into_iter()
            .find(|context| context.name() == name)
    }

    /// Whether typing goes into text here, so plain characters must not trigger global keys.
    pub(crate) fn is_text_entry(self) -> bool {
        self == Context::Input
    }
}
