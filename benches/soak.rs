//! Soak: (1) `SOAK_RUNS` (default 100) scripted runs of the demo fixture,
//! each interrupted at a random moment by SIGINT or SIGKILL, then `gc`:
//! nothing of them may be left — containers, workspaces, volumes; (2) one
//! run of `SOAK_STEPS` (default 1,000) steps, its peak resident memory
//! read at step 100 and at the end: it must stay within 10 %.
//!
//! Run: `cargo bench --bench soak`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_minicoder")
}

fn private_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .expect("tempdir")
}

/// The demo's script, each reply taking `delay_ms`.
fn script(dir: &Path, delay_ms: u64) -> PathBuf {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/script.json");
    let mut turns: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(demo).expect("script")).expect("json");
    for t in &mut turns {
        t["delay_ms"] = delay_ms.into();
    }
    let path = dir.join("script.json");
    std::fs::write(&path, serde_json::to_string(&turns).expect("json")).expect("write");
    path
}

/// Containers, volumes and workspaces of `state`'s runs still there.
fn leftovers(state: &Path) -> (usize, usize, usize) {
    let runs: Vec<String> = std::fs::read_dir(state.join(".agent/runs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let out = Command::new("docker")
        .args(["ps", "-a", "--format", "{{.Label \"org.minicoder.run\"}}"])
        .output()
        .expect("docker ps");
    let containers = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| runs.iter().any(|r| l.starts_with(r.as_str())))
        .count();
    let out = Command::new("docker")
        .args(["volume", "ls", "-q", "--filter"])
        .arg(format!("label=org.minicoder.state={}", state.display()))
        .output()
        .expect("docker volume ls");
    let volumes = String::from_utf8_lossy(&out.stdout).lines().count();
    let workspaces = std::fs::read_dir(state.join("workspaces"))
        .map(|d| d.count())
        .unwrap_or(0);
    (containers, volumes, workspaces)
}

/// A small xorshift generator: the soak's moments, repeatable by seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn interrupted_runs(runs: u64, seed: u64) {
    let state = private_dir();
    let work = tempfile::tempdir().expect("tempdir");
    let repo = work.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    minicoder::cli::demo::write_fixture(&repo).expect("fixture");
    let script = script(work.path(), 150);
    let mut rng = Rng(seed | 1);
    let (mut by_int, mut by_kill) = (0, 0);
    let started = Instant::now();
    for _ in 0..runs {
        let mut child = Command::new(bin())
            .args(["run", "--non-interactive", "--script"])
            .arg(&script)
            .arg(&repo)
            .arg("Fix the pagination bug.")
            .env("MINICODER_STATE_DIR", state.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run");
        std::thread::sleep(Duration::from_millis(rng.below(1500)));
        let pid = child.id().to_string();
        if rng.below(2) == 0 {
            Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .expect("kill");
            by_int += 1;
        } else {
            Command::new("kill")
                .args(["-KILL", &pid])
                .status()
                .expect("kill");
            by_kill += 1;
        }
        child.wait().expect("reaped");
    }
    let before_gc = leftovers(state.path());
    let gc = Command::new(bin())
        .arg("gc")
        .env("MINICODER_STATE_DIR", state.path())
        .output()
        .expect("gc");
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    let after_gc = leftovers(state.path());
    println!(
        "{runs} runs interrupted at random (seed {seed}): {by_int} by SIGINT, {by_kill} by SIGKILL, {:.0} s",
        started.elapsed().as_secs_f64()
    );
    println!(
        "  left before gc (containers, volumes, workspaces): {before_gc:?}; after gc: {after_gc:?}"
    );
    assert_eq!(after_gc, (0, 0, 0), "something leaked");
}

/// Peak resident memory (VmHWM) of a process, in KiB.
fn peak_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn long_run(steps: u64) {
    let state = private_dir();
    let work = tempfile::tempdir().expect("tempdir");
    let repo = work.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    minicoder::cli::demo::write_fixture(&repo).expect("fixture");
    // A plan, then one step after another reading and searching.
    let mut turns = vec![
        serde_json::json!({"tool_calls": [{"name": "update_plan", "arguments":
        {"items": [{"id": "1", "content": "Read around", "status": "in_progress"}]}}]}),
    ];
    for i in 1..steps {
        let call = if i % 2 == 0 {
            serde_json::json!({"name": "read_file", "arguments": {"path": "pagination.py"}})
        } else {
            serde_json::json!({"name": "ripgrep", "arguments": {"pattern": "page"}})
        };
        turns.push(serde_json::json!({"content": format!("step {i}"), "tool_calls": [call]}));
    }
    let path = work.path().join("long.json");
    std::fs::write(&path, serde_json::to_string(&turns).expect("json")).expect("write");
    let mut child = Command::new(bin())
        .args(["run", "--non-interactive", "--events", "--max-turns"])
        .arg((steps + 5).to_string())
        .args(["--max-tokens", "2000000000", "--script"])
        .arg(&path)
        .arg(&repo)
        .arg("Read around.")
        .env("MINICODER_STATE_DIR", state.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run");
    let pid = child.id();
    let started = Instant::now();
    let (mut at_100, mut last_turn, mut at_end) = (0, 0, 0);
    for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
        let Ok(line) = line else { break };
        let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if event["type"] == "model.request" {
            last_turn = event["turn"].as_u64().unwrap_or(0);
            if last_turn == 100 {
                at_100 = peak_kib(pid);
            }
            if last_turn >= steps {
                at_end = peak_kib(pid);
            }
        }
    }
    child.wait().expect("reaped");
    let growth = at_end as f64 / at_100.max(1) as f64 - 1.0;
    println!(
        "one run of {last_turn} steps in {:.0} s: peak RSS {at_100} KiB at step 100, {at_end} KiB at step {last_turn}: {:+.1} %",
        started.elapsed().as_secs_f64(),
        growth * 100.0
    );
    assert!(last_turn >= steps, "the run stopped at step {last_turn}");
    assert!(growth <= 0.10, "memory grew by {:.1} %", growth * 100.0);
}

fn main() {
    let seed = env_or("SOAK_SEED", 7);
    interrupted_runs(env_or("SOAK_RUNS", 100), seed);
    long_run(env_or("SOAK_STEPS", 1000));
}
