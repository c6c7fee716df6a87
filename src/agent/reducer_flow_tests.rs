//! The rules that used to live in the driver, as reducer tests: bootstrap,
//! approvals (ask, answer, approve-all, late, repeated, timed out, nobody
//! there, the credential refusal), waiting for the baseline's verdict,
//! typed failures, and the final verdict that binds success to the verified
//! workspace.

use super::tests::*;
use super::*;
use crate::protocol::{ApprovalDecision, ApprovalMode, VerificationReason as V};

const EDIT: &str = r#"{"path":"a.py","patch":"--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"}"#;

fn approving_agent() -> Agent {
    let mut a = Agent::new(AgentConfig {
        approval: ApprovalMode::Each,
        ..config()
    });
    start(&mut a);
    a.handle(Input::Verified {
        reason: V::Baseline,
        passed: false,
        fingerprint: "base".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    a
}

/// Plans, then asks to edit; returns the effects of the prepared edit.
fn prepared_edit(a: &mut Agent, id: &str, credentials: Vec<String>) -> Vec<Effect> {
    let fx = a.handle(reply(vec![
        call(&format!("{id}-plan"), "update_plan", PLAN_WIP),
        call(id, "edit_file", EDIT),
    ]));
    assert!(
        matches!(fx.last(), Some(Effect::RunTool(c)) if c.id == id),
        "{fx:?}"
    );
    a.handle(Input::EditPrepared {
        call_id: id.into(),
        path: "a.py".into(),
        patch: "--- a/a.py\n+++ b/a.py\n".into(),
        credentials,
        credential_file: false,
    })
}

fn asked_id(fx: &[Effect]) -> String {
    fx.iter()
        .find_map(|e| match e {
            Effect::Emit(RunEvent::ApprovalRequested { id, .. }) => Some(id.clone()),
            _ => None,
        })
        .expect("an approval was asked")
}

fn applies(fx: &[Effect]) -> bool {
    has(fx, |e| matches!(e, Effect::ApplyEdit { .. }))
}

#[test]
fn a_failed_bootstrap_ends_the_run_and_a_passing_one_starts_it() {
    let cfg = AgentConfig {
        bootstrap: vec!["pip install -e .".into()],
        ..config()
    };
    let mut a = Agent::new(cfg.clone());
    let fx = start(&mut a);
    assert!(matches!(
        fx.as_slice(),
        [
            Effect::Emit(RunEvent::BootstrapStarted { .. }),
            Effect::Bootstrap
        ]
    ));
    let fx = a.handle(Input::BootstrapFinished {
        passed: false,
        failure: Some("exit 1".into()),
        duration_ms: 5,
    });
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::BootstrapFinished { passed: false, .. })
    )));
    assert_eq!(
        fx.last(),
        Some(&Effect::Finish {
            outcome: Outcome::Failure,
            reason: "bootstrap failed: exit 1".into()
        })
    );

    let mut a = Agent::new(cfg.clone());
    start(&mut a);
    let fx = a.handle(Input::BootstrapFinished {
        passed: true,
        failure: None,
        duration_ms: 5,
    });
    // What the bootstrap wrote is baseline: the baseline is taken again first.
    assert_eq!(fx.last(), Some(&Effect::Rebaseline));
    assert!(!calls_model(&fx));
    let fx = a.handle(Input::Rebaselined {
        checkpoint: "after-bootstrap".into(),
    });
    assert!(has(&fx, |e| matches!(e, Effect::VerifyBaseline { .. })));
    assert!(calls_model(&fx));
    // A pass of the baseline now validates the checkpoint taken after the bootstrap.
    let fx = a.handle(Input::Verified {
        reason: V::Baseline,
        passed: true,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    assert_eq!(
        fx,
        vec![Effect::MarkValidated {
            checkpoint: "after-bootstrap".into()
        }]
    );

    let mut a = Agent::new(cfg);
    start(&mut a);
    let fx = a.handle(Input::TimedOut {
        reason: "the run's time budget (60 s) ran out".into(),
    });
    assert!(
        matches!(fx.last(), Some(Effect::Finish { reason, .. }) if reason.contains("during bootstrap")),
        "{fx:?}"
    );
}

#[test]
fn an_edit_waits_for_the_person_and_an_approval_applies_it() {
    let mut a = approving_agent();
    let fx = prepared_edit(&mut a, "e1", vec![]);
    let id = asked_id(&fx);
    assert!(!applies(&fx), "nothing is applied before the answer");
    assert!(matches!(fx.last(), Some(Effect::AwaitApproval { id: w, .. }) if *w == id));
    // A follow-up meanwhile is kept, and the wait goes on.
    let fx = a.handle(Input::FollowUp("take care".into()));
    assert!(
        matches!(fx.as_slice(), [Effect::AwaitApproval { .. }]),
        "{fx:?}"
    );
    let fx = a.handle(Input::Approval {
        id: id.clone(),
        decision: ApprovalDecision::Approve,
    });
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ApprovalResolved { approved: true, .. })
    )));
    assert!(applies(&fx));
    let fx = a.handle(Input::ToolFinished {
        call_id: "e1".into(),
        ok: true,
        content: "applied".into(),
    });
    assert!(calls_model(&fx));
}

