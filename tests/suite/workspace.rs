//! Integration tests of the private workspace: copy, confinement,
//! fingerprints and checkpoints, on real repositories made with `git`.

use crate::support;

use support::{git, write};

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;

use minicoder::workspace::{
    CheckpointStore, ExcludeSet, Fingerprinter, PrivateWorkspace, WorkspaceError, WorkspaceRoot,
    fingerprint,
};
use sha2::{Digest, Sha256};

/// A source repository with tracked, untracked, ignored and special cases.
fn source_repo() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).expect("mkdir");
    git(&src, &["init", "-q"]);
    write(&src.join(".gitignore"), b"*.log\nbuild/\n");
    write(&src.join("README.md"), b"# demo\n");
    write(&src.join("pkg/mod.py"), b"def f():\n    return 1\n");
    write(&src.join("run.sh"), b"#!/bin/sh\necho hi\n");
    std::fs::set_permissions(src.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    symlink("pkg/mod.py", src.join("mod-link")).expect("symlink");
    write(&src.join("gone.txt"), b"deleted later\n");
    write(&src.join("forced.log"), b"tracked although ignored\n");
    git(&src, &["add", "-A"]);
    git(&src, &["add", "-f", "forced.log"]);
    git(&src, &["commit", "-q", "-m", "init"]);
    // Working-tree state that differs from the index:
    write(&src.join("pkg/mod.py"), b"def f():\n    return 2\n");
    std::fs::remove_file(src.join("gone.txt")).expect("rm");
    write(&src.join("notes/new.txt"), b"untracked\n");
    write(&src.join("debug.log"), b"ignored\n");
    write(&src.join("build/out.bin"), b"ignored dir\n");
    (tmp, src)
}

/// Hash of every name, kind, mode, mtime and byte under `dir`, `.git` included.
fn tree_hash(dir: &Path) -> String {
    let mut h = Sha256::new();
    let mut stack = vec![dir.to_path_buf()];
    let mut all = BTreeMap::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            let m = std::fs::symlink_metadata(&p).expect("lstat");
            let body = if m.is_dir() {
                stack.push(p.clone());
                Vec::new()
            } else if m.file_type().is_symlink() {
                std::fs::read_link(&p)
                    .expect("readlink")
                    .into_os_string()
                    .into_encoded_bytes()
            } else {
                std::fs::read(&p).expect("read")
            };
            all.insert(p, (m.mode(), m.mtime(), m.mtime_nsec(), body));
        }
    }
    for (p, v) in all {
        h.update(format!("{}\0{:?}\0", p.display(), (v.0, v.1, v.2)).as_bytes());
        h.update(Sha256::digest(&v.3));
    }
    hex::encode(h.finalize())
}

fn fp(dir: &Path) -> minicoder::workspace::Fingerprint {
    fingerprint(dir, &ExcludeSet::default())
        .expect("fingerprint")
        .fingerprint
}

