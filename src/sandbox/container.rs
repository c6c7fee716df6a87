//! [`CommandContainer`]: one long-lived container per run. Its PID 1 is the
//! supervisor (`sandbox/supervisor.py`), which receives each command over the
//! attach stream, runs it in its own session as the sandbox user, streams its
//! output back, and afterwards kills every other process and empties `/tmp`,
//! home and `/dev/shm`. A command costs a few milliseconds instead of the
//! ~350 ms of a fresh container, with the same "no survivors, no leftovers"
//! guarantee.

use std::pin::Pin;
use std::time::{Duration, Instant};

use bollard::Docker;
use bollard::container::LogOutput;
use bollard::query_parameters::{
    AttachContainerOptions, CreateContainerOptions, InspectContainerOptions, RemoveContainerOptions,
};
use bytes::{Buf, BytesMut};
use futures_util::{Stream, StreamExt};
use serde::Deserialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::SandboxError;
use super::output::{CapturedStream, STREAM_CAP, StreamCapture};
use super::spec::{ContainerSpec, WORKSPACE_MOUNT};

/// The supervisor program, passed on the command line so any image with
/// python3 works and the supervisor always matches this binary.
pub(crate) const SUPERVISOR: &str = include_str!("../../sandbox/supervisor.py");

/// The per-command timeout every run gets unless it sets its own.
pub(crate) const DEFAULT_COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the host waits past a command's timeout before it gives up on the
/// supervisor and replaces the container.
const SUPERVISOR_GRACE: Duration = Duration::from_secs(10);
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The supervisor stops forwarding a stream past this many bytes.
const DEFAULT_SPOOL_LIMIT: u64 = 64 << 20;
const MAX_FRAME: usize = 16 << 20;

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandRequest {
    /// Run with `/bin/sh -c`.
    pub command: String,
    /// Relative to the workspace root; `.` by default.
    pub cwd: String,
    pub timeout: Duration,
    /// Where to spool the full output of each stream, if anywhere.
    pub spool_stdout: Option<std::path::PathBuf>,
    pub spool_stderr: Option<std::path::PathBuf>,
    /// When this holds a reason, the command is stopped at once (a
    /// workspace limit was crossed).
    pub stop: Option<tokio::sync::watch::Receiver<Option<String>>>,
    /// The program itself, instead of `/bin/sh -c command` (the sandbox's
    /// own helpers).
    argv: Option<Vec<String>>,
    /// Asks only the image, never the workspace: on an engine that keeps
    /// the workspace, nothing is synced around it (it may run while the
    /// copy here is still being made).
    image_only: bool,
}

impl CommandRequest {
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            cwd: ".".into(),
            timeout: DEFAULT_COMMAND_TIMEOUT,
            spool_stdout: None,
            spool_stderr: None,
            stop: None,
            argv: None,
            image_only: false,
        }
    }

    /// The command asks only the image (which programs it has), never the
    /// workspace.
    pub(crate) fn image_only(mut self) -> Self {
        self.image_only = true;
        self
    }

    /// Stops the command as soon as `stop` holds a reason.
    pub(crate) fn stop_on(mut self, stop: tokio::sync::watch::Receiver<Option<String>>) -> Self {
        self.stop = Some(stop);
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn cwd(mut self, cwd: impl Into<String>) -> Self {
        self.cwd = cwd.into();
        self
    }

    /// Spools the full streams to `<dir>/<stem>.stdout` and `.stderr`.
    pub fn spool_to(mut self, dir: &std::path::Path, stem: &str) -> Self {
        self.spool_stdout = Some(dir.join(format!("{stem}.stdout")));
        self.spool_stderr = Some(dir.join(format!("{stem}.stderr")));
        self
    }
}

/// How a command ended.
#[derive(Debug, Clone)]
pub struct CommandOutcome {
    pub exit_code: Option<i32>,
    /// The signal that ended it, if any (9 for a kill, including the OOM killer).
    pub signal: Option<i32>,
    pub timed_out: bool,
    /// Why the host stopped the command, if it did.
    pub stopped: Option<String>,
    pub duration: Duration,
    pub stdout: CapturedStream,
    pub stderr: CapturedStream,
    /// Set when the container had to be replaced (the supervisor died, was
    /// stuck, or could not clean up); the next command gets a fresh one.
    pub container_replaced: Option<String>,
    /// A workspace limit the command crossed but ended before it could be
    /// stopped for it (a write quicker than a poll).
    pub limit_after: Option<String>,
}

