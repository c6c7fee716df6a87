//! Preparation on real-sized repositories, beside `git clone --local` of the
//! same repository in the same run.
//!
//! Builds a ~5,000-file and a ~50,000-file Git repository from real source
//! text (the crate sources in cargo's registry, repeated as needed), then for
//! each: `git clone --local` (median of 3); a cold run of the real binary
//! (fresh state directory), a warm one started as soon as the cold one
//! exited (its copy still being prepared) and a warm one started once the
//! copy is ready (one file changed before each), each with a scripted model
//! that lists the tree and then asks for completion: time from spawn to the
//! first tool result (the second model request, which carries it), to the
//! first model request (which goes out while the workspace is made), to the
//! workspace being ready (`run.started`: copied, checkpointed,
//! sandbox started), the phases from the event log, and end of run
//! (`run.finished`) to process exit. Prints the ratios to the clone. Then a checkpoint when nothing changed and one when one file
//! did, with the workspace watched as runs do, beside the full scan.
//!
//! Run: `cargo bench --bench prepare` (`PREPARE_SIZES=5000` for the small one
//! only, `PREPARE_ONLY=checkpoint` for the checkpoint figures only,
//! `PREPARE_ROUNDS=5` for five rounds of clone, cold and warm and the range
//! of their ratios).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::mock_openai::{MockOpenAi, MockResponse};

use support::source_tree::{build_repo, registry_sources};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn clone_time(repo: &Path) -> Duration {
    let samples = (0..3)
        .map(|_| {
            let into = tempfile::tempdir_in(repo.parent().unwrap()).unwrap();
            let t = Instant::now();
            let ok = Command::new("git")
                .args(["clone", "-q", "--local"])
                .arg(repo)
                .arg(into.path().join("c"))
                .status()
                .unwrap()
                .success();
            assert!(ok);
            t.elapsed()
        })
        .collect();
    median(samples)
}

struct Timed {
    first_request: Duration,
    /// From the spawn to the request that carries the first tool result.
    first_result: Duration,
    total: Duration,
    finished_to_exit: Option<Duration>,
    phases: Vec<(String, i64)>,
    /// `durations.prepare` of the report (ms by phase).
    prepare: Value,
}

impl Timed {
    /// From the spawn to `run.started`: the workspace copied and
    /// checkpointed, the sandbox started (the first model request goes out
    /// before, while they are made).
    fn ready(&self) -> Duration {
        self.phases
            .iter()
            .find(|(k, _)| k == "run.started")
            .map_or(self.total, |(_, ms)| {
                Duration::from_millis(u64::try_from(*ms).unwrap_or(0))
            })
    }
}

fn ts_ms(event: &Value) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(event["ts"].as_str()?)
        .ok()
        .map(|t| t.timestamp_millis())
}