#[test]
fn a_refusal_goes_back_to_the_model_with_its_reason() {
    let mut a = approving_agent();
    let id = asked_id(&prepared_edit(&mut a, "e1", vec![]));
    let fx = a.handle(Input::Approval {
        id,
        decision: ApprovalDecision::Refuse(Some("use ceil division".into())),
    });
    assert!(!applies(&fx));
    assert!(calls_model(&fx), "the run goes on");
    let result = last_tool_result(&a);
    assert!(
        result.contains("refused this patch") && result.contains("use ceil division"),
        "{result}"
    );
}

#[test]
fn late_repeated_and_unknown_answers_change_nothing() {
    let mut a = approving_agent();
    let id = asked_id(&prepared_edit(&mut a, "e1", vec![]));
    // An answer to another id while waiting: rejected, and the wait goes on.
    let fx = a.handle(Input::Approval {
        id: "approval-99".into(),
        decision: ApprovalDecision::Approve,
    });
    assert!(!applies(&fx));
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::CommandRejected { .. })
    )));
    assert!(matches!(fx.last(), Some(Effect::AwaitApproval { .. })));
    // Nobody answered in time: a refusal.
    let fx = a.handle(Input::ApprovalTimedOut { id: id.clone() });
    assert!(!applies(&fx));
    assert!(last_tool_result(&a).contains("no answer within 30 minutes"));
    // The answer that comes after the timeout, and a second one: rejected.
    for _ in 0..2 {
        let fx = a.handle(Input::Approval {
            id: id.clone(),
            decision: ApprovalDecision::Approve,
        });
        assert!(!applies(&fx), "a late yes is never a yes");
        assert!(matches!(
            fx.as_slice(),
            [Effect::Emit(RunEvent::CommandRejected { reason, .. })] if reason.starts_with("too late")
        ));
    }
}

#[test]
fn with_nobody_left_to_answer_the_edit_is_refused() {
    let mut a = approving_agent();
    prepared_edit(&mut a, "e1", vec![]);
    let fx = a.handle(Input::CommandsClosed);
    assert!(!applies(&fx));
    assert!(last_tool_result(&a).contains("no one is there to approve"));
    // Cancelling while an edit waits refuses it and ends the run.
    let mut a = approving_agent();
    let id = asked_id(&prepared_edit(&mut a, "e1", vec![]));
    let fx = a.handle(Input::Cancelled {
        reason: "cancelled by the user".into(),
    });
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ApprovalResolved { id: r, approved: false, .. }) if *r == id
    )));
    assert!(matches!(
        fx.last(),
        Some(Effect::Finish {
            outcome: Outcome::Cancelled,
            ..
        })
    ));
}

#[test]
fn approve_all_applies_the_rest_without_asking() {
    let mut a = approving_agent();
    let id = asked_id(&prepared_edit(&mut a, "e1", vec![]));
    a.handle(Input::Approval {
        id,
        decision: ApprovalDecision::ApproveAll,
    });
    a.handle(Input::ToolFinished {
        call_id: "e1".into(),
        ok: true,
        content: "applied".into(),
    });
    let fx = prepared_edit(&mut a, "e2", vec![]);
    assert!(applies(&fx), "{fx:?}");
    assert!(!has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ApprovalRequested { .. })
    )));
}

