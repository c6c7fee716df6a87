//! Checks inferred from the project's files, used when neither `--check` nor
//! `.minicoder.json` names any. One ecosystem gives checks; several
//! at once are ambiguous and none is refused: a run with no meaningful check
//! cannot succeed. A Makefile's `test` target is the last resort.
//!
//! Node: the package manager is the lockfile's (`pnpm-lock.yaml` → pnpm,
//! `yarn.lock` → yarn, else npm); `test` is the check, and `build`, `lint` and
//! `typecheck` join it only when the program they run is installed (in the
//! project's `node_modules/.bin`, declared as a dependency, or one the
//! sandbox image provides).

use std::path::Path;

use super::VerifyError;
use super::check_spec::CheckSpec;
use super::detect_python::{Found, detect_makefile, detect_python, read_head};

/// The package scripts that become checks, in this order.
const PACKAGE_SCRIPTS: [&str; 4] = ["test", "build", "lint", "typecheck"];
/// Programs the built-in sandbox image provides to package scripts (keep in
/// step with sandbox/Dockerfile).
const IMAGE_PROGRAMS: [&str; 12] = [
    "node", "npm", "npx", "yarn", "yarnpkg", "tsc", "sh", "bash", "make", "python3", "cargo", "go",
];

/// Detects the checks of the project at `repo`.
pub fn detect_checks(repo: &Path) -> Result<Vec<CheckSpec>, VerifyError> {
    let mut found: Vec<Found> = Vec::new();
    if let Some(text) = read_if_present(&repo.join("package.json"))? {
        let manager = PackageManager::of(repo);
        let checks: Vec<CheckSpec> = package_script_checks(&text)
            .into_iter()
            .filter(|check| check.name == "test" || script_tool_installed(repo, &text, &check.name))
            .map(|check| manager.check(&check.name))
            .collect();
        if !checks.is_empty() {
            found.push((manager.description(), checks));
        }
    }
    if repo.join("Cargo.toml").is_file() {
        found.push((
            "a Rust crate (Cargo.toml)",
            vec![CheckSpec::new("cargo-test", "cargo test --locked")],
        ));
    }
    if repo.join("go.mod").is_file() {
        found.push((
            "a Go module (go.mod)",
            vec![CheckSpec::new("go-test", "go test ./...")],
        ));
    }
    if let Some(python) = detect_python(repo)? {
        found.push(python);
    }
    if found.is_empty()
        && let Some(make) = detect_makefile(repo)?
    {
        found.push(make);
    }
    match found.len() {
        0 => Err(VerifyError::NoMeaningfulCheck),
        1 => Ok(found.remove(0).1),
        _ => Err(VerifyError::AmbiguousProject {
            found: found
                .iter()
                .map(|(what, _)| *what)
                .collect::<Vec<_>>()
                .join(" and "),
        }),
    }
}

/// The Node package manager a project uses, told by its lockfile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PackageManager {
    Npm,
    Yarn,
    Pnpm,
}

impl PackageManager {
    pub fn of(repo: &Path) -> Self {
        if repo.join("pnpm-lock.yaml").is_file() {
            PackageManager::Pnpm
        } else if repo.join("yarn.lock").is_file() {
            PackageManager::Yarn
        } else {
            PackageManager::Npm
        }
    }

    pub fn program(self) -> &'static str {
        match self {
            PackageManager::Npm => "npm",
            PackageManager::Yarn => "yarn",
            PackageManager::Pnpm => "pnpm",
        }
    }

    fn check(self, script: &str) -> CheckSpec {
        let program = self.program();
        let command = if script == "test" {
            format!("{program} test")
        } else {
            format!("{program} run {script}")
        };
        CheckSpec::new(script, command)
    }

    fn description(self) -> &'static str {
        match self {
            PackageManager::Npm => "a Node package (package.json scripts)",
            PackageManager::Yarn => "a Node package managed with yarn (package.json, yarn.lock)",
            PackageManager::Pnpm => {
                "a Node package managed with pnpm (package.json, pnpm-lock.yaml)"
            }
        }
    }
}

