//! The host survives whatever a command writes into the workspace: the real
//! binary, the real Docker sandbox and a scripted model. Each run records
//! the peak resident memory of the minicoder process (VmHWM of
//! /proc/<pid>/status, read every few milliseconds until it exits; it only
//! grows) and the lowest free space of the state filesystem seen while it
//! ran, and prints both.

use crate::support;

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_openai::MockResponse;
use support::run_harness::{API_KEY, RunHarness};

/// Peak RSS a run may reach, whatever the workspace holds.
const RSS_BUDGET_KB: u64 = 400 * 1024;
/// The default free-space floor.
const FLOOR: u64 = 1 << 30;

const FIX: &str = support::FIX_PAGINATION;

struct Measured {
    result: Value,
    stderr: String,
    max_rss_kb: u64,
    min_free: u64,
}

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "try the command", "status": statuses[0]},
        {"id": "2", "content": "fix it", "status": statuses[1]},
    ]})
}

fn shell(command: &str) -> MockResponse {
    MockResponse::tool_calls(&[("run_shell", json!({ "command": command }))])
}

fn plan_and_shell(command: &str) -> MockResponse {
    MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        ("run_shell", json!({ "command": command })),
    ])
}

/// The hostile command, then one that must still work, then the fix.
fn script(hostile: &str, next: &str) -> Vec<MockResponse> {
    vec![
        plan_and_shell(hostile),
        shell(next),
        MockResponse::tool_calls(&[("edit_file", json!({"path": "pagination.py", "patch": FIX}))]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            (
                "request_completion",
                json!({"summary": "page_count rounds up"}),
            ),
        ]),
    ]
}

fn fixture() -> tempfile::TempDir {
    let source = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
    source
}

fn free_bytes(path: &Path) -> u64 {
    let st = rustix::fs::statvfs(path).expect("statvfs");
    st.f_bavail * st.f_frsize
}

/// Runs the binary to its end, measuring it.
async fn run_measured(h: &RunHarness, name: &str) -> Measured {
    let mut cmd = std::process::Command::new(support::bin());
    cmd.arg("run")
        .arg(h.source.path())
        .arg("Fix the pagination bug")
        .args(["--non-interactive", "--model", "openai", "--artifact-dir"])
        .arg(&h.artifacts)
        .env("MINICODER_STATE_DIR", h.state.path())
        .env("OPENAI_BASE_URL", h.mock.base_url())
        .env("OPENAI_API_KEY", API_KEY)
        .env("OPENAI_MODEL", "mock-model")
        .env("MINICODER_RETRY_BASE_MS", "10")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let state = h.state.path().to_path_buf();
    let min_free = Arc::new(AtomicU64::new(u64::MAX));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (min_free, done, state) = (min_free.clone(), done.clone(), state.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                min_free.fetch_min(free_bytes(&state), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let (stdout, stderr, max_rss_kb) = tokio::task::spawn_blocking(move || {
        let mut child = cmd.spawn().expect("spawn minicoder");
        let pid = child.id();
        let mut out = child.stdout.take().expect("stdout");
        let mut err = child.stderr.take().expect("stderr");
        let reader = std::thread::spawn(move || {
            let mut s = Vec::new();
            out.read_to_end(&mut s).expect("read stdout");
            s
        });
        // (`wait4`'s ru_maxrss would also count this test process, whose
        // fork the child was before it ran minicoder.)
        let hwm = std::thread::spawn(move || {
            let mut peak = 0;
            while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                let Some(kb) = status
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                else {
                    break; // a zombie: it has exited
                };
                peak = peak.max(kb);
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        });
        let mut e = Vec::new();
        err.read_to_end(&mut e).expect("read stderr");
        let stdout = reader.join().expect("stdout reader");
        let hwm = hwm.join().expect("VmHWM reader");
        child.wait().expect("reap");
        (stdout, e, hwm)
    })
    .await
    .expect("the run");
    done.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    let result: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}):\n{stdout}\n{stderr}"));
    let m = Measured {
        result,
        stderr,
        max_rss_kb,
        min_free: min_free.load(Ordering::Relaxed),
    };
    println!(
        "{name}: peak RSS {} MB (VmHWM), lowest free space of the state filesystem {} MB, outcome {}: {}",
        m.max_rss_kb / 1024,
        m.min_free >> 20,
        m.result["outcome"],
        m.result["reason"]
    );
    m
}

fn assert_host_safe(m: &Measured) {
    assert!(
        m.max_rss_kb < RSS_BUDGET_KB,
        "peak RSS {} KB over the budget of {RSS_BUDGET_KB} KB",
        m.max_rss_kb
    );
    assert!(
        m.min_free > FLOOR,
        "free space fell to {} bytes, under the floor",
        m.min_free
    );
}

