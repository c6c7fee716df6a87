//! The session loop: terminal input, run events and background results come in
//! through one channel; the app is drawn only when something changed, at most
//! once per [`FRAME_INTERVAL`], and never while idle. The app's answers,
//! follow-ups and cancel go to the run on its one command channel; applies,
//! undos and reading runs happen in background tasks that answer as events.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, KeyEventKind};
use futures_util::future::BoxFuture;
use futures_util::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::app::{App, AppEvent, Op};
use super::delivery::{RunStore, save_review, spawn_apply, spawn_list, spawn_open, spawn_undo};
use super::diff::DiffModel;
use crate::protocol::{Command, RunReport};
use crate::runtime::RunChannels;

/// Streamed tokens and bursts of events are coalesced into one frame per interval.
pub(crate) const FRAME_INTERVAL: Duration = Duration::from_millis(16);

/// Starts a run for the session; the future resolves when it has ended.
pub trait Launcher: Send + Sync {
    fn launch(
        &self,
        task: String,
        channels: RunChannels,
    ) -> BoxFuture<'static, Result<RunReport, String>>;

    /// Answers a question read-only (ask mode), telling `updates` what it
    /// looks at; later questions continue the conversation.
    fn ask(
        &self,
        question: String,
        updates: AppSender,
    ) -> BoxFuture<'static, Result<crate::runtime::ask::Answer, String>> {
        drop((question, updates));
        Box::pin(async { Err("ask mode is not available here".to_string()) })
    }

    /// A run of `task` that starts from what ask mode learnt (the
    /// conversation ends).
    fn code(
        &self,
        task: String,
        channels: RunChannels,
    ) -> BoxFuture<'static, Result<RunReport, String>> {
        self.launch(task, channels)
    }

    /// Goes on with run `run_id` from its last resume point.
    fn resume(
        &self,
        run_id: String,
        channels: RunChannels,
    ) -> BoxFuture<'static, Result<RunReport, String>> {
        drop(channels);
        Box::pin(async move { Err(format!("run {run_id} cannot be resumed from here")) })
    }
}

/// What the loop did, for the frame benchmark and tests.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameStats {
    pub frames: u64,
    pub events: u64,
}

/// A run in progress and how to steer it.
struct ActiveRun {
    commands: mpsc::UnboundedSender<Command>,
    task: JoinHandle<()>,
}

pub use super::app::AppSender;

pub struct Session {
    sender: AppSender,
    receiver: mpsc::UnboundedReceiver<AppEvent>,
    diff_jobs: watch::Sender<Option<(u64, String)>>,
    launcher: Option<Arc<dyn Launcher>>,
    active: Option<ActiveRun>,
    store: Option<Arc<RunStore>>,
    /// An apply or undo going on: leaving waits for it, so nothing is left half-written.
    delivering: Option<JoinHandle<()>>,
    pub stats: FrameStats,
}

impl Session {
    pub fn new(launcher: Option<Arc<dyn Launcher>>) -> Session {
        let (sender, receiver) = mpsc::unbounded_channel();
        let (diff_jobs, jobs) = watch::channel(None);
        tokio::spawn(parse_diffs(jobs, sender.clone()));
        Session {
            sender,
            receiver,
            diff_jobs,
            launcher,
            active: None,
            store: None,
            delivering: None,
            stats: FrameStats::default(),
        }
    }

    /// Where applies, undos and the runs browser find the runs.
    pub fn with_store(mut self, store: RunStore) -> Session {
        self.store = Some(Arc::new(store));
        self
    }

    pub fn sender(&self) -> AppSender {
        self.sender.clone()
    }

    /// Runs until the app quits; returns after any run it started has ended.
    pub async fn run<B, S>(
        &mut self,
        terminal: &mut Terminal<B>,
        app: &mut App,
        mut input: S,
    ) -> io::Result<()>
    where
        B: Backend,
        B::Error: std::error::Error + Send + Sync + 'static,
        S: Stream<Item = io::Result<Event>> + Unpin,
    {
        let mut last_frame: Option<Instant> = None;
        let mut ticker = tokio::time::interval(Duration::from_secs(1));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut input_open = true;
        loop {
            for op in app.take_ops() {
                self.perform(op);
            }
            if app.should_quit() {
                break;
            }
            let now = Instant::now();
            let due = last_frame.map_or(now, |t| t + FRAME_INTERVAL);
            if app.is_dirty() && now >= due {
                app.take_dirty();
                terminal
                    .draw(|frame| app.draw(frame))
                    .map_err(io::Error::other)?;
                self.stats.frames += 1;
                last_frame = Some(now);
            }
            let redraw_at = app
                .is_dirty()
                .then(|| last_frame.map_or(now, |t| t + FRAME_INTERVAL));
            tokio::select! {
                biased;
                event = self.receiver.recv() => {
                    if let Some(event) = event {
                        self.stats.events += 1;
                        self.forward(app, event);
                        while let Ok(event) = self.receiver.try_recv() {
                            self.stats.events += 1;
                            self.forward(app, event);
                        }
                    }
                }
                event = input.next(), if input_open => match event {
                    Some(Ok(Event::Key(key))) if key.kind != KeyEventKind::Release => {
                        app.update(AppEvent::Key(key));
                    }
                    Some(Ok(Event::Paste(text))) => app.update(AppEvent::Paste(text)),
                    Some(Ok(Event::Resize(..))) => app.update(AppEvent::Resize),
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => {
                        // The terminal is gone: stop the run and leave.
                        input_open = false;
                        app.update(AppEvent::Terminate);
                    }
                },
                _ = sleep_until(redraw_at), if redraw_at.is_some() => {}
                _ = ticker.tick(), if app.wants_ticks() => app.update(AppEvent::Tick),
            }
        }
        self.finish().await;
        Ok(())
    }

