//! The pre-flight: before any model turn, every program the frozen
//! checks and the bootstrap run first (the first word of each command, the
//! interpreter of a script, the module of `python3 -m`, the first word of a
//! package script) must exist in the run's image. A missing one stops the run
//! at once, naming the program, the image and how to add it.
//!
//! Commands are read, never run, to find their programs: quotes, `VAR=value`
//! prefixes, wrappers (`env`, `exec`, `time`…), `cd DIR &&` and shell
//! builtins are understood; a word the reading cannot settle (a variable, a
//! substitution) is left to the checks themselves.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::VerifyError;
use super::check_spec::CheckSpec;
use super::detect_python::read_head;
use super::shell_words::{
    program_of, safe_module, safe_path, safe_relative, safe_word, simple_commands,
};
use crate::sandbox::{CommandContainer, CommandRequest};

const PREFLIGHT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a command needs from the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Need {
    /// A program found on `PATH`.
    Program(String),
    /// An absolute path (a script's interpreter).
    Path(String),
    /// A module the named Python imports (`python3 -m pytest`).
    PythonModule { python: String, module: String },
    /// The first program of a package script: on `PATH` or in
    /// `<dir>/node_modules/.bin` (which a bootstrap may install).
    ScriptProgram { program: String, dir: String },
}

impl Need {
    /// Whether the need is met or not whatever the workspace holds: a
    /// program looked for on `PATH` by name, or an absolute path outside
    /// the workspace.
    pub(crate) fn is_workspace_free(&self) -> bool {
        let mount = crate::sandbox::spec::WORKSPACE_MOUNT;
        match self {
            Need::Program(p) => !p.contains('/'),
            // Only a plain absolute path: `//workspace/x`, `/tmp/../workspace/x`
            // or `/proc/self/cwd/x` name the workspace too.
            Need::Path(p) => {
                let plain = p.starts_with('/')
                    && p[1..]
                        .split('/')
                        .all(|part| !matches!(part, "" | "." | ".."));
                plain
                    && p != mount
                    && !p.starts_with(&format!("{mount}/"))
                    && p != "/proc"
                    && !p.starts_with("/proc/")
            }
            Need::PythonModule { .. } | Need::ScriptProgram { .. } => false,
        }
    }

    /// The shell test that succeeds when the image alone meets the need,
    /// whatever a workspace holds; `None` when only the workspace can tell
    /// (a package script's program). A workspace can only add what a
    /// program is looked for in, never take it away: what the image meets,
    /// every workspace meets. A module is looked for by Python in isolated
    /// mode, which leaves the working directory and `PYTHON*` out of its path.
    pub(crate) fn image_test(&self) -> Option<String> {
        match self {
            Need::PythonModule { python, module } if self.is_image_module(python) => {
                Some(module_test(&format!("{python} -I"), module))
            }
            Need::PythonModule { .. } | Need::ScriptProgram { .. } => None,
            need => need.is_workspace_free().then(|| need.test()),
        }
    }

    /// A Python the image has by name or at a path outside the workspace.
    fn is_image_module(&self, python: &str) -> bool {
        let interpreter = if python.starts_with('/') {
            Need::Path(python.to_string())
        } else {
            Need::Program(python.to_string())
        };
        interpreter.is_workspace_free()
    }

    fn label(&self) -> String {
        match self {
            Need::Program(p) | Need::Path(p) | Need::ScriptProgram { program: p, .. } => {
                format!("`{p}`")
            }
            Need::PythonModule { python, module } => format!("the {python} module `{module}`"),
        }
    }

    /// The shell test that succeeds when the need is met.
    fn test(&self) -> String {
        match self {
            Need::Program(p) => format!("command -v {p} >/dev/null 2>&1"),
            Need::Path(p) => format!("test -x {p}"),
            Need::PythonModule { python, module } => module_test(python, module),
            Need::ScriptProgram { program, dir } => {
                let bin = if dir.is_empty() {
                    "node_modules/.bin".to_string()
                } else {
                    format!("{dir}/node_modules/.bin")
                };
                format!("{{ command -v {program} >/dev/null 2>&1 || test -x {bin}/{program}; }}")
            }
        }
    }
}

