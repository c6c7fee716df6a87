use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::command::{Ran, is_secret_name};
use super::*;

fn config(text: &str) -> HooksConfig {
    HooksConfig::parse(text).unwrap()
}

fn ran(exit: i32, stdout: &str, stderr: &str) -> Ran {
    Ran {
        exit: Some(exit),
        stdout: stdout.into(),
        stderr: stderr.into(),
        ..Ran::default()
    }
}

fn input(event: HookEvent, tool: Option<&str>) -> HookInput {
    let mut input = HookInput::new(event, "run-1", &std::env::temp_dir());
    input.tool_name = tool.map(String::from);
    input.tool_input = tool.map(|_| json!({"command": "rm -rf /"}));
    input
}

#[test]
fn exit_2_blocks_with_stderr_and_other_exits_only_report() {
    let v = Verdict::of(HookEvent::PreToolUse, &ran(2, "", "no rm -rf here\n"));
    assert_eq!(v.block.as_deref(), Some("no rm -rf here"));
    assert_eq!(v.refuses().as_deref(), Some("no rm -rf here"));
    let v = Verdict::of(HookEvent::PreToolUse, &ran(1, "", "oops\nmore"));
    assert_eq!(v.block, None);
    assert_eq!(v.errors, vec!["exit 1: oops".to_string()]);
    assert_eq!(v.refuses(), None);
    assert_eq!(v.word(), "error");
}

#[test]
fn json_output_gives_permission_rewrite_context_and_stop() {
    let out = json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": "not on main",
            "updatedInput": {"command": "echo safe"},
            "additionalContext": "policy v2"
        },
        "systemMessage": "checked"
    });
    let v = Verdict::of(HookEvent::PreToolUse, &ran(0, &out.to_string(), ""));
    assert_eq!(v.permission, Some((Permission::Deny, "not on main".into())));
    assert_eq!(v.updated_input, Some(json!({"command": "echo safe"})));
    assert_eq!(v.context, vec!["policy v2".to_string()]);
    assert_eq!(v.messages, vec!["checked".to_string()]);
    assert_eq!(v.refuses().as_deref(), Some("not on main"));
    let stop = json!({"continue": false, "stopReason": "enough"}).to_string();
    let v = Verdict::of(HookEvent::Stop, &ran(0, &stop, ""));
    assert_eq!(v.stop.as_deref(), Some("enough"));
    let block = json!({"decision": "block", "reason": "tests first"}).to_string();
    let v = Verdict::of(HookEvent::Stop, &ran(0, &block, ""));
    assert_eq!(v.block.as_deref(), Some("tests first"));
}

#[test]
fn plain_output_is_context_only_for_prompts_and_session_starts() {
    let v = Verdict::of(HookEvent::UserPromptSubmit, &ran(0, "branch: main\n", ""));
    assert_eq!(v.context, vec!["branch: main".to_string()]);
    let v = Verdict::of(HookEvent::PreToolUse, &ran(0, "branch: main\n", ""));
    assert!(v.context.is_empty());
    assert_eq!(v.word(), "continue");
    // Not an object: not a decision.
    let v = Verdict::of(HookEvent::PreToolUse, &ran(0, "[\"block\"]", ""));
    assert_eq!(v, Verdict::default());
}

#[test]
fn verdicts_add_up_deny_over_ask_over_allow_and_any_block_holds() {
    let mut v = Verdict {
        permission: Some((Permission::Allow, "a".into())),
        ..Verdict::default()
    };
    v.add(Verdict {
        permission: Some((Permission::Deny, "d".into())),
        ..Verdict::default()
    });
    v.add(Verdict {
        permission: Some((Permission::Ask, "q".into())),
        context: vec!["c".into()],
        ..Verdict::default()
    });
    assert_eq!(v.permission, Some((Permission::Deny, "d".into())));
    v.add(Verdict {
        block: Some("b".into()),
        ..Verdict::default()
    });
    v.add(Verdict::default());
    assert_eq!(v.block.as_deref(), Some("b"));
    assert_eq!(v.context, vec!["c".to_string()]);
}

#[test]
fn the_file_has_claude_codes_shape_and_matchers_match_whole_tool_names() {
    let c = config(
        r#"{"hooks": {
            "PreToolUse": [
                {"matcher": "run_shell|write_file", "hooks": [{"type": "command", "command": "a"}]},
                {"matcher": "*", "hooks": [{"type": "command", "command": "b", "timeout": 5}]}
            ],
            "PreApply": [{"hooks": [{"type": "command", "command": "c"}]}]
        }}"#,
    );
    let names = |event, tool| -> Vec<String> {
        c.matching(event, tool)
            .iter()
            .map(|h| h.command.clone())
            .collect()
    };
    assert_eq!(names(HookEvent::PreToolUse, Some("run_shell")), ["a", "b"]);
    assert_eq!(names(HookEvent::PreToolUse, Some("run_shell_x")), ["b"]);
    assert_eq!(names(HookEvent::PreToolUse, Some("read_file")), ["b"]);
    assert_eq!(names(HookEvent::PreApply, None), ["c"]);
    assert!(names(HookEvent::Stop, None).is_empty());
    assert_eq!(c.matching(HookEvent::PreToolUse, None).len(), 1);
    assert_eq!(
        c.matching(HookEvent::PreToolUse, Some("x"))[0].timeout,
        Duration::from_secs(5)
    );
    assert_eq!(c.listed().len(), 3);
}

