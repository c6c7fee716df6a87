//! End to end, what the model is shown: the real binary, the real Docker
//! sandbox and verifier, and the mock model (OpenAI dialect) on 127.0.0.1,
//! whose recorded request bodies are what the model saw. A run whose
//! command outputs pass 75 % of a small context budget again and again; and
//! project instructions at the root, in a subdirectory, and one of 1 MB.

use crate::support;

use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_openai::{MockOpenAi, MockResponse};

const API_KEY: &str = "sk-test-context-3b2a19f8e7d6c5b4";
const FIX: &str = support::FIX_PAGINATION;

struct Harness {
    mock: MockOpenAi,
    state: tempfile::TempDir,
    source: tempfile::TempDir,
    artifacts: PathBuf,
    digest: String,
}

impl Harness {
    /// The demo fixture with `extra` files added and committed.
    async fn new(extra: &[(&str, &[u8])]) -> Option<Self> {
        support::docker_or_skip().await?;
        let source = tempfile::tempdir().expect("tempdir");
        minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
        for (path, bytes) in extra {
            support::write(&source.path().join(path), bytes);
        }
        support::git_commit_all(source.path());
        let state = support::state_dir();
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

    async fn run(&self, env: &[(&str, &str)]) -> (Output, Value) {
        let mut cmd = tokio::process::Command::new(support::bin());
        cmd.arg("run")
            .arg(self.source.path())
            .arg("Fix the pagination bug")
            .args(["--non-interactive", "--model", "openai", "--artifact-dir"])
            .arg(&self.artifacts)
            .env("MINICODER_STATE_DIR", self.state.path())
            .env("XDG_STATE_HOME", self.state.path())
            .env("OPENAI_BASE_URL", self.mock.base_url())
            .env("OPENAI_API_KEY", API_KEY)
            .env("OPENAI_MODEL", "mock-model")
            .env("MINICODER_RETRY_BASE_MS", "10")
            .env_remove("OPENAI_CONTEXT_LIMIT")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = tokio::time::timeout(Duration::from_secs(300), cmd.output())
            .await
            .expect("the run ends")
            .expect("minicoder runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let result: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "stdout is not one JSON object ({e}):\n{stdout}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let now = minicoder::cli::demo::tree_digest(self.source.path()).expect("digest");
        assert_eq!(now, self.digest, "the source repository changed");
        (out, result)
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.artifacts.join("events.jsonl"))
            .expect("events")
            .lines()
            .map(|l| serde_json::from_str(l).expect("event line"))
            .collect()
    }

    fn manifest(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.artifacts.join("manifest.json")).expect("read"))
            .expect("manifest")
    }
}

/// The text of a request's messages, in order.
fn texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "reproduce the failing test", "status": statuses[0],
         "notes": "seen in the first pytest run"},
        {"id": "2", "content": "make page_count round up", "status": statuses[1]},
    ]})
}

fn shell(command: &str) -> (&'static str, Value) {
    ("run_shell", json!({ "command": command }))
}

/// About 7,000 characters of output: ~1,750 tokens, a fifth of the budget.
fn big_output(i: usize) -> String {
    format!("seq -f 'build step {i}.%g: compiled the module and linked it' 1 140")
}

#[tokio::test]
async fn past_75_percent_again_and_again_the_model_still_sees_the_failing_test_the_plan_and_the_changes()
 {
    const LIMIT: u64 = 8_000;
    let Some(h) = Harness::new(&[]).await else {
        return;
    };
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        shell("python3 -m pytest -q"),
    ]));
    for i in 0..5 {
        h.mock
            .push(MockResponse::tool_calls(&[shell(&big_output(i))]));
    }
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "in_progress"])),
        ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
    ]));
    for i in 5..12 {
        h.mock
            .push(MockResponse::tool_calls(&[shell(&big_output(i))]));
    }
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "done"])),
        (
            "request_completion",
            json!({"summary": "page_count rounds up"}),
        ),
    ]));
    let (out, result) = h.run(&[("OPENAI_CONTEXT_LIMIT", &LIMIT.to_string())]).await;
    assert_eq!(
        result["outcome"],
        "success",
        "{result:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Which requests followed a compaction: count model.request events.
    let mut seen_requests = 0;
    let mut after_compaction = None;
    let mut compactions = 0;
    for e in h.events() {
        match e["type"].as_str() {
            Some("model.request") => seen_requests += 1,
            Some("context.compacted") => {
                compactions += 1;
                after_compaction.get_or_insert(seen_requests);
            }
            _ => {}
        }
    }
    assert!(compactions >= 3, "compacted {compactions} times");
    let first_after = after_compaction.expect("compacted");
    let requests: Vec<Value> = h.mock.requests().iter().map(|r| r.json()).collect();
    assert_eq!(requests.len(), seen_requests);

    // No request exceeds the budget. The agent counts four characters a
    // token over message texts, tool calls and tools; the recorded body is
    // all of that plus JSON syntax and escapes, so its byte count over four
    // bounds the agent's estimate from above.
    let mut largest = 0;
    for (i, r) in h.mock.requests().iter().enumerate() {
        let tokens = r.body.len().div_ceil(4) as u64;
        largest = largest.max(tokens);
        assert!(tokens <= LIMIT, "request {i}: ≈ {tokens} tokens of {LIMIT}");
    }
    eprintln!(
        "{} requests, {compactions} compactions, the largest ≈ {largest} of {LIMIT} tokens",
        requests.len()
    );

    let edited_at = requests
        .iter()
        .position(|r| {
            texts(r)
                .iter()
                .any(|t| t.starts_with("Applied the patch to pagination.py"))
        })
        .expect("the edit's result was sent");
    for (i, request) in requests.iter().enumerate().skip(first_after) {
        let texts = texts(request);
        let all = texts.join("\n");
        assert!(
            !all.contains("def test_partial_last_page_counts():"),
            "request {i}: the first command's output is compacted"
        );
        let summary = texts
            .iter()
            .find(|t| t.starts_with("Summary of earlier actions"))
            .unwrap_or_else(|| panic!("request {i} has the discoveries"));
        assert!(
            summary.contains("tests/test_pagination.py::test_partial_last_page_counts"),
            "request {i}: the failing test of the first command is named:\n{summary}"
        );
        let state = texts.last().expect("the run state");
        assert!(state.starts_with("Run state"), "request {i}: {state}");
        assert!(
            state.contains("reproduce the failing test — notes: seen in the first pytest run")
                && state.contains("make page_count round up"),
            "request {i}: the plan items:\n{state}"
        );
        assert!(
            state.contains(&format!("of the {LIMIT}-token context")),
            "request {i}: the budget:\n{state}"
        );
        if i >= edited_at {
            assert!(
                state.contains("- pagination.py +1 −1"),
                "request {i}: the changed file:\n{state}"
            );
        }
        assert_eq!(texts[1], "Task:\nFix the pagination bug");
    }
}

