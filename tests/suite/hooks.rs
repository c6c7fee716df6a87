//! The person's hooks with the real binary, the real sandbox and a scripted
//! model: a `PreToolUse` hook that blocks a command (exit 2, its stderr to
//! the model) and one that rewrites a command; a `PreApply` hook that vetoes
//! an apply, leaving the repository untouched, and a `PostApply` hook that
//! hears of one; `doctor` listing them.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;
use support::mock_openai::{MockResponse, RecordedRequest};
use support::repo_run::{API_KEY, Repo, plan};

/// The tool results the model was sent in `requests`, in order.
fn tool_results(requests: &[RecordedRequest]) -> Vec<String> {
    requests
        .iter()
        .flat_map(|r| r.messages())
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// What `minicoder doctor` prints in `repo` with the hooks of `config`.
fn doctor(repo: &Repo, config: &Path) -> String {
    let mut doctor = repo.command(&["doctor"]);
    doctor
        .env("MINICODER_CONFIG_DIR", config)
        .current_dir(repo.path());
    String::from_utf8_lossy(&doctor.output().unwrap().stdout).into_owned()
}

/// A private configuration directory holding `hooks.json` (0600) with
/// `hooks`, and the scripts it names.
fn config_dir(hooks: serde_json::Value, scripts: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("config dir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    for (name, text) in scripts {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let text = hooks
        .to_string()
        .replace("$DIR", &dir.path().display().to_string());
    let file = dir.path().join("hooks.json");
    std::fs::write(&file, text).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    dir
}

const POLICY: &str = r#"#!/bin/sh
input=$(cat)
env > "$(dirname "$0")/hook-env"
case "$input" in
  *'rm -rf'*) echo "rm -rf is not allowed here" >&2; exit 2 ;;
  *'echo original'*) printf '%s' '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo rewritten"}}}' ;;
esac
exit 0
"#;

const LINT: &str = r#"#!/bin/sh
cat > /dev/null
printf '%s' '{"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "lint: 2 warnings"}}'
"#;

