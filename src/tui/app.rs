//! The interactive session's state machine: one [`AppEvent`] stream in, [`Op`]s out.
//!
//! `App` never does IO of its own beyond reading an output file the person asked
//! to see: the session loop performs the ops (start a run, send a follow-up,
//! answer an approval, cancel, parse a diff off the UI thread, save the reviewed
//! patch, apply or undo a run, list and read the repository's runs) and
//! feeds the results back as events. Approvals arrive as
//! `approval.requested` events and are answered with [`Op::Answer`], which the
//! session sends on the run's one command channel. Snapshot tests drive it with
//! real [`RunEvent`]s.

mod delivery;
mod keys;
#[cfg(test)]
mod tests;

pub use delivery::{
    Applied, ApplyFailure, ApplyRequest, Browser, CheckLine, Delivery, DeliveryState, OpenRun,
    RunDetail, RunEntry, RunRef, Section, Undone, Verified,
};

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::KeyEvent;
use ratatui::Frame;
use ratatui_textarea::TextArea;

use super::diff::{DiffModel, DiffViewState, ReviewSelection};
use super::keymap::{Context, Keymap};
use super::run_view::{NoteKind, Phase, RunView, artifact_path};
use super::theme::Theme;
use crate::protocol::{ApprovalDecision, ApprovalMode, Outcome, RunEvent, RunReport};

/// Everything that can change the screen, from any source, through one channel.
#[derive(Debug)]
pub enum AppEvent {
    Key(KeyEvent),
    Paste(String),
    Resize,
    Run(RunEvent),
    /// The run returned: its report, or why it could not start.
    RunEnded(Result<Box<RunReport>, String>),
    /// A background parse of the live diff finished.
    DiffParsed {
        generation: u64,
        model: Arc<DiffModel>,
    },
    /// The reviewed patch was saved (or not).
    ReviewSaved(Result<String, String>),
    /// A line of an apply going on (a subset's verification takes a while).
    DeliveryProgress(String),
    /// An apply ended.
    Applied(Result<Applied, ApplyFailure>),
    /// An undo ended.
    Undone(Result<Undone, String>),
    /// The runs of the repository, for the browser.
    RunsListed(Result<Vec<RunEntry>, String>),
    /// A run opened in the browser.
    RunOpened(Result<Box<RunDetail>, String>),
    /// A second passed while a run is going (the elapsed clock).
    Tick,
    /// SIGTERM, or the terminal went away: cancel any run, then quit.
    Terminate,
}

/// What the app asks the session loop to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Start(String),
    FollowUp(String),
    /// The person's answer to `approval.requested { id }`.
    Answer {
        id: String,
        decision: ApprovalDecision,
    },
    Cancel,
    ParseDiff {
        generation: u64,
        text: String,
    },
    SaveReview {
        patch: String,
        artifact_dir: String,
    },
    Apply(ApplyRequest),
    Undo {
        run: RunRef,
        force: bool,
    },
    ListRuns,
    /// Read the run in this artifact directory.
    OpenRun {
        dir: String,
    },
    /// Go on with a run that stopped, from its last resume point.
    Resume {
        run_id: String,
        task: String,
    },
}

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

/// The elapsed clock: real, or fixed for snapshots.
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    Real,
    Fixed(Duration),
}

/// A scrollable text shown over the panes (full tool or check output).
#[derive(Debug, Clone)]
pub struct Pager {
    pub title: String,
    pub lines: Vec<String>,
    pub scroll: usize,
}

#[derive(Debug, Clone)]
pub enum Overlay {
    /// The keys of a context, scrolled by this many lines.
    Help(Context, usize),
    ConfirmCancel,
    /// `q` in the review: leaving now drops the chosen hunks.
    ConfirmDiscard,
    Pager(Pager),
    /// An apply or undo going on, or its result.
    Delivery,
    /// Apply what did not pass verification? Asked before it is done.
    ConfirmUnverified,
    ConfirmUndo(RunRef),
    /// Undo files changed since the apply too.
    ConfirmForceUndo(RunRef),
    /// A run of this repository was interrupted: resume it?
    ConfirmResume {
        run_id: String,
        task: String,
    },
}

/// What the run asked in `approval.requested`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub id: String,
    pub call_id: String,
    pub path: String,
    pub patch: String,
}

/// An edit waiting for `y`/`n`/`a`.
#[derive(Debug)]
pub struct PendingApproval {
    pub request: ApprovalRequest,
    pub patch: DiffModel,
    pub scroll: usize,
    /// Shown, or hidden with Esc to look around first.
    pub visible: bool,
    /// Typing the reason for a refusal.
    pub reason: Option<TextArea<'static>>,
}

