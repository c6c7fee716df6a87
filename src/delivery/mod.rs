//! Delivering a run's patch to its source repository: `apply`
//! checks the run's receipt, patch and event log, checks the source for
//! edits that overlap the patch, and writes every file or none under a lock,
//! recording an authenticated journal of pre-images; `undo` puts the
//! pre-images back from that journal.
//!
//! ```text
//! verify.rs       receipt HMAC, patch hash, events chain and digest, outcome
//! conflict.rs     the patch's file changes; overlaps with the source as it is now
//! plan.rs         the exact image of every touched path (patch applied, --merge)
//! source.rs       confined reads and temp-then-rename writes in the source
//! transaction.rs  all writes or none (rollback from pre-images)
//! links.rs        symbolic links resolved on the tree as it will be
//! journal.rs      the authenticated apply journal
//! lock.rs         one apply or undo at a time per repository
//! commit.rs       --commit, through libgit2 (no hooks)
//! hunks.rs        the numbered hunks of a patch; the patch of a subset
//! subset.rs       a subset verified again before it is applied
//! reverify.rs     a fresh copy, the subset, the frozen checks in fresh containers
//! subset_record.rs  the signed record of a subset's verification
//! ```

pub mod commit;
pub mod conflict;
pub(crate) mod hunks;
pub mod image;
pub mod journal;
mod links;
pub mod lock;
pub mod plan;
mod reverify;
pub mod source;
pub mod subset;
pub mod subset_record;
pub(crate) mod transaction;
pub mod verify;

use std::path::{Path, PathBuf};

use crate::runs::RunRecord;
use crate::state::StateDir;
use crate::trace::ReceiptKey;
use crate::workspace::quote_path;

pub use image::Image;
pub use journal::Journal;
pub use source::Source;

#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    #[error("refused: {0}")]
    Unverified(String),
    #[error("refused: the patch cannot be read: {0}")]
    BadPatch(String),
    #[error("refused: the patch does not apply to the run's baseline: {0}")]
    DoesNotApply(String),
    #[error("refused: {path}: {why}")]
    RefusedPath { path: String, why: String },
    #[error("refused by a PreApply hook: {0}; nothing was written")]
    Vetoed(String),
    #[error(
        "refused: the repository changed where the patch applies while the PreApply hooks ran; nothing was written (apply again)"
    )]
    ChangedMeanwhile,
    #[error(
        "refused: the source changed since the run's baseline where the patch changes it, in {}; nothing was written (--merge tries a three-way merge)",
        .0.join(", ")
    )]
    Overlap(Vec<String>),
    #[error("refused: these files do not merge cleanly: {}; nothing was written", .0.join(", "))]
    Unmerged(Vec<String>),
    #[error("refused: run {0} is already applied; `minicoder undo {0}` reverts it first")]
    AlreadyApplied(String),
    #[error("run {0} has no apply to undo")]
    NotApplied(String),
    #[error("refused: another apply or undo is running on this repository")]
    Locked,
    #[error("refused: the apply journal does not verify: {why}")]
    JournalTampered { why: String },
    #[error("the apply journal: {why}")]
    Journal { why: String },
    #[error("could not {what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("could not {what}: {message}")]
    Git { what: String, message: String },
    #[error("refused: {0}")]
    BadSubset(String),
    #[error(
        "refused: the subset failed its verification: {}; nothing was written (--unverified applies it anyway, and the journal says so)",
        subset::failed_names(.checks)
    )]
    SubsetFailed { checks: Vec<subset::SubsetCheck> },
    #[error("could not verify the subset again: {0}; nothing was written")]
    Reverify(String),
    #[error("{0}; every file written was put back: the source is as it was")]
    RolledBack(Box<DeliveryError>),
    #[error(
        "{cause}; putting the files back failed too, for: {}; the journal names every pre-image",
        .left.join("; ")
    )]
    RollbackFailed {
        cause: Box<DeliveryError>,
        left: Vec<String>,
    },
}

