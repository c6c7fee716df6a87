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
//! journal.rs      the authenticated apply journal
//! lock.rs         one apply or undo at a time per repository
//! commit.rs       --commit, through libgit2 (no hooks)
//! ```

pub mod commit;
pub mod conflict;
pub mod image;
pub mod journal;
pub mod lock;
pub mod plan;
pub mod source;
pub mod subset;
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

#[derive(Debug, Clone, Copy, Default)]
pub struct ApplyOptions {
    pub dry_run: bool,
    pub merge: bool,
    pub commit: bool,
    pub unverified: bool,
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
}

/// `minicoder apply`.
pub fn apply(
    state: &StateDir,
    key: &ReceiptKey,
    run: &RunRecord,
    options: ApplyOptions,
) -> Result<ApplyReport, DeliveryError> {
    let verified = verify::verify_run(key, run, options.unverified)?;
    let repo = PathBuf::from(&run.manifest.repo);
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
    let mut report = ApplyReport {
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
    };
    if options.dry_run {
        return Ok(report);
    }
    if !plan.unmerged.is_empty() {
        return Err(DeliveryError::Unmerged(plan.unmerged));
    }
    if !options.merge && !plan.overlaps.is_empty() {
        return Err(DeliveryError::Overlap(report.overlaps));
    }
    if plan.writes.is_empty() {
        return Ok(report);
    }
    let mut journal = Journal::new(
        &run.id,
        source.root(),
        !verified.succeeded,
        verified.receipt_sha256.clone(),
    );
    for w in &plan.writes {
        journal.record(&w.path, &w.pre, &w.post, w.merged);
    }
    let pres: Vec<&Image> = plan.writes.iter().map(|w| &w.pre).collect();
    // The journal is on disk before the first write: whatever happens next,
    // `undo` knows every pre-image.
    journal.write(key, &run.dir, &pres)?;
    let steps: Vec<transaction::Step<'_>> = plan
        .writes
        .iter()
        .map(|w| transaction::Step {
            path: &w.path,
            pre: &w.pre,
            post: &w.post,
        })
        .collect();
    if let Err(e) = transaction::run(&source, &steps) {
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
        let summary = run
            .report
            .as_ref()
            .map(|r| r.summary.as_deref().unwrap_or(r.reason.as_str()))
            .unwrap_or("");
        let message = commit::message(
            &run.manifest.task,
            &format!("{}\n\n{summary}", run.manifest.task),
            &[
                ("Minicoder-Run", &run.id),
                ("Minicoder-Receipt", &verified.receipt_sha256),
            ],
        );
        let id = commit::commit(source.root(), &paths, &message)?;
        journal.commit = Some(id.clone());
        journal.write(key, &run.dir, &[])?;
        report.commit = Some(id);
    }
    Ok(report)
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
    let repo = PathBuf::from(&run.manifest.repo);
    let _lock = lock::RepoLock::take(state, &canonical(&repo))?;
    let journal =
        Journal::load(key, &run.dir)?.ok_or_else(|| DeliveryError::NotApplied(run.id.clone()))?;
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
