//! The context rules of the reducer: what every request carries, compaction
//! and its limits, calibration, project instructions.

use super::tests::{PLAN_WIP, call, config, has, reply, start, started};
use super::*;
use crate::agent::context::{STOP_AT, message_chars};
use crate::agent::instructions::{InstructionDoc, InstructionLookup};
use crate::agent::run_state::FileChange;
use crate::model::types::{ModelId, ModelRequest, Role, Usage};
use crate::protocol::VerificationReason as V;

fn request(fx: &[Effect]) -> &ModelRequest {
    match fx.last() {
        Some(Effect::CallModel(req)) => req,
        other => panic!("expected a model call, got {other:?}"),
    }
}

fn text(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .filter_map(|m| m.content.as_deref())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The run state: the last message of every request.
fn state_of(req: &ModelRequest) -> String {
    let last = req.messages.last().expect("a message");
    assert_eq!(last.role, Role::User);
    let text = last.content.clone().unwrap_or_default();
    assert!(text.starts_with("Run state"), "{text}");
    text
}

/// The plain estimate of a request, as the reducer counts it.
fn estimate(a: &Agent, req: &ModelRequest) -> u64 {
    let chars: usize = req.messages.iter().map(message_chars).sum::<usize>() + a.tools_chars;
    crate::model::types::estimate_tokens(chars)
}

fn assert_paired(req: &ModelRequest) {
    let mut open: Vec<String> = Vec::new();
    for m in &req.messages {
        match m.role {
            Role::Assistant => {
                assert!(open.is_empty(), "unanswered calls {open:?}");
                open = m.tool_calls.iter().map(|c| c.id.clone()).collect();
            }
            Role::Tool => {
                let id = m.tool_call_id.clone().unwrap_or_default();
                assert!(open.contains(&id), "result {id} without its call");
                open.retain(|o| *o != id);
            }
            _ => assert!(open.is_empty(), "a message between calls and results"),
        }
    }
}

fn finished(id: &str, content: String) -> Input {
    Input::ToolFinished {
        call_id: id.into(),
        ok: true,
        content,
    }
}

const PLAN_TWO: &str = r#"{"items":[{"id":"1","content":"reproduce the failure","status":"done","notes":"test_partial_last_page_counts fails"},{"id":"2","content":"round the page count up","status":"in_progress"}]}"#;

const PYTEST_FAILURE: &str = "exit code 1; duration 300 ms\n--- stdout:\n.F....\n\
E       assert 2 == 3\n\
FAILED tests/test_pagination.py::test_partial_last_page_counts - assert 2 == 3\n\
1 failed, 5 passed in 0.05s\n";

#[test]
fn every_request_ends_with_the_run_state() {
    let mut a = Agent::new(config());
    let fx = start(&mut a);
    let first = state_of(request(&fx));
    assert!(first.contains("Budget: turn 1 of 50"), "{first}");
    assert!(first.contains("Plan: none yet"));
    assert_eq!(
        request(&fx).messages[1].content.as_deref(),
        Some("Task:\nfix the bug")
    );
    a.handle(reply(vec![
        call("p", "update_plan", PLAN_TWO),
        call("r", "read_file", r#"{"path":"./pagination.py"}"#),
    ]));
    a.handle(Input::WorkspaceChanged {
        files: vec![FileChange {
            path: "pagination.py".into(),
            added: 1,
            removed: 1,
        }],
    });
    a.handle(Input::FollowUp("keep the docstring".into()));
    let fx = a.handle(finished("r", "pagination.py (lines 1-3 of 3)\n".into()));
    let state = state_of(request(&fx));
    for needle in [
        "Budget: turn 2 of 50 (48 left after this one); tokens used 110 of 1000000",
        "of the 1000000-token context",
        "- [done] 1: reproduce the failure — notes: test_partial_last_page_counts fails",
        "- [in_progress] 2: round the page count up",
        "Files read (most recent last): pagination.py",
        "- pagination.py +1 −1",
        "Latest verification: none yet.",
        "- keep the docstring",
    ] {
        assert!(state.contains(needle), "{needle:?} missing from\n{state}");
    }
}

#[test]
fn the_latest_verification_shows_failing_tests_and_a_late_baseline_does_not_replace_it() {
    let mut a = Agent::new(config());
    start(&mut a);
    a.handle(reply(vec![
        call("p", "update_plan", super::tests::PLAN_DONE),
        call("c", "request_completion", r#"{"summary":"done"}"#),
    ]));
    let fx = a.handle(Input::Verified {
        reason: V::Completion,
        passed: false,
        fingerprint: "fp".into(),
        feedback: "tests: exit 1".into(),
        checks: vec![CheckOutput {
            name: "tests".into(),
            exit_code: Some(1),
            passed: false,
            failure: None,
            output: PYTEST_FAILURE.into(),
        }],
    });
    assert!(has(&fx, |e| matches!(e, Effect::AwaitBaseline)));
    // The baseline's verdict arrives after the completion's.
    let fx = a.handle(Input::Verified {
        reason: V::Baseline,
        passed: false,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: vec![CheckOutput {
            name: "tests".into(),
            exit_code: Some(2),
            passed: false,
            failure: None,
            output: "FAILED tests/test_other.py::test_baseline_only\n".into(),
        }],
    });
    let state = state_of(request(&fx));
    assert!(
        state.contains("Latest verification (attempt 2, of your completion request): FAILED"),
        "{state}"
    );
    assert!(state.contains("- tests FAILED, exit 1"));
    assert!(
        state.contains("failing tests: tests/test_pagination.py::test_partial_last_page_counts")
    );
    assert!(state.contains("E       assert 2 == 3"));
    assert!(!state.contains("test_baseline_only"), "{state}");
}

#[test]
fn a_baseline_verdict_is_the_latest_until_another_comes() {
    let mut a = Agent::new(config());
    start(&mut a);
    let fx = a.handle(Input::Verified {
        reason: V::Baseline,
        passed: false,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: vec![CheckOutput {
            name: "tests".into(),
            exit_code: Some(1),
            passed: false,
            failure: None,
            output: PYTEST_FAILURE.into(),
        }],
    });
    assert!(fx.is_empty(), "the baseline verdict alone asks nothing");
    a.handle(reply(vec![call("r", "read_file", r#"{"path":"a"}"#)]));
    let fx = a.handle(finished("r", "x".into()));
    let state = state_of(request(&fx));
    assert!(
        state.contains(
            "Latest verification (attempt 1, of the baseline, before your changes): FAILED"
        ),
        "{state}"
    );
    assert!(state.contains("test_partial_last_page_counts"));
}

#[test]
fn a_rollback_is_recovery_evidence_in_every_later_request() {
    let (mut a, _) = started(true);
    for i in 1..=3 {
        super::tests::complete(&mut a, &format!("c{i}"));
        a.handle(Input::Verified {
            reason: V::Completion,
            passed: false,
            fingerprint: "fp".into(),
            feedback: "fail".into(),
            checks: vec![CheckOutput {
                name: "tests".into(),
                exit_code: Some(1),
                passed: false,
                failure: None,
                output: PYTEST_FAILURE.into(),
            }],
        });
    }
    a.handle(Input::Restored { id: "base".into() });
    let fx = a.handle(Input::Verified {
        reason: V::AfterRestore,
        passed: true,
        fingerprint: "fp0".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    let state = state_of(request(&fx));
    assert!(
        state.contains(
            "- rollback 1: after 3 failed completion verifications since the validated checkpoint base"
        ),
        "{state}"
    );
    assert!(
        state.contains(
            "failing then: tests (exit 1: tests/test_pagination.py::test_partial_last_page_counts)"
        ),
        "{state}"
    );
    assert!(state.contains("- after rollback 1, verification of the restored checkpoint passes"));
}

/// A run whose results pass 75 % of a small budget again and again.
fn long_run(limit: u64) -> (Agent, Vec<ModelRequest>, usize) {
    let mut a = Agent::new(AgentConfig {
        context_limit: limit,
        tools: crate::tools::specs(),
        max_turns: 200,
        instructions: vec![InstructionDoc {
            path: "AGENTS.md".into(),
            text: "Run the tests with python3 -m pytest -q.".into(),
            bytes: 40,
            truncated: false,
        }],
        ..config()
    });
    let mut requests = vec![request(&start(&mut a)).clone()];
    let mut compactions = 0;
    let mut turn = |a: &mut Agent, calls: Vec<ToolCall>, results: Vec<String>| {
        let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
        let mut fx = a.handle(reply(calls));
        for (id, content) in ids.iter().zip(results) {
            fx = a.handle(finished(id, content));
        }
        compactions += fx
            .iter()
            .filter(|e| matches!(e, Effect::Emit(RunEvent::ContextCompacted { .. })))
            .count();
        requests.push(request(&fx).clone());
    };
    turn(
        &mut a,
        vec![
            call("p", "update_plan", PLAN_TWO),
            call("t0", "run_shell", r#"{"command":"python3 -m pytest -q"}"#),
        ],
        vec![
            "Plan updated".into(),
            format!("{PYTEST_FAILURE}{}", "collected line\n".repeat(600)),
        ],
    );
    a.handle(Input::WorkspaceChanged {
        files: vec![FileChange {
            path: "pagination.py".into(),
            added: 1,
            removed: 1,
        }],
    });
    for i in 1..30 {
        let id = format!("t{i}");
        turn(
            &mut a,
            vec![call(
                &id,
                "run_shell",
                &format!(r#"{{"command":"cat log{i}.txt"}}"#),
            )],
            vec![format!(
                "exit code 0; duration 5 ms\n{}",
                format!("log line {i}\n").repeat(900)
            )],
        );
    }
    (a, requests, compactions)
}

#[test]
fn after_many_compactions_the_model_still_sees_what_matters_and_no_request_exceeds_the_budget() {
    let limit = 12_000;
    let (a, requests, compactions) = long_run(limit);
    assert!(compactions >= 3, "{compactions} compactions");
    for (i, req) in requests.iter().enumerate() {
        let tokens = estimate(&a, req);
        assert!(
            tokens as f64 <= STOP_AT * limit as f64,
            "request {i}: {tokens} tokens of {limit}"
        );
        assert_paired(req);
    }
    let last = requests.last().expect("requests");
    let all = text(last);
    assert!(
        !all.contains("collected line\ncollected line"),
        "the first output itself is gone"
    );
    assert!(
        all.contains("tests/test_pagination.py::test_partial_last_page_counts"),
        "the failing test of the first command is still named"
    );
    let state = state_of(last);
    assert!(
        state.contains("- [in_progress] 2: round the page count up"),
        "{state}"
    );
    assert!(state.contains("- pagination.py +1 −1"), "{state}");
    assert!(
        all.contains("--- AGENTS.md ---\nRun the tests with python3 -m pytest -q."),
        "instructions are never compacted"
    );
    assert_eq!(
        last.messages[1].content.as_deref(),
        Some("Task:\nfix the bug")
    );
}

#[test]
fn a_provider_that_counts_more_tokens_makes_compaction_come_sooner() {
    let run = |reported: u64| {
        let mut a = Agent::new(AgentConfig {
            context_limit: 20_000,
            ..config()
        });
        start(&mut a);
        let mut compacted_at = None;
        for i in 0..40 {
            let id = format!("r{i}");
            let estimated = a.last_request_tokens;
            a.handle(Input::ModelReplied(ModelReply {
                content: None,
                tool_calls: vec![call(&id, "read_file", r#"{"path":"a"}"#)],
                usage: Usage {
                    input: estimated * reported / 100,
                    output: 10,
                    cached: 0,
                    estimated: false,
                },
                model: ModelId {
                    provider: "test".into(),
                    model: "m".into(),
                },
                provider: Default::default(),
            }));
            let fx = a.handle(finished(&id, "w".repeat(2000)));
            if compacted_at.is_none()
                && has(&fx, |e| {
                    matches!(e, Effect::Emit(RunEvent::ContextCompacted { .. }))
                })
            {
                compacted_at = Some(i);
            }
        }
        (compacted_at.expect("compacted"), a.calibration.percent())
    };
    let (plain, p) = run(50);
    assert_eq!(p, 100, "a lower count never scales the estimate down");
    let (calibrated, p) = run(200);
    assert_eq!(p, 200);
    assert!(calibrated < plain, "{calibrated} vs {plain}");
}

#[test]
fn instructions_from_the_root_start_the_run_and_deeper_ones_come_as_the_agent_goes() {
    let mut a = Agent::new(AgentConfig {
        instructions: vec![InstructionDoc {
            path: "AGENTS.md".into(),
            text: "root rules".into(),
            bytes: 10,
            truncated: false,
        }],
        ..config()
    });
    let fx = start(&mut a);
    assert!(matches!(
        &fx[0],
        Effect::Emit(RunEvent::InstructionsLoaded { path, bytes: 10, truncated: false }) if path == "AGENTS.md"
    ));
    let req = request(&fx);
    assert_eq!(req.messages[2].role, Role::User);
    let instructions = req.messages[2].content.clone().unwrap_or_default();
    assert!(
        instructions.contains("--- AGENTS.md ---\nroot rules"),
        "{instructions}"
    );

    a.handle(Input::Verified {
        reason: V::Baseline,
        passed: false,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    a.handle(reply(vec![call("p", "update_plan", PLAN_WIP)]));
    let fx = a.handle(reply(vec![
        call("e", "read_file", r#"{"path":"pkg/sub/m.py"}"#),
        call("f", "read_file", r#"{"path":"pkg/other.py"}"#),
    ]));
    let lookups: Vec<InstructionLookup> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::ReadInstructions { lookups } => Some(lookups.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let dirs: Vec<&str> = lookups.iter().map(|l| l.dir.as_str()).collect();
    assert_eq!(dirs, ["pkg", "pkg/sub"]);
    assert_eq!(
        lookups[1].candidates,
        ["pkg/sub/AGENTS.md", "pkg/sub/CLAUDE.md"]
    );
    let at = fx
        .iter()
        .position(|e| matches!(e, Effect::ReadInstructions { .. }));
    let runs = fx.iter().position(|e| matches!(e, Effect::RunTool(_)));
    assert!(at < runs, "looked for before the call runs");
    let fx = a.handle(Input::InstructionsRead {
        docs: vec![InstructionDoc {
            path: "pkg/sub/AGENTS.md".into(),
            text: "sub rules".into(),
            bytes: 9,
            truncated: false,
        }],
    });
    assert!(matches!(
        &fx[..],
        [Effect::Emit(RunEvent::InstructionsLoaded { path, .. })] if path == "pkg/sub/AGENTS.md"
    ));
    let fx = a.handle(finished("e", "m.py".into()));
    assert!(
        !has(&fx, |e| matches!(e, Effect::ReadInstructions { .. })),
        "pkg was looked at already"
    );
    let fx = a.handle(finished("f", "other.py".into()));
    let instructions = request(&fx).messages[2].content.clone().unwrap_or_default();
    let root = instructions.find("root rules").expect("root");
    let sub = instructions.find("sub rules").expect("sub");
    assert!(root < sub, "root first");
}

#[test]
fn the_new_state_round_trips_through_serde() {
    let (a, requests, _) = long_run(12_000);
    let json = serde_json::to_string(&a).expect("serialise");
    let back: Agent = serde_json::from_str(&json).expect("deserialise");
    assert_eq!(back.messages(), a.messages());
    assert_eq!(back.run_state(), a.run_state());
    assert_eq!(back.instructions(), a.instructions());
    assert_eq!(
        state_of(requests.last().expect("a request")),
        state_of(&ModelRequest {
            messages: back.messages(),
            tools: vec![],
        })
    );
}

/// Two turns whose results take the next request past 75 % of a 12,000
/// token budget; the effects of the second result.
fn past_compaction(a: &mut Agent) -> Vec<Effect> {
    start(a);
    a.handle(reply(vec![
        call("p", "update_plan", PLAN_TWO),
        call("t0", "run_shell", r#"{"command":"python3 -m pytest -q"}"#),
    ]));
    a.handle(finished("p", "Plan updated".into()));
    let fx = a.handle(finished("t0", "collected line\n".repeat(1000)));
    assert!(
        matches!(fx.last(), Some(Effect::CallModel(_))),
        "{:?}",
        short(&fx)
    );
    a.handle(reply(vec![call("t1", "run_shell", r#"{"command":"ls"}"#)]));
    a.handle(finished("t1", "listed file\n".repeat(1200)))
}

/// The effects, each cut to its first words (results are long).
fn short(fx: &[Effect]) -> Vec<String> {
    fx.iter()
        .map(|e| format!("{e:?}").chars().take(60).collect())
        .collect()
}

fn compacting_agent(hooks: crate::agent::effects::HookPoints) -> Agent {
    Agent::new(AgentConfig {
        context_limit: 12_000,
        tools: crate::tools::specs(),
        max_turns: 200,
        hooks,
        ..config()
    })
}

#[test]
fn with_compaction_hooks_the_pre_hooks_run_before_it_and_the_post_hooks_after() {
    let mut a = compacting_agent(crate::agent::effects::HookPoints {
        pre_compact: true,
        post_compact: true,
        ..Default::default()
    });
    let fx = past_compaction(&mut a);
    // The turn waits for the PreCompact hooks; nothing is compacted yet.
    assert!(
        matches!(fx.last(), Some(Effect::PreCompactHooks { tokens }) if *tokens > 9_000),
        "{:?}",
        short(&fx)
    );
    assert!(!has(&fx, |e| matches!(
        e,
        Effect::Emit(RunEvent::ContextCompacted { .. })
    )));
    assert!(!has(&fx, |e| matches!(e, Effect::CallModel(_))));
    assert_eq!(a.phase().name(), "running compaction hooks");
    // Anything else meanwhile changes nothing.
    let fx = a.handle(Input::StopHooksRan { refused: None });
    assert!(!has(&fx, |e| matches!(e, Effect::CallModel(_))));

    let fx = a.handle(Input::PreCompactHooksRan {
        context: vec!["keep the failing test's name".into()],
    });
    let compacted = fx
        .iter()
        .position(|e| matches!(e, Effect::Emit(RunEvent::ContextCompacted { .. })))
        .expect("compacted");
    let post = fx
        .iter()
        .position(|e| matches!(e, Effect::PostCompactHooks { messages_compacted, .. } if *messages_compacted > 0))
        .expect("the PostCompact hooks hear of it");
    assert!(compacted < post, "{:?}", short(&fx));
    let req = request(&fx);
    assert!(
        text(req).contains("keep the failing test's name"),
        "the hook's note outlives it"
    );
}

#[test]
fn without_compaction_hooks_the_context_is_compacted_at_once() {
    let mut a = compacting_agent(Default::default());
    let fx = past_compaction(&mut a);
    assert!(
        has(&fx, |e| matches!(
            e,
            Effect::Emit(RunEvent::ContextCompacted { .. })
        )),
        "{:?}",
        short(&fx)
    );
    assert!(!has(&fx, |e| matches!(
        e,
        Effect::PreCompactHooks { .. } | Effect::PostCompactHooks { .. }
    )));
    assert!(
        matches!(fx.last(), Some(Effect::CallModel(_))),
        "{:?}",
        short(&fx)
    );
}