#[derive(Debug, Clone, Default)]
pub struct ApplyOptions {
    pub dry_run: bool,
    pub merge: bool,
    pub commit: bool,
    pub unverified: bool,
    /// The repository to apply to, when it moved since the run (`--repo`);
    /// else the one the run was made on.
    pub repo: Option<PathBuf>,
    /// The person's hooks: `PreApply` may veto the patch before anything is
    /// written, `PostApply` hears of it once written.
    pub hooks: Option<std::sync::Arc<crate::hooks::Hooks>>,
}

/// The repository an apply writes into: `--repo` or the run's own, which
/// must still hold the commit the run started from — a repository that
/// now stands at the old path but is another is refused, before anything
/// is read or written.
pub(crate) fn target_repo(
    run: &RunRecord,
    options: &ApplyOptions,
) -> Result<PathBuf, DeliveryError> {
    let repo = options
        .repo
        .clone()
        .unwrap_or_else(|| PathBuf::from(&run.manifest.repo));
    let Some(head) = &run.manifest.source_head else {
        return Ok(repo);
    };
    let holds = git2::Repository::open(&repo).ok().is_some_and(|r| {
        git2::Oid::from_str(head)
            .ok()
            .is_some_and(|oid| r.find_commit(oid).is_ok())
    });
    if holds {
        return Ok(repo);
    }
    Err(DeliveryError::Unverified(format!(
        "{} does not hold commit {}, which run {} started from: it is not the repository the run was made on. If the repository moved, apply with --repo NEW_PATH",
        repo.display(),
        &head[..head.len().min(12)],
        run.id
    )))
}

/// What an apply did (or, dry, would do).
#[derive(Debug, Clone, Default)]
pub struct ApplyReport {
    pub repo: PathBuf,
    /// `(letter, path)`: A, M, D, R, C; paths quoted.
    pub changes: Vec<(char, String)>,
    /// Paths merged three ways with the user's edits.
    pub merged: Vec<String>,
    /// Overlaps found on a dry run.
    pub overlaps: Vec<String>,
    pub unmerged: Vec<String>,
    pub commit: Option<String>,
    pub succeeded: bool,
    pub dry_run: bool,
    /// The repository's submodules: files the patch changes there are
    /// written into their working trees like any file.
    pub submodules: Vec<String>,
    /// What each `PreApply` and `PostApply` hook did, a line each.
    pub hooks: Vec<String>,
}

impl ApplyReport {
    /// Whether applying what a dry run found would be refused.
    pub fn would_refuse(&self, merge: bool) -> bool {
        refusal(&self.overlaps, &self.unmerged, merge).is_some()
    }
}

/// The one rule that refuses a planned patch as a whole: files that do not
/// merge cleanly, or, without `--merge`, files the user changed where the
/// patch changes them.
fn refusal(overlaps: &[String], unmerged: &[String], merge: bool) -> Option<DeliveryError> {
    if !unmerged.is_empty() {
        return Some(DeliveryError::Unmerged(unmerged.to_vec()));
    }
    if !merge && !overlaps.is_empty() {
        return Some(DeliveryError::Overlap(overlaps.to_vec()));
    }
    None
}

/// `minicoder apply`.
pub fn apply(
    state: &StateDir,
    key: &ReceiptKey,
    run: &RunRecord,
    options: ApplyOptions,
) -> Result<ApplyReport, DeliveryError> {
    let verified = verify::verify_run(key, run, options.unverified)?;
    let repo = target_repo(run, &options)?;
    let _lock = if options.dry_run {
        None
    } else {
        Some(lock::RepoLock::take(state, &canonical(&repo))?)
    };
    if !options.dry_run && Journal::load(key, &run.dir)?.is_some() {
        return Err(DeliveryError::AlreadyApplied(run.id.clone()));
    }
    let source = Source::open(&repo)?;
    let (diff, changes) = conflict::parse(&verified.patch)?;
    let store = plan::BaselineStore::open(&state.checkpoint_store_dir(&run.id));
    let plan = plan::plan(&source, &diff, changes, options.merge.then_some(&store))?;
    let mut report = report_for(&source, &plan, &verified, &options);
    if options.dry_run {
        return Ok(report);
    }
    refuse_blocked(&plan, &options, &report)?;
    if plan.writes.is_empty() {
        return Ok(report);
    }
    let hooked = Hooked::new(run, &report, &verified.patch);
    if hooked.before(&options, &mut report)? {
        // The hooks took a while, and ran in the repository: what is
        // written must still be what was planned and shown to them.
        let (diff, changes) = conflict::parse(&verified.patch)?;
        let again = plan::plan(&source, &diff, changes, options.merge.then_some(&store))?;
        if !same_writes(&again, &plan) {
            return Err(DeliveryError::ChangedMeanwhile);
        }
    }
    deliver(
        key,
        run,
        &source,
        &plan,
        &verified,
        &options,
        !verified.succeeded,
        None,
        &mut report,
    )?;
    hooked.after(&options, &mut report);
    Ok(report)
}

