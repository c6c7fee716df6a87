//! Every ecosystem the image carries verifies out of the box: for a small Python,
//! Node, Rust and Go project each, detected without configuration, the
//! scripted agent sees the failing test in the sandbox, fixes it, and the
//! verifier passes it — real binary, real Docker sandbox and verifier. The
//! Rust crate (edition 2024, lockfile v4) fetches its dev-dependency in a
//! bootstrap, and a second run with the network off succeeds from the cache.

use crate::support;

use serde_json::{Value, json};
use support::mock_openai::MockResponse;
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
    // Beside it, a package on the parts of the standard library that the
    // image's warm cache once lacked: they build, before and after the edit.
    let p = Project::new(
        "go",
        &[
            (
                "sum/sum.go",
                "package sum\n\nimport (\n\t\"crypto/rand\"\n\t\"math/big\"\n\t\"net/http\"\n)\n\n// Sum adds a and b exactly; Status names an HTTP status.\nfunc Sum(a, b int64) string { return new(big.Int).Add(big.NewInt(a), big.NewInt(b)).String() }\n\nfunc Status() string { return http.StatusText(http.StatusTeapot) }\n\nfunc Nonce() []byte { b := make([]byte, 8); _, _ = rand.Read(b); return b }\n",
            ),
            (
                "sum/sum_test.go",
                "package sum\n\nimport (\n\t\"testing\"\n\t\"testing/quick\"\n)\n\nfunc TestSum(t *testing.T) {\n\tif Sum(1<<62, 1<<62) != \"9223372036854775808\" || Status() != \"I'm a teapot\" || len(Nonce()) != 8 {\n\t\tt.Fatal(Sum(1<<62, 1<<62), Status())\n\t}\n\tif err := quick.Check(func(a, b int32) bool { return Sum(int64(a), int64(b)) == Sum(int64(b), int64(a)) }, nil); err != nil {\n\t\tt.Fatal(err)\n\t}\n}\n",
            ),
        ],
    )
    .await;
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

/// A C library whose `make test` builds objects, an archive and a test
/// binary that its `.gitignore` lists: the probe's build and the checks'
/// builds are not the agent's change — not in `changed_files`, not in the
/// patch, and the check that rebuilds them has not changed the workspace.
/// Nor can an ignored output stand in for the build: a test binary planted
/// with a later timestamp (so `make` would not rebuild it) is removed
/// before the verification, which fails until the fix is made.
#[tokio::test]
async fn build_outputs_the_repository_ignores_are_not_the_agents_change() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let p = Project::new("c", &[]).await;
    let text = std::fs::read_to_string(p.path().join("clamp.c")).expect("read");
    let fix = second_line_patch("clamp.c", &text, "        return lo;", "        return hi;");
    let plan = |a: &str, b: &str| {
        json!({"items": [
            {"id": "1", "content": "see the failure", "status": a},
            {"id": "2", "content": "fix it", "status": b},
        ]})
    };
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan("in_progress", "pending")),
        ("run_shell", json!({"command": "make test"})),
    ]));
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan("done", "in_progress")),
        (
            "run_shell",
            json!({"command": "printf '#!/bin/sh\\necho ok: 3 cases\\n' > test_clamp && chmod +x test_clamp && touch -d '2100-01-01' test_clamp && ./test_clamp"}),
        ),
        (
            "edit_file",
            json!({"path": "notes.o", "patch": "--- /dev/null\n+++ b/notes.o\n@@ -0,0 +1 @@\n+x\n"}),
        ),
    ]));
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan("done", "done")),
        ("request_completion", json!({"summary": "the tests pass"})),
    ]));
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan("done", "in_progress")),
        ("edit_file", json!({"path": "clamp.c", "patch": fix})),
    ]));
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan("done", "done")),
        ("request_completion", json!({"summary": "the tests pass"})),
    ]));
    let run = p.run("c", &[]).await;
    run.assert_success();
    let verdicts: Vec<(String, bool)> = run
        .events()
        .into_iter()
        .filter(|e| e["type"] == "verification.finished" && e["reason"] != "baseline")
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or("").to_string(),
                e["passed"] == true,
            )
        })
        .collect();
    assert_eq!(
        verdicts.first().map(|v| v.1),
        Some(false),
        "the planted binary is not what the check ran: {verdicts:?}"
    );
    assert_eq!(verdicts.last().map(|v| v.1), Some(true), "{verdicts:?}");
    assert!(
        p.tool_results()
            .iter()
            .any(|r| r.contains("`notes.o` is ignored by the repository's ignore rules")),
        "an edit of an ignored path is refused: {:?}",
        p.tool_results()
    );
    assert_eq!(checks(&run), vec![pair("make-test", "make test")]);
    assert_probe_failed(&p, "FAIL: clamp(42, 0, 10) = 0, want 10");
    assert_eq!(run.result["changed_files"], json!(["clamp.c"]));
    let patch = run.final_patch();
    for built in [
        "clamp.o",
        "libclamp.a",
        "b/test_clamp\n",
        "GIT binary patch",
    ] {
        assert!(!patch.contains(built), "{built} in the patch:\n{patch}");
    }
    let changes: Vec<Value> = run
        .events()
        .into_iter()
        .filter(|e| e["type"] == "workspace.changed")
        .collect();
    assert!(!changes.is_empty());
    for change in changes {
        assert_eq!(change["changed_files"], json!(["clamp.c"]), "{change}");
    }
}