impl CommandOutcome {
    /// Exit 0, in time, within every limit.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
            && !self.timed_out
            && self.stopped.is_none()
            && self.limit_after.is_none()
    }

    /// The workspace limit the command crossed, whether it was stopped for
    /// it or ended first.
    pub fn limit_crossed(&self) -> Option<&str> {
        self.stopped.as_deref().or(self.limit_after.as_deref())
    }
}

#[derive(Debug, Deserialize)]
struct ExitFrame {
    id: Option<u64>,
    exit_code: Option<i32>,
    signal: Option<i32>,
    #[serde(default)]
    timed_out: bool,
    #[serde(default)]
    stopped: Option<String>,
    #[serde(default)]
    stdout_bytes: u64,
    #[serde(default)]
    stderr_bytes: u64,
    #[serde(default = "yes")]
    clean: bool,
    error: Option<String>,
}

fn yes() -> bool {
    true
}

type OutputStream = Pin<Box<dyn Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>>;

/// A running container with its supervisor ready.
struct Live {
    id: String,
    input: Pin<Box<dyn AsyncWrite + Send>>,
    output: OutputStream,
    buf: BytesMut,
    /// What the supervisor itself wrote on stderr (diagnostics).
    diagnostics: Vec<u8>,
    /// A command was sent and its exit frame not read (its future was dropped).
    busy: bool,
    /// The workspace's volumes on an engine that does not see this
    /// machine's files, and what was last synced with them.
    remote: Option<remote::Remote>,
}

enum Frame {
    Ready,
    Stdout(bytes::Bytes),
    Stderr(bytes::Bytes),
    Exit(ExitFrame),
}

/// A run's command container. Commands run one at a time (`&mut self`).
pub struct CommandContainer {
    docker: Docker,
    spec: ContainerSpec,
    live: Option<Live>,
    /// The last measurement of what the container writes on the host.
    meter: crate::workspace::limits::Meter,
    next_id: u64,
}

impl CommandContainer {
    /// Creates and starts the container and waits for its supervisor.
    pub async fn start(docker: Docker, spec: ContainerSpec) -> Result<Self, SandboxError> {
        let mut container = Self {
            docker,
            spec,
            live: None,
            meter: Default::default(),
            next_id: 1,
        };
        container.live = Some(Self::launch(&container.docker, &container.spec).await?);
        Ok(container)
    }

    /// The Docker id of the current container, if one is running.
    pub fn container_id(&self) -> Option<&str> {
        self.live.as_ref().map(|l| l.id.as_str())
    }

    pub fn spec(&self) -> &ContainerSpec {
        &self.spec
    }

    // `launch`, `attach_and_start` and `lost_reason` borrow only `Sync` parts,
    // never `&self` (its output stream is `Send` but not `Sync`), so that the
    // futures of `start` and `run` are `Send` and can be spawned.
    async fn launch(docker: &Docker, spec: &ContainerSpec) -> Result<Live, SandboxError> {
        let name = format!(
            "minicoder-{}-{}-{}",
            crate::ids::file_safe(&spec.run_id, 40),
            spec.role.as_str(),
            crate::ids::random_hex(4)
        );
        let cmd = ["python3", "-I", "-S", "-c", SUPERVISOR]
            .map(String::from)
            .to_vec();
        let volumes = match spec.remote_files {
            true => Some(remote::create_volumes(docker, spec, &name).await?),
            false => None,
        };
        let created = docker
            .create_container(
                Some(CreateContainerOptions {
                    name: Some(name),
                    ..Default::default()
                }),
                spec.create_body_with(cmd, volumes.as_ref()),
            )
            .await
            .map_err(|e| match e {
                bollard::errors::Error::DockerResponseServerError {
                    status_code: 404, ..
                } => SandboxError::ImageMissing {
                    image: spec.image.clone(),
                },
                e => SandboxError::docker("create the command container", e),
            });
        let created = match created {
            Ok(created) => created,
            Err(e) => {
                remote::remove_volumes(docker, volumes.as_ref()).await;
                return Err(e);
            }
        };
        let id = created.id;
        match Self::attach_and_start(docker, &id).await {
            Ok(mut live) => {
                live.remote = volumes.map(|v| remote::Remote::new(v, spec));
                Ok(live)
            }
            Err(e) => {
                remove(docker, &id).await;
                remote::remove_volumes(docker, volumes.as_ref()).await;
                Err(e)
            }
        }
    }