#[tokio::test]
async fn a_pre_tool_hook_blocks_one_command_rewrites_another_and_is_in_the_event_chain() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let config = config_dir(
        json!({"hooks": {
            "PreToolUse": [{"matcher": "run_shell",
                "hooks": [{"type": "command", "command": "sh $DIR/policy.sh"}]}],
            "PostToolUse": [{"matcher": "run_shell",
                "hooks": [{"type": "command", "command": "sh $DIR/lint.sh"}]}]
        }}),
        &[("policy.sh", POLICY), ("lint.sh", LINT)],
    );
    repo.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        ("run_shell", json!({"command": "rm -rf ./*"})),
    ]));
    repo.mock.push(MockResponse::tool_calls(&[(
        "run_shell",
        json!({"command": "echo original"}),
    )]));
    repo.fix();
    let ran = repo
        .run_with("hooks", &[], &[("MINICODER_CONFIG_DIR", config.path())])
        .await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());

    // What the model was told after each command.
    let requests = repo.mock.requests();
    let tool_text = |i: usize| -> String { tool_results(&requests[i..=i]).join("\n") };
    assert!(
        tool_text(1).contains("Blocked by a PreToolUse hook: rm -rf is not allowed here"),
        "{}",
        tool_text(1)
    );
    assert!(
        !tool_text(1).contains("lint: 2 warnings"),
        "a blocked call ran no PostToolUse hook"
    );
    let second = tool_text(2);
    assert!(second.contains("rewritten"), "{second}");
    assert!(
        second.contains("From a PostToolUse hook: lint: 2 warnings"),
        "{second}"
    );
    assert!(!second.contains("original\n"), "{second}");
    // The blocked command never ran: every file is still there.
    assert!(!ran.patch().contains("deleted file"), "{}", ran.patch());

    let hooks: Vec<serde_json::Value> = ran
        .events()
        .into_iter()
        .filter(|e| e["type"] == "hook.ran" && e["event"] == "PreToolUse")
        .collect();
    let decisions: Vec<(String, i64)> = hooks
        .iter()
        .map(|e| {
            (
                e["decision"].as_str().unwrap().to_string(),
                e["exit"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decisions[..2],
        [("block".to_string(), 2), ("allow".to_string(), 0)],
        "{hooks:?}"
    );
    let post = ran
        .events()
        .into_iter()
        .filter(|e| e["type"] == "hook.ran" && e["event"] == "PostToolUse")
        .count();
    assert_eq!(
        post, 1,
        "one PostToolUse hook, after the one command that ran"
    );
    let rewritten = ran
        .event("tool.rewritten")
        .expect("the rewrite is recorded");
    assert_eq!(rewritten["arguments"], r#"{"command":"echo rewritten"}"#);
    // The events, hooks included, verify as one chain.
    let run_id = ran.result["run_id"].as_str().unwrap();
    let verify = repo
        .command(&["show", run_id, "--verify"])
        .output()
        .unwrap();
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    // No provider key reached the hook.
    let env = std::fs::read_to_string(config.path().join("hook-env")).unwrap();
    assert!(
        !env.contains(API_KEY) && !env.contains("OPENAI_API_KEY"),
        "{env}"
    );
}

const SCANNER: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"hook_event_name":"PreApply"'*'total_items // page_size'*) echo "secret scanner: the patch holds a forbidden line" >&2; exit 2 ;;
esac
exit 0
"#;

const RECORDER: &str = r#"#!/bin/sh
cat > "$(dirname "$0")/post-apply.json"
"#;

#[tokio::test]
async fn a_pre_apply_hook_vetoes_an_apply_and_a_post_apply_hook_hears_of_one() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let none = config_dir(json!({"hooks": {}}), &[]);
    repo.fix_only();
    let ran = repo
        .run_with("to apply", &[], &[("MINICODER_CONFIG_DIR", none.path())])
        .await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let run_id = ran.result["run_id"].as_str().unwrap().to_string();
    let before = minicoder::cli::demo::tree_digest(repo.path()).unwrap();

    let veto = config_dir(
        json!({"hooks": {
            "PreApply": [{"hooks": [{"type": "command", "command": "sh $DIR/scan.sh"}]}],
            "PreCompact": [{"hooks": [{"type": "command", "command": "true"}]}],
            "PreToolUse": [{"matcher": "Bash|Edit", "hooks": [{"type": "command", "command": "false"}]}]
        }}),
        &[("scan.sh", SCANNER)],
    );
    let apply = |config: &Path| {
        let mut cmd = repo.command(&["apply", &run_id]);
        cmd.env("MINICODER_CONFIG_DIR", config)
            .current_dir(repo.path());
        cmd.output().unwrap()
    };
    let out = apply(veto.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "refused by a PreApply hook: secret scanner: the patch holds a forbidden line; nothing was written"
        ),
        "{stderr}"
    );
    assert_eq!(
        minicoder::cli::demo::tree_digest(repo.path()).unwrap(),
        before,
        "the repository changed"
    );

    // doctor lists the hook and where it runs.
    let listed = doctor(&repo, veto.path());
    assert!(
        listed.contains("[ OK ] hook: PreApply: `sh ")
            && listed.contains("runs on the host")
            && listed.contains("[ OK ] hook: PreCompact: `true` runs on the host")
            && listed
                .contains("[WARN] hook: PreToolUse on tools `Bash|Edit`: `false` runs for no tool"),
        "{listed}"
    );

    // A hook that edits the file the patch changes: the apply is refused,
    // and the hook's edit is not overwritten.
    let meddler = config_dir(
        json!({"hooks": {"PreApply": [{"hooks": [{"type": "command",
            "command": "cat > /dev/null; echo '# formatted' >> pagination.py"}]}]}}),
        &[],
    );
    let out = apply(meddler.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("changed where the patch applies while the PreApply hooks ran"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(repo.path().join("pagination.py")).unwrap();
    assert!(text.ends_with("# formatted\n") && text.contains("return total_items // page_size"));
    support::git(repo.path(), &["checkout", "--", "pagination.py"]);

    let post = config_dir(
        json!({"hooks": {"PostApply": [{"hooks": [{"type": "command", "command": "sh $DIR/record.sh"}]}]}}),
        &[("record.sh", RECORDER)],
    );
    let out = apply(post.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let heard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(post.path().join("post-apply.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(heard["hook_event_name"], "PostApply");
    assert_eq!(heard["run_id"], run_id.as_str());
    assert_eq!(heard["changed_files"][0]["path"], "pagination.py");
    assert!(
        std::fs::read_to_string(repo.path().join("pagination.py"))
            .unwrap()
            .contains("-(-total_items // page_size)")
    );
}

const STOP_ONCE: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"stop_hook_active":false'*) echo "run the linter first" >&2; exit 2 ;;
esac
exit 0
"#;

#[tokio::test]
async fn a_stop_hook_refuses_the_first_end_and_the_model_hears_why() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let config = config_dir(
        json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "sh $DIR/stop.sh"}]}]}}),
        &[("stop.sh", STOP_ONCE)],
    );
    repo.fix_only();
    repo.mock.push(MockResponse::tool_calls(&[(
        "request_completion",
        json!({"summary": "linted, and rounded up"}),
    )]));
    let ran = repo
        .run_with("stop", &[], &[("MINICODER_CONFIG_DIR", config.path())])
        .await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let requests = repo.mock.requests();
    let last = tool_results(&requests[requests.len() - 1..]);
    let told = last
        .iter()
        .any(|c| c.contains("a Stop hook refused the end of the run: run the linter first"));
    assert!(told, "{last:?}");
    let stops: Vec<(String, i64)> = ran
        .events()
        .into_iter()
        .filter(|e| e["type"] == "hook.ran" && e["event"] == "Stop")
        .map(|e| {
            (
                e["decision"].as_str().unwrap().to_string(),
                e["exit"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        stops,
        [("block".to_string(), 2), ("continue".to_string(), 0)]
    );
}

const SESSION: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"hook_event_name":"SessionStart"'*) echo "branch policy: small commits" ;;
  *'"hook_event_name":"UserPromptSubmit"'*'"prompt":"Fix the pagination bug"'*)
    if [ -e "$(dirname "$0")/refuse" ]; then echo "no pagination work today" >&2; exit 2; fi
    printf '%s' '{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "ticket PAG-7"}}' ;;
  *'"hook_event_name":"UserPromptSubmit"'*'"prompt":"forbidden'*) echo "not that follow-up" >&2; exit 2 ;;
  *'"hook_event_name":"SessionEnd"'*) printf '%s' "$input" > "$(dirname "$0")/ended.json" ;;
