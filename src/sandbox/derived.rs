//! Project images without writing Dockerfiles. A project picks its
//! image with `"image"` (default: `MINICODER_SANDBOX_IMAGE` or the built-in
//! one), may refine it with its own recipe `.minicoder/Dockerfile` (built
//! with `ARG MINICODER_SANDBOX_IMAGE` set to that image), and may add Debian
//! packages with `"packages"`. Each derived image is tagged by a hash of what
//! it is made of (its base image's id included), so it is built once and
//! rebuilt only when something it depends on changes. No registry is needed:
//! the base is local, the packages come from Debian's mirror.

use std::collections::{BTreeSet, HashMap};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::query_parameters::BuildImageOptions;
use sha2::{Digest, Sha256};

use super::image::{self, BuildLock, BuildProgress, forward_build};
use super::{SandboxError, labels};

/// The project's own recipe directory and file, at the repository root.
pub(crate) const RECIPE_DIR: &str = ".minicoder";
pub(crate) const RECIPE_FILE: &str = "Dockerfile";
/// The build argument naming the sandbox image a recipe builds on.
pub(crate) const BASE_ARG: &str = "MINICODER_SANDBOX_IMAGE";
/// Bounds of a recipe directory: it is the repository's, so it is hostile.
const MAX_RECIPE_FILES: usize = 1000;
const MAX_RECIPE_BYTES: u64 = 64 << 20;
/// Repository names of derived images.
const PACKAGES_REPO: &str = "minicoder-packages";
const RECIPE_REPO: &str = "minicoder-project";

/// What a project asks of its image (only what the person trusts: an
/// untrusted project asks for nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ImageRequest {
    /// `"image"`: the image to start from.
    pub image: Option<String>,
    /// `"packages"`: Debian packages to add.
    pub packages: Vec<String>,
    /// Build `.minicoder/Dockerfile`: the digest of `.minicoder/` as it was
    /// trusted (a directory that no longer packs to it is not built).
    pub recipe: Option<[u8; 32]>,
    /// Whether the recipe's build steps get the network.
    pub recipe_network: bool,
}

/// What `.minicoder/` is: the SHA-256 of its packed content and whether it
/// holds a recipe; `None` when there is no `.minicoder`. It must be a real
/// directory of the repository: a symlink (to anything) or another kind of
/// file is refused, before anything of it is read.
pub(crate) fn project_dir(repo: &Path) -> Result<Option<([u8; 32], bool)>, SandboxError> {
    let dir = repo.join(RECIPE_DIR);
    let meta = match std::fs::symlink_metadata(&dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(SandboxError::ImageBuild(format!(
                "cannot inspect {}: {e}",
                dir.display()
            )));
        }
    };
    if meta.file_type().is_symlink() {
        return Err(SandboxError::ImageBuild(format!(
            "{} is a symbolic link; minicoder reads a project's configuration only from a directory inside the repository: make {RECIPE_DIR} a directory or remove it",
            dir.display()
        )));
    }
    if !meta.is_dir() {
        return Err(SandboxError::ImageBuild(format!(
            "{} is not a directory; remove it or make it the directory of the project's recipe",
            dir.display()
        )));
    }
    let (_, digest) = pack_recipe(&dir)?;
    let recipe = std::fs::symlink_metadata(dir.join(RECIPE_FILE)).is_ok_and(|m| m.is_file());
    Ok(Some((digest, recipe)))
}

