//! What a batch runs: the tasks file (a JSON object per line) or SWE-bench
//! instances, read, checked and turned into one list of [`TaskSpec`]s with
//! absolute paths, which the batch folder keeps (`tasks.jsonl`) so that
//! `--resume` needs nothing but that folder.

use std::collections::HashSet;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The largest tasks or instances file read.
const MAX_FILE: u64 = 64 << 20;
/// The most tasks one batch holds.
pub(crate) const MAX_TASKS: usize = 10_000;
/// The longest task passed on the child's command line.
const ARGV_TASK_BYTES: usize = 64 << 10;
/// The longest task id (ids name files in the batch folder).
const MAX_ID: usize = 100;

/// One check of a task: what `run --check NAME CMD` takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckLine {
    pub name: String,
    pub command: String,
}

/// One run of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TaskSpec {
    pub id: String,
    pub repo: PathBuf,
    pub task: String,
    /// The frozen checks; without them the repository's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckLine>,
    /// PROVIDER or PROVIDER:MODEL; without it the batch's `--model`, else the chain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Scripted replies instead of a provider (`run --script`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_turns: Option<u32>,
    /// Whole-run budget in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Dollars, as `--max-cost` takes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_zero_tests: bool,
    /// The SWE-bench instance this task came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    /// Why the task cannot become a run (its checkout failed): it ends as
    /// an error and the batch goes on with the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl TaskSpec {
    /// The arguments of the `minicoder` child that runs it: a fresh run,
    /// or `resume` of the run it began.
    /// Whether the task goes to the child in a file: one argument of a
    /// command line holds at most 128 KiB (a SWE-bench problem statement
    /// can be longer).
    pub(crate) fn needs_task_file(&self) -> bool {
        self.task.len() > ARGV_TASK_BYTES
    }

    /// The child's arguments; with `task_file`, the task is read from it.
    pub(crate) fn child_args(
        &self,
        resume: Option<&str>,
        task_file: Option<&Path>,
    ) -> Vec<std::ffi::OsString> {
        let command = if resume.is_some() { "resume" } else { "run" };
        let mut a: Vec<std::ffi::OsString> = vec![
            command.into(),
            "--non-interactive".into(),
            "--events".into(),
        ];
        if let Some(script) = &self.script {
            a.extend(["--script".into(), script.into()]);
        } else if let Some(model) = &self.model {
            a.extend(["--model".into(), model.into()]);
        }
        // A resumed run keeps the limits and checks its manifest signed.
        if resume.is_none() {
            let mut flag = |name: &str, value: Option<String>| {
                if let Some(v) = value {
                    a.extend([name.into(), v.into()]);
                }
            };
            flag("--max-turns", self.max_turns.map(|n| n.to_string()));
            flag("--timeout", self.timeout.map(|n| n.to_string()));
            flag("--max-tokens", self.max_tokens.map(|n| n.to_string()));
            flag("--max-cost", self.max_cost.clone());
            if self.network {
                a.extend(["--network".into(), "enabled".into()]);
            }
            if self.allow_zero_tests {
                a.push("--allow-zero-tests".into());
            }
            for c in &self.checks {
                a.extend([
                    "--check".into(),
                    c.name.clone().into(),
                    c.command.clone().into(),
                ]);
            }
            if let Some(file) = task_file {
                a.extend(["--task-file".into(), file.into()]);
            }
        }
        // The words last, after `--`: a task that starts with `-` is a task.
        a.push("--".into());
        match resume {
            Some(run_id) => a.push(run_id.into()),
            None if task_file.is_some() => a.push(self.repo.clone().into()),
            None => a.extend([self.repo.clone().into(), self.task.clone().into()]),
        }
        a
    }
}

/// Reads a whole file of at most [`MAX_FILE`] bytes.
pub(crate) fn read_bounded(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_FILE + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > MAX_FILE {
        return Err(format!("{}: larger than 64 MiB", path.display()));
    }
    Ok(text)
}

/// The non-empty lines of a JSONL text, numbered from 1.
fn json_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
}

/// Parses a tasks file. Relative `repo` and `script` paths are taken from
/// `base` (the file's folder); `default_model` fills `model` where a task
/// names none.
pub(crate) fn parse_tasks(
    text: &str,
    base: &Path,
    default_model: Option<&str>,
) -> Result<Vec<TaskSpec>, String> {
    let mut tasks = Vec::new();
    for (number, line) in json_lines(text) {
        let mut task: TaskSpec =
            serde_json::from_str(line).map_err(|e| format!("line {number}: {e}"))?;
        task.repo = absolute(base, &task.repo);
        task.script = task.script.map(|s| absolute(base, &s));
        if task.model.is_none() && task.script.is_none() {
            task.model = default_model.map(str::to_string);
        }
        check_task(&task).map_err(|e| format!("line {number}: {e}"))?;
        tasks.push(task);
    }
    check_list(&tasks)?;
    Ok(tasks)
}

