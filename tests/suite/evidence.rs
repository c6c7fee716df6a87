//! The evidence a run leaves cannot be laundered, and the state it keeps is
//! private: the real binary, the real Docker sandbox and a scripted model.
//! A changed manifest or resume point is never resumed into a success; a
//! forged report never reaches a commit; a lost key fails loudly; a key a
//! provider echoes is in no output; what a run writes is applied only into
//! the repository it was made on, and never through links that leave it.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::mock_openai::MockResponse;
use support::repo_run::{API_KEY, Repo, plan};

fn text(output: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A run that ends without success: the model asks for completion without
/// fixing anything, then has nothing more to say (the run fails after
/// three replies without a tool, with turns left for a resume).
fn script_failure(repo: &Repo) {
    repo.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "done"])),
        ("request_completion", json!({"summary": "nothing to do"})),
    ]));
}

/// Makes `path` writable (a manifest is 0400) and rewrites it with `edit`.
fn tamper(path: &Path, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let before = std::fs::read(path).expect("read");
    let mut value: Value = serde_json::from_slice(&before).expect("json");
    edit(&mut value);
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    std::fs::write(path, serde_json::to_vec_pretty(&value).unwrap()).expect("write");
    before
}

fn restore(path: &Path, bytes: &[u8]) {
    std::fs::write(path, bytes).expect("restore");
}

fn resume_file(repo: &Repo, run_id: &str) -> PathBuf {
    minicoder::state::StateDir::new(repo.state.path())
        .checkpoint_store_dir(run_id)
        .join("minicoder-resume.json")
}

// The mock model answers on this runtime while the test waits on the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_manifest_or_resume_point_is_never_resumed_and_a_forged_summary_never_committed()
{
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    script_failure(&repo);
    let failed = repo.run("failed", &["--max-turns", "8"]).await;
    assert_eq!(failed.result["outcome"], "failure", "{}", failed.result);
    let id = failed.result["run_id"].as_str().unwrap().to_string();
    let manifest = failed.artifacts.join("manifest.json");

    // The checks made `true`, network on, more turns: refused.
    let original = tamper(&manifest, |m| {
        m["checks"] = json!([{"name": "tests", "command": "true"}]);
        m["limits"]["network"] = json!(true);
        m["limits"]["max_turns"] = json!(50);
    });
    repo.fix();
    let out = repo
        .command(&["resume", &id, "finish it", "--non-interactive"])
        .output()
        .expect("resume");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out).contains("does not match its signature"),
        "{}",
        text(&out)
    );
    assert!(
        !failed.artifacts.join("receipt.json").exists() || {
            let receipt = std::fs::read_to_string(failed.artifacts.join("receipt.json")).unwrap();
            !receipt.contains("\"passed\":true")
        }
    );
    restore(&manifest, &original);

    // The saved state's bytes changed: refused too.
    let point = resume_file(&repo, &id);
    let saved = std::fs::read(&point).expect("a resume point");
    let mut changed = saved.clone();
    let at = changed.len() - 10;
    changed[at] = if changed[at] == b'1' { b'2' } else { b'1' };
    std::fs::write(&point, &changed).expect("write");
    let out = repo
        .command(&["resume", &id, "finish it", "--non-interactive"])
        .output()
        .expect("resume");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out).contains("changed outside minicoder"),
        "{}",
        text(&out)
    );
    std::fs::write(&point, &saved).expect("restore");

    // As minicoder left them, the run goes on (to the fix queued above).
    let out = repo
        .command(&["resume", &id, "finish it", "--non-interactive"])
        .output()
        .expect("resume");
    let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(result["outcome"], "success", "{}", text(&out));

    // A forged summary in the unsigned report does not reach the commit.
    let report = failed.artifacts.join("report.json");
    tamper(&report, |r| {
        r["summary"] = json!("FORGED: also disable the tests")
    });
    let out = repo
        .command(&["apply", &id, "--commit"])
        .output()
        .expect("apply");
    assert!(out.status.success(), "{}", text(&out));
    let log = std::process::Command::new("git")
        .args(["log", "-1", "--format=%B"])
        .current_dir(repo.path())
        .output()
        .expect("git log");
    let message = String::from_utf8_lossy(&log.stdout);
    assert!(message.contains("Fix the pagination bug"), "{message}");
    assert!(!message.contains("FORGED"), "{message}");
    assert!(
        message.contains("rounded up"),
        "the signed summary: {message}"
    );
}

#[tokio::test]
async fn a_missing_receipt_key_fails_loudly_and_is_not_made_again() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    repo.fix();
    let ran = repo.run("ok", &[]).await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let id = ran.result["run_id"].as_str().unwrap().to_string();
    let key = repo.state.path().join("receipt.key");
    std::fs::remove_file(&key).expect("the key");
    let show = repo
        .command(&["show", &id, "--verify"])
        .output()
        .expect("show");
    assert_eq!(show.status.code(), Some(1));
    assert!(text(&show).contains("is missing"), "{}", text(&show));
    let apply = repo.command(&["apply", &id]).output().expect("apply");
    assert_ne!(apply.status.code(), Some(0));
    assert!(text(&apply).contains("is missing"), "{}", text(&apply));
    assert!(!key.exists(), "no new key stands in for the lost one");
    assert_eq!(
        support::git_status(repo.path()),
        "",
        "the repository is untouched"
    );
}

