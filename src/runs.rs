//! Finding the runs in the state directory: every run by its artifact
//! directory, one run by its id, a unique prefix of it, or `last` (the newest
//! run of the repository around a directory). Used by `apply`, `undo`,
//! `resume`, `runs` and `show`.
//!
//! Also what a run leaves and how long it is kept (retention):
//!
//! - the artifact directory stays until `gc --older-than` removes it;
//! - the private workspace goes at the end of the run (`gc` removes one
//!   whose process died);
//! - the verifiers' stat caches go at the end of the run;
//! - the checkpoint store stays only while `resume` can use it: a run that
//!   did not succeed (failed, cancelled, interrupted) keeps it; a successful
//!   run's store is removed when it ends (its patch, receipt and trace are
//!   in the artifact directory, and `apply` and `undo` need nothing else).
//!   `gc` removes stores and caches that outlived this: of successful runs,
//!   and of runs whose artifact directory is gone.

use std::path::{Path, PathBuf};

use crate::owner::read_owner_file;
use crate::protocol::{Outcome, RunReport};
use crate::state::StateDir;
use crate::trace::artifacts::{MANIFEST_FILE, REPORT_FILE};
use crate::trace::manifest::Manifest;

/// The word that names the newest run of the current repository.
pub const LAST: &str = "last";

/// The folder of a run's artifact directory that holds `apply`'s journal.
pub const APPLY_JOURNAL_DIR: &str = "apply";
/// The apply journal in [`APPLY_JOURNAL_DIR`]: present while the run is applied
/// (an undo sets it aside under another name).
pub const APPLY_JOURNAL_FILE: &str = "journal.json";

/// Where a run is, as far as its files tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// It wrote its report.
    Finished(Outcome),
    /// No report yet, and the process that owns its workspace is alive.
    Running,
    /// No report, and nothing is running it: killed, or its machine stopped.
    Interrupted,
}

impl RunStatus {
    /// `success`, `failure`, `cancelled`, `budget`, `running`, `interrupted`.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Finished(Outcome::Success) => "success",
            RunStatus::Finished(Outcome::Failure) => "failure",
            RunStatus::Finished(Outcome::Cancelled) => "cancelled",
            RunStatus::Finished(Outcome::Budget) => "budget",
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

/// One run as its artifact directory holds it.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub id: String,
    /// The artifact directory.
    pub dir: PathBuf,
    pub manifest: Manifest,
    /// Absent while the run goes on, or when it was killed before it ended.
    pub report: Option<RunReport>,
}

impl RunRecord {
    /// Reads the run in `dir`: its manifest must be there and parse; a
    /// missing report means the run has not ended.
    pub fn read(dir: &Path) -> Result<Self, RunLookupError> {
        let manifest_path = dir.join(MANIFEST_FILE);
        let text =
            std::fs::read_to_string(&manifest_path).map_err(|e| RunLookupError::Unreadable {
                dir: dir.to_path_buf(),
                why: format!("{}: {e}", manifest_path.display()),
            })?;
        let manifest: Manifest =
            serde_json::from_str(&text).map_err(|e| RunLookupError::Unreadable {
                dir: dir.to_path_buf(),
                why: format!("{}: {e}", manifest_path.display()),
            })?;
        let report = std::fs::read_to_string(dir.join(REPORT_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<RunReport>(&t).ok());
        Ok(Self {
            id: manifest.run_id.clone(),
            dir: dir.to_path_buf(),
            manifest,
            report,
        })
    }

    /// Whether the run ended (it wrote its report).
    pub fn finished(&self) -> bool {
        self.report.is_some()
    }

    /// Whether the run's patch was applied to its source: the one place
    /// that decides it (`apply` writes its journal in the artifact directory).
    pub fn applied(&self) -> bool {
        self.dir
            .join(APPLY_JOURNAL_DIR)
            .join(APPLY_JOURNAL_FILE)
            .is_file()
    }

    /// Finished (with its outcome), running, or interrupted.
    pub fn status(&self, state: &StateDir) -> RunStatus {
        match &self.report {
            Some(report) => RunStatus::Finished(report.outcome),
            None if is_live(state, &self.id) => RunStatus::Running,
            None => RunStatus::Interrupted,
        }
    }

    /// When the run started (the manifest's creation time).
    pub fn created(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        chrono::DateTime::parse_from_rfc3339(&self.manifest.created)
            .ok()
            .map(|t| t.with_timezone(&chrono::Utc))
    }
}

/// Whether a live process owns the workspace of `run_id` (the run goes on).
pub(crate) fn is_live(state: &StateDir, run_id: &str) -> bool {
    read_owner_file(&crate::sandbox::gc::workspace_owner_file(state, run_id))
        .is_some_and(|o| o.is_alive())
}

/// Removes what a run no longer needs once it ended: its stat caches
/// always, its checkpoint store when `store_too` (the store of an ended run
/// stays, compacted to its baselines and last states, for `resume` and for
/// `apply --merge`, until `gc --older-than` or the run's directory goes).
/// Returns what it removed.
pub(crate) fn release_stores(state: &StateDir, run_id: &str, store_too: bool) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for cache in state.stat_cache_paths(run_id) {
        if remove_path(&cache) {
            removed.push(cache);
        }
    }
    if store_too {
        let store = state.checkpoint_store_dir(run_id);
        if remove_path(&store) {
            removed.push(store);
        }
    }
    removed
}