fn absolute(base: &Path, path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    }
}

/// What `run` would refuse, refused before the batch starts.
fn check_task(task: &TaskSpec) -> Result<(), String> {
    check_id(&task.id)?;
    if task.task.trim().is_empty() {
        return Err(format!("task {}: the task is empty", task.id));
    }
    if task.model.is_some() && task.script.is_some() {
        return Err(format!(
            "task {}: a model and a script: give one of them",
            task.id
        ));
    }
    if task.max_turns == Some(0) || task.timeout == Some(0) || task.max_tokens == Some(0) {
        return Err(format!(
            "task {}: max_turns, timeout and max_tokens must be positive",
            task.id
        ));
    }
    for c in &task.checks {
        if c.name.trim().is_empty() || c.command.trim().is_empty() {
            return Err(format!(
                "task {}: a check needs a name and a command",
                task.id
            ));
        }
    }
    Ok(())
}

/// Ids name files: letters, digits, `.`, `_`, `-`, not starting with `.`.
pub(crate) fn check_id(id: &str) -> Result<(), String> {
    let fine = !id.is_empty()
        && id.len() <= MAX_ID
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if fine {
        Ok(())
    } else {
        Err(format!(
            "task id {:?}: use 1 to {MAX_ID} letters, digits, '.', '_' or '-' (not starting with '.')",
            crate::terminal_text::cut_to(id, 60)
        ))
    }
}

fn check_list(tasks: &[TaskSpec]) -> Result<(), String> {
    if tasks.is_empty() {
        return Err("no tasks: one JSON object per line".into());
    }
    if tasks.len() > MAX_TASKS {
        return Err(format!(
            "{} tasks: a batch holds at most {MAX_TASKS}",
            tasks.len()
        ));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        if !seen.insert(t.id.as_str()) {
            return Err(format!("task id {} appears twice", t.id));
        }
    }
    Ok(())
}

/// One SWE-bench instance, as the dataset's JSONL has it (other fields are
/// ignored). The test lists come as JSON lists or as a JSON text of one.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Instance {
    pub instance_id: String,
    pub repo: String,
    pub base_commit: String,
    pub problem_statement: String,
    #[serde(rename = "FAIL_TO_PASS", deserialize_with = "test_list")]
    pub fail_to_pass: Vec<String>,
    #[serde(rename = "PASS_TO_PASS", default, deserialize_with = "test_list")]
    pub pass_to_pass: Vec<String>,
}

fn test_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        List(Vec<String>),
        Text(String),
    }
    match Either::deserialize(d)? {
        Either::List(l) => Ok(l),
        Either::Text(t) if t.trim().is_empty() => Ok(Vec::new()),
        Either::Text(t) => serde_json::from_str(&t).map_err(serde::de::Error::custom),
    }
}

/// Parses SWE-bench instances.
pub(crate) fn parse_instances(text: &str) -> Result<Vec<Instance>, String> {
    let mut out = Vec::new();
    for (number, line) in json_lines(text) {
        let inst: Instance =
            serde_json::from_str(line).map_err(|e| format!("line {number}: {e}"))?;
        check_id(&inst.instance_id).map_err(|e| format!("line {number}: {e}"))?;
        let commit_ok = (7..=64).contains(&inst.base_commit.len())
            && inst.base_commit.chars().all(|c| c.is_ascii_hexdigit());
        if !commit_ok {
            return Err(format!(
                "line {number}: base_commit {:?} is not a commit id",
                crate::terminal_text::cut_to(&inst.base_commit, 60)
            ));
        }
        if inst.fail_to_pass.is_empty() {
            return Err(format!(
                "line {number}: {}: FAIL_TO_PASS is empty, nothing would show the fix",
                inst.instance_id
            ));
        }
        if inst
            .repo
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
        {
            return Err(format!(
                "line {number}: repo {:?} is not OWNER/NAME",
                inst.repo
            ));
        }
        if out
            .iter()
            .any(|o: &Instance| o.instance_id == inst.instance_id)
        {
            return Err(format!(
                "line {number}: instance {} appears twice",
                inst.instance_id
            ));
        }
        out.push(inst);
    }
    if out.is_empty() {
        return Err("no instances: one JSON object per line".into());
    }
    Ok(out)
}

