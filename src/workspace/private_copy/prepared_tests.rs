use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::time::Duration;

use super::*;
use crate::workspace::{CheckpointStore, ExcludeSet, PrivateWorkspace, SecretPaths};

fn settings() -> PrepareSettings {
    PrepareSettings {
        secrets: SecretPaths::default(),
        max_file_bytes: crate::workspace::DEFAULT_MAX_FILE_BYTES,
        owner: None,
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A committed source with tracked, untracked and ignored files, an
/// executable, a symlink and a credential file; old enough to be trusted.
fn source(root: &Path) -> std::path::PathBuf {
    let src = root.join("src");
    write(&src.join("README.md"), "readme\n");
    write(&src.join(".gitignore"), "build/\n*.log\n");
    write(&src.join("pkg/a.py"), "a = 1\n");
    write(&src.join("pkg/b.py"), "b = 2\n");
    write(&src.join("pkg/deep/c.py"), "c = 3\n");
    write(&src.join("run.sh"), "#!/bin/sh\n");
    std::fs::set_permissions(src.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    write(&src.join("build/out.bin"), "ignored\n");
    write(&src.join("notes.log"), "ignored\n");
    write(&src.join(".env"), "TOKEN=secret\n");
    symlink("pkg/a.py", src.join("link")).expect("symlink");
    for i in 0..40 {
        write(
            &src.join(format!("many/f{i:02}.txt")),
            &format!("file {i}\n"),
        );
    }
    let repo = git2::Repository::init(&src).expect("init");
    let mut index = repo.index().expect("index");
    for p in ["README.md", ".gitignore", "pkg/a.py", "pkg/b.py", "run.sh"] {
        index.add_path(Path::new(p)).expect("add");
    }
    index.write().expect("write index");
    write(&src.join("untracked.txt"), "not added\n");
    // Past the racy window: a source file is only trusted once older.
    std::thread::sleep(Duration::from_millis(2_100));
    src
}

/// Every file of a directory (`.git` aside): path → (mode, content or target).
fn listing(dir: &Path) -> BTreeMap<String, (u32, Vec<u8>)> {
    let mut out = BTreeMap::new();
    for entry in ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build()
        .flatten()
    {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(path).expect("lstat");
        let rel = path
            .strip_prefix(dir)
            .expect("inside")
            .display()
            .to_string();
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(path).expect("link");
            out.insert(
                rel,
                (0o120000, target.into_os_string().into_encoded_bytes()),
            );
        } else if meta.is_file() {
            out.insert(
                rel,
                (
                    meta.permissions().mode() & 0o777,
                    std::fs::read(path).expect("read"),
                ),
            );
        } else if meta.is_dir() && rel.is_empty() {
            continue;
        } else if meta.is_dir() {
            out.insert(format!("{rel}/"), (0, Vec::new()));
        }
    }
    out
}

fn baseline_tree(ws: &Path, commit: git2::Oid) -> git2::Oid {
    git2::Repository::open(ws)
        .and_then(|r| r.find_commit(commit).map(|c| c.tree_id()))
        .expect("baseline tree")
}

/// Takes the prepared copy into `dest`/`store` and checks it against a
/// fresh copy of the source made now.
fn take_and_compare(tmp: &Path, src: &Path, dir: &Path, label: &str) -> Taken {
    let dest = tmp.join(format!("ws-{label}"));
    std::fs::create_dir(&dest).expect("mkdir");
    let store = tmp.join(format!("store-{label}.git"));
    let taken = take(src, dir, &settings(), &dest, &store, Duration::ZERO)
        .unwrap_or_else(|e| panic!("not taken: {e:?}"));
    let fresh_dir = tmp.join(format!("fresh-{label}"));
    let fresh = PrivateWorkspace::create(src, &fresh_dir, None).expect("fresh copy");
    assert_eq!(
        listing(&dest),
        listing(&fresh_dir),
        "files of the taken copy"
    );
    assert_eq!(taken.workspace.left_out(), fresh.left_out());
    assert_eq!(
        baseline_tree(&dest, taken.workspace.baseline()),
        baseline_tree(&fresh_dir, fresh.baseline()),
        "baseline trees"
    );
    // The seeded store checkpoints the same baseline a fresh store does.
    let mut seeded = CheckpointStore::open(&store, &dest, ExcludeSet::default()).expect("store");
    let cp = seeded.create("baseline").expect("baseline");
    let mut other = CheckpointStore::open(
        &tmp.join(format!("other-{label}.git")),
        &fresh_dir,
        ExcludeSet::default(),
    )
    .expect("store");
    let fresh_cp = other.create("baseline").expect("baseline");
    assert_eq!(cp.fingerprint, fresh_cp.fingerprint);
    assert_eq!(
        seeded.tree_of(cp.id).expect("tree"),
        baseline_tree(&fresh_dir, fresh.baseline())
    );
    assert_eq!(
        taken.workspace.copied_files() as usize,
        listing(&dest).keys().filter(|k| !k.ends_with('/')).count()
    );
    taken
}

#[test]
fn an_unchanged_source_is_taken_as_it_was_prepared() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    assert!(prepare(&src, &dir, &settings()).expect("prepare"));
    assert!(dir.join("ready/meta").is_file());
    let taken = take_and_compare(tmp.path(), &src, &dir, "same");
    assert_eq!(
        (
            taken.refreshed.copied,
            taken.refreshed.removed,
            taken.refreshed.rebased
        ),
        (0, 0, false)
    );
    assert!(!dir.join("ready").exists(), "one run takes it");
    let again = take(
        &src,
        &dir,
        &settings(),
        &tmp.path().join("ws-same"),
        &tmp.path().join("s2.git"),
        Duration::ZERO,
    );
    assert!(matches!(again, Err(NotTaken::Missing)));
}

#[test]
fn what_changed_in_the_source_is_copied_again_and_nothing_of_the_old_stays() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    assert!(prepare(&src, &dir, &settings()).expect("prepare"));
    let old_a = git2::Oid::hash_object(git2::ObjectType::Blob, b"a = 1\n").expect("hash");
    // Same size, same mtime: only ctime tells.
    let a = src.join("pkg/a.py");
    let mtime = std::fs::metadata(&a)
        .expect("stat")
        .modified()
        .expect("mtime");
    std::fs::write(&a, "a = 9\n").expect("write");
    std::fs::File::options()
        .write(true)
        .open(&a)
        .and_then(|f| f.set_modified(mtime))
        .expect("set mtime");
    write(&src.join("pkg/b.py"), "b = 2\nb += 1\n");
    std::fs::remove_file(src.join("pkg/deep/c.py")).expect("rm");
    write(&src.join("new/dir/d.py"), "d = 4\n");
    std::fs::set_permissions(
        src.join("README.md"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    write(&src.join(".env.local"), "KEY=also secret\n");
    std::fs::remove_file(src.join("link")).expect("rm link");
    symlink("pkg/b.py", src.join("link")).expect("symlink");
    // A directory turned into a file.
    std::fs::remove_dir_all(src.join("many")).expect("rm many");
    write(&src.join("many"), "now a file\n");
    let taken = take_and_compare(tmp.path(), &src, &dir, "changed");
    assert!(taken.refreshed.rebased);
    assert!(taken.refreshed.copied >= 5, "{:?}", taken.refreshed);
    assert!(taken.refreshed.removed >= 41, "{:?}", taken.refreshed);
    let ws = git2::Repository::open(tmp.path().join("ws-changed")).expect("open");
    assert!(
        !ws.odb().expect("odb").exists(old_a),
        "the old version of a changed file is not readable in the workspace's .git"
    );
    assert!(!tmp.path().join("ws-changed/.env.local").exists());
    assert!(
        !tmp.path().join("ws-changed/pkg/deep").exists(),
        "emptied directories go"
    );
}

#[test]
fn other_settings_or_too_many_changes_throw_the_copy_away() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    assert!(prepare(&src, &dir, &settings()).expect("prepare"));
    let dest = tmp.path().join("ws");
    std::fs::create_dir(&dest).expect("mkdir");
    let mut other = settings();
    other.secrets = SecretPaths::with_overrides(&["pkg/".to_string()]).expect("patterns");
    let store = tmp.path().join("store.git");
    assert!(matches!(
        take(&src, &dir, &other, &dest, &store, Duration::ZERO),
        Err(NotTaken::Stale)
    ));
    assert_eq!(std::fs::read_dir(&dest).expect("list").count(), 0);
    assert!(!store.exists());
    assert!(!dir.join("ready").exists(), "a stale copy goes");

    // More than a quarter of the files (and over 64) changed: copied afresh.
    for i in 0..100 {
        write(&src.join(format!("bulk/g{i:03}.txt")), "x\n");
    }
    std::thread::sleep(Duration::from_millis(2_100));
    assert!(prepare(&src, &dir, &settings()).expect("prepare"));
    for i in 0..100 {
        write(&src.join(format!("bulk/g{i:03}.txt")), "y\n");
    }
    assert!(matches!(
        take(&src, &dir, &settings(), &dest, &store, Duration::ZERO),
        Err(NotTaken::TooManyChanges)
    ));
    assert_eq!(std::fs::read_dir(&dest).expect("list").count(), 0);
    assert!(!store.exists());
}

#[test]
fn a_copy_being_made_is_not_made_twice_nor_taken_half_made() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("prepared/x");
    let held = Lock::try_take(&dir).expect("lock").expect("free");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    git2::Repository::init(&src).expect("init");
    assert!(!prepare(&src, &dir, &settings()).expect("busy"));
    let dest = tmp.path().join("ws");
    std::fs::create_dir(&dest).expect("mkdir");
    let took = take(
        &src,
        &dir,
        &settings(),
        &dest,
        &tmp.path().join("s.git"),
        Duration::from_millis(100),
    );
    assert!(matches!(took, Err(NotTaken::Missing)));
    drop(held);
    assert!(prepare(&src, &dir, &settings()).expect("free again"));
}

