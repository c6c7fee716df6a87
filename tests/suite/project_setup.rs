//! What a project asks of its sandbox, end to end with the real
//! binary, Docker and a scripted model: a check whose program the image
//! lacks stops the run before the first model request, naming it; what a
//! bootstrap writes is baseline, never part of the agent's patch. (The
//! tests that build a project's image are in `builds.rs`.)

use crate::support;

use serde_json::json;
use support::mock_openai::MockResponse;
use support::project_run::Project;

#[tokio::test]
async fn a_check_whose_program_is_missing_stops_before_any_model_request() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let config = r#"{"verification": [{"name": "shell", "command": "shellcheck scripts/*.sh"}]}"#;
    let p = Project::new(
        "",
        &[(".minicoder.json", config), ("scripts/a.sh", "echo hi\n")],
    )
    .await;
    let run = p.run("missing", &[]).await;
    assert_eq!(run.output.status.code(), Some(1), "{}", run.stderr());
    assert_eq!(run.result["outcome"], "failure");
    let reason = run.result["reason"].as_str().unwrap_or_default();
    let image = minicoder::sandbox::spec::image_from_env();
    for part in [
        "shellcheck",
        "the check `shell`",
        image.as_str(),
        r#""packages": ["shellcheck"]"#,
    ] {
        assert!(reason.contains(part), "{part:?} is not in: {reason}");
    }
    assert_eq!(p.mock.request_count(), 0, "no model request was made");
}

#[tokio::test]
async fn a_baseline_that_cannot_run_its_check_interrupts_the_model_turn_in_flight() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    // The check's program is there, so nothing before the baseline can
    // tell; the baseline then cannot run it (exit 127).
    let config = r#"{"verification": [{"name": "runner", "command": "sh -c 'exit 127'"}]}"#;
    let p = Project::new("", &[(".minicoder.json", config), ("a.txt", "a\n")]).await;
    // The model takes far longer to answer than the baseline to fail.
    p.mock.push(
        MockResponse::tool_calls(&[("read_file", json!({"path": "a.txt"}))])
            .with_delay(std::time::Duration::from_secs(120)),
    );
    let run = p.run("environment", &[]).await;
    assert_eq!(run.result["outcome"], "failure", "{}", run.stderr());
    let reason = run.result["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("environment error: the baseline check `runner`"),
        "{reason}"
    );
    let events = run.events();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert!(kinds.contains(&"model.request"), "{kinds:?}");
    assert!(
        !kinds.contains(&"model.response"),
        "the run stopped while the model was still thinking: {kinds:?}"
    );
}

#[tokio::test]
async fn what_the_bootstrap_writes_is_baseline_not_the_agents_change() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let config = r#"{"bootstrap": ["echo generated > generated.txt", "echo '# pinned by bootstrap' >> pyproject.toml"]}"#;
    let p = Project::new("python", &[(".minicoder.json", config)]).await;
    let fix = p.patch(
        "src/temperature.py",
        "    return celsius * 9 / 5 + 23",
        "    return celsius * 9 / 5 + 32",
    );
    p.script_fix(
        "cat generated.txt && python3 -m pytest -q",
        "src/temperature.py",
        &fix,
    );
    let run = p.run("bootstrap-file", &[]).await;
    run.assert_success();
    assert!(
        p.tool_results().iter().any(|r| r.contains("generated")),
        "the bootstrap's file is in the agent's workspace"
    );
    assert_eq!(run.result["changed_files"], json!(["src/temperature.py"]));
    let patch = run.final_patch();
    assert!(!patch.contains("generated.txt"), "{patch}");
    assert!(!patch.contains("pinned by bootstrap"), "{patch}");
    assert!(
        patch.contains("+    return celsius * 9 / 5 + 32"),
        "{patch}"
    );
    let _ = minicoder::sandbox::caches::remove_for_repo(&docker, p.path(), p.state.path()).await;
}