esac
exit 0
"#;

#[tokio::test]
async fn session_and_prompt_hooks_add_context_refuse_a_task_and_hear_the_end() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let hook = json!([{"hooks": [{"type": "command", "command": "sh $DIR/session.sh"}]}]);
    let config = config_dir(
        json!({"hooks": {"SessionStart": hook, "UserPromptSubmit": hook, "SessionEnd": hook}}),
        &[("session.sh", SESSION)],
    );
    repo.fix_only();
    let env = [("MINICODER_CONFIG_DIR", config.path())];
    let ran = repo.run_with("session", &[], &env).await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let first = repo.mock.requests()[0].messages();
    let users: Vec<&str> = first
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        users
            .iter()
            .any(|u| u.contains("SessionStart hook:\nbranch policy: small commits")),
        "{users:?}"
    );
    assert!(
        users
            .iter()
            .any(|u| u.contains("UserPromptSubmit hook:\nticket PAG-7")),
        "{users:?}"
    );
    let ended: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(config.path().join("ended.json")).unwrap())
            .unwrap();
    assert_eq!(ended["outcome"], "success");
    assert_eq!(ended["session_id"], ran.result["run_id"]);

    // A task the hook refuses never reaches the model.
    std::fs::write(config.path().join("refuse"), "").unwrap();
    let before = repo.mock.request_count();
    let refused = repo.run_with("refused", &[], &env).await;
    assert_eq!(
        refused.result["outcome"],
        "cancelled",
        "{}",
        refused.stderr()
    );
    assert!(
        refused.result["reason"]
            .as_str()
            .unwrap()
            .contains("a UserPromptSubmit hook refused the task: no pagination work today"),
        "{}",
        refused.result
    );
    assert_eq!(repo.mock.request_count(), before, "no model request");

    // A resumed run's follow-up goes through the same hooks.
    let run_id = ran.result["run_id"].as_str().unwrap().to_string();
    let mut resume = repo.command(&[
        "resume",
        &run_id,
        "forbidden: delete the tests",
        "--non-interactive",
    ]);
    resume.env("MINICODER_CONFIG_DIR", config.path());
    let out = resume.output().unwrap();
    let result: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim())
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(result["outcome"], "failure", "{result}");
    assert_ne!(out.status.code(), Some(0));
    assert!(
        result["reason"]
            .as_str()
            .unwrap()
            .contains("a UserPromptSubmit hook refused the follow-up: not that follow-up"),
        "{result}"
    );
    assert_eq!(repo.mock.request_count(), before, "no model request");
}

