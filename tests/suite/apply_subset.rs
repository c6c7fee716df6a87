//! `minicoder apply RUN --hunks/--paths` through the real binary: a subset
//! of a run's patch is verified again, in real Docker, before it is
//! applied. The run is built with the library's own writers (its frozen
//! check: `python3 check.py`, which needs the first hunk of `calc.py`).

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use minicoder::protocol::Outcome;
use minicoder::state::StateDir;
use sha2::{Digest, Sha256};

const FILLER: &str = "# a\n# b\n# c\n# d\n# e\n# f\n# g\n# h\n# i\n# j\n";

fn calc(one: &str, two: &str) -> String {
    format!("def one():\n    return {one}\n{FILLER}def two():\n    return {two}\n")
}

struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    id: &'static str,
}

impl Fixture {
    /// A repository and a successful run that fixed both functions of
    /// `calc.py` (hunks 1 and 2) and edited `notes.txt` (hunk 3).
    fn new(id: &'static str) -> Self {
        Self::with_check(id, "python3 check.py")
    }

    /// [`Fixture::new`] whose run froze `check` as its `tests` check.
    fn with_check(id: &'static str, check: &str) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        support::write(&repo.join("calc.py"), calc("0", "0").as_bytes());
        support::write(
            &repo.join("check.py"),
            b"import calc\nassert calc.one() == 1, 'one() is wrong'\nprint('ok')\n",
        );
        support::write(&repo.join("notes.txt"), b"notes\n");
        support::write(&repo.join("other.txt"), b"not touched by the run\n");
        support::git_commit_all(&repo);
        let fx = Self { tmp, repo, id };
        let workspace = fx.tmp.path().join("ws");
        support::fake_run::make_run_with_checks(
            &fx.state(),
            &fx.repo,
            &workspace,
            id,
            Outcome::Success,
            &[("tests", check)],
            |ws| {
                std::fs::write(ws.join("calc.py"), calc("1", "2")).unwrap();
                std::fs::write(ws.join("notes.txt"), "notes, edited\n").unwrap();
            },
        );
        fx
    }

    fn state(&self) -> StateDir {
        StateDir::new(self.tmp.path().join("state"))
    }

    fn run_dir(&self) -> PathBuf {
        self.state().runs_dir().join(self.id)
    }

    fn cmd_run(&self, args: &[&str]) -> Output {
        let mut all = vec![args[0], self.id];
        all.extend_from_slice(&args[1..]);
        self.cmd(&all)
    }

    /// What a re-verification left behind: workspaces in the state
    /// directory, and containers of this run's subsets.
    fn leftovers(&self) -> (Vec<PathBuf>, Vec<String>) {
        let workspaces = std::fs::read_dir(self.state().root().join("workspaces"))
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        let out = std::process::Command::new("docker")
            .args([
                "ps",
                "-a",
                "--filter",
                "label=org.minicoder.run",
                "--format",
                "{{.Label \"org.minicoder.run\"}}",
            ])
            .output()
            .unwrap();
        let prefix = format!("{}-subset-", self.id);
        let containers = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(String::from)
            .collect();
        (workspaces, containers)
    }

    fn cmd(&self, args: &[&str]) -> Output {
        std::process::Command::new(support::bin())
            .args(args)
            .current_dir(&self.repo)
            .env("MINICODER_STATE_DIR", self.state().root())
            .env_remove("MINICODER_LOG")
            .output()
            .unwrap()
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.repo.join(rel)).unwrap()
    }

    fn json(&self, rel: &str) -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(self.run_dir().join(rel)).unwrap()).unwrap()
    }
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// SHA-256 over every entry under `dir`, `.git` included.
fn tree_hash(dir: &Path) -> String {
    let mut entries = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(dir).unwrap().to_path_buf();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let body = if meta.is_dir() {
                stack.push(path.clone());
                b"dir".to_vec()
            } else {
                let mut b = format!("file {:o} ", meta.permissions().mode() & 0o777).into_bytes();
                b.extend(std::fs::read(&path).unwrap());
                b
            };
            entries.push((rel, body));
        }
    }
    entries.sort();
    let mut h = Sha256::new();
    for (rel, body) in entries {
        h.update(rel.as_os_str().as_encoded_bytes());
        h.update([0]);
        h.update(&body);
        h.update([0]);
    }
    hex::encode(h.finalize())
}

