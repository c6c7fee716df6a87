use super::*;

fn call(name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments: args.into(),
        ..ToolCall::default()
    }
}

#[test]
fn a_failing_command_keeps_its_exit_code_and_failing_tests() {
    let result = "exit code 1; duration 310 ms\n--- stdout:\n.F....\n\
________ test_partial_last_page_counts ________\n\
E       assert 2 == 3\n\
tests/test_pagination.py:11: AssertionError\n\
FAILED tests/test_pagination.py::test_partial_last_page_counts - assert 2 == 3\n\
1 failed, 5 passed in 0.04s\n--- stderr: (empty)\n";
    let d = summarise(
        3,
        &call("run_shell", r#"{"command": "python3 -m pytest -q"}"#),
        result,
    );
    assert_eq!(d.tool, "run_shell");
    assert_eq!(d.target, "`python3 -m pytest -q`");
    assert_eq!(d.outcome, "exit code 1; duration 310 ms");
    let text = d.render();
    assert!(
        text.starts_with("#3 run_shell `python3 -m pytest -q` → exit code 1"),
        "{text}"
    );
    assert!(
        text.contains("failing tests: tests/test_pagination.py::test_partial_last_page_counts"),
        "{text}"
    );
    assert!(text.contains("E       assert 2 == 3"), "{text}");
    assert!(text.contains("tests/test_pagination.py"), "{text}");
    assert_eq!(d.chars, result.len());
}

#[test]
fn reads_keep_their_path_and_definitions_and_symbols_their_names() {
    let result = "pagination.py (lines 1-20 of 20)\n   1| \"\"\"Pagination helpers.\"\"\"\n   4| def page_count(total_items: int, page_size: int) -> int:\n  12| def page_slice(items: list, page: int, page_size: int) -> list:\n  20| class Pager:\n";
    let d = summarise(
        1,
        &call("read_file", r#"{"path": "pagination.py"}"#),
        result,
    );
    assert_eq!(d.target, "pagination.py");
    assert_eq!(d.outcome, "pagination.py (lines 1-20 of 20)");
    assert!(
        d.facts
            .iter()
            .any(|f| f == "defines: page_count, page_slice, Pager"),
        "{:?}",
        d.facts
    );

    let result = "src/lib.rs (Rust): 3 symbols\nfunction page_count  L1-5\nimpl impl Pager  L7-20\n  method next  L8-12\n";
    let d = summarise(
        2,
        &call("tree_sitter_symbols", r#"{"path": "src/lib.rs"}"#),
        result,
    );
    assert!(
        d.facts
            .iter()
            .any(|f| f == "symbols: page_count L1-5, impl Pager L7-20, next L8-12"),
        "{:?}",
        d.facts
    );
}

#[test]
fn searches_count_matches_per_file_and_edits_their_lines() {
    let result =
        "src/a.py:3:page_count(1)\nsrc/a.py:9:page_count(2)\nsrc/b.py:1:import page_count\n";
    let d = summarise(
        4,
        &call("ripgrep", r#"{"pattern": "page_count", "path": "src"}"#),
        result,
    );
    assert_eq!(d.target, "/page_count/ in src");
    assert!(
        d.facts
            .iter()
            .any(|f| f == "matches: src/a.py ×2, src/b.py ×1"),
        "{:?}",
        d.facts
    );

    let patch = "--- a/p.py\n+++ b/p.py\n@@ -1,2 +1,3 @@\n-a\n+b\n+c\n d\n";
    let args = serde_json::json!({"path": "p.py", "patch": patch}).to_string();
    let d = summarise(
        5,
        &call("edit_file", &args),
        "Applied the patch to p.py: +2 -1 lines.",
    );
    assert_eq!(d.target, "p.py (+2 −1)");
    assert_eq!(d.outcome, "Applied the patch to p.py: +2 -1 lines.");
}

#[test]
fn a_discovery_is_bounded_whatever_the_result() {
    let mut result = String::from("exit code 2; duration 1 ms\n");
    for i in 0..2000 {
        result.push_str(&format!(
            "FAILED t/test_{i}.py::test_{i} - AssertionError: {}\n",
            "y".repeat(500)
        ));
    }
    let args = serde_json::json!({"command": "x".repeat(10_000)}).to_string();
    let d = summarise(6, &call("run_shell", &args), &result);
    assert!(d.facts.len() <= MAX_FACTS);
    let text = d.render();
    assert!(text.len() < 2_500, "{} chars", text.len());
    let tests = d
        .facts
        .iter()
        .find(|f| f.starts_with("failing tests: t/test_0.py::test_0, "))
        .expect("the failing tests are listed");
    let shown = tests.matches("::test_").count();
    assert!(
        tests.ends_with(&format!("(+{} more)", 2000 - shown)),
        "all 2000 are counted: {tests}"
    );
    // Arguments that are not JSON still name the action.
    let d = summarise(7, &call("run_shell", "{not json"), "boom");
    assert_eq!(d.outcome, "boom");
}