    async fn attach_and_start(docker: &Docker, id: &str) -> Result<Live, SandboxError> {
        let attached = docker
            .attach_container(
                id,
                Some(AttachContainerOptions {
                    stdin: true,
                    stdout: true,
                    stderr: true,
                    stream: true,
                    logs: false,
                    ..Default::default()
                }),
            )
            .await
            .map_err(|e| SandboxError::docker("attach to the command container", e))?;
        docker
            .start_container(id, None)
            .await
            .map_err(|e| SandboxError::docker("start the command container", e))?;
        let mut live = Live {
            id: id.to_string(),
            input: attached.input,
            output: attached.output,
            buf: BytesMut::with_capacity(64 << 10),
            diagnostics: Vec::new(),
            busy: false,
            remote: None,
        };
        let ready = tokio::time::timeout(START_TIMEOUT, next_frame(&mut live)).await;
        match ready {
            Ok(Ok(Frame::Ready)) => Ok(live),
            Ok(Ok(_)) => Err(SandboxError::SupervisorStart(
                "the first frame was not the ready signal".into(),
            )),
            Ok(Err(e)) => Err(SandboxError::SupervisorStart(format!(
                "{e}{}",
                diagnostics_suffix(&live.diagnostics)
            ))),
            Err(_) => Err(SandboxError::SupervisorStart(format!(
                "no ready signal within {}s{}",
                START_TIMEOUT.as_secs(),
                diagnostics_suffix(&live.diagnostics)
            ))),
        }
    }

    /// Holds every later command to `limits` (the workspace's size and entry
    /// count and the disk's free-space floor), or to none.
    pub fn set_limits(&mut self, limits: Option<crate::workspace::WorkspaceLimits>) {
        self.spec.workspace_limits = limits;
        if let Some(limits) = &limits {
            self.sync_limits(limits);
        }
        if limits.is_some() {
            // The first measurement is made now, off the first command's path.
            self.meter.prime(self.watched_roots());
        }
    }

    /// What the container can write on the host: the workspace, and for the
    /// bootstrap the dependency folder too.
    fn watched_roots(&self) -> Vec<std::path::PathBuf> {
        let mut roots = vec![self.spec.workspace.clone()];
        if self.spec.role == super::spec::Role::Bootstrap {
            roots.extend(self.spec.deps.clone());
        }
        roots
    }

    /// Runs one command and returns how it ended. A command that fails, times
    /// out, is killed or is stopped at a workspace limit is an `Ok` outcome;
    /// `Err` means the sandbox itself failed (Docker gone, image missing,
    /// spool not writable).
    ///
    /// This is where the workspace limits hold, for every role alike — the
    /// agent's commands, the bootstrap, each verification check: with
    /// limits in the spec, a watchdog measures what the container can write
    /// on the host (the workspace, and for the bootstrap the dependency
    /// directory too) while the command runs and stops it at the first limit
    /// crossed (see [`crate::workspace::limits`]). A request that brings its
    /// own stop signal is watched by whoever gave it.
    pub async fn run(&mut self, req: CommandRequest) -> Result<CommandOutcome, SandboxError> {
        // On a remote engine the limits are its volumes' own (tmpfs size and
        // entries), and what comes back is counted against them.
        let watched = !self.spec.remote_files && req.stop.is_none();
        let Some(limits) = self.spec.workspace_limits.filter(|_| watched) else {
            return self.run_unwatched(req).await;
        };
        let watchdog =
            crate::workspace::limits::Watchdog::start(self.watched_roots(), limits, &self.meter)
                .await;
        let req = req.stop_on(watchdog.stop.clone());
        let outcome = self.run_unwatched(req).await;
        let after = watchdog.finish().await;
        let mut outcome = outcome?;
        if outcome.stopped.is_none() {
            outcome.limit_after = after;
        }
        Ok(outcome)
    }

