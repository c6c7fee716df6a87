//! `minicoder batch`: many scripted runs at once over the bundled fixture,
//! the right verdicts, a kill mid-batch resumed without redoing anything,
//! SWE-bench predictions that apply and pass, and the machine left as it was.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptions, ListVolumesOptions};
use serde_json::{Value, json};

use crate::support;

fn demo_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/script.json")
}

/// The demo's script with a slow command first, so that a kill lands mid-run.
fn slow_script(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(demo_script()).expect("script");
    let mut turns: Vec<Value> = serde_json::from_str(&text).expect("json");
    // The first turn plans, then runs a command: that command takes a while.
    let call = &mut turns[0]["tool_calls"][1];
    assert_eq!(call["name"], "run_shell");
    let command = call["arguments"]["command"].as_str().expect("command");
    call["arguments"]["command"] = format!("sleep 6 && {command}").into();
    let path = dir.join("slow.json");
    std::fs::write(&path, serde_json::to_string(&turns).expect("json")).expect("write");
    path
}

/// A script that never fixes anything.
fn idle_script(dir: &Path) -> PathBuf {
    let path = dir.join("idle.json");
    std::fs::write(&path, r#"[{"content": "I will not change anything."}]"#).expect("write");
    path
}

fn fixture_repo(dir: &Path) {
    std::fs::create_dir_all(dir).expect("mkdir");
    minicoder::cli::demo::write_fixture(dir).expect("fixture");
}

/// What a batch could leave behind on this machine (other tests run beside
/// it): the containers of this state directory's runs, the volumes made for
/// it, and its workspaces.
async fn machine(docker: &Docker, state: &Path) -> (BTreeSet<String>, BTreeSet<String>, usize) {
    use minicoder::sandbox::labels;
    let runs: BTreeSet<String> = std::fs::read_dir(state.join(".agent/runs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            ..Default::default()
        }))
        .await
        .expect("containers")
        .into_iter()
        .filter(|c| {
            c.labels
                .as_ref()
                .and_then(|l| l.get(labels::RUN))
                .is_some_and(|run| runs.contains(run))
        })
        .filter_map(|c| c.id)
        .collect();
    let state_label = state.display().to_string();
    let volumes = docker
        .list_volumes(None::<ListVolumesOptions>)
        .await
        .expect("volumes")
        .volumes
        .unwrap_or_default()
        .into_iter()
        .filter(|v| v.labels.values().any(|l| *l == state_label))
        .map(|v| v.name)
        .collect();
    let workspaces = std::fs::read_dir(state.join("workspaces"))
        .map(|d| d.count())
        .unwrap_or(0);
    (containers, volumes, workspaces)
}

fn batch(state: &Path, args: &[&str]) -> std::process::Output {
    Command::new(support::bin())
        .arg("batch")
        .args(args)
        .env("MINICODER_STATE_DIR", state)
        .stdin(Stdio::null())
        .output()
        .expect("run batch")
}

fn json_lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn ledger(dir: &Path) -> Vec<Value> {
    json_lines(&std::fs::read(dir.join("ledger.jsonl")).expect("ledger"))
}