const PERMIT: &str = r#"#!/bin/sh
input=$(cat)
case "$input" in
  *'"path":"pagination.py"'*) printf '%s' '{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "permissionDecision": "allow"}}' ;;
  *) echo "only pagination.py may change" >&2; exit 2 ;;
esac
"#;

#[tokio::test]
async fn a_permission_hook_answers_each_approval_of_a_headless_run() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let repo = Repo::new(&[]).await;
    let config = config_dir(
        json!({"hooks": {"PermissionRequest": [{"matcher": "edit_file",
            "hooks": [{"type": "command", "command": "sh $DIR/permit.sh"}]}]}}),
        &[("permit.sh", PERMIT)],
    );
    // Without such a hook, nobody could answer.
    let none = config_dir(json!({"hooks": {}}), &[]);
    let refused = repo
        .run_with(
            "no hooks",
            &["--approval", "each"],
            &[("MINICODER_CONFIG_DIR", none.path())],
        )
        .await;
    assert_eq!(
        refused.output.status.code(),
        Some(2),
        "{}",
        refused.stderr()
    );
    repo.fix_only();
    let ran = repo
        .run_with(
            "permitted",
            &["--approval", "each"],
            &[("MINICODER_CONFIG_DIR", config.path())],
        )
        .await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let resolved = ran
        .event("approval.resolved")
        .expect("the approval was answered");
    assert_eq!(resolved["approved"], true, "{resolved}");
    let hook = ran.event("hook.ran").expect("the hook ran");
    assert_eq!(hook["event"], "PermissionRequest");
    assert_eq!(hook["decision"], "allow");
}