#[test]
fn copies_tracked_and_untracked_not_ignored_files_from_the_working_tree() {
    let (tmp, src) = source_repo();
    let dest = tmp.path().join("ws");
    let ws = PrivateWorkspace::create(&src, &dest, None).expect("create");

    assert_eq!(
        std::fs::read(dest.join("pkg/mod.py")).expect("read"),
        b"def f():\n    return 2\n"
    );
    assert_eq!(
        std::fs::read(dest.join("notes/new.txt")).expect("read"),
        b"untracked\n"
    );
    assert_eq!(
        std::fs::read(dest.join("forced.log")).expect("read"),
        b"tracked although ignored\n"
    );
    assert!(!dest.join("debug.log").exists());
    assert!(!dest.join("build").exists());
    assert!(!dest.join("gone.txt").exists());
    let mode = std::fs::metadata(dest.join("run.sh"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
    let readme = std::fs::metadata(dest.join("README.md"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(readme & 0o111, 0);
    assert_eq!(
        std::fs::read_link(dest.join("mod-link")).expect("link"),
        PathBuf::from("pkg/mod.py")
    );

    // A fresh repository with exactly one baseline commit of the copy.
    let repo = git2::Repository::open(&dest).expect("open copy");
    let head = repo.head().expect("head").peel_to_commit().expect("commit");
    assert_eq!(head.id(), ws.baseline());
    assert_eq!(head.parent_count(), 0);
    assert_eq!(head.author().email().ok(), Some("minicoder@localhost"));
    let tree = head.tree().expect("tree");
    for p in [
        "README.md",
        "pkg/mod.py",
        "notes/new.txt",
        "run.sh",
        "mod-link",
        ".gitignore",
        "forced.log",
    ] {
        assert!(
            tree.get_path(Path::new(p)).is_ok(),
            "{p} missing from baseline"
        );
    }
    assert!(tree.get_path(Path::new("debug.log")).is_err());
    let mut walk = repo.revwalk().expect("revwalk");
    walk.push_head().expect("push");
    assert_eq!(walk.count(), 1, "source history leaked into the copy");
    let statuses = repo.statuses(None).expect("status");
    assert_eq!(
        statuses.iter().filter(|s| !s.status().is_ignored()).count(),
        0,
        "copy is dirty"
    );
    // Git itself reads every object of the baseline and finds it sound.
    let fsck = Command::new("git")
        .args(["fsck", "--strict", "--no-dangling"])
        .current_dir(&dest)
        .output()
        .expect("git fsck");
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    let status = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&dest)
        .output()
        .expect("git status");
    assert!(status.status.success());
    assert_eq!(
        String::from_utf8_lossy(&status.stdout),
        "",
        "git sees changes"
    );
}

#[test]
fn the_source_is_byte_for_byte_unchanged() {
    let (tmp, src) = source_repo();
    let before = tree_hash(&src);
    PrivateWorkspace::create(&src, &tmp.path().join("ws"), Some((10001, 10001))).expect("create");
    assert_eq!(tree_hash(&src), before);
}

#[test]
fn workspace_is_owned_by_the_sandbox_user_when_root() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let (tmp, src) = source_repo();
    let dest = tmp.path().join("ws");
    let ws = PrivateWorkspace::create(&src, &dest, Some((10001, 10001))).expect("create");
    for p in [
        "",
        "README.md",
        "pkg",
        "mod-link",
        ".git",
        ".git/HEAD",
        ".git/objects",
    ] {
        let m = std::fs::symlink_metadata(dest.join(p)).expect("lstat");
        assert_eq!((m.uid(), m.gid()), (10001, 10001), "{p}");
    }
    ws.root()
        .expect("root")
        .write(Path::new("added.txt"), b"x")
        .expect("write");
    assert_eq!(
        std::fs::metadata(dest.join("added.txt"))
            .expect("stat")
            .uid(),
        10001
    );
}

fn refused(src: &Path, dest: &Path) -> (WorkspaceError, String) {
    let err = PrivateWorkspace::create(src, dest, None).expect_err("must refuse");
    let msg = err.to_string();
    (err, msg)
}

#[test]
fn refuses_symlinks_leading_outside() {
    for (name, target) in [
        ("abs-link", "/etc/passwd"),
        ("up-link", "../outside"),
        ("sneaky", "pkg/../../x"),
    ] {
        let (tmp, src) = source_repo();
        symlink(target, src.join(name)).expect("symlink");
        let (err, msg) = refused(&src, &tmp.path().join("ws"));
        assert!(
            matches!(err, WorkspaceError::OutsideSymlink { .. }),
            "{msg}"
        );
        assert!(msg.contains(name), "{msg}");
    }
    // Lexically inside, physically outside: `d -> .`, then `d/d/../..`.
    let (tmp, src) = source_repo();
    symlink(".", src.join("d")).expect("symlink");
    symlink("d/d/../..", src.join("tricky")).expect("symlink");
    let (err, msg) = refused(&src, &tmp.path().join("ws"));
    assert!(
        matches!(err, WorkspaceError::OutsideSymlink { .. }) && msg.contains("tricky"),
        "{msg}"
    );
}

#[test]
fn submodules_are_copied_as_plain_files_and_other_nested_repositories_refused() {
    // A submodule that is not checked out has nothing in the working tree.
    let (tmp, src) = source_repo();
    let sha = "0123456789abcdef0123456789abcdef01234567";
    git(
        &src,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{sha},vendor/lib"),
        ],
    );
    let ws = PrivateWorkspace::create(&src, &tmp.path().join("ws"), None).expect("create");
    assert!(!ws.path().join("vendor/lib").exists());

    // A checked-out one: its tracked files and its untracked ones that it
    // does not ignore, as plain files, and never its `.git`.
    let (tmp, src) = source_repo();
    let lib = src.join("vendor/lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    git(&lib, &["init", "-q"]);
    write(&lib.join("clamp.c"), b"int clamp;\n");
    write(&lib.join(".gitignore"), b"*.o\n");
    git(&lib, &["add", "clamp.c", ".gitignore"]);
    git(
        &lib,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "lib",
        ],
    );
    write(&lib.join("notes.txt"), b"untracked\n");
    write(&lib.join("clamp.o"), b"ignored\n");
    let head = String::from_utf8(
        Command::new("git")
            .args(["rev-parse", "HEAD"])
            .current_dir(&lib)
            .output()
            .expect("rev-parse")
            .stdout,
    )
    .expect("utf-8");
    git(
        &src,
        &[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("160000,{},vendor/lib", head.trim()),
        ],
    );
    let ws = PrivateWorkspace::create(&src, &tmp.path().join("ws"), None).expect("create");
    let copied = ws.path().join("vendor/lib");
    assert_eq!(
        std::fs::read(copied.join("clamp.c")).expect("clamp.c"),
        b"int clamp;\n"
    );
    assert!(copied.join("notes.txt").is_file());
    assert!(
        !copied.join("clamp.o").exists(),
        "what it ignores stays out"
    );
    assert!(!copied.join(".git").exists(), "its repository stays out");
    let status = Command::new("git")
        .args(["ls-files", "vendor/lib"])
        .current_dir(ws.path())
        .output()
        .expect("ls-files");
    let listed = String::from_utf8_lossy(&status.stdout);
    assert!(listed.contains("vendor/lib/clamp.c"), "{listed}");

    // An untracked repository that is no submodule is still refused.
    let (tmp, src) = source_repo();
    std::fs::create_dir(src.join("inner")).expect("mkdir");
    git(&src.join("inner"), &["init", "-q"]);
    write(&src.join("inner/file"), b"x");
    let (err, msg) = refused(&src, &tmp.path().join("ws"));
    assert!(
        matches!(err, WorkspaceError::Submodule { .. }) && msg.contains("inner"),
        "{msg}"
    );
}

#[test]
fn refuses_special_files() {
    let (tmp, src) = source_repo();
    let fifo = src.join("notes/pipe");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let (err, msg) = refused(&src, &tmp.path().join("ws"));
    assert!(matches!(err, WorkspaceError::SpecialFile { .. }), "{msg}");
    assert!(msg.contains("notes/pipe") && msg.contains("fifo"), "{msg}");

    // An ignored one is not copied, so it does not matter: also in an
    // ignored directory that holds a tracked file (and so is entered).
    let (tmp, src) = source_repo();
    write(&src.join("build/tracked/kept.txt"), b"forced\n");
    git(&src, &["add", "-f", "build/tracked/kept.txt"]);
    for pipe in ["build/pipe", "build/tracked/pipe"] {
        let status = Command::new("mkfifo")
            .arg(src.join(pipe))
            .status()
            .expect("mkfifo");
        assert!(status.success());
    }
    let status = Command::new("mkfifo")
        .arg(src.join("x.log"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    PrivateWorkspace::create(&src, &tmp.path().join("ws"), None).expect("ignored fifos are fine");
}

#[test]
fn refuses_a_non_empty_destination() {
    let (tmp, src) = source_repo();
    let dest = tmp.path().join("ws");
    write(&dest.join("keep"), b"x");
    let (err, _) = refused(&src, &dest);
    assert!(matches!(err, WorkspaceError::DestinationNotEmpty { .. }));
}

#[test]
fn fingerprint_tracks_changes_and_ignores_caches() {
    let (tmp, src) = source_repo();
    let dest = tmp.path().join("ws");
    PrivateWorkspace::create(&src, &dest, None).expect("create");
    let base = fp(&dest);
    assert_eq!(base, fp(&dest));
    write(
        &dest.join("pkg/__pycache__/mod.cpython-312.pyc"),
        b"bytecode",
    );
    write(&dest.join("node_modules/x/index.js"), b"js");
    write(&dest.join(".git/extra"), b"git internals");
    assert_eq!(fp(&dest), base, "caches and .git must not count");

    let mut seen = vec![base];
    let mut step = |f: &dyn Fn()| {
        f();
        let now = fp(&dest);
        assert!(!seen.contains(&now), "fingerprint did not change");
        seen.push(now);
    };
    step(&|| write(&dest.join("README.md"), b"# changed\n"));
    step(&|| {
        std::fs::set_permissions(
            dest.join("README.md"),
            std::fs::Permissions::from_mode(0o755),
        )
        .expect("chmod")
    });
    step(&|| write(&dest.join("brand/new.txt"), b"new"));
    step(&|| std::fs::remove_file(dest.join("notes/new.txt")).expect("rm"));
    step(&|| {
        std::fs::remove_file(dest.join("mod-link")).expect("rm");
        symlink("README.md", dest.join("mod-link")).expect("symlink");
    });
}

fn set_mtime(path: &Path, sec: i64, nsec: i64) {
    let t = rustix::fs::Timespec {
        tv_sec: sec,
        tv_nsec: nsec as _,
    };
    let times = rustix::fs::Timestamps {
        last_access: t,
        last_modification: t,
    };
    rustix::fs::utimensat(rustix::fs::CWD, path, &times, rustix::fs::AtFlags::empty())
        .expect("utimensat");
}

#[test]
fn incremental_fingerprint_equals_a_fresh_one() {
    let (tmp, src) = source_repo();
    let dest = tmp.path().join("ws");
    PrivateWorkspace::create(&src, &dest, None).expect("create");
    let mut f = Fingerprinter::new(&dest, ExcludeSet::default())
        .with_cache_file(tmp.path().join("cache"))
        .expect("cache");
    assert_eq!(f.scan().expect("scan").fingerprint, fp(&dest));

    // Same size, same mtime: only the racy rule can catch it.
    let file = dest.join("pkg/mod.py");
    let m = std::fs::metadata(&file).expect("stat");
    write(&file, b"def f():\n    return 3\n");
    set_mtime(&file, m.mtime(), m.mtime_nsec());
    assert_eq!(std::fs::metadata(&file).expect("stat").len(), m.len());
    let inc = f.scan().expect("scan").fingerprint;
    assert_eq!(inc, fp(&dest));

    write(&dest.join("a/b/c.txt"), b"deep");
    std::fs::remove_file(dest.join("README.md")).expect("rm");
    std::fs::set_permissions(dest.join("run.sh"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    // A fresh Fingerprinter loading the same cache file must agree too.
    let mut g = Fingerprinter::new(&dest, ExcludeSet::default())
        .with_cache_file(tmp.path().join("cache"))
        .expect("cache");
    assert!(!g.cache().is_empty());
    let inc = g.scan().expect("scan");
    assert_eq!(inc.fingerprint, fp(&dest));
    assert!(inc.rehashed >= 1);
    let parsed: minicoder::workspace::Fingerprint =
        inc.fingerprint.to_string().parse().expect("hex");
    assert_eq!(parsed, inc.fingerprint);
}

#[test]
fn checkpoint_round_trip_through_the_confined_root() {
    let (tmp, src) = source_repo();
    let dest = tmp.path().join("ws");
    let ws = PrivateWorkspace::create(&src, &dest, None).expect("create");
    let mut store = CheckpointStore::open(&tmp.path().join("cp.git"), &dest, ExcludeSet::default())
        .expect("store");
    let clean = store.create("baseline").expect("checkpoint");
    assert_eq!(clean.fingerprint, fp(&dest));

    let root = ws.root().expect("root");
    root.write(Path::new("pkg/mod.py"), b"def f():\n    return 42\n")
        .expect("edit");
    root.create_dir_all(Path::new("pkg/sub")).expect("mkdir");
    root.write(Path::new("pkg/sub/new.py"), b"x = 1\n")
        .expect("add");
    root.remove_file(Path::new("README.md")).expect("delete");
    let edited = store.create("edited").expect("checkpoint");
    assert_ne!(edited.fingerprint, clean.fingerprint);

    let list = store.list().expect("list");
    assert_eq!(
        list.iter().map(|c| c.label.as_str()).collect::<Vec<_>>(),
        ["baseline", "edited"]
    );
    let patch = store.diff(clean.id, edited.id).expect("diff");
    assert!(patch.contains("-    return 2\n+    return 42\n"), "{patch}");
    assert!(
        patch.contains("deleted file mode 100644") && patch.contains("a/README.md"),
        "{patch}"
    );
    assert!(
        patch.contains("new file mode 100644") && patch.contains("b/pkg/sub/new.py"),
        "{patch}"
    );

    store.restore(clean.id, &root).expect("restore");
    assert_eq!(fp(&dest), clean.fingerprint);
    assert!(!dest.join("pkg/sub").exists());
    store.restore(edited.id, &root).expect("restore forward");
    assert_eq!(fp(&dest), edited.fingerprint);

    store.mark_validated(clean.id).expect("validate");
    assert_eq!(
        store.validated().expect("validated").map(|c| c.id),
        Some(clean.id)
    );
    // The store lives outside the workspace; the workspace's own .git is untouched.
    let repo = git2::Repository::open(&dest).expect("open");
    assert_eq!(repo.head().expect("head").target(), Some(ws.baseline()));
}

#[test]
fn a_planted_root_symlink_cannot_reach_the_host() {
    let (tmp, src) = source_repo();
    let dest = tmp.path().join("ws");
    let ws = PrivateWorkspace::create(&src, &dest, None).expect("create");
    symlink("/", dest.join("root")).expect("ln -s / root");
    let root = ws.root().expect("root");
    let escape =
        |r: Result<(), WorkspaceError>| matches!(r, Err(WorkspaceError::PathEscape { .. }));
    assert!(escape(
        root.read(Path::new("root/etc/passwd"), 1 << 20).map(drop)
    ));
    assert!(escape(
        root.write(Path::new("root/tmp/minicoder-ws-test"), b"x")
    ));
    assert!(!Path::new("/tmp/minicoder-ws-test").exists());
    assert!(escape(
        root.read(Path::new("../src/README.md"), 1 << 20).map(drop)
    ));
    assert!(escape(
        root.read(Path::new("/etc/passwd"), 1 << 20).map(drop)
    ));
    // Checkpoint and restore of a workspace holding such a link stay inside.
    let mut store = CheckpointStore::open(&tmp.path().join("cp.git"), &dest, ExcludeSet::default())
        .expect("store");
    let cp = store.create("with link").expect("checkpoint");
    std::fs::remove_file(dest.join("root")).expect("rm");
    store
        .restore(cp.id, &WorkspaceRoot::open(&dest).expect("root"))
        .expect("restore");
    assert_eq!(
        std::fs::read_link(dest.join("root")).expect("link"),
        PathBuf::from("/")
    );
    assert_eq!(fp(&dest), cp.fingerprint);
}

#[test]
fn a_sparse_source_file_stays_sparse_and_one_over_the_limit_stays_out_of_the_baseline() {
    let (tmp, src) = source_repo();
    // Data, a 64 MB hole, data: sparse, and under the limit.
    let holey = std::fs::File::create(src.join("holey.bin")).expect("create");
    use std::os::unix::fs::FileExt;
    holey.write_all_at(b"head", 0).expect("head");
    holey.write_all_at(b"tail", 64 << 20).expect("tail");
    drop(holey);
    // 2 GB of hole: over the default per-file limit.
    let big = std::fs::File::create(src.join("disk.img")).expect("create");
    big.set_len(2 << 30).expect("truncate");
    drop(big);
    let dest = tmp.path().join("ws");
    let ws = PrivateWorkspace::create(&src, &dest, None).expect("create");

    let copy = std::fs::metadata(dest.join("holey.bin")).expect("copied");
    assert_eq!(copy.len(), (64 << 20) + 4);
    assert!(copy.blocks() * 512 < 1 << 20, "{} blocks", copy.blocks());
    let data = std::fs::read(dest.join("holey.bin")).expect("read");
    assert_eq!(&data[..4], b"head");
    assert_eq!(&data[64 << 20..], b"tail");
    let img = std::fs::metadata(dest.join("disk.img")).expect("copied");
    assert_eq!(img.len(), 2 << 30);
    assert!(img.blocks() * 512 < 1 << 20, "{} blocks", img.blocks());

    // The baseline holds the first, not the second, and git status is clean.
    let repo = git2::Repository::open(&dest).expect("open");
    let tree = repo
        .find_commit(ws.baseline())
        .expect("baseline")
        .tree()
        .expect("tree");
    assert!(tree.get_name("holey.bin").is_some());
    assert!(tree.get_name("disk.img").is_none());
    let status = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&dest)
        .output()
        .expect("git status");
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(!status.contains("disk.img"), "{status}");
}
