//! Running the person's hooks for the agent: the driver performs
//! [`Effect::PreToolHooks`](crate::agent::effects::Effect) and
//! `Effect::StopHooks` here, and the `PostToolUse` hooks as part of running
//! a tool (what they add follows the tool's result); it records
//! each hook as a `hook.ran` event (inside the event log's hash chain), and
//! hands the verdict back for the agent to decide on.

use crate::agent::effects::{FailureKind, Input};
use crate::hooks::{HookEvent, HookInput, HookRun, Permission};
use crate::model::types::ToolCall;
use crate::protocol::{ApprovalDecision, RunEvent};

use super::parts::Run;

/// Runs the `PreToolUse` hooks of `call` (raced against a cancel and the
/// deadline, which kill them) and says what they decided.
pub(crate) async fn pre_tool_use(run: &mut Run, call: &ToolCall) -> Input {
    let input = tool_input(run, HookEvent::PreToolUse, call);
    let mut ran = match run_hooks(run, HookEvent::PreToolUse, &input, Some(&call.id)).await {
        Ok(ran) => ran,
        Err(interrupted) => return interrupted,
    };
    if let Some(gone) =
        add_repo_hooks(run, HookEvent::PreToolUse, &input, &mut ran, Some(&call.id)).await
    {
        return gone;
    }
    if let Some(why) = &ran.verdict.stop {
        // `continue: false` ends the run, as it stops Claude Code's agent.
        return Input::Cancelled {
            reason: format!("a PreToolUse hook stopped the run: {}", redacted(run, why)),
        };
    }
    let (refused, arguments, ask) = pre_tool_verdict(&ran);
    if let Some(arguments) = &arguments {
        // What runs instead of what the model asked is in the event chain.
        run.bus.emit(RunEvent::ToolRewritten {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: arguments.clone(),
        });
    }
    Input::PreToolHooksRan {
        call_id: call.id.clone(),
        refused: refused.map(|why| redacted(run, &why)),
        arguments,
        ask: ask.map(|why| redacted(run, &why)),
    }
}

/// A hook's words as the model may read them: its secrets redacted.
fn redacted(run: &Run, text: &str) -> String {
    run.artifacts.redactor().redact(text).into_owned()
}

/// Runs the `PostToolUse` hooks of `call` once it has finished (for an
/// edit: once applied, or refused): what they add — a block's reason, or
/// context — is appended to the result the model reads. Any other input
/// passes through as it is.
pub(crate) async fn post_tool_use(run: &mut Run, call: &ToolCall, finished: Input) -> Input {
    let Input::ToolFinished {
        call_id,
        ok,
        content,
    } = finished
    else {
        return finished;
    };
    let hooks = run.id.options.hooks.clone();
    if hooks.is_empty_for(HookEvent::PostToolUse) && !run.id.repo_hooks.has(HookEvent::PostToolUse)
    {
        return Input::ToolFinished {
            call_id,
            ok,
            content,
        };
    }
    let mut input = tool_input(run, HookEvent::PostToolUse, call);
    input.tool_response = Some(serde_json::json!({"ok": ok, "content": content}));
    let mut ran = match run_hooks(run, HookEvent::PostToolUse, &input, Some(&call.id)).await {
        Ok(ran) => ran,
        Err(interrupted) => return interrupted,
    };
    if let Some(gone) = add_repo_hooks(
        run,
        HookEvent::PostToolUse,
        &input,
        &mut ran,
        Some(&call.id),
    )
    .await
    {
        return gone;
    }
    let content = post_tool_content(content, &ran);
    Input::ToolFinished {
        call_id,
        ok,
        content: redacted(run, &content),
    }
}

/// A tool's result with what its `PostToolUse` hooks added.
fn post_tool_content(mut content: String, ran: &HookRun) -> String {
    if let Some(why) = &ran.verdict.block {
        content.push_str(&format!("\n\nA PostToolUse hook objects: {why}"));
    }
    for context in &ran.verdict.context {
        content.push_str(&format!("\n\nFrom a PostToolUse hook: {context}"));
    }
    content
}

