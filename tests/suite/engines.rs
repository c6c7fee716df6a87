//! Docker engines other than the machine's own, reached the way Docker's
//! own client reaches them: `DOCKER_HOST`, and TLS from `DOCKER_TLS_VERIFY`
//! and `DOCKER_CERT_PATH`.

use std::collections::HashMap;
use std::process::{Command, Output};

use bollard::models::VolumeCreateRequest;
use minicoder::owner::ProcessIdentity;
use minicoder::sandbox::labels;

use crate::support::{self, tls_engine::TlsEngine};

fn minicoder(args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Output {
    let state = support::state_dir();
    let mut cmd = Command::new(support::bin());
    cmd.args(args)
        .env("MINICODER_STATE_DIR", state.path())
        .env_remove("DOCKER_HOST")
        .env_remove("DOCKER_TLS_VERIFY")
        .env_remove("DOCKER_CERT_PATH");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run minicoder")
}

/// A non-interactive run's report: the last line it printed.
fn report_of(out: &Output) -> serde_json::Value {
    let line = out
        .stdout
        .split(|b| *b == b'\n')
        .rfind(|l| !l.is_empty())
        .expect("a report line");
    serde_json::from_slice(line).expect("the report")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A volume on `client`'s engine, as a run whose process is gone left it.
async fn left_by_a_dead_run(client: &bollard::Docker, run: &str) -> String {
    let mut dead = ProcessIdentity::current();
    dead.start_ticks += 11;
    let name = format!("minicoder-{run}-{}", std::process::id());
    client
        .create_volume(VolumeCreateRequest {
            name: Some(name.clone()),
            labels: Some(HashMap::from([
                (labels::MANAGED.to_string(), "true".to_string()),
                (labels::RUN.to_string(), run.to_string()),
                (labels::OWNER.to_string(), dead.to_label()),
            ])),
            ..Default::default()
        })
        .await
        .expect("a volume on the second engine");
    name
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engine_behind_tls_is_reached_only_with_its_certificates_and_cleaned_by_gc() {
    let Some(engine) = TlsEngine::start_or_skip().await else {
        return;
    };
    let client = engine.client();
    let name = left_by_a_dead_run(&client, "engine-test").await;
    let host = std::ffi::OsStr::new(&engine.host);
    let verify = std::ffi::OsStr::new("1");

    // Plain HTTP to an engine that speaks TLS: refused, said clearly,
    // nothing removed.
    let plain = minicoder(&["gc"], &[("DOCKER_HOST", host)]);
    let said = text(&plain);
    assert_ne!(plain.status.code(), Some(0), "{said}");
    assert!(said.contains(&engine.host), "names the engine: {said}");
    assert!(said.contains("HTTPS"), "says why: {said}");
    // A client certificate of another authority: refused by the engine.
    let stranger = minicoder(
        &["gc"],
        &[
            ("DOCKER_HOST", host),
            ("DOCKER_TLS_VERIFY", verify),
            ("DOCKER_CERT_PATH", engine.stranger_cert_dir.as_os_str()),
        ],
    );
    let said = text(&stranger);
    assert_ne!(stranger.status.code(), Some(0), "{said}");
    assert!(said.contains(&engine.host), "names the engine: {said}");
    assert!(
        said.to_lowercase().contains("certificate"),
        "says the engine refused the certificate: {said}"
    );
    assert!(
        client.inspect_volume(&name).await.is_ok(),
        "a refused connection removed something"
    );

    // With its certificates: reached, and what the dead run left is gone
    // from that engine.
    let with_tls = [
        ("DOCKER_HOST", host),
        ("DOCKER_TLS_VERIFY", verify),
        ("DOCKER_CERT_PATH", engine.cert_dir.as_os_str()),
    ];
    let gc = minicoder(&["gc"], &with_tls);
    let said = text(&gc);
    assert_eq!(gc.status.code(), Some(0), "{said}");
    assert!(said.contains(&format!("removed volume {name}")), "{said}");
    assert!(
        client.inspect_volume(&name).await.is_err(),
        "the volume is still on the second engine"
    );

    // `doctor` speaks of that engine: it answers, and has no sandbox image.
    let doctor = minicoder(&["doctor"], &with_tls);
    let said = text(&doctor);
    assert!(said.contains("[ OK ] docker: engine"), "{said}");
    assert!(said.contains("sandbox image"), "{said}");
    assert!(said.contains("is missing"), "{said}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_engine_of_the_configuration_is_chosen_by_name() {
    let Some(engine) = TlsEngine::start_or_skip().await else {
        return;
    };
    let client = engine.client();
    let name = left_by_a_dead_run(&client, "named-engine-test").await;
    let config = tempfile::tempdir().expect("config dir");
    std::fs::write(
        config.path().join("config.toml"),
        format!(
            "[engines.farm]\nhost = {:?}\ncert_path = {:?}\n\n[engines.stranger]\nhost = {:?}\ncert_path = {:?}\n",
            engine.host,
            engine.cert_dir,
            engine.host,
            engine.stranger_cert_dir
        ),
    )
    .expect("config.toml");
    let dir = config.path().as_os_str();
    // DOCKER_HOST names this machine's engine; --engine wins over it.
    let local = std::ffi::OsStr::new("unix:///var/run/docker.sock");
    let env = [("MINICODER_CONFIG_DIR", dir), ("DOCKER_HOST", local)];

    let unknown = minicoder(&["--engine", "nowhere", "gc"], &env);
    let said = text(&unknown);
    assert_eq!(unknown.status.code(), Some(2), "{said}");
    assert!(said.contains("no engine \"nowhere\""), "{said}");
    assert!(
        said.contains("farm, stranger"),
        "names the engines it has: {said}"
    );

    let refused = minicoder(&["gc", "--engine", "stranger"], &env);
    let said = text(&refused);
    assert_ne!(refused.status.code(), Some(0), "{said}");
    assert!(said.contains("engine stranger: "), "{said}");
    assert!(said.to_lowercase().contains("certificate"), "{said}");
    assert!(client.inspect_volume(&name).await.is_ok());

    let gc = minicoder(&["gc", "--engine", "farm"], &env);
    let said = text(&gc);
    assert_eq!(gc.status.code(), Some(0), "{said}");
    assert!(said.contains(&format!("removed volume {name}")), "{said}");
    assert!(client.inspect_volume(&name).await.is_err());

    let doctor = minicoder(&["doctor", "--engine", "farm"], &env);
    let said = text(&doctor);
    assert!(
        said.contains(&format!("[ OK ] docker: farm at {}: engine", engine.host)),
        "{said}"
    );
}

/// The demo's fix, with a long command first: the engine dies during it.
const SCRIPT_WITH_A_LONG_COMMAND: &str = r#"[
  {"content": "First the plan, then a long command.", "tool_calls": [
    {"name": "update_plan", "arguments": {"items": [{"id": "1", "content": "fix page_count", "status": "in_progress"}]}},
    {"name": "run_shell", "arguments": {"command": "sleep 120"}}]},
  {"content": "Round up.", "tool_calls": [
    {"name": "edit_file", "arguments": {"path": "pagination.py", "patch": "--- a/pagination.py\n+++ b/pagination.py\n@@ -8 +8 @@\n-    return total_items // page_size\n+    return -(-total_items // page_size)\n"}}]},
  {"content": "Done.", "tool_calls": [
    {"name": "update_plan", "arguments": {"items": [{"id": "1", "content": "fix page_count", "status": "done"}]}},
    {"name": "request_completion", "arguments": {"summary": "page_count rounds up"}}]}
]"#;

/// A fix whose commands change the workspace on the engine in every way:
/// a new folder, a removed file, a file that says where `/workspace` is
/// mounted; the tools here see those changes, and the edit made here is
/// what the engine's next command tests.
const SCRIPT_ON_A_REMOTE_WORKSPACE: &str = r#"[
  {"content": "Where am I, and make some changes.", "tool_calls": [
    {"name": "update_plan", "arguments": {"items": [{"id": "1", "content": "fix page_count", "status": "in_progress"}]}},
    {"name": "run_shell", "arguments": {"command": "grep ' /workspace ' /proc/mounts > mounts.txt; mkdir -p made/deep && printf 'made on the engine\n' > made/deep/new.txt && ln -s deep/new.txt made/link && rm README.md"}}]},
  {"content": "Read what the engine made.", "tool_calls": [
    {"name": "read_file", "arguments": {"path": "made/deep/new.txt"}}]},
  {"content": "Round up.", "tool_calls": [
    {"name": "edit_file", "arguments": {"path": "pagination.py", "patch": "--- a/pagination.py\n+++ b/pagination.py\n@@ -8 +8 @@\n-    return total_items // page_size\n+    return -(-total_items // page_size)\n"}}]},
  {"content": "Test it there.", "tool_calls": [
    {"name": "run_shell", "arguments": {"command": "python3 -m pytest -q && test -L made/link && test ! -e README.md"}}]},
  {"content": "Done.", "tool_calls": [
    {"name": "update_plan", "arguments": {"items": [{"id": "1", "content": "fix page_count", "status": "done"}]}},
    {"name": "request_completion", "arguments": {"summary": "page_count rounds up"}}]}
]"#;

/// The demo's script with `sleep SECONDS && ` before its first command.
fn slow_demo_script(dir: &std::path::Path, seconds: u32) -> std::path::PathBuf {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/script.json");
    let mut turns: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("script")).expect("json");
    let call = &mut turns[0]["tool_calls"][1];
    assert_eq!(call["name"], "run_shell");
    let command = call["arguments"]["command"].as_str().expect("command");
    call["arguments"]["command"] = format!("sleep {seconds} && {command}").into();
    let out = dir.join(format!("sleep-{seconds}.json"));
    std::fs::write(&out, turns.to_string()).expect("write");
    out
}

/// A batch's end: its exit, its JSON lines, and `batch.json`'s results by id.
struct BatchEnd {
    out: Output,
    lines: Vec<serde_json::Value>,
    results: HashMap<String, serde_json::Value>,
}

fn batch_end(out: Output, dir: &std::path::Path) -> BatchEnd {
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("batch.json")).expect("batch.json"))
            .expect("json");
    let results = summary["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| (r["id"].as_str().expect("id").to_string(), r.clone()))
        .collect();
    BatchEnd {
        out,
        lines,
        results,
    }
}

