use super::*;
use std::path::Path;

fn setup() -> (tempfile::TempDir, WorkspaceRoot) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = WorkspaceRoot::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (dir, root)
}

fn args(path: &str, patch: &str) -> EditFileArgs {
    EditFileArgs {
        path: path.into(),
        patch: patch.into(),
    }
}

fn err_text(result: Result<PreparedEdit, ToolError>) -> String {
    match result {
        Ok(edit) => panic!("expected an error, got {edit:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn creates_modifies_and_deletes() {
    let (dir, root) = setup();
    let create = args(
        "src/new.py",
        "--- /dev/null\n+++ b/src/new.py\n@@ -0,0 +1,2 @@\n+x = 1\n+y = 2\n",
    );
    let edit = prepare_edit(&create, &root).unwrap_or_else(|e| panic!("{e}"));
    assert!(edit.is_creation());
    assert!(
        !dir.path().join("src/new.py").exists(),
        "prepare must not write"
    );
    apply_edit(&edit, &root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/new.py"))
            .ok()
            .as_deref(),
        Some("x = 1\ny = 2\n")
    );
    assert!(
        edit.patch.starts_with("--- /dev/null\n+++ b/src/new.py\n"),
        "{}",
        edit.patch
    );

    let modify = args(
        "src/new.py",
        "--- a/src/new.py\n+++ b/src/new.py\n@@ -1,2 +1,2 @@\n x = 1\n-y = 2\n+y = 3\n",
    );
    let out = edit_file(&modify, &root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.changed_files, vec!["src/new.py".to_string()]);
    assert!(out.summary.contains("+1 -1"), "{}", out.summary);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("src/new.py"))
            .ok()
            .as_deref(),
        Some("x = 1\ny = 3\n")
    );

    let delete = args(
        "src/new.py",
        "--- a/src/new.py\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-x = 1\n-y = 3\n",
    );
    edit_file(&delete, &root).unwrap_or_else(|e| panic!("{e}"));
    assert!(!dir.path().join("src/new.py").exists());
}

#[test]
fn a_mismatch_changes_nothing() {
    let (dir, root) = setup();
    std::fs::write(dir.path().join("a.txt"), "1\n2\n3\n4\n5\n6\n7\n8\n")
        .unwrap_or_else(|e| panic!("{e}"));
    let patch =
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n 1\n-2\n+two\n@@ -6,2 +6,2 @@\n 6\n-9\n+nine\n";
    let message = err_text(prepare_edit(&args("a.txt", patch), &root));
    assert!(message.contains("hunk 2 of 2"), "{message}");
    assert!(message.contains("     7| 7"), "{message}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("a.txt"))
            .ok()
            .as_deref(),
        Some("1\n2\n3\n4\n5\n6\n7\n8\n")
    );
}

#[test]
fn header_paths_must_match() {
    let (dir, root) = setup();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap_or_else(|e| panic!("{e}"));
    let message = err_text(prepare_edit(
        &args("a.txt", "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n"),
        &root,
    ));
    assert!(message.contains("names `a/b.txt`"), "{message}");
    // Bare paths and headerless patches are fine.
    assert!(
        prepare_edit(
            &args("a.txt", "--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-x\n+y\n"),
            &root
        )
        .is_ok()
    );
    assert!(prepare_edit(&args("a.txt", "@@ -1 +1 @@\n-x\n+y\n"), &root).is_ok());
}

