//! The binary's behaviour: exit codes, errors, doctor, gc, probe.

use crate::support;

use std::collections::HashMap;
use std::process::{Command, Output};

use minicoder::owner::ProcessIdentity;
use minicoder::sandbox::labels;

fn minicoder(args: &[&str], env: &[(&str, &str)]) -> Output {
    let state = support::state_dir();
    let mut cmd = Command::new(support::bin());
    cmd.args(args).env("MINICODER_STATE_DIR", state.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run minicoder")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn resume_of_an_unknown_run_is_a_usage_error() {
    let state = support::state_dir();
    let out = minicoder(
        &["resume", "r1", "--non-interactive"],
        &[("MINICODER_STATE_DIR", state.path().to_str().expect("utf-8"))],
    );
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("r1"), "{err}");
    let out = minicoder(&["resume", "r1", "--events"], &[]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--non-interactive"), "{err}");
}

#[test]
fn the_full_screen_session_needs_a_terminal_and_a_repository() {
    // Run from a directory that is not in a Git repository.
    let outside = tempfile::tempdir().expect("tempdir");
    let out = std::process::Command::new(support::bin())
        .current_dir(outside.path())
        .output()
        .expect("minicoder runs");
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("is not in a Git repository"), "{err}");

    // With output going to a pipe there is no terminal to draw on.
    let out = minicoder(&["run", ".", "task"], &[]);
    let (stdout, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs a terminal") && err.contains("--non-interactive"),
        "{err}"
    );
    assert!(
        stdout.is_empty(),
        "nothing may be drawn on a pipe: {stdout}"
    );

    let missing = minicoder(&["run", "/nonexistent/repo", "task"], &[]);
    let (_, err) = text(&missing);
    assert_eq!(missing.status.code(), Some(2), "{err}");
    assert!(err.contains("/nonexistent/repo does not exist"), "{err}");

    let theme = minicoder(&["run", ".", "task", "--theme", "nope"], &[]);
    let (_, err) = text(&theme);
    assert_eq!(theme.status.code(), Some(2));
    assert!(
        err.contains("no theme named `nope`") && err.contains("high-contrast"),
        "{err}"
    );
}

#[test]
fn a_conflicting_user_keymap_is_refused_naming_both_bindings() {
    let config = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        config.path().join("keymap.toml"),
        "[review]\n\"X\" = \"toggle-hunk\"\n\"shift-x\" = \"apply\"\n",
    )
    .expect("keymap");
    let dir = config.path().to_str().expect("utf-8");
    let out = minicoder(&["run", ".", "task"], &[("MINICODER_CONFIG_DIR", dir)]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("[review]") && err.contains("toggle-hunk") && err.contains("apply"),
        "{err}"
    );
}