/// The results of the `run_shell` calls, in order.
fn tool_results(h: &RunHarness) -> Vec<String> {
    let all = h.tool_results();
    let shells: Vec<String> = all
        .iter()
        .filter(|r| r.contains("; duration "))
        .cloned()
        .collect();
    assert!(shells.len() >= 2, "tool results: {all:#?}");
    shells
}

#[tokio::test]
async fn a_20_gb_sparse_file_is_not_read_and_the_run_goes_on() {
    let Some(h) = RunHarness::new(fixture()).await else {
        return;
    };
    h.mock.push_all(script(
        "truncate -s 20G big && ls -l big",
        "rm big && echo next-ok",
    ));
    let m = run_measured(&h, "truncate -s 20G").await;
    assert_host_safe(&m);
    let results = tool_results(&h);
    assert!(
        results[0].contains("big is 20 GB, over the per-file limit of 100 MB"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("next-ok"), "{}", results[1]);
    assert_eq!(m.result["outcome"], "success", "{}", m.stderr);
    h.assert_guarantees();
}

#[tokio::test]
async fn fallocate_past_the_size_limit_is_stopped() {
    let Some(h) = RunHarness::new(fixture()).await else {
        return;
    };
    // Above the 2 GB default size limit; smaller than 20 GB so that a
    // shared disk holds it.
    h.mock.push_all(script(
        "fallocate -l 6G big && sleep 50; echo not-reached",
        "rm big && echo next-ok",
    ));
    let m = run_measured(&h, "fallocate -l 6G").await;
    assert_host_safe(&m);
    let results = tool_results(&h);
    // The walk may meet the file while fallocate is still giving it its
    // blocks: any size over the limit stops it.
    assert!(
        results[0].contains("stopped: the workspace grew to")
            && results[0].contains("over its size limit of 2.0 GB"),
        "{}",
        results[0]
    );
    assert!(!results[0].contains("not-reached"), "{}", results[0]);
    assert!(results[1].contains("next-ok"), "{}", results[1]);
    assert_eq!(m.result["outcome"], "success", "{}", m.stderr);
    h.assert_guarantees();
}

#[tokio::test]
async fn an_endless_write_loop_is_stopped_at_the_size_limit() {
    let Some(h) = RunHarness::new(fixture()).await else {
        return;
    };
    // Files over the per-file limit, so that the host never reads them
    // back (2 GB of smaller files is hashed, stored and diffed after the
    // stop, which a debug build takes minutes for). Five minutes to get
    // there: a disk shared with other tests may write only tens of MB/s.
    let endless = "i=0; while :; do head -c 134217728 /dev/zero > f$i; i=$((i+1)); done";
    let mut turns = script(endless, "rm -f f* && echo next-ok");
    turns[0] = MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        (
            "run_shell",
            json!({ "command": endless, "timeout_ms": 300_000 }),
        ),
    ]);
    h.mock.push_all(turns);
    let m = run_measured(&h, "endless write loop").await;
    assert_host_safe(&m);
    let results = tool_results(&h);
    assert!(
        results[0].contains("stopped: the workspace grew to")
            && results[0].contains("over its size limit of 2.0 GB"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("next-ok"), "{}", results[1]);
    assert_eq!(m.result["outcome"], "success", "{}", m.stderr);
    h.assert_guarantees();
}

#[tokio::test]
async fn a_million_files_are_stopped_at_the_count_limit_and_artifacts_stay_small() {
    let source = fixture();
    // A lower count limit than the default keeps the test quick; the
    // command tries for a million.
    std::fs::write(
        source.path().join(".minicoder.json"),
        r#"{"limits": {"workspace_files": 30000}}"#,
    )
    .expect("config");
    let Some(h) = RunHarness::new(source).await else {
        return;
    };
    h.mock.push_all(script(
        "mkdir many && cd many && python3 -c \"\nfor i in range(1000000):\n    open(str(i), 'w').close()\"",
        "ls many | wc -l && echo next-ok",
    ));
    let m = run_measured(&h, "1,000,000 empty files").await;
    assert_host_safe(&m);
    let results = tool_results(&h);
    assert!(
        results[0].contains("stopped: the workspace holds")
            && results[0].contains("over its limit of 30000"),
        "{}",
        results[0]
    );
    assert!(results[1].contains("next-ok"), "{}", results[1]);
    let left: u64 = results[1]
        .lines()
        .find_map(|l| l.trim().parse().ok())
        .expect("a count");
    assert!(
        (30_000..1_000_000).contains(&left),
        "{left} files were made"
    );
    // Every artifact stays small: events, report and patch.
    let events = std::fs::read_to_string(h.artifacts.join("events.jsonl")).expect("events");
    let longest = events.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2 << 20, "an event line of {longest} bytes");
    let changed = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("event"))
        .rfind(|e| e["type"] == "workspace.changed")
        .expect("a workspace.changed event");
    assert!(changed["changed_files"].as_array().expect("list").len() <= 200);
    assert!(changed["changed_total"].as_u64().expect("a total") >= left);
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(h.artifacts.join("report.json")).expect("report"),
    )
    .expect("report json");
    assert!(report["changed_files"].as_array().expect("list").len() <= 200);
    assert!(report["changed_total"].as_u64().expect("a total") > left);
    let report_len = std::fs::metadata(h.artifacts.join("report.json"))
        .expect("report")
        .len();
    let patch_len = std::fs::metadata(h.artifacts.join("final.patch"))
        .expect("patch")
        .len();
    println!(
        "events.jsonl longest line {longest} bytes, report.json {report_len} bytes, final.patch {patch_len} bytes"
    );
    assert!(patch_len <= 12 << 20);
    h.assert_guarantees();
}

