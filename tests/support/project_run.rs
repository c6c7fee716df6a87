//! Running the real binary headless on a small project with a scripted
//! (mock) model: the harness of the ecosystem and project-image tests.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};

use super::mock_openai::{MockOpenAi, MockResponse};

pub const API_KEY: &str = "sk-test-0a1b2c3d4e5f60718293a4b5c6d7e8f9";

/// A project under `assets/eval/fixtures/<name>`, copied and committed.
pub struct Project {
    pub source: tempfile::TempDir,
    pub state: tempfile::TempDir,
    pub mock: MockOpenAi,
}

/// One finished run.
pub struct Finished {
    pub output: Output,
    pub result: Value,
    pub artifacts: PathBuf,
}

impl Finished {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.artifacts.join("events.jsonl"))
            .expect("events")
            .lines()
            .map(|l| serde_json::from_str(l).expect("event line"))
            .collect()
    }

    pub fn final_patch(&self) -> String {
        std::fs::read_to_string(self.artifacts.join("final.patch")).expect("final.patch")
    }

    /// Fails with everything a person would need to see why it did not succeed.
    pub fn assert_success(&self) {
        assert_eq!(
            self.result["outcome"],
            "success",
            "{:#}\n--- stderr:\n{}",
            self.result,
            self.stderr()
        );
        assert_eq!(self.output.status.code(), Some(0));
    }
}

pub fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("assets/eval/fixtures")
        .join(name)
}

fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("read fixture") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&dest).expect("mkdir");
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).expect("copy");
        }
    }
}

impl Project {
    /// The fixture `name` plus `extra` files, committed as a new repository.
    pub async fn new(name: &str, extra: &[(&str, &str)]) -> Self {
        let source = tempfile::tempdir().expect("tempdir");
        if !name.is_empty() {
            copy_tree(&fixture_dir(name), source.path());
        }
        for (path, text) in extra {
            super::write(&source.path().join(path), text.as_bytes());
        }
        super::git_commit_all(source.path());
        Self {
            source,
            state: super::state_dir(),
            mock: MockOpenAi::start().await,
        }
    }

    pub fn path(&self) -> &Path {
        self.source.path()
    }

    /// Runs `minicoder run --non-interactive` to its end, the project's
    /// configuration trusted (with network for its bootstrap).
    pub async fn run(&self, label: &str, env: &[(&str, &str)]) -> Finished {
        self.run_with(label, env, &["--trust-project=network"])
            .await
    }

    /// [`Project::run`] with `args` instead of the trust flag.
    pub async fn run_with(&self, label: &str, env: &[(&str, &str)], args: &[&str]) -> Finished {
        let artifacts = self.state.path().join(format!("artifacts-{label}"));
        let mut cmd = tokio::process::Command::new(super::bin());
        cmd.arg("run")
            .arg(self.source.path())
            .arg("Make the failing test pass")
            .args(["--non-interactive", "--model", "openai", "--artifact-dir"])
            .arg(&artifacts)
            .args(args)
            .env("MINICODER_STATE_DIR", self.state.path())
            .env("OPENAI_BASE_URL", self.mock.base_url())
            .env("OPENAI_API_KEY", API_KEY)
            .env("OPENAI_MODEL", "mock-model")
            .env("MINICODER_RETRY_BASE_MS", "10")
            .envs(env.iter().copied())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let output = tokio::time::timeout(Duration::from_secs(600), cmd.output())
            .await
            .expect("the run ends")
            .expect("minicoder runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let result: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        eprintln!(
            "[{label}] outcome {} in {} ms (bootstrap, model, tools, verification: {:?})",
            result["outcome"],
            result["duration_ms"],
            std::fs::read_to_string(artifacts.join("report.json"))
                .ok()
                .and_then(|r| serde_json::from_str::<Value>(&r).ok())
                .map(|r| r["durations"].clone())
        );
        if std::env::var_os("MINICODER_TEST_SHOW_STDERR").is_some() {
            eprintln!(
                "[{label}] stderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Finished {
            output,
            result,
            artifacts,
        }
    }

    /// Scripts the agent: look at the failure with `probe`, apply `patch` to
    /// `path`, ask for completion.
    pub fn script_fix(&self, probe: &str, path: &str, patch: &str) {
        self.mock.push(MockResponse::tool_calls(&[
            ("update_plan", plan(["in_progress", "pending"])),
            ("run_shell", json!({"command": probe})),
        ]));
        self.mock.push(MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            ("edit_file", json!({"path": path, "patch": patch})),
        ]));
        self.mock.push(MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            ("request_completion", json!({"summary": "the test passes"})),
        ]));
    }

    /// The patch that turns line `old` of the committed `path` into `new`.
    pub fn patch(&self, path: &str, old: &str, new: &str) -> String {
        let text = std::fs::read_to_string(self.path().join(path)).expect("read");
        whole_file_patch(path, &text, old, new)
    }

    /// Every tool result the model was sent, in order.
    pub fn tool_results(&self) -> Vec<String> {
        self.mock
            .requests()
            .last()
            .map(|last| {
                last.messages()
                    .iter()
                    .filter(|m| m["role"] == "tool")
                    .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "see the failure", "status": statuses[0]},
        {"id": "2", "content": "fix it", "status": statuses[1]},
    ]})
}

/// One hunk over the whole file replacing the line `old` (exactly) with `new`.
pub fn whole_file_patch(path: &str, text: &str, old: &str, new: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.contains(&old), "{path} has no line {old:?}");
    let mut out = format!(
        "--- a/{path}\n+++ b/{path}\n@@ -1,{n} +1,{n} @@\n",
        n = lines.len()
    );
    for line in lines {
        if line == old {
            out.push_str(&format!("-{old}\n+{new}\n"));
        } else {
            out.push_str(&format!(" {line}\n"));
        }
    }
    out
}
