//! What the session loop does for an apply, an undo and the runs browser:
//! the state directory's runs read, the delivery performed, each off the UI
//! thread, answered as [`AppEvent`]s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::app::{
    AppEvent, AppSender, Applied, ApplyFailure, ApplyRequest, CheckLine, ChosenHunks, RunDetail,
    RunEntry, RunRef, Undone, Verified,
};
use super::diff::DiffModel;
use crate::delivery::hunks;
use crate::delivery::subset::{Subset, SubsetCheck, apply_subset};
use crate::delivery::{self, ApplyOptions, DeliveryError, UndoOptions};
use crate::runs::read_tail;
use crate::runs::{RunRecord, list_for_repo};
use crate::state::StateDir;
use crate::trace::ReceiptKey;
use crate::trace::artifacts::{EVENTS_FILE, FINAL_PATCH_FILE};

/// The most of a patch the browser reads.
const PATCH_BYTES: u64 = 8 * 1024 * 1024;
/// The most of an event log the browser reads (its end is kept).
const EVENTS_BYTES: u64 = 2 * 1024 * 1024;
/// Characters of one event line shown at most.
const EVENT_CHARS: usize = 400;

/// Where the session's runs are: the state directory, and the repository
/// whose runs the browser lists.
#[derive(Debug, Clone)]
pub struct RunStore {
    pub state: StateDir,
    pub repo: PathBuf,
}

impl RunStore {
    /// Every run of the repository, newest first.
    pub fn entries(&self) -> Vec<RunEntry> {
        let now = chrono::Utc::now();
        list_for_repo(&self.state, &self.repo)
            .iter()
            .map(|run| entry(run, &self.state, now))
            .collect()
    }

    /// The run in the artifact directory `dir`, as the browser opens it.
    pub fn detail(&self, dir: &Path) -> Result<RunDetail, String> {
        let run = RunRecord::read(dir).map_err(|e| e.to_string())?;
        let patch = read_tail(&dir.join(FINAL_PATCH_FILE), PATCH_BYTES)
            .map(|(text, _)| text)
            .unwrap_or_default();
        let (events, events_skipped) = match read_tail(&dir.join(EVENTS_FILE), EVENTS_BYTES) {
            Ok((text, skipped)) => {
                // A line cut by the bounded read is not shown half.
                let lines: Vec<&str> = text.lines().collect();
                let from = usize::from(skipped > 0 && !lines.is_empty());
                (
                    lines[from..].iter().map(|l| event_line(l)).collect(),
                    usize::from(skipped > 0),
                )
            }
            Err(_) => (Vec::new(), 0),
        };
        let checks = match &run.report {
            Some(report) => report.verification.checks.clone(),
            None => crate::runs::latest_checks(&dir.join(EVENTS_FILE)),
        };
        Ok(RunDetail {
            entry: entry(&run, &self.state, chrono::Utc::now()),
            reason: run
                .report
                .as_ref()
                .map(|r| r.reason.clone())
                .unwrap_or_else(|| "the run has not ended".into()),
            summary: run.report.as_ref().and_then(|r| r.summary.clone()),
            patch: Arc::new(DiffModel::parse(&patch)),
            checks,
            events,
            events_skipped,
        })
    }

    fn key(&self) -> Result<ReceiptKey, String> {
        ReceiptKey::load_existing(&self.state).map_err(|e| format!("the receipt key: {e}"))
    }

    /// Applies as asked: the whole verified patch, or a subset verified again first.
    pub async fn apply(
        &self,
        request: &ApplyRequest,
        progress: &(dyn Fn(&str) + Send + Sync),
    ) -> Result<Applied, ApplyFailure> {
        let key = self.key().map_err(ApplyFailure::Other)?;
        let run = RunRecord::read(Path::new(&request.run.dir))
            .map_err(|e| ApplyFailure::Other(e.to_string()))?;
        // A hooks file that cannot be read refuses the apply rather than
        // skip a veto the person set up.
        let hooks = crate::hooks::Hooks::load(crate::state::config_dir_from_env().as_deref())
            .map_err(|e| ApplyFailure::Other(format!("your hooks: {e}")))?;
        let options = ApplyOptions {
            merge: request.merge,
            unverified: request.unverified,
            hooks: Some(std::sync::Arc::new(hooks)),
            ..ApplyOptions::default()
        };
        match &request.subset {
            None => {
                progress("checking the receipt, then writing every file or none");
                let state = self.state.clone();
                let report = tokio::task::spawn_blocking(move || {
                    delivery::apply(&state, &key, &run, options)
                })
                .await
                .map_err(|e| ApplyFailure::Other(e.to_string()))?
                .map_err(|e| failure(e, false))?;
                Ok(Applied {
                    changes: report.changes,
                    merged: report.merged,
                    verified: if report.succeeded {
                        Verified::Run
                    } else {
                        Verified::Unverified(Vec::new())
                    },
                })
            }
            Some(chosen) => {
                check_numbering(&run, chosen)?;
                progress("verifying the chosen hunks again");
                let subset = Subset::Hunks(chosen.numbers.clone());
                let done = apply_subset(&self.state, &key, &run, &subset, options, progress)
                    .await
                    .map_err(|e| failure(e, true))?;
                let checks = done.verification.checks.iter().map(check_line).collect();
                Ok(Applied {
                    changes: done.report.changes,
                    merged: done.report.merged,
                    verified: if done.verification.passed {
                        Verified::Subset(checks)
                    } else {
                        Verified::Unverified(checks)
                    },
                })
            }
        }
    }