/// What every hook of the run is told: the run, its repository and its
/// event log.
fn run_input(run: &Run, event: HookEvent) -> HookInput {
    let mut input = HookInput::new(event, &run.id.run_id, &run.id.repo);
    input.transcript_path = Some(run.artifacts.events_path().display().to_string());
    input
}

/// Runs the person's hooks of `event` (raced against a cancel and the
/// deadline, which kill them) and records each as a `hook.ran` event; the
/// input of the interruption when the race is lost.
async fn run_hooks(
    run: &mut Run,
    event: HookEvent,
    input: &HookInput,
    call_id: Option<&str>,
) -> Result<HookRun, Input> {
    let hooks = run.id.options.hooks.clone();
    match run.steering.race(hooks.run(event, input)).await {
        Ok(ran) => {
            record(run, &ran, call_id);
            Ok(ran)
        }
        Err(why) => Err(run.steering.interrupted(why)),
    }
}

/// What a hook of a tool event is told: the tool and its arguments.
fn tool_input(run: &Run, event: HookEvent, call: &ToolCall) -> HookInput {
    let mut input = run_input(run, event);
    input.tool_name = Some(call.name.clone());
    input.tool_input = Some(
        serde_json::from_str(&call.arguments)
            .unwrap_or_else(|_| serde_json::Value::String(call.arguments.clone())),
    );
    input
}

/// Runs the `Stop` hooks of a run about to end verified: a block (exit 2,
/// or `decision: "block"`) refuses the end, with its reason.
pub(crate) async fn stop(run: &mut Run, stop_hook_active: bool) -> Input {
    let mut input = run_input(run, HookEvent::Stop);
    input.stop_hook_active = Some(stop_hook_active);
    let mut ran = match run_hooks(run, HookEvent::Stop, &input, None).await {
        Ok(ran) => ran,
        Err(interrupted) => return interrupted,
    };
    if let Some(gone) = add_repo_hooks(run, HookEvent::Stop, &input, &mut ran, None).await {
        return gone;
    }
    // `continue: false` lets the run stop, whatever else a hook said.
    let refused = match ran.verdict.stop {
        Some(_) => None,
        None => ran.verdict.block.map(|why| redacted(run, &why)),
    };
    Input::StopHooksRan { refused }
}

/// The `PreCompact` hooks: the context (about `tokens`) is about to be
/// compacted. They cannot stop it; what they add (`additionalContext`) is
/// kept for the next turn, after the compaction.
pub(crate) async fn pre_compact(run: &mut Run, tokens: u64) -> Input {
    let mut input = run_input(run, HookEvent::PreCompact);
    input.extra.insert("trigger".into(), "auto".into());
    input.extra.insert("custom_instructions".into(), "".into());
    input.extra.insert("tokens".into(), tokens.into());
    let context = match run_hooks(run, HookEvent::PreCompact, &input, None).await {
        Ok(ran) => ran
            .verdict
            .context
            .iter()
            .map(|t| redacted(run, t))
            .collect(),
        Err(interrupted) => return interrupted,
    };
    Input::PreCompactHooksRan { context }
}

/// The `PostCompact` hooks hear what the compaction did. `Some` only when
/// the run was interrupted meanwhile.
pub(crate) async fn post_compact(
    run: &mut Run,
    before_tokens: u64,
    after_tokens: u64,
    messages_compacted: usize,
) -> Option<Input> {
    let mut input = run_input(run, HookEvent::PostCompact);
    input.extra.insert("trigger".into(), "auto".into());
    input
        .extra
        .insert("before_tokens".into(), before_tokens.into());
    input
        .extra
        .insert("after_tokens".into(), after_tokens.into());
    input
        .extra
        .insert("messages_compacted".into(), messages_compacted.into());
    run_hooks(run, HookEvent::PostCompact, &input, None)
        .await
        .err()
}

