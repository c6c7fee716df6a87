//! Python and Makefile detection. pytest when the project
//! configures it (`[tool.pytest…]` in pyproject.toml, `pytest.ini`,
//! `[tool:pytest]` in setup.cfg, `[pytest]` in tox.ini) or keeps
//! `test_*.py` files in `tests/`; unittest when every test file found is
//! written for unittest alone. Files are read bounded: only their beginning.

use std::io::Read;
use std::path::Path;

use super::VerifyError;
use super::check_spec::CheckSpec;

/// How much of a configuration or test file is read.
const READ_LIMIT: u64 = 256 << 10;
/// At most this many test files are looked at.
const MAX_TEST_FILES: usize = 200;

/// What was found, and its checks.
pub(crate) type Found = (&'static str, Vec<CheckSpec>);

pub(crate) fn detect_python(repo: &Path) -> Result<Option<Found>, VerifyError> {
    let configured = [
        ("pyproject.toml", "[tool.pytest"),
        ("pytest.ini", "[pytest]"),
        ("setup.cfg", "[tool:pytest]"),
        ("tox.ini", "[pytest]"),
    ];
    for (file, table) in configured {
        if let Some(text) = read_head(&repo.join(file))?
            && if file == "pyproject.toml" {
                configures_pytest(&text)
            } else {
                has_table(&text, table)
            }
        {
            return Ok(Some((describe_config(file), vec![pytest()])));
        }
    }
    let tests = repo.join("tests");
    let files = test_files(&tests)?;
    if files.is_empty() {
        return Ok(None);
    }
    let mut unittest_only = true;
    for file in &files {
        let text = read_head(file)?.unwrap_or_default();
        unittest_only &= is_unittest_only(&text);
    }
    Ok(Some(if unittest_only {
        (
            "a Python project with unittest tests (tests/test_*.py)",
            vec![CheckSpec::new(
                "unittest",
                "python3 -m unittest discover -s tests -v",
            )],
        )
    } else {
        (
            "a Python project with pytest tests (tests/test_*.py)",
            vec![pytest()],
        )
    }))
}

fn pytest() -> CheckSpec {
    CheckSpec::new("pytest", "python3 -m pytest -q")
}

fn describe_config(file: &str) -> &'static str {
    match file {
        "pyproject.toml" => "a Python project with pytest configured (pyproject.toml)",
        "pytest.ini" => "a Python project with pytest configured (pytest.ini)",
        "setup.cfg" => "a Python project with pytest configured (setup.cfg)",
        _ => "a Python project with pytest configured (tox.ini)",
    }
}

/// A line opening `table` (`[tool.pytest` matches `[tool.pytest.ini_options]`).
fn has_table(text: &str, table: &str) -> bool {
    text.lines().map(str::trim_start).any(|line| {
        line.starts_with(table)
            && (table.ends_with(']') || line[table.len()..].starts_with(['.', ']']))
    })
}

/// `test_*.py` and `*_test.py` files in `dir` and one level of folders below it.
fn test_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, VerifyError> {
    let mut out = Vec::new();
    let mut dirs = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = dirs.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => continue,
            Err(source) => return Err(VerifyError::DetectRead { path: d, source }),
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() && depth < 1 && !name.starts_with('.') && name != "__pycache__" {
                dirs.push((entry.path(), depth + 1));
            } else if kind.is_file()
                && name.ends_with(".py")
                && (name.starts_with("test_") || name.ends_with("_test.py"))
            {
                out.push(entry.path());
                if out.len() >= MAX_TEST_FILES {
                    return Ok(out);
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Written for unittest and nothing else: it uses `unittest`, never pytest,
/// and has no module-level `def test_` function (which only pytest runs).
fn is_unittest_only(text: &str) -> bool {
    let uses_unittest = text.contains("unittest.TestCase")
        || text.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("import unittest") || l.starts_with("from unittest")
        });
    let uses_pytest = text.lines().any(|l| {
        let l = l.trim_start();
        l.starts_with("import pytest") || l.starts_with("from pytest")
    });
    let bare_functions = text.lines().any(|l| l.starts_with("def test"));
    uses_unittest && !uses_pytest && !bare_functions
}

/// `make test` when the Makefile at the root has a `test` target.
pub(crate) fn detect_makefile(repo: &Path) -> Result<Option<Found>, VerifyError> {
    for name in ["GNUmakefile", "makefile", "Makefile"] {
        if let Some(text) = read_head(&repo.join(name))?
            && has_test_target(&text)
        {
            return Ok(Some((
                "a Makefile with a test target",
                vec![CheckSpec::new("make-test", "make test")],
            )));
        }
    }
    Ok(None)
}

/// A rule line `test:` or `test other:` (not `test := value`).
fn has_test_target(makefile: &str) -> bool {
    makefile.lines().any(|line| {
        if line.starts_with(['\t', ' ', '#', '.']) {
            return false;
        }
        let Some((targets, rest)) = line.split_once(':') else {
            return false;
        };
        !rest.starts_with('=') && targets.split_whitespace().any(|t| t == "test")
    })
}

/// The beginning of a file, lossily decoded; `None` if it is not there.
pub(crate) fn read_head(path: &Path) -> Result<Option<String>, VerifyError> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(source) => {
            return Err(VerifyError::DetectRead {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.take(READ_LIMIT)
        .read_to_end(&mut bytes)
        .map_err(|source| VerifyError::DetectRead {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// A `[tool.pytest...]` table in pyproject.toml.
pub(crate) fn configures_pytest(pyproject: &str) -> bool {
    pyproject
        .lines()
        .map(str::trim_start)
        .any(|line| line.starts_with("[tool.pytest"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_matched_whole() {
        assert!(has_table("[tool.pytest.ini_options]\n", "[tool.pytest"));
        assert!(has_table("  [tool.pytest]\n", "[tool.pytest"));
        assert!(!has_table("[tool.pytestish]\n", "[tool.pytest"));
        assert!(has_table(
            "[metadata]\n[tool:pytest]\naddopts=-q\n",
            "[tool:pytest]"
        ));
        assert!(!has_table("[testenv]\n", "[pytest]"));
    }

    #[test]
    fn unittest_style_is_told_apart() {
        assert!(is_unittest_only(
            "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        pass\n"
        ));
        assert!(!is_unittest_only("def test_a():\n    assert 1\n"));
        assert!(!is_unittest_only(
            "import unittest\nimport pytest\n\nclass T(unittest.TestCase):\n    pass\n"
        ));
        assert!(!is_unittest_only(
            "import unittest\n\ndef test_free():\n    pass\n"
        ));
    }

    #[test]
    fn make_test_targets_are_rules_not_variables() {
        assert!(has_test_target("all: build\n\ntest: build\n\tpytest\n"));
        assert!(has_test_target("check test:\n\t./run\n"));
        assert!(!has_test_target("test := value\nall:\n"));
        assert!(!has_test_target(".PHONY: test\n"));
        assert!(!has_test_target("\ttest: x\n"));
    }
}