#[test]
fn an_edit_that_adds_a_credential_is_refused_without_asking() {
    let mut a = approving_agent();
    let fx = prepared_edit(&mut a, "e1", vec!["AWS access key".into()]);
    assert!(!applies(&fx));
    assert!(!has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ApprovalRequested { .. })
    )));
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ToolFinished { ok: false, summary, .. }) if summary == "refused: credential"
    )));
    assert!(last_tool_result(&a).contains("would add a credential (AWS access key)"));
    assert!(calls_model(&fx));
}

#[test]
fn a_failed_completion_waits_for_the_baseline_verdict_before_it_counts() {
    let mut a = Agent::new(config());
    start(&mut a);
    complete(&mut a, "c1");
    let fx = a.handle(Input::Verified {
        reason: V::Completion,
        passed: false,
        fingerprint: "fp1".into(),
        feedback: "tests: exit 1".into(),
        checks: Vec::new(),
    });
    assert_eq!(fx, vec![Effect::PrewarmVerifier, Effect::AwaitBaseline]);
    assert!(!last_tool_result(&a).contains("Verification failed"));
    let fx = a.handle(Input::FollowUp("hurry".into()));
    assert_eq!(fx, vec![Effect::AwaitBaseline], "still waiting");
    // The baseline passed: it becomes the validated state, so this failure is
    // the first repair cycle against it.
    let fx = a.handle(Input::Verified {
        reason: V::Baseline,
        passed: true,
        fingerprint: "base".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    assert_eq!(
        fx[0],
        Effect::MarkValidated {
            checkpoint: "base".into()
        }
    );
    assert!(last_tool_result(&a).contains("Repair cycle 1 of 2"));
    assert!(calls_model(&fx));
}

fn succeeded(fingerprint: &str) -> Agent {
    let (mut a, _) = started(false);
    complete(&mut a, "c1");
    let fx = a.handle(Input::Verified {
        reason: V::Completion,
        passed: true,
        fingerprint: fingerprint.into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    assert!(matches!(
        fx.last(),
        Some(Effect::Finish {
            outcome: Outcome::Success,
            ..
        })
    ));
    // The validated checkpoint of the success is marked once it exists.
    let fx = a.handle(Input::CheckpointCreated {
        id: "cp9".into(),
        validated: true,
    });
    assert_eq!(
        fx,
        vec![Effect::MarkValidated {
            checkpoint: "cp9".into()
        }]
    );
    assert_eq!(a.validated_checkpoint(), Some("cp9"));
    a
}

fn concluded(
    a: &mut Agent,
    fingerprint: &str,
    credentials: &[&str],
    error: Option<&str>,
) -> Effect {
    let fx = a.handle(Input::Concluded(PatchFacts {
        fingerprint: fingerprint.into(),
        credentials: credentials.iter().map(|c| c.to_string()).collect(),
        left_out: Vec::new(),
        export_error: error.map(str::to_string),
        too_large: Vec::new(),
    }));
    assert_eq!(fx.len(), 1, "{fx:?}");
    fx[0].clone()
}

#[test]
fn success_is_bound_to_the_verified_workspace() {
    let mut a = succeeded("fp-verified");
    assert_eq!(
        concluded(&mut a, "fp-verified", &[], None),
        Effect::End {
            outcome: Outcome::Success,
            reason: "verification passed".into()
        }
    );
    let mut a = succeeded("fp-verified");
    assert!(matches!(
        concluded(&mut a, "fp-changed-since", &[], None),
        Effect::End { outcome: Outcome::Failure, reason } if reason.contains("changed after the passing verification")
    ));
    let mut a = succeeded("fp-verified");
    assert!(matches!(
        concluded(&mut a, "fp-verified", &["npm token"], None),
        Effect::End { outcome: Outcome::Failure, reason } if reason.contains("would add a credential (npm token)")
    ));
    let mut a = succeeded("fp-verified");
    assert!(matches!(
        concluded(&mut a, "fp-verified", &[], Some("disk full")),
        Effect::End { outcome: Outcome::Failure, reason } if reason.contains("could not be exported: disk full")
    ));
    assert!(
        a.handle(reply(vec![])).is_empty(),
        "a finished agent does nothing"
    );
}

#[test]
fn failures_are_typed_and_a_missing_checkpoint_does_not_end_the_run() {
    let (mut a, _) = started(false);
    a.handle(reply(vec![
        call("p", "update_plan", PLAN_WIP),
        call("s", "run_shell", r#"{"command":"true"}"#),
    ]));
    let fx = a.handle(Input::Failed {
        kind: FailureKind::Checkpoint,
        reason: "disk full".into(),
    });
    assert!(fx.is_empty(), "{fx:?}");
    assert!(!a.is_finished());
    let fx = a.handle(Input::Failed {
        kind: FailureKind::Sandbox,
        reason: "the supervisor is gone".into(),
    });
    assert!(matches!(
        fx.last(),
        Some(Effect::Finish { outcome: Outcome::Failure, reason }) if reason == "the sandbox failed: the supervisor is gone"
    ));
}

#[test]
fn a_result_for_another_call_changes_nothing() {
    let (mut a, _) = started(false);
    a.handle(reply(vec![call("r", "read_file", r#"{"path":"a"}"#)]));
    let fx = a.handle(Input::ToolFinished {
        call_id: "someone-else".into(),
        ok: true,
        content: "x".into(),
    });
    assert!(fx.is_empty());
    assert!(matches!(
        a.phase(),
        crate::agent::phase::Phase::AwaitingTool { .. }
    ));
}

#[test]
fn the_state_round_trips_through_serde() {
    let mut a = approving_agent();
    prepared_edit(&mut a, "e1", vec![]);
    let json = serde_json::to_string(&a).expect("serialise");
    let mut back: Agent = serde_json::from_str(&json).expect("deserialise");
    assert_eq!(back.messages(), a.messages());
    assert_eq!(back.phase(), a.phase());
    assert_eq!(back.stats(), a.stats());
    // The reloaded agent goes on where the first one was.
    let id = back
        .phase()
        .pending_approval()
        .map(|p| p.id.clone())
        .expect("waiting");
    let fx = back.handle(Input::Approval {
        id,
        decision: ApprovalDecision::Approve,
    });
    assert!(applies(&fx));
}

#[test]
fn an_edit_of_a_credential_file_is_refused_without_asking() {
    let mut a = approving_agent();
    a.handle(reply(vec![
        call("p", "update_plan", PLAN_WIP),
        call("e1", "edit_file", EDIT),
    ]));
    let fx = a.handle(Input::EditPrepared {
        call_id: "e1".into(),
        path: ".env".into(),
        patch: "--- /dev/null\n+++ b/.env\n".into(),
        credentials: Vec::new(),
        credential_file: true,
    });
    assert!(!applies(&fx));
    assert!(!has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ApprovalRequested { .. })
    )));
    assert!(last_tool_result(&a).contains("`.env` is a credential file"));
    assert!(calls_model(&fx));
}

#[test]
fn a_baseline_check_that_cannot_run_stops_the_run_as_an_environment_error() {
    let (mut a, _) = {
        let mut a = Agent::new(config());
        let fx = start(&mut a);
        (a, fx)
    };
    let fx = a.handle(Input::Failed {
        kind: FailureKind::Environment,
        reason: "check tests: `npm` is not in the image (exit 127)".into(),
    });
    assert!(matches!(
        fx.last(),
        Some(Effect::Finish { outcome: Outcome::Failure, reason }) if reason.starts_with("environment error: check tests")
    ));
}

fn hooked_agent() -> Agent {
    let mut a = Agent::new(AgentConfig {
        hooks: crate::agent::effects::HookPoints {
            pre_tool_use: true,
            ..Default::default()
        },
        ..config()
    });
    start(&mut a);
    a
}

const SHELL: &str = r#"{"command":"rm -rf /tmp/x"}"#;

#[test]
fn with_pre_tool_hooks_a_call_waits_for_them_and_a_refusal_reaches_the_model() {
    let mut a = hooked_agent();
    let fx = a.handle(reply(vec![
        call("p", "update_plan", PLAN_WIP),
        call("s", "run_shell", SHELL),
        call("r", "read_file", r#"{"path":"a.py"}"#),
    ]));
    // The plan is the agent's own: no hook; the command waits for them.
    assert!(
        matches!(fx.last(), Some(Effect::PreToolHooks(c)) if c.id == "s"),
        "{fx:?}"
    );
    assert!(!has(&fx, |e| matches!(e, Effect::RunTool(_))));
    assert_eq!(a.phase().name(), "running hooks");
    // A result for another call changes nothing.
    let fx = a.handle(Input::PreToolHooksRan {
        call_id: "other".into(),
        refused: None,
        arguments: None,
        ask: None,
    });
    assert!(!has(&fx, |e| matches!(e, Effect::RunTool(_))));
    let fx = a.handle(Input::PreToolHooksRan {
        call_id: "s".into(),
        refused: Some("no rm -rf".into()),
        arguments: None,
        ask: None,
    });
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ToolFinished { call_id, ok: false, .. }) if call_id == "s"
    )));
    // The next call's hooks run; the refused one never ran.
    assert!(
        matches!(fx.last(), Some(Effect::PreToolHooks(c)) if c.id == "r"),
        "{fx:?}"
    );
    assert!(!has(
        &fx,
        |e| matches!(e, Effect::RunTool(c) if c.id == "s")
    ));
    assert_eq!(
        last_tool_result(&a),
        "Blocked by a PreToolUse hook: no rm -rf"
    );
}

#[test]
fn a_rewritten_call_runs_with_its_new_arguments_and_still_meets_the_policy() {
    let mut a = hooked_agent();
    a.handle(reply(vec![
        call("p", "update_plan", PLAN_WIP),
        call("s", "run_shell", SHELL),
    ]));
    let fx = a.handle(Input::PreToolHooksRan {
        call_id: "s".into(),
        refused: None,
        arguments: Some(r#"{"command":"echo safe"}"#.into()),
        ask: None,
    });
    assert!(
        matches!(fx.last(), Some(Effect::RunTool(c)) if c.id == "s" && c.arguments == r#"{"command":"echo safe"}"#),
        "{fx:?}"
    );
    // Arguments that are no JSON object are refused as the model's own
    // would be.
    let mut a = hooked_agent();
    a.handle(reply(vec![
        call("p", "update_plan", PLAN_WIP),
        call("x", "run_shell", SHELL),
    ]));
    let fx = a.handle(Input::PreToolHooksRan {
        call_id: "x".into(),
        refused: None,
        arguments: Some("[1]".into()),
        ask: None,
    });
    assert!(!has(&fx, |e| matches!(e, Effect::RunTool(_))), "{fx:?}");
    assert!(last_tool_result(&a).starts_with("Refused: the arguments of run_shell"));
}

#[test]
fn without_hooks_a_call_runs_at_once() {
    let mut a = Agent::new(config());
    start(&mut a);
    let fx = a.handle(reply(vec![
        call("p", "update_plan", PLAN_WIP),
        call("s", "run_shell", SHELL),
    ]));
    assert!(
        matches!(fx.last(), Some(Effect::RunTool(c)) if c.id == "s"),
        "{fx:?}"
    );
    assert!(!has(&fx, |e| matches!(e, Effect::PreToolHooks(_))));
}

fn passed_completion(a: &mut Agent) -> Vec<Effect> {
    a.handle(Input::Verified {
        reason: V::Completion,
        passed: true,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: Vec::new(),
    })
}

/// An agent with `Stop` hooks that has asked for completion.
fn stop_hooked_agent() -> Agent {
    let mut a = Agent::new(AgentConfig {
        hooks: crate::agent::effects::HookPoints {
            stop: true,
            ..Default::default()
        },
        ..config()
    });
    start(&mut a);
    super::tests::complete(&mut a, "c1");
    a
}

#[test]
fn a_stop_hook_refuses_the_end_once_and_then_the_verified_run_ends() {
    let mut a = stop_hooked_agent();
    let fx = passed_completion(&mut a);
    assert_eq!(
        fx.last(),
        Some(&Effect::StopHooks {
            stop_hook_active: false
        })
    );
    assert!(!has(&fx, |e| matches!(e, Effect::Finish { .. })));
    let fx = a.handle(Input::StopHooksRan {
        refused: Some("run the linter first".into()),
    });
    assert!(calls_model(&fx), "{fx:?}");
    assert!(
        last_tool_result(&a)
            .contains("a Stop hook refused the end of the run: run the linter first")
    );
    super::tests::complete(&mut a, "c2");
    let fx = passed_completion(&mut a);
    assert_eq!(
        fx.last(),
        Some(&Effect::StopHooks {
            stop_hook_active: true
        })
    );
    // Refused again: the run ends all the same, verified.
    let fx = a.handle(Input::StopHooksRan {
        refused: Some("still no".into()),
    });
    assert!(
        matches!(
            fx.last(),
            Some(Effect::Finish {
                outcome: Outcome::Success,
                ..
            })
        ),
        "{fx:?}"
    );
}

#[test]
fn a_stop_hook_that_lets_the_run_end_ends_it_verified() {
    let mut a = stop_hooked_agent();
    passed_completion(&mut a);
    let fx = a.handle(Input::StopHooksRan { refused: None });
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Checkpoint {
            validated: true,
            ..
        }
    )));
    assert!(matches!(
        fx.last(),
        Some(Effect::Finish {
            outcome: Outcome::Success,
            ..
        })
    ));
}

#[test]
fn hook_context_goes_out_with_the_next_turn_once() {
    let mut a = Agent::new(config());
    a.handle(Input::HookContext {
        event: "SessionStart".into(),
        text: "branch policy: small commits".into(),
    });
    let fx = start(&mut a);
    let Some(Effect::CallModel(request)) = fx.last() else {
        panic!("{fx:?}");
    };
    let said = |r: &crate::model::types::ModelRequest| {
        r.messages
            .iter()
            .filter(|m| {
                m.content
                    .as_deref()
                    .is_some_and(|c| c.contains("SessionStart hook:\nbranch policy"))
            })
            .count()
    };
    assert_eq!(said(request), 1);
    let fx = a.handle(reply(vec![call("p", "update_plan", PLAN_WIP)]));
    let Some(Effect::CallModel(next)) = fx.last() else {
        panic!("{fx:?}");
    };
    assert_eq!(said(next), 1, "kept in the history, not added again");
}

const LOOKUP: &str = "mcp__notes__lookup";

/// An agent offered the notes server's `lookup`, allowed or not, with or
/// without anyone to ask; past the baseline.
fn external_agent(allowed: bool, can_ask: bool) -> Agent {
    let mut cfg = config();
    cfg.tools.push(crate::model::types::ToolSpec {
        name: LOOKUP.into(),
        description: "look a note up".into(),
        parameters: serde_json::json!({"type": "object"}),
    });
    cfg.external = crate::agent::effects::ExternalTools {
        allowed: if allowed {
            vec![LOOKUP.into()]
        } else {
            Vec::new()
        },
        can_ask,
    };
    let mut a = Agent::new(cfg);
    start(&mut a);
    a.handle(Input::Verified {
        reason: V::Baseline,
        passed: false,
        fingerprint: "base".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    a
}

fn lookup_reply() -> Input {
    reply(vec![call("c1", LOOKUP, r#"{"topic": "pagination"}"#)])
}

fn runs_lookup(fx: &[Effect]) -> bool {
    has(fx, |e| matches!(e, Effect::RunTool(c) if c.name == LOOKUP))
}

#[test]
fn an_allowed_mcp_tool_runs_without_asking_and_needs_no_plan() {
    let mut a = external_agent(true, false);
    let fx = a.handle(lookup_reply());
    assert!(runs_lookup(&fx), "{fx:?}");
    assert!(!has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ApprovalRequested { .. })
    )));
    assert!(
        !has(&fx, |e| matches!(e, Effect::Checkpoint { .. })),
        "no checkpoint: it changes no file"
    );
}

#[test]
fn an_mcp_tool_not_allowed_asks_the_person_and_runs_only_on_a_yes() {
    let mut a = external_agent(false, true);
    let fx = a.handle(lookup_reply());
    assert!(!runs_lookup(&fx), "{fx:?}");
    let started = fx.iter().position(
        |e| matches!(e, Effect::Emit(RunEvent::ToolStarted { name, .. }) if name == LOOKUP),
    );
    let asked = fx.iter().position(|e| {
        matches!(e, Effect::Emit(RunEvent::ApprovalRequested { path, patch, .. })
            if path == LOOKUP && patch.contains("\"topic\": \"pagination\""))
    });
    assert!(started.is_some() && asked > started, "{fx:?}");
    assert!(
        matches!(fx.last(), Some(Effect::AwaitApproval { .. })),
        "{fx:?}"
    );
    let id = asked_id(&fx);

    // An answer to something else changes nothing; the yes runs the call.
    let fx = a.handle(Input::Approval {
        id: "approval-99".into(),
        decision: ApprovalDecision::Approve,
    });
    assert!(!runs_lookup(&fx));
    let fx = a.handle(Input::Approval {
        id,
        decision: ApprovalDecision::Approve,
    });
    assert!(runs_lookup(&fx), "{fx:?}");

    // The next call asks again: one yes is one call.
    a.handle(Input::ToolFinished {
        call_id: "c1".into(),
        ok: true,
        content: "note".into(),
    });
    let fx = a.handle(reply(vec![call("c2", LOOKUP, "{}")]));
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ApprovalRequested { .. })
    )));
}