    async fn run_unwatched(&mut self, req: CommandRequest) -> Result<CommandOutcome, SandboxError> {
        container_cwd(&req.cwd)?;
        let mut replaced_before = None;
        if self.live.as_ref().is_some_and(|l| l.busy) {
            // An earlier command was abandoned mid-flight (its future was
            // dropped): its container is in an unknown state.
            self.discard().await;
            replaced_before = Some("an earlier command was interrupted".to_string());
        }
        if self.live.is_none() {
            self.live = Some(Self::launch(&self.docker, &self.spec).await?);
        }
        let sync = !req.image_only;
        if sync {
            self.push().await?;
        }
        let mut outcome = self.exchange(req).await?;
        if sync && outcome.container_replaced.is_none() {
            self.pull(&mut outcome).await?;
        }
        outcome.container_replaced = replaced_before.or(outcome.container_replaced.take());
        Ok(outcome)
    }

    /// Sends one request to the supervisor of the live container and reads
    /// its output and exit.
    async fn exchange(&mut self, req: CommandRequest) -> Result<CommandOutcome, SandboxError> {
        let cwd = container_cwd(&req.cwd)?;
        let id = self.next_id;
        self.next_id += 1;
        let argv = req
            .argv
            .clone()
            .unwrap_or_else(|| vec!["/bin/sh".into(), "-c".into(), req.command.clone()]);
        let request = serde_json::json!({
            "id": id,
            "argv": argv,
            "cwd": cwd,
            "env": self.spec.env(),
            "timeout_ms": req.timeout.as_millis() as u64,
            "spool_limit": DEFAULT_SPOOL_LIMIT,
        });
        let mut line = serde_json::to_vec(&request)
            .map_err(|e| SandboxError::Protocol(format!("encoding the request: {e}")))?;
        line.push(b'\n');

        let started = Instant::now();
        let mut stdout = StreamCapture::new(STREAM_CAP, req.spool_stdout.clone());
        let mut stderr = StreamCapture::new(STREAM_CAP, req.spool_stderr.clone());
        let Some(live) = self.live.as_mut() else {
            return Err(SandboxError::ContainerLost("no container".into()));
        };
        live.busy = true;
        if let Err(e) = send(live, &line).await {
            self.discard().await;
            return Err(SandboxError::ContainerLost(format!(
                "sending the command: {e}"
            )));
        }
        let deadline = req.timeout + SUPERVISOR_GRACE;
        let mut stop = req.stop.clone();
        let waited = tokio::time::timeout(deadline, async {
            loop {
                let frame = match stop.as_mut() {
                    Some(rx) => tokio::select! {
                        frame = next_frame(live) => frame?,
                        changed = rx.changed() => {
                            let reason = if changed.is_ok() { rx.borrow().clone() } else { None };
                            match reason {
                                Some(reason) => {
                                    let mut line = serde_json::to_vec(
                                        &serde_json::json!({"stop": id, "reason": reason}),
                                    )
                                    .map_err(|e| SandboxError::Protocol(e.to_string()))?;
                                    line.push(b'\n');
                                    send(live, &line).await.map_err(|e| {
                                        SandboxError::ContainerLost(format!("stopping the command: {e}"))
                                    })?;
                                    stop = None;
                                }
                                // The watchdog is gone: wait without it.
                                None if changed.is_err() => stop = None,
                                None => {}
                            }
                            continue;
                        }
                    },
                    None => next_frame(live).await?,
                };
                match frame {
                    Frame::Stdout(b) => stdout.push(&b)?,
                    Frame::Stderr(b) => stderr.push(&b)?,
                    Frame::Exit(exit) => return Ok::<_, SandboxError>(exit),
                    Frame::Ready => {}
                }
            }
        })
        .await;
        let duration = started.elapsed();
        let (exit, replaced) = self.settle(waited, id).await?;
        Ok(CommandOutcome {
            exit_code: exit.exit_code,
            signal: exit.signal,
            timed_out: exit.timed_out,
            stopped: exit.stopped,
            duration,
            stdout: stdout.finish(exit.stdout_bytes)?,
            stderr: stderr.finish(exit.stderr_bytes)?,
            container_replaced: replaced,
            limit_after: None,
        })
    }

