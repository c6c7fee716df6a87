//! Applies, undos and the runs browser of the session, performed for real on
//! runs built with the library's own writers (signed receipt, event log,
//! final patch): the session loop with a test terminal and typed keys, and
//! the run store it performs them with. No Docker: a whole patch is applied
//! as verified, without running checks again.

use crate::support;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crossterm::event::Event;
use minicoder::protocol::{ApprovalMode, Outcome};
use minicoder::state::StateDir;
use minicoder::tui::app::{App, ApplyFailure, ApplyRequest, ChosenHunks, RunRef, Verified};
use minicoder::tui::delivery::RunStore;
use minicoder::tui::keymap::{Keymap, parse_key_event};
use minicoder::tui::session::Session;
use minicoder::tui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use tokio::sync::mpsc;

const BEFORE: &str = "hello\n";
const AFTER: &str = "hello, world\n";

struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
}

impl Fixture {
    fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        support::write(&repo.join("greeting.txt"), BEFORE.as_bytes());
        support::write(&repo.join("other.txt"), b"other\n");
        support::git_commit_all(&repo);
        Fixture { tmp, repo }
    }

    fn state(&self) -> StateDir {
        StateDir::new(self.tmp.path().join("state"))
    }

    fn store(&self) -> RunStore {
        RunStore {
            state: self.state(),
            repo: self.repo.clone(),
        }
    }

    /// A run whose agent changed the greeting; its artifact directory.
    fn run(&self, id: &str, outcome: Outcome) -> PathBuf {
        let workspace = self.tmp.path().join(format!("ws-{id}"));
        support::fake_run::make_run(&self.state(), &self.repo, &workspace, id, outcome, |ws| {
            std::fs::write(ws.join("greeting.txt"), AFTER).unwrap();
        })
    }

    fn greeting(&self) -> String {
        std::fs::read_to_string(self.repo.join("greeting.txt")).unwrap()
    }
}

fn request(dir: &Path, id: &str) -> ApplyRequest {
    ApplyRequest {
        run: RunRef {
            id: id.into(),
            dir: dir.display().to_string(),
            task: "Fix the greeting".into(),
        },
        subset: None,
        merge: false,
        unverified: false,
    }
}

type Keys = mpsc::UnboundedSender<io::Result<Event>>;

fn key(keys: &Keys, spec: &str) {
    let event = parse_key_event(spec).expect("key");
    keys.send(Ok(Event::Key(event))).expect("send key");
}

/// Polls until `done` holds, for at most 10 s, typing `keys` between looks.
async fn until(keys: &Keys, typing: &[&str], done: impl Fn() -> bool) {
    for _ in 0..100 {
        if done() {
            return;
        }
        for k in typing {
            key(keys, k);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(done(), "not reached after typing {typing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_applies_a_run_and_undoes_it_through_the_session_loop() {
    let fixture = Fixture::new();
    let dir = fixture.run("20261201-100000-aaaa0001", Outcome::Success);
    let theme = Theme::load_coloured("default", None).unwrap();
    let mut app = App::new(
        &fixture.repo.display().to_string(),
        Keymap::defaults(),
        theme,
        ApprovalMode::Final,
    );
    let mut session = Session::new(None).with_store(fixture.store());
    let (keys, rx) = mpsc::unbounded_channel();
    let stream = Box::pin(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    let mut terminal = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let driver = async {
        // Ctrl-R from the task box opens the list; `a` applies its run once it is listed.
        key(&keys, "ctrl-r");
        until(&keys, &["a"], || fixture.greeting() == AFTER).await;
        assert!(dir.join("apply/journal.json").is_file());
        // Closed, then `u` and `y` once the list shows the run applied.
        key(&keys, "esc");
        until(&keys, &["u", "y"], || fixture.greeting() == BEFORE).await;
        key(&keys, "ctrl-c");
    };
    let running = session.run(&mut terminal, &mut app, stream);
    let (result, ()) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(running, driver)
    })
    .await
    .expect("the session returns");
    result.unwrap();
    assert_eq!(fixture.greeting(), BEFORE, "restored byte for byte");
    assert!(!dir.join("apply/journal.json").exists(), "no apply left");
    assert!(app.applied_run().is_none());
    let screen = terminal.backend().to_string();
    assert!(screen.contains("Runs of repo"), "{screen}");
}

#[tokio::test]
async fn the_store_lists_reads_applies_and_undoes_runs() {
    let fixture = Fixture::new();
    let dir = fixture.run("20261201-100000-aaaa0002", Outcome::Success);
    let store = fixture.store();
    let entries = store.entries();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].outcome, "success");
    assert_eq!(entries[0].verified, Some(true));
    assert!(!entries[0].applied);
    assert_eq!(entries[0].changed_files, ["greeting.txt"]);
    let detail = store.detail(&dir).unwrap();
    assert_eq!(detail.patch.files.len(), 1);
    assert!(detail.events.iter().any(|e| e.contains("run.started")));
    assert_eq!(detail.summary.as_deref(), Some("the greeting is fixed"));

    let progress = |_: &str| {};
    let applied = store
        .apply(&request(&dir, "20261201-100000-aaaa0002"), &progress)
        .await
        .unwrap();
    assert_eq!(applied.verified, Verified::Run);
    assert_eq!(applied.changes.len(), 1);
    assert_eq!(fixture.greeting(), AFTER);
    assert!(store.entries()[0].applied);

    // Edited since the apply: left alone, then restored on the forced undo.
    std::fs::write(fixture.repo.join("greeting.txt"), "mine\n").unwrap();
    let run = request(&dir, "20261201-100000-aaaa0002").run;
    let undone = store.undo(&run, false).unwrap();
    assert_eq!(undone.skipped, ["greeting.txt"]);
    assert_eq!(fixture.greeting(), "mine\n");
    let forced = store.undo(&run, true).unwrap();
    assert!(forced.skipped.is_empty());
    assert_eq!(fixture.greeting(), BEFORE);
    assert!(!store.entries()[0].applied);
}

