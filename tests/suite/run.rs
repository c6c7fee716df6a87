//! End to end: the real binary, the real Docker sandbox and verifier, and a
//! mock OpenAI-compatible model on 127.0.0.1. Every test also proves the
//! source repository is byte-for-byte unchanged and that the API key is in
//! no artifact.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_openai::{MockOpenAi, MockResponse};

const API_KEY: &str = "sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0";
const FIX: &str = support::FIX_PAGINATION;

struct Harness {
    mock: MockOpenAi,
    state: tempfile::TempDir,
    source: tempfile::TempDir,
    artifacts: PathBuf,
    digest: String,
}

impl Harness {
    async fn new() -> Option<Self> {
        support::docker_or_skip().await?;
        let source = tempfile::tempdir().expect("tempdir");
        minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
        Some(Self::with_source(source).await)
    }

    async fn with_source(source: tempfile::TempDir) -> Self {
        let state = support::state_dir();
        let artifacts = state.path().join("artifacts");
        let digest = minicoder::cli::demo::tree_digest(source.path()).expect("digest");
        Self {
            mock: MockOpenAi::start().await,
            state,
            source,
            artifacts,
            digest,
        }
    }

    fn command(&self, extra: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(support::bin());
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
        cmd
    }

    /// Runs to the end; returns the output and the one JSON object on stdout.
    async fn run(&self, extra: &[&str]) -> (Output, Value) {
        let out = tokio::time::timeout(Duration::from_secs(240), self.command(extra).output())
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
        (out, result)
    }

    /// The guarantees every run keeps, whatever its outcome.
    fn assert_guarantees(&self) {
        let now = minicoder::cli::demo::tree_digest(self.source.path()).expect("digest");
        assert_eq!(now, self.digest, "the source repository changed");
        for file in files(&self.artifacts) {
            let bytes = std::fs::read(&file).expect("read artifact");
            assert!(
                !bytes
                    .windows(API_KEY.len())
                    .any(|w| w == API_KEY.as_bytes()),
                "the API key is in {}",
                file.display()
            );
        }
        for name in [
            "manifest.json",
            "state.json",
            "events.jsonl",
            "final.patch",
            "report.json",
            "receipt.json",
        ] {
            assert!(self.artifacts.join(name).exists(), "{name} is missing");
        }
        minicoder::trace::verify_chain(self.artifacts.join("events.jsonl"))
            .expect("the event chain verifies");
        // Whatever the outcome, the exported patch applies to the source.
        let applies = std::process::Command::new("git")
            .args(["apply", "--check", "--allow-empty"])
            .arg(self.artifacts.join("final.patch"))
            .current_dir(self.source.path())
            .output()
            .expect("git apply");
        assert!(
            applies.status.success(),
            "git apply --check refuses final.patch: {}",
            String::from_utf8_lossy(&applies.stderr)
        );
    }

    fn events(&self) -> Vec<Value> {
        std::fs::read_to_string(self.artifacts.join("events.jsonl"))
            .expect("events")
            .lines()
            .map(|l| serde_json::from_str(l).expect("event line"))
            .collect()
    }

    fn event_types(&self) -> Vec<String> {
        self.events()
            .iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Every tool result the model was sent, in order.
    fn tool_results(&self) -> Vec<String> {
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

    /// When `run.started` was recorded (ms since the epoch).
    fn started_ms(&self) -> i64 {
        self.events()
            .iter()
            .find(|e| e["type"] == "run.started")
            .and_then(|e| e["ts"].as_str())
            .and_then(|ts| chrono::DateTime::parse_from_rfc3339(ts).ok())
            .map(|t| t.timestamp_millis())
            .expect("run.started has a time")
    }

    fn all_request_text(&self) -> String {
        self.mock
            .requests()
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }
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

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "find the bug", "status": statuses[0]},
        {"id": "2", "content": "fix it", "status": statuses[1]},
    ]})
}

fn fix_and_complete() -> Vec<MockResponse> {
    vec![
        MockResponse::sse_tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
        ]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            (
                "request_completion",
                json!({"summary": "page_count rounds up"}),
            ),
        ]),
    ]
}