/// The final review of the verified patch, per file and per hunk.
#[derive(Debug)]
pub struct Review {
    pub run: RunRef,
    pub model: DiffModel,
    pub selection: ReviewSelection,
    pub state: DiffViewState,
    pub artifact_dir: String,
    pub saved: Option<Result<String, String>>,
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

pub struct App {
    pub view: RunView,
    pub keymap: Keymap,
    pub theme: Theme,
    pub approval_mode: ApprovalMode,
    pub focus: Pane,
    pub zoomed: bool,
    pub input: TextArea<'static>,
    pub overlay: Option<Overlay>,
    pub approval: Option<PendingApproval>,
    pub approvals: VecDeque<ApprovalRequest>,
    pub review: Option<Review>,
    pub diff: Arc<DiffModel>,
    pub diff_state: DiffViewState,
    pub stream_state: StreamState,
    pub matrix_row: usize,
    pub plan_scroll: usize,
    /// A one-line message in the status area until the next key.
    pub flash: Option<String>,
    pub report: Option<Box<RunReport>>,
    /// Where the chosen hunks of the last review were saved.
    pub reviewed_patch: Option<String>,
    /// The runs browser, when open.
    pub browser: Option<Browser>,
    /// The apply or undo on screen.
    pub delivery: Option<Delivery>,
    /// The run applied in this session and not undone: `u` undoes it.
    pub applied_run: Option<RunRef>,
    /// Tasks and follow-ups sent in this session, oldest first (Up recalls them).
    pub history: Vec<String>,
    history_at: Option<usize>,
    pub clock: Clock,
    started: Option<Instant>,
    ops: Vec<Op>,
    /// The run was told to stop; approvals it still sends are refused at once.
    cancelling: bool,
    dirty: bool,
    quit: bool,
    quit_after_run: bool,
}

impl App {
    pub fn new(repo: &str, keymap: Keymap, theme: Theme, approval_mode: ApprovalMode) -> App {
        let mut app = App {
            view: RunView::new(repo),
            keymap,
            theme,
            approval_mode,
            focus: Pane::Input,
            zoomed: false,
            input: TextArea::default(),
            overlay: None,
            approval: None,
            approvals: VecDeque::new(),
            review: None,
            diff: Arc::new(DiffModel::default()),
            diff_state: DiffViewState::default(),
            stream_state: StreamState {
                follow: true,
                ..StreamState::default()
            },
            matrix_row: 0,
            plan_scroll: 0,
            flash: None,
            report: None,
            reviewed_patch: None,
            browser: None,
            delivery: None,
            applied_run: None,
            history: Vec::new(),
            history_at: None,
            clock: Clock::Real,
            started: None,
            ops: Vec::new(),
            cancelling: false,
            dirty: true,
            quit: false,
            quit_after_run: false,
        };
        app.reset_input();
        app
    }

    /// Starts a run of `task` right away (the task was given on the command line).
    pub fn start(&mut self, task: &str) {
        let task = task.trim();
        if task.is_empty() {
            return;
        }
        self.reset_for_run(task);
        self.ops.push(Op::Start(task.to_string()));
    }

    /// Goes on with run `run_id` (whose task was `task`) where it stopped.
    pub fn resume(&mut self, run_id: &str, task: &str) {
        self.reset_for_run(task);
        self.view.note(
            NoteKind::Info,
            format!("resuming run {run_id} from its last resume point"),
        );
        self.ops.push(Op::Resume {
            run_id: run_id.to_string(),
            task: task.to_string(),
        });
    }

    /// At start-up: a run of this repository stopped without ending; the
    /// person is asked whether it goes on.
    pub fn offer_resume(&mut self, run_id: &str, task: &str) {
        self.overlay = Some(Overlay::ConfirmResume {
            run_id: run_id.to_string(),
            task: task.to_string(),
        });
    }

    /// The screen of a new run (or a resumed one) for `task`.
    fn reset_for_run(&mut self, task: &str) {
        self.view.start(task);
        self.cancelling = false;
        self.diff = Arc::new(DiffModel::default());
        self.diff_state = DiffViewState::default();
        self.stream_state = StreamState {
            follow: true,
            ..StreamState::default()
        };
        self.matrix_row = 0;
        self.plan_scroll = 0;
        self.review = None;
        self.report = None;
        self.reviewed_patch = None;
        self.started = Some(Instant::now());
        self.focus = Pane::Stream;
        self.reset_input();
        self.dirty = true;
    }

