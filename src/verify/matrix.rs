//! [`Verifier`]: runs every check of the frozen matrix, in order, each in a
//! fresh container, with the workspace fingerprint taken before and after each
//! check. A check that changes the workspace fails the whole matrix (and stops
//! it); a zero-test result fails unless allowed; the verdict is bound to the
//! fingerprint taken at the start.
//!
//! Speed: a fresh container costs ~300 ms to start, so the verifier keeps one
//! spare started ahead of time ([`Verifier::prewarm`], and for each next
//! check). A started, never used container is still fresh. Used containers are
//! removed in the background and awaited in [`Verifier::shutdown`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::Docker;
use tokio::task::JoinHandle;

use super::VerifyError;
use super::config::CheckSpec;
use super::first_error::first_error;
use super::outcome::{abnormal_end, millis, output_file};
use super::zero_tests::{PYTEST_NO_TESTS_EXIT, PYTEST_ZERO, zero_tests};
use crate::protocol::CheckReport;
use crate::sandbox::spec::Role;
use crate::sandbox::{
    CommandContainer, CommandOutcome, CommandRequest, ContainerSpec, SandboxError,
};
use crate::workspace::{ExcludeSet, Fingerprint, FingerprintEntry, Fingerprinter, Snapshot};

/// The per-check timeout unless configured.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this many changed paths are named in a failure.
const MAX_NAMED_CHANGES: usize = 10;

/// What a [`Verifier`] needs.
#[derive(Debug, Clone)]
pub struct VerifierSettings {
    pub image: String,
    /// Host path of the private workspace.
    pub workspace: PathBuf,
    pub run_id: String,
    /// The frozen checks of the run.
    pub checks: Vec<CheckSpec>,
    /// Where check output is spooled: normally `<artifact dir>/outputs`;
    /// reports name files relative to its parent.
    pub outputs_dir: PathBuf,
    /// The fingerprinter's stat cache; must be outside the workspace.
    pub fingerprint_cache: PathBuf,
    pub allow_zero_tests: bool,
    pub check_timeout: Duration,
    pub excludes: ExcludeSet,
    /// The run's dependency directory (what its bootstrap installed outside
    /// the workspace), mounted read-only. Never the download cache.
    pub deps: Option<PathBuf>,
    /// The workspace limits every check is held to, as commands are: a
    /// check that writes past them is stopped, and fails.
    pub limits: Option<crate::workspace::WorkspaceLimits>,
    /// Checks nobody waits for (the baseline): they yield the CPU to the run.
    pub background: bool,
}

impl VerifierSettings {
    /// Settings with the defaults: zero tests refused, 60 s per check, the
    /// default cache exclusions.
    pub fn new(
        image: impl Into<String>,
        workspace: impl Into<PathBuf>,
        run_id: impl Into<String>,
        checks: Vec<CheckSpec>,
        outputs_dir: impl Into<PathBuf>,
        fingerprint_cache: impl Into<PathBuf>,
    ) -> Self {
        Self {
            image: image.into(),
            workspace: workspace.into(),
            run_id: run_id.into(),
            checks,
            outputs_dir: outputs_dir.into(),
            fingerprint_cache: fingerprint_cache.into(),
            allow_zero_tests: false,
            check_timeout: DEFAULT_CHECK_TIMEOUT,
            excludes: ExcludeSet::default(),
            deps: None,
            limits: None,
            background: false,
        }
    }
}

/// The verdict of one verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerificationResult {
    /// Every check passed.
    pub passed: bool,
    /// The checks that ran, in order (all of them unless one changed the workspace).
    pub checks: Vec<CheckReport>,
    /// The workspace fingerprint at the start: a pass is bound to it.
    pub fingerprint: Fingerprint,
    pub duration_ms: u64,
}

type ContainerStart = JoinHandle<Result<CommandContainer, SandboxError>>;