#[tokio::test]
async fn a_fix_that_verifies() {
    let Some(h) = Harness::new().await else {
        return;
    };
    h.mock.push(MockResponse::sse_tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        ("read_file", json!({"path": "pagination.py"})),
    ]));
    h.mock.push_all(fix_and_complete());
    let (out, result) = h.run(&[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(result["outcome"], "success", "{result:#}\n{stderr}");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(result["exit_code"], 0);
    assert_eq!(result["changed_files"], json!(["pagination.py"]));
    assert_eq!(result["verification"]["passed"], true);
    assert_eq!(result["model"]["provider"], "openai");
    assert_eq!(result["turns"], 3);
    assert!(result["tokens"]["input"].as_u64().unwrap_or(0) > 0);
    for key in [
        "run_id",
        "reason",
        "repo",
        "task",
        "tool_calls",
        "recovery",
        "artifact_dir",
        "patch",
        "duration_ms",
    ] {
        assert!(result.get(key).is_some(), "{key} missing from {result:#}");
    }
    h.assert_guarantees();
    // The patch applies to the source as it is.
    let copy = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(copy.path()).expect("fixture");
    let applied = std::process::Command::new("git")
        .args(["apply", "--check"])
        .arg(h.artifacts.join("final.patch"))
        .current_dir(copy.path())
        .output()
        .expect("git apply");
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    // The first request went out while the workspace was made, and its
    // answer was taken: one request a turn.
    assert_eq!(h.mock.request_count(), 3);
    assert!(h.mock.requests()[0].received_ms < h.started_ms());
    // What reached the model: the ten tools, and results answering their calls.
    let first = &h.mock.requests()[0];
    let mut names = first.tool_names();
    names.sort();
    assert_eq!(
        names,
        [
            "edit_file",
            "git",
            "list_tree",
            "read_file",
            "read_output",
            "request_completion",
            "ripgrep",
            "run_shell",
            "tree_sitter_symbols",
            "update_plan"
        ]
    );
    assert!(
        h.tool_results()
            .iter()
            .any(|r| r.contains("return total_items // page_size")),
        "read_file result reached the model"
    );
    let types = h.event_types();
    for t in [
        "run.started",
        "model.request",
        "model.response",
        "plan.updated",
        "tool.started",
        "tool.finished",
        "checkpoint.created",
        "verification.started",
        "verification.check",
        "verification.finished",
        "run.finished",
    ] {
        assert!(types.iter().any(|x| x == t), "no {t} event");
    }
    let receipt: Value = serde_json::from_str(
        &std::fs::read_to_string(h.artifacts.join("receipt.json")).expect("receipt"),
    )
    .expect("json");
    assert_eq!(receipt["verification"]["passed"], true);
    assert_eq!(receipt["hmac"].as_str().map(str::len), Some(64));
}

#[tokio::test]
async fn what_commands_write_reaches_the_checkpoints() {
    let Some(h) = Harness::new().await else {
        return;
    };
    let shell = |command: &str| {
        MockResponse::sse_tool_calls(&[
            ("update_plan", plan(["in_progress", "pending"])),
            ("run_shell", json!({ "command": command })),
        ])
    };
    // A directory of files made at once, a file changed in place and one
    // appended to; then, after a checkpoint, some of them changed again.
    h.mock.push(shell(
        "mkdir -p made/deep/er && echo one > made/deep/er/one.txt && echo two > made/two.txt \
         && chmod +x made/two.txt && ln -s deep/er/one.txt made/link",
    ));
    h.mock.push(shell(
        "echo again >> made/deep/er/one.txt && rm made/two.txt && mkdir made/later \
         && echo l > made/later/l.txt && mv made/deep made/moved",
    ));
    h.mock.push_all(fix_and_complete());
    let (out, result) = h.run(&[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(result["outcome"], "success", "{result:#}\n{stderr}");
    let mut changed: Vec<String> = result["changed_files"]
        .as_array()
        .expect("changed files")
        .iter()
        .map(|v| v.as_str().expect("path").to_string())
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        [
            "made/later/l.txt",
            "made/link",
            "made/moved/er/one.txt",
            "pagination.py"
        ],
        "{result:#}"
    );
    let patch = std::fs::read_to_string(h.artifacts.join("final.patch")).expect("patch");
    assert!(patch.contains("+one\n+again\n"), "{patch}");
    assert!(!patch.contains("two.txt"), "{patch}");
    h.assert_guarantees();
}

#[tokio::test]
async fn completion_before_the_fix_is_refused_then_repaired() {
    let Some(h) = Harness::new().await else {
        return;
    };
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "done"])),
        ("request_completion", json!({"summary": "nothing to do"})),
    ]));
    h.mock.push(MockResponse::tool_calls(&[(
        "update_plan",
        plan(["done", "in_progress"]),
    )]));
    h.mock.push_all(fix_and_complete());
    let (_, result) = h.run(&[]).await;
    assert_eq!(result["outcome"], "success", "{result:#}");
    assert_eq!(result["recovery"]["repair_cycles"], 1);
    let failure = h
        .tool_results()
        .into_iter()
        .find(|r| r.starts_with("Verification failed"))
        .expect("the verifier's refusal reached the model");
    assert!(
        failure.contains("assert 2 == 3"),
        "the failing output is in the feedback: {failure}"
    );
    h.assert_guarantees();
}