#[test]
fn refuses_git_dir_binary_and_symlinks_and_escapes() {
    let (dir, root) = setup();
    std::fs::create_dir(dir.path().join(".git")).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join(".git/config"), "x\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join("bin.dat"), b"a\0b\n").unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("/etc", dir.path().join("etc")).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink("/etc/hostname", dir.path().join("host"))
        .unwrap_or_else(|e| panic!("{e}"));
    let patch = |p: &str| format!("--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-x\n+y\n");
    assert!(
        err_text(prepare_edit(
            &args(".git/config", &patch(".git/config")),
            &root
        ))
        .contains("inside .git")
    );
    assert!(err_text(prepare_edit(&args("bin.dat", &patch("bin.dat")), &root)).contains("binary"));
    assert!(err_text(prepare_edit(&args("host", &patch("host")), &root)).contains("symlink"));
    assert!(
        err_text(prepare_edit(
            &args("etc/hostname", &patch("etc/hostname")),
            &root
        ))
        .contains("outside the workspace")
    );
    let create_through_link = "--- /dev/null\n+++ b/etc/evil\n@@ -0,0 +1 @@\n+x\n";
    assert!(
        err_text(prepare_edit(&args("etc/evil", create_through_link), &root))
            .contains("outside the workspace")
    );
    assert!(
        err_text(prepare_edit(&args("../x", &patch("../x")), &root))
            .contains("outside the workspace")
    );
    assert!(
        err_text(prepare_edit(
            &args("/etc/passwd", &patch("/etc/passwd")),
            &root
        ))
        .contains("absolute")
    );
    assert!(!Path::new("/etc/evil").exists());
}

#[test]
fn creation_of_an_existing_file_and_edit_of_a_missing_one_are_refused() {
    let (dir, root) = setup();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap_or_else(|e| panic!("{e}"));
    let message = err_text(prepare_edit(
        &args("a.txt", "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+y\n"),
        &root,
    ));
    assert!(message.contains("already exists"), "{message}");
    let message = err_text(prepare_edit(
        &args("b.txt", "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n"),
        &root,
    ));
    assert!(
        message.contains("does not exist") && message.contains("/dev/null"),
        "{message}"
    );
}

#[test]
fn mode_is_kept_and_stale_preparations_are_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, root) = setup();
    let file = dir.path().join("run.sh");
    std::fs::write(&file, "echo 1\n").unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{e}"));
    let edit = prepare_edit(&args("run.sh", "@@ -1 +1 @@\n-echo 1\n+echo 2\n"), &root)
        .unwrap_or_else(|e| panic!("{e}"));
    apply_edit(&edit, &root).unwrap_or_else(|e| panic!("{e}"));
    let mode = std::fs::metadata(&file)
        .map(|m| m.permissions().mode() & 0o777)
        .ok();
    assert_eq!(mode, Some(0o755));
    // Applying the same preparation again: the file no longer holds `before`.
    let message = apply_edit(&edit, &root)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        message.contains("changed after the edit was prepared"),
        "{message}"
    );
}

#[test]
fn a_deletion_must_remove_every_line() {
    let (dir, root) = setup();
    std::fs::write(dir.path().join("a.txt"), "x\ny\n").unwrap_or_else(|e| panic!("{e}"));
    let message = err_text(prepare_edit(
        &args("a.txt", "--- a/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"),
        &root,
    ));
    assert!(message.contains("leaves 1 lines"), "{message}");
}

#[test]
fn the_result_counts_added_and_removed_lines_without_headers() {
    assert_eq!(count_changes("--- a\n+++ b\n-x\n+y\n+z\n"), (2, 1));
    let (dir, root) = setup();
    std::fs::write(dir.path().join("a.txt"), "x\n").unwrap_or_else(|e| panic!("{e}"));
    let edit = prepare_edit(
        &args(
            "a.txt",
            "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1,2 @@\n-x\n+y\n+z\n",
        ),
        &root,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let output = edit_output(&edit);
    assert_eq!(output.summary, "+2 -1");
    assert_eq!(output.content, "Applied the patch to a.txt: +2 -1 lines.");
    assert_eq!(output.changed_files, ["a.txt"]);
}

#[test]
fn refuses_paths_git_refuses() {
    let (dir, root) = setup();
    for path in [
        ".GIT/hooks/pre-commit",
        "sub/.git/config",
        ".git./config",
        "git~1/config",
        ".g\u{200c}it/hooks/x",
    ] {
        let create = format!("--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+x\n");
        let message = err_text(prepare_edit(&args(path, &create), &root));
        assert!(message.contains("a path git refuses"), "{path}: {message}");
    }
    assert_eq!(
        std::fs::read_dir(dir.path()).map(|d| d.count()).ok(),
        Some(0),
        "nothing was written"
    );
    let fine = "--- /dev/null\n+++ b/.github/x.yml\n@@ -0,0 +1 @@\n+x\n";
    assert!(prepare_edit(&args(".github/x.yml", fine), &root).is_ok());
}