#[tokio::test]
async fn twenty_scripted_tasks_at_four_at_once_get_their_verdicts_and_leave_nothing() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let state = support::state_dir();
    let work = tempfile::tempdir().expect("tempdir");
    let idle = idle_script(work.path());
    let mut lines = String::new();
    let mut expected = BTreeMap::new();
    for i in 1..=20 {
        let repo = work.path().join(format!("repo-{i}"));
        fixture_repo(&repo);
        // Every fifth task's model does nothing: the verifier says no.
        let fixes = i % 5 != 0;
        let task = json!({
            "id": format!("task-{i:02}"),
            "repo": format!("repo-{i}"),
            // A task may begin with a dash, as a Markdown list does.
            "task": if i == 3 { "- page_count(21, 10) returns 2: fix it." } else { "Fix the pagination bug: page_count(21, 10) returns 2." },
            "script": if fixes { demo_script() } else { idle.clone() },
            "max_turns": if fixes { 10 } else { 2 },
        });
        lines.push_str(&format!("{task}\n"));
        expected.insert(format!("task-{i:02}"), fixes);
    }
    lines.push_str(
        &json!({"id": "no-repo", "repo": "missing", "task": "anything", "script": demo_script()})
            .to_string(),
    );
    std::fs::write(work.path().join("tasks.jsonl"), lines).expect("tasks");
    let before = machine(&docker, state.path()).await;
    let out_dir = work.path().join("out");
    let out = batch(
        state.path(),
        &[
            work.path().join("tasks.jsonl").to_str().expect("utf-8"),
            "--parallel",
            "4",
            "--out",
            out_dir.to_str().expect("utf-8"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "two failed and one error: {stderr}"
    );
    let events = json_lines(&out.stdout);
    let end = events.last().expect("events");
    assert_eq!(end["event"], "batch.finished");
    assert_eq!(end["totals"]["verified"], 16, "{end}");
    assert_eq!(end["totals"]["failure"], 4, "{end}");
    assert_eq!(end["totals"]["error"], 1, "{end}");
    assert_eq!(
        end["left_behind"]["containers"], 0,
        "every run removed its own"
    );

    let summary: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("batch.json")).expect("batch.json"))
            .expect("json");
    let results = summary["results"].as_array().expect("results");
    assert_eq!(results.len(), 21);
    for r in results {
        let id = r["id"].as_str().expect("id");
        if id == "no-repo" {
            assert_eq!(r["outcome"], "error");
            assert!(
                r["reason"]
                    .as_str()
                    .expect("reason")
                    .contains("does not exist"),
                "{r}"
            );
            continue;
        }
        let fixes = expected[id];
        assert_eq!(r["verified"], fixes, "{r}");
        assert_eq!(
            r["outcome"],
            if fixes { "success" } else { "failure" },
            "{r}"
        );
        assert!(r["tokens"]["input"].as_u64().expect("tokens") > 0, "{r}");
        let patch =
            std::fs::read_to_string(r["patch"].as_str().unwrap_or_default()).unwrap_or_default();
        assert_eq!(
            patch.contains("+++ b/pagination.py"),
            fixes,
            "{id}: {patch}"
        );
        assert!(
            Path::new(r["artifacts"].as_str().expect("dir"))
                .join("receipt.json")
                .exists()
        );
    }
    // Every task ran exactly once.
    let ledger = ledger(&out_dir);
    for id in expected.keys() {
        let started = ledger
            .iter()
            .filter(|e| e["event"] == "started" && e["id"] == id.as_str())
            .count();
        assert_eq!(started, 1, "{id}");
    }
    // The sources are untouched, the machine as it was.
    for i in 1..=20 {
        assert_eq!(
            support::git_status(&work.path().join(format!("repo-{i}"))),
            ""
        );
    }
    assert_eq!(machine(&docker, state.path()).await, before);
}