/// The baseline checkpoint of a taken copy, with what the copy recorded of
/// its files: the checkpoint's tree and how many files it read.
fn primed_baseline(store: &Path, dest: &Path, taken: &mut Taken) -> (git2::Oid, usize) {
    let mut seeded = CheckpointStore::open(store, dest, ExcludeSet::default()).expect("store");
    seeded
        .adopt_baseline(&mut taken.workspace)
        .expect("the copy's facts");
    let cp = seeded.create("baseline").expect("baseline");
    let (_, _, reads) = seeded.scan_counts();
    (seeded.tree_of(cp.id).expect("tree"), reads)
}

/// Takes the copy of `src` while it is being prepared in `dir` (the
/// preparation settles for the racy window after its copy, so it is under
/// way when the run asks): into `tmp/ws-LABEL` and `tmp/store-LABEL.git`.
fn take_while_preparing(
    tmp: &Path,
    src: &Path,
    dir: &Path,
    label: &str,
) -> (Taken, std::path::PathBuf, std::path::PathBuf) {
    let preparing = {
        let (src, dir) = (src.to_path_buf(), dir.to_path_buf());
        std::thread::spawn(move || prepare(&src, &dir, &settings()).expect("prepare"))
    };
    while !preparing.is_finished() && !is_preparing_dir(dir) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let dest = tmp.join(format!("ws-{label}"));
    std::fs::create_dir(&dest).expect("mkdir");
    let store = tmp.join(format!("store-{label}.git"));
    let taken = take(
        src,
        dir,
        &settings(),
        &dest,
        &store,
        Duration::from_secs(120),
    )
    .unwrap_or_else(|e| panic!("not taken: {e:?}"));
    assert!(preparing.join().expect("preparer"), "it made the copy");
    (taken, dest, store)
}