    pub fn update(&mut self, event: AppEvent) {
        self.dirty = true;
        match event {
            AppEvent::Key(key) => self.handle_key(key),
            AppEvent::Paste(text) => self.paste(&text),
            AppEvent::Resize => {}
            AppEvent::Tick => {}
            AppEvent::Terminate => {
                if self.view.is_running() {
                    self.cancel_run();
                    self.quit_after_run = true;
                } else {
                    self.quit = true;
                }
            }
            AppEvent::Run(event) => self.run_event(event),
            AppEvent::RunEnded(result) => self.run_ended(result),
            AppEvent::DiffParsed { generation, model } => {
                if generation == self.view.diff_generation {
                    self.diff_state.follow_model(&self.diff, &model);
                    self.diff = model;
                } else {
                    self.dirty = false;
                }
            }
            AppEvent::ReviewSaved(result) => {
                match &result {
                    Ok(path) => {
                        self.view.note(
                            NoteKind::Info,
                            format!("reviewed patch: {}", artifact_path(path)),
                        );
                        self.reviewed_patch = Some(path.clone());
                    }
                    Err(e) => self
                        .view
                        .note(NoteKind::Error, format!("could not save the patch: {e}")),
                }
                if let Some(review) = self.review.as_mut() {
                    review.saved = Some(result);
                }
            }
            AppEvent::DeliveryProgress(line) => self.delivery_progress(line),
            AppEvent::Applied(result) => self.applied(result),
            AppEvent::Undone(result) => self.undone(result),
            AppEvent::RunsListed(result) => self.runs_listed(result),
            AppEvent::RunOpened(result) => self.run_opened(result),
        }
    }

    fn run_event(&mut self, event: RunEvent) {
        match &event {
            RunEvent::RunStarted { .. } => {
                self.started.get_or_insert_with(Instant::now);
            }
            RunEvent::ApprovalRequested {
                id,
                call_id,
                path,
                patch,
            } => self.approval_requested(ApprovalRequest {
                id: id.clone(),
                call_id: call_id.clone(),
                path: path.clone(),
                patch: patch.clone(),
            }),
            RunEvent::ApprovalResolved { id, reason, .. } => {
                self.approval_resolved(id, reason.as_deref())
            }
            _ => {}
        }
        let generation = self.view.diff_generation;
        self.view.apply(&event);
        if self.view.diff_generation != generation {
            self.ops.push(Op::ParseDiff {
                generation: self.view.diff_generation,
                text: self.view.diff.clone(),
            });
        }
        if self.stream_state.follow {
            self.stream_state.selected = self.view.stream.len().saturating_sub(1);
        }
    }

    /// Stops the run; edits still waiting for an answer are refused now, since
    /// nobody will answer them.
    pub(crate) fn cancel_run(&mut self) {
        self.ops.push(Op::Cancel);
        self.cancelling = true;
        self.refuse_pending("the run was cancelled");
    }

    fn approval_requested(&mut self, request: ApprovalRequest) {
        if self.cancelling {
            // Asked in the moment between the cancel and the run noticing it.
            self.answer(
                request.id,
                ApprovalDecision::Refuse(Some("the run was cancelled".into())),
            );
        } else {
            self.approvals.push_back(request);
            self.next_approval();
        }
    }

    /// An approval the run resolved without this screen's answer (nobody
    /// answered in time, the run ended) is taken off the screen instead of
    /// inviting a `y` that would mean nothing.
    fn approval_resolved(&mut self, id: &str, reason: Option<&str>) {
        self.approvals.retain(|r| r.id != id);
        if self.approval.as_ref().is_some_and(|a| a.request.id == id)
            && let Some(pending) = self.approval.take()
        {
            self.view.note(
                NoteKind::Warning,
                format!(
                    "the edit of {} was refused: {}",
                    pending.request.path,
                    reason.unwrap_or("nobody answered in time")
                ),
            );
            self.next_approval();
        }
    }

    fn answer(&mut self, id: String, decision: ApprovalDecision) {
        self.ops.push(Op::Answer { id, decision });
    }

    fn refuse_pending(&mut self, why: &str) {
        let pending = self.approval.take().map(|a| a.request);
        let queued: Vec<ApprovalRequest> = self.approvals.drain(..).collect();
        for request in pending.into_iter().chain(queued) {
            self.answer(request.id, ApprovalDecision::Refuse(Some(why.to_string())));
        }
    }