/// The `UserPromptSubmit` hooks of a resume's follow-up, before the run is
/// set up again: a block refuses the resume with the reason (no model reads
/// the follow-up). What they add is not kept: the follow-up speaks for
/// itself.
pub(crate) async fn screen_resume_follow_up(
    options: &super::RunOptions,
    run_id: &str,
    text: &str,
) -> Result<(), super::RunError> {
    if options.hooks.is_empty_for(HookEvent::UserPromptSubmit) {
        return Ok(());
    }
    let mut input = HookInput::new(HookEvent::UserPromptSubmit, run_id, &options.repo);
    input.prompt = Some(text.to_string());
    let ran = options.hooks.run(HookEvent::UserPromptSubmit, &input).await;
    for r in &ran.records {
        tracing::info!("{}", r.line());
    }
    match ran.verdict.refuses() {
        Some(why) => Err(super::RunError::Invalid(format!(
            "a UserPromptSubmit hook refused the follow-up: {why}"
        ))),
        None => Ok(()),
    }
}

/// Runs the `SessionStart` hooks (`source`: `startup` or `resume`) and the
/// `UserPromptSubmit` hooks of `prompt` (a new run's task): what they add is
/// context for the agent's next turn; a prompt a hook blocks cancels the run
/// before its first turn, with the reason.
pub(crate) async fn session_start(
    run: &mut Run,
    new_run: bool,
    prompt: Option<String>,
) -> Vec<Input> {
    let hooks = run.id.options.hooks.clone();
    let mut inputs = Vec::new();
    if !hooks.is_empty_for(HookEvent::SessionStart) {
        let mut input = run_input(run, HookEvent::SessionStart);
        let source = if new_run { "startup" } else { "resume" };
        input.extra.insert("source".into(), source.into());
        match run_hooks(run, HookEvent::SessionStart, &input, None).await {
            Ok(ran) => inputs.extend(context_inputs(run, HookEvent::SessionStart, &ran)),
            Err(interrupted) => return vec![interrupted],
        }
    }
    if let Some(prompt) = prompt.filter(|_| !hooks.is_empty_for(HookEvent::UserPromptSubmit)) {
        let mut input = run_input(run, HookEvent::UserPromptSubmit);
        input.prompt = Some(prompt);
        match run_hooks(run, HookEvent::UserPromptSubmit, &input, None).await {
            Ok(ran) => {
                if let Some(why) = ran.verdict.refuses() {
                    inputs.push(Input::Cancelled {
                        reason: format!(
                            "a UserPromptSubmit hook refused the {}: {}",
                            if new_run { "task" } else { "follow-up" },
                            redacted(run, &why)
                        ),
                    });
                    return inputs;
                }
                inputs.extend(context_inputs(run, HookEvent::UserPromptSubmit, &ran));
            }
            Err(interrupted) => return vec![interrupted],
        }
    }
    inputs
}

/// A follow-up the person typed goes through the `UserPromptSubmit` hooks
/// first: a block drops it (said as a rejected command, which the session
/// shows), and what they add goes with it. Any other input passes as it is.
pub(crate) async fn screen_follow_up(run: &mut Run, input: Input) -> Vec<Input> {
    let Input::FollowUp(text) = input else {
        return vec![input];
    };
    if run
        .id
        .options
        .hooks
        .is_empty_for(HookEvent::UserPromptSubmit)
    {
        return vec![Input::FollowUp(text)];
    }
    let mut hook_input = run_input(run, HookEvent::UserPromptSubmit);
    hook_input.prompt = Some(text.clone());
    let ran = match run_hooks(run, HookEvent::UserPromptSubmit, &hook_input, None).await {
        Ok(ran) => ran,
        Err(interrupted) => return vec![interrupted],
    };
    if let Some(why) = ran.verdict.refuses() {
        run.bus.emit(RunEvent::CommandRejected {
            command: "follow-up".into(),
            reason: format!(
                "a UserPromptSubmit hook refused it: {}",
                redacted(run, &why)
            ),
        });
        return Vec::new();
    }
    let mut inputs = vec![Input::FollowUp(text)];
    inputs.extend(context_inputs(run, HookEvent::UserPromptSubmit, &ran));
    inputs
}

