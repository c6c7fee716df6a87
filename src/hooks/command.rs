//! One command hook, run on the host: `sh -c COMMAND` in its own process
//! group, the input on its standard input, a timeout after which the whole
//! group is killed, at most [`MAX_OUTPUT`] bytes of each output kept (the
//! rest read and dropped, so the hook never blocks on a full pipe), and no
//! provider key or other secret-named variable in its environment.

use std::path::Path;
use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use super::HookSpec;

/// The most of a hook's standard output, and of its standard error, kept.
pub(crate) const MAX_OUTPUT: usize = 64 * 1024;

/// What running a hook gave (on the host, or in a run's container).
#[derive(Debug, Clone, Default)]
pub struct Ran {
    /// The exit status (`None`: killed by a signal, timed out or not started).
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub timed_out: bool,
    /// Why it could not be started.
    pub failed: Option<String>,
    /// Its standard output was longer than what is kept.
    pub truncated: bool,
}

/// Whether a variable of that name is kept out of a hook's environment.
pub(crate) fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["API_KEY", "APIKEY", "_TOKEN", "SECRET", "PASSWORD"]
        .iter()
        .any(|part| upper.contains(part))
}

pub(crate) async fn run(spec: &HookSpec, input: &[u8], cwd: &Path) -> Ran {
    let vars: Vec<_> = std::env::vars_os().collect();
    run_with_env(spec, input, cwd, vars.into_iter()).await
}

/// [`run`] with the environment `vars` (less its secret-named variables).
pub(crate) async fn run_with_env(
    spec: &HookSpec,
    input: &[u8],
    cwd: &Path,
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Ran {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(&spec.command)
        .current_dir(if cwd.is_dir() { cwd } else { Path::new("/") })
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    cmd.env_clear()
        .envs(vars.filter(|(name, _)| !is_secret_name(&name.to_string_lossy())));
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return Ran {
                failed: Some(format!("cannot start `sh -c`: {e}")),
                ..Ran::default()
            };
        }
    };
    // Whatever happens to this future (a timeout, a cancelled run, a
    // dropped apply), the hook's whole process group goes with it.
    let group = GroupGuard(child.id());
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let input = input.to_vec();
    let feeding = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input is fine.
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        }
    };
    // Read while the hook runs, so that it never waits on a full pipe.
    let readers =
        tokio::spawn(async move { tokio::join!(read_capped(stdout), read_capped(stderr)) });
    let abort = readers.abort_handle();
    let mut readers = readers;
    let status = tokio::select! {
        _ = tokio::time::sleep(spec.timeout) => None,
        (_, status) = async { tokio::join!(feeding, child.wait()) } => Some(status),
    };
    let Some(status) = status else {
        drop(group);
        abort.abort();
        return Ran {
            timed_out: true,
            ..Ran::default()
        };
    };
    // The hook has exited: what it left running may hold its output open,
    // so the output gets a moment more, then the group is killed.
    let read = match tokio::time::timeout(std::time::Duration::from_millis(500), &mut readers).await
    {
        Ok(read) => read,
        Err(_) => {
            drop(group);
            readers.await
        }
    };
    let ((stdout, truncated), (stderr, _)) = read.unwrap_or_default();
    Ran {
        exit: status.ok().and_then(|s| s.code()),
        stdout,
        stderr,
        truncated,
        ..Ran::default()
    }
}

/// Kills a hook's process group when dropped.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0.take());
    }
}

fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Reads `from` to its end, keeping the first [`MAX_OUTPUT`] bytes; with
/// whether there was more.
async fn read_capped(from: Option<impl AsyncRead + Unpin>) -> (String, bool) {
    let Some(mut from) = from else {
        return (String::new(), false);
    };
    let mut kept = Vec::new();
    let mut more = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = MAX_OUTPUT.saturating_sub(kept.len());
                more |= n > room;
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (String::from_utf8_lossy(&kept).into_owned(), more)
}
