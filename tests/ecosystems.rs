//! Every ecosystem the image carries verifies out of the box: for a small Python,
//! Node, Rust and Go project each, detected without configuration, the
//! scripted agent sees the failing test in the sandbox, fixes it, and the
//! verifier passes it — real binary, real Docker sandbox and verifier. The
//! Rust crate (edition 2024, lockfile v4) fetches its dev-dependency in a
//! bootstrap, and a second run with the network off succeeds from the cache.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::json;
use support::project_run::{Finished, Project};

/// The checks a run froze, as (name, command).
fn checks(run: &Finished) -> Vec<(String, String)> {
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.artifacts.join("manifest.json")).expect("manifest"),
    )
    .expect("json");
    manifest["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_string(),
                c["command"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn pair(name: &str, command: &str) -> (String, String) {
    (name.to_string(), command.to_string())
}

/// The probe's tool result: the check failing in the command container.
fn assert_probe_failed(project: &Project, marker: &str) {
    let results = project.tool_results();
    let probe = results
        .iter()
        .find(|r| r.contains("exit code") || r.contains("exit"))
        .expect("the run_shell result reached the model");
    assert!(
        probe.contains(marker),
        "the failure shows in the sandbox: {probe}"
    );
}

#[tokio::test]
async fn python_with_pytest_configured_in_pyproject() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let p = Project::new("python", &[]).await;
    let fix = p.patch(
        "src/temperature.py",
        "    return celsius * 9 / 5 + 23",
        "    return celsius * 9 / 5 + 32",
    );
    p.script_fix("python3 -m pytest -q", "src/temperature.py", &fix);
    let run = p.run("python", &[]).await;
    run.assert_success();
    assert_eq!(checks(&run), vec![pair("pytest", "python3 -m pytest -q")]);
    assert_probe_failed(&p, "1 failed");
    assert_eq!(run.result["changed_files"], json!(["src/temperature.py"]));
    assert_verdicts_in_order(&run);
}

/// A baseline verdict, when it came before the run ended, is told before
/// the completion's, as it happened; and the progress line says why the
/// baseline check failed, not only its exit code.
fn assert_verdicts_in_order(run: &Finished) {
    let events = run.events();
    let started: std::collections::HashMap<u64, String> = events
        .iter()
        .filter(|e| e["type"] == "verification.started")
        .map(|e| (e["attempt"].as_u64().unwrap_or(0), e["reason"].to_string()))
        .collect();
    let finished: Vec<String> = events
        .iter()
        .filter(|e| e["type"] == "verification.finished")
        .map(|e| e["reason"].to_string())
        .collect();
    if let Some(baseline) = finished.iter().position(|r| r.contains("aseline")) {
        let completion = finished
            .iter()
            .position(|r| r.contains("ompletion"))
            .expect("a completion verdict");
        assert!(baseline < completion, "{finished:?}");
        assert!(
            run.stderr()
                .contains("check pytest (Baseline): FAILED (exit 1"),
            "{}",
            run.stderr()
        );
    }
    assert!(!started.is_empty());
}

#[tokio::test]
async fn node_with_the_built_in_test_runner() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let p = Project::new("node", &[]).await;
    let fix = p.patch(
        "slugify.js",
        r#"  return title.trim().toLowerCase().replace(/[^a-z0-9]+/, "-");"#,
        r#"  return title.trim().toLowerCase().replace(/[^a-z0-9]+/g, "-");"#,
    );
    p.script_fix("npm test", "slugify.js", &fix);
    let run = p.run("node", &[]).await;
    run.assert_success();
    assert_eq!(checks(&run), vec![pair("test", "npm test")]);
    assert_probe_failed(&p, "# fail 1");
    assert_eq!(run.result["changed_files"], json!(["slugify.js"]));
}

#[tokio::test]
async fn go_test_runs_its_test_binary() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let p = Project::new("go", &[]).await;
    // The bug is the second `return lo` (the one for v > hi).
    let text = std::fs::read_to_string(p.path().join("clamp.go")).expect("read");
    let fix = second_line_patch("clamp.go", &text, "\t\treturn lo", "\t\treturn hi");
    p.script_fix("go test ./...", "clamp.go", &fix);
    let run = p.run("go", &[]).await;
    run.assert_success();
    assert_eq!(checks(&run), vec![pair("go-test", "go test ./...")]);
    assert_probe_failed(&p, "Clamp(42, 0, 10) = 0, want 10");
    assert_eq!(run.result["changed_files"], json!(["clamp.go"]));
}

/// Like `whole_file_patch`, for the second occurrence of `old`.
fn second_line_patch(path: &str, text: &str, old: &str, new: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut seen = 0;
    let mut out = format!(
        "--- a/{path}\n+++ b/{path}\n@@ -1,{n} +1,{n} @@\n",
        n = lines.len()
    );
    for line in lines {
        if line == old {
            seen += 1;
            if seen == 2 {
                out.push_str(&format!("-{old}\n+{new}\n"));
                continue;
            }
        }
        out.push_str(&format!(" {line}\n"));
    }
    assert_eq!(seen, 2, "{path} should hold {old:?} twice");
    out
}

#[tokio::test]
async fn rust_edition_2024_with_a_dev_dependency_then_offline_from_the_cache() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let config = r#"{"bootstrap": ["cargo fetch --locked"]}"#;
    let p = Project::new("rust", &[(".minicoder.json", config)]).await;
    let fix = p.patch(
        "src/lib.rs",
        "    let mut count = 0;",
        "    let mut count = 1;",
    );
    p.script_fix("cargo test --locked", "src/lib.rs", &fix);
    let first = p.run("rust", &[]).await;
    first.assert_success();
    assert_eq!(
        checks(&first),
        vec![pair("cargo-test", "cargo test --locked")]
    );
    assert_probe_failed(&p, "test result: FAILED");
    assert_eq!(first.result["changed_files"], json!(["src/lib.rs"]));
    let hash = first
        .events()
        .into_iter()
        .find(|e| e["type"] == "project.config")
        .and_then(|e| e["hash"].as_str().map(String::from))
        .expect("the configuration's hash");
    let volume = minicoder::sandbox::caches::volume_name(p.path(), &hash);
    assert!(
        docker.inspect_volume(&volume).await.is_ok(),
        "the project's cache volume {volume} exists"
    );

    // Again, with no network for the bootstrap either: the cache has it all.
    p.script_fix("cargo test --locked", "src/lib.rs", &fix);
    let offline = p
        .run("rust-offline", &[("MINICODER_BOOTSTRAP_NETWORK", "false")])
        .await;
    let bootstrap = offline
        .events()
        .into_iter()
        .find(|e| e["type"] == "bootstrap.started")
        .expect("a bootstrap ran");
    assert_eq!(bootstrap["network"], false);
    offline.assert_success();
    let removed = minicoder::sandbox::caches::remove_for_repo(&docker, p.path(), p.state.path())
        .await
        .expect("remove the cache volume");
    assert_eq!(removed, 1);
}
