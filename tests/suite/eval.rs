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