#[test]
fn a_run_waiting_for_a_copy_being_prepared_is_handed_it_whole() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    let (mut taken, dest, store) = take_while_preparing(tmp.path(), &src, &dir, "waited");
    assert!(!dir.join(WANTED).exists(), "the wish is gone with the copy");
    assert_eq!(taken.refreshed.copied, 0);
    let fresh_dir = tmp.path().join("fresh-waited");
    let fresh = PrivateWorkspace::create(&src, &fresh_dir, None).expect("fresh copy");
    assert_eq!(
        listing(&dest),
        listing(&fresh_dir),
        "files of the taken copy"
    );
    // Handed over before its files were old enough for a stat cache to
    // trust: the baseline checkpoint takes what the copy recorded of them
    // instead of reading them again, and comes out as a fresh copy's does.
    let (tree, reads) = primed_baseline(&store, &dest, &mut taken);
    assert_eq!(reads, 0, "no file read again");
    assert_eq!(tree, baseline_tree(&fresh_dir, fresh.baseline()));
}

#[test]
fn a_file_changed_after_the_copy_was_handed_over_is_read_again() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    let (mut taken, dest, store) = take_while_preparing(tmp.path(), &src, &dir, "changed");
    // Something writes the copy after it was taken, keeping the size (a
    // clock tick later: within the same tick a write keeps the facts, which
    // is why the facts serve only a scan before anything runs).
    std::thread::sleep(Duration::from_millis(20));
    let victim = listing(&dest)
        .into_iter()
        .find(|(k, (_, bytes))| !k.ends_with('/') && !k.starts_with(".git") && !bytes.is_empty())
        .map(|(k, _)| k)
        .expect("a file");
    let path = dest.join(&victim);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[0] ^= 1;
    std::fs::write(&path, &bytes).expect("write");
    let (tree, reads) = primed_baseline(&store, &dest, &mut taken);
    assert_eq!(reads, 1, "only the changed file is read");
    let repo = git2::Repository::open(&store).expect("store repo");
    let entry = repo
        .find_tree(tree)
        .expect("tree")
        .get_path(Path::new(&victim))
        .expect("entry");
    let blob = repo.find_blob(entry.id()).expect("blob");
    assert_eq!(blob.content(), bytes.as_slice(), "its content as it is now");
}