#[test]
fn invalid_usage_exits_2() {
    let out = minicoder(&["frobnicate"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let out = minicoder(&["run", ".", "t", "--network", "maybe"], &[]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_missing_docker_daemon_is_one_clear_line_and_exit_1() {
    for host in ["unix:///nonexistent/docker.sock", "tcp://127.0.0.1:9"] {
        for args in [&["sandbox", "probe"][..], &["sandbox", "build"], &["gc"]] {
            let out = minicoder(args, &[("DOCKER_HOST", host)]);
            let (_, err) = text(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?} {host}: {err}");
            assert!(!err.contains("panicked"), "{err}");
            let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "one line: {err}");
            assert!(
                lines[0].starts_with("error: Docker is not reachable"),
                "{err}"
            );
            assert!(lines[0].contains("Start the Docker daemon"), "{err}");
        }
    }
}

#[test]
fn doctor_reports_keys_without_printing_them() {
    let secret = "sk-test-4f9a8b7c6d5e4f3a2b1c";
    let out = minicoder(
        &["doctor"],
        &[
            ("OPENAI_API_KEY", secret),
            ("GEMINI_API_KEY", ""),
            ("DOCKER_HOST", "unix:///nonexistent.sock"),
        ],
    );
    let (stdout, stderr) = text(&out);
    assert!(
        !stdout.contains(secret) && !stderr.contains(secret),
        "a key was printed"
    );
    assert!(stdout.contains("OPENAI_API_KEY is set"), "{stdout}");
    assert!(stdout.contains("GEMINI_API_KEY is not set"), "{stdout}");
    assert!(stdout.contains("[FAIL] docker"), "{stdout}");
    assert_eq!(out.status.code(), Some(1), "a FAIL line means exit 1");
}

/// `minicoder doctor` in `dir` with no Docker to reach: its stdout.
fn doctor_offline(dir: &std::path::Path, state: &std::path::Path) -> String {
    let out = Command::new(support::bin())
        .arg("doctor")
        .current_dir(dir)
        .env("MINICODER_STATE_DIR", state)
        .env("DOCKER_HOST", "unix:///nonexistent.sock")
        .output()
        .expect("run minicoder");
    text(&out).0
}

#[test]
fn doctor_in_a_repository_lists_its_instruction_files() {
    let repo = tempfile::tempdir().expect("tempdir");
    support::write(&repo.path().join("AGENTS.md"), b"Use tabs.\n");
    support::write(&repo.path().join("pkg/AGENTS.md"), b"Package rules.\n");
    support::write(&repo.path().join("requirements.txt"), b"requests==2.32.3\n");
    support::git(repo.path(), &["init", "-q"]);
    support::git(
        repo.path(),
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            "160000,1111111111111111111111111111111111111111,vendor/lib",
        ],
    );
    let state = support::state_dir();
    let stdout = doctor_offline(&repo.path().join("pkg"), state.path());
    assert!(
        stdout.contains("[ OK ] project instructions: AGENTS.md (10 bytes)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[ OK ] project instructions: pkg/AGENTS.md (15 bytes)"),
        "{stdout}"
    );
    // What would stand in a run's way: dependencies nothing installs, and
    // a submodule.
    assert!(
        stdout.contains(
            "[WARN] dependencies: requirements.txt declares dependencies that no bootstrap installs"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("/deps/venv/bin/pip install -r requirements.txt"),
        "{stdout}"
    );
    assert!(
        stdout.contains("[WARN] submodules: vendor/lib: not checked out"),
        "{stdout}"
    );
}

#[test]
fn doctor_names_the_build_outputs_a_check_would_leave_in_the_tree() {
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/eval/fixtures/c");
    let repo = tempfile::tempdir().expect("tempdir");
    for name in ["Makefile", "clamp.c", "clamp.h", "test_clamp.c"] {
        std::fs::copy(fixture.join(name), repo.path().join(name)).expect("copy");
    }
    support::write(&repo.path().join(".gitignore"), b"*.o\n");
    support::git(repo.path(), &["init", "-q"]);
    let state = support::state_dir();
    let doctor = || doctor_offline(repo.path(), state.path());
    let stdout = doctor();
    assert!(
        stdout.contains("[WARN] check outputs: `make-test` writes libclamp.a, test_clamp into the tree, which no ignore rule covers"),
        "{stdout}"
    );
    support::write(&repo.path().join(".gitignore"), b"*.o\n*.a\n/test_clamp\n");
    let stdout = doctor();
    assert!(
        stdout.contains("[ OK ] check outputs: `make-test` builds clamp.o, libclamp.a, test_clamp, which the ignore rules cover"),
        "{stdout}"
    );
    // Without Docker, a Go module's imports are still read against go.mod.
    let go = tempfile::tempdir().expect("tempdir");
    support::write(
        &go.path().join("go.mod"),
        b"module example.com/m\n\ngo 1.22\n",
    );
    support::write(
        &go.path().join("m.go"),
        b"package m\n\nimport \"github.com/x/absent\"\n",
    );
    support::git(go.path(), &["init", "-q"]);
    let stdout = doctor_offline(go.path(), state.path());
    assert!(
        stdout.contains("[WARN] go imports: github.com/x/absent (imported by m.go) is provided by no `require` of go.mod"),
        "{stdout}"
    );
}

#[test]
fn doctor_outside_a_repository_says_so() {
    let state = support::state_dir();
    let outside = tempfile::tempdir().expect("tempdir");
    let stdout = doctor_offline(outside.path(), state.path());
    assert!(!stdout.contains("project instructions"));
    assert!(
        stdout.contains("[WARN] project: not inside a Git repository"),
        "{stdout}"
    );
}

#[tokio::test]
async fn gc_removes_containers_of_dead_owners_only() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let image = minicoder::sandbox::spec::image_from_env();
    let mut dead = ProcessIdentity::current();
    dead.start_ticks += 11;
    let mut ids = Vec::new();
    for owner in [dead, ProcessIdentity::current()] {
        let body = bollard::models::ContainerCreateBody {
            image: Some(image.clone()),
            cmd: Some(vec!["true".into()]),
            labels: Some(HashMap::from([
                (labels::MANAGED.to_string(), "true".to_string()),
                (labels::RUN.to_string(), "gc-test".to_string()),
                (labels::OWNER.to_string(), owner.to_label()),
            ])),
            ..Default::default()
        };
        ids.push(
            docker
                .create_container(None, body)
                .await
                .expect("create")
                .id,
        );
    }
    let out = tokio::task::spawn_blocking(|| minicoder(&["gc"], &[]))
        .await
        .expect("join");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(
        docker.inspect_container(&ids[0], None).await.is_err(),
        "dead owner's container stays: {stdout}"
    );
    assert!(
        docker.inspect_container(&ids[1], None).await.is_ok(),
        "a live owner's container was removed"
    );
    let _ = docker
        .remove_container(
            &ids[1],
            Some(bollard::query_parameters::RemoveContainerOptions {
                force: true,
                ..Default::default()
            }),
        )
        .await;
}

#[tokio::test]
async fn sandbox_probe_passes_every_check() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let out = tokio::task::spawn_blocking(|| minicoder(&["sandbox", "probe"], &[]))
        .await
        .expect("join");
    let (stdout, stderr) = text(&out);
    let pass = stdout.lines().filter(|l| l.starts_with("[PASS]")).count();
    let fail = stdout.lines().filter(|l| l.starts_with("[FAIL]")).count();
    assert_eq!(fail, 0, "{stdout}{stderr}");
    assert!(pass >= 8, "at least 8 checks: {stdout}");
    for name in [
        "workspace write allowed",
        "write outside the workspace denied",
        "network denied",
        "Docker socket absent",
        "host environment absent",
        "no survivors",
        "PID limit holds",
        "memory limit holds",
    ] {
        assert!(
            stdout.contains(&format!("[PASS] {name}")),
            "{name} missing: {stdout}"
        );
    }
    assert_eq!(out.status.code(), Some(0));
}

#[tokio::test]
async fn the_demo_fixes_the_fixture_in_the_real_sandbox() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let out = tokio::task::spawn_blocking(|| minicoder(&["demo"], &[]))
        .await
        .expect("join");
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("minicoder demo: Success"), "{stdout}");
    assert!(stdout.contains("verification: tests passed"), "{stdout}");
    assert!(stdout.contains("changed:   pagination.py"), "{stdout}");
    assert!(
        stdout.contains("source:    unchanged, byte for byte"),
        "{stdout}"
    );
    // The verifier, not the script, decided.
    assert!(
        stderr.contains("verification (Completion): passed"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("verification (Baseline): passed"),
        "the bug was in the baseline: {stderr}"
    );
    // Nothing of the run is left: no container, whatever was in flight.
    let docker = minicoder::sandbox::connect().await.expect("docker");
    let run_id = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split_whitespace().next())
        })
        .expect("the run id is printed");
    assert!(
        stdout
            .trim_end()
            .ends_with(&format!("next: minicoder apply {run_id}")),
        "the summary ends with the next step: {stdout}"
    );
    let left = support::containers_of_run(&docker, run_id).await;
    assert!(left.is_empty(), "containers left: {left:?}");
}

