//! The interactive session's state machine: one [`AppEvent`] stream in, [`Op`]s out.
//!
//! What the session is doing is one [`Screen`] (the run's panes, the final
//! review, the runs browser) with a stack of [`Popups`] over it; every pane
//! and modal owns its state in [`crate::tui::screen`], and the widgets draw
//! from that state and the [`RunView`], never from the `App`. A key is
//! looked up as an [`crate::tui::keymap::Action`] in the context on top, and
//! what it does is decided by a pure function of that context's state
//! (`reduce`), returned as effects the app then performs: changes to those
//! components, and ops.
//!
//! `App` never does IO of its own beyond reading an output file the person asked
//! to see: the session loop performs the ops (start a run, send a follow-up,
//! answer an approval, cancel, parse a diff off the UI thread, save the reviewed
//! patch, apply or undo a run, list and read the repository's runs) and
//! feeds the results back as events. Approvals arrive as
//! `approval.requested` events and are answered with [`Op::Answer`], which the
//! session sends on the run's one command channel. Snapshot tests drive it with
//! real [`RunEvent`]s.

mod approvals;
mod ask;
mod delivery;
mod keys;
mod pager;
mod reduce;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod transitions;

pub use super::screen::approval::{ApprovalRequest, Approvals, PendingApproval};
pub use super::screen::delivery::{
    Applied, ApplyFailure, ApplyRequest, CheckLine, ChosenHunks, Deliveries, Delivery,
    DeliveryState, RunRef, Undone, Verified,
};
pub use super::screen::panes::{Composer, Pane, Panes, StreamState};
pub use super::screen::popups::{Overlay, Pager, Popups};
pub use super::screen::runs::{Browser, OpenRun, RunDetail, RunEntry, Section};
pub use super::screen::{Clock, Review, Screen, Settings};

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossterm::event::KeyEvent;
use ratatui_textarea::TextArea;

use super::diff::{DiffModel, DiffViewState, ReviewSelection};
use super::keymap::Keymap;
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
    /// What ask mode looked at while answering.
    AskUpdate(crate::runtime::ask::AskUpdate),
    /// A question was answered (or could not be).
    Asked(Result<Box<crate::runtime::ask::Answer>, String>),
}

/// Sends events into the app from anywhere (signals, background jobs): a
/// background job holds one of these, never the app.
pub type AppSender = tokio::sync::mpsc::UnboundedSender<AppEvent>;

