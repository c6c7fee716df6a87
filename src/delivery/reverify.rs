//! The re-verification of a subset: a fresh copy of the source, the run's
//! bootstrap, the subset applied, the run's frozen checks in fresh
//! containers; the copy and every container removed afterwards.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::plan::{BaselineStore, Plan};
use super::{DeliveryError, Source, transaction};
use crate::owner::{ProcessIdentity, write_owner_file};
use crate::protocol::CheckReport;
use crate::runs::RunRecord;
use crate::sandbox;
use crate::state::StateDir;
use crate::verify::{self, CheckSpec, Verifier, VerifierSettings};
use crate::workspace::{ExcludeSet, Fingerprinter, PrivateWorkspace, WorkspaceLimits};

/// How the checks went on the source with the subset applied.
#[derive(Debug, Clone)]
pub(crate) struct Reverified {
    pub passed: bool,
    pub checks: Vec<CheckReport>,
    pub image: String,
    /// The fresh copy's fingerprint before the bootstrap and the subset.
    pub base_fingerprint: String,
}

fn failed(what: impl std::fmt::Display) -> DeliveryError {
    DeliveryError::Reverify(what.to_string())
}

/// The frozen checks of the run, as its manifest records them.
pub(crate) fn frozen_checks(run: &RunRecord) -> Result<Vec<CheckSpec>, DeliveryError> {
    if run.manifest.checks.is_empty() {
        return Err(DeliveryError::BadSubset(format!(
            "run {} froze no check, so nothing can verify a subset of its patch; apply the whole patch instead",
            run.id
        )));
    }
    if let Some(c) = run
        .manifest
        .checks
        .iter()
        .find(|c| c.command.contains(crate::trace::redact::REDACTED))
    {
        return Err(DeliveryError::BadSubset(format!(
            "the check {} was recorded with a credential redacted, so it cannot be run again",
            c.name
        )));
    }
    Ok(run
        .manifest
        .checks
        .iter()
        .map(|c| CheckSpec::new(&c.name, &c.command))
        .collect())
}

/// The workspace of a re-verification: removed, with its owner file and
/// stat cache, when dropped.
struct Claim {
    dir: PathBuf,
    owner_file: PathBuf,
    cache: PathBuf,
    /// The dependency directory of its bootstrap, with its owner file.
    deps: Option<(PathBuf, PathBuf)>,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        let _ = std::fs::remove_file(&self.owner_file);
        let _ = std::fs::remove_file(&self.cache);
        if let Some((dir, owner)) = &self.deps {
            let _ = std::fs::remove_dir_all(dir);
            let _ = std::fs::remove_file(owner);
        }
    }
}

