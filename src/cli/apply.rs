//! `minicoder apply RUN` and `minicoder undo RUN`: thin front ends of
//! [`crate::delivery`]. Every path printed is relative to the repository.

use std::process::ExitCode;

use super::{EXIT_FAILURE, EXIT_USAGE};
use crate::delivery::subset::{self, Subset};
use crate::delivery::{self, ApplyOptions, ApplyReport, DeliveryError, UndoOptions};
use crate::runs::RunRecord;
use crate::state::StateDir;
use crate::trace::ReceiptKey;

fn find(run: &str) -> Result<(StateDir, ReceiptKey, RunRecord), ExitCode> {
    let state = StateDir::from_env().map_err(|e| {
        err!("minicoder: {e}");
        ExitCode::from(EXIT_FAILURE)
    })?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let record = crate::runs::resolve(&state, run, &cwd).map_err(|e| {
        err!("minicoder: {e}");
        ExitCode::from(EXIT_USAGE)
    })?;
    let key = ReceiptKey::load_existing(&state).map_err(|e| {
        err!("minicoder: the receipt key: {e}");
        ExitCode::from(EXIT_FAILURE)
    })?;
    Ok((state, key, record))
}

fn refused(e: &DeliveryError) -> ExitCode {
    err!("minicoder: {e}");
    ExitCode::from(EXIT_FAILURE)
}

pub fn apply(run: &str, options: ApplyOptions) -> ExitCode {
    let (state, key, record) = match find(run) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let report = match delivery::apply(&state, &key, &record, options.clone()) {
        Ok(report) => report,
        Err(e) => return refused(&e),
    };
    print_hooks(&report);
    if !report.succeeded {
        err!(
            "minicoder: run {} did not succeed; applying its patch unverified, as asked (the journal records it)",
            record.id
        );
    }
    let verb = if report.dry_run {
        "would apply"
    } else {
        "applied"
    };
    out!(
        "minicoder apply: {verb} run {} to {}",
        record.id,
        report.repo.display()
    );
    if report.changes.is_empty() {
        out!("the run changed nothing: nothing to apply");
        return ExitCode::SUCCESS;
    }
    for (letter, path) in &report.changes {
        let merged = if report.merged.iter().any(|m| path.ends_with(m.as_str())) {
            "  (merged with your edit)"
        } else {
            ""
        };
        out!("  {letter} {path}{merged}");
    }
    config_notice(&report.changes);
    if report.dry_run {
        return dry_run_verdict(&report, options.merge);
    }
    match &report.commit {
        Some(id) => out!("committed {id} (no hooks run)"),
        None => out!(
            "left uncommitted; `minicoder undo {}` reverts it",
            record.id
        ),
    }
    ExitCode::SUCCESS
}

/// What each apply hook did, on stderr.
fn print_hooks(report: &ApplyReport) {
    for line in &report.hooks {
        err!("minicoder: {line}");
    }
}