/// The context the hooks of `event` added, for the agent.
fn context_inputs(run: &Run, event: HookEvent, ran: &HookRun) -> Vec<Input> {
    ran.verdict
        .context
        .iter()
        .map(|text| Input::HookContext {
            event: event.name().to_string(),
            text: redacted(run, text),
        })
        .collect()
}

/// Runs the `SessionEnd` hooks of a run that ended (`outcome`, `reason`);
/// what they decide changes nothing. Bounded by their own timeouts.
pub(crate) async fn session_end(run: &mut Run, outcome: &str, reason: &str) {
    let hooks = run.id.options.hooks.clone();
    if hooks.is_empty_for(HookEvent::SessionEnd) {
        return;
    }
    let mut input = run_input(run, HookEvent::SessionEnd);
    input.extra.insert("outcome".into(), outcome.into());
    input.extra.insert("reason".into(), reason.into());
    let ran = hooks.run(HookEvent::SessionEnd, &input).await;
    record(run, &ran, None);
}

/// An edit waits for the person (approval `id`): the `PermissionRequest`
/// hooks may answer it for them (allow, or deny with a reason); when none
/// does, the `Notification` hooks hear that an approval waits. `None`: the
/// run goes on waiting for the person.
pub(crate) async fn approval_asked(run: &mut Run, id: &str) -> Option<Input> {
    let hooks = run.id.options.hooks.clone();
    let pending = run.agent.phase().pending_approval()?.clone();
    if !hooks.is_empty_for(HookEvent::PermissionRequest) {
        let mut input = run_input(run, HookEvent::PermissionRequest);
        input.tool_name = Some(pending.call.name.clone());
        input.tool_input = Some(if pending.call_approval.is_some() {
            serde_json::from_str(&pending.call.arguments).unwrap_or_default()
        } else {
            serde_json::json!({"path": pending.path, "patch": pending.patch})
        });
        let call_id = Some(pending.call.id.as_str());
        let ran = match run_hooks(run, HookEvent::PermissionRequest, &input, call_id).await {
            Ok(ran) => ran,
            Err(interrupted) => return Some(interrupted),
        };
        if let Some(decision) = permission_answer(&ran) {
            let decision = match decision {
                ApprovalDecision::Refuse(Some(why)) => {
                    ApprovalDecision::Refuse(Some(redacted(run, &why)))
                }
                other => other,
            };
            return Some(Input::Approval {
                id: id.to_string(),
                decision,
            });
        }
    }
    if !hooks.is_empty_for(HookEvent::Notification) {
        let mut input = run_input(run, HookEvent::Notification);
        input.extra.insert(
            "message".into(),
            if pending.call_approval.is_some() {
                format!("minicoder needs your approval to call {}", pending.path)
            } else {
                format!("minicoder needs your approval to edit {}", pending.path)
            }
            .into(),
        );
        input
            .extra
            .insert("notification_type".into(), "permission_prompt".into());
        // Heard, not obeyed: the run waits for the person either way.
        let ran = hooks.run(HookEvent::Notification, &input).await;
        record(run, &ran, Some(&pending.call.id));
    }
    None
}

/// How the `PermissionRequest` hooks answer an approval, if they do: a
/// deny or a block refuses with its reason, an allow approves this edit.
fn permission_answer(ran: &HookRun) -> Option<ApprovalDecision> {
    if let Some(why) = ran.verdict.refuses() {
        return Some(ApprovalDecision::Refuse(Some(format!(
            "refused by a PermissionRequest hook: {why}"
        ))));
    }
    match &ran.verdict.permission {
        Some((Permission::Allow, _)) => Some(ApprovalDecision::Approve),
        _ => None,
    }
}

/// The most of a hook's input a repository hook is given (its tool input
/// and response are cut to fit).
const MAX_REPO_INPUT: usize = 64 * 1024;

