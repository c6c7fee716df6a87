//! The sandbox's limits and guarantees, against the real Docker engine.

use crate::support;

use std::time::Duration;

use minicoder::sandbox::{CommandContainer, CommandOutcome, CommandRequest};

async fn container(name: &str) -> Option<(CommandContainer, tempfile::TempDir)> {
    let docker = support::docker_or_skip().await?;
    let ws = support::workspace();
    let c = CommandContainer::start(docker, support::spec(ws.path(), name))
        .await
        .expect("start the command container");
    Some((c, ws))
}

async fn sh(c: &mut CommandContainer, cmd: &str) -> CommandOutcome {
    c.run(CommandRequest::new(cmd).timeout(Duration::from_secs(20)))
        .await
        .expect("the sandbox runs the command")
}

#[tokio::test]
async fn workspace_is_writable_and_visible_on_the_host() {
    let Some((mut c, ws)) = container("ws-write").await else {
        return;
    };
    let out = sh(
        &mut c,
        "echo hello > note.txt && mkdir -p d && echo x > d/y && id -u",
    )
    .await;
    assert!(out.success(), "{out:?}");
    assert_eq!(
        out.stdout.text().trim(),
        "10001",
        "commands run as the sandbox uid"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("note.txt")).expect("note"),
        "hello\n"
    );
    assert!(ws.path().join("d/y").exists());
    c.shutdown().await;
}

#[tokio::test]
async fn writes_outside_the_workspace_fail() {
    let Some((mut c, _ws)) = container("ro-root").await else {
        return;
    };
    for target in [
        "/etc/minicoder-probe",
        "/usr/bin/minicoder-probe",
        "/minicoder-probe",
    ] {
        let out = sh(&mut c, &format!("echo x > {target}")).await;
        assert!(!out.success(), "writing {target} must fail: {out:?}");
        assert!(
            out.stderr.text().contains("Read-only file system")
                || out.stderr.text().contains("Permission denied"),
            "{target}: {}",
            out.stderr.text()
        );
    }
    c.shutdown().await;
}

#[tokio::test]
async fn network_is_unreachable() {
    let Some((mut c, _ws)) = container("no-net").await else {
        return;
    };
    let out = sh(
        &mut c,
        r#"python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.connect(("192.0.2.1", 9))
    print("connected")
except OSError as e:
    print("error:", e.strerror)
'; ls /sys/class/net"#,
    )
    .await;
    let text = out.stdout.text();
    assert!(text.contains("error: Network is unreachable"), "{text}");
    assert_eq!(text.lines().last(), Some("lo"), "only loopback: {text}");
    c.shutdown().await;
}

#[tokio::test]
async fn no_host_environment_and_no_privileges() {
    // Cargo gives the test process these; the container must see none of
    // the host process's environment. (Not set here: other tests' threads
    // read the environment.)
    let manifest_dir =
        std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let Some((mut c, _ws)) = container("env").await else {
        return;
    };
    let out = sh(&mut c, "env; cat /proc/1/environ | tr '\\0' '\\n'; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status").await;
    let text = out.stdout.text();
    assert!(!text.contains("CARGO_MANIFEST_DIR"), "{text}");
    assert!(!text.contains("CARGO_PKG_NAME"), "{text}");
    assert!(!text.contains(&manifest_dir), "{text}");
    assert!(text.contains("HOME=/home/sandbox"), "{text}");
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    assert!(text.contains("NoNewPrivs:\t1"), "{text}");
    let sock = sh(
        &mut c,
        "ls -l /var/run/docker.sock /run/docker.sock 2>&1; true",
    )
    .await;
    assert!(
        sock.stdout.text().contains("No such file"),
        "{}",
        sock.stdout.text()
    );
    c.shutdown().await;
}

