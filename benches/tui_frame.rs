//! The interactive session's drawing costs (issue budget: one frame ≤ 4 ms with
//! 10,000 events and a 5,000-line diff loaded; 0 frames while idle).
//!
//! - `frame/…`: one full frame of the real `App` at 160×48 and 80×24, each
//!   iteration changing what is shown (focus and diff scroll), so ratatui
//!   really redraws and diffs the buffers.
//! - after the criterion groups: the frames the real session loop draws in
//!   5 idle seconds, and during 2 seconds of streamed tokens (one every ms).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/run_events.rs"]
mod run_events;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::Criterion;
use minicoder::protocol::RunEvent;
use minicoder::runtime::ApprovalMode;
use minicoder::tui::app::{App, AppEvent, Clock, Pane};
use minicoder::tui::diff::DiffModel;
use minicoder::tui::keymap::{Keymap, parse_key_event};
use minicoder::tui::session::Session;
use minicoder::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph};

const EVENTS: usize = 10_000;
const DIFF_LINES: usize = 5_000;

/// A unified diff of `lines` changed lines over 20 files.
fn big_diff(lines: usize) -> String {
    let files = 20;
    let per_file = lines / files;
    let mut out = String::new();
    for f in 0..files {
        out.push_str(&format!(
            "diff --git a/src/module_{f}.py b/src/module_{f}.py\nindex 1111111..2222222 100644\n--- a/src/module_{f}.py\n+++ b/src/module_{f}.py\n"
        ));
        let hunks = per_file / 10;
        for h in 0..hunks {
            let start = 1 + h * 20;
            out.push_str(&format!(
                "@@ -{start},9 +{start},9 @@ def function_{h}(x):\n"
            ));
            for i in 0..3 {
                out.push_str(&format!("     context line {i} of hunk {h}\n"));
            }
            out.push_str(&format!("-    return compute(x, {h}) + old_value\n"));
            out.push_str(&format!("+    return compute(x, {h}) + new_value\n"));
            for i in 3..8 {
                out.push_str(&format!("     context line {i} of hunk {h}\n"));
            }
        }
    }
    out
}

fn loaded_app(finished: bool) -> App {
    let theme = Theme::load_coloured("default", None).expect("theme");
    let mut app = App::new("/src/repo", Keymap::defaults(), theme, ApprovalMode::Final);
    app.settings.clock = Clock::Fixed(Duration::from_secs(42));
    app.start("a long task");
    let pattern = run_events::whole_run();
    let mut sent = 0;
    while sent < EVENTS {
        for event in &pattern {
            if sent >= EVENTS {
                break;
            }
            if matches!(event, RunEvent::RunFinished { .. }) {
                continue;
            }
            app.update(AppEvent::Run(event.clone()));
            sent += 1;
        }
    }
    let text = big_diff(DIFF_LINES);
    let generation = app.view.diff_generation;
    let model = DiffModel::parse(&text);
    assert!(
        model.line_count() >= DIFF_LINES,
        "{} lines",
        model.line_count()
    );
    app.update(AppEvent::DiffParsed {
        generation,
        model: Arc::new(model),
    });
    if finished {
        app.update(AppEvent::Run(RunEvent::RunFinished {
            outcome: minicoder::protocol::Outcome::Success,
            reason: "verified".into(),
            duration_ms: 60_000,
        }));
    }
    let _ = app.take_ops();
    app
}