/// Runs a run's verification matrix.
pub struct Verifier {
    docker: Docker,
    settings: VerifierSettings,
    fingerprinter: Fingerprinter,
    spare: Option<ContainerStart>,
    /// The container of the check under way.
    running: Option<CommandContainer>,
    removals: Vec<JoinHandle<()>>,
    kept_ignored: std::collections::HashSet<Vec<u8>>,
}

impl Verifier {
    /// Fails only if the fingerprint cache is inside the workspace.
    pub fn new(docker: Docker, settings: VerifierSettings) -> Result<Self, VerifyError> {
        let fingerprinter = Fingerprinter::new(&settings.workspace, settings.excludes.clone())
            .with_cache_file(&settings.fingerprint_cache)?;
        Ok(Self {
            docker,
            settings,
            fingerprinter,
            spare: None,
            running: None,
            removals: Vec::new(),
            kept_ignored: std::collections::HashSet::new(),
        })
    }

    pub fn checks(&self) -> &[CheckSpec] {
        &self.settings.checks
    }

    /// Holds the checks from now on to `limits` (known once the workspace
    /// is made).
    pub fn set_limits(&mut self, limits: crate::workspace::WorkspaceLimits) {
        self.settings.limits = Some(limits);
    }

    /// The ignored paths the workspace holds that a verification keeps
    /// (what the bootstrap built); every other ignored path is removed
    /// before the checks run.
    pub fn keep_ignored(&mut self, kept: std::collections::HashSet<Vec<u8>>) {
        self.kept_ignored = kept;
    }

    /// Leaves out what `excludes` does (the run's ignore rules, known once
    /// its workspace is made) from every fingerprint from now on.
    pub fn set_excludes(&mut self, excludes: ExcludeSet) {
        self.fingerprinter.set_excludes(excludes.clone());
        self.settings.excludes = excludes;
    }

    /// Starts a spare container in the background so the next check does not
    /// wait for one. Does nothing if a spare is already there or starting.
    pub async fn prewarm(&mut self) {
        if self.spare.is_none() {
            self.start_spare();
        }
    }

    /// Runs every check; `observe` sees each report as soon as it is known.
    /// `Err` means the sandbox or the fingerprint failed, not a check.
    pub async fn verify(
        &mut self,
        attempt: u32,
        observe: &mut (dyn FnMut(&CheckReport) + Send),
    ) -> Result<VerificationResult, VerifyError> {
        if self.settings.checks.is_empty() {
            return Err(VerifyError::NoChecks);
        }
        let started = Instant::now();
        let outputs_dir = self.settings.outputs_dir.clone();
        crate::state::private_dir(&outputs_dir).map_err(|source| VerifyError::Outputs {
            path: outputs_dir.clone(),
            source,
        })?;
        // What the repository ignores and commands built since the baseline
        // goes first: the checks build it again from what the patch holds.
        let removed = crate::workspace::remove_new_ignored(
            &self.settings.workspace,
            &self.settings.excludes,
            &self.kept_ignored,
        );
        if !removed.is_empty() {
            tracing::info!(
                "removed {} ignored paths built since the baseline before verifying",
                removed.len()
            );
        }
        let initial = self.fingerprinter.scan()?;
        let fingerprint = initial.fingerprint;
        let mut before = initial;
        let mut reports = Vec::with_capacity(self.settings.checks.len());
        let checks = self.settings.checks.clone();
        for (i, check) in checks.iter().enumerate() {
            let more = i + 1 < checks.len();
            let outcome = self.run_check(check, attempt, more).await?;
            let after = self.fingerprinter.scan()?;
            let changed = changed_paths(&before, &after);
            let report = self.report(check, &outcome, &changed);
            observe(&report);
            reports.push(report);
            if !changed.is_empty() {
                break;
            }
            before = after;
        }
        self.removals.retain(|removal| !removal.is_finished());
        Ok(VerificationResult {
            passed: reports.len() == self.settings.checks.len() && reports.iter().all(|r| r.passed),
            checks: reports,
            fingerprint,
            duration_ms: millis(started.elapsed()),
        })
    }