#[test]
fn approving_an_mcp_tool_for_the_run_stops_asking_for_that_tool_only() {
    let mut a = external_agent(false, true);
    let id = asked_id(&a.handle(lookup_reply()));
    let fx = a.handle(Input::Approval {
        id,
        decision: ApprovalDecision::ApproveAll,
    });
    assert!(runs_lookup(&fx), "{fx:?}");
    a.handle(Input::ToolFinished {
        call_id: "c1".into(),
        ok: true,
        content: "note".into(),
    });
    let fx = a.handle(reply(vec![call("c2", LOOKUP, "{}")]));
    assert!(runs_lookup(&fx), "{fx:?}");
    // Edits still follow the edit approval mode (never, here): untouched.
    assert!(!a.approve_all);
}

#[test]
fn a_refused_or_unanswerable_mcp_call_is_answered_no_and_the_run_goes_on() {
    let mut a = external_agent(false, true);
    let id = asked_id(&a.handle(lookup_reply()));
    let fx = a.handle(Input::Approval {
        id,
        decision: ApprovalDecision::Refuse(Some("not now".into())),
    });
    assert!(!runs_lookup(&fx));
    assert!(has(&fx, |e| matches!(e,
        Effect::Emit(RunEvent::ToolFinished { ok: false, result, .. }) if result.contains("not now"))));
    assert!(calls_model(&fx), "{fx:?}");

    let mut a = external_agent(false, false);
    let fx = a.handle(lookup_reply());
    assert!(!runs_lookup(&fx));
    assert!(!has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ApprovalRequested { .. })
    )));
    assert!(has(&fx, |e| matches!(e,
        Effect::Emit(RunEvent::ToolFinished { ok: false, result, .. }) if result.contains("allow-listed"))));
    assert!(calls_model(&fx), "{fx:?}");
}