/// Whether two plans write the same files with the same contents over the
/// same pre-images.
pub(crate) fn same_writes(a: &plan::Plan, b: &plan::Plan) -> bool {
    a.writes.len() == b.writes.len()
        && a.writes
            .iter()
            .zip(&b.writes)
            .all(|(a, b)| a.path == b.path && a.post == b.post && a.pre == b.pre)
}

/// An apply as its hooks are told of it.
pub(crate) struct Hooked {
    input: crate::hooks::HookInput,
}

impl Hooked {
    pub(crate) fn new(run: &RunRecord, report: &ApplyReport, patch: &[u8]) -> Self {
        use crate::hooks::{HookEvent, HookInput};
        let mut input = HookInput::new(HookEvent::PreApply, &run.id, &report.repo);
        input.transcript_path = Some(run.dir.join("events.jsonl").display().to_string());
        let files: Vec<serde_json::Value> = report
            .changes
            .iter()
            .map(|(letter, path)| serde_json::json!({"status": letter.to_string(), "path": path}))
            .collect();
        input.extra.insert("run_id".into(), run.id.clone().into());
        input
            .extra
            .insert("repo".into(), report.repo.display().to_string().into());
        input.extra.insert("changed_files".into(), files.into());
        input.extra.insert(
            "patch".into(),
            String::from_utf8_lossy(patch).into_owned().into(),
        );
        input
            .extra
            .insert("verified".into(), report.succeeded.into());
        Self { input }
    }

    /// Runs the `PreApply` hooks: a block, a deny, a stop or an ask (which
    /// apply has no one to put to) refuses the apply. Whether any ran.
    pub(crate) fn before(
        &self,
        options: &ApplyOptions,
        report: &mut ApplyReport,
    ) -> Result<bool, DeliveryError> {
        use crate::hooks::{HookEvent, Permission};
        let Some(hooks) = options
            .hooks
            .as_ref()
            .filter(|h| !h.is_empty_for(HookEvent::PreApply))
        else {
            return Ok(false);
        };
        let run = hooks.run_blocking(HookEvent::PreApply, &self.input);
        report.hooks.extend(hook_lines(&run));
        if let Some(why) = run.verdict.refuses() {
            return Err(DeliveryError::Vetoed(why));
        }
        if let Some((Permission::Ask, why)) = &run.verdict.permission {
            return Err(DeliveryError::Vetoed(format!(
                "it asks for your confirmation ({why}), which apply cannot ask for: change the hook"
            )));
        }
        Ok(true)
    }

    /// Runs the `PostApply` hooks; what they decide changes nothing.
    pub(crate) fn after(&self, options: &ApplyOptions, report: &mut ApplyReport) {
        use crate::hooks::HookEvent;
        let Some(hooks) = options
            .hooks
            .as_ref()
            .filter(|h| !h.is_empty_for(HookEvent::PostApply))
        else {
            return;
        };
        let mut input = self.input.clone();
        input.hook_event_name = HookEvent::PostApply.name().to_string();
        if let Some(commit) = &report.commit {
            input.extra.insert("commit".into(), commit.clone().into());
        }
        let lines = hook_lines(&hooks.run_blocking(HookEvent::PostApply, &input));
        report.hooks.extend(lines);
    }
}

