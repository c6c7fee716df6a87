//! Every transition of a key, checked as the effects it returns: the state
//! is built by hand and nothing is performed, so no terminal and no run are
//! involved.

use std::sync::Arc;

use crossterm::event::KeyEvent;

use super::screens::{act, on_browser, on_pane, on_panes, on_review};
use super::*;
use crate::protocol::{ApprovalMode, PlanItem, PlanStatus};
use crate::tui::app::{
    App, Applied, ApprovalRequest, Browser, OpenRun, Pager, Review, RunDetail, RunEntry, Section,
    Undone, Verified,
};
use crate::tui::diff::ReviewSelection;
use crate::tui::keymap::parse_key_event;
use crate::tui::theme::Theme;

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

fn key(name: &str) -> KeyEvent {
    parse_key_event(name).expect("key")
}

fn keymap() -> Keymap {
    Keymap::defaults()
}

fn app() -> App {
    let theme = Theme::load_coloured("default", None).expect("theme");
    App::new("/src/repo", keymap(), theme, ApprovalMode::Final)
}

fn run() -> RunRef {
    RunRef {
        id: "run-1".into(),
        dir: "/state/runs/run-1".into(),
        task: "fix it".into(),
    }
}

fn request() -> ApplyRequest {
    ApplyRequest {
        run: run(),
        subset: None,
        merge: false,
        unverified: false,
    }
}

fn delivery(state: DeliveryState) -> Delivery {
    Delivery {
        run: run(),
        request: Some(request()),
        state,
    }
}

fn pending() -> PendingApproval {
    PendingApproval {
        request: ApprovalRequest {
            id: "a1".into(),
            call_id: "call-a1".into(),
            path: "a.py".into(),
            patch: PATCH.into(),
            call: None,
        },
        patch: DiffModel::parse(PATCH),
        scroll: 0,
        visible: true,
        reason: None,
    }
}

fn review() -> Review {
    let model = DiffModel::parse(PATCH);
    Review {
        run: run(),
        patch: "/state/runs/run-1/final.patch".into(),
        selection: ReviewSelection::new(&model),
        model,
        state: DiffViewState::default(),
        artifact_dir: "/state/runs/run-1".into(),
        saved: None,
    }
}

fn entry(id: &str, outcome: &str, applied: bool) -> RunEntry {
    RunEntry {
        id: id.into(),
        dir: format!("/state/runs/{id}"),
        age: "2m".into(),
        task: format!("task of {id}"),
        outcome: outcome.into(),
        verified: Some(true),
        applied,
        changed_files: vec!["a.py".into()],
    }
}

fn browser(runs: Vec<RunEntry>) -> Browser {
    Browser {
        runs,
        ..Browser::default()
    }
}

fn opened(section: Section) -> Browser {
    let entry = entry("run-1", "success", false);
    Browser {
        runs: vec![entry.clone()],
        open: Some(OpenRun {
            detail: RunDetail {
                entry,
                reason: "verified".into(),
                summary: None,
                patch: Arc::new(DiffModel::parse(PATCH)),
                checks: Vec::new(),
                events: vec!["1 run.started".into(); 30],
                events_skipped: 0,
            },
            diff_state: DiffViewState::default(),
            section,
            scroll: 0,
        }),
        ..Browser::default()
    }
}

fn popup(overlay: &Overlay, name: &str, delivery: Option<&Delivery>) -> Vec<Effect> {
    on_popup(overlay, &key(name), &keymap(), delivery)
}