#[tokio::test]
async fn background_processes_do_not_survive() {
    let Some((mut c, _ws)) = container("survivors").await else {
        return;
    };
    let out = sh(
        &mut c,
        "setsid sleep 300 & nohup sleep 301 >/dev/null 2>&1 & (sleep 302 &) ; \
         sh -c 'sleep 303 & exit' ; \
         for i in $(seq 50); do [ $(ps -eo comm | grep -c sleep) -ge 4 ] && break; sleep 0.1; done; \
         ps -eo comm | grep -c sleep",
    )
    .await;
    assert_eq!(out.stdout.text().trim(), "4", "the sleeps ran: {out:?}");
    let after = sh(&mut c, "ps -eo pid,comm --no-headers").await;
    let text = after.stdout.text();
    assert!(!text.contains("sleep"), "a process survived: {text}");
    assert_eq!(text.lines().count(), 3, "only PID 1, sh and ps: {text}");
    c.shutdown().await;
}

#[tokio::test]
async fn tmp_and_home_do_not_survive() {
    let Some((mut c, _ws)) = container("leftovers").await else {
        return;
    };
    let out = sh(&mut c, "echo a > /tmp/f && mkdir -p /tmp/d/e && chmod 000 /tmp/d && echo b > ~/.rc && echo c > /dev/shm/s && ls -A /tmp ~ /dev/shm").await;
    assert!(out.success(), "{out:?}");
    assert!(out.stdout.text().contains(".rc"));
    let after = sh(&mut c, "ls -A /tmp ~ /dev/shm").await;
    let listed: Vec<&str> = after
        .stdout
        .head
        .split(|b| *b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok())
        .filter(|l| !l.is_empty() && !l.ends_with(':'))
        .collect();
    assert!(listed.is_empty(), "left over: {listed:?}");
    c.shutdown().await;
}

#[tokio::test]
async fn fork_bomb_is_contained_and_the_next_command_works() {
    let Some((mut c, _ws)) = container("forkbomb").await else {
        return;
    };
    let out = c
        .run(
            CommandRequest::new("bomb() { bomb | bomb & }; bomb; sleep 3")
                .timeout(Duration::from_secs(5)),
        )
        .await
        .expect("sandbox");
    assert!(
        !out.success() || out.duration < Duration::from_secs(6),
        "{out:?}"
    );
    let next = sh(
        &mut c,
        "echo alive; cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max",
    )
    .await;
    assert!(next.success(), "{next:?}");
    let text = next.stdout.text();
    assert!(text.starts_with("alive\n"), "{text}");
    assert_eq!(text.lines().nth(1), Some("128"), "{text}");
    let ps = sh(&mut c, "ps -eo pid,comm --no-headers").await;
    assert_eq!(
        ps.stdout.text().lines().count(),
        3,
        "only PID 1, sh and ps: {}",
        ps.stdout.text()
    );
    c.shutdown().await;
}

#[tokio::test]
async fn memory_hog_is_contained_and_the_next_command_works() {
    let Some((mut c, _ws)) = container("memhog").await else {
        return;
    };
    let out = sh(
        &mut c,
        "python3 -c 'b = []\nwhile True: b.append(bytearray(64 << 20))'",
    )
    .await;
    assert!(
        !out.success(),
        "a 1 GB limit cannot hold an endless allocation: {out:?}"
    );
    let killed = out.signal == Some(9) || out.exit_code == Some(137);
    let memory_error = out.stderr.text().contains("MemoryError");
    assert!(killed || memory_error, "{out:?}");
    let next = sh(&mut c, "echo alive").await;
    assert_eq!(next.stdout.text(), "alive\n", "{next:?}");
    c.shutdown().await;
}

#[tokio::test]
async fn a_command_past_its_timeout_is_killed_and_reported() {
    let Some((mut c, _ws)) = container("timeout").await else {
        return;
    };
    let out = c
        .run(
            CommandRequest::new("echo started; sleep 30; echo never")
                .timeout(Duration::from_millis(1500)),
        )
        .await
        .expect("sandbox");
    assert!(out.timed_out, "{out:?}");
    assert!(!out.success());
    assert_eq!(out.stdout.text(), "started\n");
    assert!(out.duration < Duration::from_secs(10), "{:?}", out.duration);
    let next = sh(&mut c, "ps -eo comm --no-headers | grep -c sleep || true").await;
    assert_eq!(next.stdout.text().trim(), "0");
    c.shutdown().await;
}