#[tokio::test]
async fn cache_volumes_belong_to_their_repository_and_state_directory_and_gc_can_drop_them() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let image = minicoder::sandbox::spec::image_from_env();
    let caches = minicoder::sandbox::caches::for_bootstrap;
    let state = support::state_dir();
    let other_state = support::state_dir();
    let kept = tempfile::tempdir().expect("tempdir");
    let gone = tempfile::tempdir().expect("tempdir");
    let kept_volume = caches(&docker, kept.path(), "h1", &image, state.path())
        .await
        .expect("made");
    let gone_volume = caches(&docker, gone.path(), "h1", &image, state.path())
        .await
        .expect("made");
    // Another state directory's cache, of a repository that is gone too.
    let foreign = tempfile::tempdir().expect("tempdir");
    let foreign_volume = caches(&docker, foreign.path(), "h1", &image, other_state.path())
        .await
        .expect("made");
    // Made once: asked again, the same volume; another configuration, another.
    assert_eq!(
        caches(&docker, kept.path(), "h1", &image, state.path())
            .await
            .expect("ok"),
        kept_volume
    );
    let other_config = caches(&docker, kept.path(), "h2", &image, state.path())
        .await
        .expect("made");
    assert_ne!(other_config, kept_volume);
    drop(gone);
    drop(foreign);

    let gc = |args: &'static [&'static str]| {
        let state = state.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(support::bin())
                .args(args)
                .env("MINICODER_STATE_DIR", state)
                .output()
                .expect("gc runs")
        })
    };
    let out = gc(&["gc"]).await.expect("join");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&gone_volume),
        "the vanished repository's cache goes: {text}"
    );
    assert!(docker.inspect_volume(&gone_volume).await.is_err());
    assert!(
        docker.inspect_volume(&kept_volume).await.is_ok(),
        "a live repository's stays"
    );

    let out = gc(&["gc", "--caches"]).await.expect("join");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&kept_volume), "--caches drops it too: {text}");
    assert!(docker.inspect_volume(&kept_volume).await.is_err());
    assert!(docker.inspect_volume(&other_config).await.is_err());
    assert!(
        docker.inspect_volume(&foreign_volume).await.is_ok(),
        "another state directory's cache is not this gc's: {text}"
    );
    minicoder::sandbox::caches::remove_volume(&docker, &foreign_volume)
        .await
        .expect("removed");
}

#[tokio::test]
async fn doctor_in_a_repository_tells_whether_the_image_runs_its_checks() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let doctor = |dir: std::path::PathBuf| {
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(support::bin())
                .arg("doctor")
                .current_dir(dir)
                .env(
                    "MINICODER_STATE_DIR",
                    std::env::temp_dir().join("minicoder-doctor-test"),
                )
                .output()
                .expect("doctor runs")
        })
    };
    let node = Project::new("node", &[]).await;
    let out = doctor(node.path().to_path_buf()).await.expect("join");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("[ OK ] checks: test (`npm test`)"), "{text}");
    assert!(text.contains("[ OK ] check programs:"), "{text}");

    let config = r#"{"verification": [{"name": "shell", "command": "shellcheck a.sh"}]}"#;
    let broken = Project::new("", &[(".minicoder.json", config)]).await;
    let out = doctor(broken.path().to_path_buf()).await.expect("join");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "[FAIL] check programs: the check `shell` (`shellcheck a.sh`) needs `shellcheck`"
        ),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1));

    // A Go module: the standard library is asked of the image's own Go.
    let go = Project::new("go", &[]).await;
    let out = doctor(go.path().to_path_buf()).await.expect("join");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[ OK ] go imports: every import of 2 .go files resolves (standard library checked against the image's)"),
        "{text}"
    );
    let gaps = Project::new(
        "",
        &[
            (
                "go.mod",
                "module example.com/gap

go 1.99
",
            ),
            (
                "gap.go",
                "package gap

import (
	\"math/big\"
	\"net/http\"
	\"no/such/std\"
	\"github.com/x/absent\"
)

var _ = big.NewInt
var _ = http.Get
",
            ),
        ],
    )
    .await;
    let out = doctor(gaps.path().to_path_buf()).await.expect("join");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("[WARN] go toolchain: go.mod asks for go 1.99 and the image has go1."),
        "{text}"
    );
    assert!(
        text.contains(
            "[WARN] go imports: no/such/std (imported by gap.go) is not a standard package of go1."
        ),
        "{text}"
    );
    assert!(
        text.contains("[WARN] go imports: github.com/x/absent (imported by gap.go) is provided by no `require` of go.mod"),
        "{text}"
    );
    assert!(
        !text.contains("math/big"),
        "the standard library is found: {text}"
    );
}