#[test]
fn a_position_scrolls_within_its_length() {
    assert_eq!(scrolled(0, 5, Action::ScrollUp, 10), 0);
    assert_eq!(scrolled(4, 5, Action::ScrollDown, 10), 4);
    assert_eq!(scrolled(1, 50, Action::PageDown, 10), 11);
    assert_eq!(scrolled(45, 50, Action::PageDown, 10), 49);
    assert_eq!(scrolled(3, 50, Action::PageUp, 10), 0);
    assert_eq!(scrolled(7, 50, Action::Top, 10), 0);
    assert_eq!(scrolled(7, 50, Action::Bottom, 10), 49);
    assert_eq!(scrolled(7, 0, Action::Bottom, 10), 0);
    assert_eq!(scrolled(7, 50, Action::Apply, 10), 7);
}

#[test]
fn ctrl_c_asks_while_a_run_goes_and_cancels_when_asked_again() {
    assert_eq!(interrupt(None, false), [Effect::Quit]);
    assert_eq!(
        interrupt(None, true),
        [Effect::Raise(Overlay::ConfirmCancel)]
    );
    assert_eq!(
        interrupt(Some(&Overlay::ConfirmCancel), true),
        [Effect::Pop, Effect::CancelRun, Effect::QuitAfterRun]
    );
    assert_eq!(
        interrupt(Some(&Overlay::Delivery), true),
        [Effect::Raise(Overlay::ConfirmCancel)]
    );
}

#[test]
fn the_questions_close_on_no_and_stay_on_anything_else() {
    let cancel = Overlay::ConfirmCancel;
    assert_eq!(
        popup(&cancel, "y", None)[..2],
        [Effect::Pop, Effect::CancelRun]
    );
    assert_eq!(popup(&cancel, "esc", None), [Effect::Pop]);
    assert_eq!(popup(&cancel, "x", None), []);
    let discard = Overlay::ConfirmDiscard;
    assert_eq!(popup(&discard, "q", None), [Effect::Pop, Effect::Quit]);
    assert_eq!(popup(&discard, "n", None), [Effect::Pop]);
    assert_eq!(popup(&discard, "j", None), []);
    let resume = Overlay::ConfirmResume {
        run_id: "run-1".into(),
        task: "fix it".into(),
    };
    let resumed = [
        Effect::Pop,
        Effect::Resume {
            run_id: "run-1".into(),
            task: "fix it".into(),
        },
    ];
    assert_eq!(popup(&resume, "r", None), resumed);
    assert_eq!(popup(&resume, "enter", None), resumed);
    assert_eq!(popup(&resume, "n", None), [Effect::Pop]);
    assert_eq!(popup(&resume, "x", None), []);
}

#[test]
fn help_and_pager_scroll_and_close() {
    let help = Overlay::Help(Context::Stream, 0);
    assert_eq!(popup(&help, "j", None), [Effect::ScrollPopup(1)]);
    assert_eq!(popup(&help, "q", None), [Effect::Pop]);
    assert_eq!(
        popup(&help, "x", None),
        [Effect::Pop],
        "any other key closes help"
    );
    let pager = Overlay::Pager(Pager {
        title: "out".into(),
        lines: vec!["line".into(); 30],
        scroll: 25,
    });
    assert_eq!(popup(&pager, "pagedown", None), [Effect::ScrollPopup(29)]);
    assert_eq!(popup(&pager, "g", None), [Effect::ScrollPopup(0)]);
    assert_eq!(popup(&pager, "esc", None), [Effect::Pop]);
    assert_eq!(popup(&pager, "x", None), [], "the pager stays");
}

