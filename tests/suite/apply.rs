//! `minicoder apply` and `minicoder undo` through the real binary. Most runs
//! are built with the library's own writers (a private workspace, the
//! checkpoint store's exported patch, the artifact directory, the event log
//! and a signed receipt), so each test is about apply; one makes a real run
//! end to end in the sandbox.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use minicoder::protocol::Outcome;
use minicoder::state::StateDir;
use sha2::{Digest, Sha256};

struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
}

/// A run built in the fixture: its id, artifact and workspace directories.
struct Made {
    dir: PathBuf,
    workspace: PathBuf,
}

impl Fixture {
    fn new(files: &[(&str, &[u8])]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        for (path, bytes) in files {
            support::write(&repo.join(path), bytes);
        }
        support::git_commit_all(&repo);
        Self { tmp, repo }
    }

    fn state(&self) -> StateDir {
        StateDir::new(self.tmp.path().join("state"))
    }

    /// A run of `outcome` whose agent did `edit` to its workspace.
    fn run(&self, id: &str, outcome: Outcome, edit: impl FnOnce(&Path)) -> Made {
        let workspace = self.tmp.path().join(format!("ws-{id}"));
        let dir =
            support::fake_run::make_run(&self.state(), &self.repo, &workspace, id, outcome, edit);
        Made { dir, workspace }
    }

    fn cmd(&self, args: &[&str]) -> Output {
        std::process::Command::new(support::bin())
            .args(args)
            .current_dir(&self.repo)
            .env("MINICODER_STATE_DIR", self.state().root())
            .env_remove("MINICODER_LOG")
            .output()
            .unwrap()
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.repo.join(rel)
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// SHA-256 over every entry under `dir` (kind, mode, content or link
/// target), `.git` included unless `skip_git`.
fn tree_hash(dir: &Path, skip_git: bool) -> String {
    let mut entries = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().to_path_buf();
            if skip_git && rel.starts_with(".git") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let body = if meta.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&path).unwrap().display()).into_bytes()
            } else if meta.is_dir() {
                stack.push(path.clone());
                b"dir".to_vec()
            } else {
                let mut b = format!("file {:o} ", meta.permissions().mode() & 0o777).into_bytes();
                b.extend(std::fs::read(&path).unwrap());
                b
            };
            entries.push((rel, body));
        }
    }
    entries.sort();
    let mut h = Sha256::new();
    for (rel, body) in entries {
        h.update(rel.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(&body);
        h.update([0]);
    }
    hex::encode(h.finalize())
}

fn basic() -> Fixture {
    Fixture::new(&[
        ("greet.py", b"def greet():\n    return 'helo'\n"),
        (
            "notes.txt",
            b"one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n",
        ),
        ("old.txt", b"to be removed\n"),
        ("run.sh", b"#!/bin/sh\necho hi\n"),
        ("logo.bin", b"\x89PNG\0\0\x01\x02binary\xff\xfe"),
        ("unrelated.md", b"the user's file\n"),
        ("kind.txt", b"a file that becomes a link\n"),
    ])
}

/// The agent's edit: a text change, a deletion, a file in new directories,
/// a binary change, a mode change, a new symlink and a file that becomes one.
fn the_fix(ws: &Path) {
    std::fs::write(ws.join("greet.py"), "def greet():\n    return 'hello'\n").unwrap();
    std::fs::remove_file(ws.join("old.txt")).unwrap();
    support::write(&ws.join("pkg/sub/new.txt"), b"brand new\n");
    std::fs::write(ws.join("logo.bin"), b"\x89PNG\0\0\x03\x04other\xff").unwrap();
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("greet.py", ws.join("link.py")).unwrap();
    std::fs::remove_file(ws.join("kind.txt")).unwrap();
    std::os::unix::fs::symlink("notes.txt", ws.join("kind.txt")).unwrap();
}

