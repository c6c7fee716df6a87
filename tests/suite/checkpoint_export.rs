//! What goes into a workspace and what comes out of it as a patch (no
//! Docker): credential files left out of the copy and refused by the patch,
//! unreadable files refused by name, names git refuses never exported, and
//! `changed_files` always the exact list of the patch's paths.

use crate::support;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use minicoder::workspace::{
    CheckpointStore, ExcludeSet, LeftOut, PrivateWorkspace, SecretPaths, WorkspaceError,
    unquote_path,
};

fn left(path: &str, reason: &str) -> LeftOut {
    LeftOut {
        path: path.to_string(),
        reason: reason.to_string(),
    }
}

fn source_with(files: &[(&str, &[u8])], untracked: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (rel, bytes) in files {
        support::write(&dir.path().join(rel), bytes);
    }
    support::git_commit_all(dir.path());
    for (rel, bytes) in untracked {
        support::write(&dir.path().join(rel), bytes);
    }
    dir
}

fn baseline_paths(workspace: &Path) -> BTreeSet<String> {
    let repo = git2::Repository::open(workspace).expect("workspace repo");
    let tree = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .expect("baseline tree");
    let mut out = BTreeSet::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob) {
            out.insert(format!("{dir}{}", entry.name().unwrap_or("?")));
        }
        git2::TreeWalkResult::Ok
    })
    .expect("walk");
    out
}

#[test]
fn credential_files_are_left_out_tracked_or_not_and_listed() {
    let source = source_with(
        &[
            ("app.py", b"print(1)\n"),
            (".env.production", b"PROD_SECRET=x\n"),
            ("deploy/server.pem", b"pem\n"),
        ],
        &[
            (".npmrc", b"//r/:_authToken=t\n"),
            (".aws/credentials", b"[default]\n"),
            ("keys/id_ed25519", b"k\n"),
            (".kube/config", b"k\n"),
            ("ci/.docker/config.json", b"{}\n"),
            ("gcp/credentials.json", b"{}\n"),
            (".env.example", b"PROD_SECRET=\n"),
            ("notes.md", b"n\n"),
        ],
    );
    // A socket would refuse the run, but nothing under a credential
    // directory is looked at.
    std::fs::create_dir(source.path().join(".ssh")).expect("mkdir");
    let _agent = std::os::unix::net::UnixListener::bind(source.path().join(".ssh/agent.sock"))
        .expect("socket");
    let dest = tempfile::tempdir().expect("tempdir");
    let ws = dest.path().join("ws");
    let workspace = PrivateWorkspace::create(source.path(), &ws, None).expect("copy");
    let reason = "credential file";
    assert_eq!(
        workspace.left_out(),
        [
            left(".aws/credentials", reason),
            left(".env.production", reason),
            left(".kube/config", reason),
            left(".npmrc", reason),
            left("ci/.docker/config.json", reason),
            left("deploy/server.pem", reason),
            left("gcp/credentials.json", reason),
            left("keys/id_ed25519", reason),
        ]
    );
    for gone in workspace.left_out() {
        assert!(!ws.join(&gone.path).exists(), "{} was copied", gone.path);
    }
    assert_eq!(
        baseline_paths(&ws),
        BTreeSet::from([
            ".env.example".to_string(),
            "app.py".to_string(),
            "notes.md".to_string()
        ])
    );
}

