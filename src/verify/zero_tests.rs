//! Recognising a test run that ran no test: such a check proves
//! nothing, so it fails unless zero tests are explicitly allowed.

use std::sync::LazyLock;

use regex::Regex;

pub(crate) const PYTEST_ZERO: &str = "pytest collected no tests";
pub(crate) const UNITTEST_ZERO: &str = "unittest ran 0 tests";
pub(crate) const CARGO_ZERO: &str = "cargo test ran 0 tests";
pub(crate) const GO_ZERO: &str = "go test found no test files";

/// pytest's exit code when it collected nothing.
pub(crate) const PYTEST_NO_TESTS_EXIT: i32 = 5;

static PYTEST_NONE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?m)\bcollected 0 items\b|^=* ?no tests ran\b|\bno tests ran in [0-9.]+s\b").ok()
});
static PYTEST_ONLY_DESELECTED: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?m)^=*\s*[0-9]+ deselected in [0-9.]+s\s*=*$").ok());
static UNITTEST_RAN: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?m)^Ran ([0-9]+) tests? in ").ok());
static CARGO_RESULT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?m)^test result: \w+\. ([0-9]+) passed; ([0-9]+) failed;").ok());
static CARGO_RUNNING: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?m)^running ([0-9]+) tests?$").ok());

/// Why the output shows that no test ran, or `None` if tests ran (or the
/// output is not one of a recognised runner).
pub fn zero_tests(stdout: &str, stderr: &str, exit_code: Option<i32>) -> Option<&'static str> {
    let output = format!("{stdout}\n{stderr}");
    if pytest_ran_nothing(&output, exit_code) {
        return Some(PYTEST_ZERO);
    }
    if unittest_ran_nothing(&output) {
        return Some(UNITTEST_ZERO);
    }
    if cargo_ran_nothing(&output) {
        return Some(CARGO_ZERO);
    }
    if go_found_nothing(&output) {
        return Some(GO_ZERO);
    }
    None
}

fn pytest_ran_nothing(output: &str, exit_code: Option<i32>) -> bool {
    let matches = |re: &LazyLock<Option<Regex>>| re.as_ref().is_some_and(|r| r.is_match(output));
    matches(&PYTEST_NONE)
        || (exit_code == Some(PYTEST_NO_TESTS_EXIT) && matches(&PYTEST_ONLY_DESELECTED))
}

/// Every `Ran N tests` line says 0 (and there is one).
fn unittest_ran_nothing(output: &str) -> bool {
    all_counts_zero(&UNITTEST_RAN, output, 1)
}

/// Every `test result:` line reports 0 passed and 0 failed, or, without
/// result lines, every `running N tests` line says 0.
fn cargo_ran_nothing(output: &str) -> bool {
    if let Some(re) = CARGO_RESULT.as_ref()
        && re.is_match(output)
    {
        return all_counts_zero(&CARGO_RESULT, output, 2);
    }
    all_counts_zero(&CARGO_RUNNING, output, 1)
}

/// Every package line of `go test` says `[no test files]` (or `[no tests to run]`).
fn go_found_nothing(output: &str) -> bool {
    let mut empty_packages = 0;
    for line in output.lines() {
        let line = line.trim_end();
        let no_test_files = line.starts_with('?') && line.ends_with("[no test files]");
        let no_tests_to_run = line.starts_with("ok ") && line.ends_with("[no tests to run]");
        if no_test_files || no_tests_to_run {
            empty_packages += 1;
        } else if line.starts_with("ok ")
            || line.starts_with("FAIL")
            || line.starts_with("--- ")
            || line.starts_with("=== RUN")
        {
            return false;
        }
    }
    empty_packages > 0
}

/// Whether `re` matches at least once and capture groups `1..=groups` are 0 in every match.
fn all_counts_zero(re: &LazyLock<Option<Regex>>, output: &str, groups: usize) -> bool {
    let Some(re) = re.as_ref() else {
        return false;
    };
    let mut seen = false;
    for caps in re.captures_iter(output) {
        seen = true;
        let nonzero = (1..=groups).any(|g| caps.get(g).is_none_or(|m| m.as_str() != "0"));
        if nonzero {
            return false;
        }
    }
    seen
}

#[cfg(test)]
#[path = "zero_tests_tests.rs"]
mod tests;