#[tokio::test]
async fn a_2_gb_sparse_source_file_is_copied_sparse_and_never_read() {
    let Some(h) = RunHarness::new(fixture()).await else {
        return;
    };
    // Made after the harness took its digest of the source (which reads
    // every byte); the file is checked by its own facts instead.
    let img = h.source.path().join("disk.img");
    let big = std::fs::File::create(&img).expect("sparse");
    big.set_len(2 << 30).expect("truncate");
    drop(big);
    let before = std::fs::metadata(&img).expect("meta");
    h.mock.push_all(script(
        "ls -ls disk.img && git status --short && echo first-ok",
        "echo next-ok",
    ));
    let m = run_measured(&h, "2 GB sparse source file").await;
    assert_host_safe(&m);
    let results = tool_results(&h);
    // `ls -s` gives the blocks in KB: the copy holds no data.
    let blocks: u64 = results[0]
        .lines()
        .find(|l| l.contains("disk.img"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("no ls line in {}", results[0]));
    assert!(blocks < 1024, "the copy allocates {blocks} KB");
    assert!(!results[0].contains("?? disk.img"), "{}", results[0]);
    assert!(results[1].contains("next-ok"), "{}", results[1]);
    assert_eq!(m.result["outcome"], "success", "{}", m.stderr);
    assert!(!support::run_harness::contains(
        &h.final_patch(),
        b"disk.img"
    ));
    let after = std::fs::metadata(&img).expect("meta");
    assert_eq!(
        (after.len(), after.modified().expect("mtime")),
        (before.len(), before.modified().expect("mtime")),
        "the source file changed"
    );
    support::run_harness::git_apply(h.source.path(), &h.artifacts.join("final.patch"), true)
        .expect("final.patch applies to the source");
}

#[tokio::test]
async fn kill_9_of_minicoder_leaves_no_command_running() {
    let Some(h) = RunHarness::new(fixture()).await else {
        return;
    };
    let docker = support::docker_or_skip().await.expect("docker");
    h.mock.push(plan_and_shell("sleep 300"));
    let mut child = std::process::Command::new(support::bin())
        .arg("run")
        .arg(h.source.path())
        .arg("Fix the pagination bug")
        .args(["--non-interactive", "--model", "openai", "--artifact-dir"])
        .arg(&h.artifacts)
        .env("MINICODER_STATE_DIR", h.state.path())
        .env("OPENAI_BASE_URL", h.mock.base_url())
        .env("OPENAI_API_KEY", API_KEY)
        .env("OPENAI_MODEL", "mock-model")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    // Wait for the command to be running.
    let events = h.artifacts.join("events.jsonl");
    let mut run_id = None;
    for _ in 0..1200 {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        if text.contains("\"tool.started\"") {
            let first: Value =
                serde_json::from_str(text.lines().next().expect("a line")).expect("json");
            run_id = first["run_id"].as_str().map(String::from);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let run_id = run_id.expect("the command started");
    // It is in its container now.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let running = |docker: bollard::Docker, run_id: String| async move {
        let filters = std::collections::HashMap::from([(
            "label".to_string(),
            vec![format!("{}={run_id}", minicoder::sandbox::labels::RUN)],
        )]);
        docker
            .list_containers(Some(bollard::query_parameters::ListContainersOptions {
                all: false,
                filters: Some(filters),
                ..Default::default()
            }))
            .await
            .expect("list containers")
            .len()
    };
    assert!(running(docker.clone(), run_id.clone()).await > 0);
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    // Each supervisor sees its input end and stops its container; on a
    // loaded machine a container at the lowest CPU weight (the baseline's)
    // may take seconds to be scheduled, so the stop is awaited, not timed.
    let killed = std::time::Instant::now();
    let mut left = running(docker.clone(), run_id.clone()).await;
    while left > 0 && killed.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        left = running(docker.clone(), run_id.clone()).await;
    }
    println!(
        "containers of run {run_id} still running {:.1} s after kill -9: {left}",
        killed.elapsed().as_secs_f64()
    );
    assert_eq!(left, 0, "a container of the killed run is still running");
    // The next start-up's gc removes the stopped containers.
    let gc = std::process::Command::new(support::bin())
        .arg("gc")
        .env("MINICODER_STATE_DIR", h.state.path())
        .output()
        .expect("gc");
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
}

#[tokio::test]
async fn checkpoints_stay_within_their_budget_while_a_file_is_rewritten() {
    let source = fixture();
    // 24 MB for everything after the baseline; each turn writes 10 MB anew.
    std::fs::write(
        source.path().join(".minicoder.json"),
        r#"{"limits": {"checkpoint_bytes": 24000000}}"#,
    )
    .expect("config");
    let Some(h) = RunHarness::new(source).await else {
        return;
    };
    let write = "head -c 10000000 /dev/urandom > big.bin && echo written";
    let mut responses = vec![plan_and_shell(write)];
    responses.extend((0..4).map(|_| shell(write)));
    // (A binary file that big would not fit in final.patch.)
    responses.push(shell("rm big.bin"));
    responses.push(MockResponse::tool_calls(&[(
        "edit_file",
        json!({"path": "pagination.py", "patch": FIX}),
    )]));
    responses.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["done", "done"])),
        (
            "request_completion",
            json!({"summary": "page_count rounds up"}),
        ),
    ]));
    h.mock.push_all(responses);
    let m = run_measured(&h, "five 10 MB rewrites, 24 MB checkpoint budget").await;
    assert_host_safe(&m);
    assert_eq!(m.result["outcome"], "success", "{}", m.stderr);
    let events = std::fs::read_to_string(h.artifacts.join("events.jsonl")).expect("events");
    let pruned: Vec<Value> = events
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .filter(|e| e["type"] == "checkpoint.created" && e["pruned"].is_array())
        .collect();
    assert!(!pruned.is_empty(), "no checkpoint was pruned:\n{events}");
    let run_id = m.result["run_id"].as_str().expect("run id");
    let store = minicoder::state::StateDir::new(h.state.path()).checkpoint_store_dir(run_id);
    let objects = dir_bytes(&store.join("objects"));
    println!(
        "checkpoint store after 5 rewrites of a 10 MB file: {} MB ({} prunings)",
        objects >> 20,
        pruned.len()
    );
    // Kept: the baseline (well under 1 MB) and what the budget allows of
    // the rewrites while the run went on; without pruning it would hold 50 MB.
    assert!(objects < 24_000_000, "the store holds {objects} bytes");
}