/// What the app asks the session loop to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Start(String),
    /// A question in ask mode (read-only, no run).
    Ask(String),
    /// A run of this task that keeps what ask mode learnt.
    Code(String),
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
    /// Save hunks `hunks` of the patch file `patch` as the reviewed patch.
    SaveReview {
        patch: String,
        hunks: ChosenHunks,
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

/// The run this session started or resumed, as far as the session keeps it.
#[derive(Debug, Default)]
struct RunSession {
    started: Option<Instant>,
    /// The run was told to stop; approvals it still sends are refused at once.
    cancelling: bool,
    report: Option<Box<RunReport>>,
    /// Where the chosen hunks of the last review were saved.
    reviewed_patch: Option<String>,
}

/// What a transition leaves for the session loop: ops to perform, whether
/// to draw, whether to quit.
#[derive(Debug, Default)]
struct Effects {
    ops: Vec<Op>,
    dirty: bool,
    quit: bool,
    quit_after_run: bool,
}

/// The session: what the run says ([`RunView`]) and what the person is doing
/// with it, one component each. A key's effects are decided from these
/// without changing them, then performed; events change them directly.
/// Both leave [`Op`]s for the loop.
pub struct App {
    pub view: RunView,
    pub settings: Settings,
    pub screen: Screen,
    pub popups: Popups,
    pub panes: Panes,
    pub composer: Composer,
    pub approvals: Approvals,
    pub deliveries: Deliveries,
    /// A one-line message in the status area until the next key.
    pub flash: Option<String>,
    run: RunSession,
    effects: Effects,
}

impl App {
    pub fn new(repo: &str, keymap: Keymap, theme: Theme, approval_mode: ApprovalMode) -> App {
        let mut app = App {
            view: RunView::new(repo),
            settings: Settings {
                keymap,
                theme,
                approval_mode,
                clock: Clock::Real,
            },
            screen: Screen::Panes,
            popups: Popups::default(),
            panes: Panes::default(),
            composer: Composer::default(),
            approvals: Approvals::default(),
            deliveries: Deliveries::default(),
            flash: None,
            run: RunSession::default(),
            effects: Effects {
                dirty: true,
                ..Effects::default()
            },
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
        self.effects.ops.push(Op::Start(task.to_string()));
    }

    /// Goes on with run `run_id` (whose task was `task`) where it stopped.
    pub fn resume(&mut self, run_id: &str, task: &str) {
        self.reset_for_run(task);
        self.view.note(
            NoteKind::Info,
            format!("resuming run {run_id} from its last resume point"),
        );
        self.effects.ops.push(Op::Resume {
            run_id: run_id.to_string(),
            task: task.to_string(),
        });
    }

    /// At start-up: a run of this repository stopped without ending; the
    /// person is asked whether it goes on.
    pub fn offer_resume(&mut self, run_id: &str, task: &str) {
        self.popups.raise(Overlay::ConfirmResume {
            run_id: run_id.to_string(),
            task: task.to_string(),
        });
    }

    /// The screen of a new run (or a resumed one) for `task`.
    fn reset_for_run(&mut self, task: &str) {
        self.view.start(task);
        self.run = RunSession {
            started: Some(Instant::now()),
            ..RunSession::default()
        };
        self.panes.for_run();
        self.screen.close_review();
        self.reset_input();
        self.effects.dirty = true;
    }

    pub fn update(&mut self, event: AppEvent) {
        self.effects.dirty = true;
        match event {
            AppEvent::Key(key) => self.handle_key(key),
            AppEvent::Paste(text) => self.paste(&text),
            AppEvent::Resize => {}
            AppEvent::Tick => {}
            AppEvent::Terminate => {
                if self.view.is_running() {
                    self.cancel_run();
                    self.effects.quit_after_run = true;
                } else {
                    self.effects.quit = true;
                }
            }
            AppEvent::Run(event) => self.run_event(event),
            AppEvent::AskUpdate(update) => self.ask_update(update),
            AppEvent::Asked(result) => self.asked(result),
            AppEvent::RunEnded(result) => self.run_ended(result),
            AppEvent::DiffParsed { generation, model } => {
                if generation == self.view.diff_generation {
                    self.panes.diff_state.follow_model(&self.panes.diff, &model);
                    self.panes.diff = model;
                } else {
                    self.effects.dirty = false;
                }
            }
            AppEvent::ReviewSaved(result) => {
                match &result {
                    Ok(path) => {
                        self.view.note(
                            NoteKind::Info,
                            format!("reviewed patch: {}", artifact_path(path)),
                        );
                        self.run.reviewed_patch = Some(path.clone());
                    }
                    Err(e) => self
                        .view
                        .note(NoteKind::Error, format!("could not save the patch: {e}")),
                }
                if let Some(review) = self.screen.review_mut() {
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
                self.run.started.get_or_insert_with(Instant::now);
            }
            RunEvent::ApprovalRequested {
                id,
                call_id,
                path,
                patch,
                call,
            } => self.approval_requested(ApprovalRequest {
                id: id.clone(),
                call_id: call_id.clone(),
                path: path.clone(),
                patch: patch.clone(),
                call: call.clone(),
            }),
            RunEvent::ApprovalResolved { id, reason, .. } => {
                self.approval_resolved(id, reason.as_deref())
            }
            _ => {}
        }
        let generation = self.view.diff_generation;
        self.view.apply(&event);
        if self.view.diff_generation != generation {
            self.effects.ops.push(Op::ParseDiff {
                generation: self.view.diff_generation,
                text: self.view.diff.clone(),
            });
        }
        if self.panes.stream.follow {
            self.panes.stream.selected = self.view.stream.len().saturating_sub(1);
        }
    }

    fn run_ended(&mut self, result: Result<Box<RunReport>, String>) {
        // Whatever happened, nobody is left to answer pending approvals: refuse them.
        self.refuse_pending("the run ended");
        // A hint about the run that was going is stale now.
        self.flash = None;
        self.popups
            .close(|popup| matches!(popup, Overlay::ConfirmCancel));
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
                    Outcome::Cancelled | Outcome::Budget => NoteKind::Warning,
                };
                self.view
                    .note(kind, format!("patch: {}", artifact_path(&report.patch)));
                self.open_review(&report);
                self.run.report = Some(report);
            }
        }
        if self.effects.quit_after_run {
            self.effects.quit = true;
        }
        if self.screen.review().is_none() {
            self.panes.focus = Pane::Input;
        }
        if self.composer.input.is_empty() {
            self.reset_input();
        }
    }

    /// With `--approval final`, a verified patch is reviewed before it is used.
    fn open_review(&mut self, report: &RunReport) {
        if self.settings.approval_mode != ApprovalMode::Final || report.outcome != Outcome::Success
        {
            return;
        }
        let text =
            std::fs::read_to_string(&report.patch).unwrap_or_else(|_| self.view.diff.clone());
        let model = DiffModel::parse(&text);
        if model.is_empty() {
            return;
        }
        self.screen.show_review(Review {
            patch: report.patch.clone(),
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

    fn paste(&mut self, text: &str) {
        if let Some(reason) = self
            .approvals
            .shown
            .as_mut()
            .and_then(|a| a.reason.as_mut())
        {
            reason.insert_str(text.replace(['\r', '\n'], " "));
        } else if self.panes.focus == Pane::Input
            && self.popups.is_empty()
            && self.screen.review().is_none()
        {
            self.composer.input.insert_str(text.replace('\r', ""));
        }
    }

    pub(crate) fn reset_input(&mut self) {
        self.composer.reset(self.view.is_running());
    }

    /// Ops for the session loop, oldest first.
    pub fn take_ops(&mut self) -> Vec<Op> {
        std::mem::take(&mut self.effects.ops)
    }

    /// Whether something changed since the last frame; clears the flag.
    pub(crate) fn take_dirty(&mut self) -> bool {
        std::mem::replace(&mut self.effects.dirty, false)
    }

    pub(crate) fn is_dirty(&self) -> bool {
        self.effects.dirty
    }

    pub fn should_quit(&self) -> bool {
        self.effects.quit
    }

    /// The elapsed clock only needs ticks while a run is going.
    pub(crate) fn wants_ticks(&self) -> bool {
        self.view.is_running() && matches!(self.settings.clock, Clock::Real)
    }

    pub fn elapsed(&self) -> Option<Duration> {
        match self.settings.clock {
            Clock::Fixed(_) if self.view.phase == Phase::Idle => None,
            Clock::Fixed(d) => Some(d),
            Clock::Real => match (&self.view.phase, self.run.started) {
                (Phase::Finished { duration_ms, .. }, _) => {
                    Some(Duration::from_millis(*duration_ms))
                }
                (_, Some(start)) => Some(start.elapsed()),
                _ => None,
            },
        }
    }

    /// The report of the last run, once it ended.
    pub fn report(&self) -> Option<&RunReport> {
        self.run.report.as_deref()
    }

    /// Where the last review's chosen hunks were saved.
    pub fn reviewed_patch(&self) -> Option<&str> {
        self.run.reviewed_patch.as_deref()
    }

    /// The run applied in this session and not undone.
    pub fn applied_run(&self) -> Option<&RunRef> {
        self.deliveries.applied_run.as_ref()
    }

    /// The final review, on screen or under the browser.
    pub fn review(&self) -> Option<&Review> {
        self.screen.review()
    }

    pub fn browser(&self) -> Option<&Browser> {
        self.screen.browser()
    }

    /// The edit waiting for an answer, shown or hidden.
    pub fn approval(&self) -> Option<&PendingApproval> {
        self.approvals.shown.as_ref()
    }

    /// The popup that takes the keys.
    pub fn overlay(&self) -> Option<&Overlay> {
        self.popups.top()
    }

    /// The live diff.
    pub fn diff(&self) -> &DiffModel {
        &self.panes.diff
    }

    pub fn input(&self) -> &TextArea<'static> {
        &self.composer.input
    }
}
