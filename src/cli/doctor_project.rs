//! `minicoder doctor` inside a repository: the checks a run would freeze, the
//! image it would use, and whether that image can run them. Nothing
//! is built: a project image not built yet is checked through its base, and
//! what its packages would add is said so.

use std::path::{Path, PathBuf};

use bollard::Docker;

use crate::sandbox::spec::{ContainerSpec, Role};
use crate::sandbox::{CommandContainer, derived, spec};
use crate::verify::{self, preflight};

/// How a doctor line judges what it found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    Ok,
    Warn,
    Fail,
}

/// The repository around the current directory, if any.
fn current_repo() -> Option<PathBuf> {
    let cwd = std::env::current_dir().ok()?;
    let repo = git2::Repository::discover(&cwd).ok()?;
    repo.workdir().map(Path::to_path_buf)
}

/// Reports the project's checks and whether its image has their programs.
pub async fn report(docker: Option<&Docker>, record: &mut dyn FnMut(Level, &str, String)) {
    let Some(repo) = current_repo() else {
        return record(
            Level::Warn,
            "project",
            "not inside a Git repository: run `minicoder doctor` in one to see what a run there checks"
                .into(),
        );
    };
    record(Level::Ok, "project", repo.display().to_string());
    let files = match verify::load_project(&repo) {
        Ok(files) => files,
        Err(e) => return record(Level::Fail, "project config", e.to_string()),
    };
    let honoured = trust_report(&repo, &files, record);
    shape_report(&repo, &files, record);
    let config = honoured.config.clone();
    let checks = match verify::resolve_checks(&repo, config.as_ref(), &[]) {
        Ok(checks) => checks,
        Err(e) => return record(Level::Fail, "checks", e.to_string()),
    };
    let listed: Vec<String> = checks
        .iter()
        .map(|c| format!("{} (`{}`)", c.name, c.command))
        .collect();
    record(Level::Ok, "checks", listed.join(", "));
    let Some(docker) = docker else {
        return record(
            Level::Fail,
            "check programs",
            "cannot be looked for without Docker".into(),
        );
    };
    let request = honoured.image_request();
    let bootstrap = config.map(|c| c.bootstrap).unwrap_or_default();
    let (image, pending) = image_to_check(docker, &repo, &request).await;
    if docker.inspect_image(&image).await.is_err() {
        return record(
            Level::Warn,
            "check programs",
            format!("{image} is not built yet; it is built on the first run"),
        );
    }
    let needs = preflight::requirements(&repo, &checks, &bootstrap);
    let missing = match look_for(docker, &image, &needs).await {
        Ok(missing) => missing,
        Err(e) => return record(Level::Fail, "check programs", e),
    };
    // Package scripts' programs come from node_modules, which only a run's
    // bootstrap installs: not a failure here when a bootstrap is configured.
    let (deferred, missing): (Vec<_>, Vec<_>) = missing.into_iter().partition(|r| {
        !bootstrap.is_empty() && matches!(r.need, preflight::Need::ScriptProgram { .. })
    });
    for r in &deferred {
        record(
            Level::Warn,
            "check programs",
            format!(
                "{} is not in {image}; the bootstrap is expected to install it",
                r.by
            ),
        );
    }
    if missing.is_empty() {
        let note = pending
            .map(|p| format!(" (and the packages {p} are added on the first run)"))
            .unwrap_or_default();
        record(
            Level::Ok,
            "check programs",
            format!("{image} has every program the checks run{note}"),
        );
    } else {
        let level = if pending.is_some() {
            Level::Warn
        } else {
            Level::Fail
        };
        let mut text = preflight::describe_missing(&missing, &image);
        if let Some(p) = pending {
            text.push_str(&format!(
                " (the packages {p} are not built yet and may provide it)"
            ));
        }
        record(level, "check programs", text);
    }
}