/// Checks tasks read back from a batch folder as a new tasks file is checked.
pub(crate) fn check_tasks(tasks: &[TaskSpec]) -> Result<(), String> {
    for t in tasks {
        check_task(t)?;
    }
    check_list(tasks)
}

/// Where the local clone of `repo` (OWNER/NAME) is under `repos`:
/// `OWNER__NAME` (the harness's spelling), `OWNER/NAME`, or `NAME`.
pub(crate) fn local_clone(repos: &Path, repo: &str) -> Result<PathBuf, String> {
    let name = repo.rsplit('/').next().unwrap_or(repo);
    let candidates = [
        repos.join(repo.replace('/', "__")),
        repos.join(repo),
        repos.join(name),
    ];
    candidates
        .iter()
        .find(|c| c.join(".git").exists())
        .cloned()
        .ok_or_else(|| {
            format!(
                "no clone of {repo} under {}: looked for {}",
                repos.display(),
                candidates
                    .iter()
                    .map(|c| c.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

/// A test list as one shell word each (pytest node ids hold `[`, spaces).
fn quoted(tests: &[String]) -> String {
    tests
        .iter()
        .map(|t| format!("'{}'", t.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The task of an instance, run on `checkout` (the instance's repository at
/// its base commit), its two test lists as the frozen checks.
pub(crate) fn instance_task(
    inst: &Instance,
    checkout: PathBuf,
    model: Option<&str>,
    script: Option<PathBuf>,
) -> TaskSpec {
    let mut checks = vec![CheckLine {
        name: "fail_to_pass".into(),
        command: format!(
            "python3 -m pytest -q -p no:cacheprovider -- {}",
            quoted(&inst.fail_to_pass)
        ),
    }];
    if !inst.pass_to_pass.is_empty() {
        checks.push(CheckLine {
            name: "pass_to_pass".into(),
            command: format!(
                "python3 -m pytest -q -p no:cacheprovider -- {}",
                quoted(&inst.pass_to_pass)
            ),
        });
    }
    TaskSpec {
        id: inst.instance_id.clone(),
        repo: checkout,
        task: inst.problem_statement.clone(),
        checks,
        model: if script.is_some() {
            None
        } else {
            model.map(str::to_string)
        },
        script,
        max_turns: None,
        timeout: None,
        max_tokens: None,
        max_cost: None,
        network: false,
        allow_zero_tests: false,
        instance_id: Some(inst.instance_id.clone()),
        unavailable: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_resolve_paths_take_the_default_model_and_refuse_what_run_would() {
        let text = r#"
# a comment
{"id": "a-1", "repo": "repos/a", "task": "fix it", "checks": [{"name": "t", "command": "pytest -q"}]}
{"id": "b.2", "repo": "/abs/b", "task": "fix b", "script": "b.json", "max_turns": 3}
"#;
        let tasks = parse_tasks(text, Path::new("/base"), Some("openai")).expect("tasks");
        assert_eq!(tasks[0].repo, Path::new("/base/repos/a"));
        assert_eq!(tasks[0].model.as_deref(), Some("openai"));
        assert_eq!(tasks[1].repo, Path::new("/abs/b"));
        assert_eq!(tasks[1].script.as_deref(), Some(Path::new("/base/b.json")));
        assert_eq!(tasks[1].model, None, "a script is the model");
        let args: Vec<String> = tasks[1]
            .child_args(None, None)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "run",
                "--non-interactive",
                "--events",
                "--script",
                "/base/b.json",
                "--max-turns",
                "3",
                "--",
                "/abs/b",
                "fix b"
            ]
        );
        let mut long = tasks[1].clone();
        long.task = "x".repeat(200 << 10);
        assert!(long.needs_task_file() && !tasks[1].needs_task_file());
        let args: Vec<String> = long
            .child_args(None, Some(Path::new("/batch/logs/b.2.task")))
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(
            args.ends_with(&[
                "--task-file".into(),
                "/batch/logs/b.2.task".into(),
                "--".into(),
                "/abs/b".into()
            ]),
            "{args:?}"
        );
        let resume: Vec<String> = tasks[0]
            .child_args(Some("r1"), None)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            resume,
            [
                "resume",
                "--non-interactive",
                "--events",
                "--model",
                "openai",
                "--",
                "r1"
            ]
        );
        let args: Vec<String> = tasks[0]
            .child_args(None, None)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.ends_with(&[
            "--check".into(),
            "t".into(),
            "pytest -q".into(),
            "--".into(),
            "/base/repos/a".into(),
            "fix it".into()
        ]));

        for (bad, why) in [
            (r#"{"id": "../x", "repo": "r", "task": "t"}"#, "task id"),
            (r#"{"id": "", "repo": "r", "task": "t"}"#, "task id"),
            (r#"{"id": "x", "repo": "r", "task": "  "}"#, "empty"),
            (
                r#"{"id": "x", "repo": "r", "task": "t", "max_turns": 0}"#,
                "positive",
            ),
            (
                r#"{"id": "x", "repo": "r", "task": "t", "colour": 1}"#,
                "unknown field",
            ),
            (
                r#"{"id": "x", "repo": "r", "task": "t", "model": "a", "script": "s"}"#,
                "give one",
            ),
            ("not json", "line 1"),
            ("", "no tasks"),
        ] {
            let e = parse_tasks(bad, Path::new("/"), None).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
        let twice = "{\"id\":\"x\",\"repo\":\"r\",\"task\":\"t\"}\n{\"id\":\"x\",\"repo\":\"r\",\"task\":\"u\"}";
        assert!(
            parse_tasks(twice, Path::new("/"), None)
                .expect_err("twice")
                .contains("twice")
        );
    }

    #[test]
    fn instances_read_both_spellings_of_the_test_lists_and_quote_them() {
        let text = r#"{"instance_id": "o__r-1", "repo": "o/r", "base_commit": "abcdef1", "problem_statement": "bug", "FAIL_TO_PASS": "[\"tests/t.py::test_a[x y]\"]", "PASS_TO_PASS": [], "version": "1.0"}
{"instance_id": "o__r-2", "repo": "o/r", "base_commit": "abcdef2", "problem_statement": "bug", "FAIL_TO_PASS": ["t.py::it's"], "PASS_TO_PASS": ["t.py::b"]}"#;
        let inst = parse_instances(text).expect("instances");
        assert_eq!(inst[0].fail_to_pass, ["tests/t.py::test_a[x y]"]);
        let task = instance_task(&inst[0], "/w/1".into(), Some("openai"), None);
        assert_eq!(
            task.checks.len(),
            1,
            "no PASS_TO_PASS check when the list is empty"
        );
        assert_eq!(
            task.checks[0].command,
            "python3 -m pytest -q -p no:cacheprovider -- 'tests/t.py::test_a[x y]'"
        );
        let task = instance_task(&inst[1], "/w/2".into(), Some("m"), Some("/s.json".into()));
        assert_eq!(
            task.checks[0].command,
            r"python3 -m pytest -q -p no:cacheprovider -- 't.py::it'\''s'"
        );
        assert_eq!(task.checks[1].name, "pass_to_pass");
        assert_eq!(task.model, None);
        assert_eq!(task.instance_id.as_deref(), Some("o__r-2"));

        for (bad, why) in [
            (
                r#"{"instance_id": "i", "repo": "o/r", "base_commit": "main", "problem_statement": "p", "FAIL_TO_PASS": ["a"]}"#,
                "not a commit",
            ),
            (
                r#"{"instance_id": "i", "repo": "o/r", "base_commit": "abcdef1", "problem_statement": "p", "FAIL_TO_PASS": []}"#,
                "FAIL_TO_PASS is empty",
            ),
            (
                r#"{"instance_id": "i", "repo": "../r", "base_commit": "abcdef1", "problem_statement": "p", "FAIL_TO_PASS": ["a"]}"#,
                "OWNER/NAME",
            ),
            (
                r#"{"instance_id": "i/j", "repo": "o/r", "base_commit": "abcdef1", "problem_statement": "p", "FAIL_TO_PASS": ["a"]}"#,
                "task id",
            ),
        ] {
            let e = parse_instances(bad).expect_err(bad);
            assert!(e.contains(why), "{e}");
        }
    }

    #[test]
    fn local_clones_are_found_under_each_spelling() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("psf__requests/.git")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join("flask/.git")).expect("mkdir");
        assert_eq!(
            local_clone(dir.path(), "psf/requests").expect("found"),
            dir.path().join("psf__requests")
        );
        assert_eq!(
            local_clone(dir.path(), "pallets/flask").expect("found"),
            dir.path().join("flask")
        );
        assert!(
            local_clone(dir.path(), "a/b")
                .expect_err("none")
                .contains("no clone of a/b")
        );
    }
}