#[test]
fn an_apply_going_on_keeps_its_popup_and_a_result_offers_what_follows_it() {
    let going = delivery(DeliveryState::Applying { progress: None });
    assert_eq!(on_delivery(Some(&going), KeyCode::Esc), [Effect::Unchanged]);
    let applied = delivery(DeliveryState::Applied(Applied {
        changes: vec![('M', "a.py".into())],
        merged: Vec::new(),
        verified: Verified::Run,
    }));
    assert_eq!(
        on_delivery(Some(&applied), KeyCode::Char('u')),
        [Effect::Pop, Effect::Raise(Overlay::ConfirmUndo(run()))]
    );
    assert_eq!(
        on_delivery(Some(&applied), KeyCode::Enter),
        [Effect::Pop, Effect::ClearDelivery]
    );
    assert_eq!(
        on_delivery(Some(&applied), KeyCode::Char('m')),
        [Effect::Unchanged]
    );
    let overlap = delivery(DeliveryState::ApplyFailed(ApplyFailure::Overlap(vec![
        "a.py".into(),
    ])));
    let merge = ApplyRequest {
        merge: true,
        ..request()
    };
    assert_eq!(
        on_delivery(Some(&overlap), KeyCode::Char('m')),
        [Effect::Pop, Effect::Apply(merge)]
    );
    let skipped = delivery(DeliveryState::Undone(Undone {
        restored: Vec::new(),
        skipped: vec!["a.py".into()],
    }));
    assert_eq!(
        on_delivery(Some(&skipped), KeyCode::Char('F')),
        [Effect::Pop, Effect::Raise(Overlay::ConfirmForceUndo(run()))]
    );
    assert_eq!(on_delivery(None, KeyCode::Esc), [Effect::Pop]);
}

#[test]
fn an_undo_or_an_unverified_apply_is_done_only_on_yes() {
    let shown = delivery(DeliveryState::UndoFailed("busy".into()));
    let undo = Overlay::ConfirmForceUndo(run());
    assert_eq!(
        popup(&undo, "y", Some(&shown)),
        [
            Effect::Pop,
            Effect::Undo {
                run: run(),
                force: true
            }
        ]
    );
    assert_eq!(
        popup(&undo, "n", Some(&shown)),
        [Effect::Pop, Effect::Raise(Overlay::Delivery)]
    );
    assert_eq!(
        popup(&Overlay::ConfirmUndo(run()), "esc", None),
        [Effect::Pop]
    );
    assert_eq!(popup(&undo, "x", None), []);
    let unverified = ApplyRequest {
        unverified: true,
        ..request()
    };
    let ask = Overlay::ConfirmUnverified;
    assert_eq!(
        popup(&ask, "y", Some(&shown)),
        [Effect::Pop, Effect::Apply(unverified)]
    );
    assert_eq!(
        popup(&ask, "n", Some(&shown)),
        [Effect::Pop, Effect::Raise(Overlay::Delivery)]
    );
}

#[test]
fn an_approval_is_answered_y_a_or_n_with_a_reason() {
    let shown = pending();
    let answer =
        |name: &str, pending: &PendingApproval| on_approval(pending, &key(name), &keymap());
    assert_eq!(
        answer("y", &shown),
        [Effect::Answer(ApprovalDecision::Approve)]
    );
    assert_eq!(
        answer("a", &shown),
        [Effect::Answer(ApprovalDecision::ApproveAll)]
    );
    assert_eq!(answer("n", &shown), [Effect::AskReason]);
    assert_eq!(answer("j", &shown), [Effect::ScrollApproval(1)]);
    assert_eq!(answer("esc", &shown)[0], Effect::HideApproval);
    assert_eq!(
        answer("?", &shown),
        [Effect::Raise(Overlay::Help(Context::Approval, 0))]
    );
    assert_eq!(answer("x", &shown), [Effect::Unchanged]);

    let mut typing = pending();
    typing.reason = Some(ratatui_textarea::TextArea::default());
    assert_eq!(
        answer("enter", &typing),
        [Effect::Answer(ApprovalDecision::Refuse(None))]
    );
    assert_eq!(answer("y", &typing), [Effect::TypeReason(key("y"))]);
    assert_eq!(answer("esc", &typing), [Effect::DropReason]);
    typing.reason = Some(ratatui_textarea::TextArea::from(["  too broad "]));
    assert_eq!(
        answer("enter", &typing),
        [Effect::Answer(ApprovalDecision::Refuse(Some(
            "too broad".into()
        )))]
    );
}