/// Removes everything of a run that has ended: its artifact directory,
/// workspace, checkpoint store and caches. Returns what it removed.
pub(crate) fn remove_run(state: &StateDir, run: &RunRecord) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let workspace = state.workspace_dir(&run.id);
    let baseline_copy = state.workspace_dir(&format!("{}-baseline", run.id));
    for path in [
        state.checkpoint_store_dir(&run.id),
        workspace.clone(),
        baseline_copy.clone(),
    ]
    .into_iter()
    .chain(state.stat_cache_paths(&run.id))
    {
        if remove_path(&path) {
            removed.push(path);
        }
    }
    for owner in [&workspace, &baseline_copy] {
        let _ = std::fs::remove_file(owner.with_extension("owner"));
    }
    if remove_path(&run.dir) {
        removed.push(run.dir.clone());
    }
    removed
}

/// The ended runs (finished or interrupted, never running) that started
/// before `cutoff`, oldest last.
pub(crate) fn older_than(
    state: &StateDir,
    cutoff: chrono::DateTime<chrono::Utc>,
) -> Vec<RunRecord> {
    list(state)
        .into_iter()
        .filter(|r| r.created().is_some_and(|t| t < cutoff))
        .filter(|r| r.status(state) != RunStatus::Running)
        .collect()
}

/// Removes the stat caches of ended runs, and the checkpoint stores no run
/// can use any more: those whose run has no artifact directory in the state
/// directory, unless a live process owns the run. Returns what it removed.
pub(crate) fn collect_stores(state: &StateDir) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(state.checkpoints_dir()) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let (id, _) = name.rsplit_once('.')?;
            Some(id.to_string())
        })
        .collect();
    ids.sort();
    ids.dedup();
    let mut removed = Vec::new();
    for id in ids {
        if is_live(state, &id) {
            continue;
        }
        let dir = state.runs_dir().join(&id);
        removed.extend(release_stores(state, &id, !dir.exists()));
    }
    removed
}

/// Bytes of every file under `path` (symlinks not followed).
pub(crate) fn disk_usage(path: &Path) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if !meta.is_dir() {
        return meta.len();
    }
    std::fs::read_dir(path)
        .map(|entries| entries.flatten().map(|e| disk_usage(&e.path())).sum())
        .unwrap_or(0)
}

/// Removes a file or a directory tree; whether something was there and went.
fn remove_path(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path).is_ok(),
        Ok(_) => std::fs::remove_file(path).is_ok(),
        Err(_) => false,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunLookupError {
    #[error("no run matches {0:?}; `minicoder runs` lists them")]
    NotFound(String),
    #[error("{arg:?} matches {} runs ({}); give more of the id", .candidates.len(), .candidates.join(", "))]
    Ambiguous {
        arg: String,
        candidates: Vec<String>,
    },
    #[error("no run of the repository {} yet", .0.display())]
    NoRunForRepo(PathBuf),
    #[error("`last` names the newest run of the repository around the current directory, and {} is not inside one", .0.display())]
    NotInRepo(PathBuf),
    #[error("the run in {} cannot be read: {why}", .dir.display())]
    Unreadable { dir: PathBuf, why: String },
}