fn sha256_file(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

#[tokio::test]
async fn a_subset_that_passes_is_applied_and_its_record_says_what_was_verified() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let fx = Fixture::new("run-pass");
    let before = tree_hash(&fx.repo);
    let out = fx.cmd_run(&["apply", "--hunks", "1"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("re-verifying 1 of 2 files (1 of 3 hunks): check tests"),
        "{stderr}"
    );
    assert!(stderr.contains("check tests: passed"), "{stderr}");
    assert!(stdout.contains("applied 1 of 2 files"), "{stdout}");
    assert!(stdout.contains("M calc.py"), "{stdout}");
    assert!(stdout.contains("pass   tests"), "{stdout}");
    // Only the first hunk: one() fixed, two() and notes.txt as they were.
    assert_eq!(fx.read("calc.py"), calc("1", "0"));
    assert_eq!(fx.read("notes.txt"), "notes\n");
    assert_eq!(
        fx.leftovers(),
        (Vec::new(), Vec::new()),
        "copy and containers removed"
    );

    let record = fx.json("apply/subset-verification.json");
    assert_eq!(record["passed"], true);
    assert_eq!(record["chosen"], "hunks 1");
    assert_eq!(record["hunks"], 1);
    assert_eq!(record["total_hunks"], 3);
    assert_eq!(record["checks"][0]["name"], "tests");
    assert_eq!(record["checks"][0]["exit_code"], 0);
    assert_eq!(record["base_is_run_baseline"], true, "{record}");
    assert_eq!(
        record["patch_sha256"],
        sha256_file(&fx.run_dir().join("apply/subset.patch"))
    );
    let journal = fx.json("apply/journal.json");
    assert_eq!(journal["unverified"], false);
    assert_eq!(journal["subset"]["passed"], true);
    assert_eq!(
        journal["subset"]["record_sha256"],
        sha256_file(&fx.run_dir().join("apply/subset-verification.json"))
    );

    let show = fx.cmd_run(&["show", "--verify"]);
    let (stdout, stderr) = text(&show);
    assert_eq!(show.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("subset (applied): hunks 1 (1 of 3 hunks)"),
        "{stdout}"
    );
    assert!(stdout.contains("[ OK ] subset record"), "{stdout}");
    assert!(stdout.contains("[ OK ] apply journal"), "{stdout}");

    // A record changed by hand no longer verifies.
    let path = fx.run_dir().join("apply/subset-verification.json");
    let original = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, original.replace("\"hunks 1\"", "\"hunks 1,2\"")).unwrap();
    let show = fx.cmd_run(&["show", "--verify"]);
    let (stdout, _) = text(&show);
    assert_eq!(show.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("[FAIL] subset record"), "{stdout}");
    std::fs::remove_file(&path).unwrap();
    let show = fx.cmd_run(&["show", "--verify"]);
    let (stdout, _) = text(&show);
    assert_eq!(show.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(
            "[FAIL] subset record: the apply journal names a subset record that is not there"
        ),
        "{stdout}"
    );
    std::fs::write(&path, original).unwrap();

    let undo = fx.cmd_run(&["undo"]);
    assert_eq!(undo.status.code(), Some(0), "{:?}", text(&undo));
    assert_eq!(
        tree_hash(&fx.repo),
        before,
        "undo restores the source exactly"
    );
}

