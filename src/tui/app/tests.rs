//! The delivery decisions of the app: what each key asks for after a review,
//! an apply, an undo, and in the runs browser.

use std::sync::Arc;

use super::*;
use crate::protocol::ApprovalMode;
use crate::tui::diff::{DiffModel, ReviewSelection};
use crate::tui::keymap::parse_key_event;

const PATCH: &str = "diff --git a/a.py b/a.py
--- a/a.py
+++ b/a.py
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
@@ -10,3 +10,3 @@
 ten
-eleven
+ELEVEN
 twelve
";

fn app() -> App {
    let theme = Theme::load_coloured("default", None).expect("theme");
    App::new("/src/repo", Keymap::defaults(), theme, ApprovalMode::Final)
}

pub(super) fn run_ref() -> RunRef {
    RunRef {
        id: "run-1".into(),
        dir: "/state/runs/run-1".into(),
        task: "fix it".into(),
    }
}

fn reviewing() -> App {
    let mut app = app();
    let model = DiffModel::parse(PATCH);
    app.screen.show_review(Review {
        run: run_ref(),
        patch: "/state/runs/run-1/final.patch".into(),
        selection: ReviewSelection::new(&model),
        model,
        state: DiffViewState::default(),
        artifact_dir: "/state/runs/run-1".into(),
        saved: None,
    });
    app
}

pub(super) fn keys(app: &mut App, keys: &[&str]) {
    for key in keys {
        app.update(AppEvent::Key(parse_key_event(key).expect("key")));
    }
}

fn applies(ops: &[Op]) -> Vec<ApplyRequest> {
    ops.iter()
        .filter_map(|op| match op {
            Op::Apply(request) => Some(request.clone()),
            _ => None,
        })
        .collect()
}

fn state(app: &App) -> DeliveryState {
    app.deliveries
        .shown
        .as_ref()
        .expect("a delivery")
        .state
        .clone()
}

fn entry(id: &str, applied: bool) -> RunEntry {
    RunEntry {
        id: id.into(),
        dir: format!("/state/runs/{id}"),
        age: "2m".into(),
        task: format!("task of {id}"),
        outcome: "success".into(),
        verified: Some(true),
        applied,
        changed_files: vec!["a.py".into()],
    }
}

fn detail(entry: RunEntry) -> Box<RunDetail> {
    Box::new(RunDetail {
        entry,
        reason: "verified".into(),
        summary: None,
        patch: Arc::new(DiffModel::parse(PATCH)),
        checks: Vec::new(),
        events: vec!["1 run.started".into()],
        events_skipped: 0,
    })
}

fn applied_ok() -> Applied {
    Applied {
        changes: vec![('M', "a.py".into())],
        merged: Vec::new(),
        verified: Verified::Run,
    }
}

#[test]
fn every_hunk_chosen_applies_the_verified_patch_as_it_is() {
    let mut app = reviewing();
    keys(&mut app, &["enter"]);
    let requests = applies(&app.take_ops());
    assert_eq!(
        requests,
        [ApplyRequest {
            run: run_ref(),
            subset: None,
            merge: false,
            unverified: false,
        }]
    );
    assert!(matches!(app.overlay(), Some(Overlay::Delivery)));
    assert!(matches!(state(&app), DeliveryState::Applying { .. }));
}

#[test]
fn a_partial_selection_is_sent_as_a_subset_to_verify_again() {
    let mut app = reviewing();
    // The first hunk left out.
    keys(&mut app, &["space", "enter"]);
    let requests = applies(&app.take_ops());
    assert_eq!(requests.len(), 1);
    let subset = requests[0].subset.as_ref().expect("a subset");
    assert_eq!(subset.numbers, [2], "the second hunk, numbered from 1");
    assert_eq!(subset.of, 2);
    assert!(!requests[0].unverified);
}

#[test]
fn nothing_chosen_applies_nothing() {
    let mut app = reviewing();
    keys(&mut app, &["A", "enter"]);
    assert!(applies(&app.take_ops()).is_empty());
    assert!(app.deliveries.shown.is_none());
    assert!(app.flash.as_deref().is_some_and(|f| f.contains("no hunk")));
}

#[test]
fn a_failed_subset_is_applied_only_on_the_explicit_choice() {
    let mut app = reviewing();
    keys(&mut app, &["space", "enter"]);
    let first = applies(&app.take_ops()).remove(0);
    app.update(AppEvent::Applied(Err(ApplyFailure::SubsetFailed {
        why: "1 of 2 checks failed".into(),
        checks: vec![CheckLine {
            name: "tests".into(),
            passed: false,
            detail: "exit 1".into(),
        }],
    })));
    assert!(matches!(state(&app), DeliveryState::ApplyFailed(_)));
    assert!(
        app.review().is_some(),
        "the review stays for another choice"
    );
    assert!(app.deliveries.applied_run.is_none());
    // Keys other than the override apply nothing.
    keys(&mut app, &["u", "m", "y"]);
    assert!(applies(&app.take_ops()).is_empty());
    keys(&mut app, &["!"]);
    assert!(matches!(app.overlay(), Some(Overlay::ConfirmUnverified)));
    keys(&mut app, &["n"]);
    assert!(matches!(app.overlay(), Some(Overlay::Delivery)));
    assert!(applies(&app.take_ops()).is_empty());
    keys(&mut app, &["!", "y"]);
    let requests = applies(&app.take_ops());
    assert_eq!(
        requests,
        [ApplyRequest {
            unverified: true,
            ..first
        }]
    );
}

