//! What one command costs through the agent's tool path, beside Docker's
//! own ways to run one, in the same run on the same machine.
//!
//! For the fixture (a handful of files) and a 50,000-file repository of
//! real source text: one run of the real binary with a scripted model that
//! answers at once asks for N × `run_shell "true"` and N × `read_file`
//! (in alternating turns of ten calls); the per-command overhead is the time of the
//! shell turns minus that of the read turns, over N — what the sandbox, the
//! workspace limits, the change report and the events add to a command
//! that writes nothing. Beside it: `docker run --rm IMAGE true` and
//! `docker exec` into a running container (CLI), medians.
//!
//! Run: `cargo bench --bench tool_path` (`TOOL_PATH_SIZES=0` for the
//! fixture only; `TOOL_PATH_N=60` for more commands).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use support::mock_openai::{MockOpenAi, MockResponse};
use support::source_tree::{build_repo, git, registry_sources};

/// Calls per model turn.
const PER_TURN: usize = 10;

fn ts_ms(event: &Value) -> Option<f64> {
    chrono::DateTime::parse_from_rfc3339(event["ts"].as_str()?)
        .ok()
        .map(|t| t.timestamp_micros() as f64 / 1000.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One run: per-command time of the shell turns and of the read turns (ms),
/// and the medians of the tools' own `duration_ms`.
struct Figures {
    shell_ms: f64,
    read_ms: f64,
    shell_tool_ms: f64,
    read_tool_ms: f64,
}

async fn one_run(repo: &Path, state: &Path, n: usize) -> Figures {
    let mock = MockOpenAi::start().await;
    let turns = n.div_ceil(PER_TURN);
    mock.push(MockResponse::tool_calls(&[(
        "update_plan",
        json!({"items": [{"id": "1", "content": "measure", "status": "in_progress"}]}),
    )]));
    // Shell and read turns alternate, so that whatever else the machine
    // does (the baseline's copy in the background) weighs on both alike.
    for _ in 0..turns {
        for (tool, args) in [
            ("run_shell", json!({"command": "true"})),
            ("read_file", json!({"path": "README.md"})),
        ] {
            let calls: Vec<(&str, Value)> = (0..PER_TURN).map(|_| (tool, args.clone())).collect();
            mock.push(MockResponse::tool_calls(&calls));
        }
    }
    mock.push(MockResponse::tool_calls(&[
        (
            "update_plan",
            json!({"items": [{"id": "1", "content": "measure", "status": "done"}]}),
        ),
        ("request_completion", json!({"summary": "measured"})),
    ]));
    let artifacts = state.join(format!("artifacts-{}", repo.display().to_string().len()));
    let _ = std::fs::remove_dir_all(&artifacts);
    let out =
        support::source_tree::scripted_run(repo, "Measure the tool path", state, &artifacts, &mock)
            .args(["--max-turns", "200"])
            .output()
            .await
            .expect("run minicoder");
    let events: Vec<Value> = std::fs::read_to_string(artifacts.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    assert!(
        out.status.success(),
        "the run failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    // Each tool turn: from its model.response to the next model.request.
    let mut spans: Vec<(String, f64)> = Vec::new();
    let mut open: Option<(String, f64)> = None;
    for e in &events {
        match e["type"].as_str() {
            Some("model.response") => {
                let first = e["tool_calls"][0]["name"].as_str().unwrap_or_default();
                open = ts_ms(e).map(|t| (first.to_string(), t));
            }
            Some("model.request") => {
                if let (Some((tool, t0)), Some(t1)) = (open.take(), ts_ms(e)) {
                    spans.push((tool, t1 - t0));
                }
            }
            _ => {}
        }
    }
    let per_call = |tool: &str| {
        let turns: Vec<f64> = spans
            .iter()
            .filter(|(t, _)| t == tool)
            .map(|(_, ms)| ms / PER_TURN as f64)
            .collect();
        assert!(!turns.is_empty(), "no {tool} turn was timed");
        median(turns)
    };
    let tool_ms = |tool: &str| {
        median(
            events
                .iter()
                .filter(|e| e["type"] == "tool.finished" && e["name"] == tool)
                .filter_map(|e| e["duration_ms"].as_f64())
                .collect(),
        )
    };
    if std::env::var_os("TOOL_PATH_VERBOSE").is_some() {
        let mut d: Vec<f64> = events
            .iter()
            .filter(|e| e["type"] == "tool.finished" && e["name"] == "run_shell")
            .filter_map(|e| e["duration_ms"].as_f64())
            .collect();
        d.sort_by(f64::total_cmp);
        println!("run_shell durations (ms): {d:?}; turns: {spans:?}");
    }
    Figures {
        shell_ms: per_call("run_shell"),
        read_ms: per_call("read_file"),
        shell_tool_ms: tool_ms("run_shell"),
        read_tool_ms: tool_ms("read_file"),
    }
}

fn docker_baselines(image: &str) -> (f64, f64) {
    let time = |args: &[&str]| {
        let t = Instant::now();
        let ok = Command::new("docker")
            .args(args)
            .stdout(std::process::Stdio::null())
            .status()
            .expect("docker")
            .success();
        assert!(ok, "docker {args:?}");
        t.elapsed().as_secs_f64() * 1000.0
    };
    let _ = time(&["run", "--rm", image, "true"]);
    let run: Vec<f64> = (0..5)
        .map(|_| time(&["run", "--rm", image, "true"]))
        .collect();
    let name = format!("minicoder-bench-exec-{}", std::process::id());
    let ok = Command::new("docker")
        .args(["run", "-d", "--rm", "--name", &name, image, "sleep", "600"])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("docker")
        .success();
    assert!(ok);
    let _ = time(&["exec", &name, "true"]);
    let exec: Vec<f64> = (0..10).map(|_| time(&["exec", &name, "true"])).collect();
    let _ = Command::new("docker")
        .args(["rm", "-f", &name])
        .stdout(std::process::Stdio::null())
        .status();
    (median(run), median(exec))
}

#[tokio::main]
async fn main() {
    let n: usize = std::env::var("TOOL_PATH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(30);
    let sizes: Vec<usize> = std::env::var("TOOL_PATH_SIZES")
        .unwrap_or_else(|_| "0,50000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let image = minicoder::sandbox::spec::image_from_env();
    let root = tempfile::tempdir().expect("tempdir");
    let (run_ms, exec_ms) = docker_baselines(&image);
    println!("docker run --rm {image} true: {run_ms:.1} ms (median of 5)");
    println!("docker exec (CLI) true:        {exec_ms:.1} ms (median of 10)");
    for size in sizes {
        let repo = root.path().join(format!("repo-{size}"));
        let files = if size == 0 {
            std::fs::create_dir_all(&repo).unwrap();
            std::fs::write(repo.join("README.md"), "# fixture\n").unwrap();
            std::fs::write(repo.join("lib.rs"), "pub fn f() {}\n").unwrap();
            git(&repo, &["init", "-q"]);
            git(&repo, &["add", "-A"]);
            git(&repo, &["commit", "-q", "-m", "fixture"]);
            2
        } else {
            let (files, _) = build_repo(&repo, &registry_sources(), size);
            std::fs::write(repo.join("README.md"), "# sources\n").unwrap();
            git(&repo, &["add", "README.md"]);
            git(&repo, &["commit", "-q", "-m", "readme"]);
            files + 1
        };
        let state = root.path().join(format!("state-{size}"));
        let f = one_run(&repo, &state, n).await;
        let overhead = f.shell_ms - f.read_ms;
        println!(
            "{files} files, {n} commands: run_shell {:.1} ms, read_file {:.1} ms per call (tool durations {:.0} / {:.0} ms): per-command overhead {overhead:.1} ms = {:.3} × docker run --rm, {:.3} × docker exec",
            f.shell_ms,
            f.read_ms,
            f.shell_tool_ms,
            f.read_tool_ms,
            overhead / run_ms,
            overhead / exec_ms,
        );
    }
}