#[tokio::test]
async fn an_overlap_names_its_paths_and_writes_nothing() {
    let fixture = Fixture::new();
    let dir = fixture.run("20261201-100000-aaaa0003", Outcome::Success);
    std::fs::write(fixture.repo.join("greeting.txt"), "mine\n").unwrap();
    let progress = |_: &str| {};
    let failure = fixture
        .store()
        .apply(&request(&dir, "20261201-100000-aaaa0003"), &progress)
        .await
        .unwrap_err();
    match failure {
        ApplyFailure::Overlap(paths) => {
            assert_eq!(paths.len(), 1);
            assert!(paths[0].starts_with("greeting.txt"), "{paths:?}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(fixture.greeting(), "mine\n");
}

#[tokio::test]
async fn a_failed_run_is_refused_until_applied_unverified_on_purpose() {
    let fixture = Fixture::new();
    let dir = fixture.run("20261201-100000-aaaa0004", Outcome::Failure);
    let store = fixture.store();
    let progress = |_: &str| {};
    let refused = store
        .apply(&request(&dir, "20261201-100000-aaaa0004"), &progress)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ApplyFailure::Unverified(_)),
        "{refused:?}"
    );
    assert_eq!(fixture.greeting(), BEFORE);
    let unverified = ApplyRequest {
        unverified: true,
        ..request(&dir, "20261201-100000-aaaa0004")
    };
    let applied = store.apply(&unverified, &progress).await.unwrap();
    assert!(matches!(applied.verified, Verified::Unverified(_)));
    assert_eq!(fixture.greeting(), AFTER);
}

#[tokio::test]
async fn a_subset_is_never_applied_without_a_verification() {
    let fixture = Fixture::new();
    let dir = fixture.run("20261201-100000-aaaa0005", Outcome::Success);
    let progress = |_: &str| {};
    let subset = ApplyRequest {
        // greeting.txt's one hunk, chosen as a review chooses it.
        subset: Some(ChosenHunks {
            numbers: vec![1],
            of: 1,
        }),
        ..request(&dir, "20261201-100000-aaaa0005")
    };
    match fixture.store().apply(&subset, &progress).await {
        // Not verified (or the verification could not run): nothing written.
        Err(failure) => {
            assert_eq!(fixture.greeting(), BEFORE, "{failure:?}");
            assert!(!matches!(failure, ApplyFailure::Overlap(_)), "{failure:?}");
        }
        // Verified again and passed: applied, and said so, never as the run's own.
        Ok(applied) => assert!(
            matches!(applied.verified, Verified::Subset(_)),
            "{applied:?}"
        ),
    }
}