/// The image a run of `repo` uses, built first where needed (with progress).
pub(crate) async fn resolve(
    docker: &Docker,
    repo: &Path,
    request: &ImageRequest,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<String, SandboxError> {
    let mut current = request
        .image
        .clone()
        .unwrap_or_else(super::spec::image_from_env);
    image::ensure_image(docker, &current, progress).await?;
    if let Some(trusted) = request.recipe {
        let recipe = repo.join(RECIPE_DIR);
        current = build_recipe(
            docker,
            &recipe,
            &current,
            (trusted, request.recipe_network),
            progress,
        )
        .await?;
    }
    if !request.packages.is_empty() {
        current = build_packages(docker, &current, &request.packages, progress).await?;
    }
    Ok(current)
}

/// The tag of the image that adds `packages` to the image whose id is `base_id`.
pub fn packages_tag(base_id: &str, packages: &[String]) -> String {
    let list = normalised(packages);
    let mut h = Sha256::new();
    h.update(b"minicoder-packages-v1\0");
    h.update(base_id.as_bytes());
    for p in &list {
        h.update([0]);
        h.update(p.as_bytes());
    }
    format!("{PACKAGES_REPO}:{}", &hex::encode(h.finalize())[..16])
}

/// The command that adds `packages` (its arguments, never read by the shell),
/// run as root in a container of the base image whose file system is then
/// committed as the derived image: one layer, one commit (a build of the
/// same recipe commits four times, and a commit on some storage drivers
/// reads the whole image).
pub(crate) fn packages_command(packages: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = [
        "/bin/sh",
        "-c",
        "apt-get update \
         && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \"$@\" \
         && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log",
        "sh",
    ]
    .map(String::from)
    .into();
    argv.extend(normalised(packages));
    argv
}

fn normalised(packages: &[String]) -> Vec<String> {
    packages
        .iter()
        .map(|p| p.trim().to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

async fn image_id(docker: &Docker, image: &str) -> Result<String, SandboxError> {
    match docker.inspect_image(image).await {
        Ok(inspect) => Ok(inspect.id.unwrap_or_else(|| image.to_string())),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Err(SandboxError::ImageMissing {
            image: image.to_string(),
        }),
        Err(e) => Err(SandboxError::docker(format!("inspect image {image}"), e)),
    }
}

async fn exists(docker: &Docker, image: &str) -> bool {
    docker.inspect_image(image).await.is_ok()
}

async fn build_packages(
    docker: &Docker,
    base: &str,
    packages: &[String],
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<String, SandboxError> {
    let tag = packages_tag(&image_id(docker, base).await?, packages);
    if exists(docker, &tag).await {
        return Ok(tag);
    }
    let _lock = BuildLock::acquire(progress).await?;
    if exists(docker, &tag).await {
        return Ok(tag);
    }
    let list = normalised(packages).join(", ");
    progress(BuildProgress::Step {
        step: 1,
        total: 1,
        what: format!("building {tag}: {base} with the packages {list}"),
    });
    install_and_commit(docker, base, packages, &tag, progress)
        .await
        .map_err(|e| {
            SandboxError::ImageBuild(format!(
                "adding the packages {list} to {base}: {e}; check the names in \"packages\" of .minicoder.json (Debian package names)"
            ))
        })?;
    Ok(tag)
}

/// The lines of an install's output kept for its error message.
const KEPT_OUTPUT_LINES: usize = 8;

/// Runs [`packages_command`] as root in a container of `base` (with the
/// network: the names, validated, come from Debian's mirror) and commits its
/// file system as `tag`, which runs as the sandbox user, as `base`'s
/// entrypoint and command, labelled as minicoder's. The container is
/// labelled as a run's, so `gc` removes one a killed process left.
async fn install_and_commit(
    docker: &Docker,
    base: &str,
    packages: &[String],
    tag: &str,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<(), String> {
    use bollard::models::{ContainerConfig, ContainerCreateBody, HostConfig};
    use bollard::query_parameters::{CommitContainerOptions, CreateContainerOptions};

    let base_config = docker
        .inspect_image(base)
        .await
        .map_err(|e| format!("inspecting {base}: {e}"))?
        .config
        .unwrap_or_default();
    let body = ContainerCreateBody {
        image: Some(base.to_string()),
        user: Some("0:0".to_string()),
        entrypoint: Some(vec![]),
        cmd: Some(packages_command(packages)),
        healthcheck: Some(super::spec::no_health_check()),
        labels: Some(HashMap::from([
            (labels::MANAGED.to_string(), "true".to_string()),
            (labels::RUN.to_string(), format!("build-{tag}")),
            (
                labels::OWNER.to_string(),
                crate::owner::ProcessIdentity::current().to_label(),
            ),
            (labels::ROLE.to_string(), "build".to_string()),
        ])),
        host_config: Some(HostConfig {
            security_opt: Some(vec!["no-new-privileges".to_string()]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let name = format!("minicoder-packages-build-{}", crate::ids::random_hex(4));
    let id = docker
        .create_container(
            Some(CreateContainerOptions {
                name: Some(name),
                ..Default::default()
            }),
            body,
        )
        .await
        .map_err(|e| format!("creating the install container: {e}"))?
        .id;
    let result = async {
        docker
            .start_container(&id, None)
            .await
            .map_err(|e| format!("starting the install container: {e}"))?;
        let kept = follow_output(docker, &id, progress).await;
        let code = super::container::wait_exit(docker, &id)
            .await
            .map_err(|e| format!("waiting for the install: {e}"))?;
        if code != Some(0) {
            let tail: Vec<String> = kept.into_iter().collect();
            return Err(format!(
                "the install exited with {}: {}",
                code.map_or("no status".to_string(), |c| c.to_string()),
                tail.join(" | ")
            ));
        }
        let mut image_labels = base_config.labels.clone().unwrap_or_default();
        image_labels.insert(labels::DERIVED.to_string(), tag.to_string());
        image_labels.insert(labels::MANAGED.to_string(), "image".to_string());
        // The commit adds the container's labels to the image's where the
        // image has none of that key: the install's own are blanked.
        for key in [labels::RUN, labels::OWNER, labels::ROLE] {
            image_labels.insert(key.to_string(), String::new());
        }
        let (repo, version) = super::image::split_image(tag);
        let config = ContainerConfig {
            user: Some(format!("{}:{}", super::SANDBOX_UID, super::SANDBOX_GID)),
            entrypoint: Some(base_config.entrypoint.clone().unwrap_or_default()),
            cmd: base_config.cmd.clone(),
            labels: Some(image_labels),
            ..Default::default()
        };
        docker
            .commit_container(
                CommitContainerOptions {
                    container: Some(id.clone()),
                    repo: Some(repo.to_string()),
                    tag: Some(version.to_string()),
                    pause: false,
                    ..Default::default()
                },
                config,
            )
            .await
            .map_err(|e| format!("committing the image: {e}"))?;
        Ok(())
    }
    .await;
    super::container::remove(docker, &id).await;
    result
}

/// Follows a container's output to its end, line by line, to `progress`;
/// the last lines of it.
async fn follow_output(
    docker: &Docker,
    id: &str,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> std::collections::VecDeque<String> {
    use bollard::query_parameters::LogsOptions;
    use futures_util::StreamExt;
    let mut kept = std::collections::VecDeque::new();
    let mut logs = docker.logs(
        id,
        Some(LogsOptions {
            follow: true,
            stdout: true,
            stderr: true,
            ..Default::default()
        }),
    );
    let mut pending = Vec::new();
    while let Some(Ok(chunk)) = logs.next().await {
        pending.extend_from_slice(&chunk.into_bytes());
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let text = crate::terminal_text::clean_line(
                String::from_utf8_lossy(&line).trim(),
                super::build::PROGRESS_LINE_CHARS,
            );
            if text.is_empty() {
                continue;
            }
            if kept.len() == KEPT_OUTPUT_LINES {
                kept.pop_front();
            }
            kept.push_back(text.clone());
            progress(BuildProgress::Line(text));
        }
        // A line without an end is cut, not kept growing.
        pending.truncate(64 << 10);
    }
    kept
}

async fn build_recipe(
    docker: &Docker,
    recipe: &Path,
    base: &str,
    (trusted, network): ([u8; 32], bool),
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<String, SandboxError> {
    let base_id = image_id(docker, base).await?;
    let recipe_owned = recipe.to_path_buf();
    let (context, digest) = tokio::task::spawn_blocking(move || {
        let meta = std::fs::symlink_metadata(&recipe_owned)
            .map_err(|e| SandboxError::ImageBuild(format!("{RECIPE_DIR}/: {e}")))?;
        if !meta.is_dir() {
            return Err(SandboxError::ImageBuild(format!(
                "{RECIPE_DIR} is no longer a directory of the repository"
            )));
        }
        pack_recipe(&recipe_owned)
    })
    .await
    .map_err(|e| SandboxError::ImageBuild(format!("packing {RECIPE_DIR}/: {e}")))??;
    if digest != trusted {
        return Err(SandboxError::ImageBuild(format!(
            "{RECIPE_DIR}/ changed since the run read the project's configuration; nothing of it was built: start the run again (and trust the new configuration if it is yours)"
        )));
    }
    let mut h = Sha256::new();
    h.update(b"minicoder-recipe-v1\0");
    h.update(base_id.as_bytes());
    h.update([0]);
    h.update(base.as_bytes());
    h.update([0]);
    h.update(digest);
    h.update([u8::from(network)]);
    let tag = format!("{RECIPE_REPO}:{}", &hex::encode(h.finalize())[..16]);
    if exists(docker, &tag).await {
        return Ok(tag);
    }
    let _lock = BuildLock::acquire(progress).await?;
    if exists(docker, &tag).await {
        return Ok(tag);
    }
    progress(BuildProgress::Step {
        step: 1,
        total: 1,
        what: format!("building {tag} from {RECIPE_DIR}/{RECIPE_FILE} on {base}"),
    });
    let file = tokio::fs::File::from_std(context);
    let body = bollard::body_try_stream(tokio_util::io::ReaderStream::with_capacity(file, 1 << 20));
    let stream = docker.build_image(
        build_options(
            &tag,
            HashMap::from([(BASE_ARG.to_string(), base.to_string())]),
            network,
        ),
        None,
        Some(body),
    );
    forward_build(stream, progress).await.map_err(|e| {
        SandboxError::ImageBuild(format!("building {RECIPE_DIR}/{RECIPE_FILE}: {e}"))
    })?;
    Ok(tag)
}

/// The options of a build; without `network` its steps run with none.
fn build_options(
    tag: &str,
    buildargs: HashMap<String, String>,
    network: bool,
) -> BuildImageOptions {
    BuildImageOptions {
        networkmode: (!network).then(|| "none".to_string()),
        // Every step runs under this build's network setting: no layer of
        // an earlier build (with another setting) stands in for it.
        nocache: true,
        dockerfile: RECIPE_FILE.into(),
        t: Some(tag.to_string()),
        rm: true,
        forcerm: true,
        buildargs: Some(buildargs),
        // No `labels`: the builder adds them as one more step, and a step
        // commits the whole image again (tens of seconds on fuse-overlayfs);
        // the tag's repository names the image as minicoder's.
        ..Default::default()
    }
}

/// Packs the recipe directory into a temporary tar file (streamed, bounded,
/// regular files and directories only, timestamps zeroed so the same content
/// always packs the same) and returns it with the SHA-256 of its bytes.
fn pack_recipe(dir: &Path) -> Result<(std::fs::File, [u8; 32]), SandboxError> {
    let fail = |what: String| SandboxError::ImageBuild(format!("{RECIPE_DIR}/: {what}"));
    let mut entries = Vec::new();
    collect_recipe(dir, PathBuf::new(), &mut entries)?;
    entries.sort();
    let mut total = 0u64;
    let mut builder = tar::Builder::new(tempfile::tempfile().map_err(|e| fail(e.to_string()))?);
    for rel in &entries {
        let path = dir.join(rel);
        let meta = std::fs::symlink_metadata(&path).map_err(|e| fail(e.to_string()))?;
        let mut header = tar::Header::new_gnu();
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        if meta.is_dir() {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
            header.set_cksum();
            builder
                .append_data(&mut header, rel, std::io::empty())
                .map_err(|e| fail(e.to_string()))?;
            continue;
        }
        total += meta.len();
        if total > MAX_RECIPE_BYTES {
            return Err(fail(format!(
                "more than {} MiB; keep the recipe's files small",
                MAX_RECIPE_BYTES >> 20
            )));
        }
        use std::os::unix::fs::PermissionsExt;
        let exec = meta.permissions().mode() & 0o111 != 0;
        header.set_mode(if exec { 0o755 } else { 0o644 });
        header.set_size(meta.len());
        header.set_cksum();
        let file = std::fs::File::open(&path).map_err(|e| fail(e.to_string()))?;
        builder
            .append_data(&mut header, rel, file.take(meta.len()))
            .map_err(|e| fail(e.to_string()))?;
    }
    builder.finish().map_err(|e| fail(e.to_string()))?;
    let mut file = builder.into_inner().map_err(|e| fail(e.to_string()))?;
    file.flush().map_err(|e| fail(e.to_string()))?;
    file.rewind().map_err(|e| fail(e.to_string()))?;
    let mut h = Sha256::new();
    std::io::copy(&mut file, &mut h).map_err(|e| fail(e.to_string()))?;
    file.rewind().map_err(|e| fail(e.to_string()))?;
    Ok((file, h.finalize().into()))
}

fn collect_recipe(root: &Path, rel: PathBuf, out: &mut Vec<PathBuf>) -> Result<(), SandboxError> {
    let dir = root.join(&rel);
    let read = std::fs::read_dir(&dir)
        .map_err(|e| SandboxError::ImageBuild(format!("reading {}: {e}", dir.display())))?;
    for entry in read {
        let entry = entry
            .map_err(|e| SandboxError::ImageBuild(format!("reading {}: {e}", dir.display())))?;
        let name = rel.join(entry.file_name());
        let kind = entry
            .file_type()
            .map_err(|e| SandboxError::ImageBuild(format!("reading {}: {e}", name.display())))?;
        if out.len() >= MAX_RECIPE_FILES {
            return Err(SandboxError::ImageBuild(format!(
                "{RECIPE_DIR}/ holds more than {MAX_RECIPE_FILES} entries"
            )));
        }
        if kind.is_dir() {
            out.push(name.clone());
            collect_recipe(root, name, out)?;
        } else if kind.is_file() {
            out.push(name);
        } else {
            return Err(SandboxError::ImageBuild(format!(
                "{RECIPE_DIR}/{} is not a regular file or directory; only those go into the build",
                name.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_tag_depends_on_the_set_and_the_base() {
        let a = packages_tag("sha256:1", &["jq".into(), "curl".into()]);
        assert_eq!(
            a,
            packages_tag("sha256:1", &["curl".into(), " jq".into(), "jq".into()])
        );
        assert_ne!(a, packages_tag("sha256:2", &["jq".into(), "curl".into()]));
        assert_ne!(a, packages_tag("sha256:1", &["jq".into()]));
        assert!(a.starts_with("minicoder-packages:"));
    }

    #[test]
    fn the_install_passes_the_names_as_arguments_never_as_shell_text() {
        let argv = packages_command(&["jq".into(), "curl".into(), "jq".into()]);
        assert_eq!(&argv[..2], ["/bin/sh", "-c"]);
        assert!(
            argv[2].contains("apt-get install -y --no-install-recommends \"$@\""),
            "{}",
            argv[2]
        );
        assert!(
            !argv[2].contains("jq"),
            "no name in the script: {}",
            argv[2]
        );
        assert_eq!(&argv[3..], ["sh", "curl", "jq"], "sorted, once each");
    }

    #[test]
    fn builds_have_no_network_unless_trusted_for_it() {
        let off = build_options("t", HashMap::new(), false);
        assert_eq!(off.networkmode.as_deref(), Some("none"));
        assert!(off.nocache, "no layer of a build with other network");
        let on = build_options("t", HashMap::new(), true);
        assert_eq!(on.networkmode, None, "the default network");
    }

    #[test]
    fn a_recipe_packs_the_same_whatever_its_timestamps() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("Dockerfile"), "FROM x\n").expect("write");
        std::fs::create_dir(dir.path().join("files")).expect("mkdir");
        std::fs::write(dir.path().join("files/a.txt"), "a").expect("write");
        let (_, first) = pack_recipe(dir.path()).expect("pack");
        let later = std::time::SystemTime::now() + std::time::Duration::from_secs(3600);
        std::fs::File::options()
            .write(true)
            .open(dir.path().join("files/a.txt"))
            .and_then(|f| f.set_modified(later))
            .expect("touch");
        let (_, second) = pack_recipe(dir.path()).expect("pack");
        assert_eq!(first, second);
        std::fs::write(dir.path().join("files/a.txt"), "b").expect("write");
        let (_, third) = pack_recipe(dir.path()).expect("pack");
        assert_ne!(first, third);
    }

    #[test]
    fn a_recipe_with_a_symlink_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("Dockerfile"), "FROM x\n").expect("write");
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("passwd")).expect("symlink");
        let err = pack_recipe(dir.path()).expect_err("refused");
        assert!(err.to_string().contains("passwd"), "{err}");
    }
}