#[tokio::test]
async fn the_baseline_packs_the_store_shares_cannot_be_changed_from_the_sandbox() {
    let Some(h) = RunHarness::new(fixture()).await else {
        return;
    };
    // Writing to the packs in place, then replacing them with corrupt
    // copies of its own.
    let write = "cd .git/objects/pack && ls -ln && for f in *; do \
        chmod u+w \"$f\" && echo chmod-ok; printf x >> \"$f\" && echo write-ok; \
        truncate -s 1 \"$f\" && echo truncate-ok; done; echo tried";
    let replace = "cd .git/objects/pack && for f in *; do \
        cp \"$f\" \"$f.new\" && mv -f \"$f.new\" \"$f\" && chmod u+w \"$f\" \
        && printf x >> \"$f\"; done && echo replaced";
    h.mock.push_all(script(write, replace));
    let m = run_measured(&h, "writes to the baseline packs").await;
    assert_host_safe(&m);
    let results = tool_results(&h);
    assert!(results[0].contains("tried"), "{}", results[0]);
    for done in ["chmod-ok", "write-ok", "truncate-ok"] {
        assert!(!results[0].contains(done), "{done}: {}", results[0]);
    }
    assert!(results[1].contains("replaced"), "{}", results[1]);
    assert_eq!(m.result["outcome"], "success", "{}", m.stderr);
    let run_id = m.result["run_id"].as_str().expect("run id");
    let store = minicoder::state::StateDir::new(h.state.path()).checkpoint_store_dir(run_id);
    let packs: Vec<_> = std::fs::read_dir(store.join("objects/pack"))
        .expect("store packs")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "pack"))
        .collect();
    assert!(!packs.is_empty(), "the store holds the baseline's pack");
    // Git reads every pack whole, against its checksum, and every object.
    for pack in &packs {
        support::git(&store, &["verify-pack", pack.to_str().expect("utf-8")]);
    }
    support::git(&store, &["fsck", "--full", "--strict"]);
}

fn dir_bytes(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| dir_bytes(&e.path())).sum())
        .unwrap_or(0)
}
