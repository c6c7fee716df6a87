//! The line that says why a check failed, for people (headless
//! progress and the session's matrix): the first meaningful line of its
//! stderr — not a build tool's progress — else the first failure line of its
//! stdout. Output is hostile: the line is bounded and has no control
//! characters left.

/// At most this many characters are kept.
const MAX_CHARS: usize = 200;
/// At most this much of a stream is looked at.
const SCAN_BYTES: usize = 256 << 10;

/// Progress lines of build tools and package managers: not an error.
const PROGRESS: [&str; 23] = [
    "Compiling ",
    "Checking ",
    "Downloading ",
    "Downloaded ",
    "Finished ",
    "Running ",
    "Blocking ",
    "Updating ",
    "Locking ",
    "Adding ",
    "Fresh ",
    "Doc-tests ",
    "Fetching ",
    "Installing ",
    "Collecting ",
    "go: downloading ",
    "go: finding ",
    "npm WARN",
    "npm notice",
    "warning:",
    "> ",
    "===",
    "___",
];

/// Words that make a stdout line a failure line.
const FAILURE_MARKS: [&str; 8] = [
    "FAILED",
    "FAIL",
    "Error",
    "error",
    "not ok",
    "panicked",
    "assert",
    "not found",
];

/// How test runners and compilers start their own error lines: pytest's
/// `E   …`, rustc's `error[E…]` and `error:`, Go's `--- FAIL:`, unittest's
/// `FAIL:`/`ERROR:`, Node's and mocha's `Error:`, TAP's `not ok`. Such a
/// line beats any other that merely mentions an error (a quoted source line
/// with `raise TypeError(…)`).
const RUNNER_MARKS: [&str; 10] = [
    "E   ",
    "error[",
    "error:",
    "--- FAIL:",
    "FAIL:",
    "ERROR:",
    "Error:",
    "not ok ",
    "FAILED ",
    "fatal error:",
];

/// The line to show for a failing check with these streams, if any: a
/// runner's own error line first ([`RUNNER_MARKS`]), else the first line
/// that mentions a failure. A
/// stream longer than the scan window is looked at by its beginning and,
/// when that holds no failure line, by its end (where test runners print
/// their summary).
pub fn first_error(stderr: &str, stdout: &str) -> Option<String> {
    let meaningful = |line: &&str| {
        let t = line.trim();
        !t.is_empty()
            && !PROGRESS.iter().any(|p| t.starts_with(p))
            && !t.starts_with("[… ")
            && t.chars().any(char::is_alphanumeric)
    };
    let failure = |line: &&str| FAILURE_MARKS.iter().any(|m| line.contains(m));
    let runner = |line: &&str| {
        let t = line.trim_start_matches(' ');
        RUNNER_MARKS.iter().any(|m| t.starts_with(m))
            || line.contains(": error:")
            || line.starts_with("E ") && line.len() > 2
    };
    let runner_line = [head(stderr), head(stdout), tail(stderr), tail(stdout)]
        .into_iter()
        .find_map(|text| text.lines().filter(meaningful).take(5000).find(runner));
    if let Some(line) = runner_line {
        return Some(clean(line.trim()).trim().to_string());
    }
    let stderr_head: Vec<&str> = head(stderr).lines().filter(meaningful).take(200).collect();
    // An error line wins over whatever noise precedes it.
    let line = stderr_head
        .iter()
        .copied()
        .find(failure)
        .or_else(|| tail(stderr).lines().filter(meaningful).find(failure))
        .or(stderr_head.first().copied())
        .or_else(|| head(stdout).lines().filter(meaningful).find(failure))
        .or_else(|| tail(stdout).lines().filter(meaningful).find(failure))?;
    Some(clean(line.trim()).trim().to_string())
}