fn is_preparing_dir(dir: &Path) -> bool {
    dir.is_dir() && matches!(Lock::try_take(dir), Ok(None))
}

#[test]
fn a_damaged_record_is_never_trusted() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    assert!(prepare(&src, &dir, &settings()).expect("prepare"));
    let meta = dir.join("ready/meta");
    let mut bytes = std::fs::read(&meta).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(&meta, bytes).expect("write");
    let dest = tmp.path().join("ws");
    std::fs::create_dir(&dest).expect("mkdir");
    assert!(matches!(
        take(
            &src,
            &dir,
            &settings(),
            &dest,
            &tmp.path().join("s.git"),
            Duration::ZERO
        ),
        Err(NotTaken::Stale)
    ));
    assert_eq!(std::fs::read_dir(&dest).expect("list").count(), 0);
}

fn pack_names(ws: &Path) -> std::collections::BTreeSet<String> {
    std::fs::read_dir(ws.join(".git/objects/pack"))
        .expect("packs")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".pack"))
        .collect()
}

fn git_in(dir: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git")
}

#[test]
fn a_refresh_keeps_the_packs_that_hold_nothing_stale_and_nothing_unreachable() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    // Some 14 MB of distinct files: the baseline is several packs.
    for i in 0..14u32 {
        let body: Vec<u8> = (0..262_144u32)
            .flat_map(|j| (j ^ i.wrapping_mul(2_654_435_761)).to_le_bytes())
            .collect();
        std::fs::create_dir_all(src.join("big")).expect("mkdir");
        std::fs::write(src.join(format!("big/b{i:02}.bin")), body).expect("write");
    }
    write(&src.join("small.txt"), "small\n");
    git2::Repository::init(&src).expect("init");
    std::thread::sleep(Duration::from_millis(2_100));
    let dir = tmp.path().join("prepared/x");
    assert!(prepare(&src, &dir, &settings()).expect("prepare"));
    let before = pack_names(&dir.join("ready/ws"));
    assert!(before.len() >= 3, "{before:?}");
    let changed = src.join("big/b03.bin");
    let old = git2::Oid::hash_file(git2::ObjectType::Blob, &changed).expect("hash");
    let mut body = std::fs::read(&changed).expect("read");
    body[100] ^= 1;
    std::fs::write(&changed, body).expect("write");

    let taken = take_and_compare(tmp.path(), &src, &dir, "parts");
    assert!(taken.refreshed.rebased);
    assert_eq!(taken.refreshed.copied, 1, "{:?}", taken.refreshed);
    let ws = tmp.path().join("ws-parts");
    let after = pack_names(&ws);
    let kept = before.intersection(&after).count();
    assert!(
        kept >= before.len() - 2,
        "only the pack of the changed file and the trees' are written again: {before:?} → {after:?}"
    );
    let repo = git2::Repository::open(&ws).expect("open");
    assert!(
        !repo.odb().expect("odb").exists(old),
        "the old version is gone"
    );
    // Git finds every object it needs, and none that nothing reaches.
    let fsck = git_in(
        &ws,
        &[
            "fsck",
            "--full",
            "--strict",
            "--unreachable",
            "--no-progress",
        ],
    );
    assert!(
        fsck.status.success(),
        "{}",
        String::from_utf8_lossy(&fsck.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&fsck.stdout),
        "",
        "unreachable objects"
    );
    let status = git_in(&ws, &["status", "--porcelain"]);
    assert!(status.status.success());
    assert_eq!(
        String::from_utf8_lossy(&status.stdout),
        "",
        "the copy is its baseline"
    );
}