#[tokio::test]
async fn a_subset_that_fails_is_not_applied_unless_unverified() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let fx = Fixture::new("run-fail");
    // The source changed since the run where the subset does not touch it.
    std::fs::write(fx.repo.join("other.txt"), "edited by the user\n").unwrap();
    let before = tree_hash(&fx.repo);
    let out = fx.cmd_run(&["apply", "--hunks", "2-3"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stderr.contains("check tests: FAILED (exit 1)"), "{stderr}");
    assert!(
        stderr.contains("refused: the subset failed its verification: tests"),
        "{stderr}"
    );
    assert_eq!(tree_hash(&fx.repo), before, "nothing was written");
    assert_eq!(
        fx.leftovers(),
        (Vec::new(), Vec::new()),
        "copy and containers removed"
    );
    assert!(!fx.run_dir().join("apply/journal.json").exists());
    let record = fx.json("apply/subset-verification.json");
    assert_eq!(record["passed"], false);
    assert_eq!(record["base_is_run_baseline"], false, "{record}");
    let show = fx.cmd_run(&["show"]);
    let (stdout, _) = text(&show);
    assert!(
        stdout.contains("subset (not applied): hunks 2,3"),
        "{stdout}"
    );
    assert!(stdout.contains("FAIL   tests"), "{stdout}");
    assert!(stdout.contains("not the run's baseline"), "{stdout}");

    let out = fx.cmd_run(&["apply", "--hunks", "2-3", "--unverified"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("applying unverified, as asked"), "{stderr}");
    assert!(stdout.contains("checks FAILED"), "{stdout}");
    assert_eq!(fx.read("calc.py"), calc("0", "2"));
    assert_eq!(fx.read("notes.txt"), "notes, edited\n");
    assert_eq!(fx.read("other.txt"), "edited by the user\n");
    let journal = fx.json("apply/journal.json");
    assert_eq!(journal["unverified"], true);
    assert_eq!(journal["subset"]["passed"], false);
}

#[tokio::test]
async fn paths_choose_whole_files() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let fx = Fixture::new("run-paths");
    let out = fx.cmd_run(&["apply", "--paths", "calc.py", "--commit"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("re-verifying 1 of 2 files (2 of 3 hunks)"),
        "{stderr}"
    );
    assert_eq!(fx.read("calc.py"), calc("1", "2"));
    assert_eq!(fx.read("notes.txt"), "notes\n");
    // The commit names the record of the subset's verification.
    let log = std::process::Command::new("git")
        .args(["log", "-1", "--format=%B"])
        .current_dir(&fx.repo)
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&log.stdout);
    let record = sha256_file(&fx.run_dir().join("apply/subset-verification.json"));
    assert!(
        message.contains(&format!("Minicoder-Subset-Verification: {record}")),
        "{message}"
    );
}

#[test]
fn a_hunk_or_path_not_in_the_patch_is_refused_and_a_dry_run_lists_the_hunks() {
    let fx = Fixture::new("run-refuse");
    let before = tree_hash(&fx.repo);
    let out = fx.cmd_run(&["apply", "--hunks", "1,9"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("hunk 9 is not in final.patch, which has 3"),
        "{stderr}"
    );
    let out = fx.cmd_run(&["apply", "--paths", "calc.py", "nope.txt"]);
    let (_, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not a path final.patch changes: nope.txt"),
        "{stderr}"
    );
    let out = fx.cmd_run(&["apply", "--hunks", "0"]);
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));

    let out = fx.cmd_run(&["apply", "--dry-run", "--hunks", "1"]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("a dry run verifies nothing"), "{stdout}");
    assert!(stdout.contains("[x]   1  calc.py  @@ -1,"), "{stdout}");
    assert!(stdout.contains("[ ]   2  calc.py  @@ "), "{stdout}");
    assert!(
        stdout.contains("[ ]   3  notes.txt  @@ -1 +1 @@"),
        "{stdout}"
    );
    assert!(!stderr.contains("re-verifying"), "{stderr}");
    assert_eq!(tree_hash(&fx.repo), before);
    assert!(!fx.run_dir().join("apply").exists());
}