/// Every readable run in the state directory, newest first (by the
/// manifest's creation time, then id). Unreadable directories are skipped
/// with a warning in the log: one broken run never hides the others.
pub fn list(state: &StateDir) -> Vec<RunRecord> {
    let Ok(entries) = std::fs::read_dir(state.runs_dir()) else {
        return Vec::new();
    };
    let mut runs: Vec<RunRecord> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| match RunRecord::read(&e.path()) {
            Ok(run) => Some(run),
            Err(e) => {
                tracing::warn!("skipping a run: {e}");
                None
            }
        })
        .collect();
    runs.sort_by(|a, b| {
        b.manifest
            .created
            .cmp(&a.manifest.created)
            .then_with(|| b.id.cmp(&a.id))
    });
    runs
}

/// Removes the run directories that hold no manifest and that no live
/// process is making — what a run killed before it wrote its manifest
/// left — and returns them. A run being set
/// up writes its workspace's owner file before its run directory, so one
/// whose owner is alive is left alone.
pub fn collect_unmade(state: &StateDir) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(state.runs_dir()) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let dir = entry.path();
        // Only a directory with no manifest at all: one that cannot be read
        // (a newer version's, a damaged one) may still be someone's record.
        let missing = matches!(
            std::fs::symlink_metadata(dir.join(MANIFEST_FILE)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        );
        if !entry.file_type().is_ok_and(|t| t.is_dir()) || !missing {
            continue;
        }
        let id = entry.file_name().to_string_lossy().into_owned();
        let owner = crate::sandbox::gc::workspace_owner_file(state, &id);
        if crate::owner::read_owner_file(&owner).is_some_and(|o| o.is_alive()) {
            continue;
        }
        if remove_path(&dir) {
            let _ = std::fs::remove_file(&owner);
            removed.push(dir);
        }
    }
    removed
}

/// The runs of one source repository, newest first.
pub fn list_for_repo(state: &StateDir, repo: &Path) -> Vec<RunRecord> {
    let repo = canonical(repo);
    list(state)
        .into_iter()
        .filter(|r| canonical(Path::new(&r.manifest.repo)) == repo)
        .collect()
}

/// The run `arg` names: `last` (the newest run of the repository around
/// `cwd`), an exact id, or a prefix matching exactly one id.
pub fn resolve(state: &StateDir, arg: &str, cwd: &Path) -> Result<RunRecord, RunLookupError> {
    if arg == LAST {
        let repo = repo_root(cwd).ok_or_else(|| RunLookupError::NotInRepo(cwd.to_path_buf()))?;
        return list_for_repo(state, &repo)
            .into_iter()
            .next()
            .ok_or(RunLookupError::NoRunForRepo(repo));
    }
    // A plain id never holds a path separator: refuse anything that could
    // walk out of the runs directory.
    if arg.is_empty() || arg.contains('/') || arg.contains('\\') || arg.starts_with('.') {
        return Err(RunLookupError::NotFound(arg.to_string()));
    }
    let exact = state.runs_dir().join(arg);
    if exact.join(MANIFEST_FILE).is_file() {
        return RunRecord::read(&exact);
    }
    let mut matches: Vec<RunRecord> = list(state)
        .into_iter()
        .filter(|r| r.id.starts_with(arg))
        .collect();
    match matches.len() {
        0 => Err(RunLookupError::NotFound(arg.to_string())),
        1 => Ok(matches.remove(0)),
        _ => Err(RunLookupError::Ambiguous {
            arg: arg.to_string(),
            candidates: matches.into_iter().map(|r| r.id).collect(),
        }),
    }
}

