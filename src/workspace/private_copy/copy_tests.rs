#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::workspace::{CheckpointStore, ExcludeSet, Fingerprinter};
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};

/// A source repository with small, empty, executable, duplicate, large
/// (past the one-read size), sparse and over-the-limit files, a symlink and
/// an excluded directory.
fn source() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("pkg/deep/er")).expect("mkdir");
    std::fs::create_dir_all(src.join("target")).expect("mkdir");
    std::fs::write(src.join("a.txt"), b"one\ntwo\n").expect("write");
    std::fs::write(src.join("same.txt"), b"one\ntwo\n").expect("write");
    std::fs::write(src.join("empty"), b"").expect("write");
    std::fs::write(src.join("pkg/deep/er/x.py"), b"x = 1\n").expect("write");
    std::fs::write(src.join("run.sh"), b"#!/bin/sh\n").expect("write");
    std::fs::set_permissions(src.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let large: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(src.join("pkg/large.bin"), &large).expect("write");
    let holey = std::fs::File::create(src.join("holey.bin")).expect("create");
    use std::os::unix::fs::FileExt;
    holey.write_all_at(b"head", 0).expect("head");
    holey.write_all_at(b"tail", 3 << 20).expect("tail");
    drop(holey);
    std::fs::write(src.join("over.bin"), vec![7u8; 5 << 20]).expect("write");
    std::fs::write(src.join("target/out.o"), b"object\n").expect("write");
    symlink("a.txt", src.join("link")).expect("symlink");
    git2::Repository::init(&src).expect("init");
    (tmp, src)
}

const LIMIT: u64 = 4 << 20;

fn copy(src: &Path, dest: &Path, owner: Option<(u32, u32)>) -> PrivateWorkspace {
    PrivateWorkspace::create_limited(
        src,
        dest,
        owner,
        &SecretPaths::default(),
        LIMIT,
        &mut |_| {},
    )
    .expect("copy")
}

fn store(dir: &Path, ws: &Path, excludes: ExcludeSet) -> CheckpointStore {
    CheckpointStore::open(dir, ws, excludes)
        .expect("open store")
        .with_max_file_bytes(LIMIT)
}

fn full_scan(ws: &Path, excludes: ExcludeSet) -> crate::workspace::Snapshot {
    Fingerprinter::new(ws, excludes)
        .with_max_file_bytes(LIMIT)
        .scan()
        .expect("scan")
}

