//! The session's transitions between screens and popups, driven with events
//! and keys as the loop would send them; no terminal is involved.

use super::tests::{keys, run_ref};
use super::*;
use crate::protocol::{ApprovalDecision, ApprovalMode};
use crate::tui::keymap::Context;

const PATCH: &str = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-one\n+ONE\n";

fn app(mode: ApprovalMode) -> App {
    let theme = Theme::load_coloured("default", None).expect("theme");
    App::new("/src/repo", Keymap::defaults(), theme, mode)
}

fn review() -> Review {
    let model = DiffModel::parse(PATCH);
    Review {
        run: run_ref(),
        patch: "/state/runs/run-1/final.patch".into(),
        selection: ReviewSelection::new(&model),
        model,
        state: DiffViewState::default(),
        artifact_dir: "/state/runs/run-1".into(),
        saved: None,
    }
}

fn asked(id: &str) -> AppEvent {
    AppEvent::Run(RunEvent::ApprovalRequested {
        id: id.into(),
        call_id: format!("call-{id}"),
        path: "a.py".into(),
        patch: PATCH.into(),
        call: None,
    })
}

#[test]
fn a_key_goes_to_the_top_popup_then_the_approval_then_the_screen() {
    let mut app = app(ApprovalMode::Each);
    app.start("fix it");
    app.update(asked("a1"));
    assert_eq!(app.key_owner(), keys::KeyOwner::Approval);
    keys(&mut app, &["?"]);
    assert!(matches!(
        app.overlay(),
        Some(Overlay::Help(Context::Approval, _))
    ));
    // Esc closes the help, not the approval under it, and answers nothing.
    keys(&mut app, &["esc"]);
    assert!(app.overlay().is_none());
    assert!(
        app.take_ops()
            .iter()
            .all(|op| !matches!(op, Op::Answer { .. }))
    );
    keys(&mut app, &["y"]);
    assert_eq!(
        app.take_ops(),
        [Op::Answer {
            id: "a1".into(),
            decision: ApprovalDecision::Approve
        }]
    );
    assert_eq!(app.key_owner(), keys::KeyOwner::Panes);
}

#[test]
fn cancelling_over_an_apply_result_gives_the_result_back_when_declined() {
    let mut app = app(ApprovalMode::Final);
    app.start("fix it");
    app.request_apply(ApplyRequest {
        run: run_ref(),
        subset: None,
        merge: false,
        unverified: false,
    });
    assert!(matches!(app.overlay(), Some(Overlay::Delivery)));
    keys(&mut app, &["ctrl-c"]);
    assert!(matches!(app.overlay(), Some(Overlay::ConfirmCancel)));
    keys(&mut app, &["n"]);
    assert!(matches!(app.overlay(), Some(Overlay::Delivery)));
    assert!(!app.should_quit());
}

#[test]
fn the_end_of_the_run_takes_the_cancel_question_away() {
    let mut app = app(ApprovalMode::Final);
    app.start("fix it");
    keys(&mut app, &["ctrl-c"]);
    assert!(matches!(app.overlay(), Some(Overlay::ConfirmCancel)));
    app.update(AppEvent::RunEnded(Err("no model".into())));
    assert!(app.overlay().is_none());
}

#[test]
fn an_edit_asked_while_cancelling_is_refused_without_showing_it() {
    let mut app = app(ApprovalMode::Each);
    app.start("fix it");
    app.update(asked("a1"));
    app.update(asked("a2"));
    keys(&mut app, &["ctrl-c", "y"]);
    app.update(asked("a3"));
    let refused: Vec<String> = app
        .take_ops()
        .into_iter()
        .filter_map(|op| match op {
            Op::Answer {
                id,
                decision: ApprovalDecision::Refuse(_),
            } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(refused, ["a1", "a2", "a3"]);
    assert!(app.approval().is_none());
}

#[test]
fn the_browser_opened_from_the_review_closes_back_to_it() {
    let mut app = app(ApprovalMode::Final);
    app.screen.show_review(review());
    keys(&mut app, &["space"]);
    keys(&mut app, &["ctrl-r"]);
    assert_eq!(app.key_owner(), keys::KeyOwner::Runs);
    assert_eq!(app.take_ops(), [Op::ListRuns]);
    keys(&mut app, &["esc"]);
    assert_eq!(app.key_owner(), keys::KeyOwner::Review);
    let chosen = app.review().map(|r| r.selection.chosen());
    assert_eq!(chosen, Some((0, 1)), "the choice made before is kept");
    keys(&mut app, &["esc"]);
    assert!(matches!(app.screen, Screen::Panes));
    assert_eq!(app.panes.focus, Pane::Input);
}

#[test]
fn leaving_a_chosen_review_unsaved_asks_first() {
    let mut app = app(ApprovalMode::Final);
    app.screen.show_review(review());
    keys(&mut app, &["q"]);
    assert!(matches!(app.overlay(), Some(Overlay::ConfirmDiscard)));
    keys(&mut app, &["n"]);
    assert!(app.overlay().is_none() && !app.should_quit());
    keys(&mut app, &["q", "y"]);
    assert!(app.should_quit());
}