#[tokio::test]
async fn refusals_and_bad_replies_do_not_end_the_run() {
    let Some(h) = Harness::new().await else {
        return;
    };
    h.mock.push(MockResponse::tool_calls(&[(
        "edit_file",
        json!({"path": "pagination.py", "patch": FIX}),
    )]));
    h.mock.push(MockResponse::text("I think I am done."));
    h.mock.push(MockResponse::tool_calls_raw(&[(
        "read_file",
        r#"{"path": "pagination.py""#,
    )]));
    h.mock.push(MockResponse::tool_calls(&[(
        "delete_repository",
        json!({}),
    )]));
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        (
            "edit_file",
            json!({"path": "config.py", "patch": "--- /dev/null\n+++ b/config.py\n@@ -0,0 +1 @@\n+AWS_KEY = \"AKIAIOSFODNN7EXAMPLE\"\n"}),
        ),
    ]));
    h.mock.push_all(fix_and_complete());
    let (_, result) = h.run(&[]).await;
    assert_eq!(result["outcome"], "success", "{result:#}");
    assert_eq!(
        result["changed_files"],
        json!(["pagination.py"]),
        "the credential never reached the workspace"
    );
    let results = h.tool_results().join("\n");
    assert!(results.contains("would add a credential"), "{results}");
    assert!(
        results.contains("a plan is required before edit_file"),
        "{results}"
    );
    assert!(results.contains("not valid JSON"), "{results}");
    assert!(
        results.contains("unknown tool \"delete_repository\""),
        "{results}"
    );
    assert!(h.all_request_text().contains("Your reply called no tool"));
    let types = h.event_types();
    assert!(types.iter().any(|t| t == "policy.refused"));
    assert!(types.iter().any(|t| t == "agent.correction"));
    h.assert_guarantees();
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() {
    let Some(h) = Harness::new().await else {
        return;
    };
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        (
            "run_shell",
            json!({"command": "ln -s / root && ln -s /etc/passwd pw"}),
        ),
    ]));
    h.mock.push(MockResponse::tool_calls(&[
        ("read_file", json!({"path": "../outside.txt"})),
        ("read_file", json!({"path": "/etc/passwd"})),
        ("read_file", json!({"path": "root/etc/passwd"})),
        ("read_file", json!({"path": "pw"})),
        ("edit_file", json!({"path": "root/tmp/planted", "patch": "--- /dev/null\n+++ b/root/tmp/planted\n@@ -0,0 +1 @@\n+x\n"})),
    ]));
    let (_, result) = h.run(&["--max-turns", "3"]).await;
    assert_eq!(result["outcome"], "failure");
    let results = h.tool_results();
    let reads: Vec<&String> = results.iter().skip(2).take(5).collect();
    assert_eq!(reads.len(), 5, "{results:#?}");
    for r in &reads {
        assert!(
            r.to_lowercase().contains("outside the workspace")
                || r.to_lowercase().contains("refused"),
            "not refused: {r}"
        );
    }
    assert!(
        !h.all_request_text().contains("root:x:0:0"),
        "/etc/passwd reached the model"
    );
    assert!(
        !Path::new("/tmp/planted").exists(),
        "a write escaped the workspace"
    );
    h.assert_guarantees();
}

#[tokio::test]
async fn a_zero_test_suite_is_refused() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let source = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir(source.path().join("tests")).expect("mkdir");
    std::fs::write(
        source.path().join("tests/test_nothing.py"),
        "# no tests yet\n",
    )
    .expect("write");
    std::fs::write(source.path().join("lib.py"), "X = 1\n").expect("write");
    support::git_commit_all(source.path());
    let h = Harness::with_source(source).await;
    h.mock.push(MockResponse::tool_calls(&[
        (
            "update_plan",
            json!({"items": [{"id": "1", "content": "nothing", "status": "done"}]}),
        ),
        ("request_completion", json!({"summary": "done"})),
    ]));
    let (_, result) = h
        .run(&[
            "--check",
            "tests",
            "python3 -m pytest -q",
            "--max-turns",
            "2",
        ])
        .await;
    assert_eq!(result["outcome"], "failure", "{result:#}");
    let check = &result["verification"]["checks"][0];
    assert_eq!(check["passed"], false, "{result:#}");
    let failure = check["failure"].as_str().unwrap_or_default().to_lowercase();
    assert!(
        failure.contains("no tests") || failure.contains("0 items") || failure.contains("zero"),
        "{check:#}"
    );
    h.assert_guarantees();
}