/// The shell test that `python` (with its flags) finds `module`.
fn module_test(python: &str, module: &str) -> String {
    format!(
        "{python} -c 'import importlib.util,sys; sys.exit(importlib.util.find_spec(sys.argv[1]) is None)' {module} >/dev/null 2>&1"
    )
}

/// One need and what has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Requirement {
    pub need: Need,
    /// "the check `test` (`npm test`)" or "bootstrap command 1 (`npm ci`)".
    pub by: String,
}

/// What the checks and the bootstrap of the project at `repo` need.
pub(crate) fn requirements(
    repo: &Path,
    checks: &[CheckSpec],
    bootstrap: &[String],
) -> Vec<Requirement> {
    let mut out: Vec<Requirement> = Vec::new();
    // What lies in the run's dependency folder only a bootstrap puts
    // there (a venv's `pip`): not the image's to have.
    let deps = format!("{}/", crate::sandbox::spec::DEPS_DIR);
    let mut add = |needs: Vec<Need>, by: String| {
        for need in needs {
            if matches!(&need, Need::Path(p) if p.starts_with(&deps)) {
                continue;
            }
            if !out.iter().any(|r| r.need == need) {
                out.push(Requirement {
                    need,
                    by: by.clone(),
                });
            }
        }
    };
    for (i, command) in bootstrap.iter().enumerate() {
        add(
            needs_of(repo, command),
            format!("bootstrap command {} (`{}`)", i + 1, clip(command)),
        );
    }
    for check in checks {
        add(
            needs_of(repo, &check.command),
            format!("the check `{}` (`{}`)", check.name, clip(&check.command)),
        );
    }
    out
}

/// The first program `command` runs, if the reading can tell.
pub(crate) fn first_program(command: &str) -> Option<String> {
    simple_commands(command)
        .iter()
        .find_map(|words| program_of(words).map(|(p, _)| p.to_string()))
}

/// Looks for every need in the container (the run's image, its `PATH`, its
/// workspace) and fails naming all that are missing. Script programs a
/// configured bootstrap may still install are not held against the run.
pub async fn check(
    container: &mut CommandContainer,
    image: &str,
    requirements: &[Requirement],
    has_bootstrap: bool,
) -> Result<(), VerifyError> {
    let missing = find_missing(container, requirements).await?;
    let missing: Vec<&Requirement> = missing
        .into_iter()
        .filter(|r| !(has_bootstrap && matches!(r.need, Need::ScriptProgram { .. })))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(VerifyError::MissingPrograms {
        image: image.to_string(),
        detail: describe_missing(&missing, image),
    })
}

/// Needs found met in a container of one image (by id), kept in the state
/// directory: a later run on that image need not wait for its container to
/// know them, nor look for them again once its workspace is made. Only
/// "met" is kept, and only what the image meets by itself (see
/// [`Need::image_test`]), so a workspace can never have made a need look
/// met; what only a workspace can tell is looked for in every run.
#[derive(Debug, Clone)]
pub(crate) struct FoundNeeds {
    path: PathBuf,
}

/// What a file of found needs may hold.
const FOUND_MAX_BYTES: u64 = 256 * 1024;

impl FoundNeeds {
    pub(crate) fn new(dir: &Path, image_id: &str) -> Self {
        use sha2::Digest;
        let key = hex::encode(&sha2::Sha256::digest(image_id.as_bytes())[..16]);
        Self {
            path: dir.join(key),
        }
    }

    fn read(&self) -> std::collections::BTreeSet<String> {
        use std::io::Read;
        let mut text = String::new();
        if let Ok(file) = std::fs::File::open(&self.path) {
            let _ = file.take(FOUND_MAX_BYTES).read_to_string(&mut text);
        }
        text.lines().map(str::to_string).collect()
    }

    /// Whether every one of `needs` was found met by the image before.
    pub(crate) fn has_all(&self, needs: &[Requirement]) -> bool {
        self.unknown(needs).is_empty()
    }

    /// The needs of `needs` not known to be met by the image.
    pub(crate) fn unknown(&self, needs: &[Requirement]) -> Vec<Requirement> {
        let found = self.read();
        needs
            .iter()
            .filter(|r| r.need.image_test().is_none_or(|t| !found.contains(&t)))
            .cloned()
            .collect()
    }

