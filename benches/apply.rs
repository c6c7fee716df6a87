//! `minicoder apply` of a 1,000-file patch on a 50,000-file repository,
//! beside `git apply` of the same patch on the same tree, in one run.
//! Each round applies, times, and puts the tree back (`undo` and
//! `git apply -R`, not timed). Prints medians and the ratio.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/fake_run.rs"]
mod fake_run;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use minicoder::delivery::{self, ApplyOptions, UndoOptions};
use minicoder::protocol::Outcome;
use minicoder::state::StateDir;
use minicoder::trace::ReceiptKey;

const DIRS: usize = 500;
const FILES: usize = 100;
const CHANGED_EVERY: usize = 50; // 50,000 / 50 = 1,000 files
const ROUNDS: usize = 7;

fn sh(dir: &Path, script: &str) {
    let ok = Command::new("sh")
        .args(["-c", script])
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .status()
        .unwrap()
        .success();
    assert!(ok, "{script}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    for d in 0..DIRS {
        let dir = repo.join(format!("dir{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES {
            std::fs::write(
                dir.join(format!("file{f:03}.txt")),
                format!("{d} {f}\nalpha\nbeta\ngamma\ndelta\n"),
            )
            .unwrap();
        }
    }
    sh(&repo, "git init -q && git add -A && git commit -qm base");
    let state = StateDir::new(tmp.path().join("state"));
    let dir = fake_run::make_run(
        &state,
        &repo,
        &tmp.path().join("ws"),
        "bench-run",
        Outcome::Success,
        |ws| {
            for i in (0..DIRS * FILES).step_by(CHANGED_EVERY) {
                let path = ws.join(format!("dir{:03}/file{:03}.txt", i / FILES, i % FILES));
                let text = std::fs::read_to_string(&path).unwrap();
                std::fs::write(&path, text.replace("gamma", "GAMMA")).unwrap();
            }
        },
    );
    let patch = dir.join("final.patch");
    let key = ReceiptKey::load_or_create(&state).unwrap().0;
    let run = minicoder::runs::resolve(&state, "bench-run", &repo).unwrap();

    let (mut ours, mut git) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let t = Instant::now();
        let report = delivery::apply(&state, &key, &run, ApplyOptions::default()).unwrap();
        ours.push(t.elapsed());
        assert_eq!(report.changes.len(), DIRS * FILES / CHANGED_EVERY);
        let undone = delivery::undo(&state, &key, &run, UndoOptions::default()).unwrap();
        assert!(undone.skipped.is_empty());

        let t = Instant::now();
        let ok = Command::new("git")
            .arg("apply")
            .arg(&patch)
            .current_dir(&repo)
            .status()
            .unwrap()
            .success();
        git.push(t.elapsed());
        assert!(ok, "git apply");
        sh(&repo, &format!("git apply -R '{}'", patch.display()));
    }
    let (ours, git) = (median(ours), median(git));
    println!(
        "apply of a {}-file patch on a {}-file repository ({ROUNDS} rounds, medians):",
        DIRS * FILES / CHANGED_EVERY,
        DIRS * FILES
    );
    println!("  minicoder apply (verify, conflict check, journal, write): {ours:?}");
    println!("  git apply:                                              {git:?}");
    println!(
        "  ratio: {:.2} x git apply",
        ours.as_secs_f64() / git.as_secs_f64()
    );
}