#[tokio::test]
async fn a_batch_killed_mid_run_resumes_its_begun_runs_and_redoes_none() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let state = support::state_dir();
    let work = tempfile::tempdir().expect("tempdir");
    let slow = slow_script(work.path());
    let mut lines = String::new();
    for i in 1..=4 {
        fixture_repo(&work.path().join(format!("repo-{i}")));
        lines.push_str(&format!(
            "{}\n",
            json!({"id": format!("t{i}"), "repo": format!("repo-{i}"),
                   "task": "Fix the pagination bug.", "script": slow})
        ));
    }
    std::fs::write(work.path().join("tasks.jsonl"), lines).expect("tasks");
    let before = machine(&docker, state.path()).await;
    let out_dir = work.path().join("out");
    let mut child = Command::new(support::bin())
        .args(["batch", "--parallel", "2", "--out"])
        .arg(&out_dir)
        .arg(work.path().join("tasks.jsonl"))
        .env("MINICODER_STATE_DIR", state.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("batch");
    // Kill it (no chance to clean up) once two runs have begun.
    let deadline = Instant::now() + Duration::from_secs(120);
    let begun = loop {
        let begun: Vec<Value> = std::fs::read(out_dir.join("ledger.jsonl"))
            .map(|b| json_lines(&b))
            .unwrap_or_default();
        if begun.iter().filter(|e| e["event"] == "started").count() == 2 {
            break begun;
        }
        assert!(Instant::now() < deadline, "no run began");
        std::thread::sleep(Duration::from_millis(50));
    };
    child.kill().expect("kill -9");
    child.wait().expect("reaped");
    // Resumed at once, while its children, which heard it die, are still
    // cancelling: the batch waits for each to end before resuming its run.
    let dirs: Vec<PathBuf> = begun
        .iter()
        .map(|e| PathBuf::from(e["artifact_dir"].as_str().expect("dir")))
        .collect();
    let out = batch(
        state.path(),
        &["--resume", out_dir.to_str().expect("utf-8")],
    );
    // Each begun run was cancelled by its own process (which removed its
    // containers), then went on in the resumed batch.
    for d in &dirs {
        let events = std::fs::read_to_string(d.join("events.jsonl")).expect("events");
        let ends: Vec<Value> = json_lines(events.as_bytes())
            .into_iter()
            .filter(|e| e["type"] == "run.finished")
            .collect();
        assert_eq!(ends.len(), 2, "{ends:?}");
        assert_eq!(ends[0]["outcome"], "cancelled", "{}", ends[0]);
        assert_eq!(ends[1]["outcome"], "success", "{}", ends[1]);
    }
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ledger = ledger(&out_dir);
    let begun_ids: Vec<&str> = begun
        .iter()
        .map(|e| e["id"].as_str().expect("id"))
        .collect();
    for i in 1..=4 {
        let id = format!("t{i}");
        let of = |event: &str| {
            ledger
                .iter()
                .filter(|e| e["event"] == event && e["id"] == id.as_str())
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(of("started").len(), 1, "{id} began once: {ledger:?}");
        let finished = of("finished");
        assert_eq!(finished.len(), 1, "{id} finished once");
        assert_eq!(finished[0]["verified"], true, "{}", finished[0]);
        let resumed = begun_ids.contains(&id.as_str());
        assert_eq!(
            finished[0]["resumed"].as_bool().unwrap_or(false),
            resumed,
            "{id}"
        );
        assert_eq!(
            finished[0]["run_id"],
            of("started")[0]["run_id"],
            "the same run went on"
        );
    }
    assert_eq!(machine(&docker, state.path()).await, before);
}

/// A repository with the demo's bug, as a SWE-bench instance sees it: the
/// failing test exists at the base commit; a later commit (the "future")
/// must not be what the run sees.
fn swebench_repo(dir: &Path) -> String {
    fixture_repo(dir);
    let repo = git2::Repository::open(dir).expect("open");
    let base = repo.head().expect("head").peel_to_commit().expect("commit");
    std::fs::write(dir.join("LATER.md"), "a later commit\n").expect("write");
    let mut index = repo.index().expect("index");
    index.add_path(Path::new("LATER.md")).expect("add");
    index.write().expect("write");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let sig = git2::Signature::now("t", "t@t").expect("sig");
    repo.commit(Some("HEAD"), &sig, &sig, "later", &tree, &[&base])
        .expect("commit");
    base.id().to_string()
}

#[tokio::test]
async fn swebench_predictions_have_the_harness_fields_and_their_patches_pass() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let state = support::state_dir();
    let work = tempfile::tempdir().expect("tempdir");
    let repos = work.path().join("repos");
    let scripts = work.path().join("scripts");
    std::fs::create_dir_all(&scripts).expect("mkdir");
    let fail_to_pass = ["tests/test_pagination.py::test_partial_last_page_counts"];
    let pass_to_pass = ["tests/test_pagination.py::test_exact_pages"];
    let mut instances = String::new();
    for (i, name) in ["acme/pager", "acme/lister", "other/pager"]
        .iter()
        .enumerate()
    {
        let base = swebench_repo(&repos.join(name.replace('/', "__")));
        let id = format!("{}-{}", name.replace('/', "__"), i + 1);
        std::fs::copy(demo_script(), scripts.join(format!("{id}.json"))).expect("script");
        // The first statement is longer than one argument of a command
        // line may be (128 KiB): it reaches its run all the same.
        let mut statement =
            "- page_count(21, 10) returns 2\n- the partial last page is lost".to_string();
        if i == 0 {
            statement.push_str(&format!("\n{}", "traceback line\n".repeat(12_000)));
        }
        instances.push_str(&format!(
            "{}\n",
            json!({"instance_id": id, "repo": name, "base_commit": base,
                   "problem_statement": statement,
                   "FAIL_TO_PASS": serde_json::to_string(&fail_to_pass).expect("json"),
                   "PASS_TO_PASS": pass_to_pass, "version": "0.1"})
        ));
    }
    // One whose commit the clone does not have fails alone.
    instances.push_str(&format!(
        "{}\n",
        json!({"instance_id": "acme__pager-4", "repo": "acme/pager",
               "base_commit": "0123456789abcdef0123", "problem_statement": "p",
               "FAIL_TO_PASS": fail_to_pass})
    ));
    std::fs::copy(demo_script(), scripts.join("acme__pager-4.json")).expect("script");
    std::fs::write(work.path().join("instances.jsonl"), instances).expect("write");
    let before = machine(&docker, state.path()).await;
    let out_dir = work.path().join("out");
    let out = batch(
        state.path(),
        &[
            "--swebench",
            work.path().join("instances.jsonl").to_str().expect("utf-8"),
            "--repos",
            repos.to_str().expect("utf-8"),
            "--scripts",
            scripts.to_str().expect("utf-8"),
            "--out",
            out_dir.to_str().expect("utf-8"),
            "--parallel",
            "3",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "one instance failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("batch.json")).expect("batch.json"))
            .expect("json");
    let results = summary["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "{summary:#}");
    for r in results {
        if r["id"] == "acme__pager-4" {
            assert_eq!(r["outcome"], "error", "{r}");
            assert!(
                r["reason"]
                    .as_str()
                    .is_some_and(|w| w.contains("finding 0123456789abcdef0123")),
                "{r}"
            );
        } else {
            assert_eq!(r["verified"], true, "{r}");
        }
    }
    assert!(
        !out_dir.join("checkouts").exists(),
        "the checkouts go when the batch is done"
    );
    let predictions =
        json_lines(&std::fs::read(out_dir.join("predictions.jsonl")).expect("predictions"));
    assert_eq!(predictions.len(), 3);
    let image = minicoder::sandbox::spec::image_from_env();
    for p in &predictions {
        let keys: BTreeSet<&str> = p
            .as_object()
            .expect("object")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            BTreeSet::from(["instance_id", "model_name_or_path", "model_patch"])
        );
        let id = p["instance_id"].as_str().expect("id");
        let name = id.rsplit_once('-').expect("id").0;
        // The harness's way: a fresh checkout of base_commit, `git apply`, the tests.
        let line: Value = std::fs::read_to_string(work.path().join("instances.jsonl"))
            .expect("read")
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("json"))
            .find(|v| v["instance_id"] == id)
            .expect("instance");
        let fresh = work.path().join(format!("fresh-{id}"));
        let git = |args: &[&str], dir: &Path| {
            let out = Command::new("git")
                .args(args)
                .current_dir(dir)
                .output()
                .expect("git");
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        git(
            &[
                "clone",
                "-q",
                repos.join(name).to_str().expect("utf-8"),
                fresh.to_str().expect("utf-8"),
            ],
            work.path(),
        );
        git(
            &[
                "checkout",
                "-q",
                line["base_commit"].as_str().expect("commit"),
            ],
            &fresh,
        );
        let pytest = |dir: &Path| {
            Command::new("docker")
                .args(["run", "--rm", "--network", "none", "-v"])
                .arg(format!("{}:/w", dir.display()))
                .args([
                    "-w",
                    "/w",
                    &image,
                    "python3",
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                ])
                .args(fail_to_pass)
                .output()
                .expect("docker run")
                .status
                .success()
        };
        assert!(
            !pytest(&fresh),
            "{id}: FAIL_TO_PASS fails at the base commit"
        );
        std::fs::write(
            fresh.join("model.patch"),
            p["model_patch"].as_str().expect("patch"),
        )
        .expect("write");
        git(&["apply", "model.patch"], &fresh);
        std::fs::remove_file(fresh.join("model.patch")).expect("rm");
        assert!(pytest(&fresh), "{id}: FAIL_TO_PASS passes with the patch");
    }
    // The person's clones are as they were: HEAD still the later commit.
    for name in ["acme__pager", "acme__lister", "other__pager"] {
        assert!(repos.join(name).join("LATER.md").exists());
        assert_eq!(support::git_status(&repos.join(name)), "");
    }
    assert_eq!(machine(&docker, state.path()).await, before);
}
