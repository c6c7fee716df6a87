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
    outputs_report(&repo, &checks, record);
    let is_go = repo.join("go.mod").is_file();
    let Some(docker) = docker else {
        if is_go {
            go_report(&repo, None, record);
        }
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
        if is_go {
            go_report(&repo, None, record);
        }
        return record(
            Level::Warn,
            "check programs",
            format!("{image} is not built yet; it is built on the first run"),
        );
    }
    let needs = preflight::requirements(&repo, &checks, &bootstrap);
    let (missing, toolchain) = match look_for(docker, &image, &needs, is_go).await {
        Ok(found) => found,
        Err(e) => return record(Level::Fail, "check programs", e),
    };
    if is_go {
        go_report(&repo, toolchain.as_ref(), record);
    }
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

/// Says which files `make` checks would write into the tree, and whether
/// the repository's ignore rules cover them.
fn outputs_report(
    repo: &Path,
    checks: &[verify::CheckSpec],
    record: &mut dyn FnMut(Level, &str, String),
) {
    let git = git2::Repository::open(repo).ok();
    let ignored = |path: &str| {
        git.as_ref()
            .is_some_and(|g| g.is_path_ignored(path).unwrap_or(false))
    };
    for check in checks {
        let Some(targets) = verify::make_outputs::make_targets(&check.command) else {
            continue;
        };
        let Some(outputs) = verify::make_outputs::outputs(repo, &targets) else {
            continue;
        };
        if outputs.is_empty() {
            continue;
        }
        let (covered, bare): (Vec<String>, Vec<String>) =
            outputs.into_iter().partition(|p| ignored(p));
        let list = |paths: &[String]| {
            let mut text = paths.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
            if paths.len() > 8 {
                text.push_str(&format!(" and {} more", paths.len() - 8));
            }
            text
        };
        if bare.is_empty() {
            record(
                Level::Ok,
                "check outputs",
                format!(
                    "`{}` builds {}, which the ignore rules cover: removed before each verification, never part of a patch",
                    check.name,
                    list(&covered)
                ),
            );
        } else {
            record(
                Level::Warn,
                "check outputs",
                format!(
                    "`{}` writes {} into the tree, which no ignore rule covers: a check that changes the workspace fails; add them to .gitignore",
                    check.name,
                    list(&bare)
                ),
            );
        }
    }
}

/// Says whether every import of the Go module resolves in the sandbox,
/// and whether its `go` directive asks for a newer toolchain than the
/// image's (checks run without network: Go cannot fetch one).
fn go_report(
    repo: &Path,
    toolchain: Option<&verify::go_imports::Toolchain>,
    record: &mut dyn FnMut(Level, &str, String),
) {
    let Some(gaps) = verify::go_imports::gaps(repo, toolchain) else {
        return;
    };
    let version = toolchain.map(|t| t.version.clone());
    if let (Some(wanted), Some(have)) = (&gaps.newer_go, &version) {
        record(
            Level::Warn,
            "go toolchain",
            format!(
                "go.mod asks for go {} and the image has {have}; checks run without network, so Go cannot fetch a newer one: lower the `go` line or add a newer Go to the image",
                wanted
            ),
        );
    }
    for (import, file) in gaps.not_in_std.iter().take(5) {
        record(
            Level::Warn,
            "go imports",
            format!(
                "{} (imported by {}) is not a standard package of {}",
                import,
                file,
                version.as_deref().unwrap_or("the image's Go")
            ),
        );
    }
    for (import, file) in gaps.unprovided.iter().take(5) {
        record(
            Level::Warn,
            "go imports",
            format!(
                "{} (imported by {}) is provided by no `require` of go.mod: run `go get` for it (or `go mod tidy`) and commit go.mod and go.sum",
                import, file
            ),
        );
    }
    if !gaps.unsummed.is_empty() {
        record(
            Level::Warn,
            "go imports",
            format!(
                "go.sum has no line for {}: `go mod download` fails offline; run `go mod tidy` and commit go.sum",
                gaps.unsummed
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    }
    if gaps.is_empty() {
        let scope = if toolchain.is_some() {
            "resolves (standard library checked against the image's)"
        } else {
            "resolves by go.mod (the standard library was not checked: no image to ask)"
        };
        let more = if gaps.truncated {
            " (first files only)"
        } else {
            ""
        };
        record(
            Level::Ok,
            "go imports",
            format!("every import of {} .go files{more} {scope}", gaps.files),
        );
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

/// Looks for the needs in a disposable container of `image`, and, for a
/// Go module, asks its toolchain for its version and standard packages.
async fn look_for<'a>(
    docker: &Docker,
    image: &str,
    needs: &'a [preflight::Requirement],
    go: bool,
) -> Result<
    (
        Vec<&'a preflight::Requirement>,
        Option<verify::go_imports::Toolchain>,
    ),
    String,
> {
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
    let toolchain = if go {
        let request = crate::sandbox::CommandRequest::new(
            "GOTOOLCHAIN=local go env GOVERSION && GOTOOLCHAIN=local go list std",
        )
        .timeout(std::time::Duration::from_secs(60));
        match container.run(request).await {
            Ok(outcome) if outcome.success() => {
                verify::go_imports::Toolchain::parse(&outcome.stdout.text())
            }
            _ => None,
        }
    } else {
        None
    };
    container.shutdown().await;
    Ok((found.map_err(|e| e.to_string())?, toolchain))
}
