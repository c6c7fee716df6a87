//! Where [`super::super::remote_files`] happens around each command of a
//! container whose workspace lives on its engine: the push before it, the
//! pull after it, the volumes' life with the container's.

use std::time::Duration;

use super::{CommandContainer, CommandOutcome, CommandRequest, SandboxError};
use crate::sandbox::remote_files::{self, HostSide, SYNC_SCRIPT, Volumes};
use crate::sandbox::spec::ContainerSpec;

/// The volumes of one live container and this side's record of the sync.
#[derive(Debug)]
pub(super) struct Remote {
    pub(super) volumes: Volumes,
    /// Out only while a push or a pull works with it.
    host: Option<HostSide>,
}

impl Remote {
    /// Nothing synced yet: the first command's push sends the whole copy.
    pub(super) fn new(volumes: Volumes, spec: &ContainerSpec) -> Self {
        Self {
            volumes,
            host: Some(
                HostSide::new(&spec.workspace, spec.workspace_limits.as_ref())
                    .with_ca_bundle(spec.shipped_ca_bundle().map(|p| p.as_path())),
            ),
        }
    }
}

/// How long the sync's helper may take on the engine.
const HELPER_TIMEOUT: Duration = Duration::from_secs(300);

/// Free room under which the engine's workspace counts as full.
const FULL_BELOW_BYTES: u64 = 1 << 20;

/// Creates the volumes of the container called `name` (and the run's
/// dependency volume, once).
pub(super) async fn create_volumes(
    docker: &bollard::Docker,
    spec: &ContainerSpec,
    name: &str,
) -> Result<Volumes, SandboxError> {
    let volumes = Volumes::of(name);
    let labels = spec.labels();
    if let Some(deps) = spec.deps_volume() {
        // Creating a volume that exists is no error: it is the run's. A
        // tmpfs too: what the bootstrap installs is bounded there as the
        // workspace is, and leaves nothing on the engine's disk.
        let limits = spec.workspace_limits.unwrap_or(remote_files::UNLIMITED);
        let (bytes, entries) = remote_files::tmpfs_size(&limits);
        docker
            .create_volume(bollard::models::VolumeCreateRequest {
                name: Some(deps),
                driver: Some("local".to_string()),
                driver_opts: Some(remote_files::tmpfs_options(bytes, entries)),
                labels: Some(labels.clone()),
                ..Default::default()
            })
            .await
            .map_err(|e| SandboxError::docker("create the dependency volume", e))?;
    }
    if let Err(e) =
        remote_files::create(docker, &volumes, &labels, spec.workspace_limits.as_ref()).await
    {
        remote_files::remove(docker, &volumes).await;
        return Err(e);
    }
    Ok(volumes)
}

/// Removes a container's volumes once it is gone.
pub(super) async fn remove_volumes(docker: &bollard::Docker, volumes: Option<&Volumes>) {
    if let Some(volumes) = volumes {
        remote_files::remove(docker, volumes).await;
    }
}

fn helper(action: &[&str]) -> CommandRequest {
    let mut request = CommandRequest::new(String::new()).timeout(HELPER_TIMEOUT);
    // The image's own python3 where it is, not one the bootstrap put first
    // on the commands' PATH (`/deps/venv/bin`); the script and the action
    // go as arguments, never through a shell's parsing.
    let start = "if [ -x /usr/bin/python3 ]; then exec /usr/bin/python3 -I -S -c \"$0\" \"$@\"; \
                 else exec python3 -I -S -c \"$0\" \"$@\"; fi";
    let mut argv = ["/bin/sh", "-c", start, SYNC_SCRIPT]
        .map(String::from)
        .to_vec();
    argv.extend(action.iter().map(|a| a.to_string()));
    request.argv = Some(argv);
    request
}

/// The last lines of what a helper wrote on stderr, for a message.
fn said(outcome: &CommandOutcome) -> String {
    let text = outcome.stderr.text();
    let last = text.lines().rev().take(3).collect::<Vec<_>>();
    let why = last.into_iter().rev().collect::<Vec<_>>().join(" / ");
    let why = crate::terminal_text::clean_line(&why, 300);
    match (outcome.exit_code, why.is_empty()) {
        (Some(code), true) => format!("exit code {code}"),
        (None, true) => "no exit code".to_string(),
        (_, false) => why,
    }
}