#[test]
fn a_verified_run_applies_exactly_and_undo_restores_exactly() {
    let fx = basic();
    let run = fx.run("run-ok", Outcome::Success, the_fix);
    let before = tree_hash(&fx.repo, false);
    let out = fx.cmd(&["apply", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for line in [
        "M greet.py",
        "D old.txt",
        "A pkg/sub/new.txt",
        "M logo.bin",
        "M run.sh",
        "A link.py",
    ] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
    assert!(stdout.contains("left uncommitted"), "{stdout}");
    // The source is now exactly what the run's workspace held.
    assert_eq!(tree_hash(&fx.repo, true), tree_hash(&run.workspace, true));
    assert!(run.dir.join("apply/journal.json").is_file());

    // A second apply is refused while the first stands.
    let again = fx.cmd(&["apply", "last"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again).1.contains("already applied"),
        "{}",
        text(&again).1
    );

    let out = fx.cmd(&["undo", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("restored greet.py"), "{stdout}");
    assert_eq!(
        tree_hash(&fx.repo, false),
        before,
        "byte for byte, .git included"
    );
}

#[test]
fn an_unrelated_user_edit_is_kept() {
    let fx = basic();
    let run = fx.run("run-ok", Outcome::Success, the_fix);
    std::fs::write(fx.path("unrelated.md"), "edited by the user\n").unwrap();
    support::write(&fx.path("mine/new.txt"), b"untracked, mine\n");
    let out = fx.cmd(&["apply", "run-ok"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(fx.read("greet.py"), "def greet():\n    return 'hello'\n");
    assert_eq!(fx.read("unrelated.md"), "edited by the user\n");
    assert_eq!(fx.read("mine/new.txt"), "untracked, mine\n");
    drop(run);
}

#[test]
fn an_overlapping_edit_is_refused_naming_every_path_and_nothing_changes() {
    let fx = basic();
    fx.run("run-ok", Outcome::Success, the_fix);
    std::fs::write(fx.path("greet.py"), "def greet():\n    return 'hi'\n").unwrap();
    std::fs::remove_file(fx.path("old.txt")).unwrap();
    support::write(&fx.path("pkg/sub/new.txt"), b"I made this too\n");
    let before = tree_hash(&fx.repo, false);
    let out = fx.cmd(&["apply", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    for named in [
        "greet.py (changed since",
        "old.txt (deleted since",
        "pkg/sub/new.txt (created since",
    ] {
        assert!(stderr.contains(named), "{named}: {stderr}");
    }
    assert!(!stderr.contains("logo.bin"), "{stderr}");
    assert_eq!(tree_hash(&fx.repo, false), before);
    // The dry run says the same and writes nothing either.
    let dry = fx.cmd(&["apply", "--dry-run", "run-ok"]);
    let (stdout, _) = text(&dry);
    assert_eq!(dry.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("greet.py (changed since"), "{stdout}");
    assert!(stdout.contains("apply would refuse"), "{stdout}");
    assert_eq!(tree_hash(&fx.repo, false), before);
}

#[test]
fn a_dry_run_lists_the_changes_and_writes_nothing() {
    let fx = basic();
    fx.run("run-ok", Outcome::Success, the_fix);
    let before = tree_hash(&fx.repo, false);
    let out = fx.cmd(&["apply", "--dry-run", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("would apply"), "{stdout}");
    assert!(stdout.contains("A pkg/sub/new.txt"), "{stdout}");
    assert!(stdout.contains("nothing was written"), "{stdout}");
    assert_eq!(tree_hash(&fx.repo, false), before);
}

#[test]
fn merge_accepts_edits_on_other_lines_and_refuses_edits_on_the_same_lines() {
    let fx = basic();
    fx.run("run-merge", Outcome::Success, |ws| {
        std::fs::write(
            ws.join("notes.txt"),
            "ONE\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n",
        )
        .unwrap();
        std::fs::write(ws.join("greet.py"), "def greet():\n    return 'hello'\n").unwrap();
    });
    // The user changed the last line of notes.txt: no overlap of lines.
    std::fs::write(
        fx.path("notes.txt"),
        "one\ntwo\nthree\nfour\nfive\nsix\nseven\nEIGHT\n",
    )
    .unwrap();
    // ...and the same line of greet.py as the run.
    std::fs::write(fx.path("greet.py"), "def greet():\n    return 'hi'\n").unwrap();
    let before = tree_hash(&fx.repo, false);
    let out = fx.cmd(&["apply", "--merge", "run-merge"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("do not merge cleanly: greet.py"),
        "{stderr}"
    );
    assert!(!stderr.contains("notes.txt"), "{stderr}");
    assert_eq!(tree_hash(&fx.repo, false), before, "all or nothing");

    // Without the conflicting edit, the merge goes through.
    std::fs::write(fx.path("greet.py"), "def greet():\n    return 'helo'\n").unwrap();
    let out = fx.cmd(&["apply", "--merge", "run-merge"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("M notes.txt  (merged with your edit)"),
        "{stdout}"
    );
    assert_eq!(
        fx.read("notes.txt"),
        "ONE\ntwo\nthree\nfour\nfive\nsix\nseven\nEIGHT\n"
    );
    assert_eq!(fx.read("greet.py"), "def greet():\n    return 'hello'\n");
    // Undo puts the user's version back, not the baseline.
    let out = fx.cmd(&["undo", "run-merge"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(
        fx.read("notes.txt"),
        "one\ntwo\nthree\nfour\nfive\nsix\nseven\nEIGHT\n"
    );
}

/// A name, a change to the artifact directory, what the refusal must say.
type TamperCase = (&'static str, fn(&Path), &'static str);

#[test]
fn tampered_artifacts_are_refused_naming_what_did_not_match() {
    let cases: [TamperCase; 4] = [
        (
            "receipt",
            |dir| {
                let p = dir.join("receipt.json");
                let t = std::fs::read_to_string(&p).unwrap();
                std::fs::write(&p, t.replace("\"passed\": true", "\"passed\": false")).unwrap();
            },
            "the receipt's HMAC does not verify",
        ),
        (
            "patch",
            |dir| std::fs::write(dir.join("final.patch"), "").unwrap(),
            "final.patch does not match the receipt",
        ),
        (
            "events-line",
            |dir| {
                let p = dir.join("events.jsonl");
                let t = std::fs::read_to_string(&p).unwrap();
                std::fs::write(&p, t.replacen("Fix the greeting", "Fix the greetinG", 1)).unwrap();
            },
            "the event log's chain is broken",
        ),
        (
            "events-last-line",
            |dir| {
                let p = dir.join("events.jsonl");
                let t = std::fs::read_to_string(&p).unwrap();
                std::fs::write(&p, t.replace("\"done\"", "\"DONE\"")).unwrap();
            },
            "events.jsonl does not match the receipt",
        ),
    ];
    for (name, tamper, message) in cases {
        let fx = basic();
        let run = fx.run("run-ok", Outcome::Success, the_fix);
        tamper(&run.dir);
        let before = tree_hash(&fx.repo, false);
        let out = fx.cmd(&["apply", "run-ok"]);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{name}: {stdout}\n{stderr}");
        assert!(stderr.contains(message), "{name}: {stderr}");
        assert_eq!(tree_hash(&fx.repo, false), before, "{name}");
    }
}

#[test]
fn a_forged_journal_is_refused_by_undo() {
    let fx = basic();
    let run = fx.run("run-ok", Outcome::Success, the_fix);
    assert_eq!(fx.cmd(&["apply", "run-ok"]).status.code(), Some(0));
    let journal = run.dir.join("apply/journal.json");
    let text_before = std::fs::read_to_string(&journal).unwrap();
    // Point greet.py's pre-image at other content.
    let forged: serde_json::Value = serde_json::from_str(&text_before).unwrap();
    let mut forged = forged;
    forged["entries"][0]["pre"]["sha256"] = serde_json::Value::String("00".repeat(32));
    std::fs::write(&journal, serde_json::to_string(&forged).unwrap()).unwrap();
    let after_apply = tree_hash(&fx.repo, false);
    let out = fx.cmd(&["undo", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the apply journal does not verify"),
        "{stderr}"
    );
    assert_eq!(tree_hash(&fx.repo, false), after_apply);
}

#[test]
fn an_apply_that_fails_half_way_leaves_the_source_byte_identical() {
    let fx = basic();
    let run = fx.run("run-ok", Outcome::Success, |ws| {
        the_fix(ws);
        support::write(&ws.join("zz/last.txt"), b"written last\n");
    });
    // A file where the run needs a directory: fails for root too, after
    // every other file was written.
    std::fs::write(fx.path("zz"), "the user's file named zz\n").unwrap();
    let before = tree_hash(&fx.repo, false);
    let out = fx.cmd(&["apply", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("zz/last.txt"), "{stderr}");
    assert!(stderr.contains("put back"), "{stderr}");
    assert_eq!(tree_hash(&fx.repo, false), before);
    assert!(!run.dir.join("apply/journal.json").exists());
}

#[test]
fn undo_refuses_a_file_changed_since_the_apply_and_force_restores_it() {
    let fx = basic();
    fx.run("run-ok", Outcome::Success, the_fix);
    let before = tree_hash(&fx.repo, false);
    assert_eq!(fx.cmd(&["apply", "run-ok"]).status.code(), Some(0));
    std::fs::write(fx.path("greet.py"), "changed after the apply\n").unwrap();
    let out = fx.cmd(&["undo", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("changed since the apply: greet.py"),
        "{stderr}"
    );
    assert_eq!(fx.read("greet.py"), "changed after the apply\n");
    assert!(stdout.contains("restored logo.bin"), "{stdout}");
    // Again: only the changed file is named; the restored ones are done.
    let out = fx.cmd(&["undo", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("changed since the apply: greet.py;"),
        "{stderr}"
    );
    assert!(!stdout.contains("logo.bin"), "{stdout}");
    let out = fx.cmd(&["undo", "--force", "run-ok"]);
    assert_eq!(out.status.code(), Some(0), "{:?}", text(&out));
    assert_eq!(tree_hash(&fx.repo, false), before);
}

#[test]
fn commit_records_the_run_and_undo_commit_records_the_revert() {
    let fx = basic();
    fx.run("run-ok", Outcome::Success, the_fix);
    // A hook that would leave a mark if anything ran it.
    let hook = fx.path(".git/hooks/pre-commit");
    support::write(
        &hook,
        b"#!/bin/sh\ntouch /tmp/minicoder-apply-hook-ran\nexit 1\n",
    );
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = fx.cmd(&["apply", "--commit", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("committed"), "{stdout}");
    let repo = git2::Repository::open(&fx.repo).unwrap();
    let head = repo.head().unwrap().peel_to_commit().unwrap();
    let message = head.message().unwrap().to_string();
    assert!(message.starts_with("Fix the greeting"), "{message}");
    assert!(message.contains("Minicoder-Run: run-ok"), "{message}");
    assert!(message.contains("Minicoder-Receipt: "), "{message}");
    let tree = head.tree().unwrap();
    assert!(tree.get_path(Path::new("old.txt")).is_err());
    assert!(tree.get_path(Path::new("pkg/sub/new.txt")).is_ok());
    let statuses = repo
        .statuses(Some(git2::StatusOptions::new().include_untracked(true)))
        .unwrap();
    let dirty: Vec<String> = statuses
        .iter()
        .map(|s| s.path().unwrap_or("").to_string())
        .collect();
    assert!(dirty.is_empty(), "clean after the commit: {dirty:?}");
    assert!(!Path::new("/tmp/minicoder-apply-hook-ran").exists());

    let out = fx.cmd(&["undo", "--commit", "run-ok"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let revert = repo.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(revert.parent_id(0).unwrap(), head.id());
    let message = revert.message().unwrap();
    assert!(
        message.starts_with("Revert \"Fix the greeting\""),
        "{message}"
    );
    assert!(
        message.contains(&format!("This reverts commit {}", head.id())),
        "{message}"
    );
    let first = head.parent(0).unwrap();
    assert_eq!(
        revert.tree_id(),
        first.tree_id(),
        "the tree of before the apply"
    );
    assert_eq!(fx.read("old.txt"), "to be removed\n");
}

#[test]
fn a_failed_run_is_refused_unless_unverified_and_the_journal_says_so() {
    let fx = basic();
    let run = fx.run("run-bad", Outcome::Failure, the_fix);
    let before = tree_hash(&fx.repo, false);
    let out = fx.cmd(&["apply", "run-bad"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("did not succeed"), "{stderr}");
    assert!(stderr.contains("--unverified"), "{stderr}");
    assert_eq!(tree_hash(&fx.repo, false), before);
    let out = fx.cmd(&["apply", "--unverified", "run-bad"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("unverified"), "{stderr}");
    let journal: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.dir.join("apply/journal.json")).unwrap())
            .unwrap();
    assert_eq!(journal["unverified"], true);
}

#[test]
fn a_patch_through_a_symlinked_directory_is_refused() {
    let fx = basic();
    fx.run("run-ok", Outcome::Success, |ws| {
        support::write(&ws.join("pkg/evil.txt"), b"x\n");
    });
    // The user turned `pkg` into a link out of the repository.
    let outside = fx.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, fx.path("pkg")).unwrap();
    let out = fx.cmd(&["apply", "run-ok"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("pkg/evil.txt"), "{stderr}");
    assert!(stderr.contains("symbolic link"), "{stderr}");
    assert!(std::fs::read_dir(&outside).unwrap().next().is_none());
}

/// A real run: the demo fixes its fixture in the sandbox with the scripted
/// model; `apply last` from the fixture delivers the fix, and its tests
/// (failing before) pass after.
#[tokio::test]
async fn a_real_run_applies_end_to_end_and_the_source_tests_pass() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let state = support::state_dir();
    let st = state.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(support::bin())
            .arg("demo")
            .env("MINICODER_STATE_DIR", &st)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let demo = std::fs::read_dir(state.path().join("demo"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let tests = |dir: &Path| {
        std::process::Command::new("docker")
            // The demo's copy lives in the private state directory, which
            // only its owner can read.
            .args(["run", "--rm", "--network", "none", "--user", "0", "-v"])
            .arg(format!("{}:/src:ro", dir.display()))
            .args([
                "-w",
                "/src",
                &minicoder::sandbox::spec::image_from_env(),
                "python3",
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
            ])
            .output()
            .unwrap()
    };
    assert!(!tests(&demo).status.success(), "the fixture's bug is there");
    let apply = std::process::Command::new(support::bin())
        .args(["apply", "last"])
        .current_dir(&demo)
        .env("MINICODER_STATE_DIR", state.path())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&apply);
    assert_eq!(apply.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("M pagination.py"), "{stdout}");
    let after = tests(&demo);
    assert!(after.status.success(), "{:?}", text(&after));
}

#[test]
fn an_apply_while_another_holds_the_repository_lock_is_refused() {
    let fx = basic();
    fx.run("run-ok", Outcome::Success, the_fix);
    let repo = fx.repo.canonicalize().unwrap();
    let refused = |args: &[&str]| {
        let lock = minicoder::delivery::lock::RepoLock::take(&fx.state(), &repo).unwrap();
        let before = tree_hash(&fx.repo, false);
        let out = fx.cmd(args);
        let (_, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("another apply or undo is running"),
            "{stderr}"
        );
        assert_eq!(tree_hash(&fx.repo, false), before);
        drop(lock);
    };
    // Once the lock is dropped the command goes through. (A child another
    // test forks in this process can hold a copy of the lock's descriptor
    // until it execs: a refusal is asked again, for a while.)
    let goes_through = |args: &[&str]| {
        for _ in 0..50 {
            let out = fx.cmd(args);
            let (_, stderr) = text(&out);
            if out.status.code() == Some(0) {
                return;
            }
            assert!(
                stderr.contains("another apply or undo is running"),
                "{args:?}: {stderr}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("{args:?} was refused for 5 s after the lock went");
    };
    refused(&["apply", "run-ok"]);
    goes_through(&["apply", "run-ok"]);
    refused(&["undo", "run-ok"]);
    goes_through(&["undo", "run-ok"]);
}