    fn forward(&mut self, app: &mut App, event: AppEvent) {
        if matches!(event, AppEvent::RunEnded(_)) {
            self.active = None;
        }
        app.update(event);
    }

    fn perform(&mut self, op: Op) {
        match op {
            Op::Start(task) => self.start(task),
            Op::Code(task) => self.launch(|launcher, channels| launcher.code(task, channels)),
            Op::Ask(question) => self.ask(question),
            Op::Resume { run_id, .. } => self.resume(run_id),
            Op::FollowUp(text) => self.command(Command::FollowUp { text }),
            Op::Answer { id, decision } => self.command(Command::Approval { id, decision }),
            Op::Cancel => self.command(Command::Cancel),
            Op::ParseDiff { generation, text } => {
                let _ = self.diff_jobs.send(Some((generation, text)));
            }
            Op::SaveReview {
                patch,
                hunks,
                artifact_dir,
            } => {
                let result = save_review(&patch, &hunks, &artifact_dir);
                let _ = self.sender.send(AppEvent::ReviewSaved(result));
            }
            Op::Apply(request) => {
                let job = spawn_apply(self.store.clone(), request, self.sender.clone());
                self.delivering = Some(job);
            }
            Op::Undo { run, force } => {
                let job = spawn_undo(self.store.clone(), run, force, self.sender.clone());
                self.delivering = Some(job);
            }
            Op::ListRuns => spawn_list(self.store.clone(), self.sender.clone()),
            Op::OpenRun { dir } => spawn_open(self.store.clone(), dir, self.sender.clone()),
        }
    }

    fn command(&self, command: Command) {
        if let Some(active) = &self.active {
            let _ = active.commands.send(command);
        }
    }

    fn start(&mut self, task: String) {
        self.launch(|launcher, channels| launcher.launch(task, channels));
    }

    fn ask(&mut self, question: String) {
        let Some(launcher) = self.launcher.clone() else {
            let _ = self
                .sender
                .send(AppEvent::Asked(Err("no model is configured".into())));
            return;
        };
        let sender = self.sender.clone();
        let asked = launcher.ask(question, sender.clone());
        tokio::spawn(async move {
            let result = asked.await.map(Box::new);
            let _ = sender.send(AppEvent::Asked(result));
        });
    }

    fn resume(&mut self, run_id: String) {
        self.launch(|launcher, channels| launcher.resume(run_id, channels));
    }

    fn launch(
        &mut self,
        go: impl FnOnce(&dyn Launcher, RunChannels) -> BoxFuture<'static, Result<RunReport, String>>,
    ) {
        let Some(launcher) = self.launcher.clone() else {
            let _ = self
                .sender
                .send(AppEvent::RunEnded(Err("no model is configured".into())));
            return;
        };
        let (channels, commands, mut event_rx) = RunChannels::pair();
        let sender = self.sender.clone();
        let run = go(launcher.as_ref(), channels);
        let task = tokio::spawn(async move {
            let events = sender.clone();
            // Every event reaches the app before the run's end does: the
            // stream closes only when the run has dropped its side.
            let forward_events = async move {
                while let Some(event) = event_rx.recv().await {
                    let _ = events.send(AppEvent::Run(event));
                }
            };
            let (result, ()) = tokio::join!(run, forward_events);
            let _ = sender.send(AppEvent::RunEnded(result.map(Box::new)));
        });
        self.active = Some(ActiveRun { commands, task });
    }

    /// Leaving with a run still going: cancel it and wait, so its containers
    /// are removed and its artifacts written.
    async fn finish(&mut self) {
        if let Some(active) = self.active.take() {
            let _ = active.commands.send(Command::Cancel);
            let _ = active.task.await;
        }
        if let Some(job) = self.delivering.take() {
            let _ = job.await;
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Parses the newest live diff off the UI thread; older pending ones are skipped.
async fn parse_diffs(mut jobs: watch::Receiver<Option<(u64, String)>>, sender: AppSender) {
    while jobs.changed().await.is_ok() {
        let Some((generation, text)) = jobs.borrow_and_update().clone() else {
            continue;
        };
        let parsed = tokio::task::spawn_blocking(move || DiffModel::parse(&text)).await;
        if let Ok(model) = parsed {
            let event = AppEvent::DiffParsed {
                generation,
                model: Arc::new(model),
            };
            if sender.send(event).is_err() {
                return;
            }
        }
    }
}