/// What `sync.py` reports of the engine's workspace after a command.
#[derive(Debug, serde::Deserialize)]
struct Report {
    #[serde(default)]
    files: u64,
    #[serde(default)]
    bytes: u64,
    #[serde(default = "plenty")]
    free: u64,
    /// Past a limit: nothing was written to bring back.
    #[serde(default)]
    over: bool,
}

fn plenty() -> u64 {
    u64::MAX
}

impl Report {
    /// The limit the engine's workspace crosses, said as for a local one.
    fn crossed(&self, limits: &crate::workspace::WorkspaceLimits) -> Option<String> {
        let now = crate::workspace::Usage {
            bytes: self.bytes,
            files: self.files,
            free_bytes: None,
        };
        limits.crossed(&crate::workspace::Usage::default(), &now)
    }
}

impl Default for Report {
    /// Nothing said (a report that does not parse): nothing is concluded.
    fn default() -> Self {
        Self {
            files: 0,
            bytes: 0,
            free: plenty(),
            over: false,
        }
    }
}

impl CommandContainer {
    fn host_side(&mut self) -> Option<HostSide> {
        self.live.as_mut()?.remote.as_mut()?.host.take()
    }

    fn give_back(&mut self, host: HostSide) {
        if let Some(remote) = self.live.as_mut().and_then(|l| l.remote.as_mut()) {
            remote.host = Some(host);
        }
    }

    /// Sends what changed on this side since the last sync to the engine;
    /// a container that could not take it is replaced once and filled
    /// again, from this side, before the failure counts.
    pub(super) async fn push(&mut self) -> Result<(), SandboxError> {
        match self.push_once().await {
            Err(SandboxError::Protocol(why)) => {
                tracing::warn!("replacing the container after a failed sync: {why}");
                self.discard().await;
                self.live = Some(Self::launch(&self.docker, &self.spec).await?);
                self.push_once().await
            }
            done => done,
        }
    }

    async fn push_once(&mut self) -> Result<(), SandboxError> {
        // A sync whose future was dropped took the record with it: what the
        // engine holds is not known, so a fresh container starts from here.
        if self
            .live
            .as_ref()
            .and_then(|l| l.remote.as_ref())
            .is_some_and(|r| r.host.is_none())
        {
            self.discard().await;
            self.live = Some(Self::launch(&self.docker, &self.spec).await?);
        }
        let Some(host) = self.host_side() else {
            return Ok(());
        };
        let (mut host, packed) = tokio::task::spawn_blocking(move || {
            let packed = host.pack();
            (host, packed)
        })
        .await
        .map_err(|e| SandboxError::Protocol(format!("packing the workspace: {e}")))?;
        let sent = async {
            let packed = packed.map_err(|e| {
                SandboxError::Protocol(format!("reading the workspace to send it: {e}"))
            })?;
            let Some((tar, pending)) = packed else {
                return Ok(None);
            };
            let id = self.container_id().unwrap_or_default().to_string();
            remote_files::upload(&self.docker, &id, tar).await?;
            let applied = self.exchange(helper(&["apply"])).await?;
            if !applied.success() || applied.container_replaced.is_some() {
                return Err(SandboxError::Protocol(format!(
                    "the engine could not take the workspace: {}",
                    said(&applied)
                )));
            }
            Ok(Some(pending))
        }
        .await;
        match sent {
            Ok(pending) => {
                if let Some(pending) = pending {
                    host.pushed(pending);
                }
                self.give_back(host);
                Ok(())
            }
            Err(e) => {
                // What the engine holds is not known now: a fresh container
                // starts from this side again.
                self.discard().await;
                Err(e)
            }
        }
    }

