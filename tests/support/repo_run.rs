//! One headless run of the real binary on a copy of the demo fixture (plus
//! any files a test adds) with a scripted model, read back from the state
//! directory as a person's runs are; and a listener on the host that counts
//! what reaches it.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use super::mock_openai::{MockOpenAi, MockResponse};

pub const API_KEY: &str = "sk-test-51c0ffee5eed0000aaaabbbbccccdddd";

/// The demo fixture plus `extra` files, committed, with a mock model and a
/// state directory of its own.
pub struct Repo {
    pub source: tempfile::TempDir,
    pub state: tempfile::TempDir,
    pub mock: MockOpenAi,
}

pub struct Ran {
    pub output: Output,
    pub result: Value,
    pub artifacts: PathBuf,
}

impl Ran {
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }

    pub fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.artifacts.join("events.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn event(&self, kind: &str) -> Option<Value> {
        self.events().into_iter().find(|e| e["type"] == kind)
    }

    pub fn manifest(&self) -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(self.artifacts.join("manifest.json")).unwrap(),
        )
        .unwrap()
    }

    pub fn patch(&self) -> String {
        std::fs::read_to_string(self.artifacts.join("final.patch")).unwrap_or_default()
    }
}

impl Repo {
    pub async fn new(extra: &[(&str, &str)]) -> Self {
        let source = tempfile::tempdir().expect("tempdir");
        minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
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

    pub fn command(&self, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(super::bin());
        cmd.args(args)
            .env("MINICODER_STATE_DIR", self.state.path())
            .env("OPENAI_BASE_URL", self.mock.base_url())
            .env("OPENAI_API_KEY", API_KEY)
            .env("OPENAI_MODEL", "mock-model")
            .env("MINICODER_RETRY_BASE_MS", "10")
            .env_remove("MINICODER_BOOTSTRAP_NETWORK");
        cmd
    }

    /// `minicoder run REPO TASK --non-interactive` with `flags` (its
    /// artifacts in the state directory, as a person's runs are).
    pub async fn run(&self, label: &str, flags: &[&str]) -> Ran {
        self.run_with(label, flags, &[]).await
    }

    /// [`Repo::run`] with `env` added to the command's environment.
    pub async fn run_with(&self, label: &str, flags: &[&str], env: &[(&str, &Path)]) -> Ran {
        let mut cmd = self.command(&["run"]);
        for (name, value) in env {
            cmd.env(name, value);
        }
        cmd.arg(self.path())
            .arg("Fix the pagination bug")
            .args(["--non-interactive", "--model", "openai"])
            .args(flags);
        let output = tokio::task::spawn_blocking(move || cmd.output().expect("minicoder runs"))
            .await
            .expect("join");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let result: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "[{label}] stdout is not one JSON object ({e}):\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
        let artifacts = PathBuf::from(result["artifact_dir"].as_str().unwrap_or_default());
        Ran {
            output,
            result,
            artifacts,
        }
    }

    /// The model runs `command` (after a plan), then fixes the bug and asks
    /// for completion.
    pub fn script(&self, command: &str) {
        self.mock.push(MockResponse::tool_calls(&[
            ("update_plan", plan(["in_progress", "pending"])),
            ("run_shell", json!({"command": command})),
        ]));
        self.fix();
    }

    /// The model plans, fixes the bug and asks for completion.
    pub fn fix_only(&self) {
        self.mock.push(MockResponse::tool_calls(&[(
            "update_plan",
            plan(["in_progress", "pending"]),
        )]));
        self.fix();
    }

    pub fn fix(&self) {
        self.mock.push(MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            (
                "edit_file",
                json!({"path": "pagination.py", "patch": super::FIX_PAGINATION}),
            ),
        ]));
        self.mock.push(MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            ("request_completion", json!({"summary": "rounded up"})),
        ]));
    }
}

pub fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "look around", "status": statuses[0]},
        {"id": "2", "content": "fix it", "status": statuses[1]},
    ]})
}

/// A TCP listener on every host address that counts what reaches it.
pub struct Listener {
    pub port: u16,
    connections: Arc<AtomicUsize>,
    bytes: Arc<std::sync::Mutex<Vec<u8>>>,
}

impl Listener {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("0.0.0.0:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let connections = Arc::new(AtomicUsize::new(0));
        let bytes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (count, seen) = (connections.clone(), bytes.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let seen = seen.clone();
                tokio::spawn(async move {
                    use tokio::io::AsyncReadExt;
                    let mut buf = vec![0u8; 4096];
                    while let Ok(n) = stream.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        seen.lock().unwrap().extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        Self {
            port,
            connections,
            bytes,
        }
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    pub fn received(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().unwrap()).into_owned()
    }
}