#[tokio::test]
async fn agents_md_at_the_root_and_in_a_subdirectory_reach_the_requests() {
    let Some(h) = Harness::new(&[
        (
            "AGENTS.md",
            b"ROOT-RULE-7f3: run the tests before completing.\n",
        ),
        (
            "CLAUDE.md",
            b"CLAUDE-NOT-USED: AGENTS.md takes precedence.\n",
        ),
        ("pkg/AGENTS.md", b"PKG-RULE-91c: keep helpers pure.\n"),
        ("pkg/helpers.py", b"def helper():\n    return 1\n"),
    ])
    .await
    else {
        return;
    };
    h.mock.push(MockResponse::tool_calls(&[(
        "read_file",
        json!({"path": "pkg/helpers.py"}),
    )]));
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "in_progress"])),
        ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
    ]));
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "done"])),
        (
            "request_completion",
            json!({"summary": "page_count rounds up"}),
        ),
    ]));
    let (_, result) = h.run(&[]).await;
    assert_eq!(result["outcome"], "success", "{result:#}");
    let requests: Vec<Value> = h.mock.requests().iter().map(|r| r.json()).collect();
    let first = texts(&requests[0]).join("\n");
    assert!(
        first.contains("--- AGENTS.md ---\nROOT-RULE-7f3"),
        "{first}"
    );
    assert!(
        !first.contains("PKG-RULE-91c"),
        "not before the agent works in pkg/"
    );
    assert!(!first.contains("CLAUDE-NOT-USED"));
    for request in &requests[1..] {
        let instructions = texts(request)
            .into_iter()
            .find(|t| t.starts_with("Project instructions"))
            .expect("the instructions message");
        let root = instructions.find("ROOT-RULE-7f3").expect("root");
        let pkg = instructions
            .find("--- pkg/AGENTS.md ---\nPKG-RULE-91c")
            .expect("pkg, once the agent read a file there");
        assert!(root < pkg, "root first");
    }
    assert_eq!(
        h.manifest()["instructions"],
        json!([{"path": "AGENTS.md", "bytes": 48, "truncated": false}])
    );
    let loaded: Vec<Value> = h
        .events()
        .into_iter()
        .filter(|e| e["type"] == "instructions.loaded")
        .map(|e| json!([e["path"], e["truncated"]]))
        .collect();
    assert_eq!(
        loaded,
        [json!(["AGENTS.md", false]), json!(["pkg/AGENTS.md", false])]
    );
}

#[tokio::test]
async fn a_one_megabyte_agents_md_is_cut_to_its_bound_with_a_note() {
    let mut big = String::from("BEGIN-MARK\n");
    while big.len() < (1 << 20) - 9 {
        big.push_str("Always write a test first, then the code that makes it pass.\n");
    }
    big.truncate((1 << 20) - 9);
    big.push_str("END-MARK\n");
    assert_eq!(big.len(), 1 << 20);
    let Some(h) = Harness::new(&[("AGENTS.md", big.as_bytes())]).await else {
        return;
    };
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "in_progress"])),
        ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
    ]));
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "done"])),
        (
            "request_completion",
            json!({"summary": "page_count rounds up"}),
        ),
    ]));
    let (_, result) = h.run(&[]).await;
    assert_eq!(result["outcome"], "success", "{result:#}");
    for request in h.mock.requests() {
        assert!(
            request.body.len() < 64 * 1024,
            "{} bytes",
            request.body.len()
        );
        let instructions = texts(&request.json())
            .into_iter()
            .find(|t| t.starts_with("Project instructions"))
            .expect("the instructions message");
        assert!(instructions.contains("--- AGENTS.md ---\nBEGIN-MARK"));
        assert!(!instructions.contains("END-MARK"));
        assert!(
            instructions
                .contains("[… AGENTS.md was cut: it has 1048576 bytes, the first 32768 are shown."),
            "{}",
            &instructions[instructions.len().saturating_sub(400)..]
        );
    }
    assert_eq!(
        h.manifest()["instructions"],
        json!([{"path": "AGENTS.md", "bytes": 1_048_576, "truncated": true}])
    );
    assert!(
        h.events()
            .iter()
            .any(|e| e["type"] == "instructions.loaded" && e["truncated"] == true)
    );
}
