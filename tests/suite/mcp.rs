//! `minicoder mcp` with the official Python MCP SDK as its client, the real
//! binary, the real sandbox: every tool over stdio, a cancelled command,
//! and over Streamable HTTP the bearer and Origin gates and a whole `run`
//! with a scripted model.

use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use serde_json::{Value, json};
use support::mcp_client;
use support::repo_run::{API_KEY, Repo};

/// Docker with the sandbox image, and a Python with the MCP SDK (`None`:
/// the test is skipped, visibly).
async fn prerequisites() -> Option<(bollard::Docker, std::path::PathBuf)> {
    let docker = support::docker_or_skip().await?;
    let python = mcp_client::python()?;
    Some((docker, python))
}

/// The server's environment, for a client that starts it over stdio.
fn server_env(repo: &Repo) -> Value {
    let mut env = json!({
        "MINICODER_STATE_DIR": repo.state.path(),
        "OPENAI_BASE_URL": repo.mock.base_url(),
        "OPENAI_API_KEY": API_KEY,
        "OPENAI_MODEL": "mock-model",
        "PATH": std::env::var("PATH").unwrap_or_default(),
        "HOME": std::env::var("HOME").unwrap_or_default(),
    });
    for name in ["DOCKER_HOST", "MINICODER_SANDBOX_IMAGE"] {
        if let Ok(value) = std::env::var(name) {
            env[name] = json!(value);
        }
    }
    env
}

fn stdio_config(repo: &Repo, scenario: &str) -> Value {
    json!({
        "transport": "stdio",
        "bin": support::bin(),
        "env": server_env(repo),
        "scenario": scenario,
        "repo": repo.path(),
        "fix": support::FIX_PAGINATION,
    })
}