/// A run's workspace as a run leaves it: copied, checkpointed in its own
/// store, then changed by the sandbox in every way a recycle must undo.
/// Gives the `recycle-*` directory handed on, with settings `with`.
fn ended_run(tmp: &Path, src: &Path, dir: &Path, with: &PrepareSettings) -> std::path::PathBuf {
    let ws = tmp.join("run-ws");
    let mut copy = PrivateWorkspace::create_limited(
        src,
        &ws,
        None,
        &SecretPaths::default(),
        crate::workspace::DEFAULT_MAX_FILE_BYTES,
        &mut |_| {},
    )
    .expect("copy");
    let tree = baseline_tree(&ws, copy.baseline());
    let store = tmp.join("run-store.git");
    let mut cps = CheckpointStore::open(&store, &ws, ExcludeSet::default()).expect("store");
    cps.adopt_baseline(&mut copy).expect("adopt");
    cps.create("baseline").expect("baseline");
    drop(cps);
    // Same size, other bytes; a new file and directory; a link retargeted;
    // an executable made plain; a file linked from outside; `.git` spoiled.
    std::fs::write(ws.join("pkg/a.py"), "a = 9\n").expect("edit");
    write(&ws.join("pkg/new.py"), "new\n");
    write(&ws.join("junk/deep/x.o"), "object\n");
    std::fs::remove_file(ws.join("link")).expect("rm link");
    symlink("/etc/passwd", ws.join("link")).expect("retarget");
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    std::fs::hard_link(ws.join("many/f02.txt"), tmp.join("outside")).expect("link");
    std::fs::hard_link(ws.join("many/f03.txt"), ws.join("many/extra")).expect("link");
    write(&ws.join(".git/objects/ab/cdef"), "not an object");
    std::fs::write(ws.join(".git/HEAD"), "ref: refs/heads/evil\n").expect("head");
    let hand_off =
        super::super::recycle::HandOff::new(&store, tree, copy.as_of_ns().expect("as of"), with);
    let into = dir.join("recycle-test");
    crate::state::private_dir(&into).expect("mkdir");
    std::fs::write(
        into.join(super::super::recycle::HAND_OFF),
        serde_json::to_vec(&hand_off).expect("json"),
    )
    .expect("hand-off");
    std::fs::rename(&ws, into.join("ws")).expect("move");
    into
}