/// Runs the repository's own hooks of `event` in the run's command
/// container — bounded and held to the workspace limits like any command,
/// with no access to the host — and adds their verdict to `ran`. A
/// repository hook may block, deny and add context; it cannot allow or
/// rewrite a call (that is the person's to do). Like a command, a hook is
/// raced against a cancel and the run's deadline, and the engine gone while
/// it ran ends the run at once: the input that says so.
async fn add_repo_hooks(
    run: &mut Run,
    event: HookEvent,
    input: &HookInput,
    ran: &mut HookRun,
    call_id: Option<&str>,
) -> Option<Input> {
    let specs: Vec<crate::hooks::HookSpec> = run
        .id
        .repo_hooks
        .matching(event, input.tool_name.as_deref())
        .into_iter()
        .cloned()
        .collect();
    if specs.is_empty() {
        return None;
    }
    let json = repo_input(input);
    let command_timeout = run.id.options.limits.command_timeout();
    for spec in specs {
        let started = std::time::Instant::now();
        let delimiter = format!("MINICODER_HOOK_INPUT_{}", crate::ids::random_hex(8));
        let command = format!(
            "(\n{}\n) <<'{delimiter}'\n{json}\n{delimiter}\n",
            spec.command
        );
        let request =
            crate::sandbox::CommandRequest::new(command).timeout(spec.timeout.min(command_timeout));
        // Raced like a command: a cancel or the deadline does not wait for it.
        let raced = match run.steering.race(run.sandbox.container.run(request)).await {
            Ok(raced) => raced,
            Err(why) => return Some(run.steering.interrupted(why)),
        };
        let ran_one = match raced {
            Ok(outcome) => crate::hooks::Ran {
                exit: outcome
                    .exit_code
                    .filter(|_| outcome.limit_crossed().is_none()),
                stdout: String::from_utf8_lossy(&outcome.stdout.head).into_owned(),
                stderr: String::from_utf8_lossy(&outcome.stderr.head).into_owned(),
                timed_out: outcome.timed_out,
                truncated: outcome.stdout.omitted > 0,
                failed: outcome.limit_crossed().map(str::to_string),
            },
            Err(e @ crate::sandbox::SandboxError::DockerUnavailable { .. }) => {
                return Some(Input::Failed {
                    kind: FailureKind::Sandbox,
                    reason: e.to_string(),
                });
            }
            Err(e) => crate::hooks::Ran {
                failed: Some(format!("the sandbox: {e}")),
                ..crate::hooks::Ran::default()
            },
        };
        let mut verdict = crate::hooks::Verdict::of(event, &ran_one);
        verdict.updated_input = None;
        if matches!(verdict.permission, Some((Permission::Allow, _))) {
            verdict.permission = None;
        }
        let one = HookRun {
            records: vec![crate::hooks::HookRecord {
                hook: format!("repository: {}", spec.command),
                event: event.name().to_string(),
                exit: ran_one.exit,
                decision: verdict.word().to_string(),
                duration_ms: started.elapsed().as_millis() as u64,
            }],
            verdict: crate::hooks::Verdict::default(),
        };
        record(run, &one, call_id);
        ran.records.extend(one.records);
        ran.verdict.add(verdict);
    }
    None
}

/// A hook's input as one line of JSON of at most [`MAX_REPO_INPUT`] bytes.
fn repo_input(input: &HookInput) -> String {
    // Host paths mean nothing in the container: it sees the workspace.
    let mut input = input.clone();
    input.cwd = crate::sandbox::spec::WORKSPACE_MOUNT.to_string();
    input.transcript_path = None;
    let input = &input;
    let json = serde_json::to_string(input).unwrap_or_else(|_| "{}".into());
    if json.len() <= MAX_REPO_INPUT {
        return json;
    }
    let mut cut = input.clone();
    let shorten = |v: &Option<serde_json::Value>| {
        v.as_ref().map(|v| {
            let text = v.to_string();
            serde_json::Value::String(crate::terminal_text::cut_to(&text, MAX_REPO_INPUT / 4))
        })
    };
    cut.tool_input = shorten(&cut.tool_input);
    cut.tool_response = shorten(&cut.tool_response);
    cut.extra.clear();
    serde_json::to_string(&cut).unwrap_or_else(|_| "{}".into())
}