pub(crate) async fn reverify(
    state: &StateDir,
    run: &RunRecord,
    repo: &Path,
    patch: &[u8],
    source_plan: &Plan,
    merge: Option<&BaselineStore>,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<Reverified, DeliveryError> {
    let checks = frozen_checks(run)?;
    // What the run honoured of the repository's configuration, as long as
    // it is still the configuration the run had.
    let files = verify::load_project(repo).map_err(failed)?;
    let honoured = files.honour_as_run(run.manifest.project.as_ref());
    let config = honoured.config.as_ref();
    let secrets = verify::secret_paths(repo, config).map_err(failed)?;
    let request = honoured.image_request();
    let overrides = config.map(|c| c.limits).unwrap_or_default();
    let bootstrap = if honoured.trust.is_some() {
        run.manifest.bootstrap.clone()
    } else {
        Vec::new()
    };
    let bootstrap_network = honoured.trust.is_some_and(|t| t.network)
        && verify::bootstrap_network(std::env::var(verify::BOOTSTRAP_NETWORK_ENV).ok().as_deref());

    progress("the sandbox image");
    let docker = sandbox::connect().await.map_err(failed)?;
    let image = sandbox::derived::resolve(&docker, repo, &request, &mut |_| {})
        .await
        .map_err(failed)?;

    let (name, claim) = claim_workspaces(state, run, !bootstrap.is_empty())?;
    let deps = claim.deps.as_ref().map(|(dir, _)| dir.clone());

    progress("copying the source");
    let owner = crate::workspace::workspace_owner();
    let (base_fingerprint, limits, excludes) =
        copy_and_fingerprint(repo, &claim.dir, owner, secrets, overrides).await?;

    let outputs = outputs_dir(run);
    if !bootstrap.is_empty() {
        progress("bootstrap");
        let settings = verify::BootstrapSettings {
            image: image.clone(),
            workspace: claim.dir.clone(),
            run_id: name.clone(),
            network: bootstrap_network,
            outputs_dir: outputs.clone(),
            timeout: verify::DEFAULT_BOOTSTRAP_TIMEOUT,
            downloads: None,
            deps: deps.clone(),
            limits: Some(limits),
        };
        let result = verify::run_bootstrap(docker.clone(), &settings, &bootstrap)
            .await
            .map_err(failed)?;
        if !result.passed {
            let why = result.failure.unwrap_or_else(|| "it failed".into());
            progress(&format!("bootstrap: FAILED: {why}"));
            return Ok(Reverified {
                passed: false,
                checks: vec![CheckReport {
                    name: "bootstrap".into(),
                    command: bootstrap.join(" && "),
                    exit_code: result.outputs.last().and_then(|o| o.exit_code),
                    passed: false,
                    duration_ms: result.duration_ms,
                    failure: Some(why),
                    first_error: None,
                    output_file: None,
                }],
                image,
                base_fingerprint,
            });
        }
    }

    // What the bootstrap built that the repository ignores stays for the
    // checks (nothing else has run in the copy yet).
    let kept = crate::workspace::ignored_entries(&claim.dir, &excludes);
    progress("applying the subset to the copy");
    apply_to_copy(&claim.dir, patch, source_plan, merge, owner)?;

    let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
    progress(&format!("check {} …", names.join(", ")));
    let mut settings = VerifierSettings::new(
        image.clone(),
        claim.dir.clone(),
        name,
        checks,
        outputs,
        claim.cache.clone(),
    );
    settings.excludes = excludes;
    // A run that accepted a test run with no test (pytest's exit 5) did so
    // because it was asked to.
    settings.allow_zero_tests = accepted_zero_tests(run);
    if run.manifest.limits.command_timeout_ms > 0 {
        settings.check_timeout = Duration::from_millis(run.manifest.limits.command_timeout_ms);
    }
    settings.deps = deps;
    settings.limits = Some(limits);
    let mut verifier = Verifier::new(docker, settings).map_err(failed)?;
    verifier.keep_ignored(kept);
    let result = {
        let mut observe = |c: &CheckReport| progress(&format!("check {}: {}", c.name, verdict(c)));
        verifier.verify(1, &mut observe).await
    };
    verifier.shutdown().await;
    let result = result.map_err(failed)?;
    drop(claim);
    Ok(Reverified {
        passed: result.passed,
        checks: result.checks,
        image,
        base_fingerprint,
    })
}

/// Claims a private workspace (and, for a bootstrap, a dependency
/// directory) for the subset's verification: its name and the claim that
/// removes them when dropped.
fn claim_workspaces(
    state: &StateDir,
    run: &RunRecord,
    bootstrap: bool,
) -> Result<(String, Claim), DeliveryError> {
    let name = format!("{}-subset-{}", run.id, crate::ids::random_hex(3));
    crate::state::private_dir(&state.workspaces_dir()).map_err(failed)?;
    let deps_name = format!("{name}-deps");
    let mut claim = Claim {
        dir: state.workspace_dir(&name),
        owner_file: sandbox::gc::workspace_owner_file(state, &name),
        cache: state.stat_cache_paths(&name)[0].clone(),
        deps: None,
    };
    write_owner_file(&claim.owner_file, &ProcessIdentity::current()).map_err(failed)?;
    std::fs::create_dir(&claim.dir).map_err(failed)?;
    if bootstrap {
        let dir = state.workspace_dir(&deps_name);
        let owner_file = sandbox::gc::workspace_owner_file(state, &deps_name);
        write_owner_file(&owner_file, &ProcessIdentity::current()).map_err(failed)?;
        claim.deps = Some((dir.clone(), owner_file));
        std::fs::create_dir(&dir).map_err(failed)?;
        if let Some((uid, gid)) = crate::workspace::workspace_owner() {
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(failed)?;
        }
    }
    Ok((name, claim))
}

/// Copies the source into `dir` and fingerprints the copy: its fingerprint,
/// its limits and what its scans leave out.
async fn copy_and_fingerprint(
    repo: &Path,
    dir: &Path,
    owner: Option<(u32, u32)>,
    secrets: crate::workspace::SecretPaths,
    overrides: crate::workspace::LimitOverrides,
) -> Result<(String, WorkspaceLimits, ExcludeSet), DeliveryError> {
    let (repo, dir) = (repo.to_path_buf(), dir.to_path_buf());
    tokio::task::spawn_blocking(
        move || -> Result<(String, WorkspaceLimits, ExcludeSet), DeliveryError> {
            let max_file_bytes = WorkspaceLimits::new(0, &overrides).max_file_bytes;
            let copy = PrivateWorkspace::create_limited(
                &repo,
                &dir,
                owner,
                &secrets,
                max_file_bytes,
                &mut |_| {},
            )
            .map_err(failed)?;
            let copied = crate::workspace::limits::measure(&dir, &mut |_| false);
            let limits = WorkspaceLimits::new(copied.bytes, &overrides);
            let excludes =
                crate::workspace::run_excludes(&dir.join(".git"), copy.baseline(), &repo);
            let mut scanner = Fingerprinter::new(&dir, excludes.clone());
            scanner.set_max_file_bytes(limits.max_file_bytes);
            let snapshot = scanner.scan().map_err(failed)?;
            Ok((snapshot.fingerprint.to_string(), limits, excludes))
        },
    )
    .await
    .map_err(failed)?
}

/// Where the subset's bootstrap and checks write their outputs.
fn outputs_dir(run: &RunRecord) -> std::path::PathBuf {
    run.dir
        .join(super::journal::JOURNAL_DIR)
        .join("subset-outputs")
}

/// Whether the run accepted a test run with no test (pytest's exit 5).
fn accepted_zero_tests(run: &RunRecord) -> bool {
    run.report.as_ref().is_some_and(|r| {
        r.verification
            .checks
            .iter()
            .any(|c| c.passed && c.exit_code == Some(5))
    })
}

/// `passed`, or `FAILED (exit 1): why`.
fn verdict(c: &CheckReport) -> String {
    if c.passed {
        return "passed".to_string();
    }
    let why = c.first_error.as_ref().or(c.failure.as_ref());
    format!(
        "FAILED ({}){}",
        c.exit_code
            .map_or("no exit code".into(), |e| format!("exit {e}")),
        why.map(|w| format!(": {w}")).unwrap_or_default()
    )
}

/// Applies the subset to the fresh copy through the same plan as the
/// source; the images must come out as they will in the source.
fn apply_to_copy(
    dir: &Path,
    patch: &[u8],
    source_plan: &Plan,
    merge: Option<&BaselineStore>,
    owner: Option<(u32, u32)>,
) -> Result<(), DeliveryError> {
    let copy = Source::open(dir)?;
    let (diff, changes) = super::conflict::parse(patch)?;
    let plan = super::plan::plan(&copy, &diff, changes, merge)?;
    let differs: Vec<String> = plan
        .writes
        .iter()
        .filter(|w| {
            !source_plan
                .writes
                .iter()
                .any(|s| s.path == w.path && s.post == w.post)
        })
        .map(|w| crate::workspace::quote_path(&w.path).into_owned())
        .collect();
    if !plan.unmerged.is_empty()
        || (merge.is_none() && !plan.overlaps.is_empty())
        || !differs.is_empty()
        || plan.writes.len() != source_plan.writes.len()
    {
        return Err(failed(format!(
            "the fresh copy of the source does not take the subset as the source does (a credential file or the bootstrap differs there{}); nothing was written",
            if differs.is_empty() {
                String::new()
            } else {
                format!(": {}", differs.join(", "))
            }
        )));
    }
    let steps = transaction::steps_of(&plan.writes);
    transaction::run(&copy, &steps)?;
    if let Some((uid, gid)) = owner {
        for w in &plan.writes {
            let mut at = copy.root().to_path_buf();
            for part in w.path.split(|b| *b == b'/') {
                at.push(OsStr::from_bytes(part));
                if at.symlink_metadata().is_ok() {
                    std::os::unix::fs::lchown(&at, Some(uid), Some(gid)).map_err(failed)?;
                }
            }
        }
    }
    Ok(())
}
