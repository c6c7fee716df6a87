//! Removing what runs whose process is gone left behind: containers and
//! volumes (found by label) and private workspaces (found by owner file),
//! and the dependency caches of repositories that no longer exist.
//! Checkpoint stores and artifacts are kept: `resume` and `show` need them.

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptions, ListVolumesOptions, RemoveVolumeOptions};

use super::{SandboxError, labels};
use crate::owner::{ProcessIdentity, read_owner_file};
use crate::state::StateDir;
pub(crate) use crate::workspace::remove_detached;

/// What one collection removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct GcReport {
    pub containers: Vec<String>,
    pub volumes: Vec<String>,
    pub workspaces: Vec<PathBuf>,
}

impl GcReport {
    pub fn is_empty(&self) -> bool {
        self.containers.is_empty() && self.volumes.is_empty() && self.workspaces.is_empty()
    }
}

fn owner_is_dead(labels: Option<&HashMap<String, String>>) -> bool {
    let owner = labels
        .and_then(|l| l.get(labels::OWNER))
        .and_then(|v| ProcessIdentity::from_label(v));
    // A managed resource without a readable owner belongs to nobody alive.
    !owner.is_some_and(|o| o.is_alive())
}

fn managed_filter() -> HashMap<String, Vec<String>> {
    HashMap::from([(
        "label".to_string(),
        vec![format!("{}=true", labels::MANAGED)],
    )])
}

/// Removes containers and volumes of dead runs.
pub(crate) async fn collect_docker(
    docker: &Docker,
    report: &mut GcReport,
) -> Result<(), SandboxError> {
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(managed_filter()),
            ..Default::default()
        }))
        .await
        .map_err(|e| SandboxError::docker("list containers", e))?;
    for c in containers {
        let Some(id) = c.id else { continue };
        if owner_is_dead(c.labels.as_ref()) {
            super::container::remove(docker, &id).await;
            let name = c
                .names
                .and_then(|n| n.first().cloned())
                .unwrap_or_else(|| id.clone());
            report
                .containers
                .push(name.trim_start_matches('/').to_string());
        }
    }
    let volumes = docker
        .list_volumes(Some(ListVolumesOptions {
            filters: Some(managed_filter()),
        }))
        .await
        .map_err(|e| SandboxError::docker("list volumes", e))?;
    for v in volumes.volumes.unwrap_or_default() {
        if owner_is_dead(Some(&v.labels)) {
            let removed = docker
                .remove_volume(&v.name, Some(RemoveVolumeOptions { force: true }))
                .await;
            if removed.is_ok() {
                report.volumes.push(v.name);
            }
        }
    }
    // Dependency caches outlive runs, but not their repository.
    if let Ok(state) = crate::state::StateDir::from_env() {
        report
            .volumes
            .extend(super::caches::collect(docker, state.root(), false).await?);
    }
    Ok(())
}

/// Removes every container owned by `owner` (used on cancellation: whatever
/// the dropped work left running goes, without waiting for a stop timeout).
pub(crate) async fn remove_owned(
    docker: &Docker,
    owner: &ProcessIdentity,
) -> Result<usize, SandboxError> {
    remove_labelled(docker, labels::OWNER, &owner.to_label()).await
}

/// Removes every container of `run_id`: the last step of a run's teardown,
/// catching any container whose removal was left to a dropped future.
pub(crate) async fn remove_run(docker: &Docker, run_id: &str) -> Result<usize, SandboxError> {
    let removed = remove_labelled(docker, labels::RUN, run_id).await?;
    remove_run_volumes(docker, run_id).await?;
    Ok(removed)
}

/// Removes the volumes of `run_id` (a remote engine's workspaces and the
/// run's dependency volume), once no container of it uses them.
async fn remove_run_volumes(docker: &Docker, run_id: &str) -> Result<(), SandboxError> {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![format!("{}={run_id}", labels::RUN)],
    )]);
    let volumes = docker
        .list_volumes(Some(ListVolumesOptions {
            filters: Some(filters),
        }))
        .await
        .map_err(|e| SandboxError::docker("list volumes", e))?;
    for v in volumes.volumes.unwrap_or_default() {
        if let Err(e) = docker
            .remove_volume(&v.name, Some(RemoveVolumeOptions { force: true }))
            .await
        {
            tracing::warn!("removing volume {}: {e}", v.name);
        }
    }
    Ok(())
}

/// Whether the engine holds no container of `run_id` any more (`false`
/// when it cannot be asked).
pub(crate) async fn none_left(docker: &Docker, run_id: &str) -> bool {
    labelled(docker, labels::RUN, run_id)
        .await
        .is_ok_and(|ids| ids.is_empty())
}

/// Every container labelled `key=value`, running or not.
async fn labelled(docker: &Docker, key: &str, value: &str) -> Result<Vec<String>, SandboxError> {
    let filters = HashMap::from([("label".to_string(), vec![format!("{key}={value}")])]);
    let containers = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .map_err(|e| SandboxError::docker("list containers", e))?;
    Ok(containers.into_iter().filter_map(|c| c.id).collect())
}

/// Force-removes, concurrently, every container labelled `key=value`.
async fn remove_labelled(docker: &Docker, key: &str, value: &str) -> Result<usize, SandboxError> {
    let ids = labelled(docker, key, value).await?;
    futures_util::future::join_all(ids.iter().map(|id| super::container::remove(docker, id))).await;
    Ok(ids.len())
}

/// Removes private workspaces whose owner file names a dead process (or is
/// missing: the owner file is written before the workspace is created).
pub(crate) fn collect_workspaces(state: &StateDir, report: &mut GcReport) {
    let Ok(entries) = std::fs::read_dir(state.workspaces_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let owner_file = path.with_extension("owner");
        let alive = read_owner_file(&owner_file).is_some_and(|o| o.is_alive());
        if !alive && std::fs::remove_dir_all(&path).is_ok() {
            let _ = std::fs::remove_file(&owner_file);
            report.workspaces.push(path);
        }
    }
}

/// The owner file of a run's workspace.
pub fn workspace_owner_file(state: &StateDir, run_id: &str) -> PathBuf {
    state.workspace_dir(run_id).with_extension("owner")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::owner::write_owner_file;

    #[test]
    fn dead_and_ownerless_workspaces_go_live_ones_stay() {
        let root = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(root.path());
        let ws = state.workspaces_dir();
        for run in ["live", "dead", "orphan"] {
            std::fs::create_dir_all(ws.join(run).join("src")).expect("mkdir");
        }
        write_owner_file(
            &workspace_owner_file(&state, "live"),
            &ProcessIdentity::current(),
        )
        .expect("owner");
        let mut dead = ProcessIdentity::current();
        dead.start_ticks += 7;
        write_owner_file(&workspace_owner_file(&state, "dead"), &dead).expect("owner");
        let mut report = GcReport::default();
        collect_workspaces(&state, &mut report);
        assert!(ws.join("live").exists());
        assert!(!ws.join("dead").exists());
        assert!(!ws.join("orphan").exists());
        assert!(!workspace_owner_file(&state, "dead").exists());
        assert_eq!(report.workspaces.len(), 2);
    }

    #[test]
    fn owner_labels_decide() {
        let live = HashMap::from([(
            labels::OWNER.to_string(),
            ProcessIdentity::current().to_label(),
        )]);
        assert!(!owner_is_dead(Some(&live)));
        let dead = HashMap::from([(labels::OWNER.to_string(), "999999999:1".to_string())]);
        assert!(owner_is_dead(Some(&dead)));
        assert!(owner_is_dead(None));
    }
}
