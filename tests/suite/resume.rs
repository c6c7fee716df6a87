//! `minicoder resume`: the real binary, the real Docker sandbox and a mock
//! model. A run killed with SIGKILL mid-command, or cancelled with Ctrl-C,
//! goes on from its last resume point and ends verified, with one event
//! chain across the interruption and a receipt over all of it; changed
//! checks are refused unless `--new-checks`; a finished run takes a
//! follow-up on top of its final workspace.

use crate::support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_openai::MockResponse;
use support::run_harness::API_KEY;

const FIX: &str = support::FIX_PAGINATION;

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "look around", "status": statuses[0]},
        {"id": "2", "content": "fix it", "status": statuses[1]},
    ]})
}

fn plan_and_shell(command: &str) -> MockResponse {
    MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        ("run_shell", json!({ "command": command })),
    ])
}

fn fix_and_complete() -> Vec<MockResponse> {
    vec![
        MockResponse::tool_calls(&[
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

struct Harness {
    mock: support::mock_openai::MockOpenAi,
    state: tempfile::TempDir,
    source: tempfile::TempDir,
}

impl Harness {
    async fn new() -> Option<Self> {
        support::docker_or_skip().await?;
        let source = tempfile::tempdir().expect("tempdir");
        minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
        Some(Self {
            mock: support::mock_openai::MockOpenAi::start().await,
            state: support::state_dir(),
            source,
        })
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(support::bin());
        cmd.args(args)
            .current_dir(self.source.path())
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

    fn start_run(&self) -> tokio::process::Child {
        let source = self.source.path().display().to_string();
        self.command(&[
            "run",
            &source,
            "Fix the pagination bug",
            "--non-interactive",
            "--model",
            "openai",
        ])
        .spawn()
        .expect("spawn")
    }

    /// Runs to its end; the exit code, the JSON object on stdout and stderr.
    async fn finish(&self, args: &[&str]) -> (i32, Value, String) {
        let out = tokio::time::timeout(Duration::from_secs(240), self.command(args).output())
            .await
            .expect("it ends")
            .expect("it runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        let value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        (out.status.code().unwrap_or(-1), value, stderr)
    }

    fn runs_dir(&self) -> PathBuf {
        minicoder::state::StateDir::new(self.state.path()).runs_dir()
    }

    /// The one run's artifact directory, once its log shows `marker`.
    async fn wait_for(&self, marker: &str) -> PathBuf {
        for _ in 0..1200 {
            if let Ok(entries) = std::fs::read_dir(self.runs_dir()) {
                for e in entries.flatten() {
                    let text =
                        std::fs::read_to_string(e.path().join("events.jsonl")).unwrap_or_default();
                    if text.contains(marker) {
                        return e.path();
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no run logged {marker}");
    }

    fn model_texts_after(&self, n: usize) -> String {
        self.mock.requests()[n..]
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect()
    }
}

fn run_id(dir: &Path) -> String {
    dir.file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned()
}

fn events(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("events.jsonl"))
        .expect("events")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect()
}

async fn containers_of(run_id: &str) -> usize {
    let docker = support::docker_or_skip().await.expect("docker");
    support::containers_of_run(&docker, run_id).await.len()
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

/// `show --verify` accepts the run: chain, receipt, patch hash, digest.
async fn assert_verifies(h: &Harness, id: &str) {
    let (code, _, stderr) = h.finish(&["show", id, "--verify"]).await;
    assert_eq!(code, 0, "show --verify refused the resumed run: {stderr}");
}

#[tokio::test]
async fn a_run_killed_mid_command_resumes_to_one_verified_patch() {
    let Some(h) = Harness::new().await else {
        return;
    };
    h.mock.push(plan_and_shell("echo started; sleep 300"));
    let mut child = h.start_run();
    let dir = h.wait_for("\"tool.started\"").await;
    let id = run_id(&dir);
    tokio::time::sleep(Duration::from_millis(800)).await;
    child.start_kill().expect("kill -9");
    child.wait().await.expect("reap");
    assert!(
        !dir.join("report.json").exists(),
        "a killed run has no report"
    );

    let (code, _, stderr) = h.finish(&["gc"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(containers_of(&id).await, 0, "gc left a container of {id}");
    let (_, runs, _) = h.finish(&["runs", "--json"]).await;
    assert_eq!(runs[0]["outcome"], "interrupted", "{runs}");

    let before = h.mock.request_count();
    h.mock.push_all(fix_and_complete());
    let (code, result, stderr) = h.finish(&["resume", &id, "--non-interactive"]).await;
    assert_eq!(code, 0, "resume failed: {result}\n{stderr}");
    assert_eq!(result["outcome"], "success", "{result}");
    assert_eq!(result["run_id"], id.as_str());
    assert!(stderr.contains("resuming"), "{stderr}");
    // The model heard what was in flight, and that it was rolled back.
    let asked = h.model_texts_after(before);
    assert!(asked.contains("interrupted"), "{asked}");
    assert!(asked.contains("sleep 300"), "{asked}");

    let log = events(&dir);
    assert_eq!(count(&log, "run.resumed"), 1);
    assert_eq!(count(&log, "run.started"), 2);
    assert_eq!(count(&log, "run.finished"), 1);
    minicoder::trace::verify_chain(dir.join("events.jsonl")).expect("one chain");
    assert_verifies(&h, &id).await;
    let patch = std::fs::read_to_string(dir.join("final.patch")).expect("patch");
    assert!(
        patch.contains("+    return -(-total_items // page_size)"),
        "{patch}"
    );
    support::run_harness::git_apply(h.source.path(), &dir.join("final.patch"), true)
        .expect("git apply --check accepts the patch");
    assert_eq!(containers_of(&id).await, 0);
    assert!(
        !minicoder::state::StateDir::new(h.state.path())
            .workspace_dir(&id)
            .exists(),
        "the workspace is gone"
    );

    // A finished success goes on only with a follow-up, on its final workspace.
    let (code, _, stderr) = h.finish(&["resume", &id, "--non-interactive"]).await;
    assert_ne!(code, 0);
    assert!(stderr.contains("FOLLOW-UP"), "{stderr}");
    let before = h.mock.request_count();
    h.mock.push_all([
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            (
                "edit_file",
                json!({"path": "NOTES.md", "patch": "--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1 @@\n+page_count rounds up\n"}),
            ),
        ]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            ("request_completion", json!({"summary": "noted"})),
        ]),
    ]);
    let (code, result, stderr) = h
        .finish(&["resume", &id, "write a note", "--non-interactive"])
        .await;
    assert_eq!(code, 0, "{result}\n{stderr}");
    assert_eq!(result["outcome"], "success", "{result}");
    assert!(h.model_texts_after(before).contains("write a note"));
    let patch = std::fs::read_to_string(dir.join("final.patch")).expect("patch");
    assert!(
        patch.contains("+page_count rounds up") && patch.contains("-(-total_items"),
        "the follow-up's patch holds both changes: {patch}"
    );
    assert_verifies(&h, &id).await;
}

#[tokio::test]
async fn a_cancelled_run_resumes_and_changed_checks_are_refused() {
    let Some(h) = Harness::new().await else {
        return;
    };
    h.mock.push(plan_and_shell("sleep 300"));
    let child = h.start_run();
    let dir = h.wait_for("\"tool.started\"").await;
    let id = run_id(&dir);
    tokio::time::sleep(Duration::from_millis(800)).await;
    let pid = child.id().expect("pid");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(pid as i32).expect("pid"),
        rustix::process::Signal::INT,
    )
    .expect("Ctrl-C");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("it stops")
        .expect("output");
    let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(result["outcome"], "cancelled", "{result}");

    // The repository's checks change: the run's frozen ones no longer hold.
    std::fs::write(
        h.source.path().join(".minicoder.json"),
        r#"{"verification": [{"name": "lint", "command": "true"}]}"#,
    )
    .expect("write");
    let (code, _, stderr) = h.finish(&["resume", &id, "--non-interactive"]).await;
    assert_ne!(code, 0);
    assert!(
        stderr.contains("checks changed") && stderr.contains("--new-checks"),
        "{stderr}"
    );
    assert_eq!(
        count(&events(&dir), "run.resumed"),
        0,
        "nothing was resumed"
    );

    h.mock.push_all(fix_and_complete());
    let (code, result, stderr) = h
        .finish(&["resume", &id, "--non-interactive", "--new-checks"])
        .await;
    assert_eq!(code, 0, "{result}\n{stderr}");
    assert_eq!(result["outcome"], "success", "{result}");
    let log = events(&dir);
    let resumed = log
        .iter()
        .find(|e| e["type"] == "run.resumed")
        .expect("run.resumed");
    assert_eq!(resumed["new_checks"], true);
    let started: Vec<&Value> = log.iter().filter(|e| e["type"] == "run.started").collect();
    assert_eq!(started.last().expect("started")["checks"], json!(["lint"]));
    minicoder::trace::verify_chain(dir.join("events.jsonl")).expect("one chain");
    assert_verifies(&h, &id).await;
}

/// What the bootstrap installed outside the checkpoints (a venv) comes back
/// on resume: a run whose checks need it is killed mid-command and resumed
/// to a verified success, its bootstrap run once more and its baseline kept.
#[tokio::test]
async fn a_killed_run_with_a_bootstrap_gets_its_environment_back_on_resume() {
    let Some(h) = Harness::new().await else {
        return;
    };
    support::write(
        &h.source.path().join(".minicoder.json"),
        br#"{"bootstrap": ["python3 -m venv --system-site-packages --without-pip .venv"],
            "verification": [{"name": "tests", "command": ".venv/bin/python -m pytest -q -p no:cacheprovider"}]}"#,
    );
    support::git_commit_all(h.source.path());
    h.mock.push(plan_and_shell(
        "test -x .venv/bin/python && echo venv; sleep 300",
    ));
    let source = h.source.path().display().to_string();
    let mut child = h
        .command(&[
            "run",
            &source,
            "Fix the pagination bug",
            "--non-interactive",
            "--model",
            "openai",
            "--trust-project",
        ])
        .spawn()
        .expect("spawn");
    let dir = h.wait_for("\"tool.started\"").await;
    let id = run_id(&dir);
    tokio::time::sleep(Duration::from_millis(800)).await;
    child.start_kill().expect("kill -9");
    child.wait().await.expect("reap");

    h.mock.push_all(fix_and_complete());
    let (code, result, stderr) = h
        .finish(&["resume", &id, "--non-interactive", "--trust-project"])
        .await;
    assert_eq!(code, 0, "resume failed: {result}\n{stderr}");
    assert_eq!(result["outcome"], "success", "{result}\n{stderr}");
    let log = events(&dir);
    assert_eq!(count(&log, "bootstrap.started"), 2, "once per process");
    let rebaselined = log
        .iter()
        .filter(|e| e["type"] == "checkpoint.created" && e["reason"] == "baseline after bootstrap")
        .count();
    assert_eq!(rebaselined, 1, "the resumed run keeps its baseline");
    let patch = std::fs::read_to_string(dir.join("final.patch")).expect("patch");
    assert!(!patch.contains(".venv"), "{patch}");
    assert!(patch.contains("-(-total_items // page_size)"), "{patch}");
    assert_verifies(&h, &id).await;
}

/// Prices for the mock's model: $100 a million input tokens, $10 cached,
/// $1,000 output. Each mock reply (100 in, 60 of them cached, 20 out) costs
/// 40 × 100 + 60 × 10 + 20 × 1,000 millionths: $0.0246.
const PRICES: &str = r#"
[prices."openai:mock-model"]
input = 100
cached_input = 10.0
output = 1000
"#;

#[tokio::test]
async fn a_run_stopped_by_its_cost_budget_ends_as_budget_and_resumes_with_a_larger_one() {
    let Some(h) = Harness::new().await else {
        return;
    };
    let config = tempfile::tempdir().expect("tempdir");
    std::fs::write(config.path().join("config.toml"), PRICES).expect("config");
    let config_dir = config.path().display().to_string();
    let priced = |r: MockResponse| r.with_usage(100, 60, 20);
    h.mock.push_all([
        priced(plan_and_shell("true")),
        priced(MockResponse::tool_calls(&[(
            "read_file",
            json!({"path": "pagination.py"}),
        )])),
        priced(MockResponse::tool_calls(&[(
            "read_file",
            json!({"path": "README.md"}),
        )])),
    ]);
    let source = h.source.path().display().to_string();
    let run = |args: &[&str]| {
        let mut cmd = h.command(args);
        cmd.env("MINICODER_CONFIG_DIR", &config_dir);
        cmd
    };
    let out = run(&[
        "run",
        &source,
        "Fix the pagination bug",
        "--non-interactive",
        "--model",
        "openai",
        "--max-cost",
        "0.05",
    ])
    .output()
    .await
    .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(out.status.code(), Some(1), "{result}\n{stderr}");
    assert_eq!(result["outcome"], "budget", "{result}");
    let reason = result["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("$0.07 of $0.05") && reason.contains("--max-cost"),
        "the figures and the way on: {reason}"
    );
    assert_eq!(result["tokens"]["input"], 300, "{result}");
    assert_eq!(result["tokens"]["cached"], 180, "{result}");
    assert_eq!(result["tokens"]["cost_micros"], 73_800, "{result}");
    assert!(
        stderr.contains("tokens: 300 in (180 cached), 60 out, $0.07"),
        "{stderr}"
    );
    assert!(stderr.contains("--max-cost USD"), "next step: {stderr}");
    // The model was warned at 80 % (after the second reply, $0.0492).
    assert_eq!(h.mock.request_count(), 3, "no request past the budget");
    let bodies: Vec<String> = h
        .mock
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert!(!bodies[1].contains("Budget warning"), "not at 49 %");
    assert!(bodies[2].contains("Budget warning"), "at 98 %");
    let id = result["run_id"].as_str().expect("id").to_string();
    let dir = h.runs_dir().join(&id);
    let log = events(&dir);
    let costs: Vec<u64> = log
        .iter()
        .filter(|e| e["type"] == "model.response")
        .map(|e| e["cost_micros"].as_u64().expect("priced"))
        .collect();
    assert_eq!(costs, [24_600; 3]);
    assert_eq!(containers_of(&id).await, 0);

    // `show` lists each turn; `runs` says budget.
    let out = run(&["show", &id]).output().await.expect("show");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("tokens by turn:"), "{shown}");
    assert!(
        shown.contains("openai:mock-model  100 in (60 cached), 20 out, $0.02"),
        "{shown}"
    );
    let (_, runs, _) = h.finish(&["runs", "--json"]).await;
    assert_eq!(runs[0]["outcome"], "budget", "{runs}");

    // A lower budget is refused; a larger one goes on to a verified fix.
    let out = run(&["resume", &id, "--non-interactive", "--max-cost", "0.01"])
        .output()
        .await
        .expect("resume");
    assert_ne!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("never lowers it"));
    h.mock.push_all(fix_and_complete().into_iter().map(priced));
    let out = run(&["resume", &id, "--non-interactive", "--max-cost", "1"])
        .output()
        .await
        .expect("resume");
    let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{result}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(result["outcome"], "success", "{result}");
    assert_eq!(
        result["tokens"]["cost_micros"],
        5 * 24_600,
        "the cost goes on from where it stopped: {result}"
    );
    assert_verifies(&h, &id).await;
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["limits"]["max_cost_micros"], 1_000_000);
}
