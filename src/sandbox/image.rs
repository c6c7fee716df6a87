//! The sandbox image: built from `sandbox/Dockerfile` where the base image can
//! be pulled, otherwise from a Debian root filesystem made by `debootstrap`
//! (`sandbox/rootfs.sh`) and imported through the engine's API. The image is
//! labelled with a hash of that definition, so an unchanged definition is never
//! rebuilt and a changed one always is. The image is Debian 13 "trixie" with the
//! toolchains the verifier needs for every ecosystem it detects: Python (pip, venv, pytest), Node (npm, yarn, tsc),
//! Rust (cargo, rustfmt, clippy), Go (with a warm standard-library build cache)
//! and C/C++.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use bollard::Docker;
use bollard::query_parameters::{BuildImageOptions, CreateImageOptions};
use futures_util::{StreamExt, TryStreamExt};
use sha2::{Digest, Sha256};
use tokio::io::AsyncBufReadExt;

pub use super::build::BuildProgress;
pub(crate) use super::build::{BuildLock, forward_build, pack_context};
use super::spec::DEFAULT_IMAGE;
use super::{SandboxError, labels};

pub(crate) const DOCKERFILE: &str = include_str!("../../sandbox/Dockerfile");
pub(crate) const ROOTFS_SCRIPT: &str = include_str!("../../sandbox/rootfs.sh");
/// Fills the image's Go build cache (both build paths run it).
pub(crate) const GO_WARM_SCRIPT: &str = include_str!("../../sandbox/go-warm.sh");
/// `/usr/local/bin/go`: Go with the warm cache unless another one is set.
pub(crate) const GO_WRAPPER: &str = include_str!("../../sandbox/go-wrapper.sh");
/// The files of the definition, by the name both build paths give them.
const DEFINITION_FILES: [(&str, &str); 4] = [
    ("Dockerfile", DOCKERFILE),
    ("rootfs.sh", ROOTFS_SCRIPT),
    ("go-warm.sh", GO_WARM_SCRIPT),
    ("go-wrapper.sh", GO_WRAPPER),
];
/// The base image of the Dockerfile.
const BASE_IMAGE: &str = "debian:trixie-slim";
/// Instructions applied to the imported root filesystem, matching the Dockerfile.
const IMPORT_CHANGES: [&str; 4] = [
    "USER 10001:10001",
    "WORKDIR /workspace",
    "ENV HOME=/home/sandbox LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1",
    "CMD [\"/bin/sh\"]",
];

/// What [`ensure_image`] found or did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageStatus {
    UpToDate,
    Built,
}

/// Hash of the built-in sandbox definition (Dockerfile and root-filesystem script).
pub(crate) fn definition_hash() -> String {
    let mut h = Sha256::new();
    for (name, text) in DEFINITION_FILES {
        h.update(name.as_bytes());
        h.update([0]);
        h.update((text.len() as u64).to_be_bytes());
        h.update(text.as_bytes());
    }
    h.update(IMPORT_CHANGES.join("\n").as_bytes());
    hex::encode(h.finalize())[..16].to_string()
}

/// The definition hash an existing image was built from, or `None` if the
/// image is missing (`Some("")` if it has no such label).
pub(crate) async fn installed_definition(
    docker: &Docker,
    image: &str,
) -> Result<Option<String>, SandboxError> {
    match docker.inspect_image(image).await {
        Ok(inspect) => Ok(Some(
            inspect
                .config
                .and_then(|c| c.labels)
                .and_then(|l| l.get(labels::DEFINITION).cloned())
                .unwrap_or_default(),
        )),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(None),
        Err(e) => Err(SandboxError::docker(format!("inspect image {image}"), e)),
    }
}

/// Whether minicoder builds `image` from its own definition: the default
/// name always; another name when the image there was built that way (it
/// carries a definition label), so `minicoder sandbox build` under
/// `MINICODER_SANDBOX_IMAGE` keeps it current too. `installed` is what
/// [`installed_definition`] found.
pub(crate) fn is_builtin(image: &str, installed: Option<&str>) -> bool {
    image == DEFAULT_IMAGE || installed.is_some_and(|label| !label.is_empty())
}

