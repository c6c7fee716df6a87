//! The panes' own state: which one has the focus, how each is scrolled, and
//! the task box with what was sent before.

use std::collections::HashSet;
use std::sync::Arc;

use ratatui_textarea::TextArea;

use crate::tui::diff::{DiffModel, DiffViewState};
use crate::tui::keymap::Context;

/// The panes, in focus order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Stream,
    Diff,
    Matrix,
    Plan,
    Input,
}

impl Pane {
    pub(crate) const ORDER: [Pane; 5] = [
        Pane::Stream,
        Pane::Diff,
        Pane::Matrix,
        Pane::Plan,
        Pane::Input,
    ];

    pub fn context(self) -> Context {
        match self {
            Pane::Stream => Context::Stream,
            Pane::Diff => Context::Diff,
            Pane::Matrix => Context::Matrix,
            Pane::Plan => Context::Plan,
            Pane::Input => Context::Input,
        }
    }
}

/// The tool-call stream's selection and scroll.
#[derive(Debug, Clone, Default)]
pub struct StreamState {
    pub selected: usize,
    pub offset: usize,
    /// Keep the newest entry selected as entries arrive.
    pub follow: bool,
    pub expanded: HashSet<usize>,
}

impl StreamState {
    /// Following the newest entry, nothing expanded.
    pub fn following() -> StreamState {
        StreamState {
            follow: true,
            ..StreamState::default()
        }
    }
}

/// The panes of a run: the focus, the zoom, and each pane's scroll.
#[derive(Debug)]
pub struct Panes {
    pub focus: Pane,
    pub zoomed: bool,
    /// The live diff, parsed off the UI thread.
    pub diff: Arc<DiffModel>,
    pub diff_state: DiffViewState,
    pub stream: StreamState,
    pub matrix_row: usize,
    pub plan_scroll: usize,
}

impl Default for Panes {
    fn default() -> Panes {
        Panes {
            focus: Pane::Input,
            zoomed: false,
            diff: Arc::new(DiffModel::default()),
            diff_state: DiffViewState::default(),
            stream: StreamState::following(),
            matrix_row: 0,
            plan_scroll: 0,
        }
    }
}

impl Panes {
    /// The panes of a new run: scrolled to the start, the activity focused.
    pub fn for_run(&mut self) {
        *self = Panes {
            focus: Pane::Stream,
            zoomed: self.zoomed,
            ..Panes::default()
        };
    }
}

/// The task box and the tasks and follow-ups sent in this session.
#[derive(Debug, Default)]
pub struct Composer {
    pub input: TextArea<'static>,
    /// What Enter does when no run is going: start a run, or ask.
    pub mode: InputMode,
    /// A question is being answered.
    pub asking: bool,
    /// Oldest first (Up recalls them).
    pub history: Vec<String>,
    pub history_at: Option<usize>,
}

/// The session's two modes: tasks start runs, or questions are answered
/// read-only (`/ask`, `/code` switch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum InputMode {
    #[default]
    Code,
    Ask,
}

impl Composer {
    /// An empty box whose placeholder says what Enter will do.
    pub fn reset(&mut self, running: bool) {
        let mut input = TextArea::default();
        input.set_cursor_line_style(ratatui::style::Style::default());
        input.set_placeholder_text(match (running, self.mode) {
            (true, _) => "a follow-up for the agent (sent with its next turn)",
            (false, InputMode::Code) => "describe the task, then press Enter",
            (false, InputMode::Ask) => {
                "a question about the code (read-only); /code TASK starts a run that keeps the answers"
            }
        });
        self.input = input;
    }
}
