//! Applying part of a run's patch: a subset is not what was verified, so
//! it is verified again before it is applied.
//!
//! The subset must be made of whole hunks of the run's verified
//! `final.patch` (see [`super::hunks`] for how hunks are numbered). Its
//! base is the source as it is now, not the run's baseline: that is exactly
//! what the person will have once it is applied, and the run's copy of its
//! baseline is gone once it succeeded. The record says whether that base
//! was the run's baseline. A fresh workspace is copied from the source the
//! way a run copies it (credential paths left out), the run's bootstrap
//! commands run in it, the subset is applied to it, and the run's frozen
//! checks run in fresh containers of the project's image; the workspace and
//! every container are removed afterwards, whatever happens. The signed
//! record (`apply/subset-verification.json`) names the subset's patch, the
//! checks and their outcomes, and the image every written path had when
//! they ran; apply writes exactly those images, through the same conflict
//! check, transaction and journal as a whole patch.

use std::path::{Path, PathBuf};

use super::hunks::{self, PatchFile, Selection};
use super::subset_record::{RecordedCheck, RecordedWrite, SubsetRecord};
use super::{ApplyOptions, ApplyReport, DeliveryError, Journal, journal, lock, plan};
use crate::protocol::CheckReport;
use crate::runs::RunRecord;
use crate::state::StateDir;
use crate::trace::ReceiptKey;
use crate::workspace::quote_path;