/// A repository of `files` small files, committed.
fn large_repo(files: usize) -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("tempdir");
    for i in 0..files {
        let dir = repo.path().join(format!("pkg{}", i % 50));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(format!("m{i}.py")), format!("X = {i}\n")).expect("write");
    }
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "init",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .status()
            .expect("git");
        assert!(status.success(), "git {args:?}");
    }
    repo
}

#[test]
fn a_model_misconfiguration_stops_the_run_before_any_workspace_or_docker() {
    let repo = large_repo(3_000);
    let repo_path = repo.path().to_str().expect("utf-8 path");
    for (env, says) in [
        (vec![("OPENAI_MODEL", "m")], "OPENAI_API_KEY is not set"),
        (
            vec![
                ("OPENAI_MODEL", "m"),
                ("OPENAI_API_KEY", "sk-test-0123456789abcdef"),
                ("OPENAI_BASE_URL", "https://minicoder-preflight.invalid/v1"),
            ],
            "cannot be reached: its host minicoder-preflight.invalid (from OPENAI_BASE_URL)",
        ),
    ] {
        let state = support::state_dir();
        let mut cmd = Command::new(support::bin());
        cmd.args([
            "run",
            repo_path,
            "a task",
            "--non-interactive",
            "--model",
            "openai",
        ])
        .env("MINICODER_STATE_DIR", state.path())
        // Docker is not asked for anything: a daemon that is not there
        // would be the error otherwise.
        .env("DOCKER_HOST", "unix:///nonexistent/minicoder-test.sock")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL");
        for (k, v) in &env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run minicoder");
        let (stdout, err) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{err}");
        let result: serde_json::Value =
            serde_json::from_str(stdout.trim()).expect("one JSON object");
        assert_eq!(result["outcome"], "failure");
        let reason = result["reason"].as_str().unwrap_or_default();
        assert!(reason.contains(says), "{reason}");
        // Only the log directory and the empty one libgit2's config search
        // points at: no workspace, checkpoint store or run.
        let mut made: Vec<_> = std::fs::read_dir(state.path())
            .map(|d| d.flatten().map(|e| e.file_name()).collect())
            .unwrap_or_default();
        made.sort();
        assert_eq!(
            made,
            ["git-config-empty", "logs"],
            "nothing is created before the model is checked"
        );
    }
}

