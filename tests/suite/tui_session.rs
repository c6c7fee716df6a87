//! The session loop with a stand-in run: events reach the screen, approvals go
//! back to the run, and leaving (Ctrl-C twice, or the terminal going away)
//! cancels the run and waits for it to end before returning.

use crate::support;

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossterm::event::Event;
use futures_util::future::BoxFuture;
use minicoder::protocol::{ApprovalDecision, Command};
use minicoder::protocol::{Outcome, RunEvent};
use minicoder::protocol::{
    PhaseDurations, RecoverySummary, RunReport, TokenTotals, VerificationSummary,
};
use minicoder::runtime::RunChannels;
use minicoder::tui::app::App;
use minicoder::tui::keymap::{Keymap, parse_key_event};
use minicoder::tui::session::{Launcher, Session};
use minicoder::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use support::run_events as ev;
use tokio::sync::mpsc;

/// A run that emits the opening events, asks one approval, then waits for cancellation.
#[derive(Default)]
struct StandIn {
    decisions: Arc<Mutex<Vec<ApprovalDecision>>>,
    cancelled: Arc<Mutex<bool>>,
}

fn report(outcome: Outcome) -> RunReport {
    RunReport {
        run_id: "r1".into(),
        outcome,
        reason: "stopped".into(),
        exit_code: 130,
        repo: "/src".into(),
        task: "t".into(),
        model: ev::model(),
        turns: 1,
        tokens: TokenTotals::default(),
        tool_calls: 0,
        verification: VerificationSummary::default(),
        recovery: RecoverySummary::default(),
        changed_files: Vec::new(),
        changed_total: None,
        artifact_dir: "/nonexistent".into(),
        patch: "/nonexistent/final.patch".into(),
        duration_ms: 5,
        durations: PhaseDurations::default(),
        source: Default::default(),
        summary: None,
    }
}

impl Launcher for StandIn {
    fn launch(
        &self,
        _task: String,
        channels: RunChannels,
    ) -> BoxFuture<'static, Result<RunReport, String>> {
        let decisions = self.decisions.clone();
        let cancelled = self.cancelled.clone();
        Box::pin(async move {
            let RunChannels {
                subscribers,
                mut commands,
            } = channels;
            let events = subscribers[0].clone();
            for event in ev::opening() {
                let _ = events.send(event);
            }
            let _ = events.send(RunEvent::ApprovalRequested {
                id: "a1".into(),
                call_id: "c1".into(),
                path: "pagination.py".into(),
                patch: ev::DIFF.into(),
                call: None,
            });
            // Like the runtime, take the answer to a1 from the command
            // channel, and stop waiting for it once cancelled.
            let decision = loop {
                match commands.recv().await {
                    Some(Command::Approval { id, decision }) if id == "a1" => break decision,
                    Some(Command::Cancel) | None => {
                        break ApprovalDecision::Refuse(Some("cancelled".into()));
                    }
                    Some(_) => {}
                }
            };
            let was_cancelled =
                matches!(&decision, ApprovalDecision::Refuse(Some(r)) if r == "cancelled");
            decisions.lock().expect("lock").push(decision);
            if !was_cancelled {
                while !matches!(commands.recv().await, Some(Command::Cancel) | None) {}
            }
            *cancelled.lock().expect("lock") = true;
            let _ = events.send(RunEvent::RunFinished {
                outcome: Outcome::Cancelled,
                reason: "cancelled".into(),
                duration_ms: 5,
            });
            Ok(report(Outcome::Cancelled))
        })
    }
}

fn app() -> App {
    let theme = Theme::load_coloured("default", None).expect("theme");
    App::new(
        "/src",
        Keymap::defaults(),
        theme,
        minicoder::runtime::ApprovalMode::Each,
    )
}

type Keys = mpsc::UnboundedSender<io::Result<Event>>;

fn input() -> (
    Keys,
    impl futures_util::Stream<Item = io::Result<Event>> + Unpin,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    (tx, Box::pin(stream))
}

fn key(keys: &Keys, spec: &str) {
    let event = parse_key_event(spec).expect("key");
    keys.send(Ok(Event::Key(event))).expect("send key");
}

/// A session whose app has just started a run of the stand-in.
fn started() -> (Arc<StandIn>, Session, App) {
    let stand_in = Arc::new(StandIn::default());
    let session = Session::new(Some(stand_in.clone()));
    let mut app = app();
    app.start("fix it");
    (stand_in, session, app)
}

/// Runs the session on a `width`×`height` test terminal while `driver` types,
/// and returns the screen once the session has returned (within 10 s).
async fn run_session(
    session: &mut Session,
    app: &mut App,
    width: u16,
    height: u16,
    stream: impl futures_util::Stream<Item = io::Result<Event>> + Unpin,
    driver: impl std::future::Future<Output = ()>,
) -> String {
    let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
    let running = session.run(&mut terminal, app, stream);
    let (result, ()) = tokio::time::timeout(Duration::from_secs(10), async {
        tokio::join!(running, driver)
    })
    .await
    .expect("the session returns");
    result.expect("drawn");
    terminal.backend().to_string()
}

#[tokio::test]
async fn ctrl_c_twice_cancels_the_run_and_returns_after_it_ended() {
    let (stand_in, mut session, mut app) = started();
    let (keys, stream) = input();
    let driver = async {
        // Answer the run's question with y (again until it has arrived: before that,
        // y means nothing to the panes), then Ctrl-C twice.
        for _ in 0..200 {
            key(&keys, "y");
            tokio::time::sleep(Duration::from_millis(50)).await;
            if !stand_in.decisions.lock().expect("lock").is_empty() {
                break;
            }
        }
        key(&keys, "ctrl-c");
        key(&keys, "ctrl-c");
    };
    let screen = run_session(&mut session, &mut app, 100, 30, stream, driver).await;
    assert_eq!(
        *stand_in.decisions.lock().expect("lock"),
        vec![ApprovalDecision::Approve]
    );
    assert!(
        *stand_in.cancelled.lock().expect("lock"),
        "the run was not cancelled"
    );
    assert!(app.should_quit());
    assert_eq!(app.report().map(|r| r.outcome), Some(Outcome::Cancelled));
    assert!(session.stats.frames >= 1);
    assert!(screen.contains("read_file"), "{screen}");
}

#[tokio::test]
async fn a_vanished_terminal_cancels_the_run_and_refuses_what_is_pending() {
    let (stand_in, mut session, mut app) = started();
    let (keys, stream) = input();
    let driver = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        keys.send(Err(io::Error::other("terminal closed")))
            .expect("send");
    };
    run_session(&mut session, &mut app, 80, 24, stream, driver).await;
    // Nobody answered the approval: when the run ends it is a refusal, never a yes.
    let decisions = stand_in.decisions.lock().expect("lock").clone();
    assert!(
        matches!(decisions.as_slice(), [ApprovalDecision::Refuse(_)]),
        "{decisions:?}"
    );
    assert!(*stand_in.cancelled.lock().expect("lock"));
}