#[test]
fn the_review_chooses_hunks_and_applies_all_or_a_subset() {
    let keymap = keymap();
    let on =
        |review: &Review, name: &str| on_review(review, keymap.lookup(Context::Review, &key(name)));
    let mut review = review();
    assert_eq!(
        on(&review, "space"),
        [Effect::ToggleHunk { file: 0, hunk: 0 }]
    );
    assert_eq!(on(&review, "A"), [Effect::ToggleAll]);
    assert_eq!(
        on(&review, "]"),
        [Effect::Diff(DiffTarget::Review, DiffMove::NextHunk)]
    );
    assert_eq!(
        on(&review, "l"),
        [Effect::Diff(DiffTarget::Review, DiffMove::Sideways(8))]
    );
    assert_eq!(
        on(&review, "enter"),
        [Effect::Apply(request())],
        "all: as it is"
    );
    review.selection.toggle_all();
    assert!(
        matches!(on(&review, "enter")[..], [Effect::Flash(_)]),
        "nothing chosen"
    );
    assert!(matches!(on(&review, "s")[..], [Effect::Flash(_)]));
    assert_eq!(on(&review, "q"), [Effect::Quit]);
    assert_eq!(
        on(&review, "esc"),
        [Effect::CloseReview, Effect::Focus(Pane::Input)]
    );
    assert_eq!(on(&review, "ctrl-r"), [Effect::OpenBrowser]);
    assert_eq!(on(&review, "x"), [Effect::Unchanged]);

    review.selection.toggle(0, 0);
    let [Effect::Apply(subset)] = &on(&review, "enter")[..] else {
        panic!("an apply");
    };
    assert_eq!(
        subset.subset.as_ref().map(|s| (s.numbers.clone(), s.of)),
        Some((vec![1], 2))
    );
    assert!(matches!(
        &on(&review, "s")[..],
        [Effect::Send(Op::SaveReview { .. })]
    ));
    assert_eq!(
        on(&review, "q"),
        [Effect::Raise(Overlay::ConfirmDiscard)],
        "unsaved"
    );
    review.selection.toggle(0, 1);
    assert_eq!(
        on(&review, "enter"),
        [Effect::Apply(request())],
        "all: as it is"
    );
}

#[test]
fn the_browser_list_scrolls_opens_and_acts_on_the_selected_run() {
    let keymap = keymap();
    let on = |browser: &Browser, name: &str| on_browser(browser, &key(name), &keymap, false);
    let mut list = browser(vec![
        entry("run-2", "success", true),
        entry("run-1", "interrupted", false),
    ]);
    assert_eq!(on(&list, "j"), [Effect::SelectRun(1)]);
    assert_eq!(on(&list, "G"), [Effect::SelectRun(1)]);
    assert_eq!(
        on(&list, "enter"),
        [Effect::LoadRun {
            dir: "/state/runs/run-2".into()
        }]
    );
    assert_eq!(on(&list, "esc"), [Effect::CloseBrowser]);
    assert_eq!(on(&list, "ctrl-r"), [Effect::RefreshBrowser]);
    assert_eq!(on(&list, "q"), [Effect::Quit]);
    assert!(
        matches!(on(&list, "a")[..], [Effect::Flash(_)]),
        "applied already"
    );
    assert!(
        matches!(on(&list, "r")[..], [Effect::Flash(_)]),
        "a success"
    );
    let run2 = RunRef::of(&list.runs[0]);
    assert_eq!(on(&list, "u"), [Effect::Raise(Overlay::ConfirmUndo(run2))]);

    list.selected = 1;
    assert!(
        matches!(on(&list, "u")[..], [Effect::Flash(_)]),
        "not applied"
    );
    assert_eq!(
        on(&list, "r"),
        [
            Effect::CloseBrowser,
            Effect::Resume {
                run_id: "run-1".into(),
                task: "task of run-1".into()
            }
        ]
    );
    assert!(matches!(on(&list, "a")[..], [Effect::Apply(_)]));
    assert_eq!(on(&browser(Vec::new()), "enter"), [Effect::Unchanged]);
    assert_eq!(on(&browser(Vec::new()), "a"), [Effect::Unchanged]);
    assert!(matches!(
        on_browser(&list, &key("q"), &keymap, true)[..],
        [Effect::Flash(_)]
    ));
}