#[test]
fn an_unverified_run_from_the_browser_offers_the_same_override() {
    let mut app = app();
    keys(&mut app, &["ctrl-r"]);
    app.update(AppEvent::RunsListed(Ok(vec![entry("run-9", false)])));
    keys(&mut app, &["a"]);
    app.take_ops();
    app.update(AppEvent::Applied(Err(ApplyFailure::Unverified(
        "the run failed".into(),
    ))));
    keys(&mut app, &["!", "y"]);
    let requests = applies(&app.take_ops());
    assert_eq!(requests.len(), 1);
    assert!(requests[0].unverified && requests[0].subset.is_none());
}

#[test]
fn an_overlap_offers_a_merge_and_no_override() {
    let mut app = reviewing();
    keys(&mut app, &["enter"]);
    app.take_ops();
    app.update(AppEvent::Applied(Err(ApplyFailure::Overlap(vec![
        "a.py".into(),
    ]))));
    keys(&mut app, &["!"]);
    assert!(
        applies(&app.take_ops()).is_empty(),
        "no override of a conflict"
    );
    keys(&mut app, &["m"]);
    let requests = applies(&app.take_ops());
    assert_eq!(requests.len(), 1);
    assert!(requests[0].merge && !requests[0].unverified);
}

#[test]
fn an_apply_closes_the_review_and_undo_is_one_key_away() {
    let mut app = reviewing();
    keys(&mut app, &["enter"]);
    app.take_ops();
    app.update(AppEvent::Applied(Ok(applied_ok())));
    assert!(app.review().is_none());
    assert_eq!(app.deliveries.applied_run, Some(run_ref()));
    // On the result: u asks, y undoes.
    keys(&mut app, &["u"]);
    assert!(matches!(app.overlay(), Some(Overlay::ConfirmUndo(_))));
    keys(&mut app, &["n"]);
    assert!(app.take_ops().is_empty());
    // Closed, then u on the main screen asks again.
    keys(&mut app, &["esc"]);
    assert!(app.overlay().is_none());
    keys(&mut app, &["u", "y"]);
    assert_eq!(
        app.take_ops(),
        [Op::Undo {
            run: run_ref(),
            force: false
        }]
    );
    assert!(matches!(
        state(&app),
        DeliveryState::Undoing { force: false }
    ));
}

#[test]
fn files_changed_since_are_restored_only_on_a_second_explicit_choice() {
    let mut app = app();
    app.deliveries.applied_run = Some(run_ref());
    keys(&mut app, &["esc", "u", "y"]);
    app.take_ops();
    app.update(AppEvent::Undone(Ok(Undone {
        restored: vec!["restored a.py".into()],
        skipped: vec!["b.py".into()],
    })));
    assert_eq!(
        app.deliveries.applied_run,
        Some(run_ref()),
        "still partly applied"
    );
    keys(&mut app, &["y"]);
    assert!(app.take_ops().is_empty(), "y alone forces nothing");
    keys(&mut app, &["F"]);
    assert!(matches!(app.overlay(), Some(Overlay::ConfirmForceUndo(_))));
    keys(&mut app, &["y"]);
    assert_eq!(
        app.take_ops(),
        [Op::Undo {
            run: run_ref(),
            force: true
        }]
    );
    app.update(AppEvent::Undone(Ok(Undone {
        restored: vec!["restored b.py".into()],
        skipped: Vec::new(),
    })));
    assert!(app.deliveries.applied_run.is_none());
    keys(&mut app, &["F"]);
    assert!(app.take_ops().is_empty(), "nothing left to force");
}

#[test]
fn while_an_apply_goes_on_keys_neither_close_it_nor_start_another() {
    let mut app = reviewing();
    keys(&mut app, &["enter"]);
    app.take_ops();
    keys(&mut app, &["esc", "enter", "q"]);
    assert!(matches!(app.overlay(), Some(Overlay::Delivery)));
    assert!(!app.should_quit());
    app.update(AppEvent::DeliveryProgress("running tests".into()));
    assert_eq!(
        state(&app),
        DeliveryState::Applying {
            progress: Some("running tests".into())
        }
    );
    app.request_apply(ApplyRequest {
        run: run_ref(),
        subset: None,
        merge: false,
        unverified: false,
    });
    assert!(app.take_ops().is_empty());
}