#[test]
fn a_bad_file_is_refused_with_what_is_wrong() {
    for (text, says) in [
        (
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "command": "x"}]}]}}"#,
            "only `command`",
        ),
        (
            r#"{"hooks": {"BeforeTool": []}}"#,
            "unknown hook event `BeforeTool`",
        ),
        (
            r#"{"hooks": {"PreToolUse": [{"matcher": "(", "hooks": []}]}}"#,
            "matcher `(`",
        ),
        (
            r#"{"hooks": {"PreApply": [{"hooks": [{"type": "command", "command": " "}]}]}}"#,
            "empty command",
        ),
        (r#"{"hooks": {}, "extra": 1}"#, "unknown field"),
    ] {
        let e = HooksConfig::parse(text).unwrap_err();
        assert!(e.contains(says), "{text}: {e}");
    }
}

#[test]
fn a_file_others_may_write_is_refused_and_a_missing_one_is_no_hooks() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = dir.path().join(config::FILE);
    assert!(HooksConfig::load(&path).unwrap().is_empty());
    std::fs::write(
        &path,
        r#"{"hooks": {"PreApply": [{"hooks": [{"type": "command", "command": "true"}]}]}}"#,
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    let e = HooksConfig::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("can be written by others") && e.contains("chmod go-w"),
        "{e}"
    );
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(!HooksConfig::load(&path).unwrap().is_empty());
}

#[test]
fn secret_named_variables_are_recognised() {
    for name in [
        "OPENAI_API_KEY",
        "GEMINI_API_KEY",
        "GITHUB_TOKEN",
        "aws_secret_access_key",
        "DB_PASSWORD",
    ] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in ["PATH", "HOME", "TOKENIZERS_PARALLELISM", "LANG"] {
        assert!(!is_secret_name(name), "{name}");
    }
}

fn hooks(text: &str) -> Hooks {
    Hooks::from_config(config(text))
}

#[tokio::test]
async fn a_hook_reads_its_input_and_its_stderr_blocks_with_exit_2() {
    let h = hooks(
        r#"{"hooks": {"PreToolUse": [{"matcher": "run_shell", "hooks": [{"type": "command",
            "command": "input=$(cat); case \"$input\" in *'rm -rf'*) echo \"no rm -rf in $(echo \"$input\" | grep -o '\"hook_event_name\":\"[A-Za-z]*\"')\" >&2; exit 2;; esac"}]}]}}"#,
    );
    let run = h
        .run(
            HookEvent::PreToolUse,
            &input(HookEvent::PreToolUse, Some("run_shell")),
        )
        .await;
    assert_eq!(
        run.verdict.block.as_deref(),
        Some("no rm -rf in \"hook_event_name\":\"PreToolUse\"")
    );
    assert_eq!(run.records.len(), 1);
    assert_eq!(run.records[0].exit, Some(2));
    assert_eq!(run.records[0].decision, "block");
    assert_eq!(run.records[0].event, "PreToolUse");
    // Another tool: no hook.
    let run = h
        .run(
            HookEvent::PreToolUse,
            &input(HookEvent::PreToolUse, Some("read_file")),
        )
        .await;
    assert!(run.records.is_empty());
}

#[tokio::test]
async fn a_hook_sees_no_provider_key() {
    let spec = HookSpec {
        command: "env | grep -c -e sk-hidden -e tok-hidden; echo \"$KEEP\"".into(),
        timeout: Duration::from_secs(10),
    };
    let vars = [
        ("OPENAI_API_KEY", "sk-hidden"),
        ("GITHUB_TOKEN", "tok-hidden"),
        ("KEEP", "kept"),
        ("PATH", "/usr/bin:/bin"),
    ]
    .map(|(k, v)| (k.into(), v.into()));
    let ran =
        super::command::run_with_env(&spec, b"{}", &std::env::temp_dir(), vars.into_iter()).await;
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    assert_eq!(ran.stdout, "0\nkept\n");
}