/// The work tree root of the Git repository around `dir`.
pub fn repo_root(dir: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::discover(dir).ok()?;
    repo.workdir().map(canonical)
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// `45s`, `12m`, `3h`, `5d` since `created`; `?` if it does not parse.
pub(crate) fn age(created: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    let Ok(t) = chrono::DateTime::parse_from_rfc3339(created) else {
        return "?".into();
    };
    let s = (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// The checks of the latest verification in the event log.
pub(crate) fn latest_checks(events: &Path) -> Vec<crate::protocol::CheckReport> {
    verifications(events).0
}

/// The checks of the latest verification and of the last baseline
/// verification in the event log, read in one pass.
pub(crate) fn verifications(
    events: &Path,
) -> (
    Vec<crate::protocol::CheckReport>,
    Vec<crate::protocol::CheckReport>,
) {
    let Ok(text) = std::fs::read_to_string(events) else {
        return (Vec::new(), Vec::new());
    };
    let (mut latest, mut baseline) = (Vec::new(), Vec::new());
    let mut baseline_attempt = None;
    for line in text.lines() {
        match serde_json::from_str::<crate::protocol::RunEvent>(line) {
            Ok(crate::protocol::RunEvent::VerificationStarted {
                attempt, reason, ..
            }) => {
                latest.clear();
                if reason == crate::protocol::VerificationReason::Baseline {
                    baseline_attempt = Some(attempt);
                    baseline.clear();
                }
            }
            Ok(crate::protocol::RunEvent::VerificationCheck { attempt, check }) => {
                if Some(attempt) == baseline_attempt {
                    baseline.push(check.clone());
                }
                latest.push(check);
            }
            _ => {}
        }
    }
    (latest, baseline)
}

/// One reply's counts, as `show` lists them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct TurnUsage {
    pub turn: u32,
    pub model: crate::protocol::ModelId,
    pub usage: crate::protocol::Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
}

/// The most turns `show` lists (the latest).
pub(crate) const MAX_LISTED_TURNS: usize = 100;

/// Every reply's counts in the event log, the latest
/// [`MAX_LISTED_TURNS`] of them, and how many came before those.
pub(crate) fn turn_usage(events: &Path) -> (Vec<TurnUsage>, usize) {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open(events) else {
        return (Vec::new(), 0);
    };
    let mut turns = std::collections::VecDeque::new();
    let mut dropped = 0;
    for line in std::io::BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        if !line.contains("\"model.response\"") {
            continue;
        }
        if let Ok(crate::protocol::RunEvent::ModelResponse {
            turn,
            model,
            usage,
            cost_micros,
            ..
        }) = serde_json::from_str(&line)
        {
            turns.push_back(TurnUsage {
                turn,
                model,
                usage,
                cost_micros,
            });
            if turns.len() > MAX_LISTED_TURNS {
                turns.pop_front();
                dropped += 1;
            }
        }
    }
    (turns.into(), dropped)
}

/// The last `limit` bytes of a file (a run's outputs can be huge: whoever
/// shows them must not stall reading them), and how many bytes came before.
pub(crate) fn read_tail(path: &Path, limit: u64) -> std::io::Result<(String, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let skipped = len.saturating_sub(limit);
    file.seek(SeekFrom::Start(skipped))?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), skipped))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::manifest::ManifestLimits;

    fn write_run(state: &StateDir, id: &str, repo: &Path, created: &str, finished: bool) {
        let dir = state.runs_dir().join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = Manifest {
            run_id: id.into(),
            repo: repo.display().to_string(),
            task: "t".into(),
            baseline_commit: String::new(),
            baseline_fingerprint: String::new(),
            checks: Vec::new(),
            checks_from_flags: false,
            bootstrap: Vec::new(),
            model_chain: Vec::new(),
            limits: ManifestLimits {
                max_turns: 1,
                timeout_ms: 1,
                command_timeout_ms: 1,
                model_timeout_ms: 1,
                max_tokens: 1,
                max_cost_micros: None,
                network: false,
                approval: "never".into(),
                allow_config_edits: false,
                workspace: None,
            },
            left_out: Vec::new(),
            instructions: Vec::new(),
            project: None,
            source_head: None,
            hmac: String::new(),
            created: created.into(),
            minicoder_version: "0".into(),
        };
        std::fs::write(
            dir.join(MANIFEST_FILE),
            serde_json::to_string(&manifest).unwrap(),
        )
        .unwrap();
        if finished {
            std::fs::write(dir.join(REPORT_FILE), "not a report").unwrap();
        }
    }

    fn fixture() -> (tempfile::TempDir, StateDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path().join("state"));
        let a = tmp.path().join("a");
        let b = tmp.path().join("b");
        git2::Repository::init(&a).unwrap();
        git2::Repository::init(&b).unwrap();
        write_run(&state, "run-aaa1", &a, "2026-01-01T00:00:00Z", true);
        write_run(&state, "run-aaa2", &a, "2026-01-02T00:00:00Z", false);
        write_run(&state, "run-bbb1", &b, "2026-01-03T00:00:00Z", true);
        std::fs::create_dir_all(state.runs_dir().join("broken")).unwrap();
        (tmp, state, a, b)
    }

    #[test]
    fn lists_newest_first_and_skips_broken_runs() {
        let (_t, state, _, _) = fixture();
        let ids: Vec<String> = list(&state).into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["run-bbb1", "run-aaa2", "run-aaa1"]);
    }

    #[test]
    fn gc_takes_run_directories_without_a_manifest_unless_their_owner_lives() {
        let (_t, state, _, _) = fixture();
        let making = state.runs_dir().join("run-making");
        std::fs::create_dir_all(&making).unwrap();
        std::fs::create_dir_all(state.workspaces_dir()).unwrap();
        let alive = crate::sandbox::gc::workspace_owner_file(&state, "run-making");
        crate::owner::write_owner_file(&alive, &crate::owner::ProcessIdentity::current()).unwrap();
        let dead_dir = state.runs_dir().join("run-killed");
        std::fs::create_dir_all(&dead_dir).unwrap();
        std::fs::write(dead_dir.join(MANIFEST_FILE), "{ half").unwrap();
        let dead = crate::sandbox::gc::workspace_owner_file(&state, "run-killed");
        let gone = crate::owner::ProcessIdentity {
            pid: u32::MAX - 1,
            start_ticks: 1,
        };
        crate::owner::write_owner_file(&dead, &gone).unwrap();
        let dead_empty = state.runs_dir().join("run-killed-early");
        std::fs::create_dir_all(&dead_empty).unwrap();
        let early = crate::sandbox::gc::workspace_owner_file(&state, "run-killed-early");
        crate::owner::write_owner_file(&early, &gone).unwrap();
        let mut removed = collect_unmade(&state);
        removed.sort();
        assert_eq!(
            removed,
            [state.runs_dir().join("broken"), dead_empty.clone()]
        );
        assert!(making.exists(), "a run being set up is left alone");
        assert!(
            dead_dir.exists() && dead.exists(),
            "a manifest that does not parse may be another version's: kept"
        );
        assert!(!early.exists(), "its owner file goes with it");
        // The runs with manifests are all still there.
        assert_eq!(list(&state).len(), 3);
        assert!(collect_unmade(&state).is_empty());
    }

    #[test]
    fn last_is_the_newest_run_of_the_repository_around_the_directory() {
        let (_t, state, a, b) = fixture();
        std::fs::create_dir_all(a.join("sub/dir")).unwrap();
        assert_eq!(
            resolve(&state, "last", &a.join("sub/dir")).unwrap().id,
            "run-aaa2"
        );
        assert_eq!(resolve(&state, "last", &b).unwrap().id, "run-bbb1");
        let outside = tempfile::tempdir().unwrap();
        assert!(matches!(
            resolve(&state, "last", outside.path()),
            Err(RunLookupError::NotInRepo(_))
        ));
    }

    #[test]
    fn an_id_or_a_unique_prefix_names_one_run() {
        let (_t, state, a, _) = fixture();
        assert_eq!(resolve(&state, "run-aaa1", &a).unwrap().id, "run-aaa1");
        assert_eq!(resolve(&state, "run-b", &a).unwrap().id, "run-bbb1");
        match resolve(&state, "run-aaa", &a) {
            Err(RunLookupError::Ambiguous { candidates, .. }) => {
                assert_eq!(candidates, ["run-aaa2", "run-aaa1"])
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            resolve(&state, "nope", &a),
            Err(RunLookupError::NotFound(_))
        ));
        assert!(matches!(
            resolve(&state, "../state", &a),
            Err(RunLookupError::NotFound(_))
        ));
    }

    #[test]
    fn a_run_without_a_readable_report_has_not_finished() {
        let (_t, state, _, _) = fixture();
        let runs = list(&state);
        // "not a report" does not parse: treated as not finished, never a crash.
        assert!(runs.iter().all(|r| !r.finished()));
    }
}