#[tokio::test]
async fn a_trusted_repositorys_hooks_run_in_the_sandbox_and_an_untrusted_ones_not_at_all() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let host = tempfile::tempdir().expect("host dir");
    let planted = host.path().join("planted-on-the-host");
    std::fs::write(&planted, "host").unwrap();
    let hook = format!(
        "cat > /dev/null; if [ -e {} ]; then printf '%s' '{{\"additionalContext\": \"HOST FILE SEEN\"}}'; \
         else printf '{{\"additionalContext\": \"repo lint in %s: ok\"}}' \"$(pwd)\"; fi",
        planted.display()
    );
    let hooks = json!({"hooks": {
        "PostToolUse": [{"matcher": "run_shell", "hooks": [{"type": "command", "command": hook}]}],
        "PreToolUse": [{"matcher": "run_shell", "hooks": [{"type": "command",
            "command": "grep -q 'rm -rf' && { echo 'the repository forbids rm -rf' >&2; exit 2; }; exit 0"}]}]
    }});
    let repo = Repo::new(&[(".minicoder/hooks.json", &hooks.to_string())]).await;
    let none = config_dir(json!({"hooks": {}}), &[]);
    let env = [("MINICODER_CONFIG_DIR", none.path())];
    let script = |repo: &Repo, first: &str| {
        repo.mock.push(MockResponse::tool_calls(&[
            ("update_plan", plan(["in_progress", "pending"])),
            ("run_shell", json!({"command": first})),
        ]));
        repo.mock.push(MockResponse::tool_calls(&[(
            "run_shell",
            json!({"command": "echo hello"}),
        )]));
        repo.fix();
    };
    script(&repo, "rm -rf ./*");
    let ran = repo.run_with("trusted", &["--trust-project"], &env).await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    let told = tool_results(&repo.mock.requests());
    assert!(
        told.iter()
            .any(|t| t.contains("Blocked by a PreToolUse hook: the repository forbids rm -rf")),
        "{told:?}"
    );
    assert!(
        told.iter()
            .any(|t| t.contains("From a PostToolUse hook: repo lint in /workspace: ok")),
        "{told:?}"
    );
    assert!(
        !told.iter().any(|t| t.contains("HOST FILE SEEN")),
        "{told:?}"
    );
    let records: Vec<String> = ran
        .events()
        .into_iter()
        .filter(|e| e["type"] == "hook.ran")
        .map(|e| e["hook"].as_str().unwrap().to_string())
        .collect();
    assert!(
        !records.is_empty() && records.iter().all(|h| h.starts_with("repository: ")),
        "{records:?}"
    );

    let listed = doctor(&repo, none.path());
    assert!(
        listed.contains("[ OK ] repository hook: PreToolUse on tools `run_shell`: `grep -q")
            && listed.contains("runs in the run's sandbox, never on the host"),
        "{listed}"
    );

    // Untrusted, the same file runs nothing: what it would block runs.
    let before = repo.mock.request_count();
    script(&repo, "echo 'rm -rf' is only words");
    let ran = repo.run_with("untrusted", &[], &env).await;
    assert_eq!(ran.result["outcome"], "success", "{}", ran.stderr());
    assert!(ran.event("hook.ran").is_none());
    let later = tool_results(&repo.mock.requests()[before..]);
    assert!(
        !later.iter().any(|t| t.contains("repository forbids")),
        "{later:?}"
    );
}

/// Ctrl-C while a trusted repository's hook runs in the sandbox ends the run
/// at once, as during a command, instead of after the hook's timeout.
#[tokio::test(flavor = "multi_thread")]
async fn a_cancel_while_a_repository_hook_runs_does_not_wait_for_it() {
    let Some(_docker) = support::docker_or_skip().await else {
        return;
    };
    let hooks = json!({"hooks": {"PostToolUse": [{"matcher": "run_shell",
        "hooks": [{"type": "command", "command": "sleep 100", "timeout": 90}]}]}});
    let repo = Repo::new(&[(".minicoder/hooks.json", &hooks.to_string())]).await;
    repo.script("true");
    let none = tempfile::tempdir().expect("config");
    let mut cmd = repo.command(&["run"]);
    cmd.arg(repo.path())
        .arg("Fix the pagination bug")
        .args(["--non-interactive", "--model", "openai", "--trust-project"])
        .env("MINICODER_CONFIG_DIR", none.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    // The hook runs once the command (`true`) has finished, a moment after
    // it started (its `tool.finished` comes after the hook).
    let runs = repo.state.path().join(".agent/runs");
    let shell_started = || {
        std::fs::read_dir(&runs).ok().is_some_and(|d| {
            d.flatten().any(|e| {
                std::fs::read_to_string(e.path().join("events.jsonl")).is_ok_and(|t| {
                    t.lines()
                        .any(|l| l.contains("\"tool.started\"") && l.contains("\"run_shell\""))
                })
            })
        })
    };
    let started = std::time::Instant::now();
    while !shell_started() && started.elapsed() < std::time::Duration::from_secs(60) {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let cancelled_at = std::time::Instant::now();
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child.id() as i32).expect("pid"),
        rustix::process::Signal::INT,
    )
    .expect("Ctrl-C");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("output"))
        .await
        .expect("join");
    let waited = cancelled_at.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(result["outcome"], "cancelled", "{result}");
    assert!(
        waited < std::time::Duration::from_secs(30),
        "the cancel waited {waited:?} for the hook"
    );
}
