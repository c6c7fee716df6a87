//! One headless run of the real binary against a source repository, a mock
//! model and the real Docker sandbox, with what it left behind.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use super::mock_openai::MockOpenAi;

pub const API_KEY: &str = "sk-test-0a1b2c3d4e5f60718293a4b5c6d7e8f9";

pub struct RunHarness {
    pub mock: MockOpenAi,
    pub state: tempfile::TempDir,
    pub source: tempfile::TempDir,
    pub artifacts: PathBuf,
    digest: String,
}

/// What one run printed.
pub struct Finished {
    pub output: Output,
    /// The one JSON object on stdout.
    pub result: Value,
}

impl Finished {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
}

impl RunHarness {
    /// Docker must be there (or the test is skipped as `docker_or_skip` says).
    pub async fn new(source: tempfile::TempDir) -> Option<Self> {
        super::docker_or_skip().await?;
        let state = super::state_dir();
        let artifacts = state.path().join("artifacts");
        let digest = minicoder::cli::demo::tree_digest(source.path()).expect("digest");
        Some(Self {
            mock: MockOpenAi::start().await,
            state,
            source,
            artifacts,
            digest,
        })
    }

    /// Runs to the end with `extra` flags.
    pub async fn run(&self, extra: &[&str]) -> Finished {
        let mut cmd = tokio::process::Command::new(super::bin());
        cmd.arg("run")
            .arg(self.source.path())
            .arg("Fix the pagination bug")
            .args(["--non-interactive", "--model", "openai", "--artifact-dir"])
            .arg(&self.artifacts)
            .args(extra)
            .env("MINICODER_STATE_DIR", self.state.path())
            .env("OPENAI_BASE_URL", self.mock.base_url())
            .env("OPENAI_API_KEY", API_KEY)
            .env("OPENAI_MODEL", "mock-model")
            .env("MINICODER_RETRY_BASE_MS", "10")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let output = tokio::time::timeout(Duration::from_secs(240), cmd.output())
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
        Finished { output, result }
    }

    /// The source is unchanged, the API key is in no artifact, and
    /// `git apply --check` accepts `final.patch` on the source.
    pub fn assert_guarantees(&self) {
        let patch = self.artifacts.join("final.patch");
        let out = std::process::Command::new("git")
            .args(["apply", "--check", "--allow-empty"])
            .arg(&patch)
            .current_dir(self.source.path())
            .output()
            .expect("run git apply");
        assert!(
            out.status.success(),
            "git apply --check refuses final.patch: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let now = minicoder::cli::demo::tree_digest(self.source.path()).expect("digest");
        assert_eq!(now, self.digest, "the source repository changed");
        for (file, bytes) in self.artifact_files() {
            assert!(
                !contains(&bytes, API_KEY.as_bytes()),
                "the API key is in {}",
                file.display()
            );
        }
        minicoder::trace::verify_chain(self.artifacts.join("events.jsonl"))
            .expect("the event chain verifies");
    }

    /// Every file under the artifact directory, with its bytes.
    pub fn artifact_files(&self) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![self.artifacts.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let bytes = std::fs::read(&path).expect("read artifact");
                    out.push((path, bytes));
                }
            }
        }
        out
    }

    pub fn manifest(&self) -> Value {
        read_json(&self.artifacts.join("manifest.json"))
    }

    pub fn final_patch(&self) -> Vec<u8> {
        std::fs::read(self.artifacts.join("final.patch")).expect("final.patch")
    }

    /// Every tool result the model was sent, in order.
    pub fn tool_results(&self) -> Vec<String> {
        let mut seen = Vec::new();
        if let Some(last) = self.mock.requests().last() {
            for m in last.messages() {
                if m["role"] == "tool" {
                    seen.push(m["content"].as_str().unwrap_or_default().to_string());
                }
            }
        }
        seen
    }

    /// Everything the model was sent.
    pub fn all_request_bytes(&self) -> Vec<u8> {
        self.mock
            .requests()
            .iter()
            .flat_map(|r| r.body.to_vec())
            .collect()
    }
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

/// Whether `git apply --check` accepts `patch` on a copy of the demo fixture.
pub fn git_apply_check_on_fixture(patch: &Path) -> Result<(), String> {
    let copy = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(copy.path()).expect("fixture");
    git_apply(copy.path(), patch, true)
}

/// `git apply` (`--check` only, or for real) of `patch` in `dir`.
pub fn git_apply(dir: &Path, patch: &Path, check_only: bool) -> Result<(), String> {
    let mut cmd = std::process::Command::new("git");
    cmd.arg("apply");
    if check_only {
        cmd.arg("--check");
    }
    let out = cmd
        .arg(patch)
        .current_dir(dir)
        .output()
        .expect("run git apply");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}