#[test]
fn a_tool_name_no_server_offered_is_unknown() {
    let mut a = external_agent(true, true);
    let fx = a.handle(reply(vec![call("c1", "mcp__other__tool", "{}")]));
    assert!(has(
        &fx,
        |e| matches!(e, Effect::Emit(RunEvent::PolicyRefused { reason, .. }) if reason.contains("unknown tool"))
    ));
    assert!(!has(&fx, |e| matches!(e, Effect::RunTool(_))));
}

#[test]
fn a_hook_that_asks_puts_the_call_to_the_person_or_refuses_it_with_nobody_there() {
    for can_ask in [true, false] {
        let mut a = hooked_agent();
        a.config.external.can_ask = can_ask;
        a.handle(reply(vec![
            call("p", "update_plan", PLAN_WIP),
            call("s", "run_shell", SHELL),
        ]));
        let fx = a.handle(Input::PreToolHooksRan {
            call_id: "s".into(),
            refused: None,
            arguments: None,
            ask: Some("deploys need a look".into()),
        });
        assert!(!has(&fx, |e| matches!(e, Effect::RunTool(_))), "{fx:?}");
        if !can_ask {
            assert!(last_tool_result(&a).contains("deploys need a look"));
            assert!(last_tool_result(&a).contains("nobody can be asked"));
            continue;
        }
        assert!(has(&fx, |e| matches!(e,
            Effect::Emit(RunEvent::ApprovalRequested { path, call: Some(c), .. })
                if path == "run_shell" && !c.outside_sandbox
                    && c.reason.as_deref() == Some("deploys need a look"))));
        let id = asked_id(&fx);
        let fx = a.handle(Input::Approval {
            id,
            decision: ApprovalDecision::Approve,
        });
        // The yes runs it, after the checkpoint a command gets.
        assert!(
            has(&fx, |e| matches!(e, Effect::Checkpoint { .. })),
            "{fx:?}"
        );
        assert!(
            matches!(fx.last(), Some(Effect::RunTool(c)) if c.id == "s"),
            "{fx:?}"
        );
    }
}
