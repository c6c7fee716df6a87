//! `minicoder sandbox probe`: creates disposable data, starts a command
//! container exactly as a run would, and proves each boundary of the sandbox with
//! a check that could fail.

use std::time::Duration;

use bollard::Docker;

use super::spec::{ContainerSpec, Role};
use super::{CommandContainer, CommandOutcome, CommandRequest, SandboxError};
use crate::state::StateDir;
use crate::workspace::WorkspaceLimits;
use crate::workspace::limits::Watchdog;

/// Set by the CLI in its own environment before the runtime starts, so the
/// probe can prove the container does not see it.
pub(crate) const HOST_SENTINEL_VAR: &str = "MINICODER_PROBE_SENTINEL";

/// One line of the probe's report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProbeCheck {
    pub name: &'static str,
    pub passed: bool,
    pub detail: String,
}

impl std::fmt::Display for ProbeCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mark = if self.passed { "[PASS]" } else { "[FAIL]" };
        write!(f, "{mark} {}: {}", self.name, self.detail)
    }
}

fn check(name: &'static str, passed: bool, detail: impl Into<String>) -> ProbeCheck {
    ProbeCheck {
        name,
        passed,
        detail: detail.into(),
    }
}

/// Runs every check; `report` is called as each one finishes.
pub(crate) async fn run_probe(
    docker: &Docker,
    image: &str,
    state: &StateDir,
    report: &mut dyn FnMut(&ProbeCheck),
) -> Result<Vec<ProbeCheck>, SandboxError> {
    let scratch = state.root().join("probe");
    crate::state::private_dir(&scratch).map_err(|e| SandboxError::Workspace {
        path: scratch.clone(),
        reason: e.to_string(),
    })?;
    let ws = tempfile::Builder::new()
        .prefix("ws-")
        .tempdir_in(&scratch)
        .map_err(|e| SandboxError::Workspace {
            path: scratch.clone(),
            reason: e.to_string(),
        })?;
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(
            ws.path(),
            Some(super::SANDBOX_UID),
            Some(super::SANDBOX_GID),
        )
        .map_err(|e| SandboxError::Workspace {
            path: ws.path().to_path_buf(),
            reason: e.to_string(),
        })?;
    }
    // A host file next to the workspace: the container must not reach it.
    let host_secret = scratch.join(format!("host-secret-{}", crate::ids::random_hex(4)));
    let _ = std::fs::write(&host_secret, "host only");

    let mut spec = ContainerSpec::new(
        image,
        ws.path(),
        format!("probe-{}", crate::ids::random_hex(4)),
    );
    spec.role = Role::Probe;
    let mut container = CommandContainer::start(docker.clone(), spec).await?;
    let container_id = container.container_id().unwrap_or_default().to_string();
    let mut checks = Vec::new();
    let mut push = |c: ProbeCheck, checks: &mut Vec<ProbeCheck>| {
        report(&c);
        checks.push(c);
    };

    let result = async {
        push(
            workspace_write(&mut container, ws.path()).await?,
            &mut checks,
        );
        push(
            outside_write(&mut container, &host_secret).await?,
            &mut checks,
        );
        push(network(&mut container).await?, &mut checks);
        push(docker_socket(&mut container).await?, &mut checks);
        push(host_env(&mut container).await?, &mut checks);
        push(unprivileged(&mut container).await?, &mut checks);
        push(scratch_executes(&mut container).await?, &mut checks);
        push(no_survivors(&mut container).await?, &mut checks);
        push(no_leftovers(&mut container).await?, &mut checks);
        push(pid_limit(&mut container).await?, &mut checks);
        push(memory_limit(&mut container).await?, &mut checks);
        push(timeout(&mut container).await?, &mut checks);
        push(
            workspace_size_limit(&mut container, ws.path()).await?,
            &mut checks,
        );
        push(
            workspace_file_limit(&mut container, ws.path()).await?,
            &mut checks,
        );
        Ok::<_, SandboxError>(())
    }
    .await;
    container.shutdown().await;
    let _ = std::fs::remove_file(&host_secret);
    result?;
    let gone = docker.inspect_container(&container_id, None).await.is_err();
    push(
        check(
            "nothing left behind",
            gone,
            if gone {
                "the probe's container was removed".to_string()
            } else {
                format!("container {container_id} still exists")
            },
        ),
        &mut checks,
    );
    Ok(checks)
}