async fn timed_run(repo: &Path, state: &Path, label: &str) -> Timed {
    let mock = MockOpenAi::start().await;
    // The first answer needs the workspace: its result goes back with the
    // second request (the first tool result).
    mock.push(MockResponse::tool_calls(&[(
        "list_tree",
        json!({"path": ".", "max_depth": 1}),
    )]));
    for _ in 0..4 {
        mock.push(MockResponse::tool_calls(&[
            (
                "update_plan",
                json!({"items": [{"id": "1", "content": "look", "status": "done"}]}),
            ),
            (
                "request_completion",
                json!({"summary": "nothing to change"}),
            ),
        ]));
    }
    let artifacts = state.join(format!("artifacts-{label}"));
    let started_wall = chrono::Utc::now().timestamp_millis();
    let t = Instant::now();
    let mut child = support::source_tree::scripted_run(
        repo,
        "Say whether anything needs doing",
        state,
        &artifacts,
        &mock,
    )
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .kill_on_drop(true)
    .spawn()
    .expect("spawn minicoder");
    let mut first_request = None;
    let mut first_result = None;
    let status = loop {
        if first_request.is_none() && mock.request_count() > 0 {
            first_request = Some(t.elapsed());
        }
        if first_result.is_none() && mock.request_count() > 1 {
            first_result = Some(t.elapsed());
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    let total = t.elapsed();
    let exited_wall = chrono::Utc::now().timestamp_millis();
    if !status.success() {
        use tokio::io::AsyncReadExt;
        let mut err = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            let _ = pipe.read_to_string(&mut err).await;
        }
        println!(
            "[{label}] minicoder exited with {status}: {}",
            err.trim_end()
        );
    }
    let events: Vec<Value> = std::fs::read_to_string(artifacts.join("events.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let at = |kind: &str| {
        events
            .iter()
            .find(|e| e["type"] == kind)
            .and_then(ts_ms)
            .map(|ms| ms - started_wall)
    };
    let phases = ["run.started", "model.request", "run.finished"]
        .iter()
        .filter_map(|k| at(k).map(|ms| (k.to_string(), ms)))
        .collect();
    let finished_to_exit = events
        .iter()
        .find(|e| e["type"] == "run.finished")
        .and_then(ts_ms)
        .map(|ms| Duration::from_millis(u64::try_from(exited_wall - ms).unwrap_or(0)));
    let prepare = std::fs::read(artifacts.join("report.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .map(|r| r["durations"]["prepare"].clone())
        .unwrap_or(Value::Null);
    Timed {
        first_request: first_request.unwrap_or(total),
        first_result: first_result.unwrap_or(total),
        total,
        finished_to_exit,
        phases,
        prepare,
    }
}

/// Checkpoint times on a copy of the repository's files (median of 5,
/// caches warm), with the workspace watched as runs do and without.
struct CheckpointTimes {
    /// Watched, nothing changed since the last checkpoint.
    no_change: Duration,
    /// Watched, one file changed.
    one_change: Duration,
    /// Not watched (a full scan), nothing changed.
    full_scan: Duration,
}

fn no_change_checkpoint(repo: &Path, work: &Path) -> CheckpointTimes {
    use minicoder::workspace::{CheckpointStore, ExcludeSet};
    let ws = work.join("nochange-ws");
    let ok = Command::new("cp")
        .arg("-a")
        .arg(repo)
        .arg(&ws)
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let _ = std::fs::remove_dir_all(ws.join(".git"));
    let measure = |store: &mut CheckpointStore, change: &mut dyn FnMut()| {
        store.create("baseline").unwrap();
        // Past the racy window, so the stat cache is trusted as in a real run.
        std::thread::sleep(Duration::from_millis(2100));
        store.create("warm").unwrap();
        let samples = (0..5)
            .map(|_| {
                change();
                let t = Instant::now();
                store.create("checkpoint").unwrap();
                t.elapsed()
            })
            .collect();
        median(samples)
    };
    let mut full =
        CheckpointStore::open(&work.join("nochange-full.git"), &ws, ExcludeSet::default()).unwrap();
    let full_scan = measure(&mut full, &mut || {});
    drop(full);
    let mut watched = CheckpointStore::open(&work.join("nochange.git"), &ws, ExcludeSet::default())
        .unwrap()
        .watch();
    let no_change = measure(&mut watched, &mut || {});
    let changed = ws.join("changed-between-checkpoints.txt");
    let mut n = 0;
    let one_change = measure(&mut watched, &mut || {
        n += 1;
        std::fs::write(&changed, format!("{n}\n")).unwrap();
    });
    let _ = std::fs::remove_dir_all(&ws);
    CheckpointTimes {
        no_change,
        one_change,
        full_scan,
    }
}

fn print_checkpoint(times: &CheckpointTimes) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "no-change checkpoint: {:.2} ms watched, {:.1} ms scanning whole ({:.0}× faster); one file changed: {:.2} ms watched (medians of 5)",
        ms(times.no_change),
        ms(times.full_scan),
        ms(times.full_scan) / ms(times.no_change).max(1e-3),
        ms(times.one_change),
    );
}

/// Waits until a prepared copy is ready in the state directory.
fn wait_prepared(state: &Path, patience: Duration) -> bool {
    let until = Instant::now() + patience;
    while Instant::now() < until {
        let ready = std::fs::read_dir(state.join("prepared"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("ready/meta").is_file());
        if ready {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Appends a line to a tracked file (a different one each round), as a
/// person changes a file between two tasks.
fn change_one_file(repo: &Path, round: usize) {
    let listed = String::from_utf8(
        Command::new("git")
            .args(["ls-files"])
            .current_dir(repo)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let path = listed.lines().nth(round - 1).unwrap().to_string();
    let changed = repo.join(path);
    let mut text = std::fs::read(&changed).unwrap();
    text.extend_from_slice(b"\n// changed between runs\n");
    std::fs::write(&changed, text).unwrap();
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

#[tokio::main]
async fn main() {
    let sizes: Vec<usize> = std::env::var("PREPARE_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![5_000, 50_000]);
    // `PREPARE_ONLY=checkpoint`: the checkpoint figures only.
    let only_checkpoint = std::env::var("PREPARE_ONLY").is_ok_and(|v| v == "checkpoint");
    // `PREPARE_ROUNDS=N`: clone, cold and warm N times over (the ratios'
    // range on a machine whose disk is shared and noisy).
    let rounds: usize = std::env::var("PREPARE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1);
    let work = tempfile::tempdir().unwrap();
    let sources = registry_sources();
    println!("{} source files in cargo's registry", sources.len());
    for size in sizes {
        let repo = work.path().join(format!("repo-{size}"));
        let (files, bytes) = build_repo(&repo, &sources, size);
        println!(
            "\nrepository: {files} files, {:.0} MB",
            bytes as f64 / 1_048_576.0
        );
        if only_checkpoint {
            print_checkpoint(&no_change_checkpoint(&repo, work.path()));
            continue;
        }
        let mut ratios = Vec::new();
        for round in 1..=rounds {
            if rounds > 1 {
                println!("round {round} of {rounds}");
            }
            let clone = clone_time(&repo);
            println!("git clone --local: {} (median of 3)", secs(clone));
            let state = {
                use std::os::unix::fs::PermissionsExt;
                tempfile::Builder::new()
                    .permissions(std::fs::Permissions::from_mode(0o700))
                    .tempdir_in(work.path())
                    .unwrap()
            };
            let cold = timed_run(&repo, state.path(), "cold").await;
            // Started as soon as the cold run exited, as a script or a
            // batch would: the copy for it is still being prepared.
            change_one_file(&repo, round);
            let at_once = timed_run(&repo, state.path(), "warm-at-once").await;
            // The copy the next run takes is made in the background once a
            // run has ended; a person takes longer than that to start the
            // next task.
            let waited = Instant::now();
            let ready = wait_prepared(state.path(), Duration::from_secs(300));
            println!(
                "copy prepared for the next run: {}",
                if ready {
                    format!("ready {} after the cold run exited", secs(waited.elapsed()))
                } else {
                    "none (the warm run copies afresh)".to_string()
                }
            );
            change_one_file(&repo, round);
            let warm = timed_run(&repo, state.path(), "warm").await;
            for (name, run) in [("cold", &cold), ("warm-at-once", &at_once), ("warm", &warm)] {
                println!(
                    "minicoder {name}: first tool result {} ({:.2} × clone, {:.2} × cold), first model request {} ({:.2} × clone), workspace ready (run.started) {} ({:.2} × clone), whole run {}, run.finished → exit {}; events after spawn (ms): {:?}; prepare phases (ms): {}",
                    secs(run.first_result),
                    run.first_result.as_secs_f64() / clone.as_secs_f64(),
                    run.first_result.as_secs_f64() / cold.first_result.as_secs_f64(),
                    secs(run.first_request),
                    run.first_request.as_secs_f64() / clone.as_secs_f64(),
                    secs(run.ready()),
                    run.ready().as_secs_f64() / clone.as_secs_f64(),
                    secs(run.total),
                    run.finished_to_exit
                        .map_or("?".to_string(), |d| format!("{} ms", d.as_millis())),
                    run.phases,
                    run.prepare
                );
            }
            let ratio = |d: Duration| d.as_secs_f64() / clone.as_secs_f64();
            ratios.push([
                ratio(cold.first_request),
                ratio(warm.first_request),
                ratio(cold.ready()),
                ratio(warm.ready()),
            ]);
        }
        if rounds > 1 {
            let range = |pick: usize| {
                let mut v: Vec<f64> = ratios.iter().map(|r| r[pick]).collect();
                v.sort_by(f64::total_cmp);
                format!(
                    "{:.2}–{:.2} × (median {:.2})",
                    v[0],
                    v[v.len() - 1],
                    v[v.len() / 2]
                )
            };
            println!(
                "over {rounds} rounds, each against its own clone: first model request cold {}, warm {}; workspace ready cold {}, warm {}",
                range(0),
                range(1),
                range(2),
                range(3)
            );
        }
        print_checkpoint(&no_change_checkpoint(&repo, work.path()));
        println!(
            "budgets (first model request): cold ≤ 1.0 × clone, warm ≤ 0.25 × clone, no-change checkpoint ≤ 20 ms at 50,000 files, run.finished → exit ≤ 1 s"
        );
    }
}