#[test]
fn an_opened_run_moves_in_its_sections_and_goes_back_to_the_list() {
    let keymap = keymap();
    let on = |browser: &Browser, name: &str| on_browser(browser, &key(name), &keymap, false);
    let diff = opened(Section::Diff);
    assert_eq!(
        on(&diff, "]"),
        [Effect::Diff(DiffTarget::OpenRun, DiffMove::NextHunk)]
    );
    assert_eq!(
        on(&diff, "pageup"),
        [Effect::Diff(DiffTarget::OpenRun, DiffMove::Pages(-1))]
    );
    assert_eq!(on(&diff, "tab"), [Effect::NextSection]);
    assert_eq!(on(&diff, "esc"), [Effect::CloseRun]);
    assert!(matches!(on(&diff, "a")[..], [Effect::Apply(_)]));
    assert_eq!(
        on(&opened(Section::Verification), "G"),
        [Effect::ScrollRun(0)]
    );
    assert_eq!(
        on(&opened(Section::Events), "pagedown"),
        [Effect::ScrollRun(10)]
    );
}

fn plan_item(id: &str) -> PlanItem {
    PlanItem {
        id: id.into(),
        content: format!("step {id}"),
        status: PlanStatus::Pending,
        notes: None,
    }
}

/// An app whose panes have something to scroll: 20 activity entries, 8
/// checks, 12 plan steps.
fn filled() -> App {
    let mut app = app();
    for i in 0..20 {
        app.view.note(NoteKind::Info, format!("note {i}"));
    }
    app.view.matrix.checks = (0..8).map(|i| format!("check {i}")).collect();
    app.view.plan = (0..12).map(|i| plan_item(&i.to_string())).collect();
    app
}

#[test]
fn every_pane_scrolls_within_what_it_shows() {
    let mut app = filled();
    let on = |app: &App, pane: Pane, action: Action| on_pane(app, pane, action);
    assert_eq!(
        on(&app, Pane::Stream, Action::ScrollDown),
        Effect::ScrollPane(Pane::Stream, 1)
    );
    assert_eq!(
        on(&app, Pane::Stream, Action::PageDown),
        Effect::ScrollPane(Pane::Stream, 10)
    );
    assert_eq!(
        on(&app, Pane::Stream, Action::Bottom),
        Effect::ScrollPane(Pane::Stream, 19)
    );
    assert_eq!(
        on(&app, Pane::Matrix, Action::PageDown),
        Effect::ScrollPane(Pane::Matrix, 5)
    );
    assert_eq!(
        on(&app, Pane::Matrix, Action::Bottom),
        Effect::ScrollPane(Pane::Matrix, 7)
    );
    assert_eq!(
        on(&app, Pane::Plan, Action::PageDown),
        Effect::ScrollPane(Pane::Plan, 5)
    );
    assert_eq!(
        on(&app, Pane::Plan, Action::Bottom),
        Effect::ScrollPane(Pane::Plan, 11)
    );
    assert_eq!(
        on(&app, Pane::Diff, Action::PageDown),
        Effect::Diff(DiffTarget::Pane, DiffMove::Pages(1))
    );
    assert_eq!(on(&app, Pane::Diff, Action::Expand), Effect::Unchanged);
    assert_eq!(on(&app, Pane::Input, Action::ScrollDown), Effect::Unchanged);
    assert_eq!(on(&app, Pane::Stream, Action::Expand), Effect::ToggleEntry);
    assert_eq!(
        on(&app, Pane::Stream, Action::ShowOutput),
        Effect::ShowToolOutput
    );
    assert_eq!(
        on(&app, Pane::Matrix, Action::Expand),
        Effect::ShowCheckOutput
    );

    // From where each pane is now, and never past its end.
    app.panes.stream.selected = 18;
    app.panes.matrix_row = 6;
    app.panes.plan_scroll = 3;
    assert_eq!(
        on(&app, Pane::Stream, Action::PageDown),
        Effect::ScrollPane(Pane::Stream, 19)
    );
    assert_eq!(
        on(&app, Pane::Matrix, Action::ScrollDown),
        Effect::ScrollPane(Pane::Matrix, 7)
    );
    assert_eq!(
        on(&app, Pane::Matrix, Action::ScrollDown),
        Effect::ScrollPane(Pane::Matrix, 7)
    );
    assert_eq!(
        on(&app, Pane::Plan, Action::PageUp),
        Effect::ScrollPane(Pane::Plan, 0)
    );
    assert_eq!(
        on(&app, Pane::Plan, Action::ScrollUp),
        Effect::ScrollPane(Pane::Plan, 2)
    );
}