#[tokio::test]
async fn the_third_failed_completion_rolls_back_to_the_validated_state() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    // A baseline that passes: the fixture with the fix already in.
    let source = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
    let file = source.path().join("pagination.py");
    let fixed = std::fs::read_to_string(&file).expect("read").replace(
        "return total_items // page_size",
        "return -(-total_items // page_size)",
    );
    std::fs::write(&file, fixed).expect("write");
    support::git_commit_all(source.path());
    let h = Harness::with_source(source).await;
    let breaking = FIX.replace(
        "-    return total_items // page_size\n+    return -(-total_items // page_size)",
        "-    return -(-total_items // page_size)\n+    return total_items // page_size",
    );
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "done"])),
        (
            "edit_file",
            json!({"path": "pagination.py", "patch": breaking}),
        ),
    ]));
    for _ in 0..3 {
        h.mock.push(MockResponse::tool_calls(&[(
            "request_completion",
            json!({"summary": "done"}),
        )]));
    }
    let (_, result) = h.run(&["--max-turns", "5"]).await;
    assert_eq!(result["recovery"]["rollbacks"], 1, "{result:#}");
    assert_eq!(result["recovery"]["repair_cycles"], 2, "{result:#}");
    assert!(h.event_types().iter().any(|t| t == "checkpoint.restored"));
    let patch = std::fs::read_to_string(h.artifacts.join("final.patch")).expect("patch");
    assert!(
        patch.trim().is_empty(),
        "the breaking change was rolled back: {patch}"
    );
    h.assert_guarantees();
}

#[tokio::test]
async fn ctrl_c_mid_command_exits_130_with_partial_work_and_no_containers() {
    let Some(h) = Harness::new().await else {
        return;
    };
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "in_progress"])),
        ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
        ("run_shell", json!({"command": "sleep 50"})),
    ]));
    let child = h.command(&[]).spawn().expect("spawn");
    let events = h.artifacts.join("events.jsonl");
    let started = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        if text.contains("\"name\":\"run_shell\"") && text.contains("tool.started") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pid = child.id().expect("pid") as i32;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid).expect("pid"),
        rustix::process::Signal::INT,
    )
    .expect("SIGINT");
    let cancelled_at = std::time::Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("exits promptly")
        .expect("output");
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(cancelled_at.elapsed() < Duration::from_secs(10));
    let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(result["outcome"], "cancelled");
    let patch = std::fs::read_to_string(h.artifacts.join("final.patch")).expect("patch");
    assert!(
        patch.contains("+    return -(-total_items // page_size)"),
        "partial work exported: {patch}"
    );
    let run_id = result["run_id"].as_str().expect("run id").to_string();
    let docker = minicoder::sandbox::connect().await.expect("docker");
    let left = support::containers_of_run(&docker, &run_id).await;
    assert!(left.is_empty(), "containers left: {left:?}");
    h.assert_guarantees();
}

#[tokio::test]
async fn events_mode_streams_jsonl_on_stdout() {
    let Some(h) = Harness::new().await else {
        return;
    };
    h.mock.push(MockResponse::tool_calls(&[(
        "update_plan",
        plan(["in_progress", "pending"]),
    )]));
    h.mock.push_all(fix_and_complete());
    let out = h.command(&["--events"]).output().await.expect("run");
    assert_eq!(out.status.code(), Some(0));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each stdout line is a JSON event"))
        .collect();
    assert_eq!(
        lines.first().and_then(|e| e["type"].as_str()),
        Some("run.started")
    );
    assert_eq!(
        lines.last().and_then(|e| e["type"].as_str()),
        Some("run.finished")
    );
    h.assert_guarantees();
}