async fn sh(
    c: &mut CommandContainer,
    cmd: &str,
    timeout: Duration,
) -> Result<CommandOutcome, SandboxError> {
    c.run(CommandRequest::new(cmd).timeout(timeout)).await
}

const T: Duration = Duration::from_secs(20);

async fn workspace_write(
    c: &mut CommandContainer,
    ws: &std::path::Path,
) -> Result<ProbeCheck, SandboxError> {
    let token = crate::ids::random_hex(8);
    let out = sh(c, &format!("echo {token} > /workspace/probe.txt"), T).await?;
    let read = std::fs::read_to_string(ws.join("probe.txt")).unwrap_or_default();
    let passed = out.success() && read.trim() == token;
    Ok(check(
        "workspace write allowed",
        passed,
        if passed {
            "a file written in /workspace is in the private workspace".to_string()
        } else {
            format!("exit {:?}, host read {read:?}", out.exit_code)
        },
    ))
}

async fn outside_write(
    c: &mut CommandContainer,
    host_secret: &std::path::Path,
) -> Result<ProbeCheck, SandboxError> {
    let secret = host_secret.display();
    let out = sh(
        c,
        &format!(
            "for f in /etc/probe /usr/probe /probe /var/probe; do (echo x > $f) 2>/dev/null && echo WROTE $f; done; \
             test -e '{secret}' && echo SEES_HOST; grep -q ' / [^ ]* ro[, ]' /proc/mounts && echo RO_ROOT"
        ),
        T,
    )
    .await?;
    let text = out.stdout.text();
    let passed = !text.contains("WROTE") && !text.contains("SEES_HOST") && text.contains("RO_ROOT");
    Ok(check(
        "write outside the workspace denied",
        passed,
        if passed {
            "root filesystem read-only; /etc, /usr, /, /var refused; host files invisible"
                .to_string()
        } else {
            text.trim().replace('\n', "; ")
        },
    ))
}

async fn network(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let out = sh(
        c,
        "python3 -c 'import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ntry:\n s.connect((\"192.0.2.1\",9)); print(\"CONNECTED\")\nexcept OSError as e: print(e.strerror)'; ls /sys/class/net | tr '\\n' ' '",
        T,
    )
    .await?;
    let text = out.stdout.text();
    let passed =
        text.contains("Network is unreachable") && text.lines().last().map(str::trim) == Some("lo");
    Ok(check(
        "network denied",
        passed,
        if passed {
            "UDP connect to 192.0.2.1 is unreachable; only loopback exists".to_string()
        } else {
            text.trim().replace('\n', "; ")
        },
    ))
}

async fn docker_socket(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let out = sh(
        c,
        "for s in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock; do test -e $s && echo FOUND $s; done; \
         env | grep -q '^DOCKER_' && echo FOUND_ENV; true",
        T,
    )
    .await?;
    let text = out.stdout.text();
    let passed = out.success() && !text.contains("FOUND");
    Ok(check(
        "Docker socket absent",
        passed,
        if passed {
            "no Docker or containerd socket and no DOCKER_* variable".to_string()
        } else {
            text.trim().replace('\n', "; ")
        },
    ))
}

async fn host_env(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    // PID 1 is undumpable, so its /proc environ is unreadable; `env` shows
    // exactly what a command gets.
    let out = sh(c, "env", T).await?;
    let inside: std::collections::HashSet<String> =
        out.stdout.text().lines().map(String::from).collect();
    let fixed = c.spec().env();
    let leaked: Vec<String> = std::env::vars()
        .filter(|(k, v)| fixed.get(k) != Some(v) && !(k == "PATH" || k == "HOME"))
        .filter(|(k, v)| inside.contains(&format!("{k}={v}")))
        .map(|(k, _)| k)
        .collect();
    let sentinel = std::env::var(HOST_SENTINEL_VAR).ok();
    let sentinel_seen = sentinel
        .as_ref()
        .is_some_and(|s| out.stdout.text().contains(s.as_str()));
    let passed = out.success() && leaked.is_empty() && !sentinel_seen;
    Ok(check(
        "host environment absent",
        passed,
        if passed {
            format!(
                "none of the host's {} variables reached the container{}",
                std::env::vars().count(),
                if sentinel.is_some() {
                    " (sentinel included)"
                } else {
                    ""
                }
            )
        } else {
            format!(
                "leaked: {}{}",
                leaked.join(", "),
                if sentinel_seen {
                    " and the sentinel"
                } else {
                    ""
                }
            )
        },
    ))
}

