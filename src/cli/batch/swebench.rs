//! SWE-bench instances as batch tasks: each runs on its own checkout of its
//! repository at `base_commit` (cloned from the person's local clone, which
//! is never changed), and the batch writes `predictions.jsonl`, the file the
//! SWE-bench harness reads.

use std::path::{Path, PathBuf};

use super::plan::{self, Instance, TaskSpec};
use super::scheduler::TaskResult;

/// The checkout of one instance under the batch folder.
pub(crate) fn checkout_dir(batch: &Path, instance_id: &str) -> PathBuf {
    batch.join("checkouts").join(instance_id)
}

/// Clones `clone` into `dest` and checks out `commit` (detached). An
/// existing checkout at that commit is kept (a resumed batch).
pub(crate) fn checkout(clone: &Path, dest: &Path, commit: &str) -> Result<(), String> {
    let fail = |what: &str, e: git2::Error| {
        format!("{what} {commit} of {}: {}", clone.display(), e.message())
    };
    if let Ok(repo) = git2::Repository::open(dest)
        && let Ok(head) = repo.head().and_then(|h| h.peel_to_commit())
        && head
            .id()
            .to_string()
            .starts_with(&commit.to_ascii_lowercase())
    {
        return Ok(());
    }
    if dest.exists() {
        std::fs::remove_dir_all(dest).map_err(|e| format!("{}: {e}", dest.display()))?;
    }
    if let Some(parent) = dest.parent() {
        crate::state::private_dir(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let source = clone
        .to_str()
        .ok_or_else(|| format!("{} is not a UTF-8 path", clone.display()))?;
    let repo = git2::build::RepoBuilder::new()
        .clone(source, dest)
        .map_err(|e| fail("cloning for", e))?;
    let object = repo
        .revparse_single(commit)
        .map_err(|e| fail("finding", e))?;
    let commit_obj = object.peel_to_commit().map_err(|e| fail("finding", e))?;
    repo.checkout_tree(
        commit_obj.as_object(),
        Some(
            git2::build::CheckoutBuilder::new()
                .force()
                .remove_untracked(true),
        ),
    )
    .map_err(|e| fail("checking out", e))?;
    repo.set_head_detached(commit_obj.id())
        .map_err(|e| fail("checking out", e))?;
    Ok(())
}

/// The batch's tasks for `instances`, each on its checkout.
pub(crate) fn tasks(
    instances: &[Instance],
    repos: &Path,
    batch: &Path,
    model: Option<&str>,
    scripts: Option<&Path>,
) -> Result<Vec<TaskSpec>, String> {
    let mut out = Vec::new();
    for inst in instances {
        let clone = plan::local_clone(repos, &inst.repo)?;
        let dest = checkout_dir(batch, &inst.instance_id);
        // An instance whose commit cannot be checked out fails alone.
        let unavailable = checkout(&clone, &dest, &inst.base_commit).err();
        let script = scripts.map(|d| d.join(format!("{}.json", inst.instance_id)));
        if let Some(s) = &script
            && !s.is_file()
        {
            return Err(format!("{}: no script {}", inst.instance_id, s.display()));
        }
        let mut task = plan::instance_task(inst, dest, model, script);
        task.unavailable = unavailable;
        out.push(task);
    }
    Ok(out)
}

/// `predictions.jsonl`: one line per finished instance, the harness's
/// fields, the run's final patch (empty when it made none).
pub(crate) fn predictions(tasks: &[TaskSpec], results: &[&TaskResult]) -> String {
    let mut text = String::new();
    for task in tasks {
        let Some(instance_id) = &task.instance_id else {
            continue;
        };
        // An instance that never became a run has no prediction: the
        // harness counts it unresolved, as it is.
        let Some(result) = results
            .iter()
            .find(|r| r.id == task.id && r.run_id.is_some())
        else {
            continue;
        };
        let patch = result
            .patch
            .as_deref()
            .and_then(|p| plan::read_bounded(Path::new(p)).ok())
            .unwrap_or_default();
        let model = (result.model.as_deref())
            .or(task.model.as_deref())
            .or(task.script.as_ref().map(|_| "scripted"))
            .unwrap_or("unknown");
        let line = serde_json::json!({
            "instance_id": instance_id,
            "model_name_or_path": format!("minicoder/{model}"),
            "model_patch": patch,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit_file(
        repo: &git2::Repository,
        name: &str,
        text: &str,
        parent: Option<git2::Oid>,
    ) -> git2::Oid {
        let dir = repo.workdir().expect("workdir");
        std::fs::write(dir.join(name), text).expect("write");
        let mut index = repo.index().expect("index");
        index.add_path(Path::new(name)).expect("add");
        index.write().expect("index");
        let tree = repo
            .find_tree(index.write_tree().expect("tree"))
            .expect("tree");
        let sig = git2::Signature::now("t", "t@t").expect("sig");
        let parents: Vec<git2::Commit> = parent
            .map(|p| repo.find_commit(p).expect("parent"))
            .into_iter()
            .collect();
        let refs: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some("HEAD"), &sig, &sig, name, &tree, &refs)
            .expect("commit")
    }

    #[test]
    fn a_checkout_is_at_the_base_commit_and_the_clone_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let clone = dir.path().join("o__r");
        let repo = git2::Repository::init(&clone).expect("init");
        let base = commit_file(&repo, "a.py", "old\n", None);
        let head = commit_file(&repo, "b.py", "new\n", Some(base));
        let dest = dir.path().join("batch/checkouts/i-1");
        checkout(&clone, &dest, &base.to_string()[..10]).expect("checkout");
        assert_eq!(
            std::fs::read_to_string(dest.join("a.py")).expect("a"),
            "old\n"
        );
        assert!(
            !dest.join("b.py").exists(),
            "a file of a later commit is not there"
        );
        let out = git2::Repository::open(&dest).expect("open");
        assert_eq!(
            out.head().expect("head").peel_to_commit().expect("c").id(),
            base
        );
        assert_eq!(
            repo.head().expect("head").peel_to_commit().expect("c").id(),
            head
        );
        // Again: kept as it is.
        std::fs::write(dest.join("marker"), "x").expect("marker");
        checkout(&clone, &dest, &base.to_string()).expect("again");
        assert!(dest.join("marker").exists());
        let e = checkout(&clone, &dir.path().join("x"), "0123456789").expect_err("no such commit");
        assert!(e.contains("finding 0123456789"), "{e}");
    }

    #[test]
    fn an_instance_whose_commit_is_missing_fails_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = git2::Repository::init(dir.path().join("repos/o__r")).expect("init");
        let base = commit_file(&repo, "a.py", "old\n", None);
        let text = format!(
            r#"{{"instance_id": "o__r-1", "repo": "o/r", "base_commit": "{base}", "problem_statement": "p", "FAIL_TO_PASS": ["t.py::a"]}}
{{"instance_id": "o__r-2", "repo": "o/r", "base_commit": "0123456789abcdef", "problem_statement": "p", "FAIL_TO_PASS": ["t.py::a"]}}"#
        );
        let inst = plan::parse_instances(&text).expect("instances");
        let batch = dir.path().join("batch");
        let made = tasks(&inst, &dir.path().join("repos"), &batch, None, None).expect("tasks");
        assert_eq!(made.len(), 2);
        assert_eq!(made[0].unavailable, None);
        assert!(made[0].repo.join("a.py").is_file());
        let why = made[1].unavailable.as_deref().expect("the second fails");
        assert!(why.contains("finding 0123456789abcdef"), "{why}");
    }

    #[test]
    fn predictions_carry_the_harness_fields_and_the_patch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let patch = dir.path().join("final.patch");
        std::fs::write(&patch, "diff --git a/a.py b/a.py\n").expect("patch");
        let inst = plan::parse_instances(
            r#"{"instance_id": "o__r-1", "repo": "o/r", "base_commit": "abcdef1", "problem_statement": "p", "FAIL_TO_PASS": ["t.py::a"]}
{"instance_id": "o__r-2", "repo": "o/r", "base_commit": "abcdef1", "problem_statement": "p", "FAIL_TO_PASS": ["t.py::a"]}
{"instance_id": "o__r-3", "repo": "o/r", "base_commit": "abcdef1", "problem_statement": "p", "FAIL_TO_PASS": ["t.py::a"]}"#,
        )
        .expect("instances");
        let tasks: Vec<TaskSpec> = inst
            .iter()
            .map(|i| plan::instance_task(i, "/w".into(), Some("deepseek"), None))
            .collect();
        let mut one = TaskResult::error("o__r-1", String::new(), 0);
        one.run_id = Some("r1".into());
        one.patch = Some(patch.display().to_string());
        one.model = Some("openai:gpt-5".into());
        // A run that failed before any model answered: the batch's model.
        let mut two = TaskResult::error("o__r-2", "failed".into(), 1);
        two.run_id = Some("r2".into());
        // Never a run (its checkout failed): no prediction.
        let three = TaskResult::error("o__r-3", "no such commit".into(), 1);
        let text = predictions(&tasks, &[&one, &two, &three]);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), 2, "the never-run instance is left out");
        assert_eq!(lines[0]["instance_id"], "o__r-1");
        assert_eq!(lines[0]["model_name_or_path"], "minicoder/openai:gpt-5");
        assert_eq!(lines[0]["model_patch"], "diff --git a/a.py b/a.py\n");
        assert_eq!(lines[1]["model_name_or_path"], "minicoder/deepseek");
        assert_eq!(lines[1]["model_patch"], "");
    }
}