#[test]
fn the_browser_lists_opens_and_closes_runs() {
    let mut app = app();
    keys(&mut app, &["ctrl-r"]);
    assert_eq!(app.take_ops(), [Op::ListRuns]);
    assert!(app.browser().is_some_and(|b| b.loading));
    app.update(AppEvent::RunsListed(Ok(vec![
        entry("run-3", false),
        entry("run-2", true),
        entry("run-1", false),
    ])));
    keys(&mut app, &["j", "enter"]);
    assert_eq!(
        app.take_ops(),
        [Op::OpenRun {
            dir: "/state/runs/run-2".into()
        }]
    );
    app.update(AppEvent::RunOpened(Ok(detail(entry("run-2", true)))));
    let open = |app: &App| {
        app.browser()
            .and_then(|b| b.open.as_ref())
            .map(|o| o.section)
    };
    assert_eq!(open(&app), Some(Section::Diff));
    keys(&mut app, &["tab"]);
    assert_eq!(open(&app), Some(Section::Verification));
    keys(&mut app, &["tab"]);
    assert_eq!(open(&app), Some(Section::Events));
    keys(&mut app, &["esc"]);
    assert_eq!(open(&app), None);
    assert!(app.browser().is_some());
    keys(&mut app, &["esc"]);
    assert!(app.browser().is_none());
}

#[test]
fn the_browser_applies_and_undoes_the_run_it_points_at() {
    let mut app = app();
    keys(&mut app, &["ctrl-r"]);
    app.update(AppEvent::RunsListed(Ok(vec![
        entry("run-3", false),
        entry("run-2", true),
    ])));
    app.take_ops();
    // An applied run is not applied twice; u asks to undo it.
    keys(&mut app, &["j", "a"]);
    assert!(app.take_ops().is_empty());
    keys(&mut app, &["u"]);
    match app.overlay() {
        Some(Overlay::ConfirmUndo(run)) => assert_eq!(run.id, "run-2"),
        other => panic!("{other:?}"),
    }
    keys(&mut app, &["y"]);
    assert!(matches!(
        app.take_ops().as_slice(),
        [Op::Undo { run, force: false }] if run.id == "run-2"
    ));
    app.update(AppEvent::Undone(Ok(Undone {
        restored: vec!["restored a.py".into()],
        skipped: Vec::new(),
    })));
    assert_eq!(app.take_ops(), [Op::ListRuns], "the list is read again");
    keys(&mut app, &["esc"]);
    // A run not applied: u says so, a applies it whole.
    keys(&mut app, &["k", "u"]);
    assert!(app.take_ops().is_empty());
    assert!(
        app.flash
            .as_deref()
            .is_some_and(|f| f.contains("not applied"))
    );
    keys(&mut app, &["a"]);
    let requests = applies(&app.take_ops());
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].run.id, "run-3");
    assert!(requests[0].subset.is_none());
}

#[test]
fn a_refreshed_list_keeps_the_selected_run_selected() {
    let mut app = app();
    app.open_browser();
    app.update(AppEvent::RunsListed(Ok(vec![
        entry("run-2", false),
        entry("run-1", false),
    ])));
    keys(&mut app, &["j"]);
    app.update(AppEvent::RunsListed(Ok(vec![
        entry("run-3", false),
        entry("run-2", false),
        entry("run-1", true),
    ])));
    let browser = app.browser().expect("browser");
    assert_eq!(browser.runs[browser.selected].id, "run-1");
    assert!(browser.runs[browser.selected].applied);
}

#[test]
fn an_interrupted_run_is_offered_and_resumed_only_on_yes() {
    let mut app = app();
    app.offer_resume("run-9", "fix the pager");
    keys(&mut app, &["x"]);
    assert!(matches!(app.overlay(), Some(Overlay::ConfirmResume { .. })));
    assert!(app.take_ops().is_empty(), "nothing happens on another key");
    keys(&mut app, &["n"]);
    assert!(app.overlay().is_none());
    assert!(app.take_ops().is_empty(), "n dismisses the offer");
    app.offer_resume("run-9", "fix the pager");
    keys(&mut app, &["y"]);
    let ops = app.take_ops();
    assert!(
        matches!(ops.as_slice(), [Op::Resume { run_id, task }] if run_id == "run-9" && task == "fix the pager"),
        "{ops:?}"
    );
}

#[test]
fn the_browser_resumes_only_a_run_that_stopped_and_is_not_applied() {
    let mut app = app();
    keys(&mut app, &["ctrl-r"]);
    let mut stopped = entry("run-2", false);
    stopped.outcome = "interrupted".into();
    stopped.verified = None;
    let mut failed_applied = entry("run-3", true);
    failed_applied.outcome = "failure".into();
    app.update(AppEvent::RunsListed(Ok(vec![
        entry("run-1", false),
        stopped,
        failed_applied,
    ])));
    app.take_ops();
    keys(&mut app, &["r"]);
    assert!(app.take_ops().is_empty(), "a success is not resumed");
    assert!(
        app.flash
            .as_deref()
            .is_some_and(|f| f.contains("nothing to resume"))
    );
    keys(&mut app, &["down", "down", "r"]);
    assert!(app.take_ops().is_empty(), "an applied run is not resumed");
    keys(&mut app, &["up", "r"]);
    let ops = app.take_ops();
    assert!(
        matches!(ops.as_slice(), [Op::Resume { run_id, .. }] if run_id == "run-2"),
        "{ops:?}"
    );
    assert!(
        app.browser().is_none(),
        "the browser closes on the resumed run"
    );
}
