//! Finding the runs in the state directory: every run by its artifact
//! directory, one run by its id, a unique prefix of it, or `last` (the newest
//! run of the repository around a directory). Used by `apply`, `undo`,
//! `resume`, `runs` and `show`.

use std::path::{Path, PathBuf};

use crate::protocol::RunReport;
use crate::state::StateDir;
use crate::trace::artifacts::{MANIFEST_FILE, REPORT_FILE};
use crate::trace::manifest::Manifest;

/// The word that names the newest run of the current repository.
pub const LAST: &str = "last";

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
            bootstrap: Vec::new(),
            model_chain: Vec::new(),
            limits: ManifestLimits {
                max_turns: 1,
                timeout_ms: 1,
                command_timeout_ms: 1,
                model_timeout_ms: 1,
                max_tokens: 1,
                network: false,
                approval: "never".into(),
            },
            left_out: Vec::new(),
            instructions: Vec::new(),
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