/// What stands in a run's way that no image check finds: dependencies
/// that nothing installs (checks run without network), and submodules.
fn shape_report(
    repo: &Path,
    files: &verify::project::ProjectFiles,
    record: &mut dyn FnMut(Level, &str, String),
) {
    // The bootstrap the repository asks for, trusted or not: trust is
    // reported on its own line.
    let bootstrap = files
        .config
        .as_ref()
        .map(|c| c.bootstrap.clone())
        .unwrap_or_default();
    for d in verify::deps::uninstalled(repo, &bootstrap) {
        record(
            Level::Warn,
            "dependencies",
            format!(
                "{} declares dependencies that no bootstrap installs, and checks run without network: add \"bootstrap\": [\"{}\"] to .minicoder.json (and `minicoder trust` it)",
                d.file, d.install
            ),
        );
    }
    for (path, checked_out) in submodules(repo) {
        let text = if checked_out {
            format!(
                "{path}: copied into a run's workspace as plain files (its .git left out); changes there are applied into its working tree, and `apply --commit` refuses them"
            )
        } else {
            format!(
                "{path}: not checked out, so a run sees none of it (`git submodule update --init`)"
            )
        };
        record(Level::Warn, "submodules", text);
    }
}

/// The repository's submodules (at most 10), and whether each is checked
/// out.
fn submodules(repo: &Path) -> Vec<(String, bool)> {
    crate::workspace::submodules_of(repo)
        .into_iter()
        .take(10)
        .map(|path| {
            let checked_out = std::fs::symlink_metadata(repo.join(&path).join(".git")).is_ok();
            (path, checked_out)
        })
        .collect()
}

/// Says how far the repository's configuration is trusted, and returns it
/// as a run would honour it now.
fn trust_report(
    repo: &Path,
    files: &verify::ProjectFiles,
    record: &mut dyn FnMut(Level, &str, String),
) -> verify::Honoured {
    let Some(hash) = files.hash.as_deref() else {
        return files.honour(None);
    };
    let short = crate::runtime::short_hash(hash);
    let needs = files.needs_trust();
    let store = crate::state::StateDir::from_env()
        .map_err(|e| e.to_string())
        .and_then(|state| verify::TrustStore::load(&state));
    let store = match store {
        Ok(store) => store,
        Err(e) => {
            record(Level::Fail, "project trust", e);
            return files.honour(None);
        }
    };
    let trust = store.lookup(repo, hash);
    match (trust, needs.is_empty()) {
        (_, true) => record(
            Level::Ok,
            "project trust",
            format!("configuration {short} asks for nothing that needs trust"),
        ),
        (Some(t), false) => record(
            Level::Ok,
            "project trust",
            format!(
                "configuration {short} is trusted{}: it {}",
                if t.network { " with network" } else { "" },
                needs.join("; it ")
            ),
        ),
        (None, false) => {
            let changed = if store.entry(repo).is_some() {
                "changed since it was trusted, so "
            } else {
                ""
            };
            record(
                Level::Warn,
                "project trust",
                format!(
                    "configuration {short} {changed}is not trusted; runs ignore that it {}; `minicoder trust` honours it",
                    needs.join("; that it ")
                ),
            );
        }
    }
    files.honour(trust)
}

/// The project image if it is built, else its base and the packages still to add.
async fn image_to_check(
    docker: &Docker,
    repo: &Path,
    request: &derived::ImageRequest,
) -> (String, Option<String>) {
    let base = request.image.clone().unwrap_or_else(spec::image_from_env);
    let _ = repo;
    if request.packages.is_empty() || request.recipe.is_some() {
        return (base, None);
    }
    let built = match docker.inspect_image(&base).await {
        Ok(inspect) => inspect
            .id
            .map(|id| derived::packages_tag(&id, &request.packages)),
        Err(_) => None,
    };
    match built {
        Some(tag) if docker.inspect_image(&tag).await.is_ok() => (tag, None),
        _ => (base, Some(request.packages.join(", "))),
    }
}

/// Looks for the needs in a disposable container of `image`.
async fn look_for<'a>(
    docker: &Docker,
    image: &str,
    needs: &'a [preflight::Requirement],
) -> Result<Vec<&'a preflight::Requirement>, String> {
    let ws = tempfile::Builder::new()
        .prefix("minicoder-doctor-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    if rustix::process::geteuid().is_root() {
        let _ = std::os::unix::fs::chown(
            ws.path(),
            Some(crate::sandbox::SANDBOX_UID),
            Some(crate::sandbox::SANDBOX_GID),
        );
    }
    let mut spec = ContainerSpec::new(
        image,
        ws.path(),
        format!("doctor-{}", crate::ids::random_hex(4)),
    );
    spec.role = Role::Probe;
    let mut container = CommandContainer::start(docker.clone(), spec)
        .await
        .map_err(|e| e.to_string())?;
    let found = preflight::find_missing(&mut container, needs).await;
    container.shutdown().await;
    found.map_err(|e| e.to_string())
}