/// Which part of `final.patch` to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subset {
    /// Paths as `final.patch` names them (quoted like `changes` in ApplyReport).
    Paths(Vec<String>),
    /// 1-based hunk numbers in `final.patch` order (as `show --diff` would number them).
    Hunks(Vec<usize>),
    /// A patch made of whole hunks of `final.patch` (the session's review writes this).
    Patch(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubsetCheck {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubsetVerification {
    /// Every check passed. `false` on a dry run, which verifies nothing.
    pub passed: bool,
    pub checks: Vec<SubsetCheck>,
    /// The signed record (empty on a dry run).
    pub record: PathBuf,
    /// Whether the checks ran on the run's own baseline.
    pub base_is_run_baseline: bool,
}

/// One numbered choice of `final.patch` and whether the subset takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubsetChoice {
    pub number: usize,
    /// `path` or `old -> new`.
    pub file: String,
    /// The hunk's `@@` line, or `whole file`.
    pub hunk: String,
    pub chosen: bool,
}

#[derive(Debug, Clone)]
pub struct SubsetApply {
    pub report: ApplyReport,
    pub verification: SubsetVerification,
    /// Every choice of `final.patch`, in order.
    pub choices: Vec<SubsetChoice>,
    /// `2 of 5 files (3 of 7 hunks)`.
    pub summary: String,
}

/// Verifies `subset` again, then applies it (unless `options.dry_run`,
/// which only shows it, or its checks failed without `options.unverified`).
pub async fn apply_subset(
    state: &StateDir,
    key: &ReceiptKey,
    run: &RunRecord,
    subset: &Subset,
    options: ApplyOptions,
    progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<SubsetApply, DeliveryError> {
    let verified = super::verify::verify_run(key, run, options.unverified)?;
    let files = hunks::split(&verified.patch)?;
    let (selection, chosen) = select(&files, subset)?;
    let patch = hunks::build(&files, &selection);
    let (n_hunks, total_hunks) = selection.counts(&files);
    let summary = format!(
        "{} of {} files ({n_hunks} of {total_hunks} hunks)",
        selection.files().len(),
        files.len()
    );
    let choices = choices(&files, &selection);
    let repo = super::target_repo(run, &options)?;
    let _lock = if options.dry_run {
        None
    } else {
        Some(lock::RepoLock::take(state, &super::canonical(&repo))?)
    };
    if !options.dry_run && Journal::load(key, &run.dir)?.is_some() {
        return Err(DeliveryError::AlreadyApplied(run.id.clone()));
    }
    let source = super::Source::open(&repo)?;
    let store = plan::BaselineStore::open(&state.checkpoint_store_dir(&run.id));
    let merge = options.merge.then_some(&store);
    let first = plan_of(&source, &patch, merge)?;
    let mut report = super::report_for(&source, &first, &verified, &options);
    let mut result = SubsetApply {
        report: report.clone(),
        verification: SubsetVerification::default(),
        choices,
        summary,
    };
    if options.dry_run {
        return Ok(result);
    }
    super::refuse_blocked(&first, &options, &report)?;
    if first.writes.is_empty() {
        return Ok(result);
    }
    let what = format!("re-verifying {}", result.summary);
    let done =
        super::reverify::reverify(state, run, &repo, &patch, &first, merge, &|line: &str| {
            progress(&format!("{what}: {line}"))
        })
        .await?;
    let mut record = record_of(
        run,
        &source,
        &verified,
        &report,
        &first,
        &done,
        (chosen, n_hunks, total_hunks),
    );
    let record_sha256 = record.write(key, &run.dir, &patch)?;
    result.verification = verification_of(&record, &run.dir, done.passed);
    if !done.passed && !options.unverified {
        return Err(DeliveryError::SubsetFailed {
            checks: result.verification.checks.clone(),
        });
    }
    // The person's PreApply hooks see the subset before anything is
    // written.
    let hooked = super::Hooked::new(run, &report, &patch);
    hooked.before(&options, &mut report)?;
    // The checks and the hooks took a while: what is written now must be
    // what they passed on.
    let again = plan_of(&source, &patch, merge)?;
    super::refuse_blocked(&again, &options, &report)?;
    if !super::same_writes(&again, &first) {
        return Err(DeliveryError::BadSubset(
            "the source changed where the subset applies while it was verified; nothing was written (apply again to verify it on the source as it is now)".into(),
        ));
    }
    let link = journal::SubsetLink {
        record_sha256,
        patch_sha256: record.patch_sha256.clone(),
        passed: done.passed,
    };
    let unverified = !verified.succeeded || !done.passed;
    super::deliver(
        key,
        run,
        &source,
        &again,
        &verified,
        &options,
        unverified,
        Some(link),
        &mut report,
    )?;
    hooked.after(&options, &mut report);
    report.succeeded = !unverified;
    result.report = report;
    Ok(result)
}

/// The signed record of a subset's verification, before it is written.
fn record_of(
    run: &RunRecord,
    source: &super::Source,
    verified: &super::verify::VerifiedRun,
    report: &super::ApplyReport,
    first: &plan::Plan,
    done: &super::reverify::Reverified,
    (chosen, n_hunks, total_hunks): (String, usize, usize),
) -> SubsetRecord {
    SubsetRecord {
        version: super::subset_record::RECORD_VERSION,
        run_id: run.id.clone(),
        repo: source.root().display().to_string(),
        receipt_sha256: verified.receipt_sha256.clone(),
        patch_sha256: String::new(),
        chosen,
        hunks: n_hunks,
        total_hunks,
        files: report
            .changes
            .iter()
            .map(|(letter, path)| format!("{letter} {path}"))
            .collect(),
        run_baseline_fingerprint: run.manifest.baseline_fingerprint.clone(),
        base_is_run_baseline: done.base_fingerprint == run.manifest.baseline_fingerprint,
        base_fingerprint: done.base_fingerprint.clone(),
        image: done.image.clone(),
        writes: first
            .writes
            .iter()
            .map(|w| RecordedWrite {
                path: quote_path(&w.path).into_owned(),
                post: journal::Recorded::of(&w.post),
            })
            .collect(),
        checks: done.checks.iter().map(recorded).collect(),
        passed: done.passed,
        verified: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        hmac: String::new(),
    }
}

/// What the subset's verification says, as `apply` reports it.
fn verification_of(record: &SubsetRecord, run_dir: &Path, passed: bool) -> SubsetVerification {
    SubsetVerification {
        passed,
        checks: record
            .checks
            .iter()
            .map(|c| SubsetCheck {
                name: c.name.clone(),
                passed: c.passed,
                detail: c.detail.clone(),
            })
            .collect(),
        record: super::subset_record::record_path(run_dir),
        base_is_run_baseline: record.base_is_run_baseline,
    }
}

fn plan_of(
    source: &super::Source,
    patch: &[u8],
    merge: Option<&plan::BaselineStore>,
) -> Result<plan::Plan, DeliveryError> {
    let (diff, changes) = super::conflict::parse(patch)?;
    plan::plan(source, &diff, changes, merge)
}

fn select(files: &[PatchFile], subset: &Subset) -> Result<(Selection, String), DeliveryError> {
    Ok(match subset {
        Subset::Paths(paths) => (
            hunks::by_paths(files, paths)?,
            format!("paths {}", paths.join(" ")),
        ),
        Subset::Hunks(numbers) => {
            let list: Vec<String> = numbers.iter().map(ToString::to_string).collect();
            (
                hunks::by_numbers(files, numbers)?,
                format!("hunks {}", list.join(",")),
            )
        }
        Subset::Patch(text) => (
            hunks::by_patch(files, text.as_bytes())?,
            "reviewed patch".into(),
        ),
    })
}

fn choices(files: &[PatchFile], selection: &Selection) -> Vec<SubsetChoice> {
    hunks::numbering(files)
        .into_iter()
        .enumerate()
        .map(|(i, (file, hunk))| SubsetChoice {
            number: i + 1,
            file: files[file].display.clone(),
            hunk: match hunk {
                Some(h) => String::from_utf8_lossy(&files[file].hunks[h].head).into_owned(),
                None => "whole file".into(),
            },
            chosen: match hunk {
                Some(h) => selection.chosen[file][h],
                None => selection.chosen[file].iter().any(|f| *f),
            },
        })
        .collect()
}

fn recorded(check: &CheckReport) -> RecordedCheck {
    let detail = if check.passed {
        format!("passed in {} ms", check.duration_ms)
    } else {
        let exit = check
            .exit_code
            .map_or("no exit code".to_string(), |c| format!("exit {c}"));
        match check.first_error.as_ref().or(check.failure.as_ref()) {
            Some(why) => format!("failed ({exit}): {why}"),
            None => format!("failed ({exit})"),
        }
    };
    RecordedCheck {
        name: check.name.clone(),
        command: check.command.clone(),
        exit_code: check.exit_code,
        passed: check.passed,
        detail,
    }
}

/// The failed checks of a subset, for the error message.
pub(crate) fn failed_names(checks: &[SubsetCheck]) -> String {
    let failed: Vec<String> = checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| format!("{} ({})", c.name, c.detail))
        .collect();
    if failed.is_empty() {
        "no check ran".into()
    } else {
        failed.join("; ")
    }
}

/// The record of `dir`'s run, for `show`.
pub(crate) fn artifact_record(dir: &Path) -> PathBuf {
    super::subset_record::record_path(dir)
}