/// What each hook did, in lines for a person (also in the log file).
fn hook_lines(run: &crate::hooks::HookRun) -> Vec<String> {
    let mut lines: Vec<String> = run.records.iter().map(|r| r.line()).collect();
    lines.extend(run.verdict.messages.iter().map(|m| format!("hook: {m}")));
    lines.extend(
        run.verdict
            .errors
            .iter()
            .map(|e| format!("a hook failed (nothing blocked): {e}")),
    );
    for line in &lines {
        tracing::info!("{line}");
    }
    lines
}

/// What applying `plan` does, before anything is written.
fn report_for(
    source: &Source,
    plan: &plan::Plan,
    verified: &verify::VerifiedRun,
    options: &ApplyOptions,
) -> ApplyReport {
    ApplyReport {
        repo: source.root().to_path_buf(),
        changes: plan
            .changes
            .iter()
            .map(|c| (c.status.letter(), c.display()))
            .collect(),
        merged: plan
            .writes
            .iter()
            .filter(|w| w.merged)
            .map(|w| quote_path(&w.path).into_owned())
            .collect(),
        overlaps: plan.overlaps.iter().map(|o| o.display()).collect(),
        unmerged: plan.unmerged.clone(),
        succeeded: verified.succeeded,
        dry_run: options.dry_run,
        commit: None,
        submodules: crate::workspace::submodules_of(source.root()),
        hooks: Vec::new(),
    }
}

/// Overlaps without `--merge`, and files that do not merge, refuse it all.
fn refuse_blocked(
    plan: &plan::Plan,
    options: &ApplyOptions,
    report: &ApplyReport,
) -> Result<(), DeliveryError> {
    let overlaps: Vec<String> = plan.overlaps.iter().map(|o| o.display()).collect();
    if let Some(refusal) = refusal(&overlaps, &plan.unmerged, options.merge) {
        return Err(refusal);
    }
    if options.commit {
        // A commit of the outer repository cannot hold a submodule's files.
        let inside: Vec<String> = plan
            .writes
            .iter()
            .filter(|w| {
                report
                    .submodules
                    .iter()
                    .any(|s| under(&w.path, s.as_bytes()))
            })
            .map(|w| quote_path(&w.path).into_owned())
            .collect();
        if !inside.is_empty() {
            return Err(DeliveryError::Unverified(format!(
                "--commit cannot commit files of a submodule ({}); apply without --commit and commit them in the submodule; nothing was written",
                inside.join(", ")
            )));
        }
    }
    Ok(())
}

/// Whether `path` lies below the directory `dir`.
fn under(path: &[u8], dir: &[u8]) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path[dir.len()] == b'/'
}

/// Writes `plan` to the source: the journal first, then every file or
/// none, then the commit when asked.
#[allow(clippy::too_many_arguments)]
fn deliver(
    key: &ReceiptKey,
    run: &RunRecord,
    source: &Source,
    plan: &plan::Plan,
    verified: &verify::VerifiedRun,
    options: &ApplyOptions,
    unverified: bool,
    subset: Option<journal::SubsetLink>,
    report: &mut ApplyReport,
) -> Result<(), DeliveryError> {
    let mut journal = Journal::new(
        &run.id,
        source.root(),
        unverified,
        verified.receipt_sha256.clone(),
    );
    journal.subset = subset;
    for w in &plan.writes {
        journal.record(&w.path, &w.pre, &w.post, w.merged);
    }
    let pres: Vec<&Image> = plan.writes.iter().map(|w| &w.pre).collect();
    // The journal is on disk before the first write: whatever happens next,
    // `undo` knows every pre-image.
    journal.write(key, &run.dir, &pres)?;
    let steps = transaction::steps_of(&plan.writes);
    if let Err(e) = transaction::run(source, &steps) {
        if matches!(e, DeliveryError::RolledBack(_)) {
            Journal::discard(&run.dir);
        }
        return Err(e);
    }
    if options.commit {
        let paths: Vec<(&[u8], &Image)> = plan
            .writes
            .iter()
            .map(|w| (w.path.as_slice(), &w.post))
            .collect();
        // Only what is signed: the manifest's task, the receipt's summary.
        let summary = verified.summary.as_str();
        let mut trailers = vec![
            ("Minicoder-Run", run.id.as_str()),
            ("Minicoder-Receipt", verified.receipt_sha256.as_str()),
        ];
        // A subset: the record of its own verification.
        if let Some(link) = &journal.subset {
            trailers.push(("Minicoder-Subset-Verification", &link.record_sha256));
        }
        let message = commit::message(
            &run.manifest.task,
            &format!("{}\n\n{summary}", run.manifest.task),
            &trailers,
        );
        let id = commit::commit(source.root(), &paths, &message)?;
        journal.commit = Some(id.clone());
        journal.write(key, &run.dir, &[])?;
        report.commit = Some(id);
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, Default)]
pub struct UndoOptions {
    pub force: bool,
    pub commit: bool,
}