/// Waits until a process whose command line holds `what` runs in a
/// container of `client`'s engine.
async fn running_on(client: &bollard::Docker, what: &str) {
    let running = async {
        loop {
            let containers = client
                .list_containers(None::<bollard::query_parameters::ListContainersOptions>)
                .await
                .unwrap_or_default();
            for c in containers {
                let Some(id) = c.id else { continue };
                let top = client
                    .top_processes(&id, None::<bollard::query_parameters::TopOptions>)
                    .await;
                let rows = top.ok().and_then(|t| t.processes).unwrap_or_default();
                if rows.iter().flatten().any(|cell| cell.contains(what)) {
                    return;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(120), running)
        .await
        .unwrap_or_else(|_| panic!("{what} never ran on the second engine"));
}

/// A batch spread over this machine's engine and a second one behind TLS:
/// each engine gets runs, in the order named and within its capacity, and
/// nothing is left on either. Then the second engine dies mid-batch: its
/// run ends saying so (not as a command killed), the batch goes on with
/// this machine's engine only, and a `resume` here finishes that run, whose
/// patch applies.
#[tokio::test(flavor = "multi_thread")]
async fn a_batch_spreads_over_two_engines_and_goes_on_when_one_dies_whose_run_resumes_here() {
    let Some(local) = support::docker_or_skip().await else {
        return;
    };
    let Some(mut engine) = TlsEngine::for_runs_or_skip(&local).await else {
        return;
    };
    let image = minicoder::sandbox::spec::image_from_env();
    tokio::task::block_in_place(|| engine.load_image(&image));
    let (config, state, work) = (
        tempfile::tempdir().expect("config"),
        support::state_dir(),
        tempfile::tempdir().expect("work"),
    );
    std::fs::write(
        config.path().join("config.toml"),
        format!(
            "[engines.two]\nhost = {:?}\ncert_path = {:?}\ncapacity = 1\n\
             [engines.here]\nhost = \"unix:///var/run/docker.sock\"\ncapacity = 1\n",
            engine.host, engine.cert_dir
        ),
    )
    .expect("config.toml");
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/demo/script.json");
    let long = work.path().join("long.json");
    std::fs::write(&long, SCRIPT_WITH_A_LONG_COMMAND).expect("script");
    let slow = slow_demo_script(work.path(), 20);
    let tasks = |name: &str, scripts: &[(&str, &std::path::Path)]| {
        let mut lines = String::new();
        for (id, script) in scripts {
            let repo = work.path().join(format!("{name}-{id}"));
            std::fs::create_dir_all(&repo).expect("mkdir");
            minicoder::cli::demo::write_fixture(&repo).expect("fixture");
            let task = serde_json::json!({"id": id, "repo": repo, "task": "fix the pagination bug", "script": script});
            lines.push_str(&format!("{task}\n"));
        }
        let file = work.path().join(format!("{name}.jsonl"));
        std::fs::write(&file, lines).expect("tasks");
        file
    };
    let command = |args: &[&std::ffi::OsStr]| {
        let mut cmd = tokio::process::Command::new(support::bin());
        cmd.args(args)
            .env("MINICODER_STATE_DIR", state.path())
            .env("MINICODER_CONFIG_DIR", config.path())
            .env_remove("DOCKER_HOST")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        cmd
    };
    let batch = |file: &std::path::Path, out: &std::path::Path| {
        command(&[
            "batch".as_ref(),
            file.as_os_str(),
            "--engines".as_ref(),
            "two,here".as_ref(),
            "--json".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ])
        .output()
    };
    let client = engine.client();

    // A run on the second engine, which does not see this machine's files:
    // the workspace is a volume there, kept in step; the run verifies there
    // and its patch applies here; nothing of it is left there.
    let repo = work.path().join("remote");
    std::fs::create_dir_all(&repo).expect("mkdir");
    minicoder::cli::demo::write_fixture(&repo).expect("fixture");
    let script = work.path().join("remote.json");
    std::fs::write(&script, SCRIPT_ON_A_REMOTE_WORKSPACE).expect("script");
    let out = command(&[
        "--engine".as_ref(),
        "two".as_ref(),
        "run".as_ref(),
        "--non-interactive".as_ref(),
        "--script".as_ref(),
        script.as_os_str(),
        repo.as_os_str(),
        "fix the pagination bug".as_ref(),
    ])
    .output()
    .await
    .expect("run");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let report = report_of(&out);
    assert_eq!(report["outcome"], "success", "{said}");
    assert_eq!(report["verification"]["passed"], true, "{said}");
    let events = std::fs::read_to_string(
        std::path::Path::new(report["artifact_dir"].as_str().expect("artifacts"))
            .join("events.jsonl"),
    )
    .expect("events");
    assert!(
        events.contains("made on the engine"),
        "read_file saw what the engine's command made: {events}"
    );
    let run = report["run_id"].as_str().expect("run id").to_string();
    assert!(support::containers_of_run(&client, &run).await.is_empty());
    assert!(support::volumes_of_run(&client, &run).await.is_empty());
    assert!(support::containers_of_run(&local, &run).await.is_empty());
    let applied = command(&["apply".as_ref(), run.as_ref()])
        .output()
        .await
        .expect("apply");
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    let mounts = std::fs::read_to_string(repo.join("mounts.txt")).expect("mounts.txt");
    assert!(
        mounts.starts_with("tmpfs /workspace tmpfs "),
        "the workspace is the engine's volume, not this machine's folder: {mounts}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("made/deep/new.txt")).expect("new"),
        "made on the engine\n"
    );
    assert_eq!(
        std::fs::read_link(repo.join("made/link")).expect("link"),
        std::path::Path::new("deep/new.txt")
    );
    assert!(!repo.join("README.md").exists());
    let fixed = std::fs::read_to_string(repo.join("pagination.py")).expect("read");
    assert!(fixed.contains("-(-total_items // page_size)"), "{fixed}");

    // Both engines work: one run each, verified, nothing left on either.
    let (file, out) = (
        tasks("a", &[("first", &demo), ("second", &demo)]),
        work.path().join("out-a"),
    );
    let a = batch_end(batch(&file, &out).await.expect("batch"), &out);
    let said = text(&a.out);
    assert_eq!(a.out.status.code(), Some(0), "{said}");
    assert_eq!(a.results["first"]["engine"], "two", "{said}");
    assert_eq!(a.results["second"]["engine"], "here", "{said}");
    for r in a.results.values() {
        assert_eq!(r["verified"], true, "{r}");
        let run = r["run_id"].as_str().expect("run id");
        assert!(support::containers_of_run(&local, run).await.is_empty());
        assert!(support::containers_of_run(&client, run).await.is_empty());
        assert!(support::volumes_of_run(&client, run).await.is_empty());
    }
    let end = a.lines.last().expect("batch.finished");
    assert_eq!(end["left_behind"]["containers"], 0, "{end}");

    // The second engine dies during its run; the batch goes on here.
    let (file, out) = (
        tasks(
            "b",
            &[
                ("long", &long),
                ("slow", &slow),
                ("after-1", &demo),
                ("after-2", &demo),
            ],
        ),
        work.path().join("out-b"),
    );
    let going = tokio::spawn(batch(&file, &out));
    running_on(&client, "sleep 120").await;
    engine.kill();
    let b = tokio::time::timeout(std::time::Duration::from_secs(240), going)
        .await
        .expect("the batch did not end after an engine died")
        .expect("join")
        .expect("batch");
    let b = batch_end(b, &out);
    let said = text(&b.out);
    assert_eq!(b.out.status.code(), Some(1), "one run failed: {said}");
    let long_run = &b.results["long"];
    assert_eq!(long_run["engine"], "two", "{said}");
    assert_eq!(long_run["outcome"], "failure", "{said}");
    let reason = long_run["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("Docker is not reachable")
            && reason.contains("engine two (tcp://")
            && reason.contains("stopped answering while a command ran"),
        "{said}"
    );
    assert!(
        !reason.contains("killed by signal"),
        "an engine gone is not a command killed: {said}"
    );
    assert!(
        b.lines
            .iter()
            .any(|l| l["event"] == "engine.gone" && l["engine"] == "two"),
        "{said}"
    );
    for id in ["slow", "after-1", "after-2"] {
        let r = &b.results[id];
        assert_eq!(r["engine"], "here", "only the engine that answers: {r}");
        assert_eq!(r["verified"], true, "{r}");
        let run = r["run_id"].as_str().expect("run id");
        assert!(support::containers_of_run(&local, run).await.is_empty());
    }

    // Resumed on this machine's engine, the run finishes, and its patch applies.
    let id = long_run["run_id"].as_str().expect("run id").to_string();
    let id_arg = std::ffi::OsString::from(&id);
    let resumed = command(&[
        "resume".as_ref(),
        &id_arg,
        "--non-interactive".as_ref(),
        "--script".as_ref(),
        long.as_os_str(),
    ])
    .output()
    .await
    .expect("resume");
    let said = text(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{said}");
    let applied = command(&["apply".as_ref(), &id_arg])
        .output()
        .await
        .expect("apply");
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    let repo = work.path().join("b-long");
    let fixed = std::fs::read_to_string(repo.join("pagination.py")).expect("read");
    assert!(fixed.contains("-(-total_items // page_size)"), "{fixed}");
    assert!(
        support::containers_of_run(&local, &id).await.is_empty(),
        "the resumed run left containers on this machine's engine"
    );

    // The engine dies while a repository hook runs in the sandbox: the run
    // ends at once, saying so, as during a command, not as a hook that failed.
    engine.restart().await;
    let repo = work.path().join("hooked");
    std::fs::create_dir_all(repo.join(".minicoder")).expect("mkdir");
    let hooks = serde_json::json!({"hooks": {"PostToolUse": [{"matcher": "run_shell",
        "hooks": [{"type": "command", "command": "sleep 150"}]}]}});
    std::fs::write(repo.join(".minicoder/hooks.json"), hooks.to_string()).expect("hooks");
    minicoder::cli::demo::write_fixture(&repo).expect("fixture");
    let going = tokio::spawn(
        command(&[
            "--engine".as_ref(),
            "two".as_ref(),
            "run".as_ref(),
            "--non-interactive".as_ref(),
            "--trust-project".as_ref(),
            "--script".as_ref(),
            demo.as_os_str(),
            repo.as_os_str(),
            "fix the pagination bug".as_ref(),
        ])
        .output(),
    );
    running_on(&client, "sleep 150").await;
    engine.kill();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), going)
        .await
        .expect("the run did not end after its engine died during a hook")
        .expect("join")
        .expect("run");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains("Docker is not reachable") && said.contains("engine two (tcp://"),
        "{said}"
    );
    // Ended at the hook: the model was never asked again.
    let report = report_of(&out);
    let dir = std::path::PathBuf::from(report["artifact_dir"].as_str().expect("artifacts"));
    let events = std::fs::read_to_string(dir.join("events.jsonl")).expect("events");
    let asked = events
        .lines()
        .filter(|l| l.contains("\"type\":\"model.request\""))
        .count();
    assert_eq!(asked, 1, "{events}");
}
