use super::*;
use crate::protocol::PlanItem;

fn budget() -> BudgetView {
    BudgetView {
        turn: 7,
        max_turns: 50,
        tokens_used: 12_000,
        max_tokens: 2_000_000,
        cost: None,
        context_tokens: 9_800,
        context_limit: 24_000,
    }
}

fn plan() -> Plan {
    Plan {
        items: vec![
            PlanItem {
                id: "1".into(),
                content: "reproduce the failure".into(),
                status: PlanStatus::Done,
                notes: Some("test_partial_last_page_counts fails: assert 2 == 3".into()),
            },
            PlanItem {
                id: "2".into(),
                content: "round the page count up".into(),
                status: PlanStatus::InProgress,
                notes: None,
            },
        ],
    }
}

#[test]
fn every_part_is_shown() {
    let mut s = RunState::default();
    s.file_read("./pagination.py");
    s.file_read("tests/test_pagination.py");
    s.file_read("pagination.py");
    s.set_changes(vec![FileChange {
        path: "pagination.py".into(),
        added: 1,
        removed: 1,
    }]);
    s.set_verification(VerificationDigest {
        attempt: 2,
        reason: VerificationReason::Completion,
        passed: false,
        checks: vec![
            digest_check(
                "tests",
                Some(1),
                false,
                None,
                "FAILED tests/test_pagination.py::test_partial_last_page_counts - assert 2 == 3\n1 failed, 5 passed\n",
            ),
            digest_check("lint", Some(0), true, None, "all good"),
        ],
    });
    s.recovered("rollback 1: restored checkpoint abc after three failed completions".into());
    s.follow_up("also keep the docstring\nplease");
    let text = s.render(&plan(), budget());
    for needle in [
        "Budget: turn 7 of 50 (43 left after this one); tokens used 12000 of 2000000 (1988000 left)",
        "this request ≈ 9800 of the 24000-token context",
        "Plan (1 of 2 done):",
        "- [done] 1: reproduce the failure — notes: test_partial_last_page_counts fails: assert 2 == 3",
        "- [in_progress] 2: round the page count up",
        "Files read (most recent last): tests/test_pagination.py, pagination.py\n",
        "Files changed against the baseline (1 file, +1 −1):\n- pagination.py +1 −1",
        "Latest verification (attempt 2, of your completion request): FAILED",
        "- tests FAILED, exit 1",
        "failing tests: tests/test_pagination.py::test_partial_last_page_counts",
        "- passed: lint",
        "Recovery so far:\n- rollback 1: restored checkpoint abc",
        "- also keep the docstring\n  please",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
}

#[test]
fn an_empty_state_says_what_is_missing() {
    let text = RunState::default().render(&Plan::default(), budget());
    assert!(text.contains("Plan: none yet"), "{text}");
    assert!(text.contains("Files changed against the baseline: none yet."));
    assert!(text.contains("Latest verification: none yet."));
    assert!(!text.contains("Files read"));
    assert!(!text.contains("Recovery"));
}

#[test]
fn every_part_is_capped_with_a_count_beyond() {
    let mut s = RunState::default();
    for i in 0..500 {
        s.file_read(&format!("src/module_{i}/file_{i}.py"));
        s.follow_up(&"f".repeat(5000));
        s.recovered("r".repeat(5000));
    }
    s.set_changes(
        (0..1000)
            .map(|i| FileChange {
                path: format!("gen/file_{i}.rs"),
                added: 2,
                removed: 1,
            })
            .collect(),
    );
    let checks = (0..16)
        .map(|i| {
            let output: String = (0..200)
                .map(|t| {
                    format!(
                        "FAILED t.py::test_{t} - AssertionError: {}\n",
                        "z".repeat(300)
                    )
                })
                .collect();
            digest_check(
                &format!("check{i}"),
                Some(1),
                false,
                Some(&"w".repeat(9000)),
                &output,
            )
        })
        .collect();
    s.set_verification(VerificationDigest {
        attempt: 9,
        reason: VerificationReason::Completion,
        passed: false,
        checks,
    });
    let items = (0..50)
        .map(|i| PlanItem {
            id: format!("{i}"),
            content: "c".repeat(2000),
            status: PlanStatus::Pending,
            notes: Some("n".repeat(2000)),
        })
        .collect();
    let text = s.render(&Plan { items }, budget());
    assert!(text.len() < 16_000, "{} chars", text.len());
    assert!(text.contains("Files changed against the baseline (1000 files, +2000 −1000)"));
    assert!(
        text.contains("earlier ones not shown"),
        "files read are counted"
    );
    assert!(
        text.contains("(+495 earlier ones not kept)"),
        "follow-ups are counted"
    );
    assert!(
        text.contains("- also FAILED (not detailed here): check4, check5"),
        "{text}"
    );
    assert!(text.contains("more not shown"));
    let json = serde_json::to_string(&s).expect("serialise");
    assert!(
        json.len() < 64_000,
        "the state itself is bounded: {}",
        json.len()
    );
    let back: RunState = serde_json::from_str(&json).expect("deserialise");
    assert_eq!(back, s);
}