/// Whether the program a script runs first is there to run: in
/// `node_modules/.bin`, declared as a dependency, or provided by the image.
fn script_tool_installed(repo: &Path, package_json: &str, script: &str) -> bool {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(package_json) else {
        return false;
    };
    let Some(text) = value
        .get("scripts")
        .and_then(|s| s.get(script))
        .and_then(|s| s.as_str())
    else {
        return false;
    };
    let Some(tool) = super::preflight::first_program(text) else {
        return true;
    };
    if IMAGE_PROGRAMS.contains(&tool.as_str())
        || repo.join("node_modules/.bin").join(&tool).exists()
    {
        return true;
    }
    ["dependencies", "devDependencies"].iter().any(|table| {
        value
            .get(table)
            .and_then(|d| d.as_object())
            .is_some_and(|deps| deps.contains_key(&tool))
    })
}

fn read_if_present(path: &Path) -> Result<Option<String>, VerifyError> {
    read_head(path)
}

/// `npm test` / `npm run <name>` for each meaningful script of [`PACKAGE_SCRIPTS`].
/// A package.json that does not parse gives no check.
fn package_script_checks(package_json: &str) -> Vec<CheckSpec> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(package_json) else {
        return Vec::new();
    };
    let Some(scripts) = value.get("scripts").and_then(|s| s.as_object()) else {
        return Vec::new();
    };
    PACKAGE_SCRIPTS
        .iter()
        .filter_map(|&name| {
            let script = scripts.get(name)?.as_str()?;
            if is_watch_script(script) || is_placeholder_script(script) {
                return None;
            }
            let command = if name == "test" {
                "npm test".to_string()
            } else {
                format!("npm run {name}")
            };
            Some(CheckSpec::new(name, command))
        })
        .collect()
}

/// A script that never ends on its own: `jest --watch`, `tsc -w`, `npm run test:watch`.
fn is_watch_script(script: &str) -> bool {
    script.split_whitespace().any(|word| {
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        word.starts_with("--watch")
            || word == "-w"
            || word == "watch"
            || word == "nodemon"
            || word.contains(":watch")
            || word.starts_with("watch:")
    })
}

/// `echo "Error: no test specified" && exit 1`, an empty script, or one that
/// only echoes (whatever it exits with afterwards).
fn is_placeholder_script(script: &str) -> bool {
    if script.contains("no test specified") {
        return true;
    }
    script
        .split(['&', ';', '|'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .all(|part| {
            let program = part.split_whitespace().next().unwrap_or("");
            matches!(program, "echo" | "exit" | "true" | "false" | ":")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::detect_python::configures_pytest;

    #[test]
    fn placeholder_and_watch_scripts_are_recognised() {
        assert!(is_placeholder_script(
            "echo \"Error: no test specified\" && exit 1"
        ));
        assert!(is_placeholder_script("echo 'todo'"));
        assert!(is_placeholder_script("echo nothing here; exit 0"));
        assert!(is_placeholder_script(""));
        assert!(!is_placeholder_script("jest"));
        assert!(!is_placeholder_script("echo start && vitest run"));
        assert!(is_watch_script("jest --watch"));
        assert!(is_watch_script("vitest --watchAll"));
        assert!(is_watch_script("tsc -w"));
        assert!(is_watch_script("npm run test:watch"));
        assert!(!is_watch_script("jest --ci"));
        assert!(!is_watch_script("tsc --noEmit"));
    }

    #[test]
    fn scripts_become_checks_in_a_fixed_order() {
        let checks = package_script_checks(
            r#"{"scripts": {"lint": "eslint .", "test": "jest", "dev": "vite", "build": "tsc -w", "typecheck": "tsc --noEmit"}}"#,
        );
        assert_eq!(
            checks,
            vec![
                CheckSpec::new("test", "npm test"),
                CheckSpec::new("lint", "npm run lint"),
                CheckSpec::new("typecheck", "npm run typecheck"),
            ]
        );
        assert!(package_script_checks("{not json").is_empty());
    }

    #[test]
    fn pytest_needs_its_table() {
        assert!(configures_pytest(
            "[project]\nname='x'\n[tool.pytest.ini_options]\n"
        ));
        assert!(!configures_pytest("[project]\nname='x'\n[tool.ruff]\n"));
    }
}
