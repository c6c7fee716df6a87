//! End to end in the providers' own dialects: the real binary, pinned to
//! Gemini or DeepSeek and pointed at the mock through the provider's base-URL
//! variable, the real Docker sandbox and verifier. A run needs four tool
//! rounds (one and two calls per turn, streamed or plain); the mock refuses
//! any request whose history lacks the signature or reasoning it handed out,
//! so the run only succeeds when each is sent back exactly as received. No
//! artifact and no output may contain that hidden state.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_openai::{Dialect, MockOpenAi, MockResponse, REASONING_MARKER, Shape};

const API_KEY: &str = "sk-dialect-5e4d3c2b1a0f9e8d7c6b";
const FIX: &str = support::FIX_PAGINATION;

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "find the bug", "status": statuses[0]},
        {"id": "2", "content": "fix it", "status": statuses[1]},
    ]})
}

/// Four rounds: two calls, one, one, two; each Gemini stream in another shape.
fn script() -> Vec<MockResponse> {
    let split = Shape {
        split_arguments: true,
        late_signature: false,
    };
    let late = Shape {
        split_arguments: false,
        late_signature: true,
    };
    let both = Shape {
        split_arguments: true,
        late_signature: true,
    };
    vec![
        MockResponse::as_asked(&[
            ("update_plan", plan(["in_progress", "pending"])),
            ("read_file", json!({"path": "pagination.py"})),
        ])
        .with_content("Reading the code first."),
        MockResponse::as_asked(&[("update_plan", plan(["done", "in_progress"]))]).with_shape(split),
        MockResponse::as_asked(&[("edit_file", json!({"path": "pagination.py", "patch": FIX}))])
            .with_shape(late),
        MockResponse::as_asked(&[
            ("update_plan", plan(["done", "done"])),
            (
                "request_completion",
                json!({"summary": "page_count rounds up"}),
            ),
        ])
        .with_shape(both),
    ]
}

struct Run {
    mock: MockOpenAi,
    stdout: String,
    stderr: String,
    code: Option<i32>,
    result: Value,
    artifacts: PathBuf,
    _state: tempfile::TempDir,
}

async fn run(dialect: Dialect, streaming: bool) -> Option<Run> {
    support::docker_or_skip().await?;
    let source = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
    let digest = minicoder::cli::demo::tree_digest(source.path()).expect("digest");
    let state = support::state_dir();
    let artifacts = state.path().join("artifacts");
    let mock = MockOpenAi::speaking(dialect).await;
    mock.push_all(script());
    let (provider, url_var, key_var) = match dialect {
        Dialect::Gemini => ("gemini", "GEMINI_BASE_URL", "GEMINI_API_KEY"),
        _ => ("deepseek", "FREELLMAPI_BASE_URL", "FREELLMAPI_API_KEY"),
    };
    let mut cmd = tokio::process::Command::new(support::bin());
    cmd.arg("run")
        .arg(source.path())
        .arg("Fix the pagination bug")
        .args(["--non-interactive", "--model", provider, "--artifact-dir"])
        .arg(&artifacts)
        .args(["--check", "tests", "python3 -m pytest -q"])
        .env("MINICODER_STATE_DIR", state.path())
        .env("XDG_STATE_HOME", state.path())
        .env("MINICODER_FREE_TIER_CONFIRMED", "true")
        .env("MINICODER_RETRY_BASE_MS", "10")
        .env(
            "MINICODER_MODEL_STREAMING",
            if streaming { "on" } else { "off" },
        )
        .env(url_var, mock.base_url())
        .env(key_var, API_KEY)
        .env_remove("MINICODER_REASONING")
        .env_remove("GEMINI_REASONING")
        .kill_on_drop(true);
    if dialect == Dialect::DeepSeek {
        cmd.env("DEEPSEEK_REASONING", "on");
    }
    let out = tokio::time::timeout(Duration::from_secs(240), cmd.output())
        .await
        .expect("the run ends")
        .expect("minicoder runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let result: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}\n{stderr}"));
    let now = minicoder::cli::demo::tree_digest(source.path()).expect("digest");
    assert_eq!(now, digest, "the source repository changed");
    Some(Run {
        mock,
        stdout,
        stderr,
        code: out.status.code(),
        result,
        artifacts,
        _state: state,
    })
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

