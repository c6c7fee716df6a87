use super::*;
use crate::model::types::Usage;
use crate::protocol::CheckReport;

fn model() -> ModelId {
    ModelId {
        provider: "p".into(),
        model: "m".into(),
    }
}

fn started(view: &mut RunView) {
    view.start("task");
    view.apply(&RunEvent::RunStarted {
        run_id: "r".into(),
        repo: "/src/repo".into(),
        task: "task".into(),
        baseline_commit: "c".into(),
        fingerprint: "f".into(),
        artifact_dir: "/a".into(),
        max_turns: 10,
        timeout_ms: 1000,
        max_tokens: 0,
        max_cost_micros: None,
        checks: vec!["tests".into(), "lint".into()],
        source: Default::default(),
    });
}

#[test]
fn streamed_deltas_become_one_entry_replaced_by_the_full_reply() {
    let mut view = RunView::new("/src/repo");
    started(&mut view);
    for text in ["Hel", "lo \u{1b}[31mworld"] {
        view.apply(&RunEvent::ModelDelta {
            turn: 1,
            text: text.into(),
        });
    }
    assert_eq!(view.stream.len(), 1);
    assert!(
        matches!(&view.stream[0], StreamEntry::Model { text, streaming: true, .. } if text == "Hello world")
    );
    view.apply(&RunEvent::ModelResponse {
        turn: 1,
        model: model(),
        content: Some("Hello world.".into()),
        tool_calls: Vec::new(),
        usage: Usage {
            input: 10,
            output: 2,
            cached: 0,
            estimated: true,
        },
        cost_micros: None,
        duration_ms: 1,
    });
    assert!(
        matches!(&view.stream[0], StreamEntry::Model { text, streaming: false, .. } if text == "Hello world.")
    );
    assert_eq!(
        (
            view.spend.totals.input,
            view.spend.totals.output,
            view.spend.totals.estimated
        ),
        (10, 2, true)
    );
    assert_eq!(view.spend.cost(), None, "no price, no cost");
    // A reply that was not streamed still shows up.
    view.apply(&RunEvent::ModelResponse {
        turn: 2,
        model: model(),
        content: Some("Second.".into()),
        tool_calls: Vec::new(),
        usage: Usage::default(),
        cost_micros: None,
        duration_ms: 1,
    });
    assert_eq!(view.stream.len(), 2);
}

#[test]
fn a_tool_call_runs_then_finishes_or_is_refused_in_place() {
    let mut view = RunView::new("/src/repo");
    started(&mut view);
    for id in ["c1", "c2"] {
        view.apply(&RunEvent::ToolStarted {
            call_id: id.into(),
            name: "run_shell".into(),
            arguments: "{\"command\":\"ls\"}".into(),
        });
    }
    assert_eq!(view.sandbox, SandboxState::Running);
    view.apply(&RunEvent::ToolFinished {
        call_id: "c1".into(),
        name: "run_shell".into(),
        ok: false,
        summary: "exit 2".into(),
        result: "no\tsuch".into(),
        output_file: Some("outputs/1.txt".into()),
        duration_ms: 7,
        changed_files: Vec::new(),
    });
    view.apply(&RunEvent::PolicyRefused {
        call_id: "c2".into(),
        name: "run_shell".into(),
        reason: "credential".into(),
    });
    assert!(
        matches!(&view.stream[0], StreamEntry::Tool { state: ToolState::Finished { ok: false, duration_ms: 7 }, result, .. } if result == "no    such")
    );
    assert!(
        matches!(&view.stream[1], StreamEntry::Tool { state: ToolState::Refused, summary, .. } if summary == "credential")
    );
}

fn check(name: &str, passed: bool) -> CheckReport {
    CheckReport {
        name: name.into(),
        command: "c".into(),
        exit_code: Some(i32::from(!passed)),
        passed,
        duration_ms: 3,
        failure: None,
        first_error: None,
        output_file: None,
    }
}

#[test]
fn the_matrix_marks_the_running_check_and_stops_unfinished_ones_at_the_end() {
    let mut view = RunView::new("/src/repo");
    started(&mut view);
    view.apply(&RunEvent::VerificationStarted {
        attempt: 1,
        reason: VerificationReason::Baseline,
        checks: vec!["tests".into(), "lint".into()],
    });
    assert_eq!(view.matrix.attempts[0].cells[0], CellState::Running);
    assert_eq!(view.matrix.attempts[0].cells[1], CellState::Pending);
    view.apply(&RunEvent::VerificationCheck {
        attempt: 1,
        check: check("tests", false),
    });
    assert!(matches!(
        view.matrix.attempts[0].cells[0],
        CellState::Done(_)
    ));
    assert_eq!(view.matrix.attempts[0].cells[1], CellState::Running);
    // A check the run never announced gets its own row.
    view.apply(&RunEvent::VerificationStarted {
        attempt: 2,
        reason: VerificationReason::Completion,
        checks: vec!["tests".into(), "lint".into(), "types".into()],
    });
    assert_eq!(view.matrix.checks, ["tests", "lint", "types"]);
    view.apply(&RunEvent::VerificationFinished {
        attempt: 2,
        reason: VerificationReason::Completion,
        passed: false,
        fingerprint: "f".into(),
    });
    view.apply(&RunEvent::RunFinished {
        outcome: Outcome::Failure,
        reason: "r".into(),
        duration_ms: 1,
    });
    assert_eq!(view.matrix.attempts[0].cells[1], CellState::Stopped);
    assert!(!view.is_running());
    assert_eq!(view.sandbox, SandboxState::Removed);
}

#[test]
fn only_a_changed_diff_bumps_its_generation() {
    let mut view = RunView::new("/src/repo");
    started(&mut view);
    let before = view.diff_generation;
    let changed = |diff: &str| RunEvent::WorkspaceChanged {
        fingerprint: "f".into(),
        changed_files: vec!["a".into()],
        changed_total: None,
        diff_total_bytes: None,
        diff: diff.into(),
    };
    view.apply(&changed("d1"));
    view.apply(&changed("d1"));
    assert_eq!(view.diff_generation, before + 1);
    view.apply(&changed("d2"));
    assert_eq!(view.diff_generation, before + 2);
    // A new run never reuses a generation, so a late parse of the old diff is ignored.
    view.start("again");
    assert!(view.diff_generation > before + 2);
    assert!(view.diff.is_empty() && view.stream.is_empty());
}

#[test]
fn formats_read_at_a_glance() {
    assert_eq!(duration(412), "412 ms");
    assert_eq!(duration(3_240), "3.2 s");
    assert_eq!(duration(125_000), "2 m 05 s");
    assert_eq!(tokens(950), "950");
    assert_eq!(tokens(12_345), "12.3k");
    assert_eq!(tokens(1_200_000), "1.2M");
    assert_eq!(short("0123456789abcdef"), "01234567");
    assert_eq!(short("abc"), "abc");
}