#[tokio::test]
async fn a_hook_past_its_timeout_is_killed_with_what_it_started() {
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("late");
    let command = format!("(sleep 3; touch {}) & sleep 30", file.display());
    let text = json!({"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command, "timeout": 1}]}]}});
    let h = hooks(&text.to_string());
    let started = Instant::now();
    let run = h.run(HookEvent::Stop, &input(HookEvent::Stop, None)).await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(
        run.verdict.errors,
        vec!["timed out and was killed".to_string()]
    );
    assert_eq!(run.verdict.refuses(), None);
    std::thread::sleep(Duration::from_secs(4));
    assert!(!file.exists(), "a process the hook started outlived it");
}

#[tokio::test]
async fn huge_output_is_capped_and_the_hook_is_not_blocked_on_its_pipe() {
    let h = hooks(
        r#"{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command",
            "command": "head -c 5000000 /dev/zero | tr '\\0' x"}]}]}}"#,
    );
    let run = h
        .run(
            HookEvent::UserPromptSubmit,
            &input(HookEvent::UserPromptSubmit, None),
        )
        .await;
    assert_eq!(run.records[0].exit, Some(0));
    assert_eq!(run.verdict.context.len(), 1);
    assert!(run.verdict.context[0].chars().count() <= 8 * 1024);
}

struct Deny;

impl HookHandler for Deny {
    fn name(&self) -> String {
        "deny-writes".into()
    }
    fn wants(&self, event: HookEvent, tool: Option<&str>) -> bool {
        event == HookEvent::PreToolUse && tool == Some("write_file")
    }
    fn handle(&self, _: HookEvent, input: &HookInput) -> Verdict {
        Verdict {
            permission: Some((
                Permission::Deny,
                format!("no writes in {}", input.session_id),
            )),
            ..Verdict::default()
        }
    }
}

#[tokio::test]
async fn in_process_handlers_run_before_commands_and_are_recorded() {
    let h = hooks(
        r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "exit 0"}]}]}}"#,
    )
    .with_handler(Arc::new(Deny));
    let run = h
        .run(
            HookEvent::PreToolUse,
            &input(HookEvent::PreToolUse, Some("write_file")),
        )
        .await;
    assert_eq!(run.verdict.refuses().as_deref(), Some("no writes in run-1"));
    let names: Vec<&str> = run.records.iter().map(|r| r.hook.as_str()).collect();
    assert_eq!(names, ["deny-writes", "exit 0"]);
    assert_eq!(run.records[0].decision, "deny");
    assert_eq!(run.records[1].decision, "continue");
}

#[test]
fn a_veto_hook_without_an_answer_blocks_and_another_only_reports() {
    let timed_out = Ran {
        timed_out: true,
        ..Ran::default()
    };
    let v = Verdict::of(HookEvent::PreToolUse, &timed_out);
    assert_eq!(
        v.block.as_deref(),
        Some("the hook gave no answer (timed out and was killed)")
    );
    let v = Verdict::of(HookEvent::PostToolUse, &timed_out);
    assert_eq!(v.block, None);
    assert_eq!(v.errors, vec!["timed out and was killed".to_string()]);
    let cut_json = Ran {
        truncated: true,
        ..ran(
            0,
            r#"{"hookSpecificOutput": {"permissionDecision": "deny", "x": "aaaa"#,
            "",
        )
    };
    assert!(
        Verdict::of(HookEvent::PreApply, &cut_json)
            .refuses()
            .unwrap()
            .contains("longer than")
    );
    let broken = ran(0, "{not json", "");
    assert!(
        Verdict::of(HookEvent::PreToolUse, &broken)
            .refuses()
            .unwrap()
            .contains("not a valid JSON object")
    );
    // Cut plain text is no answer to parse: context, cut.
    let long_text = Ran {
        truncated: true,
        ..ran(0, "note", "")
    };
    assert_eq!(
        Verdict::of(HookEvent::UserPromptSubmit, &long_text).context,
        vec!["note".to_string()]
    );
}

#[tokio::test]
async fn a_block_stands_though_the_hook_leaves_a_child_holding_its_output() {
    let h = hooks(
        r#"{"hooks": {"PreApply": [{"hooks": [{"type": "command", "timeout": 20,
            "command": "sleep 30 & echo 'no secrets here' >&2; exit 2"}]}]}}"#,
    );
    let started = Instant::now();
    let run = h
        .run(HookEvent::PreApply, &input(HookEvent::PreApply, None))
        .await;
    assert_eq!(run.verdict.block.as_deref(), Some("no secrets here"));
    assert_eq!(run.records[0].exit, Some(2));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "waited for the child"
    );
}

#[tokio::test]
async fn a_hook_that_never_reads_a_large_input_still_answers() {
    let h = hooks(
        r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "echo fine; exit 0"}]}]}}"#,
    );
    let mut big = input(HookEvent::PreToolUse, Some("run_shell"));
    big.tool_input = Some(json!({"command": "x".repeat(4 << 20)}));
    let run = h.run(HookEvent::PreToolUse, &big).await;
    assert_eq!(run.records[0].exit, Some(0));
    assert_eq!(run.verdict.refuses(), None);
}
