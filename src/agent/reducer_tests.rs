use super::*;
use crate::model::types::{ModelId, Usage};
use crate::protocol::VerificationReason as V;

pub(super) fn config() -> AgentConfig {
    AgentConfig {
        max_tokens: 1_000_000,
        context_limit: 1_000_000,
        ..AgentConfig::new("fix the bug", vec!["tests: pytest".into()], vec![])
    }
}

pub(super) fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: args.into(),
        ..ToolCall::default()
    }
}

pub(super) fn reply(calls: Vec<ToolCall>) -> Input {
    Input::ModelReplied(ModelReply {
        content: None,
        tool_calls: calls,
        usage: Usage {
            input: 100,
            output: 10,
            cached: 0,
            estimated: false,
        },
        model: ModelId {
            provider: "test".into(),
            model: "m".into(),
        },
        provider: Default::default(),
    })
}

pub(super) const PLAN_WIP: &str =
    r#"{"items":[{"id":"1","content":"fix it","status":"in_progress"}]}"#;
pub(super) const PLAN_DONE: &str = r#"{"items":[{"id":"1","content":"fix it","status":"done"}]}"#;

pub(super) fn start(a: &mut Agent) -> Vec<Effect> {
    a.handle(Input::Start {
        baseline_checkpoint: "base".into(),
    })
}

