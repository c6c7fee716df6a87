//! The copy of a repository prepared after a run ends is what the next run
//! on it starts from: refreshed against the source as it is then, with the
//! same workspace, baseline and patch a fresh copy would give.

use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use support::mock_openai::MockResponse;
use support::project_run::Project;

const ALWAYS: (&str, &str) = ("MINICODER_PREPARED_COPY", "always");

fn prepared_copies(state: &Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(state.join("prepared"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("ready/meta").is_file())
        .collect()
}

fn wait_for_copy(state: &Path) {
    let until = Instant::now() + Duration::from_secs(120);
    while prepared_copies(state).is_empty() {
        assert!(Instant::now() < until, "no copy was prepared after the run");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn working_plan() -> serde_json::Value {
    json!({"items": [{"id": "1", "content": "look", "status": "in_progress"}]})
}

fn done_plan() -> serde_json::Value {
    json!({"items": [{"id": "1", "content": "look", "status": "done"}]})
}

fn report(run: &support::project_run::Finished) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(run.artifacts.join("report.json")).expect("report"))
        .expect("report json")
}

#[tokio::test]
async fn the_next_run_takes_the_copy_prepared_after_the_last_one() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let p = Project::new(
        "",
        &[
            ("notes.txt", "first\n"),
            ("pkg/keep.txt", "keep\n"),
            ("pkg/gone.txt", "gone\n"),
            (".minicoder.json", r#"{"verification": ["true"]}"#),
        ],
    )
    .await;
    // The first run changes its own workspace only.
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", working_plan()),
        (
            "run_shell",
            json!({"command": "echo run-one > pkg/keep.txt"}),
        ),
    ]));
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", done_plan()),
        ("request_completion", json!({"summary": "done"})),
    ]));
    let first = p.run("first", &[ALWAYS]).await;
    first.assert_success();
    assert!(report(&first)["durations"]["prepare"]["prepared_copy"].is_null());
    wait_for_copy(p.state.path());

    // The source moves on before the next task.
    support::write(&p.path().join("notes.txt"), b"second\n");
    std::fs::remove_file(p.path().join("pkg/gone.txt")).expect("rm");
    support::write(&p.path().join("added.txt"), b"new\n");
    support::write(
        &p.path().join(".minicoder.json"),
        br#"{"verification": ["grep -qx third notes.txt && test ! -e pkg/gone.txt && grep -qx keep pkg/keep.txt && test -e added.txt"]}"#,
    );
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", working_plan()),
        (
            "run_shell",
            json!({"command": "cat notes.txt pkg/keep.txt; ls pkg; git status --short; git log --oneline | wc -l"}),
        ),
    ]));
    p.mock.push(MockResponse::tool_calls(&[(
        "edit_file",
        json!({"path": "notes.txt", "patch": p.patch("notes.txt", "second", "third")}),
    )]));
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", done_plan()),
        ("request_completion", json!({"summary": "done"})),
    ]));
    let second = p.run("second", &[ALWAYS]).await;
    second.assert_success();
    let prepared = report(&second)["durations"]["prepare"]["prepared_copy"].clone();
    assert!(
        prepared["copied"].as_u64().is_some_and(|n| n >= 3),
        "the changed, new and config files were copied again: {prepared}"
    );
    // The file gone from the source is removed from the copy, or was never
    // kept in it (a copy recycled from the first run's workspace keeps no
    // file changed within the racy window of that run's start).
    let (copied, removed) = (
        prepared["copied"].as_u64().unwrap_or(0),
        prepared["removed"].as_u64().unwrap_or(0),
    );
    assert!(copied + removed >= 4, "{prepared}");
    let seen = p.tool_results().join("\n");
    assert!(
        seen.contains("second\nkeep\n"),
        "the model saw the source as it is now: {seen}"
    );
    assert!(!seen.contains("gone.txt"), "{seen}");
    assert!(!seen.contains("run-one"), "{seen}");
    // A clean baseline of one commit, as a fresh copy has.
    assert!(!seen.contains("?? "), "{seen}");
    // The patch is against the source as it was when the run started.
    let patch = second.final_patch();
    assert!(patch.contains("-second\n+third\n"), "{patch}");
    let check = std::process::Command::new("git")
        .args(["apply", "--check", "-"])
        .current_dir(p.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().expect("stdin").write_all(patch.as_bytes())?;
            c.wait()
        })
        .expect("git apply");
    assert!(check.success(), "the patch applies to the source");
    // Taken whole: what is left of it goes, and a new one is made.
    wait_for_copy(p.state.path());
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let leftovers: Vec<_> = prepared_copies(p.state.path())
            .iter()
            .flat_map(|d| std::fs::read_dir(d).expect("list").flatten())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "ready" && n != "lock")
            .collect();
        if leftovers.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "left in the prepared directory: {leftovers:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn small_repositories_get_no_prepared_copy_unless_asked() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let p = Project::new(
        "",
        &[
            ("a.txt", "a\n"),
            (".minicoder.json", r#"{"verification": ["true"]}"#),
        ],
    )
    .await;
    p.mock.push(MockResponse::tool_calls(&[
        ("update_plan", done_plan()),
        ("request_completion", json!({"summary": "nothing to do"})),
    ]));
    let run = p.run("small", &[]).await;
    run.assert_success();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !p.state.path().join("prepared").exists(),
        "a ten-file repository copies in milliseconds: no copy kept for it"
    );
}
