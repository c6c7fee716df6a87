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

#[tokio::test(flavor = "multi_thread")]
async fn a_run_whose_engine_dies_ends_saying_so_and_a_resume_here_finishes_it() {
    let Some(local) = support::docker_or_skip().await else {
        return;
    };
    let Some(mut engine) = TlsEngine::for_runs_or_skip(&local).await else {
        return;
    };
    let image = minicoder::sandbox::spec::image_from_env();
    tokio::task::block_in_place(|| engine.load_image(&image));
    let (config, state, repo) = (
        tempfile::tempdir().expect("config"),
        support::state_dir(),
        tempfile::tempdir().expect("repo"),
    );
    std::fs::write(
        config.path().join("config.toml"),
        format!(
            "[engines.two]\nhost = {:?}\ncert_path = {:?}\n",
            engine.host, engine.cert_dir
        ),
    )
    .expect("config.toml");
    minicoder::cli::demo::write_fixture(repo.path()).expect("fixture");
    let script = config.path().join("script.json");
    std::fs::write(&script, SCRIPT_WITH_A_LONG_COMMAND).expect("script");
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
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    let run = command(&[
        os("--engine"),
        os("two"),
        os("run"),
        os("--non-interactive"),
        os("--script"),
        script.as_os_str(),
        repo.path().as_os_str(),
        os("fix the pagination bug"),
    ])
    .output();
    let run = tokio::spawn(run);

    // Once the long command runs on the second engine, the engine dies.
    let client = engine.client();
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
                if rows.iter().flatten().any(|cell| cell.contains("sleep 120")) {
                    return;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(120), running)
        .await
        .expect("the long command never ran on the second engine");
    engine.kill();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .expect("the run did not end after its engine died")
        .expect("join")
        .expect("run");
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let report: serde_json::Value = serde_json::from_slice(
        out.stdout
            .split(|b| *b == b'\n')
            .rfind(|l| !l.is_empty())
            .expect("a report line"),
    )
    .expect("the report");
    let reason = report["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("Docker is not reachable")
            && reason.contains("engine two (tcp://")
            && reason.contains("stopped answering while a command ran"),
        "{said}"
    );
    assert!(
        !said.contains("killed by signal"),
        "an engine gone is not a command killed: {said}"
    );
    let id = report["run_id"].as_str().expect("run id").to_string();

    // Resumed on this machine's engine, the run finishes, and its patch applies.
    let id_arg = std::ffi::OsString::from(&id);
    let resumed = command(&[
        os("resume"),
        &id_arg,
        os("--non-interactive"),
        os("--script"),
        script.as_os_str(),
    ])
    .output()
    .await
    .expect("resume");
    let said = text(&resumed);
    assert_eq!(resumed.status.code(), Some(0), "{said}");
    let applied = command(&[os("apply"), &id_arg])
        .output()
        .await
        .expect("apply");
    assert_eq!(applied.status.code(), Some(0), "{}", text(&applied));
    let fixed = std::fs::read_to_string(repo.path().join("pagination.py")).expect("read");
    assert!(fixed.contains("-(-total_items // page_size)"), "{fixed}");
    assert!(
        support::containers_of_run(&local, &id).await.is_empty(),
        "the resumed run left containers on this machine's engine"
    );
}