#[test]
fn the_single_pass_copy_gives_the_baseline_a_full_scan_gives() {
    let (tmp, src) = source();
    let dest = tmp.path().join("ws");
    let owner = rustix::process::geteuid()
        .is_root()
        .then_some((10001, 10001));
    let mut ws = copy(&src, &dest, owner);

    // The workspace holds the source's bytes and modes.
    for rel in [
        "a.txt",
        "same.txt",
        "empty",
        "pkg/deep/er/x.py",
        "run.sh",
        "pkg/large.bin",
        "holey.bin",
        "over.bin",
        "target/out.o",
    ] {
        let (a, b) = (src.join(rel), dest.join(rel));
        assert_eq!(
            std::fs::read(&a).expect("src"),
            std::fs::read(&b).expect("copy"),
            "{rel}"
        );
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o111 != 0;
        assert_eq!(mode(&a), mode(&b), "{rel}");
        if let Some((uid, gid)) = owner {
            let m = std::fs::metadata(&b).expect("stat");
            assert_eq!((m.uid(), m.gid()), (uid, gid), "{rel}");
        }
    }
    if let Some((uid, _)) = owner {
        for rel in [
            "",
            "pkg",
            "pkg/deep",
            "pkg/deep/er",
            "link",
            ".git",
            ".git/objects/pack",
        ] {
            let m = std::fs::symlink_metadata(dest.join(rel)).expect("lstat");
            assert_eq!(m.uid(), uid, "{rel}");
        }
    }
    let sparse = std::fs::metadata(dest.join("holey.bin")).expect("stat");
    assert!(sparse.blocks() * 512 < 1 << 20, "holes stay holes");

    // The copy knows every committed file, and nothing over the limit.
    let facts = ws.take_baseline_facts();
    assert_eq!(facts.0.len(), 8, "{facts:?}");
    assert!(!facts.0.contains_key(b"over.bin".as_slice()));
    assert!(ws.take_baseline_facts().0.is_empty(), "handed over once");

    for excludes in [ExcludeSet::none(), ExcludeSet::default()] {
        let full = full_scan(&dest, excludes.clone());
        assert_eq!(
            full.rehashed,
            if excludes == ExcludeSet::none() { 8 } else { 7 }
        );

        // Primed: no file is read, and the result is the full scan's.
        let mut scanner = Fingerprinter::new(&dest, excludes.clone()).with_max_file_bytes(LIMIT);
        scanner.prime_next_scan(facts.0.clone());
        let primed = scanner.scan().expect("scan");
        assert_eq!(primed.rehashed, 0);
        assert_eq!(primed.fingerprint, full.fingerprint);
        assert_eq!(primed.entries, full.entries);
    }

    // The baseline checkpoint of a store that adopts the copy: the full
    // scan's fingerprint and tree, which is the copy's own baseline tree.
    // (Not given away: libgit2 opens only a repository of its own user.)
    let dest = tmp.path().join("ws2");
    let mut ws_primed = copy(&src, &dest, None);
    let primed_dir = tmp.path().join("primed.git");
    let mut primed = store(&primed_dir, &dest, ExcludeSet::none());
    primed.adopt_baseline(&mut ws_primed).expect("adopt");
    let base = primed.create("baseline").expect("baseline");
    let plain_dir = tmp.path().join("plain.git");
    let mut plain = store(&plain_dir, &dest, ExcludeSet::none());
    plain.adopt_pack(ws_primed.baseline_pack()).expect("adopt");
    let full = plain.create("baseline").expect("baseline");
    assert_eq!(base.fingerprint, full.fingerprint);
    assert_eq!(
        base.fingerprint,
        full_scan(&dest, ExcludeSet::none()).fingerprint
    );
    let tree = primed.tree_of(base.id).expect("tree");
    assert_eq!(tree, plain.tree_of(full.id).expect("tree"));
    let repo = Repository::open(&dest).expect("open");
    let own = repo
        .find_commit(ws_primed.baseline())
        .expect("commit")
        .tree_id();
    assert_eq!(tree, own);
    // Every blob the checkpoint names is in the store.
    let store_repo = Repository::open_bare(&primed_dir).expect("open");
    store_repo
        .find_tree(tree)
        .expect("tree")
        .walk(git2::TreeWalkMode::PreOrder, |_, e| {
            assert!(
                store_repo.find_object(e.id(), None).is_ok(),
                "{:?}",
                e.name()
            );
            git2::TreeWalkResult::Ok
        })
        .expect("walk");
}

#[test]
fn the_copys_facts_serve_the_next_scan_only_and_only_while_they_hold() {
    let (tmp, src) = source();
    let dest = tmp.path().join("ws");
    let mut ws = copy(&src, &dest, None);
    let facts = ws.take_baseline_facts();

    // Changed between the copy and the scan (never so in a run): read.
    std::fs::write(dest.join("a.txt"), b"ONE\ntwo\n").expect("write");
    let mut scanner = Fingerprinter::new(&dest, ExcludeSet::default()).with_max_file_bytes(LIMIT);
    scanner.prime_next_scan(facts.0);
    let first = scanner.scan().expect("scan");
    assert_eq!(first.rehashed, 1);
    assert_eq!(
        first.fingerprint,
        full_scan(&dest, ExcludeSet::default()).fingerprint
    );
    // Recorded as if this scan had hashed them: recent, so never trusted.
    for (path, hash) in scanner.cache().entries() {
        assert!(hash.recorded_ns < i64::MAX, "{path:?}");
        assert!(!hash.is_valid_for(&hash.key), "{path:?}");
    }

    // Changed again within the same second, same size: seen.
    std::fs::write(dest.join("same.txt"), b"one\nTWO\n").expect("write");
    let second = scanner.scan().expect("scan");
    assert_ne!(second.fingerprint, first.fingerprint);
    assert_eq!(
        second.fingerprint,
        full_scan(&dest, ExcludeSet::default()).fingerprint
    );
    assert!(second.rehashed >= 1);
}