/// A Python project whose `requirements.txt` names a package from PyPI and
/// no bootstrap: untrusted, its baseline fails for want of the package and
/// the run stops, naming the install (not the agent's task); trusted with
/// network, the detected install (a venv, `pip install -r`) runs and the
/// checks run through the venv, to a verified fix.
#[tokio::test]
async fn declared_dependencies_are_installed_by_default_once_trusted() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let p = Project::new("python-deps", &[]).await;
    // The agent starts beside the baseline verification; it is still on
    // its first command when the baseline's verdict stops the run (which
    // interrupts the command: the sleep is long so that a loaded machine's
    // slow baseline still finds it running).
    p.mock.push(MockResponse::tool_calls(&[
        (
            "update_plan",
            json!({"items": [{"id": "1", "content": "look", "status": "in_progress"}]}),
        ),
        ("run_shell", json!({"command": "sleep 30"})),
    ]));
    let untrusted = p.run_with("python-deps-untrusted", &[], &[]).await;
    assert_eq!(
        untrusted.result["outcome"], "failure",
        "{}",
        untrusted.result
    );
    let reason = untrusted.result["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("No module named 'text_unidecode'")
            && reason.contains("fails for want of a dependency")
            && reason.contains("/deps/venv/bin/pip install -r requirements.txt"),
        "{reason}"
    );
    assert!(
        untrusted.stderr().contains("installs its dependencies"),
        "{}",
        untrusted.stderr()
    );

    let fix = p.patch(
        "slug.py",
        r#"    return "-".join(words)"#,
        r#"    return "-".join(words).lower()"#,
    );
    p.script_fix("python3 -m pytest -q", "slug.py", &fix);
    let run = p.run("python-deps", &[]).await;
    run.assert_success();
    let bootstrap = run
        .events()
        .into_iter()
        .find(|e| e["type"] == "bootstrap.started")
        .expect("the detected install ran");
    assert!(
        bootstrap["commands"][0]
            .as_str()
            .is_some_and(|c| c.ends_with("/deps/venv/bin/pip install -r requirements.txt")),
        "{bootstrap}"
    );
    assert_probe_failed(&p, "assert 'Creme-Brulee' == 'creme-brulee'");
    assert_eq!(run.result["changed_files"], json!(["slug.py"]));
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
    // No configuration: its Cargo.lock has the install detected, which the
    // run's trust (--trust-project=network) lets run.
    let p = Project::new("rust", &[]).await;
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
    assert_eq!(bootstrap["commands"], json!(["cargo fetch --locked"]));
    offline.assert_success();
    let removed = minicoder::sandbox::caches::remove_for_repo(&docker, p.path(), p.state.path())
        .await
        .expect("remove the cache volume");
    assert_eq!(removed, 1);
}
