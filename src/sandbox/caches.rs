//! Per-project download caches: one Docker volume per source repository and
//! configuration, so a second run fetches nothing the first one fetched.
//!
//! A cache holds downloads only — registry indexes and archives that the
//! tools check against the project's lock files — never code or tool
//! configuration: no extracted sources, no build output, no `bin/`, no
//! `config.toml`, `.npmrc` or `pip.conf`. It is mounted in one place, the
//! bootstrap container (writable), and there:
//!
//! 1. [`SEED_SCRIPT`] copies the cached archives into the run's dependency
//!    directory (`/deps`, private to the run);
//! 2. the configured bootstrap commands run (`cargo fetch` unpacks into
//!    `/deps/cargo`, `go mod download` into `/deps/go/mod`; npm, pip and
//!    yarn keep their download caches in `/cache`);
//! 3. [`STORE_SCRIPT`] copies the new archives back and removes from the
//!    volume everything that is not a download cache (a `config.toml` with a
//!    `rustc-wrapper` a bootstrap left there included). Should that fail, the
//!    volume is removed.
//!
//! No other container mounts the volume: the agent's commands and every
//! verification check see the run's own `/deps`, read-only. A volume is
//! keyed by the repository's path and the configuration's hash (which covers
//! the bootstrap): another configuration starts from an empty cache.
//! Volumes carry the state directory they belong to; `gc` removes only its
//! own: those whose repository no longer exists, and with `--caches` all.

use std::collections::HashMap;
use std::path::Path;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType};
use bollard::query_parameters::{CreateContainerOptions, ListVolumesOptions, RemoveVolumeOptions};
use sha2::{Digest, Sha256};

use super::spec::CACHE_DIR;
use super::{SANDBOX_GID, SANDBOX_UID, SandboxError, labels};
use crate::owner::ProcessIdentity;

/// The cache directories a fresh volume starts with.
const CACHE_SUBDIRS: [&str; 7] = [
    "cargo/registry",
    "cargo/git",
    "go",
    "npm",
    "pnpm",
    "yarn",
    "pip",
];

/// Run in the bootstrap container before its commands: the cached archives
/// into the run's dependency directory (never what was unpacked from them).
pub(crate) const SEED_SCRIPT: &str = r#"set -u
PATH=/usr/bin:/bin; export PATH
mkdir -p /deps/cargo/registry /deps/cargo/git /deps/go/mod/cache
for d in index cache; do
  [ -d /cache/cargo/registry/$d ] && cp -a /cache/cargo/registry/$d /deps/cargo/registry/
done
[ -d /cache/cargo/git/db ] && cp -a /cache/cargo/git/db /deps/cargo/git/
[ -d /cache/go/download ] && cp -a /cache/go/download /deps/go/mod/cache/
exit 0"#;

/// Run in the bootstrap container after its commands: the new archives back
/// into the cache, then everything that is not a download cache removed from
/// it (links and special files, unpacked sources, build output, tool
/// configuration and programs), and nothing in it left executable.
pub(crate) const STORE_SCRIPT: &str = r#"set -u
PATH=/usr/bin:/bin; export PATH
mkdir -p /cache/cargo/registry /cache/cargo/git /cache/go
for d in index cache; do
  [ -d /deps/cargo/registry/$d ] && cp -a /deps/cargo/registry/$d /cache/cargo/registry/
done
[ -d /deps/cargo/git/db ] && cp -a /deps/cargo/git/db /cache/cargo/git/
[ -d /deps/go/mod/cache/download ] && cp -a /deps/go/mod/cache/download /cache/go/
chmod -R u+rwX /cache || exit 1
find /cache -mindepth 1 ! -type d ! -type f -exec rm -f {} + || exit 1
keep() {
  dir=$1; shift
  [ -d "$dir" ] || return 0
  for entry in "$dir"/* "$dir"/.[!.]* "$dir"/..?*; do
    [ -e "$entry" ] || continue
    name=${entry##*/}
    case " $* " in *" $name "*) ;; *) rm -rf -- "$entry" || return 1 ;; esac
  done
}
keep /cache cargo go npm pnpm yarn pip || exit 1
keep /cache/cargo registry git || exit 1
keep /cache/cargo/registry index cache || exit 1
keep /cache/cargo/git db || exit 1
keep /cache/go download || exit 1
keep /cache/npm _cacache || exit 1
keep /cache/pip http http-v2 || exit 1
find /cache -type f -perm /111 -exec chmod a-x {} + || exit 1
exit 0"#;

