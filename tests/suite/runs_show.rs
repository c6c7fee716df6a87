//! `minicoder runs`, `show`, `gc --older-than` and the usage errors of `run`,
//! through the real binary. Runs are written with the library's own
//! artifact writers (manifest, hash-chained events, state, patch, report,
//! receipt signed with the state directory's key).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use minicoder::protocol::{
    CheckReport, ModelId, Outcome, PhaseDurations, PlanItem, PlanStatus, RecoverySummary, RunEvent,
    RunReport, SourceState, TokenTotals, VerificationReason, VerificationSummary, exit_code_for,
};
use minicoder::state::StateDir;
use minicoder::trace::{ArtifactDir, Manifest, ManifestLimits, Receipt, ReceiptKey};

const PATCH: &str = "diff --git a/pagination.py b/pagination.py\n--- a/pagination.py\n+++ b/pagination.py\n@@ -1,2 +1,2 @@\n def page_count(total, size):\n-    return total // size\n+    return -(-total // size)\n+\t# \u{1b}[2J\u{202e}hostile\n";

struct Fixture {
    _tmp: tempfile::TempDir,
    state: StateDir,
    repo_a: PathBuf,
    repo_b: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path().join("state"));
        state.ensure().unwrap();
        let repo_a = tmp.path().join("alpha");
        let repo_b = tmp.path().join("beta");
        for repo in [&repo_a, &repo_b] {
            std::fs::create_dir_all(repo.join("sub")).unwrap();
            std::fs::write(repo.join("sub/f.txt"), "x\n").unwrap();
            support::git_commit_all(repo);
        }
        Self {
            _tmp: tmp,
            state,
            repo_a: repo_a.canonicalize().unwrap(),
            repo_b: repo_b.canonicalize().unwrap(),
        }
    }

    fn minicoder(&self, args: &[&str]) -> Output {
        self.minicoder_in(args, Path::new("/"))
    }

    fn minicoder_in(&self, args: &[&str], cwd: &Path) -> Output {
        let mut cmd = Command::new(support::bin());
        cmd.args(args)
            .current_dir(cwd)
            .env("MINICODER_STATE_DIR", self.state.root())
            .env("COLUMNS", "160");
        for var in [
            "GEMINI_API_KEY",
            "OPENAI_API_KEY",
            "FREELLMAPI_API_KEY",
            "FREELLMAPI_BASE_URL",
            "MINICODER_FREE_TIER_CONFIRMED",
        ] {
            cmd.env_remove(var);
        }
        cmd.output().unwrap()
    }

    fn dir(&self, id: &str) -> PathBuf {
        self.state.runs_dir().join(id)
    }

    /// Writes a run as the runtime does; `outcome: None` leaves it
    /// interrupted (no report, no receipt).
    fn write_run(
        &self,
        id: &str,
        repo: &Path,
        task: &str,
        ago: chrono::Duration,
        outcome: Option<Outcome>,
    ) {
        let created = (chrono::Utc::now() - ago).to_rfc3339();
        let artifacts = ArtifactDir::create(self.dir(id), repo).unwrap();
        let key = ReceiptKey::load_or_create(&self.state).unwrap().0;
        artifacts
            .write_manifest(
                &Manifest {
                    run_id: id.into(),
                    repo: repo.display().to_string(),
                    task: task.into(),
                    baseline_commit: "b".repeat(40),
                    baseline_fingerprint: "fp0".into(),
                    checks: Vec::new(),
                    checks_from_flags: false,
                    bootstrap: Vec::new(),
                    model_chain: Vec::new(),
                    limits: ManifestLimits {
                        max_turns: 30,
                        timeout_ms: 1_800_000,
                        command_timeout_ms: 60_000,
                        model_timeout_ms: 60_000,
                        max_tokens: 100_000,
                        max_cost_micros: None,
                        network: false,
                        approval: "never".into(),
                        allow_config_edits: false,
                        workspace: None,
                    },
                    left_out: Vec::new(),
                    instructions: Vec::new(),
                    project: None,
                    source_head: None,
                    hmac: String::new(),
                    created,
                    minicoder_version: "0".into(),
                },
                &key,
            )
            .unwrap();
        let plan = vec![PlanItem {
            id: "1".into(),
            content: "round the page count up".into(),
            status: PlanStatus::Done,
            notes: None,
        }];
        let check = CheckReport {
            name: "tests".into(),
            command: "python3 -m pytest -q".into(),
            exit_code: Some(0),
            passed: true,
            duration_ms: 812,
            failure: None,
            first_error: None,
            output_file: None,
        };
        let mut log = artifacts.create_event_log().unwrap();
        let mut events = vec![
            RunEvent::RunStarted {
                run_id: id.into(),
                repo: repo.display().to_string(),
                task: task.into(),
                baseline_commit: "b".repeat(40),
                fingerprint: "fp0".into(),
                artifact_dir: artifacts.path().display().to_string(),
                max_turns: 30,
                timeout_ms: 1_800_000,
                max_tokens: 0,
                max_cost_micros: None,
                checks: vec!["tests".into()],
                source: SourceState::default(),
            },
            RunEvent::PlanUpdated {
                items: plan.clone(),
            },
            RunEvent::VerificationStarted {
                attempt: 1,
                reason: VerificationReason::Baseline,
                checks: vec!["tests".into()],
            },
            RunEvent::VerificationCheck {
                attempt: 1,
                check: CheckReport {
                    exit_code: Some(1),
                    passed: false,
                    first_error: Some("E   assert 2 == 3".into()),
                    output_file: Some("outputs/baseline-1-tests.txt".into()),
                    ..check.clone()
                },
            },
            RunEvent::VerificationStarted {
                attempt: 2,
                reason: VerificationReason::Completion,
                checks: vec!["tests".into()],
            },
            RunEvent::VerificationCheck {
                attempt: 2,
                check: check.clone(),
            },
        ];
        if let Some(outcome) = outcome {
            events.push(RunEvent::RunFinished {
                outcome,
                reason: "verified: 1 check passed".into(),
                duration_ms: 48_200,
            });
        }
        for event in &events {
            log.append(event).unwrap();
        }
        log.sync().unwrap();
        artifacts
            .write_state(&serde_json::json!({ "run_id": id, "plan": plan }))
            .unwrap();
        let stored = artifacts.write_final_patch(PATCH).unwrap();
        let Some(outcome) = outcome else { return };
        let report = RunReport {
            run_id: id.into(),
            outcome,
            reason: "verified: 1 check passed".into(),
            exit_code: exit_code_for(outcome),
            repo: repo.display().to_string(),
            task: task.into(),
            model: ModelId {
                provider: "openai".into(),
                model: "mock-model".into(),
            },
            turns: 3,
            tokens: TokenTotals {
                input: 900,
                output: 80,
                ..Default::default()
            },
            tool_calls: 4,
            verification: VerificationSummary {
                passed: outcome == Outcome::Success,
                checks: vec![check],
            },
            recovery: RecoverySummary::default(),
            changed_files: vec!["pagination.py".into()],
            changed_total: None,
            artifact_dir: artifacts.path().display().to_string(),
            patch: artifacts.final_patch_path().display().to_string(),
            duration_ms: 48_200,
            durations: PhaseDurations::default(),
            source: SourceState {
                head: Some("c".repeat(40)),
                dirty: true,
                modified: 1,
                untracked: 1,
            },
            summary: Some("page_count rounds up now; the partial page counts".into()),
        };
        artifacts.write_report(&report).unwrap();
        let key = ReceiptKey::load_or_create(&self.state).unwrap().0;
        let receipt = Receipt::sign(
            &key,
            Receipt {
                run_id: id.into(),
                repo: report.repo.clone(),
                baseline_commit: "b".repeat(40),
                baseline_fingerprint: "fp0".into(),
                patch_sha256: stored.sha256,
                final_fingerprint: "fp1".into(),
                events_sha256: minicoder::trace::digest(artifacts.events_path()).unwrap(),
                ..Receipt::default()
            },
        )
        .unwrap();
        artifacts.write_receipt(&receipt).unwrap();
    }

    /// The three runs most tests use: an old applied success of alpha, a
    /// failure of beta, and an interrupted newest run of alpha.
    fn three_runs(&self) {
        self.write_run(
            "20261120-100000-aaaaaa",
            &self.repo_a,
            "fix \u{1b}]52;c;aGk=\u{7} pagination",
            chrono::Duration::days(10),
            Some(Outcome::Success),
        );
        let journal = self.dir("20261120-100000-aaaaaa").join("apply");
        std::fs::create_dir_all(&journal).unwrap();
        std::fs::write(journal.join("journal.json"), "{}").unwrap();
        self.write_run(
            "20261130-100000-bbbbbb",
            &self.repo_b,
            "make the tests pass",
            chrono::Duration::hours(3),
            Some(Outcome::Failure),
        );
        self.write_run(
            "20261201-100000-cccccc",
            &self.repo_a,
            "add a docstring",
            chrono::Duration::minutes(5),
            None,
        );
    }
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn runs_json_lists_every_run_newest_first_with_its_columns() {
    let f = Fixture::new();
    f.three_runs();
    let out = f.minicoder(&["runs", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [
            "20261201-100000-cccccc",
            "20261130-100000-bbbbbb",
            "20261120-100000-aaaaaa"
        ]
    );
    let [interrupted, failed, applied] = &rows[..] else {
        panic!("{rows:?}")
    };
    assert_eq!(interrupted["outcome"], "interrupted");
    assert_eq!(interrupted["verified"], serde_json::Value::Null);
    assert_eq!(interrupted["duration_ms"], serde_json::Value::Null);
    assert_eq!(failed["outcome"], "failure");
    assert_eq!(failed["verified"], false);
    assert_eq!(failed["applied"], false);
    assert_eq!(failed["repo"], f.repo_b.display().to_string());
    assert_eq!(applied["outcome"], "success");
    assert_eq!(applied["verified"], true);
    assert_eq!(applied["applied"], true);
    assert_eq!(
        applied["changed_files"],
        serde_json::json!(["pagination.py"])
    );
    assert_eq!(applied["duration_ms"], 48_200);
    // The task keeps its value in JSON; its control characters are escaped.
    assert_eq!(applied["task"], "fix \u{1b}]52;c;aGk=\u{7} pagination");
    assert!(!out.stdout.contains(&0x1b), "a raw ESC reached stdout");

    // --repo takes any path inside the repository.
    let out = f.minicoder(&[
        "runs",
        "--json",
        "--repo",
        f.repo_a.join("sub").to_str().unwrap(),
    ]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["20261201-100000-cccccc", "20261120-100000-aaaaaa"]);
}

#[test]
fn the_runs_table_fits_the_width_and_escapes_run_text() {
    let f = Fixture::new();
    f.three_runs();
    let out = f.minicoder(&["runs"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[0].starts_with("ID") && lines[0].contains("APPLIED"),
        "{text}"
    );
    assert!(lines.iter().all(|l| l.chars().count() <= 160), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(
        text.contains("fix \\x1b]52;c;aGk=\\x07 pagination"),
        "{text}"
    );
    let old = lines.iter().find(|l| l.contains("aaaaaa")).unwrap();
    for cell in ["10d", "alpha", "success", "yes", "48.2s"] {
        assert!(old.contains(cell), "{cell} not in {old}");
    }
    let interrupted = lines.iter().find(|l| l.contains("cccccc")).unwrap();
    assert!(interrupted.contains("interrupted"), "{interrupted}");
}

#[test]
fn show_prints_report_task_plan_summary_matrix_and_patch_stat() {
    let f = Fixture::new();
    f.three_runs();
    // A unique prefix is enough.
    let out = f.minicoder(&["show", "20261130"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for part in [
        "run 20261130-100000-bbbbbb",
        "outcome:    failure — verified: 1 check passed",
        "openai:mock-model; 3 turns, 4 tool calls",
        &format!("HEAD {}", "c".repeat(40)),
        "baseline includes 1 modified and 1 untracked file not in HEAD",
        "make the tests pass",
        "[x] round the page count up",
        "page_count rounds up now; the partial page counts",
        "verification (baseline, before any change):\n  FAIL   tests  exit 1  812ms  `python3 -m pytest -q`: E   assert 2 == 3\n         output: outputs/baseline-1-tests.txt\nverification (completion):\n  pass   tests  exit 0  812ms  `python3 -m pytest -q`\n",
        "patch: 1 file, +2 -1",
        "pagination.py  +2 -1",
        "next: minicoder show 20261130-100000-bbbbbb",
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
    assert!(
        !text.contains("+    return -(-total"),
        "no --diff, no patch"
    );

    let out = f.minicoder(&["show", "20261130", "--diff", "--events"]);
    let text = stdout(&out);
    assert!(text.contains("+    return -(-total // size)"), "{text}");
    // The patch's text is escaped, its tabs kept.
    assert!(text.contains("+\t# \\x1b[2J\\u{202e}hostile"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text:?}"
    );
    let events: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.starts_with("{\"seq\""))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 7, "{text}");
    assert_eq!(events[0]["type"], "run.started");
    assert_eq!(events[6]["type"], "run.finished");

    let out = f.minicoder(&["show", "20261130-100000-bbbbbb", "--json"]);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["run"]["outcome"], "failure");
    assert_eq!(
        value["report"]["summary"],
        "page_count rounds up now; the partial page counts"
    );
    assert_eq!(value["report"]["source"]["modified"], 1);
    assert_eq!(value["plan"][0]["content"], "round the page count up");
    assert_eq!(value["patch_stat"][0]["added"], 2);

    // `last` is the newest run of the repository around the directory.
    let out = f.minicoder_in(&["show", "last"], &f.repo_a.join("sub"));
    assert!(
        stdout(&out).contains("run 20261201-100000-cccccc"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn an_unfinished_run_is_shown_as_interrupted_with_what_is_known() {
    let f = Fixture::new();
    f.three_runs();
    let out = f.minicoder(&["show", "20261201-100000-cccccc"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for part in [
        "outcome:    interrupted",
        "minicoder resume 20261201-100000-cccccc",
        "add a docstring",
        "[x] round the page count up",
        // The matrix comes from the events when there is no report.
        "pass   tests  exit 0",
        "pagination.py  +2 -1",
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
    let out = f.minicoder(&["show", "20261201-100000-cccccc", "--verify"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(text.contains("[ OK ] events chain"), "{text}");
    assert!(
        text.contains("[FAIL] receipt: none: the run has not finished"),
        "{text}"
    );
}

#[test]
fn show_verify_passes_then_names_an_edited_event_line_and_a_changed_patch() {
    let f = Fixture::new();
    f.three_runs();
    let id = "20261120-100000-aaaaaa";
    let out = f.minicoder(&["show", id, "--verify"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for what in ["events chain", "receipt", "patch hash", "events digest"] {
        assert!(text.contains(&format!("[ OK ] {what}")), "{what}: {text}");
    }

    // One event line edited: the next line's `prev` no longer matches.
    let events = f.dir(id).join("events.jsonl");
    let original = std::fs::read_to_string(&events).unwrap();
    let edited = original.replacen("round the page count up", "round the page count down", 1);
    assert_ne!(edited, original);
    std::fs::write(&events, &edited).unwrap();
    let out = f.minicoder(&["show", id, "--verify"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("[FAIL] events chain"), "{text}");
    assert!(
        text.contains("line 3"),
        "names the line after the edit: {text}"
    );
    assert!(text.contains("[FAIL] events digest"), "{text}");
    assert!(text.contains("[ OK ] patch hash"), "{text}");
    std::fs::write(&events, &original).unwrap();

    // The patch changed after the receipt was signed.
    let patch = f.dir(id).join("final.patch");
    std::fs::write(
        &patch,
        PATCH.replace("-(-total // size)", "total // size + 1"),
    )
    .unwrap();
    let out = f.minicoder(&["show", id, "--verify", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let failed: Vec<&str> = value["verify"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["what"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["patch hash"], "{value}");
    assert!(stderr(&out).contains("does not verify"), "{}", stderr(&out));

    // A receipt signed under another key does not verify.
    std::fs::write(&patch, PATCH).unwrap();
    let key = ReceiptKey::path_in(&f.state);
    std::fs::remove_file(&key).unwrap();
    let out = f.minicoder(&["show", id, "--verify"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("[FAIL] receipt"), "{}", stdout(&out));
}

#[test]
fn show_of_an_unknown_run_is_a_usage_error() {
    let f = Fixture::new();
    f.three_runs();
    let out = f.minicoder(&["show", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no run matches \"nope\""),
        "{}",
        stderr(&out)
    );
    let out = f.minicoder(&["show", "2026"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("matches 3 runs"), "{}", stderr(&out));
}

#[tokio::test]
async fn gc_older_than_removes_exactly_the_old_ended_runs() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let f = Fixture::new();
    f.three_runs();
    // Two more old runs: one interrupted, one still going (its workspace's
    // owner is this live test process).
    f.write_run(
        "20261101-100000-dddddd",
        &f.repo_b,
        "t",
        chrono::Duration::days(30),
        None,
    );
    f.write_run(
        "20261102-100000-eeeeee",
        &f.repo_b,
        "t",
        chrono::Duration::days(29),
        None,
    );
    std::fs::create_dir_all(f.state.workspace_dir("20261102-100000-eeeeee")).unwrap();
    minicoder::owner::write_owner_file(
        &minicoder::sandbox::gc::workspace_owner_file(&f.state, "20261102-100000-eeeeee"),
        &minicoder::owner::ProcessIdentity::current(),
    )
    .unwrap();
    for id in [
        "20261120-100000-aaaaaa",
        "20261130-100000-bbbbbb",
        "20261101-100000-dddddd",
    ] {
        std::fs::create_dir_all(f.state.checkpoint_store_dir(id).join("objects")).unwrap();
    }

    let out = f.minicoder(&["gc", "--older-than", "7d"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    let left: Vec<String> = std::fs::read_dir(f.state.runs_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(
        left,
        [
            "20261102-100000-eeeeee",
            "20261130-100000-bbbbbb",
            "20261201-100000-cccccc"
        ],
        "{text}"
    );
    assert!(
        text.contains("removed run 20261120-100000-aaaaaa"),
        "{text}"
    );
    assert!(
        text.contains("removed run 20261101-100000-dddddd"),
        "{text}"
    );
    assert!(
        !f.state
            .checkpoint_store_dir("20261120-100000-aaaaaa")
            .exists()
    );
    assert!(
        !f.state
            .checkpoint_store_dir("20261101-100000-dddddd")
            .exists()
    );
    // A recent failure keeps its checkpoint store: resume can use it.
    assert!(
        f.state
            .checkpoint_store_dir("20261130-100000-bbbbbb")
            .exists()
    );
    assert!(f.state.workspace_dir("20261102-100000-eeeeee").exists());

    let out = f.minicoder(&["gc", "--older-than", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("is not a duration"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test]
async fn gc_removes_checkpoint_stores_no_run_can_use() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let f = Fixture::new();
    f.three_runs();
    let success = "20261120-100000-aaaaaa";
    let failure = "20261130-100000-bbbbbb";
    let interrupted = "20261201-100000-cccccc";
    let orphan = "20260101-000000-ffffff";
    for id in [success, failure, interrupted, orphan] {
        std::fs::create_dir_all(f.state.checkpoint_store_dir(id).join("objects")).unwrap();
        for cache in f.state.stat_cache_paths(id) {
            std::fs::write(cache, "cache").unwrap();
        }
    }
    let out = f.minicoder(&["gc"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    // A store goes with its run's artifacts, whatever the outcome.
    assert!(f.state.checkpoint_store_dir(success).exists(), "{text}");
    assert!(!f.state.checkpoint_store_dir(orphan).exists(), "{text}");
    assert!(f.state.checkpoint_store_dir(failure).exists(), "{text}");
    assert!(f.state.checkpoint_store_dir(interrupted).exists(), "{text}");
    for id in [success, failure, interrupted, orphan] {
        for cache in f.state.stat_cache_paths(id) {
            assert!(!cache.exists(), "{} is a cache: {text}", cache.display());
        }
    }
    assert!(text.contains(&format!("{orphan}.git")), "{text}");
    assert!(!text.contains(&format!("{success}.git")), "{text}");
    assert!(!text.contains("nothing to remove"), "{text}");
}

/// Every usage error of `run` exits 2, with one JSON object saying why.
#[test]
fn usage_errors_exit_2() {
    let f = Fixture::new();
    let repo = f.repo_a.to_str().unwrap().to_string();
    let inside = f.repo_a.join("artifacts");
    let inside = inside.to_str().unwrap();
    let not_repo = f.state.root().to_str().unwrap().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "run",
                &repo,
                "fix it",
                "--non-interactive",
                "--model",
                "bogus",
            ],
            "unknown provider \"bogus\"",
        ),
        (
            vec![
                "run",
                &repo,
                "fix it",
                "--non-interactive",
                "--check",
                "bad name!",
                "true",
            ],
            "bad name!",
        ),
        (
            vec![
                "run",
                &repo,
                "fix it",
                "--non-interactive",
                "--artifact-dir",
                inside,
            ],
            "is inside the repository",
        ),
        (
            vec!["run", &not_repo, "fix it", "--non-interactive"],
            "is not in a Git repository",
        ),
        (
            vec!["run", &repo, "  ", "--non-interactive"],
            "the task is empty",
        ),
        (
            vec!["run", "/nonexistent/repo", "fix it", "--non-interactive"],
            "/nonexistent/repo does not exist",
        ),
        (
            vec![
                "run",
                &repo,
                "fix it",
                "--non-interactive",
                "--theme",
                "light",
            ],
            "--theme styles the full-screen session",
        ),
        (
            vec![
                "run",
                &repo,
                "fix it",
                "--non-interactive",
                "--approval",
                "each",
            ],
            "--approval each needs",
        ),
        (vec!["run", &repo, "fix it", "--network", "maybe"], "maybe"),
    ];
    for (args, says) in &cases {
        let out = f.minicoder(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {says:?} not in {err}");
        if args.contains(&"--non-interactive") {
            let value: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stdout(&out)));
            assert_eq!(value["exit_code"], 2, "{args:?}");
            assert_eq!(value["run_id"], serde_json::Value::Null);
        }
    }
    // Without --non-interactive, --events says what it needs.
    let out = f.minicoder(&["run", &repo, "fix it", "--events"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--events streams JSON lines"),
        "{}",
        stderr(&out)
    );
    // A path inside a repository is the repository: the run goes on to the
    // next check (here the missing provider, a failure, not a usage error).
    let sub = f.repo_a.join("sub");
    let out = f.minicoder(&["run", sub.to_str().unwrap(), "fix it", "--non-interactive"]);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{value}");
    assert_eq!(value["repo"], repo);
    assert!(
        value["reason"]
            .as_str()
            .unwrap()
            .contains("MINICODER_FREE_TIER_CONFIRMED")
            || value["reason"].as_str().unwrap().contains("provider"),
        "{value}"
    );
}

#[test]
fn doctor_fails_when_no_provider_is_usable_and_reports_the_state_size() {
    let f = Fixture::new();
    f.three_runs();
    let out = f.minicoder(&["doctor"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("[FAIL] providers: no provider is usable"),
        "{text}"
    );
    assert!(text.contains("MiB (runs "), "{text}");
    let out = Command::new(support::bin())
        .arg("doctor")
        .env("MINICODER_STATE_DIR", f.state.root())
        .env("OPENAI_API_KEY", "sk-test-0000000000000000")
        .env("OPENAI_MODEL", "gpt-test")
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains("[ OK ] providers: usable: openai"),
        "{}",
        stdout(&out)
    );
}

/// A real run (mock model, real sandbox and verifier) on a source with a
/// modified and an untracked file: the report names HEAD and the dirty
/// tree, keeps the agent's summary, stderr says both and the next step,
/// the successful run's checkpoint store is gone, and `runs`/`show` find it.
#[tokio::test]
async fn a_real_run_records_its_source_summary_and_next_step() {
    use serde_json::json;
    use support::mock_openai::{MockOpenAi, MockResponse};
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let f = Fixture::new();
    let source = tempfile::tempdir().unwrap();
    minicoder::cli::demo::write_fixture(source.path()).unwrap();
    let head = git2::Repository::open(source.path())
        .unwrap()
        .head()
        .unwrap()
        .peel_to_commit()
        .unwrap()
        .id()
        .to_string();
    std::fs::write(source.path().join("README.md"), "changed, not committed\n").unwrap();
    std::fs::write(source.path().join("notes.txt"), "untracked\n").unwrap();
    let fix = "--- a/pagination.py\n+++ b/pagination.py\n@@ -5,7 +5,7 @@\n     \"\"\"Number of pages needed to show `total_items`, `page_size` per page.\"\"\"\n     if page_size <= 0:\n         raise ValueError(\"page_size must be positive\")\n-    return total_items // page_size\n+    return -(-total_items // page_size)\n \n \n def page_slice(items: list, page: int, page_size: int) -> list:\n";
    let plan = |s: &str| json!({"items": [{"id": "1", "content": "fix it", "status": s}]});
    let mock = MockOpenAi::start().await;
    mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan("in_progress")),
        ("edit_file", json!({"path": "pagination.py", "patch": fix})),
    ]));
    mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan("done")),
        (
            "request_completion",
            json!({"summary": "page_count rounds up"}),
        ),
    ]));
    let out = tokio::process::Command::new(support::bin())
        .arg("run")
        .arg(source.path())
        .args([
            "Fix the pagination bug",
            "--non-interactive",
            "--model",
            "openai",
        ])
        .env("MINICODER_STATE_DIR", f.state.root())
        .env("OPENAI_BASE_URL", mock.base_url())
        .env("OPENAI_API_KEY", "sk-test-9f8e7d6c5b4a39281706f5e4d3c2b1a0")
        .env("OPENAI_MODEL", "mock-model")
        .output()
        .await
        .unwrap();
    let err = stderr(&out);
    let result: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{err}", stdout(&out)));
    assert_eq!(result["outcome"], "success", "{result:#}\n{err}");
    let id = result["run_id"].as_str().unwrap().to_string();
    assert_eq!(result["source"]["head"], head.as_str());
    assert_eq!(result["source"]["dirty"], true);
    assert_eq!(result["source"]["modified"], 1);
    assert_eq!(result["source"]["untracked"], 1);
    assert_eq!(result["summary"], "page_count rounds up");
    assert!(
        err.contains("note: baseline includes 1 modified and 1 untracked file not in HEAD"),
        "{err}"
    );
    assert!(
        err.trim_end()
            .ends_with(&format!("next: minicoder apply {id}")),
        "the summary ends with the next step: {err}"
    );
    // Retention: the store stays for a follow-up and `apply --merge`,
    // compacted; the caches go, and so does the workspace.
    let store = f.state.checkpoint_store_dir(&id);
    assert!(store.join("minicoder-resume.json").exists());
    let pruned = std::fs::read_dir(store.join("refs/minicoder/pruned"))
        .map(|d| d.count())
        .unwrap_or(0);
    let log = std::fs::read_to_string(f.state.runs_dir().join(&id).join("events.jsonl")).unwrap();
    let checkpoints = log.matches("\"checkpoint.created\"").count();
    println!("{checkpoints} checkpoints, {pruned} pruned at the end");
    for cache in f.state.stat_cache_paths(&id) {
        assert!(!cache.exists(), "{}", cache.display());
    }
    assert!(!f.state.workspace_dir(&id).exists());

    let out = f.minicoder(&["runs", "--json"]);
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], id.as_str());
    assert_eq!(rows[0]["outcome"], "success");
    assert_eq!(rows[0]["verified"], true);
    assert_eq!(rows[0]["changed_files"], json!(["pagination.py"]));
    let out = f.minicoder(&["show", &id, "--verify"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    for part in [
        "page_count rounds up",
        "[x] fix it",
        "pagination.py  +1 -1",
        "[ OK ] receipt",
        "[ OK ] patch hash",
        &format!("next: minicoder apply {id}"),
    ] {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
}