fn bench_frames(c: &mut Criterion) {
    let mut group = c.benchmark_group("frame");
    for (width, height) in [(160u16, 48u16), (80, 24)] {
        let mut app = loaded_app(false);
        let mut terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        let down = parse_key_event("j").expect("key");
        let up = parse_key_event("k").expect("key");
        let mut step = 0u64;
        group.bench_function(format!("{width}x{height}_10k_events_5k_diff_lines"), |b| {
            b.iter(|| {
                step += 1;
                // Alternate the focus between the stream and the diff and scroll the focused
                // pane, so every frame shows something new (and the input box stays empty).
                app.panes.focus = if step.is_multiple_of(2) {
                    Pane::Stream
                } else {
                    Pane::Diff
                };
                app.update(AppEvent::Key(if step % 8 < 4 { down } else { up }));
                terminal
                    .draw(|frame| app.draw(black_box(frame)))
                    .expect("draw");
            })
        });
    }
    // The baseline: what a straightforward ratatui program does, building every
    // line of the stream and of the diff each frame and letting `Paragraph` scroll.
    let app = loaded_app(false);
    let text = big_diff(DIFF_LINES);
    let mut terminal = Terminal::new(TestBackend::new(160, 48)).expect("terminal");
    let mut scroll = 0u16;
    group.bench_function("160x48_naive_paragraphs_baseline", |b| {
        b.iter(|| {
            scroll = (scroll + 1) % 50;
            let stream: Vec<Line> = app
                .view
                .stream
                .iter()
                .map(|entry| Line::from(format!("{entry:?}")))
                .collect();
            let diff: Vec<Line> = text.lines().map(|l| Line::from(l.to_string())).collect();
            terminal
                .draw(|frame| {
                    let [left, right] =
                        Layout::horizontal([Constraint::Fill(1); 2]).areas(frame.area());
                    let bottom = u16::try_from(stream.len()).unwrap_or(u16::MAX) - 46 - scroll;
                    frame.render_widget(
                        Paragraph::new(stream.clone())
                            .block(Block::bordered())
                            .scroll((bottom, 0)),
                        left,
                    );
                    frame.render_widget(
                        Paragraph::new(diff.clone())
                            .block(Block::bordered())
                            .scroll((scroll, 0)),
                        right,
                    );
                })
                .expect("draw");
        })
    });
    group.finish();
}

/// Frames the real session loop draws with `feed` running beside it for `window`.
fn frames_during(
    runtime: &tokio::runtime::Runtime,
    mut app: App,
    window: Duration,
    feed: impl FnOnce(minicoder::tui::session::AppSender) + Send + 'static,
) -> (u64, u64) {
    runtime.block_on(async move {
        let mut session = Session::new(None);
        let sender = session.sender();
        let mut terminal = Terminal::new(TestBackend::new(160, 48)).expect("terminal");
        std::thread::spawn(move || feed(sender));
        let input = futures_util::stream::pending();
        let _ = tokio::time::timeout(window, session.run(&mut terminal, &mut app, input)).await;
        (session.stats.frames, session.stats.events)
    })
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_frames(&mut criterion);
    criterion.final_summary();

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let idle = Duration::from_secs(5);
    let (frames, _) = frames_during(&runtime, loaded_app(true), idle, |_| {});
    println!(
        "idle after a run: {} frame(s) in {:?} with 10k events loaded: the first frame, then {} (budget 0)",
        frames,
        idle,
        frames.saturating_sub(1)
    );
    let waiting = loaded_app(false);
    let fresh = {
        let theme = Theme::load_coloured("default", None).expect("theme");
        App::new("/src/repo", Keymap::defaults(), theme, ApprovalMode::Final)
    };
    let (frames, _) = frames_during(&runtime, fresh, idle, |_| {});
    println!(
        "idle before a task: {} frame(s) in {:?}: the first frame, then {} (budget 0)",
        frames,
        idle,
        frames.saturating_sub(1)
    );
    let stream = Duration::from_secs(2);
    let (frames, events) = frames_during(
        &runtime,
        waiting,
        stream + Duration::from_millis(300),
        move |sender| {
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed() < stream {
                n += 1;
                let delta = RunEvent::ModelDelta {
                    turn: 99,
                    text: format!("token{n} "),
                };
                if sender.send(AppEvent::Run(delta)).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        },
    );
    let budget = stream.as_millis() as u64 / 16 + 2;
    println!(
        "streaming: {events} deltas in {stream:?} drew {frames} frames (at most one per 16 ms: ≤ {budget})"
    );
}