/// Makes sure `image` is usable. The built-in image is built (or rebuilt, when
/// its definition changed); any other image (`MINICODER_SANDBOX_IMAGE`, or a
/// project's `"image"`) must already exist.
pub async fn ensure_image(
    docker: &Docker,
    image: &str,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<ImageStatus, SandboxError> {
    let installed = installed_definition(docker, image).await?;
    if !is_builtin(image, installed.as_deref()) {
        return match installed {
            Some(_) => Ok(ImageStatus::UpToDate),
            None => Err(SandboxError::ImageMissing {
                image: image.to_string(),
            }),
        };
    }
    if installed.as_deref() == Some(definition_hash().as_str()) {
        return Ok(ImageStatus::UpToDate);
    }
    // Another process may be building it right now: wait for it, then look again.
    let _lock = BuildLock::acquire(progress).await?;
    if installed_definition(docker, image).await?.as_deref() == Some(definition_hash().as_str()) {
        return Ok(ImageStatus::UpToDate);
    }
    build_image(docker, image, progress).await?;
    Ok(ImageStatus::Built)
}

/// Builds `image` from the built-in definition, whatever is installed.
pub(crate) async fn build_image(
    docker: &Docker,
    image: &str,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<(), SandboxError> {
    let hash = definition_hash();
    progress(BuildProgress::Step {
        step: 1,
        total: 3,
        what: format!("looking for the base image {BASE_IMAGE}"),
    });
    if base_image_available(docker).await {
        return build_from_dockerfile(docker, image, &hash, progress).await;
    }
    progress(BuildProgress::Line(format!(
        "{BASE_IMAGE} cannot be pulled here; building the root filesystem with debootstrap instead"
    )));
    build_offline(docker, image, &hash, progress).await
}

async fn base_image_available(docker: &Docker) -> bool {
    if docker.inspect_image(BASE_IMAGE).await.is_ok() {
        return true;
    }
    let pull = docker.create_image(
        Some(CreateImageOptions {
            from_image: Some(BASE_IMAGE.to_string()),
            ..Default::default()
        }),
        None,
        None,
    );
    pull.try_collect::<Vec<_>>().await.is_ok()
}

async fn build_from_dockerfile(
    docker: &Docker,
    image: &str,
    hash: &str,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<(), SandboxError> {
    progress(BuildProgress::Step {
        step: 2,
        total: 3,
        what: "building from sandbox/Dockerfile".into(),
    });
    let files: Vec<(&str, &[u8])> = DEFINITION_FILES
        .iter()
        .filter(|(name, _)| *name != "rootfs.sh")
        .map(|(name, text)| (*name, text.as_bytes()))
        .collect();
    let context = pack_context(&files)?;
    let options = BuildImageOptions {
        dockerfile: "Dockerfile".into(),
        t: Some(image.to_string()),
        rm: true,
        forcerm: true,
        labels: Some(HashMap::from([(
            labels::DEFINITION.to_string(),
            hash.to_string(),
        )])),
        ..Default::default()
    };
    let stream = docker.build_image(options, None, Some(bollard::body_full(context.into())));
    forward_build(stream, progress).await?;
    progress(BuildProgress::Step {
        step: 3,
        total: 3,
        what: format!("built {image}"),
    });
    Ok(())
}

async fn build_offline(
    docker: &Docker,
    image: &str,
    hash: &str,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<(), SandboxError> {
    if !rustix::process::geteuid().is_root() {
        return Err(SandboxError::ImageBuild(
            "no base image can be pulled, and the offline build (debootstrap) needs root: run `sudo minicoder sandbox build`".into(),
        ));
    }
    ensure_debootstrap(progress).await?;
    let state =
        crate::state::StateDir::from_env().map_err(|e| SandboxError::ImageBuild(e.to_string()))?;
    let build_dir = state.root().join("sandbox-build");
    crate::state::private_dir(&build_dir)
        .map_err(|e| SandboxError::ImageBuild(format!("creating {}: {e}", build_dir.display())))?;
    let rootfs = build_dir.join(format!("rootfs-{}", crate::ids::random_hex(4)));
    let result = async {
        debootstrap(&build_dir, &rootfs, progress).await?;
        import_rootfs(docker, image, hash, &rootfs, progress).await
    }
    .await;
    if rootfs.exists() {
        let _ = std::fs::remove_dir_all(&rootfs);
    }
    result
}

async fn ensure_debootstrap(
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<(), SandboxError> {
    if find_program("debootstrap").is_some() {
        return Ok(());
    }
    if find_program("apt-get").is_none() {
        return Err(SandboxError::ImageBuild(
            "debootstrap is not installed and there is no apt-get to install it: install debootstrap".into(),
        ));
    }
    progress(BuildProgress::Line(
        "debootstrap is missing; installing it with apt-get".into(),
    ));
    for args in [
        &["install", "-y", "-q", "debootstrap"][..],
        &["update", "-q"],
        &["install", "-y", "-q", "debootstrap"],
    ] {
        let status = tokio::process::Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .map_err(|e| SandboxError::ImageBuild(format!("running apt-get: {e}")))?;
        if status.success() && find_program("debootstrap").is_some() {
            return Ok(());
        }
    }
    Err(SandboxError::ImageBuild(
        "installing debootstrap with apt-get failed: install it by hand (apt-get install debootstrap)".into(),
    ))
}

async fn debootstrap(
    build_dir: &Path,
    rootfs: &Path,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<(), SandboxError> {
    progress(BuildProgress::Step {
        step: 2,
        total: 3,
        what: "building a Debian root filesystem with debootstrap (about 4 minutes)".into(),
    });
    for (name, text) in DEFINITION_FILES {
        let path = build_dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| SandboxError::ImageBuild(format!("writing {}: {e}", path.display())))?;
    }
    let script = build_dir.join("rootfs.sh");
    let mirror = std::env::var("MINICODER_DEBIAN_MIRROR")
        .unwrap_or_else(|_| "http://deb.debian.org/debian".into());
    let mut child = tokio::process::Command::new("sh")
        .arg(&script)
        .arg(rootfs)
        .arg(&mirror)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| SandboxError::ImageBuild(format!("starting debootstrap: {e}")))?;
    let stderr = child.stderr.take();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        if let Some(stderr) = stderr {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                text.push_str(&line);
                text.push('\n');
            }
        }
        text
    });
    if let Some(stdout) = child.stdout.take() {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            progress(BuildProgress::Line(line));
        }
    }
    let status = child
        .wait()
        .await
        .map_err(|e| SandboxError::ImageBuild(format!("waiting for debootstrap: {e}")))?;
    let errors = errors.await.unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = errors.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(SandboxError::ImageBuild(format!(
            "debootstrap failed ({status}) using {mirror}: {}",
            tail.join(" | ")
        )));
    }
    Ok(())
}