    /// What the wait for command `id` came to: its exit frame and, when the
    /// container had to be replaced, why. A lost container or a supervisor
    /// past its deadline is an exit too; a refusal or a protocol fault is not.
    async fn settle(
        &mut self,
        waited: Result<Result<ExitFrame, SandboxError>, tokio::time::error::Elapsed>,
        id: u64,
    ) -> Result<(ExitFrame, Option<String>), SandboxError> {
        match waited {
            Ok(Ok(exit)) => {
                if let Some(error) = exit.error {
                    self.discard().await;
                    return Err(SandboxError::Protocol(format!(
                        "the supervisor refused: {error}"
                    )));
                }
                if exit.id != Some(id) {
                    self.discard().await;
                    return Err(SandboxError::Protocol(format!(
                        "exit frame for command {:?}, expected {id}",
                        exit.id
                    )));
                }
                if let Some(l) = self.live.as_mut() {
                    l.busy = false;
                }
                let replaced = if exit.clean {
                    None
                } else {
                    self.discard().await;
                    Some("a process of the command could not be killed".to_string())
                };
                Ok((exit, replaced))
            }
            Ok(Err(SandboxError::ContainerLost(why))) => {
                if let Some(gone) = self
                    .engine_gone(&format!("stopped answering while a command ran: {why}"))
                    .await
                {
                    return Err(gone);
                }
                let why = match self.live.as_ref() {
                    Some(live) => {
                        let (id, diagnostics) = (live.id.clone(), live.diagnostics.clone());
                        lost_reason(&self.docker, &id, &diagnostics, why).await
                    }
                    None => why,
                };
                self.discard().await;
                Ok((killed_exit(false), Some(why)))
            }
            Ok(Err(e)) => {
                self.discard().await;
                Err(e)
            }
            Err(_) => {
                // A host lost without a word (no refused connection) shows
                // here, as a supervisor that never answered.
                if let Some(gone) = self.engine_gone("did not answer while a command ran").await {
                    return Err(gone);
                }
                self.discard().await;
                Ok((
                    killed_exit(true),
                    Some("the supervisor did not end the command in time".to_string()),
                ))
            }
        }
    }

    /// When the engine no longer answers, the error that says so (`what`
    /// it did): an engine that went away is not a command that was killed,
    /// and nothing more can run on it. What it held is `gc`'s.
    async fn engine_gone(&mut self, what: &str) -> Option<SandboxError> {
        if engine_answers(&self.docker).await {
            return None;
        }
        self.live = None;
        Some(SandboxError::DockerUnavailable {
            detail: format!("{} {what}", super::docker::which()),
        })
    }

    /// Removes the current container (and its volumes); the next command
    /// starts a fresh one.
    async fn discard(&mut self) {
        if let Some(live) = self.live.take() {
            remove(&self.docker, &live.id).await;
            remote::remove_volumes(&self.docker, live.remote.as_ref().map(|r| &r.volumes)).await;
        }
    }

    /// Stops and removes the container. Nothing of it is left afterwards.
    /// The workspace's watch closes meanwhile, on a thread of its own:
    /// closing an inotify instance waits for the kernel's grace period
    /// (about 10 ms), which is no reason to hold up the end of a run.
    pub async fn shutdown(mut self) {
        let meter = std::mem::take(&mut self.meter);
        let closing = tokio::task::spawn_blocking(move || drop(meter));
        self.discard().await;
        let _ = closing.await;
    }
}

#[path = "container_remote.rs"]
mod remote;

