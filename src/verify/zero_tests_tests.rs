use super::*;

const PYTEST_EMPTY: &str = "\
============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0
rootdir: /workspace
collected 0 items

============================ no tests ran in 0.01s =============================
";

const PYTEST_EMPTY_QUIET: &str = "\nno tests ran in 0.00s\n";

const PYTEST_ALL_DESELECTED: &str = "\
============================= test session starts ==============================
collected 3 items / 3 deselected

============================ 3 deselected in 0.01s =============================
";

const PYTEST_PASSING: &str = "\
============================= test session starts ==============================
platform linux -- Python 3.11.2, pytest-7.2.1, pluggy-1.0.0
rootdir: /workspace
collected 10 items

tests/test_calc.py ..........                                            [100%]

============================== 10 passed in 0.03s ==============================
";

const PYTEST_QUIET_PASSING: &str =
    "..........                                                     [100%]\n10 passed in 0.02s\n";

const UNITTEST_EMPTY: &str = "\n----------------------------------------------------------------------\nRan 0 tests in 0.000s\n\nNO TESTS RAN\n";
const UNITTEST_RAN: &str = "...\n----------------------------------------------------------------------\nRan 3 tests in 0.001s\n\nOK\n";

const CARGO_EMPTY_STDOUT: &str = "
running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s


running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

";
const CARGO_EMPTY_STDERR: &str = "   Compiling demo v0.1.0 (/workspace)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.41s
     Running unittests src/lib.rs (target/debug/deps/demo-1234)
   Doc-tests demo
";
const CARGO_SOME: &str = "
running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s


running 2 tests
test tests::adds ... ok
test tests::subtracts ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

";
const CARGO_FAILING: &str = "
running 1 test
test tests::adds ... FAILED

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s
";

const GO_EMPTY: &str =
    "?   \texample.com/demo\t[no test files]\n?   \texample.com/demo/util\t[no test files]\n";
const GO_SOME: &str =
    "?   \texample.com/demo\t[no test files]\nok  \texample.com/demo/util\t0.002s\n";
const GO_FAILING: &str = "--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3\nFAIL\nFAIL\texample.com/demo\t0.002s\nFAIL\n";

#[test]
fn pytest_with_nothing_collected_is_zero() {
    assert_eq!(zero_tests(PYTEST_EMPTY, "", Some(5)), Some(PYTEST_ZERO));
    assert_eq!(
        zero_tests(PYTEST_EMPTY_QUIET, "", Some(5)),
        Some(PYTEST_ZERO)
    );
    assert_eq!(
        zero_tests(PYTEST_ALL_DESELECTED, "", Some(5)),
        Some(PYTEST_ZERO)
    );
    // Wrapped so it exits 0: the output still says nothing ran.
    assert_eq!(zero_tests(PYTEST_EMPTY, "", Some(0)), Some(PYTEST_ZERO));
}

#[test]
fn pytest_that_ran_tests_is_not_zero() {
    assert_eq!(zero_tests(PYTEST_PASSING, "", Some(0)), None);
    assert_eq!(zero_tests(PYTEST_QUIET_PASSING, "", Some(0)), None);
    // Deselection with tests left over exits 0 and is not zero.
    let partly =
        "collected 3 items / 1 deselected / 2 selected\n\n== 2 passed, 1 deselected in 0.01s ==\n";
    assert_eq!(zero_tests(partly, "", Some(0)), None);
}

#[test]
fn unittest_ran_0_tests_is_zero() {
    assert_eq!(zero_tests("", UNITTEST_EMPTY, Some(5)), Some(UNITTEST_ZERO));
    assert_eq!(zero_tests("", UNITTEST_RAN, Some(0)), None);
    // Two suites, one of which ran tests.
    let mixed = format!("{UNITTEST_EMPTY}{UNITTEST_RAN}");
    assert_eq!(zero_tests("", &mixed, Some(0)), None);
}

#[test]
fn cargo_test_with_no_test_anywhere_is_zero() {
    assert_eq!(
        zero_tests(CARGO_EMPTY_STDOUT, CARGO_EMPTY_STDERR, Some(0)),
        Some(CARGO_ZERO)
    );
    assert_eq!(
        zero_tests("running 0 tests\n", "", Some(0)),
        Some(CARGO_ZERO)
    );
    assert_eq!(zero_tests(CARGO_SOME, CARGO_EMPTY_STDERR, Some(0)), None);
    assert_eq!(zero_tests(CARGO_FAILING, "", Some(101)), None);
}

#[test]
fn go_test_with_no_test_files_is_zero() {
    assert_eq!(zero_tests(GO_EMPTY, "", Some(0)), Some(GO_ZERO));
    let no_match = "testing: warning: no tests to run\nPASS\nok  \texample.com/demo\t0.001s [no tests to run]\n";
    assert_eq!(zero_tests(no_match, "", Some(0)), Some(GO_ZERO));
    assert_eq!(zero_tests(GO_SOME, "", Some(0)), None);
    assert_eq!(zero_tests(GO_FAILING, "", Some(1)), None);
}

#[test]
fn unrelated_output_is_not_zero() {
    assert_eq!(zero_tests("", "", Some(0)), None);
    assert_eq!(zero_tests("All checks passed!\n", "", Some(0)), None);
    assert_eq!(
        zero_tests("", "error: could not compile `demo`\n", Some(101)),
        None
    );
    assert_eq!(
        zero_tests("Found 0 errors in 0 files.\n", "", Some(0)),
        None
    );
}