async fn import_rootfs(
    docker: &Docker,
    image: &str,
    hash: &str,
    rootfs: &Path,
    progress: &mut (dyn FnMut(BuildProgress) + Send),
) -> Result<(), SandboxError> {
    progress(BuildProgress::Step {
        step: 3,
        total: 3,
        what: format!("importing the root filesystem as {image}"),
    });
    let mut tar = tokio::process::Command::new("tar")
        .args(["--numeric-owner", "-C"])
        .arg(rootfs)
        .args(["-cf", "-", "."])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| SandboxError::ImageBuild(format!("starting tar: {e}")))?;
    let stdout = tar
        .stdout
        .take()
        .ok_or_else(|| SandboxError::ImageBuild("tar has no output".into()))?;
    let body =
        bollard::body_try_stream(tokio_util::io::ReaderStream::with_capacity(stdout, 1 << 20));
    let (repo, tag) = split_image(image);
    let mut changes: Vec<String> = IMPORT_CHANGES.iter().map(|s| s.to_string()).collect();
    changes.push(format!("LABEL {}={hash}", labels::DEFINITION));
    let options = CreateImageOptions {
        from_src: Some("-".into()),
        repo: Some(repo.to_string()),
        tag: Some(tag.to_string()),
        changes,
        ..Default::default()
    };
    let mut stream = docker.create_image(Some(options), Some(body), None);
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| SandboxError::ImageBuild(format!("importing: {e}")))?;
        if let Some(status) = info.status.filter(|s| !s.trim().is_empty()) {
            progress(BuildProgress::Line(status));
        }
    }
    let status = tar
        .wait()
        .await
        .map_err(|e| SandboxError::ImageBuild(format!("waiting for tar: {e}")))?;
    if !status.success() {
        return Err(SandboxError::ImageBuild(format!("tar failed: {status}")));
    }
    match installed_definition(docker, image).await? {
        Some(found) if found == hash => Ok(()),
        _ => Err(SandboxError::ImageBuild(format!(
            "the import finished but {image} does not carry the expected definition label"
        ))),
    }
}

/// `repo:tag` → (`repo`, `tag`); a missing tag is `latest`.
pub(crate) fn split_image(image: &str) -> (&str, &str) {
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo, tag),
        _ => (image, "latest"),
    }
}

fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_split() {
        assert_eq!(
            split_image("minicoder-sandbox:v1"),
            ("minicoder-sandbox", "v1")
        );
        assert_eq!(split_image("reg:5000/img"), ("reg:5000/img", "latest"));
        assert_eq!(split_image("img"), ("img", "latest"));
    }

    #[test]
    fn definition_hash_is_stable_and_short() {
        assert_eq!(definition_hash(), definition_hash());
        assert_eq!(definition_hash().len(), 16);
    }

    #[test]
    fn the_two_definitions_make_the_same_user() {
        assert!(DOCKERFILE.contains("10001"));
        assert!(ROOTFS_SCRIPT.contains("10001"));
        for pkg in [
            "python3-pytest",
            "python3-pip",
            "python3-venv",
            "nodejs",
            "npm",
            "yarnpkg",
            "node-typescript",
            "rustc",
            "cargo",
            "rustfmt",
            "rust-clippy",
            "golang-go",
            "git",
            "ripgrep",
            "build-essential",
            "procps",
        ] {
            assert!(DOCKERFILE.contains(pkg), "Dockerfile lacks {pkg}");
            assert!(ROOTFS_SCRIPT.contains(pkg), "rootfs.sh lacks {pkg}");
        }
        for both in [
            "trixie",
            "go-warm.sh",
            "/usr/local/bin/go",
            "/usr/local/bin/yarn",
        ] {
            assert!(DOCKERFILE.contains(both), "Dockerfile lacks {both}");
            assert!(ROOTFS_SCRIPT.contains(both), "rootfs.sh lacks {both}");
        }
    }

    #[test]
    fn only_minicoders_own_images_are_rebuilt() {
        assert!(is_builtin(DEFAULT_IMAGE, None));
        assert!(is_builtin(
            "minicoder-sandbox:dev",
            Some("0123456789abcdef")
        ));
        assert!(!is_builtin("python:3.12", Some("")));
        assert!(!is_builtin("python:3.12", None));
    }
}
