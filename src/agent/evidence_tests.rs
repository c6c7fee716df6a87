use super::*;

const PYTEST: &str = "\
============================= test session starts ==============================
collected 6 items

tests/test_pagination.py .F.F..                                          [100%]

=================================== FAILURES ===================================
________________________ test_partial_last_page_counts _________________________

    def test_partial_last_page_counts():
>       assert page_count(21, 10) == 3
E       assert 2 == 3
E        +  where 2 = page_count(21, 10)

tests/test_pagination.py:11: AssertionError
______________________ test_last_page_holds_the_remainder ______________________

    def test_last_page_holds_the_remainder():
>       assert page_slice(list(range(25)), 3, 10) == [20, 21, 22, 23, 24]
E       IndexError: page 3 is out of range

pagination.py:17: IndexError
=========================== short test summary info ============================
FAILED tests/test_pagination.py::test_partial_last_page_counts - assert 2 == 3
FAILED tests/test_pagination.py::test_last_page_holds_the_remainder - IndexError: page 3 is out of range
========================= 2 failed, 4 passed in 0.05s ==========================
";

#[test]
fn pytest_failures_name_the_tests_the_assertion_and_the_error() {
    let e = extract(PYTEST, 8);
    assert_eq!(
        e.failing_tests,
        [
            "tests/test_pagination.py::test_partial_last_page_counts",
            "tests/test_pagination.py::test_last_page_holds_the_remainder",
        ]
    );
    let text = e.lines.join("\n");
    assert!(text.contains("E       assert 2 == 3"), "{text}");
    assert!(
        text.contains("E       IndexError: page 3 is out of range"),
        "{text}"
    );
    assert!(
        !text.contains("_____"),
        "section headers only name the test: {text}"
    );
    assert!(text.contains("FAILED tests/test_pagination.py::test_partial_last_page_counts"));
    assert!(e.lines.len() <= 8);
    // Kept in the order of the output.
    let assert_at = text.find("assert 2 == 3").unwrap_or(usize::MAX);
    let summary_at = text.find("FAILED tests/").unwrap_or(0);
    assert!(assert_at < summary_at, "{text}");
    assert!(
        !text.contains("test session starts"),
        "noise is left out: {text}"
    );
}

#[test]
fn cargo_test_failures_keep_the_test_and_the_panic() {
    let out = "\
running 3 tests
test tests::adds ... ok
test tests::rounds_up ... FAILED
test tests::empty ... ok

failures:

---- tests::rounds_up stdout ----

thread 'tests::rounds_up' panicked at src/lib.rs:42:9:
assertion `left == right` failed
  left: 2
 right: 3
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace

failures:
    tests::rounds_up

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
error: test failed, to rerun pass `--lib`
";
    let e = extract(out, 10);
    assert_eq!(e.failing_tests, ["tests::rounds_up"]);
    let text = e.lines.join("\n");
    for needle in [
        "panicked at src/lib.rs:42:9",
        "assertion `left == right` failed",
        "left: 2",
        "right: 3",
        "test result: FAILED",
    ] {
        assert!(text.contains(needle), "{needle} missing from {text}");
    }
    assert!(!text.contains("tests::adds"), "{text}");
}

#[test]
fn go_jest_and_unittest_failures_are_named() {
    let go = "=== RUN   TestRound\n    round_test.go:12: got 2, want 3\n--- FAIL: TestRound (0.00s)\nFAIL\nFAIL\texample.com/pages\t0.003s\n";
    let e = extract(go, 6);
    assert_eq!(e.failing_tests, ["TestRound"]);
    assert!(e.lines.iter().any(|l| l.contains("round_test.go:12")));

    let jest = "FAIL src/pages.test.js\n  pages\n    ✓ counts exact pages (2 ms)\n    ✕ counts the partial page (3 ms)\n\n  ● pages › counts the partial page\n\n    expect(received).toBe(expected)\n\n    Expected: 3\n    Received: 2\n";
    let e = extract(jest, 8);
    assert_eq!(
        e.failing_tests,
        ["counts the partial page", "pages › counts the partial page"]
    );
    assert!(e.lines.iter().any(|l| l == "Expected: 3"));
    assert!(e.lines.iter().any(|l| l == "Received: 2"));

    let unittest = "F.\n======================================================================\nFAIL: test_round (test_pages.PagesTest)\n----------------------------------------------------------------------\nTraceback (most recent call last):\n  File \"test_pages.py\", line 8, in test_round\n    self.assertEqual(page_count(21, 10), 3)\nAssertionError: 2 != 3\n\nFAILED (failures=1)\n";
    let e = extract(unittest, 8);
    assert_eq!(e.failing_tests, ["test_round (test_pages.PagesTest)"]);
    assert!(e.lines.iter().any(|l| l == "AssertionError: 2 != 3"));
}

#[test]
fn compiler_errors_are_telling_too() {
    let out = "   Compiling pages v0.1.0\nerror[E0425]: cannot find value `totl` in this scope\n --> src/lib.rs:3:5\n  |\n3 |     totl / size\n  |     ^^^^ help: a local variable with a similar name exists: `total`\n\nerror: could not compile `pages` (lib) due to 1 previous error\n";
    let e = extract(out, 4);
    assert!(e.failing_tests.is_empty());
    assert_eq!(
        e.lines,
        [
            "error[E0425]: cannot find value `totl` in this scope",
            "--> src/lib.rs:3:5",
            "error: could not compile `pages` (lib) due to 1 previous error",
        ]
    );
}

#[test]
fn hostile_output_is_bounded_and_cleaned() {
    let mut out = String::new();
    for i in 0..5000 {
        out.push_str(&format!(
            "FAILED t.py::test_{i} - \u{1b}[31massert {i}\u{1b}[0m\x07\n"
        ));
    }
    out.push_str(&format!("E   {}\n", "x".repeat(100_000)));
    let e = extract(&out, 5);
    assert_eq!(e.lines.len(), 5);
    assert_eq!(e.failing_tests.len(), MAX_TEST_NAMES);
    assert_eq!(e.more_tests, 5000 - MAX_TEST_NAMES);
    assert_eq!(e.more_lines, 5001 - 5);
    for line in &e.lines {
        assert!(line.chars().count() <= MAX_LINE_CHARS + 1, "{line}");
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
    }
    assert_eq!(e.lines[0], "FAILED t.py::test_0 - assert 0");
    assert!(extract("all good\n3 passed in 0.1s\n", 5).is_empty());
}

#[test]
fn clip_cuts_at_character_boundaries() {
    assert_eq!(clip("héllo", 2), "hé…");
    assert_eq!(clip("hé", 2), "hé");
}