#[derive(Debug, Clone, Default)]
pub struct UndoReport {
    pub repo: PathBuf,
    /// `restored PATH` or `removed PATH` (a file the apply created).
    pub restored: Vec<String>,
    /// Paths changed since the apply and left as they are.
    pub skipped: Vec<String>,
    pub commit: Option<String>,
}

/// `minicoder undo`.
pub fn undo(
    state: &StateDir,
    key: &ReceiptKey,
    run: &RunRecord,
    options: UndoOptions,
) -> Result<UndoReport, DeliveryError> {
    run.manifest
        .verify(key, &run.dir.join(crate::trace::artifacts::MANIFEST_FILE))
        .map_err(|e| DeliveryError::Unverified(e.to_string()))?;
    let journal =
        Journal::load(key, &run.dir)?.ok_or_else(|| DeliveryError::NotApplied(run.id.clone()))?;
    // Where the apply wrote, which `--repo` may have made another path.
    let repo = PathBuf::from(&journal.repo);
    let _lock = lock::RepoLock::take(state, &canonical(&repo))?;
    // Read again under the lock: another undo may have run meanwhile.
    let journal = match Journal::load(key, &run.dir)? {
        Some(again) => again,
        None => {
            drop(journal);
            return Err(DeliveryError::NotApplied(run.id.clone()));
        }
    };
    let source = Source::open(Path::new(&journal.repo))?;
    let mut report = UndoReport {
        repo: source.root().to_path_buf(),
        ..UndoReport::default()
    };
    let mut restore = Vec::new();
    for entry in &journal.entries {
        let path = entry.path_bytes()?;
        let pre = journal.pre_image(&run.dir, entry)?;
        let now = match source.read(&path) {
            Ok(now) => Some(now),
            Err(DeliveryError::RefusedPath { .. }) => None,
            Err(e) => return Err(e),
        };
        if now.as_ref().is_some_and(|n| entry.pre.matches(n)) {
            // Already as it was before the apply (an earlier undo that
            // skipped other files restored this one).
            continue;
        }
        let unchanged = now.as_ref().is_some_and(|n| entry.post.matches(n));
        if !unchanged && !options.force {
            report.skipped.push(entry.path.clone());
            continue;
        }
        match now {
            Some(now) => restore.push((path, now, pre, entry.path.clone())),
            None => report.skipped.push(entry.path.clone()),
        }
    }
    let steps: Vec<transaction::Step<'_>> = restore
        .iter()
        .map(|(path, now, pre, _)| transaction::Step {
            path,
            pre: now,
            post: pre,
        })
        .collect();
    transaction::run(&source, &steps)?;
    report.restored = restore
        .iter()
        .map(|(_, _, pre, path)| match pre {
            Image::Absent => format!("removed {path}"),
            _ => format!("restored {path}"),
        })
        .collect();
    if options.commit {
        let paths: Vec<(&[u8], &Image)> = restore
            .iter()
            .map(|(path, _, pre, _)| (path.as_slice(), pre))
            .collect();
        let subject = format!(
            "Revert \"{}\"",
            run.manifest.task.lines().next().unwrap_or("")
        );
        let message = commit::message(
            &subject,
            &journal
                .commit
                .as_ref()
                .map(|c| format!("This reverts commit {c}."))
                .unwrap_or_default(),
            &[
                ("Minicoder-Run", &run.id),
                ("Minicoder-Receipt", &journal.receipt_sha256),
            ],
        );
        report.commit = Some(commit::commit(source.root(), &paths, &message)?);
    }
    if report.skipped.is_empty() {
        Journal::retire(&run.dir)?;
    }
    Ok(report)
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}
