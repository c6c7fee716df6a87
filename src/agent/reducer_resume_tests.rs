//! Resuming a saved state: what was in flight is answered, earlier
//! verification no longer counts, a lost baseline verdict is asked again,
//! and a finished run takes a follow-up.

use super::tests::*;
use super::*;
use crate::model::types::Role;
use crate::protocol::VerificationReason as V;

fn resumed(a: &mut Agent, follow_up: Option<&str>) -> Vec<Effect> {
    a.handle(Input::Resumed {
        note: "The run was interrupted and resumed.".into(),
        follow_up: follow_up.map(str::to_string),
    })
}

fn request(fx: &[Effect]) -> &crate::model::types::ModelRequest {
    match fx.last() {
        Some(Effect::CallModel(r)) => r,
        other => panic!("expected a model call, got {other:?}"),
    }
}

#[test]
fn an_interrupted_turn_is_asked_again_with_a_note_and_no_verification_counts() {
    let (a, _) = started(true);
    assert!(a.validated_checkpoint().is_some(), "the baseline validated");
    // Saved while the model was asked (turn 1); the process died there.
    let saved: Agent =
        serde_json::from_str(&serde_json::to_string(&a).expect("save")).expect("load");
    let mut a = saved;
    let turns = a.stats().turns;
    let fx = resumed(&mut a, None);
    let req = request(&fx);
    assert!(
        req.messages.iter().any(|m| m
            .content
            .as_deref()
            .is_some_and(|t| t.contains("interrupted and resumed"))),
        "{req:?}"
    );
    assert_eq!(a.stats().turns, turns + 1);
    assert_eq!(
        a.validated_checkpoint(),
        None,
        "earlier verification is void"
    );
    assert!(!has(&fx, |e| matches!(e, Effect::VerifyBaseline { .. })));
}

#[test]
fn a_baseline_verdict_lost_with_the_process_is_asked_again() {
    let mut a = Agent::new(config());
    start(&mut a); // The baseline runs in the background; no verdict yet.
    let fx = resumed(&mut a, None);
    assert!(has(&fx, |e| matches!(
        e,
        Effect::VerifyBaseline { attempt: 2 }
    )));
    assert!(calls_model(&fx));
}

#[test]
fn open_tool_calls_are_answered_before_the_note() {
    let (mut a, _) = started(false);
    // The reply asked for two calls; the first finished, the second was in flight.
    a.handle(reply(vec![
        call("p", "update_plan", PLAN_WIP),
        call("r1", "read_file", r#"{"path":"a"}"#),
        call("r2", "run_shell", r#"{"command":"sleep 100"}"#),
    ]));
    a.handle(Input::ToolFinished {
        call_id: "r1".into(),
        ok: true,
        content: "x".into(),
    });
    let fx = resumed(&mut a, None);
    let req = request(&fx);
    let results: Vec<(&str, &str)> = req
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            (
                m.tool_call_id.as_deref().unwrap_or_default(),
                m.content.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[1].0, "r1");
    assert_eq!(results[2].0, "r2");
    assert!(results[2].1.contains("interrupted"), "{results:?}");
    // Every call is followed by its results, then the note.
    let at = |id: &str| {
        req.messages
            .iter()
            .position(|m| m.tool_call_id.as_deref() == Some(id))
            .expect("result")
    };
    let note = req
        .messages
        .iter()
        .position(|m| m.content.as_deref().is_some_and(|c| c.contains("resumed")))
        .expect("note");
    assert!(at("r1") < at("r2") && at("r2") < note);
}

#[test]
fn a_finished_run_takes_a_follow_up_and_needs_a_new_verification() {
    let (mut a, _) = started(false);
    complete(&mut a, "c1");
    let fx = a.handle(Input::Verified {
        reason: V::Completion,
        passed: true,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    assert!(has(&fx, |e| matches!(
        e,
        Effect::Finish {
            outcome: Outcome::Success,
            ..
        }
    )));
    a.handle(Input::Concluded(PatchFacts {
        fingerprint: "fp".into(),
        ..PatchFacts::default()
    }));
    assert!(
        matches!(a.phase(), Phase::Finished { .. }),
        "{:?}",
        a.phase()
    );
    // A finished success does not go on without a new instruction.
    let fx = resumed(&mut a, None);
    assert!(!calls_model(&fx), "{fx:?}");
    let fx = resumed(&mut a, Some("also handle negative sizes"));
    let req = request(&fx);
    let text: String = req
        .messages
        .iter()
        .filter_map(|m| m.content.clone())
        .collect();
    assert!(text.contains("also handle negative sizes"), "{text}");
    assert!(
        req.messages
            .iter()
            .any(|m| m.tool_call_id.as_deref() == Some("c1")),
        "the completion call has its result"
    );
    // The old verdict does not make the follow-up a success.
    let fx = complete(&mut a, "c2");
    assert!(matches!(
        fx.last(),
        Some(Effect::Verify {
            reason: V::Completion,
            ..
        })
    ));
}

#[test]
fn a_resumed_run_with_a_bootstrap_runs_it_again_before_the_next_turn_and_keeps_its_baseline() {
    let cfg = AgentConfig {
        bootstrap: vec!["python3 -m venv .venv".into()],
        ..config()
    };
    let mut a = Agent::new(cfg);
    start(&mut a);
    a.handle(Input::BootstrapFinished {
        passed: true,
        failure: None,
        duration_ms: 5,
    });
    a.handle(Input::Rebaselined {
        checkpoint: "after-bootstrap".into(),
    });
    a.handle(Input::Verified {
        reason: V::Baseline,
        passed: false,
        fingerprint: "fp".into(),
        feedback: String::new(),
        checks: Vec::new(),
    });
    let saved = serde_json::to_string(&a).expect("save");

    let mut a: Agent = serde_json::from_str(&saved).expect("load");
    let fx = resumed(&mut a, None);
    assert!(matches!(
        fx.as_slice(),
        [
            Effect::Emit(RunEvent::BootstrapStarted { .. }),
            Effect::Bootstrap
        ]
    ));
    let fx = a.handle(Input::BootstrapFinished {
        passed: true,
        failure: None,
        duration_ms: 5,
    });
    assert!(!has(&fx, |e| matches!(e, Effect::Rebaseline)), "{fx:?}");
    assert!(calls_model(&fx), "{fx:?}");
    assert!(!has(&fx, |e| matches!(e, Effect::VerifyBaseline { .. })));

    // Failing again ends the run, saying when.
    let mut a: Agent = serde_json::from_str(&saved).expect("load");
    resumed(&mut a, None);
    let fx = a.handle(Input::BootstrapFinished {
        passed: false,
        failure: Some("exit 1".into()),
        duration_ms: 5,
    });
    assert_eq!(
        fx.last(),
        Some(&Effect::Finish {
            outcome: Outcome::Failure,
            reason: "bootstrap failed (again, on resume): exit 1".into()
        })
    );
}