/// The cache volume of the repository at `repo` (its canonical path) under
/// the configuration whose hash is `key`.
pub fn volume_name(repo: &Path, key: &str) -> String {
    let path = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let mut h = Sha256::new();
    h.update(path.as_os_str().as_encoded_bytes());
    h.update([0]);
    h.update(key.as_bytes());
    format!("minicoder-cache-{}", &hex::encode(h.finalize())[..16])
}

/// The cache volume a run's bootstrap uses: the existing one, or a new one
/// made writable for the sandbox user. Labelled with the repository and the
/// state directory `state_root` it belongs to.
pub async fn for_bootstrap(
    docker: &Docker,
    repo: &Path,
    key: &str,
    image: &str,
    state_root: &Path,
) -> Result<String, SandboxError> {
    let name = volume_name(repo, key);
    match docker.inspect_volume(&name).await {
        Ok(_) => return Ok(name),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => {}
        Err(e) => return Err(SandboxError::docker(format!("inspect volume {name}"), e)),
    }
    let path = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let options = bollard::models::VolumeCreateRequest {
        name: Some(name.clone()),
        labels: Some(HashMap::from([
            (labels::CACHE.to_string(), path.display().to_string()),
            (labels::STATE.to_string(), state_root.display().to_string()),
        ])),
        ..Default::default()
    };
    docker
        .create_volume(options)
        .await
        .map_err(|e| SandboxError::docker(format!("create volume {name}"), e))?;
    if let Err(e) = prepare(docker, &name, image).await {
        let _ = remove_volume(docker, &name).await;
        return Err(e);
    }
    Ok(name)
}

/// Removes one cache volume (gone already is fine).
pub async fn remove_volume(docker: &Docker, name: &str) -> Result<bool, SandboxError> {
    match docker
        .remove_volume(name, Some(RemoveVolumeOptions { force: false }))
        .await
    {
        Ok(()) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(false),
        Err(e) => Err(SandboxError::docker(format!("remove volume {name}"), e)),
    }
}

/// Gives a new volume to the sandbox user, with its cache directories: one
/// short container as root with only the capabilities to own and create
/// files, no network, and nothing of the host (nor of the image's own
/// `/cache`, which is not copied in).
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
        healthcheck: Some(super::spec::no_health_check()),
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
                volume_options: Some(bollard::models::MountVolumeOptions {
                    no_copy: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".to_string()]),
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
        let code = super::container::wait_exit(docker, &id)
            .await
            .map_err(|e| SandboxError::docker("wait for the cache set-up", e))?;
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

/// The cache volumes of the state directory `state_root`, with the
/// repository each belongs to.
async fn list(docker: &Docker, state_root: &Path) -> Result<Vec<(String, String)>, SandboxError> {
    let filters = HashMap::from([(
        "label".to_string(),
        vec![
            labels::CACHE.to_string(),
            format!("{}={}", labels::STATE, state_root.display()),
        ],
    )]);
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

/// Removes the cache volumes of the state directory `state_root` whose
/// repository is gone from this machine (and, with `all`, all of them;
/// another state directory's are never touched). A volume in use stays.
pub async fn collect(
    docker: &Docker,
    state_root: &Path,
    all: bool,
) -> Result<Vec<String>, SandboxError> {
    let mut removed = Vec::new();
    for (name, repo) in list(docker, state_root).await? {
        if !all && Path::new(&repo).exists() {
            continue;
        }
        if remove_volume(docker, &name).await.unwrap_or(false) {
            removed.push(name);
        }
    }
    Ok(removed)
}

/// Removes every cache volume of `repo` in the state directory
/// `state_root` that is not in use; how many went.
pub async fn remove_for_repo(
    docker: &Docker,
    repo: &Path,
    state_root: &Path,
) -> Result<usize, SandboxError> {
    let path = repo.canonicalize().unwrap_or_else(|_| repo.to_path_buf());
    let mut removed = 0;
    for (name, of) in list(docker, state_root).await? {
        if Path::new(&of) == path && remove_volume(docker, &name).await? {
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_names_are_stable_per_repository() {
        let a = tempfile::tempdir().expect("tempdir");
        let b = tempfile::tempdir().expect("tempdir");
        assert_eq!(volume_name(a.path(), "k"), volume_name(a.path(), "k"));
        assert_ne!(volume_name(a.path(), "k"), volume_name(b.path(), "k"));
        assert_ne!(
            volume_name(a.path(), "k"),
            volume_name(a.path(), "other configuration")
        );
        assert!(volume_name(a.path(), "k").starts_with("minicoder-cache-"));
        assert_eq!(
            volume_name(a.path(), "k").len(),
            "minicoder-cache-".len() + 16
        );
    }
}