#[test]
fn the_project_can_add_and_keep_credential_paths() {
    let source = source_with(
        &[
            (
                ".minicoder.json",
                br#"{"secret_paths": ["!.env.test", "private/"]}"#,
            ),
            (".env.test", b"X=1\n"),
            (".env", b"X=2\n"),
            ("private/notes.txt", b"p\n"),
        ],
        &[],
    );
    let config = minicoder::verify::load_config(source.path())
        .expect("valid config")
        .expect("present");
    let secrets = minicoder::verify::secret_paths(source.path(), Some(&config)).expect("patterns");
    let dest = tempfile::tempdir().expect("tempdir");
    let ws = dest.path().join("ws");
    let workspace =
        PrivateWorkspace::create_with(source.path(), &ws, None, &secrets).expect("copy");
    let paths: Vec<&str> = workspace
        .left_out()
        .iter()
        .map(|l| l.path.as_str())
        .collect();
    assert_eq!(paths, [".env", "private/notes.txt"]);
    assert!(ws.join(".env.test").exists());

    let bad = source_with(
        &[(".minicoder.json", br#"{"secret_paths": ["ok", ""]}"#)],
        &[],
    );
    let err = minicoder::verify::load_config(bad.path())
        .expect_err("an empty pattern is refused")
        .to_string();
    assert!(err.contains("secret_paths"), "{err}");
}

#[test]
fn a_file_its_owner_cannot_read_is_refused_by_name_even_for_root() {
    for mode in [0o000, 0o200, 0o044] {
        let source = source_with(&[("ok.txt", b"x\n"), ("locked.txt", b"secret\n")], &[]);
        let locked = source.path().join("locked.txt");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(mode)).expect("chmod");
        let dest = tempfile::tempdir().expect("tempdir");
        let err = PrivateWorkspace::create(source.path(), &dest.path().join("ws"), None)
            .expect_err("refused");
        assert!(
            matches!(&err, WorkspaceError::Unreadable { path, .. } if path == Path::new("locked.txt")),
            "{err}"
        );
        assert!(err.to_string().contains("`locked.txt`"), "{err}");
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
}

#[test]
fn a_source_path_git_refuses_is_left_out() {
    let source = source_with(&[("ok.txt", b"x\n")], &[(".GIT/x", b"planted\n")]);
    let dest = tempfile::tempdir().expect("tempdir");
    let ws = dest.path().join("ws");
    let workspace = PrivateWorkspace::create(source.path(), &ws, None).expect("copy");
    // libgit2 does not even list it; were it listed, it would be left out.
    assert!(
        workspace
            .left_out()
            .iter()
            .all(|l| l == &left(".GIT/x", "a path git refuses")),
        "{:?}",
        workspace.left_out()
    );
    assert!(!ws.join(".GIT").exists());
    assert!(ws.join("ok.txt").exists());
}

const AWKWARD: [&[u8]; 13] = [
    b"new\nline.txt",
    b"esc\x1b[2J.txt",
    "rlo\u{202e}txt.py".as_bytes(),
    b"tab\there.txt",
    b"dq\"uote.txt",
    b"sq'uote.txt",
    b"bad\xff\xfeutf8.txt",
    b"back\\slash.txt",
    b"sp ace b/x y.txt",
    "caf\u{e9}.txt".as_bytes(),
    b"-dash.txt",
    b"del\x7f.txt",
    b"cr\rname.txt",
];

/// The paths named by a patch's `---`/`+++` lines.
fn patch_paths(patch: &str) -> BTreeSet<Vec<u8>> {
    patch
        .lines()
        .filter_map(|l| l.strip_prefix("+++ ").or_else(|| l.strip_prefix("--- ")))
        .filter(|p| *p != "/dev/null")
        .map(|p| {
            let bytes = unquote_path(p).expect("well quoted");
            bytes[2..].to_vec()
        })
        .collect()
}

fn workspace_and_store() -> (
    tempfile::TempDir,
    tempfile::TempDir,
    PrivateWorkspace,
    CheckpointStore,
    git2::Oid,
) {
    let source = source_with(
        &[
            ("src/a.py", b"x = 1\n"),
            ("gone.txt", b"bye\n"),
            ("keep.txt", b"k\n"),
        ],
        &[],
    );
    let state = support::state_dir();
    let workspace =
        PrivateWorkspace::create(source.path(), &state.path().join("ws"), None).expect("copy");
    let mut store = CheckpointStore::open(
        &state.path().join("store"),
        workspace.path(),
        ExcludeSet::default(),
    )
    .expect("store");
    let baseline = store.create("baseline").expect("baseline").id;
    (source, state, workspace, store, baseline)
}

#[test]
fn changed_files_are_the_patch_paths_losslessly() {
    let (source, _state, workspace, mut store, baseline) = workspace_and_store();
    let ws = workspace.path();
    std::fs::write(ws.join("src/a.py"), "x = 2\n").expect("write");
    std::fs::write(ws.join("new.txt"), "n\n").expect("write");
    std::fs::remove_file(ws.join("gone.txt")).expect("rm");
    let plain = store.export_patch(baseline).expect("export");
    assert_eq!(plain.changed_files, ["gone.txt", "new.txt", "src/a.py"]);
    assert!(plain.refused.is_empty());

    for name in AWKWARD {
        let path = ws.join(OsStr::from_bytes(name));
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, "x\n").expect("write");
    }
    // Inert, like .git itself: never in a checkpoint, never in the patch.
    for planted in [
        ".GIT/hooks/pre-commit",
        "sub/.git/config",
        ".git./config",
        "git~1/x",
    ] {
        support::write(&ws.join(planted), b"#!/bin/sh\n");
    }
    let export = store.export_patch(baseline).expect("export");
    let listed: BTreeSet<Vec<u8>> = export
        .changed_files
        .iter()
        .map(|p| unquote_path(p).expect("well quoted"))
        .collect();
    assert_eq!(listed.len(), export.changed_files.len(), "each path once");
    let mut want: BTreeSet<Vec<u8>> = AWKWARD.iter().map(|n| n.to_vec()).collect();
    for plain in ["gone.txt", "new.txt", "src/a.py"] {
        want.insert(plain.as_bytes().to_vec());
    }
    assert_eq!(listed, want);
    assert_eq!(patch_paths(&export.patch), want);
    for entry in &export.changed_files {
        assert!(
            entry.bytes().all(|b| (0x20..0x7f).contains(&b)),
            "printable: {entry}"
        );
    }
    for planted in [".GIT", "sub/.git", ".git.", "git~1"] {
        assert!(!export.patch.contains(planted), "{planted} in the patch");
    }

    let patch_file = tempfile::NamedTempFile::new().expect("temp");
    std::fs::write(patch_file.path(), &export.patch).expect("write");
    let out = std::process::Command::new("git")
        .args(["apply", "--check"])
        .arg(patch_file.path())
        .current_dir(source.path())
        .output()
        .expect("git apply");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_patch_refuses_credential_files_the_run_created() {
    let (_source, _state, workspace, mut store, baseline) = workspace_and_store();
    let ws = workspace.path();
    std::fs::write(ws.join(".env"), "PROD_SECRET=made-by-a-command\n").expect("write");
    support::write(&ws.join("deploy/.npmrc"), b"//r/:_authToken=x\n");
    std::fs::write(ws.join("keep.txt"), "changed\n").expect("write");
    let export = store.export_patch(baseline).expect("export");
    assert_eq!(export.refused, [".env", "deploy/.npmrc"]);
    assert_eq!(export.changed_files, ["keep.txt"]);
    assert!(
        !export.patch.contains("made-by-a-command"),
        "{}",
        export.patch
    );
    assert!(!export.patch.contains(".npmrc"), "{}", export.patch);
}

#[test]
fn a_checkpoint_holding_a_credential_file_cannot_be_exported_from() {
    let (_source, state, workspace, store, _) = workspace_and_store();
    drop(store);
    let ws = workspace.path();
    std::fs::write(ws.join(".env"), "X=1\n").expect("write");
    let lenient = SecretPaths::with_overrides(&["!.env".to_string()]).expect("patterns");
    let mut store = CheckpointStore::open(&state.path().join("store"), ws, ExcludeSet::default())
        .expect("store")
        .with_secret_paths(lenient);
    let with_env = store.create("with .env").expect("checkpoint").id;
    drop(store);
    let mut strict = CheckpointStore::open(&state.path().join("store"), ws, ExcludeSet::default())
        .expect("store");
    // Unchanged, it is not in the patch at all.
    std::fs::write(ws.join("keep.txt"), "changed\n").expect("write");
    let export = strict.export_patch(with_env).expect("export");
    assert_eq!(export.changed_files, ["keep.txt"]);
    // Changed, the patch would carry it: refused.
    std::fs::write(ws.join(".env"), "X=2\n").expect("write");
    let err = strict
        .export_patch(with_env)
        .expect_err("the old side holds .env");
    assert!(
        matches!(&err, WorkspaceError::RefusedPath { path } if path == ".env"),
        "{err}"
    );
}