    /// Removes the spare and every container used by a check, concurrently
    /// (teardown has a budget of half a second).
    pub async fn shutdown(mut self) {
        if let Some(container) = self.running.take() {
            self.removals.push(tokio::spawn(container.shutdown()));
        }
        if let Some(spare) = self.spare.take() {
            self.removals.push(tokio::spawn(async move {
                if let Ok(Ok(container)) = spare.await {
                    container.shutdown().await;
                }
            }));
        }
        futures_util::future::join_all(self.removals.drain(..)).await;
    }

    async fn run_check(
        &mut self,
        check: &CheckSpec,
        attempt: u32,
        more: bool,
    ) -> Result<CommandOutcome, VerifyError> {
        let mut container = self.take_fresh_container().await?;
        // (A spare may have started before the limits were known.)
        container.set_limits(self.settings.limits);
        // The next check's container starts while this one runs. After the
        // last check none is started: the caller prewarms when it knows
        // another verification will come, so a passing run ends at once.
        if more {
            self.start_spare();
        }
        let request = CommandRequest::new(&check.command)
            .timeout(self.settings.check_timeout)
            .spool_to(
                &self.settings.outputs_dir,
                &format!("verify-{attempt}-{}", check.name),
            );
        // The verifier's while the check runs: a verification dropped
        // mid-check leaves it to `shutdown`, not to a detached removal.
        let outcome = self.running.insert(container).run(request).await;
        if let Some(container) = self.running.take() {
            self.removals.push(tokio::spawn(container.shutdown()));
        }
        Ok(outcome?)
    }

    fn report(
        &self,
        check: &CheckSpec,
        outcome: &CommandOutcome,
        changed: &[String],
    ) -> CheckReport {
        let timeout = self.settings.check_timeout;
        let zero = if outcome.timed_out {
            None
        } else {
            zero_tests(
                &outcome.stdout.text(),
                &outcome.stderr.text(),
                outcome.exit_code,
            )
        };
        let exit_accepted = outcome.exit_code == Some(0)
            || (self.settings.allow_zero_tests
                && zero == Some(PYTEST_ZERO)
                && outcome.exit_code == Some(PYTEST_NO_TESTS_EXIT));
        // A limit first: what the check wrote past it is why it changed
        // the workspace.
        let failure = if let Some(limit) = outcome.limit_crossed() {
            Some(format!("stopped at a workspace limit: {limit}"))
        } else if !changed.is_empty() {
            Some(describe_changes(changed))
        } else if let Some(abnormal) = abnormal_end(outcome, timeout) {
            Some(abnormal)
        } else if let Some(code @ (126 | 127)) = outcome.exit_code {
            Some(environment_failure(code, &self.settings.image))
        } else {
            zero.filter(|_| !self.settings.allow_zero_tests).map(|reason| {
                format!("{reason}: a check that runs no test proves nothing (allow it with --allow-zero-tests)")
            })
        };
        let passed = exit_accepted && failure.is_none();
        CheckReport {
            name: check.name.clone(),
            command: check.command.clone(),
            exit_code: outcome.exit_code,
            passed,
            duration_ms: millis(outcome.duration),
            failure,
            first_error: if passed {
                None
            } else {
                first_error(&outcome.stderr.text(), &outcome.stdout.text())
            },
            output_file: output_file(outcome, &self.settings.outputs_dir),
        }
    }

    fn container_spec(&self) -> ContainerSpec {
        let mut spec = ContainerSpec::new(
            self.settings.image.clone(),
            self.settings.workspace.clone(),
            self.settings.run_id.clone(),
        );
        spec.role = Role::Verify;
        spec.network = false;
        spec.deps = self.settings.deps.clone();
        spec.workspace_limits = self.settings.limits;
        spec.background = self.settings.background;
        spec
    }

