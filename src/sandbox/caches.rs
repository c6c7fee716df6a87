//! Per-project dependency caches: one Docker volume per source
//! repository, mounted at `/cache`. The bootstrap writes it (cargo registry,
//! Go modules and build cache, npm, yarn, pnpm and pip caches); every other
//! container of every later run of the same project reads it, so a second run
//! needs no network for what the first one fetched, and no command can leave
//! anything there for the next.
//!
//! Cache volumes are not a run's: `gc` after a dead run leaves them, drops
//! those whose repository no longer exists, and `minicoder gc --caches` drops
//! them all.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{
    CreateContainerOptions, ListVolumesOptions, RemoveVolumeOptions, WaitContainerOptions,
};
use futures_util::StreamExt;
use sha2::{Digest, Sha256};

use super::spec::CACHE_DIR;
use super::{SANDBOX_GID, SANDBOX_UID, SandboxError, labels};
use crate::owner::ProcessIdentity;

/// The cache directories a fresh volume starts with (see `ContainerSpec::env`).
const CACHE_SUBDIRS: [&str; 7] = ["cargo", "go/mod", "go/build", "npm", "pnpm", "yarn", "pip"];

/// The cache volume of the repository at `repo` (its canonical path).
pub fn volume_name(repo: &Path) -> String {
    let path = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let digest = Sha256::digest(path.as_os_str().as_encoded_bytes());
    format!("minicoder-cache-{}", &hex::encode(digest)[..16])
}

/// The cache volume a run of `repo` uses: the existing one, or (with
/// `create`, i.e. when the run has a bootstrap to fill it) a new one made
/// writable for the sandbox user. `None`: no cache yet and nothing to fill it.
pub async fn for_run(
    docker: &Docker,
    repo: &Path,
    image: &str,
    create: bool,
) -> Result<Option<String>, SandboxError> {
    let name = volume_name(repo);
    match docker.inspect_volume(&name).await {
        Ok(_) => return Ok(Some(name)),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        Err(e) => return Err(SandboxError::docker(format!("inspect volume {name}"), e)),
    }
    if !create {
        return Ok(None);
    }
    let path = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let options = bollard::models::VolumeCreateRequest {
        name: Some(name.clone()),
        labels: Some(HashMap::from([(
            labels::CACHE.to_string(),
            path.display().to_string(),
        )])),
        ..Default::default()
    };
    docker
        .create_volume(options)
        .await
        .map_err(|e| SandboxError::docker(format!("create volume {name}"), e))?;
    if let Err(e) = prepare(docker, &name, image).await {
        let _ = docker
            .remove_volume(&name, Some(RemoveVolumeOptions { force: true }))
            .await;
        return Err(e);
    }
    Ok(Some(name))
}