    pub fn undo(&self, run: &RunRef, force: bool) -> Result<Undone, String> {
        let key = self.key()?;
        let record = RunRecord::read(Path::new(&run.dir)).map_err(|e| e.to_string())?;
        let options = UndoOptions {
            force,
            commit: false,
        };
        let report =
            delivery::undo(&self.state, &key, &record, options).map_err(|e| e.to_string())?;
        Ok(Undone {
            restored: report.restored,
            skipped: report.skipped,
        })
    }
}

/// Performs an apply and sends its result; returns at once. The apply runs
/// on a blocking thread of its own, driven there: a subset's verification
/// holds what cannot move between threads while it waits for its checks.
pub(crate) fn spawn_apply(
    store: Option<Arc<RunStore>>,
    request: ApplyRequest,
    sender: AppSender,
) -> tokio::task::JoinHandle<()> {
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let result = match store {
            Some(store) => {
                let lines = sender.clone();
                let progress = move |line: &str| {
                    let _ = lines.send(AppEvent::DeliveryProgress(line.to_string()));
                };
                runtime.block_on(store.apply(&request, &progress))
            }
            None => Err(ApplyFailure::Other(NO_STORE.into())),
        };
        let _ = sender.send(AppEvent::Applied(result));
    })
}

pub(crate) fn spawn_undo(
    store: Option<Arc<RunStore>>,
    run: RunRef,
    force: bool,
    sender: AppSender,
) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || {
        let result = match store {
            Some(store) => store.undo(&run, force),
            None => Err(NO_STORE.into()),
        };
        let _ = sender.send(AppEvent::Undone(result));
    })
}

pub(crate) fn spawn_list(store: Option<Arc<RunStore>>, sender: AppSender) {
    tokio::task::spawn_blocking(move || {
        let result = match store {
            Some(store) => Ok(store.entries()),
            None => Err(NO_STORE.into()),
        };
        let _ = sender.send(AppEvent::RunsListed(result));
    });
}

pub(crate) fn spawn_open(store: Option<Arc<RunStore>>, dir: String, sender: AppSender) {
    tokio::task::spawn_blocking(move || {
        let result = match store {
            Some(store) => store.detail(Path::new(&dir)).map(Box::new),
            None => Err(NO_STORE.into()),
        };
        let _ = sender.send(AppEvent::RunOpened(result));
    });
}

const NO_STORE: &str = "this session has no state directory to read runs from";

fn entry(run: &RunRecord, state: &StateDir, now: chrono::DateTime<chrono::Utc>) -> RunEntry {
    let report = run.report.as_ref();
    RunEntry {
        id: run.id.clone(),
        dir: run.dir.display().to_string(),
        age: crate::runs::age(&run.manifest.created, now),
        task: run.manifest.task.clone(),
        outcome: run.status(state).as_str().to_string(),
        verified: report.map(|r| r.verification.passed),
        applied: run.applied(),
        changed_files: report.map(|r| r.changed_files.clone()).unwrap_or_default(),
    }
}

/// The review numbered the hunks of the patch it showed; they are used
/// only if `patch` (the run's `final.patch`) offers exactly as many
/// choices, so a number means the hunk that was seen.
fn numbered_files(patch: &Path, chosen: &ChosenHunks) -> Result<Vec<hunks::PatchFile>, String> {
    let bytes = std::fs::read(patch).map_err(|e| format!("{}: {e}", patch.display()))?;
    let files = hunks::split(&bytes).map_err(|e| e.to_string())?;
    let offered = hunks::numbering(&files).len();
    if offered != chosen.of {
        return Err(format!(
            "the review offered {} hunks but {} has {offered}: review it again",
            chosen.of,
            patch.display()
        ));
    }
    Ok(files)
}

fn check_numbering(run: &RunRecord, chosen: &ChosenHunks) -> Result<(), ApplyFailure> {
    numbered_files(&run.dir.join(FINAL_PATCH_FILE), chosen)
        .map(drop)
        .map_err(ApplyFailure::Other)
}