    /// Records `needs`, found met by the image alone (tested with
    /// [`Need::image_test`]), as met (best effort: this is a cache).
    pub(crate) fn record(&self, needs: &[Requirement]) {
        let mut found = self.read();
        let before = found.len();
        found.extend(
            needs
                .iter()
                .filter_map(|r| r.need.image_test())
                .filter(|t| !t.contains(['\n', '\r'])),
        );
        if found.len() == before {
            return;
        }
        let text: String = found.iter().map(|t| format!("{t}\n")).collect();
        if text.len() as u64 > FOUND_MAX_BYTES {
            return;
        }
        let Some(dir) = self.path.parent() else {
            return;
        };
        let tmp = self.path.with_extension(format!(
            "tmp-{}-{}",
            std::process::id(),
            crate::ids::random_hex(4)
        ));
        let written = crate::state::private_dir(dir)
            .and_then(|()| std::fs::write(&tmp, text))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// The requirements the container does not meet.
pub(crate) async fn find_missing<'a>(
    container: &mut CommandContainer,
    requirements: &'a [Requirement],
) -> Result<Vec<&'a Requirement>, VerifyError> {
    find_missing_by(container, requirements, |n| Some(n.test()), false).await
}

/// The requirements the image alone does not meet (those only the
/// workspace can tell are not looked for, and count as missing).
pub(crate) async fn find_missing_in_image<'a>(
    container: &mut CommandContainer,
    requirements: &'a [Requirement],
) -> Result<Vec<&'a Requirement>, VerifyError> {
    find_missing_by(container, requirements, Need::image_test, true).await
}

async fn find_missing_by<'a>(
    container: &mut CommandContainer,
    requirements: &'a [Requirement],
    test: impl Fn(&Need) -> Option<String>,
    image_only: bool,
) -> Result<Vec<&'a Requirement>, VerifyError> {
    if requirements.is_empty() {
        return Ok(Vec::new());
    }
    let script: String = requirements
        .iter()
        .enumerate()
        .map(|(i, r)| match test(&r.need) {
            Some(test) => format!("{test} || echo missing-{i}\n"),
            None => format!("echo missing-{i}\n"),
        })
        .collect();
    let mut request = CommandRequest::new(script).timeout(PREFLIGHT_TIMEOUT);
    if image_only {
        request = request.image_only();
    }
    let outcome = container.run(request).await?;
    if outcome.timed_out {
        return Err(VerifyError::Preflight(
            "looking for the checks' programs timed out".into(),
        ));
    }
    let text = outcome.stdout.text();
    Ok(requirements
        .iter()
        .enumerate()
        .filter(|(i, _)| text.lines().any(|l| l.trim() == format!("missing-{i}")))
        .map(|(_, r)| r)
        .collect())
}

/// "the check `x` (`cargo test`) needs `cargo`, … not in IMAGE; add …".
pub(crate) fn describe_missing(missing: &[&Requirement], image: &str) -> String {
    let mut parts = Vec::new();
    let mut packages = Vec::new();
    for r in missing {
        parts.push(format!("{} needs {}", r.by, r.need.label()));
        if let Some(p) = debian_package(&r.need) {
            packages.push(format!("\"{p}\""));
        }
    }
    packages.dedup();
    let how = if packages.is_empty() {
        "use an image that has it (\"image\" in .minicoder.json) or add a .minicoder/Dockerfile"
            .to_string()
    } else {
        format!(
            "add it to the image with \"packages\": [{}] in .minicoder.json, or pick another \"image\"",
            packages.join(", ")
        )
    };
    format!(
        "{}, which the sandbox image {image} does not have; {how}",
        parts.join("; ")
    )
}

/// The Debian package that provides a need, as far as it is known.
fn debian_package(need: &Need) -> Option<String> {
    let name = match need {
        Need::Program(p) | Need::ScriptProgram { program: p, .. } => p.as_str(),
        Need::Path(p) => p.rsplit('/').next().unwrap_or(p),
        Need::PythonModule { module, .. } => return Some(format!("python3-{module}")),
    };
    Some(
        match name {
            "pnpm" | "bun" | "deno" => return None,
            "go" | "gofmt" => "golang-go",
            "node" | "nodejs" => "nodejs",
            "yarn" => "yarnpkg",
            "pip" | "pip3" => "python3-pip",
            "pytest" => "python3-pytest",
            "tsc" => "node-typescript",
            "java" | "javac" => "default-jdk-headless",
            "mvn" => "maven",
            "bundle" => "ruby-bundler",
            "cmake" => "cmake",
            other => other,
        }
        .to_string(),
    )
}

