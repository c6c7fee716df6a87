//! `minicoder batch` against the same runs one after another: N scripted
//! tasks over copies of the demo fixture (real Docker sandbox and verifier),
//! first as N `minicoder run` in turn, then as one `batch --parallel P`,
//! in one go on the same machine. Twice: with a model that answers at once
//! (every second of a run is the machine's own work: container starts,
//! checks) and with one that takes `BATCH_MODEL_MS` a reply (default 1000;
//! real models take longer), which is what a batch overlaps. Prints the
//! wall times and the ratios.
//!
//! Run: `cargo bench --bench batch` (`BATCH_TASKS`, default 20;
//! `BATCH_PARALLEL`, default 4).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn check(out: std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The demo's script with every reply taking `delay_ms`.
fn script_with_delay(dir: &Path, delay_ms: u64) -> PathBuf {
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/script.json");
    let mut turns: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(demo).expect("script")).expect("json");
    for t in &mut turns {
        t["delay_ms"] = delay_ms.into();
    }
    let path = dir.join(format!("script-{delay_ms}.json"));
    std::fs::write(&path, serde_json::to_string(&turns).expect("json")).expect("write");
    path
}

fn main() {
    let tasks = env_or("BATCH_TASKS", 20);
    let parallel = env_or("BATCH_PARALLEL", 4);
    let model_ms = env_or("BATCH_MODEL_MS", 1000) as u64;
    let work = tempfile::tempdir().expect("tempdir");
    for i in 0..tasks {
        let repo = work.path().join(format!("repo-{i}"));
        std::fs::create_dir_all(&repo).expect("mkdir");
        minicoder::cli::demo::write_fixture(&repo).expect("fixture");
    }
    println!(
        "{tasks} scripted runs of the demo fixture (real sandbox and verifier), {} cores:",
        std::thread::available_parallelism().map_or(1, usize::from)
    );
    for delay in [0, model_ms] {
        let script = script_with_delay(work.path(), delay);
        let (sequential, batch) = measure(work.path(), &script, tasks, parallel);
        println!(
            "  model answers in {delay:>4} ms: one after another {:>7.2} s, batch --parallel {parallel} {:>7.2} s: {:.2}x",
            sequential.as_secs_f64(),
            batch.as_secs_f64(),
            batch.as_secs_f64() / sequential.as_secs_f64()
        );
    }
}

/// The N runs one after another, then as one batch; both wall times.
fn measure(work: &Path, script: &Path, tasks: usize, parallel: usize) -> (Duration, Duration) {
    let bin = env!("CARGO_BIN_EXE_minicoder");
    let state = {
        use std::os::unix::fs::PermissionsExt;
        tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .expect("tempdir")
    };
    let task = "Fix the pagination bug: page_count(21, 10) returns 2.";
    let mut lines = String::new();
    for i in 0..tasks {
        let t = serde_json::json!({
            "id": format!("t{i}"), "repo": work.join(format!("repo-{i}")),
            "script": script, "task": task,
        });
        lines.push_str(&format!("{t}\n"));
    }
    let file = work.join("tasks.jsonl");
    std::fs::write(&file, lines).expect("tasks");
    let run = |i: usize| {
        Command::new(bin)
            .args(["run", "--non-interactive", "--script"])
            .arg(script)
            .arg(work.join(format!("repo-{i}")))
            .arg(task)
            .env("MINICODER_STATE_DIR", state.path())
            .output()
            .expect("run")
    };
    check(run(0), "a warm-up run"); // the image and page cache warm

    let t = Instant::now();
    for i in 0..tasks {
        check(run(i), "run");
    }
    let sequential = t.elapsed();

    let out_dir = state.path().join("batch");
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("batch")
        .arg(&file)
        .args(["--parallel", &parallel.to_string(), "--out"])
        .arg(&out_dir)
        .env("MINICODER_STATE_DIR", state.path())
        .output()
        .expect("batch");
    let batch = t.elapsed();
    check(out, "batch");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("batch.json")).expect("batch.json"))
            .expect("json");
    assert_eq!(summary["totals"]["verified"], tasks, "{summary}");
    (sequential, batch)
}