#[test]
fn an_ended_runs_workspace_becomes_the_copy_a_fresh_one_would_be() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    let recycled = ended_run(tmp.path(), &src, &dir, &settings());
    // A source file changed after the run's copy read it.
    std::fs::write(src.join("pkg/b.py"), "b = 3\n").expect("edit source");
    let with = settings();
    let make = super::super::recycle::maker(&src, &recycled, &with);
    assert!(prepare_from(&src, &dir, &with, Some((&recycled, &make))).expect("prepare"));
    let meta = read_meta(&dir.join("ready/meta")).expect("meta");
    assert!(meta.git_stale, "made from the ended run's workspace");
    let ws = dir.join("ready/ws");
    for gone in [
        "pkg/new.py",
        "junk",
        "many/extra",
        "pkg/a.py",
        "link",
        "run.sh",
        "many/f02.txt",
    ] {
        assert!(
            std::fs::symlink_metadata(ws.join(gone)).is_err(),
            "{gone} is copied again, not kept"
        );
    }
    assert!(
        !meta.files.iter().any(|r| r.path == b"pkg/b.py"),
        "a source file changed since is not recorded"
    );
    assert_eq!(
        std::fs::read(ws.join("many/f03.txt")).expect("kept"),
        b"file 3\n"
    );
    assert_eq!(
        std::fs::read(tmp.path().join("outside")).expect("outside"),
        b"file 2\n"
    );
    // Nothing of the spoiled `.git`: only packs.
    let git: Vec<_> = std::fs::read_dir(ws.join(".git"))
        .expect("git")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(git, vec![std::ffi::OsString::from("objects")]);
    std::thread::sleep(Duration::from_millis(2_100));
    let taken = take_and_compare(tmp.path(), &src, &dir, "recycled");
    assert!(taken.refreshed.rebased);
    // Written again from the source: the run's edits are gone.
    let dest = tmp.path().join("ws-recycled");
    assert_eq!(std::fs::read(dest.join("pkg/a.py")).expect("a"), b"a = 1\n");
    assert_eq!(std::fs::read(dest.join("pkg/b.py")).expect("b"), b"b = 3\n");
    assert_eq!(
        std::fs::read_link(dest.join("link")).expect("link"),
        Path::new("pkg/a.py")
    );
    assert!(!dir.join("recycle-test").exists(), "the hand-off is gone");
}

#[test]
fn an_ended_runs_workspace_handed_over_at_once_is_not_read_again_by_the_next_baseline() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    let recycled = ended_run(tmp.path(), &src, &dir, &settings());
    let preparing = {
        let (src, dir, recycled) = (src.clone(), dir.clone(), recycled.clone());
        std::thread::spawn(move || {
            let with = settings();
            let make = super::super::recycle::maker(&src, &recycled, &with);
            prepare_from(&src, &dir, &with, Some((&recycled, &make))).expect("prepare")
        })
    };
    while !preparing.is_finished() && !is_preparing_dir(&dir) {
        std::thread::sleep(Duration::from_millis(1));
    }
    // A run waits for it: handed over without the racy window's wait.
    std::fs::write(dir.join(WANTED), b"").expect("wish");
    assert!(preparing.join().expect("preparer"));
    assert!(dir.join("ready").join(PRIMED).is_file());
    let kept: std::collections::BTreeSet<String> = read_meta(&dir.join("ready/meta"))
        .expect("meta")
        .files
        .iter()
        .filter(|r| r.mode != 0o120000)
        .map(|r| String::from_utf8_lossy(&r.path).into_owned())
        .collect();
    let dest = tmp.path().join("ws-at-once");
    std::fs::create_dir(&dest).expect("mkdir");
    let store = tmp.path().join("store-at-once.git");
    let mut taken = take(&src, &dir, &settings(), &dest, &store, Duration::ZERO)
        .unwrap_or_else(|e| panic!("not taken: {e:?}"));
    let copied_again = listing(&dest)
        .iter()
        .filter(|(path, (mode, _))| *mode != 0o120000 && *mode != 0 && !kept.contains(*path))
        .count();
    assert!(
        copied_again > 0 && copied_again < kept.len(),
        "{copied_again}"
    );
    let (tree, reads) = primed_baseline(&store, &dest, &mut taken);
    assert_eq!(reads, copied_again, "only what was copied again is read");
    let fresh_dir = tmp.path().join("fresh-at-once");
    let fresh = PrivateWorkspace::create(&src, &fresh_dir, None).expect("fresh copy");
    assert_eq!(tree, baseline_tree(&fresh_dir, fresh.baseline()));
}

#[test]
fn a_workspace_made_with_other_settings_is_copied_afresh_instead() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = source(tmp.path());
    let dir = tmp.path().join("prepared/x");
    let other = PrepareSettings {
        max_file_bytes: 1 << 10,
        ..settings()
    };
    let recycled = ended_run(tmp.path(), &src, &dir, &other);
    let with = settings();
    let make = super::super::recycle::maker(&src, &recycled, &with);
    assert!(prepare_from(&src, &dir, &with, Some((&recycled, &make))).expect("prepare"));
    let meta = read_meta(&dir.join("ready/meta")).expect("meta");
    assert!(!meta.git_stale, "copied from the source");
    assert!(!recycled.exists());
    take_and_compare(tmp.path(), &src, &dir, "fresh");
}