/// Writes the patch of the chosen hunks of `patch` next to the run's other
/// artifacts, made by delivery as an apply would make it.
pub(crate) fn save_review(
    patch: &str,
    chosen: &ChosenHunks,
    artifact_dir: &str,
) -> Result<String, String> {
    let files = numbered_files(Path::new(patch), chosen)?;
    let selection = hunks::by_numbers(&files, &chosen.numbers).map_err(|e| e.to_string())?;
    let path = Path::new(artifact_dir).join("reviewed.patch");
    std::fs::write(&path, hunks::build(&files, &selection))
        .map(|()| path.display().to_string())
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// What the screen says about a refused apply.
fn failure(error: DeliveryError, subset: bool) -> ApplyFailure {
    match error {
        DeliveryError::Overlap(paths) => ApplyFailure::Overlap(paths),
        DeliveryError::Unmerged(paths) => ApplyFailure::Unmerged(paths),
        DeliveryError::SubsetFailed { checks } => ApplyFailure::SubsetFailed {
            why: format!("failed: {}", crate::delivery::subset::failed_names(&checks)),
            checks: checks.iter().map(check_line).collect(),
        },
        // Not verified at all (the checks could not run): the same choice.
        DeliveryError::Reverify(why) => ApplyFailure::SubsetFailed {
            why,
            checks: Vec::new(),
        },
        DeliveryError::Unverified(why) if subset => ApplyFailure::SubsetFailed {
            why,
            checks: Vec::new(),
        },
        DeliveryError::Unverified(why) => ApplyFailure::Unverified(why),
        other => ApplyFailure::Other(other.to_string()),
    }
}

fn check_line(check: &SubsetCheck) -> CheckLine {
    CheckLine {
        name: check.name.clone(),
        passed: check.passed,
        detail: check.detail.clone(),
    }
}

/// One event of the log as the browser lists it: its type, then the rest.
fn event_line(line: &str) -> String {
    let text = match serde_json::from_str::<serde_json::Value>(line) {
        Ok(serde_json::Value::Object(mut map)) => {
            let kind = map
                .remove("type")
                .and_then(|t| t.as_str().map(String::from))
                .unwrap_or_else(|| "?".into());
            let seq = map.remove("seq").map(|s| s.to_string()).unwrap_or_default();
            map.remove("prev");
            map.remove("ts");
            format!("{seq:>4} {kind}  {}", serde_json::Value::Object(map))
        }
        _ => line.to_string(),
    };
    let clean = super::text::clean(&text).replace('\n', " ");
    if clean.chars().count() <= EVENT_CHARS {
        return clean;
    }
    let mut cut: String = clean.chars().take(EVENT_CHARS - 1).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_line_names_its_type_and_is_made_safe() {
        let line =
            r#"{"seq":7,"type":"tool.finished","prev":"ab","output":"\u001b[31mred\u001b[0m"}"#;
        let shown = event_line(line);
        assert!(shown.starts_with("   7 tool.finished  "), "{shown}");
        assert!(!shown.contains('\u{1b}'), "{shown}");
        assert!(!shown.contains("prev"), "{shown}");
        let long = format!(r#"{{"type":"x","text":"{}"}}"#, "a".repeat(5000));
        assert_eq!(event_line(&long).chars().count(), EVENT_CHARS);
    }

    #[test]
    fn refusals_keep_their_paths_and_a_subset_is_never_called_verified() {
        assert_eq!(
            failure(DeliveryError::Overlap(vec!["a.py".into()]), false),
            ApplyFailure::Overlap(vec!["a.py".into()])
        );
        assert!(matches!(
            failure(DeliveryError::Unverified("no".into()), true),
            ApplyFailure::SubsetFailed { .. }
        ));
        assert!(matches!(
            failure(DeliveryError::Unverified("no".into()), false),
            ApplyFailure::Unverified(_)
        ));
        let failed = failure(
            DeliveryError::SubsetFailed {
                checks: vec![
                    SubsetCheck {
                        name: "tests".into(),
                        passed: false,
                        detail: "exit 1".into(),
                    },
                    SubsetCheck {
                        name: "lint".into(),
                        passed: true,
                        detail: "exit 0".into(),
                    },
                ],
            },
            true,
        );
        match failed {
            ApplyFailure::SubsetFailed { why, checks } => {
                // The failed check is named; the passing one is not.
                assert!(why.starts_with("failed: tests"), "{why}");
                assert!(!why.contains("lint"), "{why}");
                assert_eq!(checks.len(), 2);
                assert!(!checks[0].passed && checks[1].passed);
            }
            other => panic!("{other:?}"),
        }
    }
}
