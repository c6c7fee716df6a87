//! `minicoder eval`: the whole conformance suite passes with its scripted
//! replies, through the real binary, sandbox and verifier, and its report
//! says what it measured and what it did not.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support;

#[tokio::test]
async fn the_conformance_suite_passes_and_says_model_quality_is_not_measured() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let state = support::state_dir();
    let out_dir = state.path().join("report");
    let out = tokio::task::spawn_blocking(move || {
        Command::new(support::bin())
            .args(["eval", "--json", "--parallel", "2", "--out"])
            .arg(&out_dir)
            .env("MINICODER_STATE_DIR", state.path())
            .stdin(Stdio::null())
            .output()
            .map(|o| (o, state))
    })
    .await
    .expect("joined")
    .expect("eval");
    let (out, state) = out;
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let failed: Vec<&Value> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["passed"] != true)
        .collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert_eq!(out.status.code(), Some(0));
    let cases = report["cases"].as_u64().expect("cases");
    assert!(cases >= 25, "{cases} cases");
    assert_eq!(report["passed"], cases);
    assert_eq!(report["skipped"], 0);
    assert_eq!(report["pass_rate"], 1.0);
    assert_eq!(report["unrelated_changes"], 0);
    let refusals = &report["expected_refusals"];
    assert!(refusals["expected"].as_u64().expect("expected") >= 5);
    assert_eq!(refusals["seen"], refusals["expected"]);
    assert!(
        report["model_quality"]
            .as_str()
            .expect("text")
            .starts_with("not measured"),
        "{}",
        report["model_quality"]
    );
    let md = std::fs::read_to_string(state.path().join("report/eval.md")).expect("eval.md");
    assert!(md.contains("| single-file-fix | pass |"), "{md}");
    assert!(md.contains("model quality: not measured"), "{md}");
}

/// Stopped by SIGTERM while a case's run is under way: no case starts after
/// it, the run cancels and removes its containers, the work folder goes,
/// and the suite exits 130 with a report that says it was stopped.
#[tokio::test]
async fn a_stopped_suite_cancels_its_runs_and_leaves_nothing() {
    use std::time::{Duration, Instant};
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let state = support::state_dir();
    let tmp = support::state_dir();
    let out_dir = state.path().join("report");
    let mut child = Command::new(support::bin())
        .args(["eval", "--json", "--parallel", "1", "--out"])
        .arg(&out_dir)
        .env("MINICODER_STATE_DIR", state.path())
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("eval");
    // The first case's run has begun (its run directory is there).
    let deadline = Instant::now() + Duration::from_secs(120);
    let runs = loop {
        let runs: Vec<String> = std::fs::read_dir(tmp.path())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|work| std::fs::read_dir(work.path().join("state/.agent/runs")).ok())
            .flatten()
            .flatten()
            .map(|run| run.file_name().to_string_lossy().into_owned())
            .collect();
        if !runs.is_empty() {
            break runs;
        }
        assert!(Instant::now() < deadline, "no case's run began");
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: kill(2) of the child this test started.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("joined")
        .expect("waited");
    assert_eq!(status.code(), Some(130), "{status:?}");
    let report: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("eval.json")).expect("report"))
            .expect("json");
    assert_eq!(report["stopped"], true, "{report}");
    assert!(
        report["results"].as_array().expect("results").len() <= 1,
        "no case began after the stop: {report}"
    );
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .expect("tmp")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "the work folder stays: {left:?}");
    let containers = docker
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            ..Default::default()
        }))
        .await
        .expect("containers");
    let theirs: Vec<_> = containers
        .iter()
        .filter(|c| {
            c.labels
                .as_ref()
                .and_then(|l| l.get(minicoder::sandbox::labels::RUN))
                .is_some_and(|run| runs.contains(run))
        })
        .collect();
    assert!(theirs.is_empty(), "containers left: {theirs:?}");
}
