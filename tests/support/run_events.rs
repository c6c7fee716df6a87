//! A realistic run as [`RunEvent`]s, for driving the interactive app in tests
//! and benchmarks: the demo's pagination fix, told event by event.
#![allow(dead_code)]

use minicoder::model::types::{ModelId, Usage};
use minicoder::protocol::{CheckReport, ToolCallSummary, VerificationReason};
use minicoder::protocol::{Outcome, RunEvent};
use minicoder::protocol::{PlanItem, PlanStatus};

pub const ARTIFACTS: &str = "/tmp/minicoder-state/runs/20261130-051500-3f9a1c2e";

pub const DIFF: &str = "diff --git a/pagination.py b/pagination.py
index 3b18e51..8d2c7f0 100644
--- a/pagination.py
+++ b/pagination.py
@@ -4,7 +4,7 @@
 def page_count(total_items: int, page_size: int) -> int:
     \"\"\"Number of pages needed to show `total_items`, `page_size` per page.\"\"\"
     if page_size <= 0:
         raise ValueError(\"page_size must be positive\")
-    return total_items // page_size
+    return (total_items + page_size - 1) // page_size
 
 
 def page_slice(items: list, page: int, page_size: int) -> list:
@@ -14,4 +14,5 @@ def page_slice(items: list, page: int, page_size: int) -> list:
         raise IndexError(f\"page {page} is out of range\")
     start = (page - 1) * page_size
-    return items[start : start + page_size]
+    end = start + page_size
+    return items[start:end]
diff --git a/tests/test_pagination.py b/tests/test_pagination.py
index 1111111..2222222 100644
--- a/tests/test_pagination.py
+++ b/tests/test_pagination.py
@@ -10,3 +10,7 @@ def test_exact_pages():
 
 def test_partial_last_page():
     assert page_count(11, 5) == 3
+
+
+def test_last_page_slice():
+    assert page_slice(list(range(11)), 3, 5) == [10]
";

pub fn model() -> ModelId {
    ModelId {
        provider: "gemini".into(),
        model: "gemini-2.5-flash".into(),
    }
}

pub fn plan(statuses: [PlanStatus; 3]) -> RunEvent {
    let items = [
        "Find how page_count rounds",
        "Fix page_count to round up",
        "Add a test for the last page",
    ];
    RunEvent::PlanUpdated {
        items: items
            .iter()
            .zip(statuses)
            .enumerate()
            .map(|(i, (content, status))| PlanItem {
                id: format!("{}", i + 1),
                content: (*content).into(),
                status,
                notes: None,
            })
            .collect(),
    }
}

pub fn started() -> RunEvent {
    RunEvent::RunStarted {
        run_id: "20261130-051500-3f9a1c2e".into(),
        repo: "/home/ada/src/pagination".into(),
        task: "page_count drops the last partial page; fix it".into(),
        baseline_commit: "9f1c2b7d4e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c".into(),
        fingerprint: "sha256:5b1e0c9d8a7f6e5d4c3b2a1908f7e6d5c4b3a291".into(),
        artifact_dir: ARTIFACTS.into(),
        max_turns: 30,
        timeout_ms: 1_800_000,
        max_tokens: 0,
        max_cost_micros: None,
        checks: vec!["tests".into(), "lint".into()],
        source: Default::default(),
    }
}

pub fn check(name: &str, passed: bool, ms: u64) -> CheckReport {
    CheckReport {
        name: name.into(),
        command: if name == "tests" {
            "python3 -m pytest -q".into()
        } else {
            "python3 -m pyflakes .".into()
        },
        exit_code: Some(if passed { 0 } else { 1 }),
        passed,
        duration_ms: ms,
        failure: None,
        first_error: None,
        output_file: Some(format!("outputs/verify-{name}.txt")),
    }
}

fn request(turn: u32) -> RunEvent {
    RunEvent::ModelRequest {
        turn,
        model: model(),
        messages: 3 + turn as usize * 2,
        estimated_input_tokens: 1800 + turn as u64 * 600,
    }
}

fn response(turn: u32, content: Option<&str>, calls: &[(&str, &str, &str)]) -> RunEvent {
    RunEvent::ModelResponse {
        turn,
        model: model(),
        content: content.map(String::from),
        tool_calls: calls
            .iter()
            .map(|(id, name, args)| ToolCallSummary {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*args).into(),
            })
            .collect(),
        usage: Usage {
            input: 1800 + turn as u64 * 600,
            output: 120 + turn as u64 * 10,
            cached: 0,
            estimated: false,
        },
        cost_micros: None,
        duration_ms: 900,
    }
}

fn tool(id: &str, name: &str, args: &str, summary: &str, result: &str, ms: u64) -> [RunEvent; 2] {
    [
        RunEvent::ToolStarted {
            call_id: id.into(),
            name: name.into(),
            arguments: args.into(),
        },
        RunEvent::ToolFinished {
            call_id: id.into(),
            name: name.into(),
            ok: true,
            summary: summary.into(),
            result: result.into(),
            output_file: None,
            duration_ms: ms,
            changed_files: Vec::new(),
        },
    ]
}

/// The first part of the run: planning, reading, searching, a baseline that fails.
pub fn opening() -> Vec<RunEvent> {
    use PlanStatus::*;
    let mut events = vec![
        started(),
        RunEvent::VerificationStarted {
            attempt: 1,
            reason: VerificationReason::Baseline,
            checks: vec!["tests".into(), "lint".into()],
        },
        request(1),
        RunEvent::ModelDelta {
            turn: 1,
            text: "I'll start by reading pagination.py ".into(),
        },
        RunEvent::ModelDelta {
            turn: 1,
            text: "and the tests that cover page_count.".into(),
        },
        response(
            1,
            Some("I'll start by reading pagination.py and the tests that cover page_count."),
            &[("call_1", "update_plan", "{}")],
        ),
        plan([InProgress, Pending, Pending]),
    ];
    events.extend(tool(
        "call_2",
        "read_file",
        r#"{"path":"pagination.py"}"#,
        "24 lines",
        "1\t\"\"\"Pagination helpers for a list view.\"\"\"\n2\t\n3\t\n4\tdef page_count(total_items: int, page_size: int) -> int:\n5\t    \"\"\"Number of pages needed.\"\"\"\n6\t    if page_size <= 0:\n7\t        raise ValueError(\"page_size must be positive\")\n8\t    return total_items // page_size",
        3,
    ));
    events.extend([
        RunEvent::VerificationCheck {
            attempt: 1,
            check: check("tests", false, 1240),
        },
        RunEvent::VerificationCheck {
            attempt: 1,
            check: check("lint", true, 310),
        },
        RunEvent::VerificationFinished {
            attempt: 1,
            reason: VerificationReason::Baseline,
            passed: false,
            fingerprint: "sha256:5b1e0c9d8a7f".into(),
        },
        request(2),
    ]);
    events.extend(tool(
        "call_3",
        "search",
        r#"{"pattern":"page_count","path":"."}"#,
        "5 matches in 2 files",
        "pagination.py:4: def page_count(total_items: int, page_size: int) -> int:\npagination.py:13:     if page < 1 or page > max(1, page_count(len(items), page_size)):\ntests/test_pagination.py:1: from pagination import page_count, page_slice\ntests/test_pagination.py:8:     assert page_count(10, 5) == 2\ntests/test_pagination.py:12:     assert page_count(11, 5) == 3",
        8,
    ));
    events.push(plan([Done, InProgress, Pending]));
    events
}

/// The edit and its live diff.
pub fn edit() -> Vec<RunEvent> {
    let mut events = vec![request(3)];
    events.extend(tool(
        "call_4",
        "edit_file",
        r#"{"path":"pagination.py","patch":"@@ ..."}"#,
        "applied 2 hunks to pagination.py",
        "applied",
        4,
    ));
    events.push(RunEvent::WorkspaceChanged {
        fingerprint: "sha256:77aa00bb11cc22dd33ee44ff5566778899aabbcc".into(),
        changed_files: vec!["pagination.py".into(), "tests/test_pagination.py".into()],
        changed_total: None,
        diff: DIFF.into(),
        diff_total_bytes: None,
    });
    events.extend(tool(
        "call_5",
        "run_shell",
        r#"{"command":"python3 -m pytest -q"}"#,
        "exit 0 in 1.3 s",
        "....                                                   [100%]\n4 passed in 0.04s",
        1310,
    ));
    events.push(plan([
        PlanStatus::Done,
        PlanStatus::Done,
        PlanStatus::InProgress,
    ]));
    events
}

/// Completion, a verification that is still running.
pub fn verifying() -> Vec<RunEvent> {
    vec![
        request(4),
        RunEvent::ModelDelta {
            turn: 4,
            text: "The fix rounds up and the new test covers the last page. ".into(),
        },
        RunEvent::ModelDelta {
            turn: 4,
            text: "Asking for completion.".into(),
        },
        RunEvent::VerificationStarted {
            attempt: 2,
            reason: VerificationReason::Completion,
            checks: vec!["tests".into(), "lint".into()],
        },
        RunEvent::VerificationCheck {
            attempt: 2,
            check: check("tests", true, 1180),
        },
    ]
}

/// The end: every check passes, the run succeeds.
pub fn ending(outcome: Outcome) -> Vec<RunEvent> {
    vec![
        response(4, None, &[("call_6", "complete", "{}")]),
        RunEvent::VerificationCheck {
            attempt: 2,
            check: check("lint", true, 290),
        },
        RunEvent::VerificationFinished {
            attempt: 2,
            reason: VerificationReason::Completion,
            passed: true,
            fingerprint: "sha256:77aa00bb11cc".into(),
        },
        plan([PlanStatus::Done, PlanStatus::Done, PlanStatus::Done]),
        RunEvent::RunFinished {
            outcome,
            reason: "verified: 2 checks passed".into(),
            duration_ms: 48_200,
        },
    ]
}

/// The whole run, start to finish.
pub fn whole_run() -> Vec<RunEvent> {
    let mut events = opening();
    events.extend(edit());
    events.extend(verifying());
    events.extend(ending(Outcome::Success));
    events
}