impl Run {
    fn assert_success(&self) {
        assert_eq!(
            self.result["outcome"],
            "success",
            "{:#}\n{}\nrefusals: {:?}",
            self.result,
            self.stderr,
            self.mock.refusals()
        );
        assert_eq!(self.code, Some(0));
        assert_eq!(self.result["verification"]["passed"], true);
        assert_eq!(self.result["changed_files"], json!(["pagination.py"]));
        assert!(
            self.mock.refusals().is_empty(),
            "{:?}",
            self.mock.refusals()
        );
        assert_eq!(self.mock.request_count(), 4, "four tool rounds");
        assert_eq!(self.mock.call_ids().len(), 6, "six tool calls handed out");
    }

    /// Every request asked the way the run was configured to.
    fn assert_streaming(&self, streaming: bool) {
        for request in self.mock.requests() {
            assert_eq!(request.json()["stream"], streaming);
        }
    }

    /// The assistant messages of the last request: every reply but the last.
    fn sent_back(&self) -> Vec<Value> {
        let last = self.mock.requests().last().expect("a request").messages();
        last.into_iter()
            .filter(|m| m["role"] == "assistant")
            .collect()
    }

    /// No artifact, and neither stdout nor stderr, contains any of `secrets`.
    fn assert_nowhere(&self, secrets: &[String]) {
        assert!(!secrets.is_empty());
        let mut places: Vec<(String, Vec<u8>)> = vec![
            ("stdout".into(), self.stdout.clone().into_bytes()),
            ("stderr".into(), self.stderr.clone().into_bytes()),
        ];
        let artifacts = files(&self.artifacts);
        assert!(artifacts.iter().any(|f| f.ends_with("events.jsonl")));
        for file in artifacts {
            places.push((
                file.display().to_string(),
                std::fs::read(&file).expect("read"),
            ));
        }
        for (place, bytes) in &places {
            for secret in secrets.iter().chain([&API_KEY.to_string()]) {
                assert!(
                    !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                    "{secret:?} is in {place}"
                );
            }
        }
    }
}

async fn gemini(streaming: bool) {
    let Some(run) = run(Dialect::Gemini, streaming).await else {
        return;
    };
    run.assert_success();
    run.assert_streaming(streaming);
    let first = &run.mock.requests()[0].json();
    for field in ["reasoning_effort", "thinking", "enable_thinking"] {
        assert!(
            first.get(field).is_none(),
            "thinking was not configured: {field}"
        );
    }
    let signatures = run.mock.signatures();
    assert_eq!(signatures.len(), 4, "one signature a reply");
    let sent = run.sent_back();
    assert_eq!(sent.len(), 3);
    for message in &sent {
        let call = &message["tool_calls"][0];
        let id = call["id"].as_str().expect("id");
        assert_eq!(call["extra_content"], signatures[id], "sent back exactly");
    }
    let secrets: Vec<String> = signatures
        .values()
        .map(|v| {
            v["google"]["thought_signature"]
                .as_str()
                .expect("signature")
                .to_string()
        })
        .chain(["thought_signature".to_string()])
        .collect();
    run.assert_nowhere(&secrets);
}

async fn deepseek(streaming: bool) {
    let Some(run) = run(Dialect::DeepSeek, streaming).await else {
        return;
    };
    run.assert_success();
    run.assert_streaming(streaming);
    assert_eq!(
        run.mock.requests()[0].json()["thinking"],
        json!({"type": "enabled"}),
        "DEEPSEEK_REASONING=on asks for thinking"
    );
    let reasoning = run.mock.reasoning();
    let sent = run.sent_back();
    assert_eq!(sent.len(), 3);
    for message in &sent {
        let id = message["tool_calls"][0]["id"].as_str().expect("id");
        assert_eq!(
            message["reasoning_content"],
            json!(reasoning[id]),
            "sent back exactly"
        );
    }
    let mut secrets: Vec<String> = reasoning.values().cloned().collect();
    secrets.push(REASONING_MARKER.to_string());
    run.assert_nowhere(&secrets);
}

#[tokio::test]
async fn gemini_streamed_run_sends_its_signatures_back_and_succeeds() {
    gemini(true).await;
}

#[tokio::test]
async fn gemini_plain_run_sends_its_signatures_back_and_succeeds() {
    gemini(false).await;
}

#[tokio::test]
async fn deepseek_streamed_run_sends_its_reasoning_back_and_succeeds() {
    deepseek(true).await;
}

#[tokio::test]
async fn deepseek_plain_run_sends_its_reasoning_back_and_succeeds() {
    deepseek(false).await;
}