/// What a dry run found in the way, and whether apply would refuse.
fn dry_run_verdict(report: &ApplyReport, merge: bool) -> ExitCode {
    if !report.overlaps.is_empty() {
        out!(
            "changed since the run's baseline: {}",
            report.overlaps.join(", ")
        );
    }
    if !report.unmerged.is_empty() {
        out!("do not merge cleanly: {}", report.unmerged.join(", "));
    }
    let blocked = report.would_refuse(merge);
    out!(
        "dry run: nothing was written{}",
        if blocked { "; apply would refuse" } else { "" }
    );
    if blocked {
        ExitCode::from(EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    }
}

/// Says when the patch changes the repository's own minicoder
/// configuration: the next run reads it, and asks for trust again.
fn config_notice(changes: &[(char, String)]) {
    let touched: Vec<&str> = changes
        .iter()
        .map(|(_, path)| path.as_str())
        .filter(|path| crate::workspace::protected::is_protected(path.trim_matches('"').as_bytes()))
        .collect();
    if !touched.is_empty() {
        err!(
            "minicoder: note: this patch changes the repository's own minicoder configuration ({}): read it before the next run, which asks for trust in it again",
            touched.join(", ")
        );
    }
}

/// `minicoder apply RUN --paths P… | --hunks LIST`: the subset is verified
/// again (progress and each check on stderr) before it is applied.
pub fn apply_subset(run: &str, subset: &Subset, options: ApplyOptions) -> ExitCode {
    let (state, key, record) = match find(run) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            err!("minicoder: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let progress = |line: &str| err!("minicoder: {line}");
    // Ctrl-C or SIGTERM while the checks run: the copy is removed as the
    // work is dropped, and this process's containers with it.
    let done = runtime.block_on(async {
        let docker = crate::sandbox::connect().await.ok();
        super::until_cancelled(
            docker.as_ref(),
            subset::apply_subset(&state, &key, &record, subset, options.clone(), &progress),
        )
        .await
    });
    let done = match done {
        Some(Ok(done)) => done,
        Some(Err(e)) => return refused(&e),
        None => return ExitCode::from(super::EXIT_CANCELLED),
    };
    let report = &done.report;
    if options.dry_run {
        out!(
            "minicoder apply: would apply {} of run {} to {} (a dry run verifies nothing)",
            done.summary,
            record.id,
            report.repo.display()
        );
        for c in &done.choices {
            let mark = if c.chosen { "[x]" } else { "[ ]" };
            out!("  {mark} {:>3}  {}  {}", c.number, c.file, c.hunk);
        }
    } else {
        print_hooks(report);
        if !report.succeeded {
            err!(
                "minicoder: applying unverified, as asked (the journal records it): {}",
                if done.verification.passed {
                    format!("run {} did not succeed", record.id)
                } else {
                    format!(
                        "the subset failed {}",
                        subset::failed_names(&done.verification.checks)
                    )
                }
            );
        }
        out!(
            "minicoder apply: applied {} of run {} to {}",
            done.summary,
            record.id,
            report.repo.display()
        );
    }
    for (letter, path) in &report.changes {
        out!("  {letter} {path}");
    }
    if options.dry_run {
        return dry_run_verdict(report, options.merge);
    }
    let v = &done.verification;
    if !v.record.as_os_str().is_empty() {
        out!(
            "verified again on the source as it is now with the subset applied ({}): {}",
            if v.base_is_run_baseline {
                "the run's baseline"
            } else {
                "which differs from the run's baseline"
            },
            if v.passed {
                "every check passed"
            } else {
                "checks FAILED"
            }
        );
        for c in &v.checks {
            out!(
                "  {:<6} {}: {}",
                if c.passed { "pass" } else { "FAIL" },
                c.name,
                c.detail
            );
        }
        out!("record: {}", v.record.display());
    }
    match &report.commit {
        Some(id) => out!("committed {id} (no hooks run)"),
        None => out!(
            "left uncommitted; `minicoder undo {}` reverts it",
            record.id
        ),
    }
    ExitCode::SUCCESS
}

pub fn undo(run: &str, options: UndoOptions) -> ExitCode {
    let (state, key, record) = match find(run) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let report = match delivery::undo(&state, &key, &record, options) {
        Ok(report) => report,
        Err(e) => return refused(&e),
    };
    out!(
        "minicoder undo: run {} in {}",
        record.id,
        report.repo.display()
    );
    for path in &report.restored {
        out!("  {path}");
    }
    if let Some(id) = &report.commit {
        out!("committed the revert {id} (no hooks run)");
    }
    if report.skipped.is_empty() {
        return ExitCode::SUCCESS;
    }
    err!(
        "minicoder: left as they are, changed since the apply: {}; `minicoder undo --force {}` restores them too",
        report.skipped.join(", "),
        record.id
    );
    ExitCode::from(EXIT_FAILURE)
}