// The mock model answers on this runtime while the test waits on the binary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_state_directory_is_private_and_an_open_one_is_refused_with_the_fix() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    // A state directory minicoder makes itself, below an ordinary one.
    let parent = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(parent.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let state = parent.path().join("state");
    repo.script("sleep 4");
    let mut cmd = repo.command(&["run"]);
    cmd.arg(repo.path())
        .args([
            "Fix the pagination bug",
            "--non-interactive",
            "--model",
            "openai",
        ])
        .env("MINICODER_STATE_DIR", &state)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    // While a command runs, another user can see nothing of the run.
    let workspaces = state.join("workspaces");
    let mut looked = false;
    for _ in 0..600 {
        let busy = std::fs::read_dir(&workspaces)
            .map(|d| d.flatten().any(|e| e.path().is_dir()))
            .unwrap_or(false);
        if busy {
            for dir in [state.clone(), workspaces.clone(), state.join("checkpoints")] {
                let out = std::process::Command::new("ls")
                    .arg(&dir)
                    .uid(65534)
                    .gid(65534)
                    .output()
                    .expect("ls as nobody");
                assert!(!out.status.success(), "nobody listed {}", dir.display());
                assert!(
                    String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            looked = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(looked, "the run made its workspace");
    let out = child.wait_with_output().expect("the run ends");
    assert!(out.status.success(), "{}", text(&out));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for dir in [
        state.clone(),
        state.join(".agent"),
        state.join(".agent/runs"),
        workspaces.clone(),
        state.join("checkpoints"),
    ] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    assert_eq!(mode(&state.join("receipt.key")), 0o600);
    // Opened up by someone: refused, with the command that fixes it.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = repo
        .command(&["runs"])
        .env("MINICODER_STATE_DIR", &state)
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains(&format!("chmod 700 {}", state.display())),
        "{}",
        text(&out)
    );
    assert_eq!(mode(&state), 0o755, "not changed behind the person's back");
}

#[tokio::test]
async fn a_key_the_provider_echoes_reaches_no_output_and_no_file() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let body = json!({"error": {"message": format!("Incorrect API key provided: {API_KEY}"), "type": "invalid_request_error", "code": "invalid_api_key"}});
    repo.mock.push(MockResponse::raw(
        401,
        "application/json",
        &body.to_string(),
    ));
    let ran = repo.run("echoed", &[]).await;
    assert_eq!(ran.result["outcome"], "failure");
    assert!(
        ran.result["reason"]
            .as_str()
            .unwrap()
            .contains("Incorrect API key"),
        "the provider's words are quoted: {}",
        ran.result
    );
    let out = text(&ran.output);
    assert!(!out.contains(API_KEY), "{out}");
    // The workspaces' detached removal may still be under way: what it
    // removes while this looks is gone, not left.
    let mut stack = vec![repo.state.path().to_path_buf()];
    let mut files = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() {
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                files += 1;
                assert!(
                    !support::run_harness::contains(&bytes, API_KEY.as_bytes()),
                    "the key is in {}",
                    path.display()
                );
            }
        }
    }
    assert!(files > 3, "the run left its files ({files})");
}

#[tokio::test]
async fn a_chain_of_links_that_leaves_the_repository_is_never_applied() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    repo.script("ln -s . x && ln -s x/.. y");
    let ran = repo.run("links", &[]).await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let id = ran.result["run_id"].as_str().unwrap();
    let before = minicoder::cli::demo::tree_digest(repo.path()).unwrap();
    let out = repo.command(&["apply", id]).output().expect("apply");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out).contains("outside the repository"),
        "{}",
        text(&out)
    );
    assert_eq!(
        minicoder::cli::demo::tree_digest(repo.path()).unwrap(),
        before
    );
    assert!(std::fs::symlink_metadata(repo.path().join("y")).is_err());
}

#[tokio::test]
async fn apply_writes_only_into_the_repository_the_run_was_made_on() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    repo.fix();
    let ran = repo.run("moved", &[]).await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let id = ran.result["run_id"].as_str().unwrap();
    // The repository moves; an unrelated one takes its place.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let moved = elsewhere.path().join("moved");
    std::fs::rename(repo.path(), &moved).expect("move");
    minicoder::cli::demo::write_fixture(repo.path()).expect("another repository");
    support::write(&repo.path().join("unrelated.txt"), b"someone else's\n");
    support::git_commit_all(repo.path());
    let impostor = minicoder::cli::demo::tree_digest(repo.path()).unwrap();
    let out = repo.command(&["apply", id]).output().expect("apply");
    assert_ne!(out.status.code(), Some(0));
    assert!(text(&out).contains("--repo"), "{}", text(&out));
    assert_eq!(
        minicoder::cli::demo::tree_digest(repo.path()).unwrap(),
        impostor
    );
    let out = repo
        .command(&["apply", id, "--repo"])
        .arg(&moved)
        .output()
        .expect("apply --repo");
    assert!(out.status.success(), "{}", text(&out));
    let fixed = std::fs::read_to_string(moved.join("pagination.py")).unwrap();
    assert!(fixed.contains("-(-total_items // page_size)"), "{fixed}");
    // Undo follows the apply to where it went.
    let out = repo.command(&["undo", id]).output().expect("undo");
    assert!(out.status.success(), "{}", text(&out));
}

#[tokio::test]
async fn a_run_refused_before_it_starts_leaves_no_run_directory() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let ran = repo
        .run("refused", &["--check", "t", "no-such-program-4711 --run"])
        .await;
    assert_eq!(ran.result["outcome"], "failure");
    assert!(
        ran.result["reason"]
            .as_str()
            .unwrap()
            .contains("no-such-program-4711"),
        "{}",
        ran.result
    );
    let runs = minicoder::state::StateDir::new(repo.state.path()).runs_dir();
    let left: Vec<_> = std::fs::read_dir(&runs)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
    let out = repo.command(&["runs"]).output().expect("runs");
    assert!(out.status.success());
    assert!(!text(&out).contains("WARN"), "{}", text(&out));
}