async fn unprivileged(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let out = sh(
        c,
        "id -u; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status",
        T,
    )
    .await?;
    let text = out.stdout.text();
    let uid = text.lines().next().unwrap_or("").trim().to_string();
    let passed = uid != "0"
        && !uid.is_empty()
        && text.contains("CapEff:\t0000000000000000")
        && text.contains("NoNewPrivs:\t1");
    Ok(check(
        "unprivileged user, no capabilities",
        passed,
        if passed {
            format!("uid {uid}, all capabilities dropped, no-new-privileges")
        } else {
            text.trim().replace('\n', "; ")
        },
    ))
}

/// `go test`, build scripts and lifecycle scripts run what they build in
/// `/tmp` and home: both must allow it.
async fn scratch_executes(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let out = sh(
        c,
        "for d in /tmp ~; do printf '#!/bin/sh\\necho ran-$1\\n' > $d/x.sh && chmod +x $d/x.sh && $d/x.sh $d; \
         cp /bin/true $d/t && $d/t && echo bin-$d; done",
        T,
    )
    .await?;
    let text = out.stdout.text();
    let home = super::spec::HOME_DIR;
    let passed = out.success()
        && ["ran-/tmp", "bin-/tmp"].iter().all(|w| text.contains(w))
        && text.contains(&format!("ran-{home}"))
        && text.contains(&format!("bin-{home}"));
    Ok(check(
        "scratch space executes",
        passed,
        if passed {
            "scripts and binaries written to /tmp and home run (emptied after each command)"
                .to_string()
        } else {
            format!(
                "exit {:?}: {}{}",
                out.exit_code,
                text.trim().replace('\n', "; "),
                out.stderr.text().trim().replace('\n', "; ")
            )
        },
    ))
}

async fn no_survivors(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let first = sh(
        c,
        "mkdir -p /tmp/bin && cp /bin/sleep /tmp/bin/sleep; \
         setsid sleep 300 & nohup sleep 301 >/dev/null 2>&1 & (sleep 302 &); (setsid /tmp/bin/sleep 303 &); \
         for i in $(seq 50); do [ $(ps -eo comm --no-headers | grep -c '^sleep') -ge 4 ] && break; sleep 0.1; done; \
         ps -eo comm --no-headers | grep -c '^sleep'",
        T,
    )
    .await?;
    let after = sh(c, "ps -eo comm --no-headers", T).await?;
    let started = first.stdout.text().trim() == "4";
    let survivors = after
        .stdout
        .text()
        .lines()
        .filter(|l| l.trim() == "sleep")
        .count();
    let passed = started && survivors == 0;
    Ok(check(
        "no survivors",
        passed,
        if passed {
            "setsid, nohup, double-forked and /tmp-executed processes are gone after the command"
                .to_string()
        } else {
            format!(
                "started: {}, surviving sleeps: {survivors}",
                first.stdout.text().trim()
            )
        },
    ))
}

async fn no_leftovers(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let first = sh(
        c,
        "echo x > /tmp/left && echo y > ~/left && echo z > /dev/shm/left && \
         printf '#!/bin/sh\\necho ran\\n' > /tmp/left-run && chmod +x /tmp/left-run && /tmp/left-run",
        T,
    )
    .await?;
    let after = sh(c, "ls -A /tmp ~ /dev/shm | grep -c left || true", T).await?;
    let passed = first.success() && after.stdout.text().trim() == "0";
    Ok(check(
        "no leftovers",
        passed,
        if passed {
            "files written to /tmp, home and /dev/shm (an executed one too) are gone for the next command"
                .to_string()
        } else {
            format!(
                "write exit {:?}, leftovers {}",
                first.exit_code,
                after.stdout.text().trim()
            )
        },
    ))
}

async fn pid_limit(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let bomb = sh(
        c,
        "bomb() { bomb | bomb & }; bomb; sleep 2",
        Duration::from_secs(4),
    )
    .await?;
    let next = sh(
        c,
        "echo alive; cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max; ps -e --no-headers -o pid",
        T,
    )
    .await?;
    let text = next.stdout.text();
    let mut lines = text.lines();
    let alive = lines.next() == Some("alive");
    let limit = lines.next().unwrap_or("").to_string();
    let processes = lines.count();
    // After the bomb: PID 1, sh and ps only.
    let passed =
        alive && limit == "128" && processes == 3 && bomb.duration < Duration::from_secs(15);
    Ok(check(
        "PID limit holds",
        passed,
        if passed {
            "pids.max is 128; a fork bomb was contained, cleared, and the next command ran"
                .to_string()
        } else {
            format!("alive {alive}, pids.max {limit:?}, {processes} processes after the bomb")
        },
    ))
}