/// Every directory under `dir`, `.git` left out.
fn dirs_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let path = entry.path();
        if entry.file_type().expect("type").is_dir() && entry.file_name() != ".git" {
            out.push(path.clone());
            dirs_under(&path, out);
        }
    }
}

#[test]
fn directories_are_given_to_the_sandbox_only_once_the_copy_is_done() {
    if !rustix::process::geteuid().is_root() {
        // Nothing is given away without root; the copy is then the
        // caller's alone.
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    for i in 0..40 {
        let dir = src.join(format!("d{}/e{}", i % 7, i % 3));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n")).expect("write");
    }
    git2::Repository::init(&src).expect("init");
    let dest = tmp.path().join("ws");
    let mut seen_during = 0;
    let ws = PrivateWorkspace::create_with_workers(
        &src,
        &dest,
        Some((10001, 10001)),
        &SecretPaths::default(),
        u64::MAX,
        &mut |_| {
            let mut dirs = Vec::new();
            if dest.is_dir() {
                dirs_under(&dest, &mut dirs);
            }
            for dir in &dirs {
                let m = std::fs::symlink_metadata(dir).expect("lstat");
                assert_eq!(m.uid(), 0, "{} given away during the copy", dir.display());
            }
            seen_during += dirs.len();
        },
        1,
    )
    .expect("copy");
    assert!(
        seen_during > 0,
        "the copy was watched while it made directories"
    );
    let mut dirs = Vec::new();
    dirs_under(ws.path(), &mut dirs);
    assert_eq!(dirs.len(), 7 + 21);
    for dir in dirs.iter().chain([&ws.path().to_path_buf()]) {
        let m = std::fs::symlink_metadata(dir).expect("lstat");
        assert_eq!((m.uid(), m.gid()), (10001, 10001), "{}", dir.display());
    }
}

#[test]
fn only_plain_readable_files_the_copy_takes_count_as_copied_as_they_are() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("docs")).expect("mkdir");
    git2::Repository::init(&src).expect("init");
    std::fs::write(src.join("AGENTS.md"), "plain").expect("write");
    std::fs::write(src.join(".gitignore"), "ignored.md\n").expect("write");
    std::fs::write(src.join("ignored.md"), "ignored").expect("write");
    std::fs::write(src.join("docs/real.md"), "behind a link").expect("write");
    symlink(".git/config", src.join("CLAUDE.md")).expect("symlink");
    symlink("docs", src.join("linked")).expect("symlink");
    std::fs::write(src.join("unreadable.md"), "x").expect("write");
    std::fs::set_permissions(
        src.join("unreadable.md"),
        std::fs::Permissions::from_mode(0o200),
    )
    .expect("chmod");
    let as_is = |paths: &[&str]| {
        let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
        copied_as_they_are(&src, &paths, &SecretPaths::default())
    };
    assert!(as_is(&[
        "AGENTS.md",
        "missing.md",
        "docs/real.md",
        "nope/x.md"
    ]));
    for refused in [
        "CLAUDE.md",
        "linked/real.md",
        "ignored.md",
        "unreadable.md",
        "docs",
    ] {
        assert!(!as_is(&["AGENTS.md", refused]), "{refused}");
    }
    let secrets = SecretPaths::default();
    std::fs::write(src.join(".env"), "KEY=1").expect("write");
    assert!(
        !copied_as_they_are(&src, &[".env".to_string()], &secrets),
        "a credential path"
    );
}