impl Drop for CommandContainer {
    fn drop(&mut self) {
        // Normal paths call `shutdown`; this covers early returns and panics.
        // If no runtime is left, `minicoder gc` removes the container later.
        if let Some(live) = self.live.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let docker = self.docker.clone();
            handle.spawn(async move {
                remove(&docker, &live.id).await;
                remote::remove_volumes(&docker, live.remote.as_ref().map(|r| &r.volumes)).await;
            });
        }
    }
}

/// Why the container went away, from Docker's record of it.
async fn lost_reason(docker: &Docker, id: &str, diagnostics: &[u8], fallback: String) -> String {
    let inspected = docker
        .inspect_container(id, None::<InspectContainerOptions>)
        .await;
    match inspected.ok().and_then(|c| c.state) {
        Some(state) if state.oom_killed == Some(true) => {
            "the container ran out of memory and was killed".to_string()
        }
        Some(state) => format!(
            "the container stopped (exit code {}){}",
            state.exit_code.unwrap_or(-1),
            diagnostics_suffix(diagnostics)
        ),
        None => fallback,
    }
}

/// Waits for a started container to end: its exit code (`None` if the
/// engine gave none). A non-zero exit arrives from the engine as an error
/// carrying the code; it is a code here.
pub(crate) async fn wait_exit(
    docker: &Docker,
    id: &str,
) -> Result<Option<i64>, bollard::errors::Error> {
    let mut wait =
        docker.wait_container(id, None::<bollard::query_parameters::WaitContainerOptions>);
    let mut code = None;
    while let Some(item) = wait.next().await {
        match item {
            Ok(r) => code = Some(r.status_code),
            Err(bollard::errors::Error::DockerContainerWaitError { code: c, .. }) => code = Some(c),
            Err(e) => return Err(e),
        }
    }
    Ok(code)
}

/// Whether the engine still answers a ping (within [`ENGINE_PATIENCE`]).
pub(crate) async fn engine_answers(docker: &Docker) -> bool {
    matches!(
        tokio::time::timeout(ENGINE_PATIENCE, docker.ping()).await,
        Ok(Ok(_))
    )
}

/// How long an engine that may be gone is given to answer a ping: one that
/// was stopped refuses the connection at once; a busy one is slow, not gone.
const ENGINE_PATIENCE: Duration = Duration::from_secs(10);

/// How often a removal is asked for before it is left to `gc`.
const REMOVE_ATTEMPTS: u32 = 6;

