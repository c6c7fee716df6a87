use super::*;

fn lines(text: &str) -> TextLines {
    TextLines::parse(text)
}

fn apply(text: &str, patch: &str) -> Result<String, String> {
    let parsed = parse_unified_diff(patch)?;
    apply_hunks(&lines(text), &parsed.hunks)
        .map(|t| t.render())
        .map_err(|m| m.message)
}

#[test]
fn parses_headers_and_hunks() {
    let patch = "diff --git a/x.py b/x.py\nindex 1..2 100644\n--- a/x.py\t2024-01-01\n+++ b/x.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n";
    let parsed = parse_unified_diff(patch);
    let Ok(parsed) = parsed else {
        panic!("{parsed:?}")
    };
    assert_eq!(parsed.old_path.as_deref(), Some("a/x.py"));
    assert_eq!(parsed.new_path.as_deref(), Some("b/x.py"));
    assert_eq!(parsed.hunks.len(), 1);
    assert_eq!(parsed.hunks[0].old_start, 1);
    assert_eq!(parsed.hunks[0].old_lines(), vec!["a", "b"]);
    assert_eq!(parsed.hunks[0].new_lines(), vec!["a", "c"]);
}

#[test]
fn dev_null_headers_are_none() {
    let parsed = parse_unified_diff("--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n");
    assert!(parsed.is_ok_and(|p| p.old_path.is_none() && p.new_path.is_some()));
}

#[test]
fn modifies_in_the_middle_keeping_the_rest() {
    let out = apply("1\n2\n3\n4\n5\n", "@@ -2,3 +2,3 @@\n 2\n-3\n+three\n 4\n");
    assert_eq!(out, Ok("1\n2\nthree\n4\n5\n".to_string()));
}

#[test]
fn multiple_hunks_apply_in_order_with_offsets() {
    let text = (1..=20).map(|n| format!("{n}\n")).collect::<String>();
    // Headers are off by two lines; the hunks are found nearby.
    let patch = "@@ -5,3 +5,4 @@\n 3\n+3.5\n 4\n 5\n@@ -15,3 +16,2 @@\n 14\n-15\n 16\n";
    let out = apply(&text, patch);
    let Ok(out) = out else { panic!("{out:?}") };
    assert!(out.contains("3\n3.5\n4\n"));
    assert!(out.contains("14\n16\n"));
    assert!(!out.contains("\n15\n"));
}

#[test]
fn mismatch_reports_the_hunk_and_the_actual_lines() {
    let text = "def f():\n    return 1\n\ndef g():\n    return 2\n";
    let patch = "@@ -4,2 +4,2 @@\n def g():\n-    return 3\n+    return 4\n";
    let err = apply(text, patch).err().unwrap_or_default();
    assert!(err.contains("hunk 1 of 1"), "{err}");
    assert!(
        err.contains("      | -") || err.contains("    return 3"),
        "{err}"
    );
    assert!(err.contains("     4| def g():"), "{err}");
    assert!(err.contains("     5|     return 2"), "{err}");
    assert!(err.contains("No change was made"), "{err}");
}

#[test]
fn trailing_whitespace_differences_are_tolerated() {
    let out = apply("a  \nb\n", "@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
    assert_eq!(out, Ok("a  \nc\n".to_string()));
}

#[test]
fn no_newline_marker_is_honoured() {
    let out = apply(
        "a\nb",
        "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n",
    );
    assert_eq!(out, Ok("a\nc\n".to_string()));
    let out = apply(
        "a\nb\n",
        "@@ -1,2 +1,2 @@\n a\n-b\n+c\n\\ No newline at end of file\n",
    );
    assert_eq!(out, Ok("a\nc".to_string()));
}

#[test]
fn crlf_files_keep_their_line_endings() {
    let out = apply("a\r\nb\r\n", "@@ -1,2 +1,2 @@\n a\n-b\n+c\n");
    assert_eq!(out, Ok("a\r\nc\r\n".to_string()));
}

#[test]
fn pure_insertion_goes_after_the_named_line() {
    let out = apply("a\nb\n", "@@ -1,0 +2 @@\n+between\n");
    assert_eq!(out, Ok("a\nbetween\nb\n".to_string()));
}

#[test]
fn malformed_patches_are_explained() {
    assert!(
        parse_unified_diff("just text")
            .is_err_and(|e| e.contains("no hunks") || e.contains("expected a hunk header"))
    );
    assert!(parse_unified_diff("@@ -1 +1 @@\n a\n").is_err_and(|e| e.contains("changes nothing")));
    assert!(
        parse_unified_diff("@@ -1 +1 @@\n-a\n+b\nweird\n")
            .is_err_and(|e| e.contains("must start with"))
    );
    let two_files =
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n";
    assert!(parse_unified_diff(two_files).is_err_and(|e| e.contains("more than one file")));
}

#[test]
fn a_created_file_can_lack_a_final_newline() {
    let out = apply(
        "",
        "--- /dev/null\n+++ b/x\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n",
    );
    assert_eq!(out, Ok("a\nb".to_string()));
    let out = apply("", "--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+a\n");
    assert_eq!(out, Ok("a\n".to_string()));
}

#[test]
fn an_empty_context_line_written_as_a_space_at_the_end_is_context_not_a_trailing_blank() {
    // Lines added before the file's only (empty) line.
    let patch = "--- a/f\n+++ b/f\n@@ -1 +1,3 @@\n+a\n+b\n \n";
    let parsed = parse_unified_diff(patch).expect("parses");
    let after = apply_hunks(&TextLines::parse("\n"), &parsed.hunks).expect("applies");
    assert_eq!(after.render(), "a\nb\n\n");
    // Bare empty lines after the hunk are still the message's own.
    let trailing = "--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n x\n+y\n\n\n";
    let parsed = parse_unified_diff(trailing).expect("parses");
    assert_eq!(parsed.hunks[0].lines.len(), 2);
}

#[test]
fn lines_that_look_like_file_headers_inside_a_hunk_are_lines_when_the_counts_say_so() {
    // Removing `-- a` and adding `++ b` reads `--- a` / `+++ b` in the diff.
    let before = "-- a\nkeep\n";
    let after = "++ b\nkeep\n";
    let patch = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n--- a\n+++ b\n keep\n";
    let parsed = parse_unified_diff(patch).expect("parses");
    let out = apply_hunks(&TextLines::parse(before), &parsed.hunks).expect("applies");
    assert_eq!(out.render(), after);
    // Without counts still to come, the pair is the next file's headers.
    let two = "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n--- a/g\n+++ b/g\n@@ -1 +1 @@\n-x\n+y\n";
    assert!(
        parse_unified_diff(two)
            .expect_err("two files")
            .contains("more than one file")
    );
}