    fn start_spare(&mut self) {
        let start = CommandContainer::start(self.docker.clone(), self.container_spec());
        self.spare = Some(tokio::spawn(start));
    }

    /// The spare if it started; otherwise a container started now (whose
    /// error, if any, is the one reported). Cancel-safe: the spare stays
    /// the verifier's until it has started, so a verification dropped
    /// while waiting for it (a cancelled baseline) leaves it to `shutdown`.
    async fn take_fresh_container(&mut self) -> Result<CommandContainer, VerifyError> {
        match self.await_spare().await {
            Some(Ok(container)) => return Ok(container),
            Some(Err(e)) => tracing::debug!("the spare verify container did not start: {e}"),
            None => {}
        }
        // Started as a spare too, so that it is the verifier's (and
        // `shutdown`'s) from the moment it is asked for.
        self.start_spare();
        match self.await_spare().await {
            Some(started) => Ok(started?),
            None => {
                Err(SandboxError::SupervisorStart("no verify container was started".into()).into())
            }
        }
    }

    /// The spare's start, once it has ended (`None` without a spare).
    async fn await_spare(&mut self) -> Option<Result<CommandContainer, SandboxError>> {
        let started = self.spare.as_mut()?.await;
        self.spare = None;
        Some(started.unwrap_or_else(|e| {
            Err(SandboxError::SupervisorStart(format!(
                "starting the verify container panicked: {e}"
            )))
        }))
    }
}

/// The paths added, removed or changed between two snapshots, sorted.
fn changed_paths(before: &Snapshot, after: &Snapshot) -> Vec<String> {
    if before.fingerprint == after.fingerprint {
        return Vec::new();
    }
    let index = |s: &Snapshot| -> BTreeMap<PathBuf, FingerprintEntry> {
        s.entries
            .iter()
            .map(|e| (e.path.clone(), e.clone()))
            .collect()
    };
    let (old, new) = (index(before), index(after));
    let mut changed: Vec<&Path> = old
        .iter()
        .filter(|(path, entry)| new.get(*path) != Some(*entry))
        .map(|(path, _)| path.as_path())
        .chain(
            new.keys()
                .filter(|p| !old.contains_key(*p))
                .map(PathBuf::as_path),
        )
        .collect();
    changed.sort();
    let mut names: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
    if names.is_empty() {
        // Same entries, different digest: cannot happen with one encoding,
        // but a change must never read as "no change".
        names.push(".".to_string());
    }
    names
}

/// Exit 126 (not executable) and 127 (not found) mean the environment lacks
/// what the check runs: not a failure of the task.
fn environment_failure(code: i32, image: &str) -> String {
    let what = if code == 127 {
        "a program it runs was not found"
    } else {
        "a program it runs could not be executed"
    };
    format!(
        "environment error (exit {code}): {what} in the sandbox image {image}; add it with \"packages\" in .minicoder.json or install it in a bootstrap command"
    )
}

/// What a check's telling line says when a dependency is not installed:
/// Python's, cargo's offline, Node's and Go's own words.
const MISSING_DEPENDENCY: [&str; 9] = [
    "ModuleNotFoundError: No module named",
    "no matching package named",
    "--offline was specified",
    "failed to download",
    "Cannot find module",
    "ERR_MODULE_NOT_FOUND",
    "cannot find module providing package",
    "missing go.sum entry",
    "module lookup disabled",
];