#[test]
fn a_scroll_performed_moves_the_pane_and_the_activity_follows_only_at_its_end() {
    let mut app = filled();
    app.perform(Effect::ScrollPane(Pane::Stream, 5));
    assert_eq!(app.panes.stream.selected, 5);
    assert!(!app.panes.stream.follow);
    app.perform(Effect::ScrollPane(Pane::Stream, 19));
    assert!(app.panes.stream.follow);
    app.perform(Effect::ScrollPane(Pane::Matrix, 3));
    app.perform(Effect::ScrollPane(Pane::Plan, 4));
    assert_eq!((app.panes.matrix_row, app.panes.plan_scroll), (3, 4));
}

#[test]
fn keys_on_the_panes_move_the_focus_zoom_and_type() {
    let mut app = filled();
    app.panes.focus = Pane::Stream;
    let focus = |app: &App, name: &str| on_panes(app, key(name));
    assert_eq!(focus(&app, "tab"), [Effect::Focus(Pane::Diff)]);
    assert_eq!(focus(&app, "backtab"), [Effect::Focus(Pane::Input)]);
    assert_eq!(focus(&app, "i"), [Effect::Focus(Pane::Input)]);
    assert_eq!(focus(&app, "z"), [Effect::Zoom(true)]);
    assert_eq!(focus(&app, "j"), [Effect::ScrollPane(Pane::Stream, 1)]);
    assert!(
        matches!(focus(&app, "p")[..], [Effect::Flash(_)]),
        "no approval"
    );
    assert!(
        matches!(focus(&app, "u")[..], [Effect::Flash(_)]),
        "nothing applied"
    );
    assert_eq!(focus(&app, "q"), [Effect::Quit]);
    assert_eq!(focus(&app, "x"), [Effect::Unchanged]);
    app.panes.zoomed = true;
    assert_eq!(focus(&app, "z"), [Effect::Zoom(false)]);

    app.panes.focus = Pane::Input;
    assert_eq!(
        focus(&app, "?"),
        [Effect::Raise(Overlay::Help(Context::Input, 0))]
    );
    assert_eq!(focus(&app, "x"), [Effect::Edit(key("x"))]);
    assert_eq!(focus(&app, "enter"), [Effect::Submit]);
    assert_eq!(focus(&app, "esc"), [Effect::Focus(Pane::Stream)]);
    assert_eq!(focus(&app, "up"), [Effect::Recall(-1)]);
    assert_eq!(
        focus(&app, "pagedown"),
        [Effect::ScrollPane(Pane::Stream, 10)]
    );
    assert_eq!(
        act(&app, Action::Zoom),
        [Effect::Zoom(false)],
        "the task box does not zoom"
    );
}