/// What the agent is told of the hooks' verdict: a refusal (a block, a
/// deny, a stop, or an ask, which a run has no one to put to yet), or the
/// arguments a hook rewrote.
/// What the `PreToolUse` hooks decided: a refusal, rewritten arguments,
/// and whether the person must confirm the call (and why).
fn pre_tool_verdict(ran: &HookRun) -> (Option<String>, Option<String>, Option<String>) {
    if let Some(why) = ran.verdict.refuses() {
        return (Some(why), None, None);
    }
    let ask = match &ran.verdict.permission {
        Some((Permission::Ask, why)) => Some(why.clone()),
        _ => None,
    };
    let arguments = ran.verdict.updated_input.as_ref().map(|v| v.to_string());
    (None, arguments, ask)
}

/// Each hook that ran, as a `hook.ran` event.
fn record(run: &mut Run, ran: &HookRun, call_id: Option<&str>) {
    for r in &ran.records {
        run.bus.emit(RunEvent::HookRan {
            hook: r.hook.clone(),
            event: r.event.clone(),
            call_id: call_id.map(String::from),
            exit: r.exit,
            decision: r.decision.clone(),
            duration_ms: r.duration_ms,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::Verdict;

    fn ran(verdict: Verdict) -> HookRun {
        HookRun {
            verdict,
            records: Vec::new(),
        }
    }

    #[test]
    fn the_agent_is_told_a_refusal_the_rewritten_arguments_or_that_the_person_must_confirm() {
        let deny = ran(Verdict {
            permission: Some((Permission::Deny, "no".into())),
            updated_input: Some(serde_json::json!({"command": "x"})),
            ..Verdict::default()
        });
        assert_eq!(pre_tool_verdict(&deny), (Some("no".into()), None, None));
        let ask = ran(Verdict {
            permission: Some((Permission::Ask, "sure?".into())),
            ..Verdict::default()
        });
        assert_eq!(pre_tool_verdict(&ask), (None, None, Some("sure?".into())));
        let rewrite = ran(Verdict {
            permission: Some((Permission::Allow, String::new())),
            updated_input: Some(serde_json::json!({"command": "echo hi"})),
            ..Verdict::default()
        });
        assert_eq!(
            pre_tool_verdict(&rewrite),
            (None, Some(r#"{"command":"echo hi"}"#.into()), None)
        );
        assert_eq!(
            pre_tool_verdict(&ran(Verdict::default())),
            (None, None, None)
        );
    }

    #[test]
    fn permission_hooks_approve_refuse_or_leave_it_to_the_person() {
        let allow = ran(Verdict {
            permission: Some((Permission::Allow, String::new())),
            ..Verdict::default()
        });
        assert_eq!(permission_answer(&allow), Some(ApprovalDecision::Approve));
        let deny = ran(Verdict {
            permission: Some((Permission::Deny, "not in src/".into())),
            ..Verdict::default()
        });
        assert_eq!(
            permission_answer(&deny),
            Some(ApprovalDecision::Refuse(Some(
                "refused by a PermissionRequest hook: not in src/".into()
            )))
        );
        let ask = ran(Verdict {
            permission: Some((Permission::Ask, String::new())),
            ..Verdict::default()
        });
        assert_eq!(permission_answer(&ask), None);
        assert_eq!(permission_answer(&ran(Verdict::default())), None);
    }

    #[test]
    fn what_post_tool_hooks_add_follows_the_result() {
        let added = ran(Verdict {
            block: Some("tests were not run".into()),
            context: vec!["lint: 2 warnings".into()],
            ..Verdict::default()
        });
        assert_eq!(
            post_tool_content("exit 0".into(), &added),
            "exit 0\n\nA PostToolUse hook objects: tests were not run\n\nFrom a PostToolUse hook: lint: 2 warnings"
        );
        assert_eq!(
            post_tool_content("exit 0".into(), &ran(Verdict::default())),
            "exit 0"
        );
    }
}