fn head(text: &str) -> &str {
    if text.len() <= SCAN_BYTES {
        return text;
    }
    let mut end = SCAN_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// The last whole lines within the scan window of a text longer than it
/// (nothing for a shorter one: [`head`] saw it all).
fn tail(text: &str) -> &str {
    if text.len() <= SCAN_BYTES {
        return "";
    }
    let mut start = text.len() - SCAN_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    let window = &text[start..];
    window.find('\n').map_or("", |at| &window[at + 1..])
}

/// One line of hostile output made fit for a terminal, bounded.
fn clean(line: &str) -> String {
    crate::terminal_text::clean_line(line, MAX_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_is_the_line() {
        assert_eq!(
            first_error("sh: 1: npm: not found\n", "").as_deref(),
            Some("sh: 1: npm: not found")
        );
    }

    #[test]
    fn build_progress_is_skipped_for_the_error() {
        let stderr = "   Compiling digits v0.1.0 (/workspace)\n    Finished `test` profile\n     Running tests/digits.rs\nerror: test failed, to rerun pass `--test digits`\n";
        assert_eq!(
            first_error(stderr, "").as_deref(),
            Some("error: test failed, to rerun pass `--test digits`")
        );
    }

    #[test]
    fn without_stderr_the_first_failure_line_of_the_output() {
        let stdout =
            "..F\n=== FAILURES ===\nFAILED tests/test_t.py::test_a - assert 2 == 3\n1 failed\n";
        assert_eq!(
            first_error("", stdout).as_deref(),
            Some("FAILED tests/test_t.py::test_a - assert 2 == 3")
        );
        assert_eq!(first_error("", "all good\n"), None);
    }

    #[test]
    fn a_failure_at_the_end_of_a_long_output_is_found() {
        let mut stdout = "collected 900 items\n".to_string();
        stdout.push_str(&"tests/test_a.py ....\n".repeat(40_000));
        stdout.push_str("\n[… 3,000,000 bytes omitted …]\n");
        stdout.push_str(&"tests/test_b.py ....\n".repeat(100));
        stdout.push_str("FAILED tests/test_b.py::test_last - assert 1 == 2\n");
        assert!(stdout.len() > SCAN_BYTES);
        assert_eq!(
            first_error("", &stdout).as_deref(),
            Some("FAILED tests/test_b.py::test_last - assert 1 == 2")
        );
        // An error at the end of stderr beats its first noise line.
        let mut stderr = "note: starting\n".repeat(30_000);
        stderr.push_str("error: linking failed\n");
        assert_eq!(
            first_error(&stderr, "").as_deref(),
            Some("error: linking failed")
        );
    }

    #[test]
    fn a_runners_own_error_line_beats_a_source_line_that_mentions_an_error() {
        let stdout = "F\n=================================== FAILURES ===\n    def slugify(text):\n>       raise TypeError(\"text must be str\")\nE   ModuleNotFoundError: No module named 'text_unidecode'\n\nslugify.py:4: ModuleNotFoundError\nFAILED test_slugify.py::test_a\n";
        assert_eq!(
            first_error("", stdout).as_deref(),
            Some("E   ModuleNotFoundError: No module named 'text_unidecode'")
        );
        let go = "=== RUN   TestClamp\n    clamp_test.go:13: Clamp(42, 0, 10) = 0, want 10\n--- FAIL: TestClamp (0.00s)\nFAIL\n";
        assert_eq!(
            first_error("", go).as_deref(),
            Some("--- FAIL: TestClamp (0.00s)")
        );
        let cc = "cc -O1 -c clamp.c\nclamp.c:7:16: error: expected ';' before 'return'\nmake: *** [Makefile:12: clamp.o] Error 1\n";
        assert_eq!(
            first_error(cc, "").as_deref(),
            Some("clamp.c:7:16: error: expected ';' before 'return'")
        );
        let rust =
            "   Compiling digits v0.1.0\nerror[E0425]: cannot find value `x` in this scope\n";
        assert_eq!(
            first_error(rust, "").as_deref(),
            Some("error[E0425]: cannot find value `x` in this scope")
        );
    }

    #[test]
    fn escapes_and_length_are_contained() {
        let line = first_error("\u{1b}[31merror\u{1b}[0m: bad\u{7}\n", "").expect("line");
        assert_eq!(line, "error: bad");
        let long = format!("error: {}\n", "x".repeat(500));
        let line = first_error(&long, "").expect("line");
        assert!(line.chars().count() <= MAX_CHARS + 1);
        assert!(line.ends_with('…'));
    }
}