/// Gives a new volume to the sandbox user, with its cache directories: one
/// short container as root with only the capabilities to own and create
/// files, no network, and nothing of the host. (Mounted first from the built-in image, the volume also receives
/// that image's warm Go build cache.)
async fn prepare(docker: &Docker, volume: &str, image: &str) -> Result<(), SandboxError> {
    let dirs: Vec<String> = CACHE_SUBDIRS
        .iter()
        .map(|d| format!("{CACHE_DIR}/{d}"))
        .collect();
    let script = format!(
        "mkdir -p {} && chown -R {SANDBOX_UID}:{SANDBOX_GID} {CACHE_DIR} && chmod 0755 {CACHE_DIR}",
        dirs.join(" ")
    );
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        user: Some("0:0".to_string()),
        entrypoint: Some(vec![]),
        cmd: Some(vec!["/bin/sh".into(), "-c".into(), script]),
        env: Some(vec!["PATH=/usr/local/bin:/usr/bin:/bin".to_string()]),
        network_disabled: Some(true),
        labels: Some(HashMap::from([
            (labels::MANAGED.to_string(), "true".to_string()),
            (labels::RUN.to_string(), format!("cache-{volume}")),
            (
                labels::OWNER.to_string(),
                ProcessIdentity::current().to_label(),
            ),
            (labels::ROLE.to_string(), "cache".to_string()),
        ])),
        host_config: Some(HostConfig {
            mounts: Some(vec![Mount {
                target: Some(CACHE_DIR.to_string()),
                source: Some(volume.to_string()),
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                ..Default::default()
            }]),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".to_string()]),
            // The image's warm cache, copied in, already belongs to the
            // sandbox user: root needs to pass its permissions to add to it.
            cap_add: Some(vec![
                "CHOWN".to_string(),
                "DAC_OVERRIDE".to_string(),
                "FOWNER".to_string(),
            ]),
            security_opt: Some(vec!["no-new-privileges".to_string()]),
            network_mode: Some("none".to_string()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let created = docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(format!(
                    "minicoder-cache-setup-{}",
                    crate::ids::random_hex(4)
                )),
                ..Default::default()
            }),
            body,
        )
        .await
        .map_err(|e| SandboxError::docker("create the cache set-up container", e))?;
    let id = created.id;
    let result = async {
        docker
            .start_container(&id, None)
            .await
            .map_err(|e| SandboxError::docker("start the cache set-up container", e))?;
        let mut wait = docker.wait_container(&id, None::<WaitContainerOptions>);
        let mut code = None;
        while let Some(item) = wait.next().await {
            match item {
                Ok(r) => code = Some(r.status_code),
                // A non-zero exit arrives as an error carrying the code.
                Err(bollard::errors::Error::DockerContainerWaitError { code: c, .. }) => {
                    code = Some(c)
                }
                Err(e) => return Err(SandboxError::docker("wait for the cache set-up", e)),
            }
        }
        match code {
            Some(0) => Ok(()),
            other => Err(SandboxError::Workspace {
                path: volume.into(),
                reason: format!(
                    "preparing the cache volume in {image} failed (exit {other:?}); the image needs /bin/sh, mkdir and chown"
                ),
            }),
        }
    }
    .await;
    super::container::remove(docker, &id).await;
    result
}

/// Every cache volume, with the repository it belongs to.
async fn list(docker: &Docker) -> Result<Vec<(String, String)>, SandboxError> {
    let filters = HashMap::from([("label".to_string(), vec![labels::CACHE.to_string()])]);
    let volumes = docker
        .list_volumes(Some(ListVolumesOptions {
            filters: Some(filters),
        }))
        .await
        .map_err(|e| SandboxError::docker("list volumes", e))?;
    Ok(volumes
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| {
            let repo = v.labels.get(labels::CACHE).cloned().unwrap_or_default();
            (v.name, repo)
        })
        .collect())
}

/// Removes the cache volumes whose repository is gone from this machine
/// (and, with `all`, every cache volume). A volume in use stays.
pub async fn collect(docker: &Docker, all: bool) -> Result<Vec<String>, SandboxError> {
    let mut removed = Vec::new();
    for (name, repo) in list(docker).await? {
        if !all && Path::new(&repo).exists() {
            continue;
        }
        let gone = docker
            .remove_volume(&name, Some(RemoveVolumeOptions { force: false }))
            .await;
        if gone.is_ok() {
            removed.push(name);
        }
    }
    Ok(removed)
}

/// Removes the cache volume of `repo`, if there is one and it is not in use.
pub async fn remove_for_repo(docker: &Docker, repo: &Path) -> Result<bool, SandboxError> {
    let name = volume_name(repo);
    match docker
        .remove_volume(&name, Some(RemoveVolumeOptions { force: false }))
        .await
    {
        Ok(()) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(false),
        Err(e) => Err(SandboxError::docker(format!("remove volume {name}"), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_names_are_stable_per_repository() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        assert_eq!(volume_name(a.path()), volume_name(a.path()));
        assert_ne!(volume_name(a.path()), volume_name(b.path()));
        assert!(volume_name(a.path()).starts_with("minicoder-cache-"));
        assert_eq!(volume_name(a.path()).len(), "minicoder-cache-".len() + 16);
    }
}
