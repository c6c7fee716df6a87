//! Detection that matches what people do: the Node package manager
//! from the lockfile and only the scripts whose tools are installed, pytest
//! from any of its configuration files or a tests/ folder, unittest when the
//! tests are unittest's alone, a Makefile's test target as the last resort.

use minicoder::verify::{CheckSpec, VerifyError, detect_checks};

fn detected(files: &[(&str, &str)]) -> Result<Vec<CheckSpec>, VerifyError> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    detect_checks(dir.path())
}

fn one(name: &str, command: &str) -> Vec<CheckSpec> {
    vec![CheckSpec::new(name, command)]
}

const SCRIPTS: &str = r#"{"scripts": {"test": "vitest run", "lint": "eslint ."}}"#;

#[test]
fn the_lockfile_names_the_package_manager() {
    assert_eq!(
        detected(&[("package.json", SCRIPTS), ("yarn.lock", "")]).expect("yarn"),
        one("test", "yarn test")
    );
    assert_eq!(
        detected(&[("package.json", SCRIPTS), ("pnpm-lock.yaml", "")]).expect("pnpm"),
        one("test", "pnpm test")
    );
    assert_eq!(
        detected(&[("package.json", SCRIPTS), ("package-lock.json", "{}")]).expect("npm"),
        one("test", "npm test")
    );
}

#[test]
fn lint_build_and_typecheck_need_their_tool_installed() {
    // eslint is neither installed nor declared: no lint check.
    assert_eq!(
        detected(&[("package.json", SCRIPTS)]).expect("npm"),
        one("test", "npm test")
    );
    let with_bin = detected(&[("package.json", SCRIPTS), ("node_modules/.bin/eslint", "")]);
    assert_eq!(
        with_bin.expect("npm"),
        vec![
            CheckSpec::new("test", "npm test"),
            CheckSpec::new("lint", "npm run lint")
        ]
    );
    let declared = r#"{"scripts": {"test": "vitest run", "lint": "eslint ."}, "devDependencies": {"eslint": "^9"}}"#;
    assert_eq!(
        detected(&[("package.json", declared)]).expect("npm").len(),
        2
    );
    // tsc comes with the sandbox image.
    let typecheck = r#"{"scripts": {"test": "node --test", "typecheck": "tsc --noEmit"}}"#;
    assert_eq!(
        detected(&[("package.json", typecheck)]).expect("npm"),
        vec![
            CheckSpec::new("test", "npm test"),
            CheckSpec::new("typecheck", "npm run typecheck")
        ]
    );
}

#[test]
fn pytest_is_found_wherever_it_is_configured() {
    let pytest = one("pytest", "python3 -m pytest -q");
    for (file, text) in [
        ("pytest.ini", "[pytest]\naddopts = -q\n"),
        (
            "setup.cfg",
            "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests\n",
        ),
        (
            "tox.ini",
            "[tox]\nenvlist = py3\n\n[pytest]\naddopts = -q\n",
        ),
        ("tests/test_units.py", "def test_one():\n    assert 1\n"),
        ("tests/unit/test_deep.py", "import pytest\n"),
    ] {
        assert_eq!(detected(&[(file, text)]).expect(file), pytest, "{file}");
    }
    // A tox.ini without a [pytest] table, and no tests: nothing.
    assert!(matches!(
        detected(&[("tox.ini", "[tox]\nenvlist = py3\n")]),
        Err(VerifyError::NoMeaningfulCheck)
    ));
}

#[test]
fn unittest_when_the_tests_are_unittests_alone() {
    let unit = "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertTrue(True)\n";
    assert_eq!(
        detected(&[("tests/test_a.py", unit), ("tests/test_b.py", unit)]).expect("unittest"),
        one("unittest", "python3 -m unittest discover -s tests -v")
    );
    assert_eq!(
        detected(&[
            ("tests/test_a.py", unit),
            ("tests/test_b.py", "def test_b():\n    pass\n")
        ])
        .expect("pytest"),
        one("pytest", "python3 -m pytest -q")
    );
}

#[test]
fn a_makefile_test_target_is_the_last_resort() {
    let makefile = "all:\n\tcc -o app app.c\n\ntest: all\n\t./app --self-test\n";
    assert_eq!(
        detected(&[("Makefile", makefile)]).expect("make"),
        one("make-test", "make test")
    );
    assert_eq!(
        detected(&[("Makefile", makefile), ("go.mod", "module m\n")]).expect("go"),
        one("go-test", "go test ./...")
    );
    assert!(matches!(
        detected(&[("Makefile", "all:\n\tcc app.c\n")]),
        Err(VerifyError::NoMeaningfulCheck)
    ));
}

#[test]
fn ambiguity_names_what_was_found() {
    let err =
        detected(&[("go.mod", "module m\n"), ("pytest.ini", "[pytest]\n")]).expect_err("ambiguous");
    let text = err.to_string();
    assert!(
        text.contains("go.mod") && text.contains("pytest.ini"),
        "{text}"
    );
}