/// `minicoder show RUN --verify` passes: the event chain, the receipt and
/// the patch hash hold.
fn chain_holds(repo: &Repo, run_id: &str) {
    let out = repo
        .command(&["show", run_id, "--verify"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "show --verify failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn events_of(repo: &Repo, run_id: &str) -> Vec<Value> {
    let path = repo
        .state
        .path()
        .join(".agent/runs")
        .join(run_id)
        .join("events.jsonl");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// What the client's `workspace` scenario must have seen, whatever the
/// transport: every tool listed with its schemas and annotations, each call
/// answered (a path out refused as an error), a verified end, the patch
/// with its receipt, the workspace closed. Returns the run's id.
fn check_workspace_scenario(out: &Value) -> String {
    assert_eq!(out["server"], "minicoder");
    let tools = out["tools"].as_object().expect("tools");
    for name in [
        "open_workspace",
        "list_tree",
        "read_file",
        "ripgrep",
        "symbols",
        "edit_file",
        "write_file",
        "run_shell",
        "git",
        "verify",
        "export",
        "close",
        "run",
    ] {
        let tool = &tools[name];
        assert_eq!(tool["output_schema"], true, "{name} has no output schema");
        assert!(tool["annotations"].is_object(), "{name} has no annotations");
    }
    assert_eq!(tools["read_file"]["annotations"]["read_only_hint"], true);
    assert_eq!(tools["run_shell"]["annotations"]["read_only_hint"], false);
    assert_eq!(tools["run_shell"]["annotations"]["destructive_hint"], true);
    assert_eq!(tools["read_file"]["required"], json!(["workspace", "path"]));

    let open = &out["open"]["structured"];
    let run_id = open["run_id"].as_str().expect("run id").to_string();
    assert!(!run_id.is_empty(), "{open}");
    let calls = out["calls"].as_array().unwrap();
    let call = |tool: &str, nth: usize| {
        calls
            .iter()
            .filter(|c| c["tool"] == tool)
            .nth(nth)
            .unwrap_or_else(|| panic!("no call {tool}"))
            .clone()
    };
    for c in calls.iter().take(8) {
        assert_eq!(c["is_error"], false, "{c}");
    }
    let output = |c: Value| {
        c["structured"]["output"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert!(output(call("list_tree", 0)).contains("pagination.py"));
    assert!(output(call("read_file", 0)).contains("def page_count"));
    assert!(output(call("ripgrep", 0)).contains("pagination.py:4:"));
    assert!(output(call("symbols", 0)).contains("page_slice"));
    // The command ran in the sandbox, as its unprivileged user.
    let shell = output(call("run_shell", 0));
    assert!(shell.contains("in-sandbox"), "{shell}");
    assert!(shell.contains("10001"), "{shell}");
    // A path out of the workspace is refused, and marked as an error.
    let outside = call("read_file", 1);
    assert_eq!(outside["is_error"], true, "{outside}");
    assert!(
        outside["text"]
            .as_str()
            .unwrap()
            .contains("outside the workspace")
    );

    let verify = &out["verify"]["structured"];
    assert_eq!(verify["verified"], true, "{verify}");
    assert_eq!(verify["ended"], true, "{verify}");
    assert!(
        verify["fingerprint"]
            .as_str()
            .is_some_and(|f| f.len() == 64),
        "{verify}"
    );
    let checks = verify["checks"].as_array().unwrap();
    assert!(
        !checks.is_empty() && checks.iter().all(|c| c["passed"] == true),
        "{verify}"
    );

    let export = &out["export"]["structured"];
    assert_eq!(export["outcome"], "success", "{export}");
    let patch = export["patch"].as_str().unwrap();
    assert!(
        patch.contains("+    return -(-total_items // page_size)"),
        "{patch}"
    );
    assert!(patch.contains("+made over MCP"), "{patch}");
    assert!(export["receipt"].is_object(), "{export}");
    assert_eq!(out["close"]["structured"]["outcome"], "success");
    assert_eq!(out["after_close"]["is_error"], true);

    run_id
}

#[tokio::test]
async fn the_python_sdk_uses_every_workspace_tool_over_stdio_and_the_repository_is_untouched() {
    let Some((docker, python)) = prerequisites().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let out = mcp_client::run(&python, &stdio_config(&repo, "workspace")).await;
    let run_id = check_workspace_scenario(&out);

    // The repository is as it was; the run's records hold together, and
    // every call is in them.
    assert_eq!(support::git_status(repo.path()), "");
    chain_holds(&repo, &run_id);
    let finished = events_of(&repo, &run_id)
        .into_iter()
        .filter(|e| e["type"] == "tool.finished")
        .count();
    assert!(finished >= 9, "{finished} tool.finished events");
    assert!(
        support::containers_of_run(&docker, &run_id)
            .await
            .is_empty()
    );

    // The verified patch applies like any run's.
    let applied = repo.command(&["apply", &run_id]).output().unwrap();
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    assert!(std::fs::read_to_string(repo.path().join("NOTES.txt")).is_ok());
}

#[tokio::test]
async fn a_cancelled_command_stops_and_leaves_no_process_or_container() {
    let Some((docker, python)) = prerequisites().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let out = mcp_client::run(&python, &stdio_config(&repo, "cancel")).await;
    let run_id = out["open"]["structured"]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!run_id.is_empty(), "{out}");
    // The client gave up on the call and said so; the server closed the
    // workspace.
    assert!(out["shell_error"].as_str().is_some(), "{out}");
    assert_eq!(out["after"]["is_error"], true, "{out}");
    assert!(
        support::containers_of_run(&docker, &run_id)
            .await
            .is_empty(),
        "containers of the cancelled run remain"
    );
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repo.state
                .path()
                .join(".agent/runs")
                .join(&run_id)
                .join("report.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(report["outcome"], "cancelled", "{report}");
    assert_eq!(support::git_status(repo.path()), "");
    // No `sleep 347` lives on anywhere (a duration no other test runs:
    // their commands are host processes too, seen by pgrep while they run).
    let ps = std::process::Command::new("pgrep")
        .args(["-f", "sleep 347"])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

#[tokio::test]
async fn run_completes_a_scripted_fix_over_stdio_with_progress() {
    let Some((docker, python)) = prerequisites().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    repo.fix_only();
    let out = mcp_client::run(&python, &stdio_config(&repo, "run")).await;
    let result = &out["run"]["structured"];
    assert_eq!(out["run"]["is_error"], false, "{out}");
    assert_eq!(result["outcome"], "success", "{result}");
    assert_eq!(result["verification"]["passed"], true, "{result}");
    assert!(out["progress"].as_array().unwrap().len() >= 3, "{out}");
    let run_id = result["run_id"].as_str().unwrap();
    assert!(support::containers_of_run(&docker, run_id).await.is_empty());
    assert_eq!(support::git_status(repo.path()), "");
}

/// A `minicoder mcp --http` server: its URL from stderr, its token file.
struct HttpServer {
    child: std::process::Child,
    url: String,
    token: String,
    token_file: std::path::PathBuf,
}

impl HttpServer {
    fn start(repo: &Repo) -> Self {
        let mut child = repo
            .command(&["mcp", "--http"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the server starts");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        // Keep reading stderr so the server never blocks on it.
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no URL in {line:?}"))
            .trim_end_matches(';')
            .to_string();
        let token_file = repo.state.path().join("mcp-http.json");
        let record: Value =
            serde_json::from_str(&std::fs::read_to_string(&token_file).unwrap()).unwrap();
        Self {
            child,
            url,
            token: record["token"].as_str().unwrap().to_string(),
            token_file,
        }
    }
}

async fn post(url: &str, headers: &[(&str, &str)]) -> u16 {
    let client = reqwest::Client::new();
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn over_http_a_wrong_bearer_and_a_foreign_origin_are_refused_every_tool_works_and_run_completes_a_fix()
 {
    let Some((docker, python)) = prerequisites().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    repo.fix_only();
    let mut server = HttpServer::start(&repo);
    assert!(
        server.url.starts_with("http://127.0.0.1:"),
        "{}",
        server.url
    );
    let mode = std::fs::metadata(&server.token_file)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(server.token.len(), 64);

    let good = format!("Bearer {}", server.token);
    let wrong = format!("Bearer {}", "0".repeat(64));
    assert_eq!(post(&server.url, &[]).await, 401);
    assert_eq!(post(&server.url, &[("authorization", &wrong)]).await, 401);
    assert_eq!(
        post(
            &server.url,
            &[("authorization", &good), ("origin", "http://evil.example")]
        )
        .await,
        403
    );
    let elsewhere = server.url.replace("/mcp", "/other");
    assert_eq!(post(&elsewhere, &[("authorization", &good)]).await, 404);

    // Every workspace tool, over HTTP this time (a repository of its own).
    let other = Repo::new(&[]).await;
    let tools = mcp_client::run(
        &python,
        &json!({
            "transport": "http",
            "url": server.url,
            "token": server.token,
            "scenario": "workspace",
            "repo": other.path(),
            "fix": support::FIX_PAGINATION,
        }),
    )
    .await;
    let other_run = check_workspace_scenario(&tools);
    assert_eq!(support::git_status(other.path()), "");
    assert!(
        support::containers_of_run(&docker, &other_run)
            .await
            .is_empty()
    );

    let out = mcp_client::run(
        &python,
        &json!({
            "transport": "http",
            "url": server.url,
            "token": server.token,
            "scenario": "run",
            "repo": repo.path(),
        }),
    )
    .await;
    let result = &out["run"]["structured"];
    assert_eq!(out["run"]["is_error"], false, "{out}");
    assert_eq!(result["outcome"], "success", "{result}");
    assert_eq!(result["verification"]["passed"], true, "{result}");
    let progress = out["progress"].as_array().unwrap();
    assert!(progress.len() >= 3, "{progress:?}");
    let run_id = result["run_id"].as_str().unwrap();
    assert!(support::containers_of_run(&docker, run_id).await.is_empty());
    assert_eq!(support::git_status(repo.path()), "");

    // SIGTERM: the server stops and takes its token file with it.
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&server.child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || server.child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!server.token_file.exists());
}

/// A private configuration directory with `mcp.json` naming the notes
/// server (its calls logged to `notes.log` there), `allow` as given, and
/// `hooks.json` with `hooks`.
fn person_config(python: &std::path::Path, allow: &[&str], hooks: Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("config dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let server = support::mcp_client::script().with_file_name("notes_server.py");
    let mcp = json!({"mcpServers": {"notes": {
        "command": python,
        "args": [server],
        "env": {"NOTES_LOG": dir.path().join("notes.log")},
        "allow": allow,
    }}});
    let hooks = hooks
        .to_string()
        .replace("$DIR", &dir.path().display().to_string());
    for (name, text) in [("mcp.json", mcp.to_string()), ("hooks.json", hooks)] {
        let file = dir.path().join(name);
        std::fs::write(&file, text).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    dir
}

/// The model plans, asks the notes server about pagination, then fixes the bug.
fn script_with_lookup(repo: &Repo) {
    repo.mock
        .push(support::mock_openai::MockResponse::tool_calls(&[
            (
                "update_plan",
                support::repo_run::plan(["in_progress", "pending"]),
            ),
            ("mcp__notes__lookup", json!({"topic": "pagination"})),
        ]));
    repo.fix();
}

/// What the model was told of the lookup.
fn lookup_result(repo: &Repo) -> String {
    repo.mock
        .requests()
        .iter()
        .flat_map(|r| r.messages())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .find(|c| c.contains("note on") || c.contains("MCP server"))
        .unwrap_or_default()
}

const ASKED: &str = r#"#!/bin/sh
cat > "$(dirname "$0")/asked.json"
printf '%s' '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "permissionDecision": "allow"}}'
"#;

#[tokio::test]
async fn a_model_calls_an_mcp_servers_tool_once_the_person_allows_it() {
    let Some((_docker, python)) = prerequisites().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let config = person_config(
        &python,
        &[],
        json!({"hooks": {"PermissionRequest": [{"matcher": "mcp__.*",
            "hooks": [{"type": "command", "command": "sh $DIR/asked.sh"}]}]}}),
    );
    std::fs::write(config.path().join("asked.sh"), ASKED).unwrap();
    script_with_lookup(&repo);
    let ran = repo
        .run_with("lookup", &[], &[("MINICODER_CONFIG_DIR", config.path())])
        .await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());

    // The model was offered the tool, the person was asked, and said yes.
    let first = &repo.mock.requests()[0];
    assert!(
        first.tool_names().iter().any(|t| t == "mcp__notes__lookup"),
        "{:?}",
        first.tool_names()
    );
    let asked: Value = serde_json::from_str(
        &std::fs::read_to_string(config.path().join("asked.json")).expect("the person was asked"),
    )
    .unwrap();
    assert_eq!(asked["tool_name"], "mcp__notes__lookup");
    assert_eq!(asked["tool_input"], json!({"topic": "pagination"}));
    let types: Vec<String> = ran
        .events()
        .iter()
        .map(|e| format!("{} {} {}", e["type"], e["name"], e["call_id"]))
        .collect();
    let requested = ran
        .event("approval.requested")
        .unwrap_or_else(|| panic!("approval asked: {types:?}"));
    assert_eq!(requested["path"], "mcp__notes__lookup");
    assert_eq!(ran.event("approval.resolved").unwrap()["approved"], true);

    // The answer reached the model — without the provider's key, which the
    // server's environment never held — and the call is in the event log.
    let result = lookup_result(&repo);
    assert!(
        result.contains("note on pagination: page counts round up"),
        "{result}"
    );
    assert!(result.contains("the key here is absent"), "{result}");
    let finished = ran
        .events()
        .into_iter()
        .find(|e| e["type"] == "tool.finished" && e["name"] == "mcp__notes__lookup")
        .expect("the call is in the event log");
    assert_eq!(finished["ok"], true, "{finished}");
    let log = std::fs::read_to_string(config.path().join("notes.log")).unwrap();
    assert_eq!(log, "pagination\n");
    assert!(!ran.stderr().contains(API_KEY));
    // The server stopped with the run.
    let ps = std::process::Command::new("pgrep")
        .args(["-f", &config.path().display().to_string()])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

#[tokio::test]
async fn with_nobody_to_ask_only_an_allow_listed_mcp_tool_runs() {
    let Some((_docker, python)) = prerequisites().await else {
        return;
    };
    // Not allow-listed, headless, no hook to ask: refused, never called.
    let repo = Repo::new(&[]).await;
    let config = person_config(&python, &[], json!({"hooks": {}}));
    script_with_lookup(&repo);
    let ran = repo
        .run_with("refused", &[], &[("MINICODER_CONFIG_DIR", config.path())])
        .await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let result = lookup_result(&repo);
    assert!(
        result.contains("Refused") && result.contains("allow-listed"),
        "{result}"
    );
    assert!(
        !config.path().join("notes.log").exists(),
        "the server was called"
    );
    assert!(ran.event("approval.requested").is_none());

    // Allow-listed: it runs without asking.
    let repo = Repo::new(&[]).await;
    let config = person_config(&python, &["lookup"], json!({"hooks": {}}));
    script_with_lookup(&repo);
    let ran = repo
        .run_with("allowed", &[], &[("MINICODER_CONFIG_DIR", config.path())])
        .await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    assert!(lookup_result(&repo).contains("note on pagination"));
    assert!(ran.event("approval.requested").is_none());
    assert_eq!(
        std::fs::read_to_string(config.path().join("notes.log")).unwrap(),
        "pagination\n"
    );
}

#[test]
fn sigterm_stops_the_stdio_server_while_its_input_is_still_open() {
    let state = support::state_dir();
    let mut child = std::process::Command::new(support::bin())
        .arg("mcp")
        .env("MINICODER_STATE_DIR", state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server starts");
    std::thread::sleep(std::time::Duration::from_millis(500));
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // (stdin is still open: the test holds it.)
    let _stdin = child.stdin.take();
    if status.is_none() {
        let _ = child.kill();
    }
    assert!(status.is_some(), "the server did not stop on SIGTERM");
}