fn clip(command: &str) -> String {
    crate::terminal_text::cut_to(&command.replace(['\n', '\r'], " "), 60)
}

/// What one command needs, reading it in `repo` (whose files give package
/// scripts and script interpreters).
fn needs_of(repo: &Path, command: &str) -> Vec<Need> {
    let mut needs = Vec::new();
    let mut cwd = PathBuf::new();
    for words in simple_commands(command) {
        if words.first().map(String::as_str) == Some("cd") {
            match words.get(1) {
                Some(dir) if safe_relative(dir) => cwd.push(dir),
                _ => return needs, // somewhere the reading cannot follow
            }
            continue;
        }
        let Some((program, args)) = program_of(&words) else {
            continue;
        };
        needs.extend(needs_of_program(repo, &cwd, program, args));
    }
    needs
}

fn needs_of_program(repo: &Path, cwd: &Path, program: &str, args: &[String]) -> Vec<Need> {
    let mut needs = Vec::new();
    if program.contains('/') {
        if program.starts_with('/') {
            if safe_path(program) {
                needs.push(Need::Path(program.to_string()));
            }
        } else if let Some(interpreter) = interpreter_of(&repo.join(cwd).join(program)) {
            needs.extend(interpreter);
        }
        return needs;
    }
    if !safe_word(program) {
        return needs;
    }
    needs.push(Need::Program(program.to_string()));
    if program.starts_with("python")
        && let Some(pos) = args.iter().position(|a| a == "-m")
        && let Some(module) = args.get(pos + 1)
    {
        let top = module.split('.').next().unwrap_or(module);
        let own =
            repo.join(cwd).join(top).exists() || repo.join(cwd).join(format!("{top}.py")).exists();
        if safe_module(top) && !own {
            needs.push(Need::PythonModule {
                python: program.to_string(),
                module: top.to_string(),
            });
        }
    }
    if let Some(script) = package_script_name(program, args)
        && let Ok(Some(text)) = read_head(&repo.join(cwd).join("package.json"))
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(&text)
        && let Some(body) = value
            .get("scripts")
            .and_then(|s| s.get(&script))
            .and_then(|s| s.as_str())
    {
        let dir = cwd.to_string_lossy().into_owned();
        for words in simple_commands(body) {
            if let Some((p, _)) = program_of(&words)
                && safe_word(p)
            {
                needs.push(Need::ScriptProgram {
                    program: p.to_string(),
                    dir: dir.clone(),
                });
            }
        }
    }
    needs
}

/// The script a package-manager command runs: `npm test`, `npm run x`,
/// `yarn x`, `pnpm run x`.
fn package_script_name(program: &str, args: &[String]) -> Option<String> {
    let mut words = args.iter().filter(|a| !a.starts_with('-'));
    let first = words.next()?;
    match (program, first.as_str()) {
        ("npm" | "yarn" | "pnpm", "test" | "t") => Some("test".into()),
        ("npm" | "yarn" | "pnpm", "run" | "run-script") => words.next().cloned(),
        ("npm", _) => None,
        ("yarn" | "pnpm", "install" | "add" | "exec" | "dlx" | "ci") => None,
        ("yarn" | "pnpm", script) => Some(script.to_string()),
        _ => None,
    }
}

/// The interpreter a script's `#!` line names: `#!/usr/bin/env bash` needs
/// `bash`, `#!/bin/bash` needs `/bin/bash`. A script that is not there yet
/// (a bootstrap may make it) needs nothing known.
fn interpreter_of(script: &Path) -> Option<Vec<Need>> {
    let head = read_head(script).ok()??;
    let line = head.lines().next()?.strip_prefix("#!")?.trim().to_string();
    let mut words = line.split_whitespace();
    let interpreter = words.next()?;
    if interpreter.ends_with("/env") {
        let program = words.find(|w| !w.starts_with('-'))?;
        return safe_word(program).then(|| vec![Need::Program(program.to_string())]);
    }
    safe_path(interpreter).then(|| vec![Need::Path(interpreter.to_string())])
}

#[cfg(test)]
#[path = "preflight_tests.rs"]
mod tests;
