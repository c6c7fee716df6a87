use super::*;
use crate::model::types::{ChatMessage, ToolCall};

fn call(i: usize, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: format!("call_{i}"),
        name: name.into(),
        arguments: args.into(),
        ..ToolCall::default()
    }
}

fn turn(i: usize, result: String) -> [ChatMessage; 2] {
    let c = call(i, "read_file", &format!(r#"{{"path":"f{i}.py"}}"#));
    [
        ChatMessage::assistant(None, vec![c]),
        ChatMessage::tool_result(format!("call_{i}"), result),
    ]
}

/// Every assistant tool call has a tool message with its id right after
/// its message, and every tool message answers a call before it.
fn assert_paired(history: &[ChatMessage]) {
    let mut open: Vec<String> = Vec::new();
    for m in history {
        match m.role {
            Role::Assistant => {
                assert!(open.is_empty(), "calls left unanswered: {open:?}");
                open = m.tool_calls.iter().map(|c| c.id.clone()).collect();
            }
            Role::Tool => {
                let id = m.tool_call_id.clone().unwrap_or_default();
                let at = open.iter().position(|o| *o == id);
                assert!(at.is_some(), "a tool message {id} without its call");
                open.retain(|o| *o != id);
            }
            _ => assert!(
                open.is_empty(),
                "a user message between a call and its result"
            ),
        }
    }
}

const PYTEST: &str = "exit code 1; duration 300 ms\n--- stdout:\n\
FAILED tests/test_pagination.py::test_partial_last_page_counts - assert 2 == 3\n\
1 failed, 5 passed in 0.05s\n";

#[test]
fn compaction_shrinks_old_results_and_keeps_the_structure() {
    let mut ctx = Context::default();
    for i in 0..10 {
        ctx.history.extend(turn(i, "x".repeat(4000)));
    }
    let before_len = ctx.history.len();
    let c = ctx.compact(1000, usize::MAX).expect("compacted");
    assert_eq!(ctx.history.len(), before_len, "no message is dropped");
    assert!(c.after_tokens < c.before_tokens / 2, "{c:?}");
    assert_eq!(
        c.messages_compacted, 6,
        "the last 8 messages (4 calls) stay whole"
    );
    assert_eq!(ctx.discoveries.len(), 6);
    let first = ctx.discoveries.items()[0].render();
    assert!(first.starts_with("#1 read_file f0.py"), "{first}");
    let last = ctx
        .history
        .last()
        .and_then(|m| m.content.clone())
        .unwrap_or_default();
    assert_eq!(last.len(), 4000, "recent results are intact");
    assert!(
        ctx.compact(1000, usize::MAX).is_none(),
        "nothing left to compact"
    );
    let msgs = ctx.messages(
        [ChatMessage::system("sys"), ChatMessage::user("task")],
        None,
    );
    assert!(
        msgs[2]
            .content
            .as_deref()
            .unwrap_or("")
            .contains("Summary of earlier actions")
    );
    assert_paired(&ctx.history);
}

#[test]
fn the_failing_test_of_an_early_command_survives_compaction() {
    let mut ctx = Context::default();
    let c = call(0, "run_shell", r#"{"command":"python3 -m pytest -q"}"#);
    ctx.history.push(ChatMessage::assistant(None, vec![c]));
    ctx.history.push(ChatMessage::tool_result(
        "call_0",
        format!("{PYTEST}{}", "noise line\n".repeat(800)),
    ));
    for i in 1..12 {
        ctx.history.extend(turn(i, "y".repeat(6000)));
    }
    ctx.compact(0, 20_000).expect("compacted");
    assert!(ctx.chars() <= 20_000, "{}", ctx.chars());
    let summary = ctx.discoveries.render().unwrap_or_default();
    assert!(
        summary.contains("tests/test_pagination.py::test_partial_last_page_counts"),
        "{summary}"
    );
    assert!(
        summary.contains("`python3 -m pytest -q` → exit code 1"),
        "{summary}"
    );
    assert_paired(&ctx.history);
}

#[test]
fn whole_old_turns_go_when_summaries_are_not_enough() {
    let mut ctx = Context::default();
    for i in 0..12 {
        // The arguments are large (a patch), the result small: only
        // dropping the turn frees the room.
        let patch = format!(
            "--- a/f{i}.py\n+++ b/f{i}.py\n@@ -1 +1 @@\n-a\n+{}\n",
            "b".repeat(3000)
        );
        let args = serde_json::json!({"path": format!("f{i}.py"), "patch": patch}).to_string();
        ctx.history.push(ChatMessage::assistant(
            Some("editing".into()),
            vec![call(i, "edit_file", &args)],
        ));
        ctx.history.push(ChatMessage::tool_result(
            format!("call_{i}"),
            format!("Applied the patch to f{i}.py: +1 -1 lines."),
        ));
        ctx.history
            .push(ChatMessage::user("a follow-up between turns"));
    }
    let latest = ctx.history[ctx.history.len() - 3].clone();
    let c = ctx.compact(0, 8_000).expect("compacted");
    assert!(ctx.chars() <= 8_000, "{}", ctx.chars());
    assert!(ctx.history.len() < 36, "turns were dropped");
    assert_eq!(ctx.history[0].role, Role::Assistant, "whole turns go");
    assert_eq!(
        ctx.history[ctx.history.len() - 3],
        latest,
        "the latest turn is untouched"
    );
    assert!(c.messages_compacted >= 3);
    let summary = ctx.discoveries.render().unwrap_or_default();
    assert!(summary.contains("#1 edit_file f0.py (+1 −1)"), "{summary}");
    assert_paired(&ctx.history);
}

#[test]
fn the_latest_turn_is_never_compacted_even_when_too_big() {
    let mut ctx = Context::default();
    ctx.history.extend(turn(0, "a".repeat(3000)));
    let c = call(1, "run_shell", r#"{"command":"cat big"}"#);
    let d = call(2, "run_shell", r#"{"command":"cat bigger"}"#);
    ctx.history.push(ChatMessage::assistant(None, vec![c, d]));
    ctx.history
        .push(ChatMessage::tool_result("call_1", "z".repeat(16_000)));
    ctx.history
        .push(ChatMessage::tool_result("call_2", "w".repeat(16_000)));
    ctx.compact(0, 1_000);
    assert_eq!(ctx.history.len(), 3, "the older turn went");
    assert_eq!(
        ctx.history[1].content.as_deref().map(str::len),
        Some(16_000)
    );
    assert_eq!(
        ctx.history[2].content.as_deref().map(str::len),
        Some(16_000)
    );
    assert!(
        ctx.chars() > 1_000,
        "what is left is too big: the caller stops"
    );
    assert_paired(&ctx.history);
}

#[test]
fn discoveries_stay_bounded_and_merged_ones_keep_identifiers() {
    let mut ctx = Context::default();
    let mut rounds = 0;
    for i in 0..400 {
        let c = call(
            i,
            "run_shell",
            &format!(r#"{{"command":"pytest tests/test_{i}.py"}}"#),
        );
        ctx.history.push(ChatMessage::assistant(None, vec![c]));
        ctx.history.push(ChatMessage::tool_result(
            format!("call_{i}"),
            format!(
                "exit code 1; duration 1 ms\nFAILED tests/test_{i}.py::test_case_{i} - assert 0\n{}",
                "q".repeat(3000)
            ),
        ));
        if ctx.chars() > 30_000 {
            ctx.compact(0, 15_000);
            rounds += 1;
            assert!(ctx.chars() <= 15_000, "round {rounds}: {}", ctx.chars());
            assert!(
                ctx.discoveries.chars() <= 5_000,
                "{}",
                ctx.discoveries.chars()
            );
            assert_paired(&ctx.history);
        }
    }
    assert!(rounds > 5);
    let summary = ctx.discoveries.render().unwrap_or_default();
    assert!(summary.contains("(merged): run_shell ×"), "{summary}");
    assert!(
        summary.contains("`pytest tests/test_0.py`"),
        "the oldest are named: {summary}"
    );
    assert!(
        summary.contains("tests/test_0.py::test_case_0"),
        "{summary}"
    );
    let json = serde_json::to_string(&ctx).expect("serialise");
    let back: Context = serde_json::from_str(&json).expect("deserialise");
    assert_eq!(back, ctx);
    assert_eq!(
        history_chars(&back.history) + back.discoveries.chars(),
        ctx.chars()
    );
}

#[test]
fn a_call_id_repeated_across_turns_names_the_right_call() {
    let mut ctx = Context::default();
    for (i, path) in ["first.py", "second.py"].iter().enumerate() {
        let mut c = call(0, "read_file", &format!(r#"{{"path":"{path}"}}"#));
        c.id = "call_1".into();
        ctx.history.push(ChatMessage::assistant(None, vec![c]));
        ctx.history.push(ChatMessage::tool_result(
            "call_1",
            format!("{i}").repeat(3000),
        ));
    }
    for i in 0..4 {
        ctx.history.extend(turn(10 + i, "r".repeat(100)));
    }
    ctx.compact(0, usize::MAX).expect("compacted");
    let items = ctx.discoveries.items();
    assert_eq!(items[0].target, "first.py");
    assert_eq!(items[1].target, "second.py");
}