/// The session's review hands over a patch of whole hunks, file headers as
/// the run wrote them: the library verifies it and applies it, and says so.
#[tokio::test]
async fn a_reviewed_patch_is_verified_and_applied_through_the_library() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let fx = Fixture::new("run-review");
    let patch = std::fs::read_to_string(fx.run_dir().join("final.patch")).unwrap();
    // calc.py's header and its first hunk only.
    let calc_section = patch
        .split("diff --git")
        .find(|s| s.contains("calc.py"))
        .unwrap();
    let first_hunk_end = calc_section.match_indices("\n@@").nth(1).unwrap().0 + 1;
    let reviewed = format!("diff --git{}", &calc_section[..first_hunk_end]);
    let state = fx.state();
    let key = minicoder::trace::ReceiptKey::load_or_create(&state)
        .unwrap()
        .0;
    let record = minicoder::runs::RunRecord::read(&fx.run_dir()).unwrap();
    let lines = std::sync::Mutex::new(Vec::new());
    let progress = |line: &str| lines.lock().unwrap().push(line.to_string());
    let done = minicoder::delivery::subset::apply_subset(
        &state,
        &key,
        &record,
        &minicoder::delivery::subset::Subset::Patch(reviewed.clone()),
        minicoder::delivery::ApplyOptions::default(),
        &progress,
    )
    .await
    .unwrap();
    assert!(done.verification.passed, "{:?}", lines.lock().unwrap());
    assert_eq!(done.verification.checks.len(), 1);
    assert!(done.verification.record.is_file());
    assert!(done.report.succeeded);
    assert_eq!(done.report.changes, vec![('M', "calc.py".to_string())]);
    assert_eq!(done.summary, "1 of 2 files (1 of 3 hunks)");
    assert_eq!(fx.read("calc.py"), calc("1", "0"));
    assert!(
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("check tests: passed")),
        "{:?}",
        lines.lock().unwrap()
    );

    // A reviewed patch with a line the run never wrote is refused.
    let forged = reviewed.replace("+    return 1", "+    return 7");
    let undo = fx.cmd_run(&["undo"]);
    assert_eq!(undo.status.code(), Some(0), "{:?}", text(&undo));
    match minicoder::delivery::subset::apply_subset(
        &state,
        &key,
        &record,
        &minicoder::delivery::subset::Subset::Patch(forged),
        minicoder::delivery::ApplyOptions::default(),
        &progress,
    )
    .await
    {
        Err(minicoder::delivery::DeliveryError::BadSubset(why)) => {
            assert!(why.contains("is not a hunk of final.patch"), "{why}")
        }
        other => panic!("{:?}", other.map(|d| d.summary)),
    }
    assert_eq!(fx.read("calc.py"), calc("0", "0"));
}

/// Ctrl-C while the subset's checks run: nothing is written, and the copy
/// and the containers are gone.
#[tokio::test]
async fn an_interrupted_reverification_leaves_nothing_behind() {
    use std::io::BufRead as _;
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let fx = Fixture::with_check("run-cancel", "python3 check.py && sleep 120");
    let before = tree_hash(&fx.repo);
    let mut child = std::process::Command::new(support::bin())
        .args(["apply", fx.id, "--hunks", "1"])
        .current_dir(&fx.repo)
        .env("MINICODER_STATE_DIR", fx.state().root())
        .env_remove("MINICODER_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "{seen}");
        seen.push_str(&line);
        if line.contains("check tests …") {
            break;
        }
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{seen}{rest}");
    assert_eq!(tree_hash(&fx.repo), before);
    assert!(!fx.run_dir().join("apply/journal.json").exists());
    assert_eq!(
        fx.leftovers().0,
        Vec::<PathBuf>::new(),
        "the copy is removed"
    );
    // A container whose creation was under way when the signal came is
    // this dead process's: `gc` removes it.
    let gc = fx.cmd(&["gc"]);
    assert_eq!(gc.status.code(), Some(0), "{:?}", text(&gc));
    assert_eq!(fx.leftovers(), (Vec::new(), Vec::new()), "{seen}{rest}");
}
