//! A workspace kept on the engine's side (`files = "remote"`): here on this
//! machine's engine, told with `spec.remote_files` that it does not see
//! this machine's files. The second engine's tests (`engines`) run a whole
//! fix that way over TLS.

use std::time::Duration;

use minicoder::sandbox::container::{CommandContainer, CommandOutcome, CommandRequest};

use crate::support;

async fn sh(c: &mut CommandContainer, cmd: &str) -> CommandOutcome {
    c.run(CommandRequest::new(cmd).timeout(Duration::from_secs(30)))
        .await
        .expect("the sandbox runs the command")
}

#[tokio::test]
async fn a_workspace_on_the_engine_is_kept_in_step_with_this_machines_copy_both_ways() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let ws = support::workspace();
    let root = ws.path();
    std::fs::write(root.join("a.txt"), "from this machine\n").expect("write");
    std::fs::create_dir_all(root.join("old/deep")).expect("mkdir");
    std::fs::write(root.join("old/deep/x"), "x").expect("write");
    let mut spec = support::spec(root, "remote-ws");
    spec.remote_files = true;
    spec.workspace_limits = Some(Default::default());
    let run_id = spec.run_id.clone();
    let mut c = CommandContainer::start(docker.clone(), spec)
        .await
        .expect("start");

    let out = sh(
        &mut c,
        "grep ' /workspace ' /proc/mounts; cat a.txt; echo made > b.txt; ln b.txt hard; rm -r old; \
         mkdir -p new/sub; ln -s ../b.txt new/sub/link; chmod 755 b.txt",
    )
    .await;
    assert!(
        out.success(),
        "{:?} {}",
        out.limit_crossed(),
        out.stderr.text()
    );
    let said = out.stdout.text();
    assert!(
        said.starts_with("tmpfs /workspace tmpfs "),
        "the workspace is the engine's volume: {said}"
    );
    assert!(said.contains("from this machine"), "{said}");
    assert_eq!(
        std::fs::read_to_string(root.join("b.txt")).expect("b"),
        "made\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("hard")).expect("a second name comes back too"),
        "made\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.join("b.txt"))
        .expect("b")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(!root.join("old").exists(), "a removal comes back too");
    assert_eq!(
        std::fs::read_link(root.join("new/sub/link")).expect("link"),
        std::path::Path::new("../b.txt")
    );

    // What changes here is what the next command sees there.
    std::fs::write(root.join("a.txt"), "edited here\n").expect("write");
    std::fs::remove_file(root.join("b.txt")).expect("rm");
    let out = sh(
        &mut c,
        "cat a.txt; test -e b.txt && echo still there || echo b gone",
    )
    .await;
    assert_eq!(out.stdout.text(), "edited here\nb gone\n");

    // A container lost mid-command loses nothing this side had.
    let id = c.container_id().expect("running").to_string();
    let killer = docker.clone();
    let kill = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        killer
            .kill_container(&id, None::<bollard::query_parameters::KillContainerOptions>)
            .await
    });
    let out = c
        .run(CommandRequest::new("echo partial > c.txt; sleep 20").timeout(Duration::from_secs(30)))
        .await
        .expect("run");
    kill.await.expect("join").expect("kill");
    assert!(out.container_replaced.is_some(), "{out:?}");
    let out = sh(&mut c, "cat a.txt; ls").await;
    assert!(
        out.stdout.text().starts_with("edited here\n"),
        "{}",
        out.stdout.text()
    );
    assert!(
        !out.stdout.text().contains("c.txt"),
        "a fresh container starts from this side"
    );

    c.shutdown().await;
    let left = support::containers_of_run(&docker, &run_id).await;
    assert!(left.is_empty(), "{left:?}");
    assert!(
        support::volumes_of_run(&docker, &run_id).await.is_empty(),
        "the volumes go with their container"
    );
}

#[tokio::test]
async fn a_command_writing_past_the_size_limit_on_the_engine_is_stopped_there_and_nothing_comes_back()
 {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let ws = support::workspace();
    let mut spec = support::spec(ws.path(), "remote-limit");
    spec.remote_files = true;
    spec.workspace_limits = Some(minicoder::workspace::WorkspaceLimits {
        max_bytes: 8 << 20,
        max_files: 100,
        ..Default::default()
    });
    let run_id = spec.run_id.clone();
    let mut c = CommandContainer::start(docker.clone(), spec)
        .await
        .expect("start");
    let out = sh(&mut c, "head -c 400000000 /dev/zero > big; echo exit $?").await;
    let told = out.limit_crossed().unwrap_or_default().to_string();
    assert!(told.contains("limit"), "{told:?}: {}", out.stdout.text());
    assert!(
        out.stdout.text().contains("exit 1"),
        "the engine's tmpfs refused the write: {}",
        out.stdout.text()
    );
    let big = std::fs::metadata(ws.path().join("big"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(big <= 8 << 20, "{big} bytes came back");
    // Past the entry limit too.
    let out = sh(
        &mut c,
        "rm -f big; for i in $(seq 300); do : > f$i; done; echo done",
    )
    .await;
    assert!(out.limit_crossed().is_some(), "{}", out.stdout.text());
    c.shutdown().await;
    assert!(support::volumes_of_run(&docker, &run_id).await.is_empty());
}
