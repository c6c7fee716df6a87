//! The baseline verification runs in the background, on its own copy of the
//! baseline checkpoint, while the agent works: the baseline's verdict decides
//! the rollback target, not when the agent may start. The copy itself is
//! written in the background too, from the checkpoint store (never from the
//! workspace, which the agent is changing meanwhile).

use std::path::PathBuf;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::parts::Run;
use crate::owner::{ProcessIdentity, write_owner_file};
use crate::protocol::CheckReport;
use crate::sandbox::gc::workspace_owner_file;
use crate::verify::{VerificationResult, Verifier, VerifierSettings};
use crate::workspace::workspace_owner;
use crate::workspace::{WorkspaceRoot, export_from};

pub(crate) struct BaselineDone {
    pub result: Result<VerificationResult, String>,
    pub checks: Vec<CheckReport>,
    /// Why the environment, not the code, is wrong, when the checks say so.
    pub environment: Option<String>,
}

impl BaselineDone {
    fn failed(reason: String) -> Self {
        Self {
            result: Err(reason),
            checks: Vec::new(),
            environment: None,
        }
    }
}

pub(crate) struct BaselineJob {
    pub attempt: u32,
    handle: Option<JoinHandle<BaselineDone>>,
    done: Option<BaselineDone>,
    cancel: CancellationToken,
    dir: PathBuf,
    owner_file: PathBuf,
}

impl BaselineJob {
    pub(crate) fn is_finished(&self) -> bool {
        self.done.is_some() || self.handle.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Waits for the verification to end, keeping its result. Cancel-safe:
    /// dropping this future mid-way loses nothing.
    pub async fn wait(&mut self) {
        if self.done.is_some() {
            return;
        }
        let Some(handle) = self.handle.as_mut() else {
            return;
        };
        let done = match handle.await {
            Ok(done) => done,
            Err(e) => BaselineDone::failed(format!("the baseline verification task failed: {e}")),
        };
        self.handle = None;
        self.done = Some(done);
    }

    /// The result (waiting for it if needed); the copy is removed, in the
    /// background.
    pub async fn join(mut self) -> BaselineDone {
        self.wait().await;
        crate::sandbox::gc::remove_detached(&[&self.dir]);
        let _ = std::fs::remove_file(&self.owner_file);
        self.done.take().unwrap_or_else(|| {
            BaselineDone::failed("the baseline verification has no result".into())
        })
    }

    /// Tells it to stop: its task removes its containers on its own, while
    /// the caller goes on; [`BaselineJob::join`] waits for that.
    pub(crate) fn stop(&self) {
        self.cancel.cancel();
    }
}

/// Starts copying the baseline checkpoint to `workspaces/<run>-baseline`
/// and verifying the copy, both in the background.
pub(crate) fn spawn(run: &Run, attempt: u32) -> Result<BaselineJob, String> {
    let name = format!("{}-baseline", run.id.run_id);
    let dir = run.id.state.workspace_dir(&name);
    let owner_file = workspace_owner_file(&run.id.state, &name);
    write_owner_file(&owner_file, &ProcessIdentity::current()).map_err(|e| e.to_string())?;
    crate::state::private_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let owner = workspace_owner();
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(|e| e.to_string())?;
    }
    let root = WorkspaceRoot::open(&dir)
        .map_err(|e| e.to_string())?
        .with_owner(owner);
    let (store, baseline) = (run.ws.checkpoints.dir().to_path_buf(), run.ws.baseline);
    let mut settings = VerifierSettings::new(
        run.sandbox.image.clone(),
        dir.clone(),
        run.id.run_id.clone(),
        run.sandbox.checks.clone(),
        run.outputs_dir(),
        run.id.state.stat_cache_paths(&run.id.run_id)[1].clone(),
    );
    settings.allow_zero_tests = run.id.options.allow_zero_tests;
    settings.check_timeout = run.id.options.limits.command_timeout();
    settings.deps = run.sandbox.deps.clone();
    settings.limits = Some(run.ws.limits);
    settings.background = true;
    let mut verifier =
        Verifier::new(run.sandbox.docker.clone(), settings).map_err(|e| e.to_string())?;
    // Stopped when the run is cancelled, or when the job is.
    let cancel = run.steering.cancel_token().child_token();
    let token = cancel.clone();
    let (installed, copy) = (run.ws.workspace.path().to_path_buf(), dir.clone());
    // An environment error interrupts whatever the agent is doing: the
    // run stops for it, however early, rather than after the effect.
    let alarm = run.steering.alarm();
    let uninstalled = crate::verify::deps::uninstalled(&run.id.repo, &run.sandbox.bootstrap);
    let handle = tokio::spawn(async move {
        // The checkpoint leaves out what the bootstrap installed; the copy
        // gets the workspace's (hard links), so it verifies the same way.
        let stop = token.clone();
        let exported = tokio::task::spawn_blocking(move || {
            let whole = export_from(&store, baseline, &root, &|| stop.is_cancelled())
                .map_err(|e| e.to_string())?;
            if !whole {
                return Err("the run ended first".to_string());
            }
            if let Err(e) = crate::verify::dependencies::share(&installed, &copy, owner) {
                tracing::warn!("sharing installed dependencies with the baseline copy: {e}");
            }
            Ok(())
        });
        let exported = match exported.await {
            Ok(done) => done,
            Err(e) => Err(format!("copying the baseline failed: {e}")),
        };
        if let Err(e) = exported {
            verifier.shutdown().await;
            return BaselineDone::failed(e);
        }
        let mut checks = Vec::new();
        let result = {
            let mut observe = |c: &CheckReport| checks.push(c.clone());
            tokio::select! {
                r = verifier.verify(attempt, &mut observe) => r.map_err(|e| e.to_string()),
                _ = token.cancelled() => Err("the run ended first".to_string()),
            }
        };
        verifier.shutdown().await;
        let environment = result
            .as_ref()
            .ok()
            .and_then(|r| crate::verify::environment_error(&r.checks, &uninstalled));
        if environment.is_some() {
            alarm.cancel();
        }
        BaselineDone {
            result,
            checks,
            environment,
        }
    });
    Ok(BaselineJob {
        attempt,
        handle: Some(handle),
        done: None,
        cancel,
        dir,
        owner_file,
    })
}
