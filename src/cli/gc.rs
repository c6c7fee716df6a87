//! `minicoder gc`.

use std::process::ExitCode;

use crate::sandbox::{self, gc::GcReport};
use crate::state::StateDir;

pub async fn run(caches: bool) -> anyhow::Result<ExitCode> {
    let state = StateDir::from_env()?;
    let mut report = GcReport::default();
    // Workspaces can be collected without Docker; containers cannot.
    sandbox::gc::collect_workspaces(&state, &mut report);
    let docker = sandbox::connect().await;
    if let Ok(docker) = &docker {
        sandbox::gc::collect_docker(docker, &mut report).await?;
        if caches {
            report
                .volumes
                .extend(sandbox::caches::collect(docker, true).await?);
        }
    }
    for c in &report.containers {
        out!("removed container {c}");
    }
    for v in &report.volumes {
        out!("removed volume {v}");
    }
    for w in &report.workspaces {
        out!("removed workspace {}", w.display());
    }
    if report.is_empty() {
        out!("nothing to remove");
    }
    match docker {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
    }
}