    /// Holds what comes back to `limits` from now on.
    pub(super) fn sync_limits(&mut self, limits: &crate::workspace::WorkspaceLimits) {
        if let Some(host) = self
            .live
            .as_mut()
            .and_then(|l| l.remote.as_mut())
            .and_then(|r| r.host.as_mut())
        {
            host.set_limits(limits);
        }
    }

    /// Brings back what the command changed on the engine.
    pub(super) async fn pull(&mut self, outcome: &mut CommandOutcome) -> Result<(), SandboxError> {
        if self.live.as_ref().is_none_or(|l| l.remote.is_none()) {
            return Ok(());
        }
        let limits = self.spec.workspace_limits;
        let bounds = limits.unwrap_or(remote_files::UNLIMITED);
        let [max_bytes, max_files, max_file_bytes] =
            [bounds.max_bytes, bounds.max_files, bounds.max_file_bytes].map(|n| n.to_string());
        let collected = self
            .exchange(helper(&[
                "collect",
                &max_bytes,
                &max_files,
                &max_file_bytes,
            ]))
            .await?;
        let text = collected.stdout.text();
        let report: Report = serde_json::from_str(text.trim()).unwrap_or_default();
        if report.over {
            self.discard().await;
            let crossed = report.crossed(&bounds).unwrap_or_else(|| {
                format!(
                    "the workspace holds {} bytes in {} entries, over its limits",
                    report.bytes, report.files
                )
            });
            outcome.limit_after = Some(format!(
                "{crossed}, on the engine: what the command changed there was not brought \
                 back, and the next command starts from the workspace as it was before it"
            ));
            return Ok(());
        }
        if !collected.success() || collected.container_replaced.is_some() {
            self.discard().await;
            outcome.limit_after = Some(format!(
                "what the command changed could not be brought back from the engine ({}); \
                 the next command starts from the workspace as it was before it",
                said(&collected)
            ));
            return Ok(());
        }
        let Some(host) = self.host_side() else {
            return Ok(());
        };
        let id = self.container_id().unwrap_or_default().to_string();
        let cap = remote_files::download_cap(limits.as_ref());
        let file = match remote_files::download(&self.docker, &id, cap).await {
            Ok(file) => file,
            Err(e) => {
                self.discard().await;
                return Err(e);
            }
        };
        if let Some(why) = limits.and_then(|l| below_floor(&self.spec.workspace, &file, l)) {
            self.discard().await;
            outcome.limit_after = Some(why);
            return Ok(());
        }
        let (host, unpacked) = tokio::task::spawn_blocking(move || {
            let mut host = host;
            let unpacked = host.unpack(std::io::BufReader::new(file));
            (host, unpacked)
        })
        .await
        .map_err(|e| SandboxError::Protocol(format!("unpacking the command's changes: {e}")))?;
        match unpacked {
            Ok(_) => self.give_back(host),
            Err(why) => {
                self.discard().await;
                outcome.limit_after = Some(format!(
                    "{}; part of what the command changed may have come back, and the next \
                     command starts from the workspace as it is here",
                    crate::terminal_text::clean_line(&why, 400)
                ));
                return Ok(());
            }
        }
        if let Some(l) = limits
            && report.free < FULL_BELOW_BYTES
        {
            // The engine's tmpfs refused a write: the command met the limit
            // there, though what it left is within it.
            outcome.limit_after = Some(format!(
                "the workspace filled its space on the engine (its size limit of {}); \
                 a write of the command was refused",
                crate::workspace::human_bytes(l.max_bytes)
            ));
        }
        Ok(())
    }
}

/// Why bringing `download` back would leave this machine's disk below its
/// floor, if it would.
fn below_floor(
    workspace: &std::path::Path,
    download: &std::fs::File,
    limits: crate::workspace::WorkspaceLimits,
) -> Option<String> {
    let size = download.metadata().ok()?.len();
    let stat = rustix::fs::statvfs(workspace).ok()?;
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    (free.saturating_sub(size) < limits.min_free_bytes).then(|| {
        format!(
            "bringing the command's changes back ({size} bytes) would leave less than {} bytes free on this machine",
            limits.min_free_bytes
        )
    })
}