async fn memory_limit(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let hog = sh(
        c,
        "python3 -c 'b=[]\nwhile True: b.append(bytearray(64<<20))'",
        T,
    )
    .await?;
    let next = sh(c, "echo alive", T).await?;
    // The OOM killer's SIGKILL reaches us as signal 9, or as 137 from `sh`.
    let killed = hog.signal == Some(9) || hog.exit_code == Some(137);
    let contained = killed || hog.stderr.text().contains("MemoryError");
    let passed = contained && next.stdout.text() == "alive\n";
    Ok(check(
        "memory limit holds",
        passed,
        if passed {
            "an endless allocation was stopped at 1 GB and the next command ran".to_string()
        } else {
            format!(
                "hog exit {:?} signal {:?}; next {:?}",
                hog.exit_code,
                hog.signal,
                next.stdout.text()
            )
        },
    ))
}

async fn timeout(c: &mut CommandContainer) -> Result<ProbeCheck, SandboxError> {
    let out = sh(c, "sleep 30", Duration::from_secs(1)).await?;
    let passed = out.timed_out && out.duration < Duration::from_secs(5);
    Ok(check(
        "command timeout enforced",
        passed,
        format!(
            "`sleep 30` with a 1 s limit ended after {:.1}s",
            out.duration.as_secs_f64()
        ),
    ))
}

/// Small limits, so the probe crosses them in a moment.
fn probe_limits() -> WorkspaceLimits {
    WorkspaceLimits {
        max_file_bytes: 1 << 20,
        max_bytes: 64 << 20,
        max_files: 2_000,
        min_free_bytes: 0,
        max_checkpoint_bytes: 64 << 20,
    }
}

/// Runs `cmd` watched by the workspace watchdog, then `cleanup` unwatched.
async fn watched(
    c: &mut CommandContainer,
    ws: &std::path::Path,
    cmd: &str,
    cleanup: &str,
) -> Result<CommandOutcome, SandboxError> {
    let meter = crate::workspace::limits::Meter::default();
    let watchdog = Watchdog::start(vec![ws.to_path_buf()], probe_limits(), &meter).await;
    let request = CommandRequest::new(cmd)
        .timeout(T)
        .stop_on(watchdog.stop.clone());
    let out = c.run(request).await;
    let _ = watchdog.finish().await;
    let out = out?;
    sh(c, cleanup, T).await?;
    Ok(out)
}

async fn workspace_size_limit(
    c: &mut CommandContainer,
    ws: &std::path::Path,
) -> Result<ProbeCheck, SandboxError> {
    let out = watched(
        c,
        ws,
        "while :; do head -c 4194304 /dev/zero >> /workspace/probe-fill; done",
        "rm -f /workspace/probe-fill",
    )
    .await?;
    let reason = out.stopped.clone().unwrap_or_default();
    let passed = reason.contains("over its size limit") && !out.timed_out;
    Ok(check(
        "workspace size limit enforced",
        passed,
        if passed {
            format!(
                "an endless write was stopped after {:.1}s: {reason}",
                out.duration.as_secs_f64()
            )
        } else {
            format!(
                "the endless write was not stopped at the limit (timed out: {}, exit {:?})",
                out.timed_out, out.exit_code
            )
        },
    ))
}

async fn workspace_file_limit(
    c: &mut CommandContainer,
    ws: &std::path::Path,
) -> Result<ProbeCheck, SandboxError> {
    let out = watched(
        c,
        ws,
        "mkdir -p /workspace/probe-many && cd /workspace/probe-many && \
         python3 -c 'import itertools\nfor i in itertools.count(): open(str(i), \"w\").close()'",
        "rm -rf /workspace/probe-many",
    )
    .await?;
    let reason = out.stopped.clone().unwrap_or_default();
    let passed = reason.contains("files and directories, over its limit") && !out.timed_out;
    Ok(check(
        "workspace file-count limit enforced",
        passed,
        if passed {
            format!(
                "endless file creation was stopped after {:.1}s: {reason}",
                out.duration.as_secs_f64()
            )
        } else {
            format!(
                "endless file creation was not stopped at the limit (timed out: {}, exit {:?})",
                out.timed_out, out.exit_code
            )
        },
    ))
}
