//! Runs killed with SIGKILL at random moments, each followed by `gc` and
//! `resume`: counts leaked containers and workspaces, and how every resumed
//! run ended (it must verify, or fail with a reason that says why).
//!
//! Each iteration: the bundled fixture, a mock model whose script runs a few
//! slow commands, then fixes the bug and asks for completion; the run is
//! killed after a random 0.2–4 s (the whole run takes about 6 s); `minicoder gc`; the run's containers (all
//! states) and workspace are counted; `minicoder resume RUN` with a script
//! that fixes and completes; its outcome is recorded.
//!
//! Run: `cargo bench --bench resume_stress` (`RESUME_STRESS_RUNS=50` by default).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::mock_openai::{MockOpenAi, MockResponse};

const FIX: &str = support::FIX_PAGINATION;

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "look around", "status": statuses[0]},
        {"id": "2", "content": "fix it", "status": statuses[1]},
    ]})
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

fn script() -> Vec<MockResponse> {
    let mut s = vec![MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        (
            "run_shell",
            json!({"command": "sleep 0.4; echo one > one.txt"}),
        ),
    ])];
    for i in 0..6 {
        s.push(MockResponse::tool_calls(&[(
            "run_shell",
            json!({"command": format!("sleep 0.5; echo {i} >> one.txt")}),
        )]));
    }
    s.extend(fix_and_complete());
    s
}

/// A small deterministic generator (no dependency for one random number).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn command(state: &Path, mock: &MockOpenAi, args: &[&str]) -> Command {
    let mut cmd = Command::new(support::bin());
    cmd.args(args)
        .env("MINICODER_STATE_DIR", state)
        .env("OPENAI_BASE_URL", mock.base_url())
        .env("OPENAI_API_KEY", support::run_harness::API_KEY)
        .env("OPENAI_MODEL", "mock-model")
        .env("MINICODER_RETRY_BASE_MS", "10")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

#[tokio::main]
async fn main() {
    let runs: usize = std::env::var("RESUME_STRESS_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let docker = support::docker_or_skip().await.expect("Docker");
    let state = support::state_dir();
    let store = minicoder::state::StateDir::new(state.path());
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    let (mut leaked_containers, mut leaked_workspaces, mut unclear) = (0, 0, 0);
    // Containers whose creation the killed process had asked for appear
    // after the first gc listed them; the next start-up's gc removes them.
    let mut late_after_gc = 0;
    let mut resume_ms = Vec::new();
    for i in 0..runs {
        let source = tempfile::tempdir().expect("tempdir");
        minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
        let mock = MockOpenAi::start().await;
        mock.push_all(script());
        let src = source.path().display().to_string();
        let mut child = command(
            state.path(),
            &mock,
            &[
                "run",
                &src,
                "Fix the pagination bug",
                "--non-interactive",
                "--model",
                "openai",
            ],
        )
        .spawn()
        .expect("spawn");
        let delay = 200 + rng.next() % 3800;
        std::thread::sleep(Duration::from_millis(delay));
        let _ = child.kill();
        let _ = child.wait();
        let gc = command(state.path(), &mock, &["gc"]).output().expect("gc");
        assert!(
            gc.status.success(),
            "{}",
            String::from_utf8_lossy(&gc.stderr)
        );
        // The newest run is this one.
        let Some(run) = minicoder::runs::list(&store).into_iter().next() else {
            *outcomes
                .entry("killed before the run existed".into())
                .or_default() += 1;
            continue;
        };
        if run.report.is_some() {
            *outcomes
                .entry("finished before the kill".into())
                .or_default() += 1;
            continue;
        }
        late_after_gc += support::containers_of_run(&docker, &run.id).await.len();
        leaked_workspaces += usize::from(store.workspace_dir(&run.id).exists());
        let mock = MockOpenAi::start().await;
        mock.push_all(fix_and_complete());
        let t = Instant::now();
        let out = command(
            state.path(),
            &mock,
            &["resume", &run.id, "--non-interactive"],
        )
        .current_dir(source.path())
        .output()
        .expect("resume");
        resume_ms.push(t.elapsed().as_millis() as u64);
        let result: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let key = match result["outcome"].as_str() {
            Some("success") => "resumed: success".to_string(),
            Some(other) => format!("resumed: {other} ({})", result["reason"]),
            None if stderr.contains("saved no state") => {
                "refused: killed before the first resume point".to_string()
            }
            None => {
                unclear += 1;
                format!("unclear: {}", stderr.lines().last().unwrap_or(""))
            }
        };
        *outcomes.entry(key).or_default() += 1;
        leaked_containers += support::containers_of_run(&docker, &run.id).await.len();
        leaked_workspaces += usize::from(store.workspace_dir(&run.id).exists());
        eprintln!("{:>2}/{runs}: killed after {delay} ms", i + 1);
    }
    resume_ms.sort_unstable();
    println!("resume_stress: {runs} runs killed with SIGKILL at random moments (0.2-4 s)");
    for (what, n) in &outcomes {
        println!("  {n:>3}  {what}");
    }
    println!(
        "  containers left after each resume: {leaked_containers}; workspaces left: {leaked_workspaces}; unclear failures: {unclear}"
    );
    println!(
        "  containers created after the kill's gc had listed them (removed by the resume's start-up gc): {late_after_gc}"
    );
    if !resume_ms.is_empty() {
        println!(
            "  resume to exit: median {} ms, max {} ms",
            resume_ms[resume_ms.len() / 2],
            resume_ms[resume_ms.len() - 1]
        );
    }
    assert_eq!(leaked_containers, 0);
    assert_eq!(leaked_workspaces, 0);
    assert_eq!(unclear, 0);
}