/// An agent past the baseline verification (which `baseline_passes` decides).
pub(super) fn started(baseline_passes: bool) -> (Agent, Vec<Effect>) {
    let mut a = Agent::new(config());
    let fx = start(&mut a);
    assert_eq!(fx[0], Effect::VerifyBaseline { attempt: 1 });
    assert!(calls_model(&fx), "the agent does not wait for the baseline");
    let fx = a.handle(Input::Verified {
        reason: V::Baseline,
        passed: baseline_passes,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    (a, fx)
}

pub(super) fn last_tool_result(a: &Agent) -> String {
    a.messages()
        .iter()
        .rev()
        .find(|m| m.role == crate::model::types::Role::Tool)
        .and_then(|m| m.content.clone())
        .unwrap_or_default()
}

pub(super) fn has<F: Fn(&Effect) -> bool>(fx: &[Effect], f: F) -> bool {
    fx.iter().any(f)
}

pub(super) fn calls_model(fx: &[Effect]) -> bool {
    matches!(fx.last(), Some(Effect::CallModel(_)))
}

#[test]
fn a_passing_baseline_marks_the_baseline_checkpoint_validated() {
    let (a, fx) = started(true);
    assert_eq!(
        fx,
        vec![Effect::MarkValidated {
            checkpoint: "base".into()
        }]
    );
    assert_eq!(a.validated_checkpoint(), Some("base"));
    assert_eq!(
        a.stats().turns,
        1,
        "no extra turn: the agent was already working"
    );
}

#[test]
fn a_failing_baseline_invents_no_validated_state() {
    let (a, fx) = started(false);
    assert!(fx.is_empty(), "{fx:?}");
    assert_eq!(a.validated_checkpoint(), None);
}

#[test]
fn an_edit_before_a_plan_is_refused_and_the_run_goes_on() {
    let (mut a, _) = started(false);
    let fx = a.handle(reply(vec![call(
        "c1",
        "edit_file",
        r#"{"path":"a.py","patch":""}"#,
    )]));
    assert!(has(
        &fx,
        |e| matches!(e, Effect::Emit(RunEvent::PolicyRefused { name, .. }) if name == "edit_file")
    ));
    assert!(
        !has(&fx, |e| matches!(e, Effect::RunTool(_))),
        "nothing ran"
    );
    assert!(calls_model(&fx), "the run goes on");
    assert!(
        last_tool_result(&a).contains("plan is required"),
        "{}",
        last_tool_result(&a)
    );
}

#[test]
fn a_plan_then_an_edit_checkpoints_before_running() {
    let (mut a, _) = started(false);
    let fx = a.handle(reply(vec![
        call("p", "update_plan", PLAN_WIP),
        call("e", "edit_file", "{}"),
    ]));
    let kinds: Vec<&str> = fx
        .iter()
        .map(|e| match e {
            Effect::Emit(ev) => ev.type_name(),
            Effect::Checkpoint { .. } => "checkpoint",
            Effect::RunTool(_) => "run",
            _ => "other",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "tool.started",
            "plan.updated",
            "checkpoint",
            "tool.finished",
            "tool.started",
            "checkpoint",
            "run"
        ]
    );
    assert_eq!(a.plan().items.len(), 1);
    let fx = a.handle(Input::ToolFinished {
        call_id: "e".into(),
        ok: true,
        content: "applied".into(),
    });
    assert!(calls_model(&fx));
    assert_eq!(a.stats().tool_calls, 2);
}

#[test]
fn an_invalid_plan_is_refused_with_the_reason() {
    let (mut a, _) = started(false);
    let two_wip = r#"{"items":[{"id":"1","content":"a","status":"in_progress"},{"id":"2","content":"b","status":"in_progress"}]}"#;
    a.handle(reply(vec![call("p", "update_plan", two_wip)]));
    assert!(a.plan().is_empty());
    assert!(last_tool_result(&a).contains("at most one plan item may be in_progress"));
}

#[test]
fn no_tool_call_gets_a_correction_and_three_in_a_row_end_the_run() {
    let (mut a, _) = started(false);
    for _ in 0..2 {
        let fx = a.handle(reply(vec![]));
        assert!(has(&fx, |e| matches!(
            e,
            Effect::Emit(RunEvent::AgentCorrection { .. })
        )));
        assert!(calls_model(&fx));
    }
    let fx = a.handle(reply(vec![]));
    assert!(matches!(
        fx.last(),
        Some(Effect::Finish {
            outcome: Outcome::Failure,
            ..
        })
    ));
    assert!(a.is_finished());
    assert!(
        a.handle(reply(vec![])).is_empty(),
        "a finished agent does nothing"
    );
}

#[test]
fn unknown_tools_and_broken_json_get_error_results() {
    let (mut a, _) = started(false);
    a.handle(reply(vec![call("x", "rm_rf", "{}")]));
    assert!(last_tool_result(&a).contains("unknown tool"));
    let fx = a.handle(reply(vec![call("y", "read_file", r#"{"path": "#)]));
    assert!(last_tool_result(&a).contains("not valid JSON"));
    assert!(calls_model(&fx));
}

#[test]
fn completion_with_open_items_is_refused() {
    let (mut a, _) = started(false);
    a.handle(reply(vec![call("p", "update_plan", PLAN_WIP)]));
    let fx = a.handle(reply(vec![call(
        "c",
        "request_completion",
        r#"{"summary":"done"}"#,
    )]));
    assert!(!has(&fx, |e| matches!(e, Effect::Verify { .. })));
    assert!(last_tool_result(&a).contains("every plan item must be done"));
    assert_eq!(
        a.completion_summary(),
        None,
        "a refused request says nothing"
    );
}

#[test]
fn the_latest_completion_summary_is_kept_bounded() {
    let (mut a, _) = started(false);
    complete(&mut a, "c1");
    assert_eq!(a.completion_summary(), Some("done"));
    let long = "x".repeat(super::MAX_SUMMARY_CHARS + 10);
    let (mut b, _) = started(false);
    b.handle(reply(vec![
        call("p", "update_plan", PLAN_DONE),
        call(
            "c",
            "request_completion",
            &serde_json::json!({ "summary": long }).to_string(),
        ),
    ]));
    let kept = b.completion_summary().unwrap();
    assert_eq!(kept.chars().count(), super::MAX_SUMMARY_CHARS + 1);
    assert!(kept.ends_with('…'));
}

pub(super) fn complete(a: &mut Agent, id: &str) -> Vec<Effect> {
    a.handle(reply(vec![
        call(&format!("{id}-p"), "update_plan", PLAN_DONE),
        call(id, "request_completion", r#"{"summary":"done"}"#),
    ]))
}

#[test]
fn only_the_verifier_decides_success() {
    let (mut a, _) = started(false);
    let fx = complete(&mut a, "c1");
    assert!(matches!(
        fx.last(),
        Some(Effect::Verify {
            reason: V::Completion,
            ..
        })
    ));
    let fx = a.handle(Input::Verified {
        reason: V::Completion,
        passed: false,
        fingerprint: "fp".into(),
        feedback: "tests: exit 1".into(),
        checks: Vec::new(),
    });
    assert!(calls_model(&fx), "a failure goes back to the agent");
    assert!(last_tool_result(&a).contains("tests: exit 1"));
    assert_eq!(a.stats().repair_cycles, 1);
    complete(&mut a, "c2");
    let fx = a.handle(Input::Verified {
        reason: V::Completion,
        passed: true,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
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
fn the_third_failed_completion_after_a_validated_state_restores_it() {
    let (mut a, _) = started(true);
    for i in 1..=2 {
        complete(&mut a, &format!("c{i}"));
        let fx = a.handle(Input::Verified {
            reason: V::Completion,
            passed: false,
            fingerprint: "fp".into(),
            feedback: "fail".into(),
            checks: Vec::new(),
        });
        assert!(calls_model(&fx), "repair cycle {i}");
        assert!(last_tool_result(&a).contains(&format!("Repair cycle {i} of 2")));
    }
    complete(&mut a, "c3");
    let fx = a.handle(Input::Verified {
        reason: V::Completion,
        passed: false,
        fingerprint: "fp".into(),
        feedback: "fail".into(),
        checks: Vec::new(),
    });
    assert_eq!(
        fx.last(),
        Some(&Effect::Restore {
            checkpoint: "base".into()
        })
    );
    let fx = a.handle(Input::Restored { id: "base".into() });
    assert!(matches!(
        fx.last(),
        Some(Effect::Verify {
            reason: V::AfterRestore,
            ..
        })
    ));
    let fx = a.handle(Input::Verified {
        reason: V::AfterRestore,
        passed: true,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    assert!(calls_model(&fx), "the run goes on after the rollback");
    let s = a.stats();
    assert_eq!((s.repair_cycles, s.rollbacks), (2, 1));
}

#[test]
fn without_a_validated_state_failures_never_roll_back() {
    let (mut a, _) = started(false);
    for i in 0..4 {
        complete(&mut a, &format!("c{i}"));
        let fx = a.handle(Input::Verified {
            reason: V::Completion,
            passed: false,
            fingerprint: "fp".into(),
            feedback: "fail".into(),
            checks: Vec::new(),
        });
        assert!(!has(&fx, |e| matches!(e, Effect::Restore { .. })));
    }
    assert_eq!(a.stats().rollbacks, 0);
    assert_eq!(a.stats().repair_cycles, 4);
}

#[test]
fn the_turn_budget_ends_the_run() {
    let mut cfg = config();
    cfg.max_turns = 2;
    let mut a = Agent::new(cfg);
    start(&mut a);
    let fx = a.handle(reply(vec![call("r", "read_file", r#"{"path":"a"}"#)]));
    assert!(matches!(fx.last(), Some(Effect::RunTool(_))));
    let fx = a.handle(Input::ToolFinished {
        call_id: "r".into(),
        ok: true,
        content: "x".into(),
    });
    assert!(calls_model(&fx));
    a.handle(reply(vec![call("s", "read_file", r#"{"path":"a"}"#)]));
    let fx = a.handle(Input::ToolFinished {
        call_id: "s".into(),
        ok: true,
        content: "x".into(),
    });
    assert!(
        matches!(fx.last(), Some(Effect::Finish { reason, .. }) if reason.contains("turn budget"))
    );
}

#[test]
fn the_token_budget_ends_the_run() {
    let mut cfg = config();
    cfg.max_tokens = 50;
    let mut a = Agent::new(cfg);
    start(&mut a);
    let fx = a.handle(reply(vec![]));
    assert!(
        matches!(fx.last(), Some(Effect::Finish { outcome: Outcome::Budget, reason }) if reason.contains("token budget") && reason.contains("110 of 50 tokens")),
        "{fx:?}"
    );
}

/// A reply of `input` tokens (`cached` of them from the cache) and 10
/// output tokens from model `m` of provider `test`, reading a file.
fn priced_reply(id: &str, input: u64, cached: u64) -> Input {
    Input::ModelReplied(ModelReply {
        content: None,
        tool_calls: vec![call(id, "read_file", r#"{"path":"a"}"#)],
        usage: Usage {
            input,
            output: 10,
            cached,
            estimated: false,
        },
        model: ModelId {
            provider: "test".into(),
            model: "m".into(),
        },
        provider: Default::default(),
    })
}

fn tool_done(a: &mut Agent, id: &str) -> Vec<Effect> {
    a.handle(Input::ToolFinished {
        call_id: id.into(),
        ok: true,
        content: "x".into(),
    })
}

/// $1 a million input tokens, $0.10 cached, $10 output: a reply of 1,000
/// input (none cached) and 10 output costs $0.0011.
fn priced_config(max_cost_micros: Option<u64>) -> AgentConfig {
    let mut cfg = config();
    cfg.prices.0.insert(
        "test:m".into(),
        crate::protocol::Price {
            input: 1.0,
            output: 10.0,
            cached_input: Some(0.1),
        },
    );
    cfg.max_cost_micros = max_cost_micros;
    cfg
}

fn warnings(fx: &[Effect]) -> Vec<String> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Emit(RunEvent::AgentCorrection { message, .. })
                if message.starts_with("Budget warning") =>
            {
                Some(message.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn cached_tokens_and_cost_are_counted_per_reply_and_in_total() {
    let mut a = Agent::new(priced_config(None));
    start(&mut a);
    a.handle(priced_reply("r1", 1_000, 0));
    tool_done(&mut a, "r1");
    a.handle(priced_reply("r2", 1_000, 800));
    let stats = a.stats();
    assert_eq!(
        (stats.input_tokens, stats.cached_tokens, stats.output_tokens),
        (2_000, 800, 20)
    );
    // 1,000 + (200 + 800 × 0.1) input, 20 × 10 output.
    assert_eq!(a.cost_micros(), Some(1_000 + 280 + 200));
}

#[test]
fn the_cost_budget_warns_once_at_80_percent_then_ends_the_run_as_budget() {
    // Each reply costs 1,100 millionths; the budget is 4,000.
    let mut a = Agent::new(priced_config(Some(4_000)));
    start(&mut a);
    let mut warned = Vec::new();
    let mut end = None;
    for i in 0..6 {
        let id = format!("r{i}");
        a.handle(priced_reply(&id, 1_000, 0));
        let fx = tool_done(&mut a, &id);
        warned.extend(warnings(&fx));
        if let Some(Effect::Finish { outcome, reason }) = fx.last() {
            end = Some((*outcome, reason.clone(), i));
            break;
        }
        assert!(calls_model(&fx), "{fx:?}");
        if i == 2 {
            // 3,300 of 4,000 is past 80 %: the request carries the warning.
            let Some(Effect::CallModel(req)) = fx.last() else {
                unreachable!()
            };
            assert!(
                req.messages.iter().any(|m| m
                    .content
                    .as_deref()
                    .is_some_and(|c| c.starts_with("Budget warning"))),
                "the model is told"
            );
        }
    }
    assert_eq!(warned.len(), 1, "warned once: {warned:?}");
    assert!(
        warned[0].contains("$0.0033 of the $0.0040 cost budget"),
        "{}",
        warned[0]
    );
    let (outcome, reason, at) = end.expect("the run ends");
    assert_eq!(outcome, Outcome::Budget);
    assert_eq!(at, 3, "after the fourth reply (4,400 ≥ 4,000)");
    assert!(reason.contains("$0.0044 of $0.0040"), "{reason}");
    assert!(reason.contains("--max-cost"), "says how to go on: {reason}");
}

#[test]
fn a_cost_budget_with_a_model_that_has_no_price_stops_rather_than_guess() {
    let mut cfg = priced_config(Some(1_000_000));
    cfg.prices.0.clear();
    cfg.prices.0.insert(
        "other:model".into(),
        crate::protocol::Price {
            input: 1.0,
            output: 1.0,
            cached_input: None,
        },
    );
    let mut a = Agent::new(cfg);
    start(&mut a);
    a.handle(priced_reply("r1", 1_000, 0));
    let fx = tool_done(&mut a, "r1");
    assert!(
        matches!(fx.last(), Some(Effect::Finish { outcome: Outcome::Failure, reason }) if reason.contains("test:m has no price")),
        "{fx:?}"
    );
    assert_eq!(a.cost_micros(), None, "the cost is not known");
}

#[test]
fn a_resumed_run_with_a_larger_budget_goes_on_and_is_warned_again() {
    let mut a = Agent::new(priced_config(Some(2_000)));
    start(&mut a);
    a.handle(priced_reply("r1", 1_000, 0));
    tool_done(&mut a, "r1");
    a.handle(priced_reply("r2", 1_000, 0));
    let fx = tool_done(&mut a, "r2");
    assert!(
        matches!(
            fx.last(),
            Some(Effect::Finish {
                outcome: Outcome::Budget,
                ..
            })
        ),
        "{fx:?}"
    );
    // A saved state, resumed with a budget of $0.01: the lower one offered
    // for tokens is ignored.
    let json = serde_json::to_string(&a).unwrap();
    let mut b: Agent = serde_json::from_str(&json).unwrap();
    b.resume_budgets(priced_config(None).prices, Some(10), Some(10_000));
    assert_eq!(b.config.max_tokens, 1_000_000);
    assert_eq!(b.config.max_cost_micros, Some(10_000));
    assert!(b.budget_stop().is_none(), "2,200 of 10,000 is within it");
    assert!(!b.budget_warned.cost, "warned again at 80 % of the new one");
}

#[test]
fn a_growing_context_is_compacted_and_an_exhausted_one_stops() {
    let mut cfg = config();
    cfg.context_limit = 6_000;
    let mut a = Agent::new(cfg);
    start(&mut a);
    let mut compacted = false;
    for i in 0..12 {
        let id = format!("r{i}");
        a.handle(reply(vec![call(&id, "read_file", r#"{"path":"a"}"#)]));
        let fx = a.handle(Input::ToolFinished {
            call_id: id,
            ok: true,
            content: "y".repeat(1500),
        });
        compacted |= has(&fx, |e| {
            matches!(e, Effect::Emit(RunEvent::ContextCompacted { .. }))
        });
        assert!(calls_model(&fx), "turn {i} goes on");
    }
    assert!(compacted, "the context was compacted");
    // The most recent results alone exceed 90 %: the run must stop.
    let mut a = Agent::new(AgentConfig {
        context_limit: 3_000,
        ..config()
    });
    start(&mut a);
    a.handle(reply(vec![call("big", "read_file", r#"{"path":"a"}"#)]));
    let fx = a.handle(Input::ToolFinished {
        call_id: "big".into(),
        ok: true,
        content: "z".repeat(16_000),
    });
    assert!(
        matches!(fx.last(), Some(Effect::Finish { reason, .. }) if reason.contains("context budget"))
    );
}

#[test]
fn follow_ups_reach_the_next_turn_and_cancellation_finishes() {
    let (mut a, _) = started(false);
    a.handle(Input::FollowUp("also add a docstring".into()));
    a.handle(reply(vec![call("r", "read_file", r#"{"path":"a"}"#)]));
    let fx = a.handle(Input::ToolFinished {
        call_id: "r".into(),
        ok: true,
        content: "x".into(),
    });
    let Some(Effect::CallModel(req)) = fx.last() else {
        panic!("expected a model call")
    };
    let last = req
        .messages
        .last()
        .and_then(|m| m.content.clone())
        .unwrap_or_default();
    assert!(last.contains("also add a docstring"), "{last}");
    let fx = a.handle(Input::Cancelled {
        reason: "Ctrl-C".into(),
    });
    assert_eq!(
        fx,
        vec![Effect::Finish {
            outcome: Outcome::Cancelled,
            reason: "Ctrl-C".into()
        }]
    );
}

#[test]
fn tool_results_answer_their_call_ids_in_order() {
    let (mut a, _) = started(false);
    a.handle(reply(vec![
        call("a", "read_file", r#"{"path":"x"}"#),
        call("b", "ripgrep", r#"{"pattern":"y"}"#),
    ]));
    let fx = a.handle(Input::ToolFinished {
        call_id: "a".into(),
        ok: true,
        content: "A".into(),
    });
    assert!(
        matches!(fx.last(), Some(Effect::RunTool(c)) if c.id == "b"),
        "the second call runs next"
    );
    let fx = a.handle(Input::ToolFinished {
        call_id: "b".into(),
        ok: true,
        content: "B".into(),
    });
    let Some(Effect::CallModel(req)) = fx.last() else {
        panic!("expected a model call")
    };
    let ids: Vec<_> = req
        .messages
        .iter()
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    assert_eq!(ids, ["a", "b"]);
}

#[test]
fn each_request_begins_with_the_one_before_it_so_prompt_caches_hit() {
    // Everything but the run state (sent last, and changed every turn) is
    // sent again unchanged, in the same order, until a compaction.
    let mut a = Agent::new(priced_config(Some(1_000_000)));
    let mut requests = Vec::new();
    let fx = start(&mut a);
    requests.extend(fx.into_iter().filter_map(|e| match e {
        Effect::CallModel(r) => Some(r),
        _ => None,
    }));
    for i in 0..4 {
        let id = format!("r{i}");
        a.handle(priced_reply(&id, 1_000, 0));
        let fx = tool_done(&mut a, &id);
        let Some(Effect::CallModel(req)) = fx.last() else {
            panic!("{fx:?}")
        };
        requests.push(req.clone());
    }
    for pair in requests.windows(2) {
        let (before, after) = (&pair[0].messages, &pair[1].messages);
        let kept = &before[..before.len() - 1];
        assert_eq!(
            &after[..kept.len()],
            kept,
            "the earlier request is a prefix"
        );
        assert!(after.len() > before.len());
    }
}