    fn run_ended(&mut self, result: Result<Box<RunReport>, String>) {
        // Whatever happened, nobody is left to answer pending approvals: refuse them.
        self.refuse_pending("the run ended");
        // A hint about the run that was going is stale now.
        self.flash = None;
        if matches!(self.overlay, Some(Overlay::ConfirmCancel)) {
            self.overlay = None;
        }
        match result {
            Err(reason) => {
                self.view.phase = Phase::Failed(reason.clone());
                self.view.note(
                    NoteKind::Error,
                    format!("the run could not start: {reason}"),
                );
            }
            Ok(report) => {
                if !matches!(self.view.phase, Phase::Finished { .. }) {
                    self.view.phase = Phase::Finished {
                        outcome: report.outcome,
                        reason: report.reason.clone(),
                        duration_ms: report.duration_ms,
                    };
                }
                let kind = match report.outcome {
                    Outcome::Success => NoteKind::Info,
                    Outcome::Failure => NoteKind::Error,
                    Outcome::Cancelled => NoteKind::Warning,
                };
                self.view
                    .note(kind, format!("patch: {}", artifact_path(&report.patch)));
                self.open_review(&report);
                self.report = Some(report);
            }
        }
        if self.quit_after_run {
            self.quit = true;
        }
        if self.review.is_none() {
            self.focus = Pane::Input;
        }
        if self.input.is_empty() {
            self.reset_input();
        }
    }

    /// With `--approval final`, a verified patch is reviewed before it is used.
    fn open_review(&mut self, report: &RunReport) {
        if self.approval_mode != ApprovalMode::Final || report.outcome != Outcome::Success {
            return;
        }
        let text =
            std::fs::read_to_string(&report.patch).unwrap_or_else(|_| self.view.diff.clone());
        let model = DiffModel::parse(&text);
        if model.is_empty() {
            return;
        }
        self.review = Some(Review {
            run: RunRef {
                id: report.run_id.clone(),
                dir: report.artifact_dir.clone(),
                task: report.task.clone(),
            },
            selection: ReviewSelection::new(&model),
            model,
            state: DiffViewState::default(),
            artifact_dir: report.artifact_dir.clone(),
            saved: None,
        });
    }

    /// Shows the next queued approval, if none is shown.
    fn next_approval(&mut self) {
        if self.approval.is_some() {
            return;
        }
        if let Some(request) = self.approvals.pop_front() {
            let patch = DiffModel::parse(&request.patch);
            self.approval = Some(PendingApproval {
                request,
                patch,
                scroll: 0,
                visible: true,
                reason: None,
            });
        }
    }

    /// Answers the approval on screen. An answer the run no longer waits for
    /// comes back as `command.rejected` ("too late: ...").
    fn answer_approval(&mut self, decision: ApprovalDecision) {
        if let Some(pending) = self.approval.take() {
            self.answer(pending.request.id, decision.clone());
        }
        if decision == ApprovalDecision::ApproveAll {
            // Everything already queued is part of "the rest of the run".
            while let Some(request) = self.approvals.pop_front() {
                self.answer(request.id, ApprovalDecision::Approve);
            }
        }
        self.next_approval();
    }

    fn paste(&mut self, text: &str) {
        if let Some(reason) = self.approval.as_mut().and_then(|a| a.reason.as_mut()) {
            reason.insert_str(text.replace(['\r', '\n'], " "));
        } else if self.focus == Pane::Input && self.overlay.is_none() && self.review.is_none() {
            self.input.insert_str(text.replace('\r', ""));
        }
    }

    pub(crate) fn reset_input(&mut self) {
        let mut input = TextArea::default();
        input.set_cursor_line_style(ratatui::style::Style::default());
        input.set_placeholder_text(if self.view.is_running() {
            "a follow-up for the agent (sent with its next turn)"
        } else {
            "describe the task, then press Enter"
        });
        self.input = input;
    }

    /// Ops for the session loop, oldest first.
    pub fn take_ops(&mut self) -> Vec<Op> {
        std::mem::take(&mut self.ops)
    }

    /// Whether something changed since the last frame; clears the flag.
    pub(crate) fn take_dirty(&mut self) -> bool {
        std::mem::replace(&mut self.dirty, false)
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.dirty
    }

    pub fn should_quit(&self) -> bool {
        self.quit
    }

    /// The elapsed clock only needs ticks while a run is going.
    pub(crate) fn wants_ticks(&self) -> bool {
        self.view.is_running() && matches!(self.clock, Clock::Real)
    }

    pub fn elapsed(&self) -> Option<Duration> {
        match self.clock {
            Clock::Fixed(_) if self.view.phase == Phase::Idle => None,
            Clock::Fixed(d) => Some(d),
            Clock::Real => match (&self.view.phase, self.started) {
                (Phase::Finished { duration_ms, .. }, _) => {
                    Some(Duration::from_millis(*duration_ms))
                }
                (_, Some(start)) => Some(start.elapsed()),
                _ => None,
            },
        }
    }

    pub fn draw(&mut self, frame: &mut Frame) {
        super::draw::draw(self, frame);
    }
}