#[tokio::test]
async fn a_huge_output_reaches_the_model_by_both_ends_and_its_middle_by_read_output() {
    let Some(h) = Harness::new().await else {
        return;
    };
    // 13 + 437,000 × 12 + 11 bytes: a marker, numbered rows, a marker.
    let command = "echo BEGIN-MARKER; python3 -c \"import sys; sys.stdout.write(''.join('row %07d\\n' % i for i in range(437000)))\"; echo END-MARKER";
    let row = |i: u64| 13 + 12 * i;
    h.mock.push(MockResponse::sse_tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        ("run_shell", json!({"command": command})),
    ]));
    // The run_shell call is the run's first tool call, and `call_2` of its reply.
    h.mock.push(MockResponse::tool_calls(&[(
        "read_output",
        json!({"id": "0001-call_2.stdout", "offset": row(200_000), "length": 24}),
    )]));
    h.mock.push_all(fix_and_complete());
    let (out, result) = h.run(&[]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(result["outcome"], "success", "{result:#}\n{stderr}");
    h.assert_guarantees();
    // Each phase of setting up is on stderr, the copy with its counts.
    for phase in [
        "preparing: checking the model",
        "preparing: copying ",
        "… 100 %",
        "preparing: checkpoint",
        "preparing: starting sandbox",
    ] {
        assert!(stderr.contains(phase), "{phase}: {stderr}");
    }
    // The setting up, split by phase: the phases run one after another.
    let report: Value =
        serde_json::from_slice(&std::fs::read(h.artifacts.join("report.json")).unwrap()).unwrap();
    let durations = &report["durations"];
    let phases: u64 = [
        "inputs_ms",
        "image_ms",
        "copy_ms",
        "checkpoint_ms",
        "sandbox_ms",
        "preflight_ms",
    ]
    .iter()
    .map(|p| {
        durations["prepare"][p]
            .as_u64()
            .unwrap_or_else(|| panic!("{p}: {durations}"))
    })
    .sum();
    assert!(
        phases <= durations["prepare_ms"].as_u64().unwrap(),
        "{durations}"
    );

    let requests = h.mock.requests();
    let shell_result = requests[1]
        .messages()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .find(|c| c.contains("--- stdout"))
        .expect("the run_shell result reached the model");
    assert!(shell_result.contains("BEGIN-MARKER\n"), "{shell_result}");
    assert!(shell_result.contains("END-MARKER\n"), "{shell_result}");
    assert!(shell_result.chars().count() <= 16_000);
    assert!(
        shell_result.contains(&format!(
            "--- stdout ({} bytes, output id 0001-call_2.stdout):",
            "5,244,024"
        )),
        "{shell_result}"
    );
    assert!(
        shell_result
            .contains("bytes omitted; read them with read_output id=0001-call_2.stdout offset="),
        "{shell_result}"
    );
    assert!(
        !shell_result.contains(&h.artifacts.display().to_string()),
        "no host path"
    );

    let read_result = h
        .tool_results()
        .into_iter()
        .find(|r| r.starts_with("0001-call_2.stdout: "))
        .expect("the read_output result reached the model");
    assert_eq!(
        read_result,
        format!(
            "0001-call_2.stdout: bytes {} to {} of 5,244,024 bytes:\nrow 0200000\nrow 0200001\n\
             [… {} bytes follow; read_output id=0001-call_2.stdout offset={} reads on …]\n",
            row(200_000),
            row(200_002),
            minicoder::tools::cap::group_thousands((5_244_024 - row(200_002)) as usize),
            row(200_002)
        )
    );
}

/// A source whose root `AGENTS.md` says `text`, ignored by Git or not.
async fn instructed(text: &str, ignored: bool) -> Option<Harness> {
    support::docker_or_skip().await?;
    let source = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
    std::fs::write(source.path().join("AGENTS.md"), text).expect("AGENTS.md");
    if ignored {
        let mut ignore = std::fs::read(source.path().join(".gitignore")).unwrap_or_default();
        ignore.extend_from_slice(b"\nAGENTS.md\n");
        std::fs::write(source.path().join(".gitignore"), ignore).expect(".gitignore");
    } else {
        support::git(source.path(), &["add", "AGENTS.md"]);
        support::git(source.path(), &["commit", "-q", "-m", "instructions"]);
    }
    Some(Harness::with_source(source).await)
}

#[tokio::test]
async fn the_first_request_goes_out_early_only_with_what_the_copy_holds() {
    // Tracked, the file is read from the source before the copy and the
    // first request goes out while the copy runs. Ignored, it is not
    // copied: nothing of it reaches the model, and the first request waits
    // for the copy.
    for (marker, ignored) in [("TRACKED-MARKER", false), ("IGNORED-MARKER", true)] {
        let Some(h) = instructed(&format!("Always say {marker}."), ignored).await else {
            return;
        };
        h.mock.push(MockResponse::sse_tool_calls(&[(
            "update_plan",
            plan(["in_progress", "pending"]),
        )]));
        h.mock.push_all(fix_and_complete());
        let (out, result) = h.run(&[]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(result["outcome"], "success", "{result:#}\n{stderr}");
        let requests = h.mock.requests();
        assert_eq!(requests.len(), 3, "one request a turn");
        let early = requests[0].received_ms < h.started_ms();
        assert_eq!(early, !ignored, "{marker}: sent early");
        assert_eq!(h.all_request_text().contains(marker), !ignored, "{marker}");
        h.assert_guarantees();
    }
}