#[test]
fn git_config_isolation_reuses_one_private_empty_directory() {
    use std::os::unix::fs::PermissionsExt;
    let state = support::state_dir();
    for _ in 0..2 {
        let out = minicoder(
            &["runs", "--json"],
            &[("MINICODER_STATE_DIR", state.path().to_str().expect("utf-8"))],
        );
        assert!(out.status.success(), "{:?}", text(&out));
    }
    let dir = state.path().join("git-config-empty");
    let meta = std::fs::symlink_metadata(&dir).expect("the directory");
    assert!(meta.is_dir());
    assert_eq!(meta.permissions().mode() & 0o077, 0, "private");
    assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0, "empty");
}

/// `minicoder run REPO TASK --non-interactive` without `--model`, with
/// `env` added and the configuration directory `config`.
async fn run_without_model_flag(
    repo: &support::repo_run::Repo,
    config: &std::path::Path,
    env: &[(&str, &str)],
) -> (std::process::Output, serde_json::Value) {
    let mut cmd = repo.command(&["run"]);
    cmd.arg(repo.path())
        .arg("Fix the pagination bug")
        .arg("--non-interactive")
        .env("MINICODER_CONFIG_DIR", config)
        .env_remove("MINICODER_MODEL")
        .env_remove("MINICODER_FREE_TIER_CONFIRMED");
    for (name, value) in env {
        cmd.env(name, value);
    }
    // (Off the test's runtime, which serves the mock model.)
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("minicoder runs"))
        .await
        .expect("join");
    let result = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim())
        .unwrap_or(serde_json::Value::Null);
    (out, result)
}

#[tokio::test]
async fn a_model_chosen_once_in_config_toml_or_the_environment_needs_no_flag() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = support::repo_run::Repo::new(&[]).await;
    let config = tempfile::tempdir().unwrap();

    // Nothing chosen: refused, and the refusal names the line that fixes it.
    let (out, _) = run_without_model_flag(&repo, config.path(), &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"`model = "openai"` in config.toml"#),
        "{stderr}"
    );

    // MINICODER_MODEL chooses it.
    repo.fix_only();
    let (out, result) =
        run_without_model_flag(&repo, config.path(), &[("MINICODER_MODEL", "openai")]).await;
    assert_eq!(
        result["outcome"],
        "success",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(result["model"]["provider"], "openai", "{result}");

    // So does one line of config.toml.
    std::fs::write(config.path().join("config.toml"), "model = \"openai\"\n").unwrap();
    repo.fix_only();
    let (out, result) = run_without_model_flag(&repo, config.path(), &[]).await;
    assert_eq!(
        result["outcome"],
        "success",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(result["model"]["provider"], "openai", "{result}");
}