/// Force-removes a container (SIGKILL, no stop grace period) and returns
/// once it is gone. The engine refuses a removal while another is under way
/// (409) and can fail one on a busy disk; either is asked again, after a
/// pause that doubles (1.5 s in all), until the engine says there is no such
/// container.
pub(crate) async fn remove(docker: &Docker, id: &str) {
    let options = RemoveContainerOptions {
        force: true,
        v: true,
        ..Default::default()
    };
    let mut pause = Duration::from_millis(50);
    for attempt in 1..=REMOVE_ATTEMPTS {
        match docker.remove_container(id, Some(options.clone())).await {
            Ok(()) => return,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => return,
            Err(e) if attempt == REMOVE_ATTEMPTS || super::error::is_connection_error(&e) => {
                tracing::warn!("removing container {id}: {e}; `minicoder gc` removes it later");
                return;
            }
            Err(e) => {
                tracing::debug!("removing container {id} (attempt {attempt}): {e}");
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
    }
}

async fn send(live: &mut Live, line: &[u8]) -> std::io::Result<()> {
    live.input.write_all(line).await?;
    live.input.flush().await
}

/// Reads the next supervisor frame, pulling from the attach stream as needed.
async fn next_frame(live: &mut Live) -> Result<Frame, SandboxError> {
    loop {
        if let Some(frame) = parse_frame(&mut live.buf)? {
            return Ok(frame);
        }
        match live.output.next().await {
            Some(Ok(LogOutput::StdOut { message })) => live.buf.extend_from_slice(&message),
            Some(Ok(LogOutput::StdErr { message })) => {
                tracing::debug!("supervisor: {}", String::from_utf8_lossy(&message));
                let keep = 8192usize.saturating_sub(live.diagnostics.len());
                live.diagnostics
                    .extend_from_slice(&message[..keep.min(message.len())]);
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(SandboxError::ContainerLost(e.to_string())),
            None => {
                return Err(SandboxError::ContainerLost(
                    "the attach stream ended".to_string(),
                ));
            }
        }
    }
}

fn parse_frame(buf: &mut BytesMut) -> Result<Option<Frame>, SandboxError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > MAX_FRAME {
        return Err(SandboxError::Protocol(format!("frame of {len} bytes")));
    }
    if buf.len() < 5 + len {
        return Ok(None);
    }
    let kind = buf[0];
    buf.advance(5);
    let payload = buf.split_to(len).freeze();
    Ok(Some(match kind {
        b'R' => Frame::Ready,
        b'O' => Frame::Stdout(payload),
        b'E' => Frame::Stderr(payload),
        b'X' => Frame::Exit(
            serde_json::from_slice(&payload)
                .map_err(|e| SandboxError::Protocol(format!("exit frame: {e}")))?,
        ),
        other => {
            return Err(SandboxError::Protocol(format!(
                "unknown frame kind {other:#04x}"
            )));
        }
    }))
}

fn killed_exit(timed_out: bool) -> ExitFrame {
    ExitFrame {
        id: None,
        exit_code: None,
        signal: Some(9),
        timed_out,
        stopped: None,
        stdout_bytes: 0,
        stderr_bytes: 0,
        clean: false,
        error: None,
    }
}

/// Maps a workspace-relative cwd to its path in the container.
fn container_cwd(cwd: &str) -> Result<String, SandboxError> {
    let bad = || SandboxError::BadCwd {
        cwd: cwd.to_string(),
    };
    let path = std::path::Path::new(cwd);
    if path.is_absolute() {
        return Err(bad());
    }
    let mut out = String::from(WORKSPACE_MOUNT);
    for part in path.components() {
        match part {
            std::path::Component::Normal(p) => {
                out.push('/');
                out.push_str(p.to_str().ok_or_else(bad)?);
            }
            std::path::Component::CurDir => {}
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

fn diagnostics_suffix(diag: &[u8]) -> String {
    if diag.is_empty() {
        String::new()
    } else {
        format!(
            "; supervisor said: {}",
            String::from_utf8_lossy(diag).trim()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_incrementally() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(b"O\x00\x00\x00\x03ab");
        assert!(matches!(parse_frame(&mut buf), Ok(None)));
        buf.extend_from_slice(b"cX\x00\x00");
        assert!(matches!(parse_frame(&mut buf), Ok(Some(Frame::Stdout(b))) if &b[..] == b"abc"));
        let exit = br#"{"id":3,"exit_code":0,"signal":null,"timed_out":false}"#;
        buf.extend_from_slice(&(exit.len() as u32).to_be_bytes()[2..]);
        buf.extend_from_slice(exit);
        match parse_frame(&mut buf) {
            Ok(Some(Frame::Exit(e))) => {
                assert_eq!(e.id, Some(3));
                assert_eq!(e.exit_code, Some(0));
                assert!(e.clean);
            }
            _ => panic!("expected an exit frame"),
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn bad_frames_are_protocol_errors() {
        let mut buf = BytesMut::from(&b"Z\x00\x00\x00\x00"[..]);
        assert!(matches!(
            parse_frame(&mut buf),
            Err(SandboxError::Protocol(_))
        ));
        let mut buf = BytesMut::from(&b"O\xff\xff\xff\xff"[..]);
        assert!(matches!(
            parse_frame(&mut buf),
            Err(SandboxError::Protocol(_))
        ));
    }

    #[test]
    fn cwd_stays_in_the_workspace() {
        assert_eq!(container_cwd(".").ok().as_deref(), Some("/workspace"));
        assert_eq!(
            container_cwd("src/a").ok().as_deref(),
            Some("/workspace/src/a")
        );
        assert!(container_cwd("/etc").is_err());
        assert!(container_cwd("../x").is_err());
        assert!(container_cwd("a/../../x").is_err());
    }
}
