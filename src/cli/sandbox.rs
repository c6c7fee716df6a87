//! `minicoder sandbox build` and `minicoder sandbox probe`.

use std::process::ExitCode;

use anyhow::Context;

use super::progress::BuildDisplay;
use crate::sandbox::image::{self, ImageStatus};
use crate::sandbox::{self, probe, spec};
use crate::state::StateDir;

/// Puts a random value in this process's environment so the probe can prove
/// that it does not reach the container. Must run before any thread starts.
pub(crate) fn set_probe_sentinel() {
    // SAFETY: called from `main` before the async runtime (or any other
    // thread) exists, so nothing reads the environment concurrently.
    unsafe { std::env::set_var(probe::HOST_SENTINEL_VAR, crate::ids::random_hex(12)) };
}

/// Connects to Docker and makes sure the sandbox image exists, building it
/// with a progress display when it is missing or out of date.
pub(crate) async fn docker_with_image() -> anyhow::Result<(bollard::Docker, String)> {
    let docker = sandbox::connect().await?;
    let image = spec::image_from_env();
    let mut display = BuildDisplay::new();
    let status = image::ensure_image(&docker, &image, &mut |p| display.update(p)).await?;
    if status == ImageStatus::Built {
        display.finish(&format!("built {image}"));
    }
    Ok((docker, image))
}

/// Like [`docker_with_image`], for a run of `repo`: its project image
/// (`"image"`, `"packages"`, `.minicoder/Dockerfile`) is built first, with the
/// same progress display, when the person trusts the repository's
/// configuration (at this hash, or for this run: `trust`). A configuration
/// that does not load is left for the run to report.
pub(crate) async fn docker_with_project_image(
    repo: &std::path::Path,
    trust: Option<crate::verify::Trust>,
) -> anyhow::Result<(bollard::Docker, String)> {
    let Ok(files) = crate::verify::load_project(repo) else {
        return docker_with_image().await;
    };
    let recorded = StateDir::from_env()
        .ok()
        .and_then(|state| files.recorded_trust(&state, repo));
    let request = files.honour(trust.or(recorded)).image_request();
    if request == Default::default() {
        return docker_with_image().await;
    }
    let docker = sandbox::connect().await?;
    let mut display = BuildDisplay::new();
    let mut built = false;
    let image = sandbox::derived::resolve(&docker, repo, &request, &mut |p| {
        built |= matches!(p, image::BuildProgress::Step { .. });
        display.update(p)
    })
    .await?;
    if built {
        display.finish(&format!("the project image is {image}"));
    }
    Ok((docker, image))
}

/// Removes what dead runs left, quietly unless something was removed.
/// What every run needs before it starts: the project's image (built if
/// need be) and the leftovers of dead runs collected.
pub(crate) async fn ready_for_run(
    repo: &std::path::Path,
    trust: Option<crate::verify::Trust>,
) -> anyhow::Result<()> {
    let (docker, _) = docker_with_project_image(repo, trust).await?;
    startup_gc(&docker).await;
    Ok(())
}

pub(crate) async fn startup_gc(docker: &bollard::Docker) {
    let mut report = sandbox::gc::GcReport::default();
    let _ = sandbox::gc::collect_docker(docker, &mut report).await;
    if let Ok(state) = StateDir::from_env() {
        sandbox::gc::collect_workspaces(&state, &mut report);
    }
    if !report.is_empty() {
        err!(
            "minicoder: removed what dead runs left: {} container(s), {} volume(s), {} workspace(s)",
            report.containers.len(),
            report.volumes.len(),
            report.workspaces.len()
        );
    }
}

pub async fn build(force: bool) -> anyhow::Result<ExitCode> {
    let docker = sandbox::connect().await?;
    let image = spec::image_from_env();
    // Another name is built from the built-in definition only when nothing
    // else lives there: an image of the person's own is never replaced.
    let installed = image::installed_definition(&docker, &image).await?;
    if installed.is_some() && !image::is_builtin(&image, installed.as_deref()) {
        anyhow::bail!(
            "MINICODER_SANDBOX_IMAGE is set to {image}, an image minicoder did not build: it is left as it is; build yours with docker, or unset the variable to use {}",
            spec::DEFAULT_IMAGE
        );
    }
    let mut display = BuildDisplay::new();
    let work = async {
        if force {
            image::build_image(&docker, &image, &mut |p| display.update(p)).await?;
            Ok::<_, sandbox::SandboxError>(ImageStatus::Built)
        } else if installed.is_none() {
            image::build_image(&docker, &image, &mut |p| display.update(p)).await?;
            Ok(ImageStatus::Built)
        } else {
            image::ensure_image(&docker, &image, &mut |p| display.update(p)).await
        }
    };
    let Some(status) = super::until_cancelled(Some(&docker), work).await else {
        return Ok(ExitCode::from(super::EXIT_CANCELLED));
    };
    match status? {
        ImageStatus::UpToDate => err!(
            "sandbox: {image} is up to date (definition {})",
            image::definition_hash()
        ),
        ImageStatus::Built => display.finish(&format!(
            "built {image} (definition {})",
            image::definition_hash()
        )),
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn probe() -> anyhow::Result<ExitCode> {
    let (docker, image) = docker_with_image().await?;
    startup_gc(&docker).await;
    let state = StateDir::from_env()?;
    state.ensure().context("creating the state directory")?;
    out!("minicoder sandbox probe: image {image}");
    let mut print = |c: &probe::ProbeCheck| out!("{c}");
    let work = probe::run_probe(&docker, &image, &state, &mut print);
    let Some(checks) = super::until_cancelled(Some(&docker), work).await else {
        return Ok(ExitCode::from(super::EXIT_CANCELLED));
    };
    let checks = checks?;
    let failed = checks.iter().filter(|c| !c.passed).count();
    out!(
        "{} checks: {} passed, {failed} failed",
        checks.len(),
        checks.len() - failed
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::EXIT_FAILURE)
    })
}
