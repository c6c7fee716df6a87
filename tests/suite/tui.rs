//! The interactive session, driven for real: the actual `App` fed with real
//! `RunEvent`s and keys, drawn through ratatui's `TestBackend`, compared with
//! the insta snapshots in `snapshots/` (paths, hashes and clocks filtered).

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use minicoder::protocol::PlanStatus;
use minicoder::protocol::{ApprovalDecision, ApprovalMode};
use minicoder::protocol::{Outcome, RunEvent};
use minicoder::protocol::{
    PhaseDurations, RecoverySummary, RunReport, TokenTotals, VerificationSummary,
};
use minicoder::tui::app::{
    App, AppEvent, Applied, ApplyFailure, CheckLine, Clock, Op, RunDetail, RunEntry, Undone,
    Verified,
};
use minicoder::tui::diff::DiffModel;
use minicoder::tui::keymap::{Keymap, parse_key_event};
use minicoder::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use support::run_events as ev;

const SIZES: [(u16, u16); 2] = [(80, 24), (160, 48)];

struct Harness {
    app: App,
    terminal: Terminal<TestBackend>,
    ops: Vec<Op>,
    dir: tempfile::TempDir,
}

impl Harness {
    fn new(width: u16, height: u16, mode: ApprovalMode) -> Harness {
        let theme = Theme::load_coloured("default", None).expect("default theme");
        let mut app = App::new("/home/ada/src/pagination", Keymap::defaults(), theme, mode);
        app.settings.clock = Clock::Fixed(Duration::from_secs(42));
        let terminal = Terminal::new(TestBackend::new(width, height)).expect("terminal");
        Harness {
            app,
            terminal,
            ops: Vec::new(),
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// A run started from the input box, with its artifacts in a temporary directory.
    fn start(&mut self) {
        self.app
            .start("page_count drops the last partial page; fix it");
        let outputs = self.dir.path().join("outputs");
        std::fs::create_dir_all(&outputs).expect("outputs");
        std::fs::write(
            outputs.join("verify-tests.txt"),
            "F...\nFAILED tests/test_pagination.py::test_partial_last_page\nassert 2 == 3\n1 failed, 3 passed in 0.05s\n",
        )
        .expect("output");
        self.feed(vec![ev::started()]);
    }

    fn feed(&mut self, events: Vec<RunEvent>) {
        for mut event in events {
            // The run's artifacts are in this test's directory.
            if let RunEvent::RunStarted { artifact_dir, .. } = &mut event {
                *artifact_dir = self.dir.path().display().to_string();
            }
            self.app.update(AppEvent::Run(event));
        }
        self.pump();
    }

    /// Performs the ops the session loop would: diffs are parsed right here.
    fn pump(&mut self) {
        for op in self.app.take_ops() {
            if let Op::ParseDiff { generation, text } = &op {
                let model = Arc::new(DiffModel::parse(text));
                self.app.update(AppEvent::DiffParsed {
                    generation: *generation,
                    model,
                });
            }
            self.ops.push(op);
        }
    }

    fn keys(&mut self, keys: &[&str]) {
        for key in keys {
            let event = parse_key_event(key).expect("key");
            self.app.update(AppEvent::Key(event));
            self.pump();
        }
    }

    fn type_text(&mut self, text: &str) {
        for c in text.chars() {
            let key = if c == ' ' {
                "space".to_string()
            } else {
                c.to_string()
            };
            self.keys(&[&key]);
        }
    }

    fn screen(&mut self) -> String {
        let app = &mut self.app;
        self.terminal.draw(|frame| app.draw(frame)).expect("draw");
        self.terminal.backend().to_string()
    }

    fn report(&self, outcome: Outcome) -> Box<RunReport> {
        self.report_of(outcome, ev::DIFF)
    }

    fn report_of(&self, outcome: Outcome, diff: &str) -> Box<RunReport> {
        let patch = self.dir.path().join("final.patch");
        std::fs::write(&patch, diff).expect("patch");
        Box::new(RunReport {
            run_id: "20261130-051500-3f9a1c2e".into(),
            outcome,
            reason: "verified: 2 checks passed".into(),
            exit_code: 0,
            repo: "/home/ada/src/pagination".into(),
            task: "fix it".into(),
            model: ev::model(),
            turns: 4,
            tokens: TokenTotals {
                input: 9000,
                output: 500,
                ..Default::default()
            },
            tool_calls: 5,
            verification: VerificationSummary::default(),
            recovery: RecoverySummary::default(),
            changed_files: vec!["pagination.py".into()],
            changed_total: None,
            artifact_dir: self.dir.path().display().to_string(),
            patch: patch.display().to_string(),
            duration_ms: 48_200,
            durations: PhaseDurations::default(),
            source: Default::default(),
            summary: None,
        })
    }
}

/// The run asking to approve an edit of pagination.py.
fn approval_request(id: &str) -> RunEvent {
    RunEvent::ApprovalRequested {
        id: id.into(),
        call_id: "call_4".into(),
        path: "pagination.py".into(),
        patch: ev::DIFF
            .split("diff --git a/tests")
            .next()
            .unwrap_or("")
            .into(),
        call: None,
    }
}

impl Harness {
    /// The approval answers the app sent to the run, oldest first.
    fn answers(&self) -> Vec<(String, ApprovalDecision)> {
        self.ops
            .iter()
            .filter_map(|op| match op {
                Op::Answer { id, decision } => Some((id.clone(), decision.clone())),
                _ => None,
            })
            .collect()
    }

    fn last_answer(&self) -> Option<ApprovalDecision> {
        self.answers().pop().map(|(_, d)| d)
    }
}

fn assert_screen(name: &str, width: u16, height: u16, screen: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.add_filter(r"/tmp/[^\s│\x22]+", "[PATH]");
    settings.add_filter(r"\b[0-9a-f]{12,64}\b", "[HASH]");
    settings.add_filter(r"\b\d{2}:\d{2}(/\d{2}:\d{2})?\b", "[CLOCK]");
    settings.bind(|| insta::assert_snapshot!(format!("{name}_{width}x{height}"), screen));
}

/// Draws the same scenario at 80×24 and 160×48 and checks both snapshots.
fn both_sizes(name: &str, mode: ApprovalMode, scenario: impl Fn(&mut Harness)) {
    for (width, height) in SIZES {
        let mut harness = Harness::new(width, height, mode);
        scenario(&mut harness);
        let screen = harness.screen();
        assert_screen(name, width, height, &screen);
    }
}

fn mid_run(h: &mut Harness) {
    h.start();
    h.feed(ev::opening());
    h.feed(ev::edit());
    h.feed(ev::verifying());
}

#[test]
fn idle_session_waits_for_a_task() {
    both_sizes("idle", ApprovalMode::Final, |h| {
        h.type_text("fix the pagination bug");
    });
}

#[test]
fn a_run_in_progress_shows_plan_stream_diff_and_matrix() {
    both_sizes("running", ApprovalMode::Final, mid_run);
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    mid_run(&mut h);
    let screen = h.screen();
    for visible in [
        "Fix page_count to round up",
        "read_file pagination.py",
        "(total_items + page_size - 1) // page_size",
        "Verification",
        "Asking for completion.",
    ] {
        assert!(
            screen.contains(visible),
            "{visible:?} is not on screen:\n{screen}"
        );
    }
}

#[test]
fn a_tool_call_expands_to_its_output() {
    both_sizes("stream_expanded", ApprovalMode::Final, |h| {
        mid_run(h);
        // From the newest entry, up to the read_file call, then expand it.
        let up = h
            .app
            .view
            .stream
            .iter()
            .rev()
            .position(|e| matches!(e, minicoder::tui::run_view::StreamEntry::Tool { name, .. } if name == "read_file"))
            .expect("read_file entry");
        for _ in 0..up {
            h.keys(&["k"]);
        }
        h.keys(&["enter"]);
    });
}

#[test]
fn the_diff_pane_zooms_and_moves_between_files() {
    both_sizes("diff_zoomed", ApprovalMode::Final, |h| {
        mid_run(h);
        h.keys(&["tab", "z", "}"]);
    });
}

#[test]
fn long_diff_lines_scroll_sideways() {
    both_sizes("diff_sideways", ApprovalMode::Final, |h| {
        mid_run(h);
        h.keys(&["tab", "l", "l", "right", "h"]);
    });
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    mid_run(&mut h);
    h.keys(&["tab", "l", "l"]);
    let screen = h.screen();
    // 16 columns into "    return (total_items + page_size - 1) // page_size".
    assert!(screen.contains("→ 16"), "{screen}");
    assert!(screen.contains("+l_items + page_size - 1)"), "{screen}");
    h.keys(&["h", "h", "h"]);
    assert!(
        !h.screen().contains("→ "),
        "scrolling left stops at the first column"
    );
}

#[test]
fn a_failing_check_output_is_one_key_away() {
    both_sizes("check_output", ApprovalMode::Final, |h| {
        mid_run(h);
        h.keys(&["tab", "tab", "enter"]);
    });
}

#[test]
fn an_edit_waits_on_the_approval_modal() {
    both_sizes("approval", ApprovalMode::Each, |h| {
        mid_run(h);
        h.feed(vec![approval_request("approval-1")]);
    });
}

#[test]
fn a_call_to_an_mcp_servers_tool_waits_on_the_approval_modal() {
    both_sizes("approval_mcp_call", ApprovalMode::Final, |h| {
        mid_run(h);
        h.feed(vec![RunEvent::ApprovalRequested {
            id: "approval-1".into(),
            call_id: "call_5".into(),
            path: "mcp__notes__lookup".into(),
            patch: "{\n  \"topic\": \"pagination \u{1b}[2J\"\n}".into(),
            call: Some(minicoder::protocol::CallApproval {
                outside_sandbox: true,
                reason: None,
            }),
        }]);
    });
}

#[test]
fn refusing_asks_for_a_reason() {
    both_sizes("approval_reason", ApprovalMode::Each, |h| {
        mid_run(h);
        h.feed(vec![approval_request("approval-1")]);
        h.keys(&["n"]);
        h.type_text("keep the slice syntax");
    });
}

#[test]
fn help_lists_the_keys_of_the_focused_pane() {
    both_sizes("help", ApprovalMode::Final, |h| {
        mid_run(h);
        h.keys(&["?"]);
    });
}

#[test]
fn ctrl_c_asks_before_cancelling() {
    both_sizes("confirm_cancel", ApprovalMode::Final, |h| {
        mid_run(h);
        h.keys(&["ctrl-c"]);
    });
}

#[test]
fn a_follow_up_is_queued_for_the_next_turn() {
    both_sizes("follow_up", ApprovalMode::Final, |h| {
        mid_run(h);
        h.keys(&["i"]);
        h.type_text("also update the docstring");
        h.keys(&["enter"]);
    });
}

#[test]
fn a_command_a_hook_blocks_is_shown_with_the_hook() {
    let blocked = |h: &mut Harness| {
        h.start();
        h.feed(ev::opening());
        h.feed(vec![
            RunEvent::ToolStarted {
                call_id: "c9".into(),
                name: "run_shell".into(),
                arguments: r#"{"command":"rm -rf ./*"}"#.into(),
            },
            RunEvent::HookRan {
                // A hostile command line: escapes never reach the terminal.
                hook: "sh ~/.config/minicoder/\u{1b}[2Jpolicy.sh".into(),
                event: "PreToolUse".into(),
                call_id: Some("c9".into()),
                exit: Some(2),
                decision: "block".into(),
                duration_ms: 14,
            },
            RunEvent::ToolRewritten {
                call_id: "c8".into(),
                name: "run_shell".into(),
                arguments: r#"{"command":"pytest -q"}"#.into(),
            },
            RunEvent::ToolFinished {
                call_id: "c9".into(),
                name: "run_shell".into(),
                ok: false,
                summary: "blocked by a hook".into(),
                result: "Blocked by a PreToolUse hook: rm -rf is not allowed here".into(),
                output_file: None,
                duration_ms: 0,
                changed_files: Vec::new(),
            },
        ]);
    };
    both_sizes("hook_blocked", ApprovalMode::Final, blocked);
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    blocked(&mut h);
    let screen = h.screen();
    assert!(
        screen.contains("hook PreToolUse block, exit 2: `sh ~/.config/minicoder/"),
        "{screen}"
    );
    assert!(!screen.contains('\u{1b}'));
}

#[test]
fn project_instructions_are_noted_as_they_load() {
    both_sizes("instructions", ApprovalMode::Final, |h| {
        h.start();
        h.feed(vec![
            RunEvent::InstructionsLoaded {
                path: "AGENTS.md".into(),
                bytes: 1_048_576,
                truncated: true,
            },
            RunEvent::InstructionsLoaded {
                // A hostile name: escapes never reach the terminal.
                path: "pkg/\u{1b}[31mAGENTS.md".into(),
                bytes: 312,
                truncated: false,
            },
        ]);
    });
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    h.start();
    h.feed(vec![RunEvent::InstructionsLoaded {
        path: "AGENTS.md".into(),
        bytes: 1_048_576,
        truncated: true,
    }]);
    let screen = h.screen();
    assert!(
        screen.contains("instructions AGENTS.md (1.0 MiB, cut)"),
        "{screen}"
    );
}

#[test]
fn a_dirty_source_is_noted_when_the_run_starts() {
    let dirty = || {
        let mut event = ev::started();
        if let RunEvent::RunStarted { source, .. } = &mut event {
            source.head = Some("9f1c2b7d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c".into());
            source.dirty = true;
            source.modified = 1;
            source.untracked = 1;
        }
        event
    };
    both_sizes("dirty_source", ApprovalMode::Final, |h| {
        h.app
            .start("page_count drops the last partial page; fix it");
        h.feed(vec![dirty()]);
    });
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    h.app.start("t");
    h.feed(vec![dirty()]);
    let screen = h.screen();
    assert!(
        screen.contains("! baseline includes 1 modified and 1 untracked file not"),
        "{screen}"
    );
}

#[test]
fn the_verified_patch_is_reviewed_per_hunk() {
    both_sizes("review", ApprovalMode::Final, |h| {
        mid_run(h);
        h.feed(ev::ending(Outcome::Success));
        let report = h.report(Outcome::Success);
        h.app.update(AppEvent::RunEnded(Ok(report)));
        h.keys(&["]", "space"]);
    });
}

/// A patch that changes `.minicoder.json` changes what the next run of the
/// repository honours: its entry and the review's status line say so.
#[test]
fn a_patch_that_changes_the_repository_config_is_flagged_in_the_review() {
    const CONFIG: &str = "diff --git a/.minicoder.json b/.minicoder.json
index 1111111..3333333 100644
--- a/.minicoder.json
+++ b/.minicoder.json
@@ -1,3 +1,3 @@
 {
-  \"checks\": [{\"name\": \"tests\", \"command\": \"python3 -m pytest -q\"}]
+  \"checks\": [{\"name\": \"tests\", \"command\": \"true\"}]
 }
";
    let diff = format!("{CONFIG}{}", ev::DIFF);
    both_sizes("review_config", ApprovalMode::Final, |h| {
        mid_run(h);
        h.feed(ev::ending(Outcome::Success));
        let report = h.report_of(Outcome::Success, &diff);
        h.app.update(AppEvent::RunEnded(Ok(report)));
    });
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    mid_run(&mut h);
    h.feed(ev::ending(Outcome::Success));
    let report = h.report_of(Outcome::Success, &diff);
    h.app.update(AppEvent::RunEnded(Ok(report)));
    let screen = h.screen();
    assert!(
        screen.contains(
            "Review the verified patch: config! it changes the repository's minicoder configuration"
        ),
        "{screen}"
    );
    // The one entry that touches the configuration is marked; no other is.
    assert_eq!(screen.matches("M config! ").count(), 1, "{screen}");
    assert!(screen.contains("M pagination.py"), "{screen}");
}

#[test]
fn q_in_the_review_asks_before_it_drops_the_chosen_hunks() {
    let reviewing = |h: &mut Harness| {
        mid_run(h);
        h.feed(ev::ending(Outcome::Success));
        let report = h.report(Outcome::Success);
        h.app.update(AppEvent::RunEnded(Ok(report)));
    };
    both_sizes("review_discard", ApprovalMode::Final, |h| {
        reviewing(h);
        h.keys(&["q"]);
    });
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    reviewing(&mut h);
    h.keys(&["q"]);
    assert!(!h.app.should_quit(), "q alone must not drop the selection");
    h.keys(&["n"]);
    assert!(!h.app.should_quit());
    assert!(h.app.review().is_some(), "n goes back to the review");
    h.keys(&["q", "y"]);
    assert!(h.app.should_quit());
    // Nothing chosen: nothing to lose, q quits at once.
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    reviewing(&mut h);
    h.keys(&["A"]);
    assert_eq!(h.app.review().expect("review").selection.chosen().0, 0);
    h.keys(&["q"]);
    assert!(h.app.should_quit());
}

#[test]
fn a_failed_run_says_so_and_offers_a_new_task() {
    both_sizes("finished_failure", ApprovalMode::Never, |h| {
        mid_run(h);
        h.feed(vec![RunEvent::RunFinished {
            outcome: Outcome::Failure,
            reason: "the turn budget ran out (30 turns)".into(),
            duration_ms: 312_000,
        }]);
        let report = h.report(Outcome::Failure);
        h.app.update(AppEvent::RunEnded(Ok(report)));
    });
}

// Behaviour behind the snapshots: what each key sends where.

fn approval_with(keys: &[&str], typed: &str) -> ApprovalDecision {
    let mut h = Harness::new(80, 24, ApprovalMode::Each);
    mid_run(&mut h);
    h.feed(vec![approval_request("approval-1")]);
    h.keys(keys);
    h.type_text(typed);
    h.keys(&["enter"]);
    h.last_answer().expect("an answer was sent")
}

#[test]
fn approval_keys_answer_the_runtime() {
    let mut h = Harness::new(80, 24, ApprovalMode::Each);
    mid_run(&mut h);
    h.feed(vec![approval_request("approval-1")]);
    h.keys(&["y"]);
    assert_eq!(
        h.answers(),
        [("approval-1".to_string(), ApprovalDecision::Approve)]
    );
    assert!(h.app.approval().is_none());

    assert_eq!(
        approval_with(&["n"], "use ceil division"),
        ApprovalDecision::Refuse(Some("use ceil division".into()))
    );
    assert_eq!(approval_with(&["n"], ""), ApprovalDecision::Refuse(None));

    // `a` approves this one and everything already queued.
    let mut h = Harness::new(80, 24, ApprovalMode::Each);
    mid_run(&mut h);
    h.feed(vec![
        approval_request("approval-1"),
        approval_request("approval-2"),
    ]);
    h.keys(&["a"]);
    assert_eq!(
        h.answers(),
        [
            ("approval-1".to_string(), ApprovalDecision::ApproveAll),
            ("approval-2".to_string(), ApprovalDecision::Approve)
        ]
    );
}

#[test]
fn esc_hides_the_modal_without_answering_and_p_brings_it_back() {
    let mut h = Harness::new(80, 24, ApprovalMode::Each);
    mid_run(&mut h);
    h.feed(vec![approval_request("approval-1")]);
    h.keys(&["esc"]);
    assert!(h.answers().is_empty(), "Esc must not answer");
    assert!(!h.screen().contains("Apply this edit"));
    // Keys now go to the panes: `y` is not an answer here.
    h.keys(&["y", "p"]);
    assert!(h.answers().is_empty());
    assert!(h.screen().contains("Apply this edit"));
    h.keys(&["y"]);
    assert_eq!(h.last_answer(), Some(ApprovalDecision::Approve));
}

#[test]
fn a_run_that_ends_refuses_its_unanswered_approvals() {
    let mut h = Harness::new(80, 24, ApprovalMode::Each);
    mid_run(&mut h);
    h.feed(vec![approval_request("approval-1")]);
    h.app
        .update(AppEvent::RunEnded(Err("docker went away".into())));
    h.pump();
    assert!(matches!(h.last_answer(), Some(ApprovalDecision::Refuse(_))));
}

#[test]
fn ctrl_c_once_confirms_twice_cancels_and_quits_after_the_run() {
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    mid_run(&mut h);
    h.keys(&["ctrl-c"]);
    assert!(!h.ops.contains(&Op::Cancel), "the first Ctrl-C only asks");
    h.keys(&["n"]);
    assert!(!h.ops.contains(&Op::Cancel));
    h.keys(&["ctrl-c", "ctrl-c"]);
    assert!(h.ops.contains(&Op::Cancel));
    assert!(
        !h.app.should_quit(),
        "the run must end (and clean up) first"
    );
    h.feed(ev::ending(Outcome::Cancelled));
    h.app
        .update(AppEvent::RunEnded(Ok(h.report(Outcome::Cancelled))));
    assert!(h.app.should_quit());
}

#[test]
fn q_quits_only_when_idle() {
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    mid_run(&mut h);
    h.keys(&["tab", "q"]);
    assert!(!h.app.should_quit());
    assert!(h.screen().contains("Ctrl-C cancels it"));
    h.feed(ev::ending(Outcome::Success));
    h.app
        .update(AppEvent::RunEnded(Ok(h.report(Outcome::Success))));
    h.keys(&["esc", "esc", "q"]);
    assert!(h.app.should_quit());
}

#[test]
fn typing_starts_a_run_then_sends_follow_ups() {
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    h.type_text("fix it");
    h.keys(&["enter"]);
    assert_eq!(h.ops, vec![Op::Start("fix it".into())]);
    h.feed(vec![ev::started()]);
    h.keys(&["i"]);
    h.type_text("and add a test");
    h.keys(&["enter"]);
    assert_eq!(h.ops.last(), Some(&Op::FollowUp("and add a test".into())));
}

#[test]
fn a_stale_diff_parse_is_ignored() {
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    mid_run(&mut h);
    let before = h.app.diff().files.len();
    assert!(before > 0);
    h.app.update(AppEvent::DiffParsed {
        generation: 0,
        model: Arc::new(DiffModel::default()),
    });
    assert_eq!(h.app.diff().files.len(), before);
}

#[test]
fn review_saves_only_the_chosen_hunks() {
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    mid_run(&mut h);
    h.feed(ev::ending(Outcome::Success));
    h.app
        .update(AppEvent::RunEnded(Ok(h.report(Outcome::Success))));
    h.keys(&["space", "s"]);
    let Some(Op::SaveReview { hunks, .. }) = h.ops.last().cloned() else {
        panic!("no SaveReview op: {:?}", h.ops);
    };
    // The first hunk left out: delivery makes the patch of the others.
    assert_eq!(hunks.numbers, (2..=hunks.of).collect::<Vec<_>>());
    // Nothing chosen: nothing saved.
    h.keys(&["A", "A"]);
    let (chosen, _) = h.app.review().expect("review").selection.chosen();
    assert_eq!(chosen, 0);
    let count = h.ops.len();
    h.keys(&["s"]);
    h.keys(&["enter"]);
    assert_eq!(h.ops.len(), count);
}

#[test]
fn plan_items_keep_their_status_marks() {
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    h.start();
    h.feed(vec![ev::plan([
        PlanStatus::Done,
        PlanStatus::InProgress,
        PlanStatus::Pending,
    ])]);
    let screen = h.screen();
    assert!(screen.contains("✓ Find how page_count rounds"), "{screen}");
    assert!(screen.contains("▶ Fix page_count to round up"), "{screen}");
    assert!(
        screen.contains("○ Add a test for the last page"),
        "{screen}"
    );
}

#[test]
fn any_terminal_size_draws_and_resizing_keeps_the_state() {
    let mut h = Harness::new(160, 48, ApprovalMode::Each);
    mid_run(&mut h);
    h.feed(vec![approval_request("approval-1")]);
    h.keys(&["n"]);
    for (width, height) in [(80, 24), (20, 5), (1, 1), (300, 100), (81, 25)] {
        h.terminal.backend_mut().resize(width, height);
        h.app.update(AppEvent::Resize);
        let screen = h.screen();
        assert_eq!(
            screen.lines().count(),
            usize::from(height),
            "{width}x{height}"
        );
    }
    h.keys(&["esc", "esc"]);
    h.keys(&["tab", "z", "?"]);
    for (width, height) in [(10, 3), (80, 24)] {
        h.terminal.backend_mut().resize(width, height);
        h.screen();
    }
    assert!(
        h.app.approval().is_some(),
        "resizing lost the pending approval"
    );
}

#[test]
fn help_in_the_review_lists_only_the_keys_that_work_there() {
    both_sizes("help_review", ApprovalMode::Final, |h| {
        mid_run(h);
        h.feed(ev::ending(Outcome::Success));
        let report = h.report(Outcome::Success);
        h.app.update(AppEvent::RunEnded(Ok(report)));
        h.keys(&["?"]);
    });
}

#[test]
fn help_scrolls_when_the_keys_do_not_fit() {
    let mut h = Harness::new(80, 12, ApprovalMode::Final);
    mid_run(&mut h);
    h.keys(&["?"]);
    let first = h.screen();
    assert!(first.contains("j/k scroll"), "{first}");
    assert!(!first.contains("go to the bottom"), "{first}");
    for _ in 0..30 {
        h.keys(&["j"]);
    }
    let last = h.screen();
    assert!(last.contains("go to the bottom"), "{last}");
    h.keys(&["esc"]);
    assert!(!h.screen().contains("Keys"));
}

/// Every cell of every built-in theme uses only the 16 ANSI colours, and with
/// `NO_COLOR` no cell has a colour at all.
#[test]
fn every_theme_draws_only_ansi_colours_and_no_color_draws_none() {
    use ratatui::style::Color;
    let ansi = |c: Color| !matches!(c, Color::Rgb(..) | Color::Indexed(_));
    for name in Theme::available(None) {
        for coloured in [true, false] {
            let mut theme = Theme::load_coloured(&name, None).expect("theme");
            if !coloured {
                theme = theme.without_colours();
            }
            let mut h = Harness::new(120, 40, ApprovalMode::Each);
            h.app.settings.theme = theme;
            mid_run(&mut h);
            h.feed(vec![approval_request("approval-1")]);
            h.screen();
            let buffer = h.terminal.backend().buffer().clone();
            let mut coloured_cells = 0;
            for cell in buffer.content() {
                assert!(ansi(cell.fg) && ansi(cell.bg), "{name}: {:?}", cell);
                if cell.fg != Color::Reset || cell.bg != Color::Reset {
                    coloured_cells += 1;
                }
            }
            if coloured {
                assert!(coloured_cells > 100, "{name} shows almost no colour");
            } else {
                assert_eq!(coloured_cells, 0, "{name} without colours still has colour");
            }
        }
    }
}

#[test]
fn an_approval_the_runtime_gave_up_on_leaves_the_screen() {
    let mut h = Harness::new(160, 48, ApprovalMode::Each);
    mid_run(&mut h);
    h.feed(vec![approval_request("approval-1")]);
    // The runtime's timeout: a refusal.
    h.feed(vec![RunEvent::ApprovalResolved {
        id: "approval-1".into(),
        approved: false,
        reason: Some("no answer within 30 minutes".into()),
    }]);
    assert!(h.app.approval().is_none());
    let screen = h.screen();
    assert!(
        screen.contains("the edit of pagination.py was refused"),
        "{screen}"
    );
    assert!(!screen.contains("Apply this edit"), "{screen}");

    // Answering one the runtime has just abandoned says it came too late: the
    // run rejects the answer.
    h.feed(vec![approval_request("approval-2")]);
    h.keys(&["y"]);
    h.feed(vec![RunEvent::CommandRejected {
        command: "approval".into(),
        reason: "too late: approval-2 is not waiting for an answer".into(),
    }]);
    let last = h.app.view.stream.last().cloned();
    assert!(
        matches!(&last, Some(minicoder::tui::run_view::StreamEntry::Note { text, .. }) if text.starts_with("too late")),
        "{last:?}"
    );
}

#[test]
fn up_and_down_in_the_input_recall_what_was_sent_and_move_between_lines() {
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    h.type_text("first task");
    h.keys(&["enter"]);
    h.feed(vec![ev::started()]);
    h.keys(&["i"]);
    h.type_text("a follow-up");
    h.keys(&["enter"]);
    h.keys(&["up"]);
    assert_eq!(h.app.input().lines(), ["a follow-up"]);
    h.keys(&["up", "up"]);
    assert_eq!(h.app.input().lines(), ["first task"]);
    h.keys(&["down"]);
    assert_eq!(h.app.input().lines(), ["a follow-up"]);
    h.keys(&["down"]);
    assert_eq!(h.app.input().lines(), [""]);
    // With two lines (Alt-Enter), Up moves to the first line instead of recalling.
    h.type_text("one");
    h.keys(&["alt-enter"]);
    h.type_text("two");
    assert_eq!(h.app.input().lines(), ["one", "two"]);
    h.keys(&["up"]);
    assert_eq!(h.app.input().lines(), ["one", "two"]);
    h.type_text("!");
    assert_eq!(h.app.input().lines(), ["one!", "two"]);
    // Home and End edit too.
    h.keys(&["home"]);
    h.type_text(">");
    assert_eq!(h.app.input().lines(), [">one!", "two"]);
}

#[test]
fn a_huge_output_opens_at_its_end_without_reading_it_all() {
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    mid_run(&mut h);
    // 6 MB of output for the failing check: the pager reads only the last 4 MB.
    let mut big = String::with_capacity(6 << 20);
    let mut n = 0;
    while big.len() < 6 << 20 {
        n += 1;
        big.push_str(&format!("line {n} of the test output\n"));
    }
    big.push_str("THE LAST LINE\n");
    std::fs::write(h.dir.path().join("outputs/verify-tests.txt"), &big).expect("output");
    h.keys(&["tab", "tab", "enter", "G"]);
    let screen = h.screen();
    assert!(screen.contains("THE LAST LINE"), "{screen}");
    let Some(minicoder::tui::app::Overlay::Pager(pager)) = h.app.overlay() else {
        panic!("no pager");
    };
    assert!(pager.lines.len() <= 20_000);
    // The end fills the last page, so one line up moves the last line off it.
    assert!(
        screen.matches("of the test output").count() >= 15,
        "a full last page:\n{screen}"
    );
    h.keys(&["k"]);
    assert!(!h.screen().contains("THE LAST LINE"));
}

#[test]
fn an_approval_asked_after_cancelling_is_refused_at_once() {
    let mut h = Harness::new(80, 24, ApprovalMode::Each);
    mid_run(&mut h);
    h.keys(&["ctrl-c", "y"]);
    assert!(h.ops.contains(&Op::Cancel));
    h.feed(vec![approval_request("approval-1")]);
    assert!(matches!(h.last_answer(), Some(ApprovalDecision::Refuse(_))));
    assert!(h.app.approval().is_none());
}

#[test]
fn a_failing_check_says_why_under_the_matrix() {
    both_sizes("matrix_why", ApprovalMode::Final, |h| {
        h.start();
        h.feed(ev::opening());
        let mut missing = ev::check("tests", false, 12);
        missing.exit_code = Some(127);
        missing.first_error = Some("sh: 1: pytest: not found".into());
        h.feed(vec![
            RunEvent::VerificationStarted {
                attempt: 2,
                reason: minicoder::protocol::VerificationReason::Completion,
                checks: vec!["tests".into(), "lint".into()],
            },
            RunEvent::VerificationCheck {
                attempt: 2,
                check: missing,
            },
        ]);
    });
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    h.start();
    h.feed(ev::opening());
    let mut failing = ev::check("tests", false, 12);
    failing.first_error = Some("sh: 1: pytest: not found".into());
    h.feed(vec![RunEvent::VerificationCheck {
        attempt: 1,
        check: failing,
    }]);
    let screen = h.screen();
    assert!(
        screen.contains("✗ tests: sh: 1: pytest: not found"),
        "{screen}"
    );
}

/// A check that exits 0 but rebuilt files the repository tracks failed for
/// that alone: the matrix says so, with nothing from its output to show.
#[test]
fn a_check_that_changed_the_workspace_says_so_under_the_matrix() {
    let scenario = |h: &mut Harness| {
        h.start();
        h.feed(ev::opening());
        let mut changed = ev::check("make-test", false, 265);
        changed.exit_code = Some(0);
        changed.first_error = None;
        changed.failure = Some("the check changed the workspace: libstrbuf.a, strbuf.o".into());
        h.feed(vec![
            RunEvent::VerificationStarted {
                attempt: 2,
                reason: minicoder::protocol::VerificationReason::Completion,
                checks: vec!["make-test".into()],
            },
            RunEvent::VerificationCheck {
                attempt: 2,
                check: changed,
            },
        ]);
    };
    both_sizes("matrix_changed", ApprovalMode::Final, scenario);
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    scenario(&mut h);
    let screen = h.screen();
    assert!(
        screen.contains("✗ make-test: the check changed the workspace: libstrbuf.a"),
        "{screen}"
    );
}

#[test]
fn the_file_list_takes_the_room_a_wide_terminal_has() {
    let mut h = Harness::new(200, 50, ApprovalMode::Final);
    mid_run(&mut h);
    let screen = h.screen();
    // At 200 columns every path of the diff's file list is shown whole.
    assert!(
        screen.contains("M tests/test_pagination.py +4 -0"),
        "{screen}"
    );
    assert_screen("diff_wide", 200, 50, &screen);
}

#[test]
fn preparation_shows_its_phase_with_counts_until_the_run_starts() {
    let preparing = |h: &mut Harness| {
        h.app
            .start("page_count drops the last partial page; fix it");
        h.feed(vec![RunEvent::RunPreparing {
            phase: "copy".into(),
            done: 3_048,
            total: 4_916,
            bytes: 104 << 20,
        }]);
    };
    both_sizes("preparing", ApprovalMode::Final, preparing);
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    preparing(&mut h);
    assert!(
        h.screen()
            .contains("preparing: copying 4,916 files, 104 MB … 62 %")
    );
    h.feed(vec![ev::started()]);
    let screen = h.screen();
    assert!(!screen.contains("copying"), "{screen}");
    assert!(screen.contains("sandbox ready"), "{screen}");
}

/// A finished, applied run reviewed in the session, then the runs of the repository.
fn runs_listed(h: &mut Harness) {
    mid_run(h);
    h.feed(ev::ending(Outcome::Success));
    let report = h.report(Outcome::Success);
    h.app.update(AppEvent::RunEnded(Ok(report)));
    h.keys(&["ctrl-r"]);
    let entry = |id: &str, age: &str, task: &str, outcome: &str, verified, applied| RunEntry {
        id: id.into(),
        dir: format!("/tmp/minicoder-state/runs/{id}"),
        age: age.into(),
        task: task.into(),
        outcome: outcome.into(),
        verified,
        applied,
        changed_files: vec!["pagination.py".into(), "tests/test_pagination.py".into()],
    };
    h.app.update(AppEvent::RunsListed(Ok(vec![
        entry(
            "20261130-051500-3f9a1c2e",
            "2m",
            "page_count drops the last partial page; fix it",
            "success",
            Some(true),
            true,
        ),
        entry(
            "20261129-174210-9b1d0e44",
            "11h",
            "make the \u{1b}[31mred\u{1b}[0m test pass\nand more",
            "failure",
            Some(false),
            false,
        ),
        entry(
            "20261128-090000-77aa01bc",
            "1d",
            "add a page_slice test",
            "interrupted",
            None,
            false,
        ),
    ])));
    h.pump();
}

fn check(name: &str, passed: bool) -> minicoder::protocol::CheckReport {
    minicoder::protocol::CheckReport {
        name: name.into(),
        command: format!("{name} --run"),
        exit_code: Some(if passed { 0 } else { 1 }),
        passed,
        duration_ms: 1200,
        failure: None,
        first_error: (!passed).then(|| "assert 2 == 3".into()),
        output_file: None,
    }
}

fn opened(h: &mut Harness) {
    runs_listed(h);
    h.keys(&["enter"]);
    assert!(
        matches!(h.ops.last(), Some(Op::OpenRun { dir }) if dir.ends_with("3f9a1c2e")),
        "{:?}",
        h.ops
    );
    let entry = h.app.browser().expect("browser").runs[0].clone();
    h.app.update(AppEvent::RunOpened(Ok(Box::new(RunDetail {
        entry,
        reason: "verified: 2 checks passed".into(),
        summary: Some("page_count rounds up".into()),
        patch: Arc::new(DiffModel::parse(ev::DIFF)),
        checks: vec![check("tests", true), check("lint", true)],
        events: vec![
            "   1 run.started  {\"repo\":\"pagination\"}".into(),
            "   2 tool.finished  {\"name\":\"edit_file\"}".into(),
        ],
        events_skipped: 0,
    }))));
}

#[test]
fn the_runs_browser_lists_the_repository_runs() {
    both_sizes("runs_browser", ApprovalMode::Final, runs_listed);
    // Its keys are in the help.
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    runs_listed(&mut h);
    h.keys(&["?"]);
    let screen = h.screen();
    for line in ["Runs keys", "open the selected run", "undo the apply"] {
        assert!(screen.contains(line), "{line}:\n{screen}");
    }
    // The hostile task is drawn without its escape sequence.
    assert!(!screen.contains('\u{1b}'));
}

#[test]
fn a_run_opened_in_the_browser_shows_its_diff_checks_and_events() {
    both_sizes("runs_show", ApprovalMode::Final, opened);
    both_sizes("runs_show_verification", ApprovalMode::Final, |h| {
        opened(h);
        h.keys(&["tab"]);
    });
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    opened(&mut h);
    h.keys(&["tab", "tab"]);
    let screen = h.screen();
    assert!(screen.contains("tool.finished"), "{screen}");
}

#[test]
fn a_reviewed_subset_applied_after_verifying_again() {
    both_sizes("apply_result", ApprovalMode::Final, |h| {
        mid_run(h);
        h.feed(ev::ending(Outcome::Success));
        let report = h.report(Outcome::Success);
        h.app.update(AppEvent::RunEnded(Ok(report)));
        h.keys(&["space", "enter"]);
        assert!(
            matches!(h.ops.last(), Some(Op::Apply(r)) if r.subset.is_some()),
            "{:?}",
            h.ops
        );
        h.app.update(AppEvent::Applied(Ok(Applied {
            changes: vec![('M', "pagination.py".into())],
            merged: Vec::new(),
            verified: Verified::Subset(vec![
                CheckLine {
                    name: "tests".into(),
                    passed: true,
                    detail: "exit 0".into(),
                },
                CheckLine {
                    name: "lint".into(),
                    passed: true,
                    detail: "exit 0".into(),
                },
            ]),
        })));
    });
}

#[test]
fn a_subset_that_fails_verification_asks_before_it_is_applied() {
    let failed = |h: &mut Harness| {
        mid_run(h);
        h.feed(ev::ending(Outcome::Success));
        let report = h.report(Outcome::Success);
        h.app.update(AppEvent::RunEnded(Ok(report)));
        h.keys(&["space", "enter"]);
        h.app
            .update(AppEvent::Applied(Err(ApplyFailure::SubsetFailed {
                why: "1 of 2 checks failed on the chosen hunks".into(),
                checks: vec![
                    CheckLine {
                        name: "tests".into(),
                        passed: false,
                        detail: "exit 1: assert 2 == 3".into(),
                    },
                    CheckLine {
                        name: "lint".into(),
                        passed: true,
                        detail: "exit 0".into(),
                    },
                ],
            })));
    };
    both_sizes("apply_subset_failed", ApprovalMode::Final, failed);
    both_sizes("apply_unverified_confirm", ApprovalMode::Final, |h| {
        failed(h);
        h.keys(&["!"]);
    });
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    failed(&mut h);
    let screen = h.screen();
    assert!(!screen.contains("verified again"), "{screen}");
    assert!(screen.contains("not verified"), "{screen}");
}

#[test]
fn an_undo_from_the_browser_shows_what_it_restored_and_skipped() {
    both_sizes("undo_result", ApprovalMode::Final, |h| {
        runs_listed(h);
        h.keys(&["u", "y"]);
        assert!(
            matches!(h.ops.last(), Some(Op::Undo { force: false, .. })),
            "{:?}",
            h.ops
        );
        h.app.update(AppEvent::Undone(Ok(Undone {
            restored: vec!["restored pagination.py".into()],
            skipped: vec!["tests/test_pagination.py".into()],
        })));
    });
}

#[test]
fn the_browser_and_the_delivery_screens_draw_at_any_size() {
    for (width, height) in [(1, 1), (12, 4), (30, 8), (50, 12), (240, 70)] {
        let mut h = Harness::new(width, height, ApprovalMode::Final);
        opened(&mut h);
        for keys in [&["tab"][..], &["tab"], &["esc"], &["u"], &["y"]] {
            h.keys(keys);
            h.screen();
        }
        h.app.update(AppEvent::Undone(Ok(Undone {
            restored: (0..200).map(|i| format!("restored f{i}.py")).collect(),
            skipped: (0..200).map(|i| format!("g{i}.py")).collect(),
        })));
        let screen = h.screen();
        if height >= 24 {
            assert!(screen.contains("and 1"), "long lists are cut:\n{screen}");
        }
    }
}

#[test]
fn start_up_offers_to_resume_an_interrupted_run() {
    both_sizes("resume_offer", ApprovalMode::Final, |h| {
        h.app.offer_resume(
            "20261201-161203-a1b2c3",
            "page_count drops the last partial page; fix it\u{1b}[2J",
        );
    });
    let mut h = Harness::new(80, 24, ApprovalMode::Final);
    h.app.offer_resume(
        "20261201-161203-a1b2c3",
        "fix the pager\u{1b}]52;c;aGk=\u{7}",
    );
    let screen = h.screen();
    assert!(screen.contains("Resume the interrupted run?"), "{screen}");
    assert!(!screen.contains('\u{1b}') && !screen.contains('\u{7}'));
    h.keys(&["y"]);
    assert!(
        matches!(h.ops.last(), Some(Op::Resume { run_id, .. }) if run_id == "20261201-161203-a1b2c3"),
        "{:?}",
        h.ops
    );
}

#[test]
fn the_status_line_shows_cached_tokens_and_the_cost_against_its_budget() {
    let priced = |events: Vec<RunEvent>| -> Vec<RunEvent> {
        events
            .into_iter()
            .map(|mut event| {
                match &mut event {
                    RunEvent::RunStarted {
                        max_cost_micros, ..
                    } => *max_cost_micros = Some(50_000),
                    RunEvent::ModelResponse {
                        usage, cost_micros, ..
                    } => {
                        usage.cached = usage.input / 2;
                        *cost_micros = Some(9_000);
                    }
                    _ => {}
                }
                event
            })
            .collect()
    };
    both_sizes("status_spend", ApprovalMode::Final, |h| {
        h.start();
        h.feed(priced(ev::opening()));
        h.feed(priced(ev::edit()));
        h.feed(priced(ev::verifying()));
    });
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    h.start();
    h.feed(priced(ev::opening()));
    h.feed(priced(ev::edit()));
    h.feed(priced(ev::verifying()));
    let top = h.screen().lines().next().unwrap_or_default().to_string();
    assert!(top.contains("cached"), "{top}");
    assert!(
        top.contains("of $0.05"),
        "the cost against the budget: {top}"
    );
}

#[test]
fn ask_mode_answers_in_the_stream_and_says_so_in_the_title_and_status() {
    use minicoder::runtime::ask::{Answer, AskUpdate, Citation};
    let scenario = |h: &mut Harness| {
        h.type_text("/ask why does page_count(21, 10) return 2?");
        h.keys(&["enter"]);
        assert!(
            h.ops
                .iter()
                .any(|op| matches!(op, Op::Ask(q) if q.starts_with("why does"))),
            "{:?}",
            h.ops
        );
        h.app.update(AppEvent::AskUpdate(AskUpdate::Refused {
            name: "run_shell".into(),
        }));
        h.app.update(AppEvent::AskUpdate(AskUpdate::Tool {
            name: "read_file".into(),
            summary: "pagination.py lines 1-16 of 16".into(),
        }));
        h.app.update(AppEvent::Asked(Ok(Box::new(Answer {
            answer: "page_count floors the division (pagination.py:3): 21 // 10 is 2, so the partial last page is lost.".into(),
            citations: vec![Citation {
                path: "pagination.py".into(),
                line: 3,
                found: true,
            }],
            model: None,
            tokens: TokenTotals {
                input: 2400,
                output: 60,
                cached: 1800,
                ..TokenTotals::default()
            },
            tool_calls: 1,
            refused_calls: 1,
        }))));
    };
    both_sizes("ask_mode", ApprovalMode::Final, scenario);
    let mut h = Harness::new(160, 48, ApprovalMode::Final);
    scenario(&mut h);
    let screen = h.screen();
    for visible in [
        "ask mode · read-only",
        "Ask — read-only",
        "refused run_shell: ask mode is read-only",
        "page_count floors the division",
    ] {
        assert!(screen.contains(visible), "{visible:?}:\n{screen}");
    }
}
