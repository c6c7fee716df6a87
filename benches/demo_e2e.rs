//! `minicoder demo` end to end (real Docker sandbox and verifier) beside
//! `mca demo` of mini-code-agent-langgraph (unsandboxed), in one run, plus the
//! run's teardown time (containers gone) from each report.
//!
//! `mca` is looked up as `$MCA` or on PATH (`pip install mini-code-agent-langgraph`);
//! without it only minicoder is measured. Run: `cargo bench --bench demo_e2e`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time(cmd: &mut Command) -> Duration {
    let t = Instant::now();
    let out = cmd.output().expect("run the command");
    let elapsed = t.elapsed();
    assert!(
        out.status.success(),
        "{:?} failed: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    elapsed
}

fn main() {
    let runs: usize = std::env::var("DEMO_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let bin = env!("CARGO_BIN_EXE_minicoder");
    // A state directory minicoder accepts: private to its owner.
    let state = {
        use std::os::unix::fs::PermissionsExt;
        tempfile::Builder::new()
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir()
            .expect("tempdir")
    };
    let demo = || {
        let mut cmd = Command::new(bin);
        cmd.arg("demo").env("MINICODER_STATE_DIR", state.path());
        cmd
    };
    time(&mut demo()); // builds the image if needed; warms the page cache
    let mca = std::env::var("MCA").unwrap_or_else(|_| "mca".into());
    let have_mca = Command::new(&mca).arg("--help").output().is_ok();
    let mca_home = tempfile::tempdir().expect("tempdir");
    let theirs_cmd = || {
        let mut cmd = Command::new(&mca);
        cmd.arg("demo").env("XDG_STATE_HOME", mca_home.path());
        cmd
    };
    if have_mca {
        time(&mut theirs_cmd()); // warms its imports too
    }
    // Paired: one of each in turn, so both see the same machine.
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..runs {
        ours.push(time(&mut demo()));
        if have_mca {
            theirs.push(time(&mut theirs_cmd()));
        }
    }
    let mut teardown: Vec<u64> = Vec::new();
    for entry in std::fs::read_dir(state.path().join(".agent/runs"))
        .expect("runs")
        .flatten()
    {
        if let Ok(text) = std::fs::read_to_string(entry.path().join("report.json"))
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
            && let Some(ms) = v["durations"]["teardown_ms"].as_u64()
        {
            teardown.push(ms);
        }
    }
    teardown.sort();
    let ours_med = median(ours.clone());
    println!(
        "\nminicoder demo (real sandbox), {runs} runs: median {:.2} s, min {:.2} s, max {:.2} s",
        ours_med.as_secs_f64(),
        ours.iter().min().map_or(0.0, |d| d.as_secs_f64()),
        ours.iter().max().map_or(0.0, |d| d.as_secs_f64())
    );
    if !teardown.is_empty() {
        println!(
            "run teardown (containers removed): median {} ms, max {} ms (budget 500 ms)",
            teardown[teardown.len() / 2],
            teardown[teardown.len() - 1]
        );
    }
    if !have_mca {
        println!(
            "mca not found (set MCA or pip install mini-code-agent-langgraph): no side-by-side figure"
        );
        return;
    }
    let theirs_med = median(theirs);
    println!(
        "mca demo (unsandboxed), {runs} runs: median {:.2} s",
        theirs_med.as_secs_f64()
    );
    println!(
        "ratio minicoder / mca = {:.2} (paired runs; budget ≤ 0.3)",
        ours_med.as_secs_f64() / theirs_med.as_secs_f64()
    );
}