/// The environment error a verification shows, if any: the reason a run
/// stops when its baseline cannot even run a check — or, when the project
/// declares dependencies that nothing installed (`uninstalled`, with the
/// bootstrap that would), fails for want of one. That is not the agent's
/// task: the reason names what is missing and the `.minicoder.json` lines
/// that install it.
pub fn environment_error(
    checks: &[CheckReport],
    uninstalled: &[super::deps::Declared],
) -> Option<String> {
    if !uninstalled.is_empty()
        && let Some(check) = checks.iter().find(|c| {
            !c.passed
                && c.first_error
                    .as_deref()
                    .is_some_and(|l| MISSING_DEPENDENCY.iter().any(|m| l.contains(m)))
        })
    {
        let install: Vec<String> = uninstalled
            .iter()
            .map(|d| format!("\"{}\"", d.install))
            .collect();
        let files: Vec<&str> = uninstalled.iter().map(|d| d.file.as_str()).collect();
        return Some(format!(
            "the baseline check `{}` (`{}`) fails for want of a dependency: {} — {} declares dependencies that nothing installs (checks run without network); add to .minicoder.json: \"bootstrap\": [{}], and trust it with network (`minicoder trust --network`)",
            check.name,
            check.command,
            check.first_error.as_deref().unwrap_or_default(),
            files.join(", "),
            install.join(", ")
        ));
    }
    let check = checks
        .iter()
        .find(|c| matches!(c.exit_code, Some(126 | 127)) && !c.passed)?;
    let mut reason = format!(
        "the baseline check `{}` (`{}`) cannot run",
        check.name, check.command
    );
    if let Some(line) = &check.first_error {
        reason.push_str(&format!(": {line}"));
    }
    if let Some(failure) = &check.failure {
        reason.push_str(&format!(" — {failure}"));
    }
    Some(reason)
}

fn describe_changes(changed: &[String]) -> String {
    let named = changed[..changed.len().min(MAX_NAMED_CHANGES)].join(", ");
    let more = changed.len().saturating_sub(MAX_NAMED_CHANGES);
    if more > 0 {
        format!("the check changed the workspace: {named} (and {more} more)")
    } else {
        format!("the check changed the workspace: {named}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failing(first_error: &str, exit_code: i32) -> CheckReport {
        CheckReport {
            name: "tests".into(),
            command: "python3 -m pytest -q".into(),
            exit_code: Some(exit_code),
            passed: false,
            duration_ms: 1,
            failure: None,
            first_error: Some(first_error.into()),
            output_file: None,
        }
    }

    #[test]
    fn a_missing_dependency_nothing_installs_is_the_environment_not_the_task() {
        let declared = vec![crate::verify::deps::Declared {
            file: "pyproject.toml".into(),
            install: "python3 -m venv /deps/venv && /deps/venv/bin/pip install -e .".into(),
        }];
        let missing = [failing(
            "E   ModuleNotFoundError: No module named 'text_unidecode'",
            2,
        )];
        let why = environment_error(&missing, &declared).expect("an environment error");
        assert!(why.contains("No module named 'text_unidecode'"), "{why}");
        assert!(
            why.contains(
                r#""bootstrap": ["python3 -m venv /deps/venv && /deps/venv/bin/pip install -e ."]"#
            ),
            "{why}"
        );
        // With an install in place, or none declared, it is the agent's to fix.
        assert_eq!(environment_error(&missing, &[]), None);
        // An ordinary failure is never the environment's.
        let assertion = [failing("E   assert 2 == 3", 1)];
        assert_eq!(environment_error(&assertion, &declared), None);
        // A program that is not there still is, whatever is declared.
        assert!(environment_error(&[failing("sh: 1: jq: not found", 127)], &[]).is_some());
    }

    #[test]
    fn change_descriptions_name_at_most_ten_paths() {
        let few = vec!["a.txt".to_string(), "src/b.py".to_string()];
        assert_eq!(
            describe_changes(&few),
            "the check changed the workspace: a.txt, src/b.py"
        );
        let many: Vec<String> = (0..13).map(|i| format!("f{i:02}")).collect();
        let text = describe_changes(&many);
        assert!(text.contains("f09"), "{text}");
        assert!(!text.contains("f10"), "{text}");
        assert!(text.ends_with("(and 3 more)"), "{text}");
    }
}