#[tokio::test]
async fn large_output_is_capped_in_memory_and_spooled_in_full() {
    let Some((mut c, _ws)) = container("bigout").await else {
        return;
    };
    let spool = tempfile::tempdir().expect("tempdir");
    let out = c
        .run(
            CommandRequest::new("head -c 5242880 /dev/zero | tr '\\0' 'a'; echo tail >&2")
                .timeout(Duration::from_secs(30))
                .spool_to(spool.path(), "cmd-1"),
        )
        .await
        .expect("sandbox");
    assert!(out.success(), "{out:?}");
    assert_eq!(
        out.stdout.head.len() + out.stdout.tail.len(),
        1 << 20,
        "1 MB kept in memory, head and tail"
    );
    assert_eq!(out.stdout.omitted, (5 << 20) - (1 << 20));
    assert_eq!(out.stdout.total_bytes, 5 << 20);
    assert!(out.stdout.truncated());
    let spooled = std::fs::read(spool.path().join("cmd-1.stdout")).expect("spool");
    assert_eq!(spooled.len(), 5 << 20);
    assert!(spooled.iter().all(|b| *b == b'a'));
    assert_eq!(out.stderr.text(), "tail\n");
    c.shutdown().await;
}

#[tokio::test]
async fn exit_codes_and_cwd_pass_through() {
    let Some((mut c, ws)) = container("exit").await else {
        return;
    };
    std::fs::create_dir(ws.path().join("sub")).expect("mkdir");
    let out = sh(&mut c, "exit 7").await;
    assert_eq!(out.exit_code, Some(7));
    let out = c
        .run(CommandRequest::new("pwd").cwd("sub"))
        .await
        .expect("sandbox");
    assert_eq!(out.stdout.text().trim(), "/workspace/sub");
    let out = sh(&mut c, "kill -TERM $$").await;
    assert_eq!(out.signal, Some(15), "{out:?}");
    c.shutdown().await;
}

#[tokio::test]
async fn shutdown_leaves_no_container() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let ws = support::workspace();
    let spec = support::spec(ws.path(), "teardown");
    let mut c = CommandContainer::start(docker.clone(), spec)
        .await
        .expect("start");
    let id = c.container_id().expect("running").to_string();
    // A process that ignores SIGTERM must not slow the teardown down.
    let _ = c
        .run(CommandRequest::new("trap '' TERM; sleep 100").timeout(Duration::from_millis(200)))
        .await;
    c.shutdown().await;
    let gone = docker.inspect_container(&id, None).await;
    assert!(gone.is_err(), "container {id} still exists");
}

/// Writes through a descriptor opened in a directory that is then removed
/// fire no event the watchdog's journal receives, while the file lives on
/// under another name: such a command is measured when it ends, and the
/// next one starts from the truth.
#[tokio::test]
async fn growth_through_a_removed_directory_is_caught() {
    let Some((mut c, ws)) = container("orphaned-descriptor").await else {
        return;
    };
    c.set_limits(Some(minicoder::workspace::WorkspaceLimits {
        max_bytes: 64 << 20,
        min_free_bytes: 1 << 30,
        ..Default::default()
    }));
    let out = sh(
        &mut c,
        "mkdir a && exec 3>a/f && ln a/f g && rm a/f && rmdir a && sleep 1 && head -c 200000000 /dev/zero >&3 && sleep 1 && echo wrote",
    )
    .await;
    let told = out.limit_crossed().unwrap_or_default().to_string();
    assert!(
        told.contains("over its size limit"),
        "{told:?}: {}",
        out.stdout.text()
    );
    let next = sh(&mut c, "rm g && echo gone").await;
    assert!(next.success(), "{:?}", next.limit_crossed());
    assert!(!ws.path().join("g").exists());
    c.shutdown().await;
}
