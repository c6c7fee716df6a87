use super::*;
use crate::workspace::fingerprint;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::PathBuf;

fn setup() -> (tempfile::TempDir, PathBuf, CheckpointStore) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("src")).expect("mkdir");
    std::fs::write(ws.join("a.txt"), b"one\ntwo\n").expect("write");
    std::fs::write(ws.join("src/lib.py"), b"x = 1\n").expect("write");
    std::fs::write(ws.join("run.sh"), b"#!/bin/sh\n").expect("write");
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    symlink("src/lib.py", ws.join("lib")).expect("symlink");
    let store = CheckpointStore::open(&tmp.path().join("store.git"), &ws, ExcludeSet::default())
        .expect("open store");
    (tmp, ws, store)
}

fn fp(ws: &Path) -> Fingerprint {
    fingerprint(ws, &ExcludeSet::default())
        .expect("fp")
        .fingerprint
}

#[test]
fn create_list_and_linear_history() {
    let (_t, ws, mut store) = setup();
    assert!(store.list().expect("list").is_empty());
    let first = store.create("before edit").expect("create");
    assert_eq!(first.fingerprint, fp(&ws));
    std::fs::write(ws.join("a.txt"), b"one\nTWO\n").expect("write");
    let second = store.create("after\nedit").expect("create");
    assert_eq!(second.label, "after edit");
    let list = store.list().expect("list");
    assert_eq!(list, vec![first.clone(), second.clone()]);
    let commit = store.repo.find_commit(second.id).expect("commit");
    assert_eq!(commit.parent_ids().collect::<Vec<_>>(), vec![first.id]);
    assert_eq!(store.latest().expect("latest"), Some(second));
}

#[test]
fn diff_is_a_unified_patch() {
    let (_t, ws, mut store) = setup();
    let a = store.create("a").expect("create");
    std::fs::write(ws.join("a.txt"), b"one\nTWO\n").expect("write");
    std::fs::write(ws.join("new.txt"), b"fresh\n").expect("write");
    let b = store.create("b").expect("create");
    let patch = store.diff(a.id, b.id).expect("diff");
    assert!(patch.contains("diff --git a/a.txt b/a.txt"), "{patch}");
    assert!(patch.contains("-two\n+TWO\n"), "{patch}");
    assert!(patch.contains("+fresh\n"), "{patch}");
    std::fs::remove_file(ws.join("new.txt")).expect("rm");
    let live = store.diff_to_workspace(b.id).expect("diff");
    assert!(
        live.contains("-fresh\n") && live.contains("deleted file"),
        "{live}"
    );
}

#[test]
fn restore_round_trip() {
    let (_t, ws, mut store) = setup();
    let cp = store.create("clean").expect("create");
    std::fs::write(ws.join("a.txt"), b"changed").expect("write");
    std::fs::remove_file(ws.join("src/lib.py")).expect("rm");
    std::fs::write(ws.join("extra.txt"), b"extra").expect("write");
    std::fs::create_dir_all(ws.join("new/dir")).expect("mkdir");
    std::fs::write(ws.join("new/dir/f"), b"f").expect("write");
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    std::fs::remove_file(ws.join("lib")).expect("rm");
    symlink("a.txt", ws.join("lib")).expect("symlink");
    std::fs::create_dir_all(ws.join("__pycache__")).expect("mkdir");
    std::fs::write(ws.join("__pycache__/c.pyc"), b"cache").expect("write");
    assert_ne!(fp(&ws), cp.fingerprint);

    let root = WorkspaceRoot::open(&ws).expect("root");
    store.restore(cp.id, &root).expect("restore");
    assert_eq!(fp(&ws), cp.fingerprint);
    assert!(!ws.join("extra.txt").exists());
    assert!(!ws.join("new").exists(), "emptied directories are removed");
    assert_eq!(
        std::fs::read_link(ws.join("lib")).expect("link"),
        PathBuf::from("src/lib.py")
    );
    assert_eq!(
        std::fs::read(ws.join("__pycache__/c.pyc")).expect("cache kept"),
        b"cache"
    );
}

#[test]
fn restore_turns_a_directory_back_into_a_file() {
    let (_t, ws, mut store) = setup();
    let cp = store.create("clean").expect("create");
    std::fs::remove_file(ws.join("a.txt")).expect("rm");
    std::fs::create_dir(ws.join("a.txt")).expect("mkdir");
    std::fs::write(ws.join("a.txt/inner"), b"i").expect("write");
    let root = WorkspaceRoot::open(&ws).expect("root");
    store.restore(cp.id, &root).expect("restore");
    assert_eq!(fp(&ws), cp.fingerprint);
}

#[test]
fn validated_marker() {
    let (_t, _ws, mut store) = setup();
    assert_eq!(store.validated().expect("validated"), None);
    let cp = store.create("green").expect("create");
    store.mark_validated(cp.id).expect("mark");
    assert_eq!(store.validated().expect("validated"), Some(cp));
    assert!(matches!(
        store.mark_validated(Oid::ZERO_SHA1),
        Err(WorkspaceError::UnknownCheckpoint { .. })
    ));
}

#[test]
fn incremental_checkpoint_reads_only_changed_files() {
    let (_t, ws, mut store) = setup();
    store.create("first").expect("create");
    crate::workspace::scan::fingerprint::tests::age_cache(&mut store.scanner);
    std::fs::write(ws.join("a.txt"), b"again\n").expect("write");
    let snap = store.scan().expect("scan");
    assert_eq!(snap.rehashed, 1);
    // Reopening the store reuses the persisted cache.
    let cp = store.create("second").expect("create");
    assert_eq!(cp.fingerprint, fp(&ws));
}

#[test]
fn files_over_the_limit_are_never_stored_restored_or_exported() {
    let (_t, ws, store) = setup();
    let mut store = store.with_max_file_bytes(1000);
    std::fs::create_dir_all(ws.join("big")).expect("mkdir");
    std::fs::write(ws.join("big/old.bin"), vec![7u8; 5000]).expect("write");
    let base = store.create("baseline").expect("create");
    let stored = {
        let tree = store.commit(base.id).expect("commit").tree().expect("tree");
        flatten(&tree).expect("flatten")
    };
    assert!(
        !stored.contains_key(b"big/old.bin".as_slice()),
        "not in the tree"
    );
    assert!(
        !stored.keys().any(|p| p.starts_with(b"big")),
        "nor its directory"
    );
    assert_eq!(
        store.get(base.id).expect("get").fingerprint,
        base.fingerprint
    );

    // Unchanged: nothing to refuse. Changed (a new size), added, deleted:
    // each is named, and the patch carries none of them.
    let export = store.export_patch(base.id).expect("export");
    assert!(export.too_large.is_empty(), "{:?}", export.too_large);
    std::fs::write(ws.join("big/old.bin"), vec![8u8; 6000]).expect("write");
    let sparse = std::fs::File::create(ws.join("huge")).expect("create");
    sparse.set_len(20 << 30).expect("truncate");
    std::fs::write(ws.join("a.txt"), b"one\nTWO\n").expect("write");
    let export = store.export_patch(base.id).expect("export");
    assert_eq!(
        export.too_large,
        vec![
            "big/old.bin (changed, 5.9 KB: over the per-file limit of 1000 bytes, so no patch can carry it)",
            "huge (added, 20 GB: over the per-file limit of 1000 bytes, so no patch can carry it)",
        ]
    );
    assert!(export.patch.contains("a/a.txt") && !export.patch.contains("huge"));
    std::fs::remove_file(ws.join("big/old.bin")).expect("rm");
    let export = store.export_patch(base.id).expect("export");
    assert!(
        export.too_large[0].starts_with("big/old.bin (deleted"),
        "{:?}",
        export.too_large
    );

    // A restore leaves files over the limit alone.
    let root = WorkspaceRoot::open(&ws).expect("root");
    store.restore(base.id, &root).expect("restore");
    assert_eq!(
        std::fs::metadata(ws.join("huge")).expect("kept").len(),
        20 << 30
    );
    assert_eq!(std::fs::read(ws.join("a.txt")).expect("a"), b"one\ntwo\n");
}

#[test]
fn a_capped_patch_is_cut_at_a_file_boundary_and_counts_the_rest() {
    let (_t, ws, mut store) = setup();
    let a = store.create("a").expect("create");
    std::fs::write(ws.join("a.txt"), b"one\nTWO\n").expect("write");
    std::fs::write(ws.join("z.txt"), "z\n".repeat(5000)).expect("write");
    let b = store.create("b").expect("create");
    let old = store.commit(a.id).expect("a").tree().expect("tree");
    let new = store.commit(b.id).expect("b").tree().expect("tree");
    let (whole, total) = store.patch_capped(&old, &new, usize::MAX).expect("whole");
    assert_eq!(whole.len() as u64, total);
    let (cut, total_cut) = store.patch_capped(&old, &new, 2000).expect("cut");
    assert_eq!(total_cut, total);
    assert!(cut.contains("a/a.txt") && !cut.contains("z.txt"), "{cut}");
    assert!(whole.starts_with(&cut));
}

/// `n` bytes that do not compress, different for each `seed`.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn loose_object(store: &CheckpointStore, tree_of: Oid, path: &str) -> Option<PathBuf> {
    let commit = store.repo.find_commit(tree_of).ok()?;
    let id = commit.tree().ok()?.get_path(Path::new(path)).ok()?.id();
    let hex = id.to_string();
    Some(
        store
            .repo
            .path()
            .join("objects")
            .join(&hex[..2])
            .join(&hex[2..]),
    )
}

#[test]
fn the_budget_prunes_intermediate_checkpoints_oldest_first() {
    const MB: usize = 1 << 20;
    let (_t, ws, store) = setup();
    // Blobs count by their size on disk: a little over 1 MB each.
    let budget = 3 * MB as u64 + MB as u64 / 2;
    let mut store = store.with_checkpoint_budget(budget);
    let about = |n: u64, mb: usize| (n >= (mb * MB) as u64) && n < (mb * MB) as u64 + 8192;
    // A big baseline file is never counted.
    std::fs::write(ws.join("base.bin"), noise(99, 4 * MB)).expect("write");
    let (baseline, none) = store.create_within_budget("baseline").expect("baseline");
    assert_eq!(none, Pruned::default());
    let mut cps = Vec::new();
    for v in 1..=5u64 {
        std::fs::write(ws.join("big.bin"), noise(v, MB)).expect("write");
        if v == 1 {
            std::fs::write(ws.join("small.txt"), b"kept by later checkpoints\n").expect("write");
        }
        let (cp, pruned) = store
            .create_within_budget(&format!("c{v}"))
            .expect("create");
        if v == 2 {
            store.mark_validated(cp.id).expect("validate");
        }
        cps.push((cp.id, pruned));
        assert!(store.written_bytes() <= budget, "after c{v}");
    }
    let ids: Vec<Oid> = cps.iter().map(|(id, _)| *id).collect();
    // c4 took the count to 4 MB: c1 went (c2 is validated); c5: c3 went.
    assert_eq!(cps[3].1.checkpoints, vec![ids[0]]);
    assert!(about(cps[3].1.freed_bytes, 1), "{:?}", cps[3].1);
    assert_eq!(cps[4].1.checkpoints, vec![ids[2]]);
    assert!(cps[..3].iter().all(|(_, p)| p.checkpoints.is_empty()));
    assert!(store.is_pruned(ids[0]) && store.is_pruned(ids[2]));
    assert!(!store.is_pruned(ids[1]) && !store.is_pruned(ids[3]));

    // A blob stored for a live diff only, then changed again, goes first.
    std::fs::write(ws.join("big.bin"), noise(6, MB)).expect("write");
    store.diff_to_workspace(baseline.id).expect("live diff");
    std::fs::write(ws.join("big.bin"), noise(7, MB)).expect("write");
    let (c6, pruned) = store.create_within_budget("c6").expect("create");
    assert_eq!(pruned.checkpoints, vec![ids[3]]);
    assert!(about(pruned.freed_bytes, 2), "{pruned:?}");
    assert!(store.written_bytes() <= budget);

    // What is pruned is refused by name, and its blobs are gone from disk;
    // what is kept restores byte for byte, shared files included.
    let root = WorkspaceRoot::open(&ws).expect("root");
    assert!(matches!(
        store.restore(ids[0], &root),
        Err(WorkspaceError::CheckpointPruned { .. })
    ));
    assert!(matches!(
        store.diff(ids[2], c6.id),
        Err(WorkspaceError::CheckpointPruned { .. })
    ));
    let pruned_blob = loose_object(&store, ids[0], "big.bin").expect("path");
    assert!(!pruned_blob.exists());
    assert!(
        loose_object(&store, ids[1], "big.bin")
            .expect("path")
            .exists()
    );
    store.restore(ids[1], &root).expect("validated restores");
    assert_eq!(
        std::fs::read(ws.join("big.bin")).expect("read"),
        noise(2, MB)
    );
    assert_eq!(
        std::fs::read(ws.join("small.txt")).expect("read"),
        b"kept by later checkpoints\n"
    );
    store.restore(c6.id, &root).expect("latest restores");
    assert_eq!(
        std::fs::read(ws.join("big.bin")).expect("read"),
        noise(7, MB)
    );
    store
        .restore(baseline.id, &root)
        .expect("baseline restores");
    assert!(!ws.join("big.bin").exists());
    assert_eq!(
        std::fs::read(ws.join("base.bin")).expect("read"),
        noise(99, 4 * MB)
    );
    // A later scan still stores a blob that was pruned when it comes back.
    std::fs::write(ws.join("big.bin"), noise(1, MB)).expect("write");
    let again = store.create("v1 again").expect("create");
    assert!(
        loose_object(&store, again.id, "big.bin")
            .expect("path")
            .exists()
    );
}

#[test]
fn without_a_budget_nothing_is_pruned() {
    let (_t, ws, mut store) = setup();
    store.create("baseline").expect("baseline");
    for v in 1..=3u64 {
        std::fs::write(ws.join("big.bin"), noise(v, 1 << 20)).expect("write");
        let (cp, pruned) = store.create_within_budget("c").expect("create");
        assert!(pruned.checkpoints.is_empty() && !store.is_pruned(cp.id));
    }
}

/// Loose object files under a database's `objects`.
fn loose_objects(objects: &Path) -> usize {
    std::fs::read_dir(objects)
        .expect("objects")
        .flatten()
        .filter(|d| d.file_name().len() == 2)
        .map(|d| std::fs::read_dir(d.path()).expect("fan-out").count())
        .sum()
}

#[test]
fn the_store_shares_the_copys_packs_only_where_the_sandbox_cannot_change_them() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("a.txt"), b"one\n").expect("write");
    git2::Repository::init(&src).expect("init");
    let me = rustix::process::geteuid().as_raw();
    // As root the copy is given to the sandbox user, all but its packs.
    let owner = rustix::process::geteuid()
        .is_root()
        .then_some((crate::sandbox::SANDBOX_UID, crate::sandbox::SANDBOX_GID));
    let adopted = |name: &str, spoil: &dyn Fn(&Path)| {
        let ws = tmp.path().join(format!("ws-{name}"));
        let copy = crate::workspace::PrivateWorkspace::create(&src, &ws, owner).expect("copy");
        let packs = copy.baseline_pack().to_vec();
        for pack in &packs {
            let meta = std::fs::metadata(&pack.pack).expect("stat");
            assert_eq!(meta.uid(), me, "the copy's pack stays ours");
            assert_eq!(meta.mode() & 0o777, 0o444);
            spoil(&pack.pack);
        }
        let store_dir = tmp.path().join(format!("store-{name}.git"));
        let mut store =
            CheckpointStore::open(&store_dir, &ws, ExcludeSet::default()).expect("open store");
        store.adopt_pack(&packs).expect("adopt");
        let base = store.create("baseline").expect("baseline");
        assert_eq!(base.fingerprint, fp(&ws));
        packs
            .iter()
            .map(|p| {
                let theirs = store_dir
                    .join("objects/pack")
                    .join(p.pack.file_name().unwrap());
                let (a, b) = (
                    std::fs::metadata(&p.pack).expect("stat"),
                    std::fs::metadata(&theirs).expect("stat"),
                );
                assert_eq!(b.mode() & 0o777, 0o444);
                a.ino() == b.ino()
            })
            .collect::<Vec<bool>>()
    };
    assert_eq!(
        adopted("plain", &|_| {}),
        vec![true; 2],
        "shared (blobs, trees)"
    );
    let writable = |p: &Path| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    };
    assert_eq!(adopted("writable", &writable), vec![false; 2], "copied");
    if owner.is_some() {
        let given = |p: &Path| {
            std::os::unix::fs::chown(p, Some(crate::sandbox::SANDBOX_UID), None).expect("chown");
        };
        assert_eq!(adopted("given", &given), vec![false; 2], "copied");
    }
}

#[test]
fn a_store_on_the_copys_pack_stores_only_what_is_new_and_exports_it_all() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("pkg")).expect("mkdir");
    std::fs::write(src.join("a.txt"), b"one\n").expect("write");
    std::fs::write(src.join("pkg/b.py"), b"x = 1\n").expect("write");
    symlink("a.txt", src.join("link")).expect("symlink");
    git2::Repository::init(&src).expect("init");
    let ws = tmp.path().join("ws");
    let copy = crate::workspace::PrivateWorkspace::create(&src, &ws, None).expect("copy");
    let store_dir = tmp.path().join("store.git");
    let mut store =
        CheckpointStore::open(&store_dir, &ws, ExcludeSet::default()).expect("open store");
    store.adopt_pack(copy.baseline_pack()).expect("adopt");
    let base = store.create("baseline").expect("baseline");
    assert_eq!(base.fingerprint, fp(&ws));
    // Blobs and trees came with the pack: only the commit is new.
    assert_eq!(loose_objects(&store_dir.join("objects")), 1);
    // The same tree as the copy's own baseline commit.
    let ws_repo = git2::Repository::open(&ws).expect("open copy");
    let ws_tree = ws_repo
        .find_commit(copy.baseline())
        .and_then(|c| c.tree())
        .expect("tree")
        .id();
    let store_tree = store.commit(base.id).and_then(|c| {
        c.tree()
            .map_err(WorkspaceError::git("tree"))
            .map(|t| t.id())
    });
    assert_eq!(store_tree.expect("store tree"), ws_tree);

    std::fs::write(ws.join("new.txt"), b"new\n").expect("write");
    store.create("edit").expect("edit");
    assert_eq!(
        loose_objects(&store_dir.join("objects")),
        1 + 3,
        "blob, tree, commit"
    );

    let out = tmp.path().join("out");
    std::fs::create_dir(&out).expect("mkdir");
    let root = WorkspaceRoot::open(&out).expect("root");
    assert!(export_from(&store_dir, base.id, &root, &|| false).expect("export"));
    assert_eq!(
        std::fs::read(out.join("pkg/b.py")).expect("read"),
        b"x = 1\n"
    );
    assert_eq!(
        std::fs::read_link(out.join("link")).expect("link"),
        PathBuf::from("a.txt")
    );
    assert!(!out.join("new.txt").exists());
    let stopped = tmp.path().join("stopped");
    std::fs::create_dir(&stopped).expect("mkdir");
    let root = WorkspaceRoot::open(&stopped).expect("root");
    assert!(!export_from(&store_dir, base.id, &root, &|| true).expect("export"));
    assert_eq!(std::fs::read_dir(&stopped).expect("list").count(), 0);
}

#[test]
fn a_pack_swapped_or_linked_under_its_name_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(src.join("a.txt"), b"one\n").expect("write");
    git2::Repository::init(&src).expect("init");
    let ws = tmp.path().join("ws");
    let copy = crate::workspace::PrivateWorkspace::create(&src, &ws, None).expect("copy");
    let packs = copy.baseline_pack().to_vec();
    assert_eq!(packs.len(), 2, "blobs and trees");
    let store_dir = tmp.path().join("store.git");
    let mut store =
        CheckpointStore::open(&store_dir, &ws, ExcludeSet::default()).expect("open store");
    // Two packs' files under each other's names.
    let (a, b) = (&packs[0].pack, &packs[1].pack);
    let aside = tmp.path().join("aside");
    std::fs::rename(a, &aside).expect("rename");
    std::fs::rename(b, a).expect("rename");
    std::fs::rename(&aside, b).expect("rename");
    assert!(store.adopt_pack(&packs).is_err(), "swapped");
    std::fs::rename(a, &aside).expect("rename");
    std::fs::rename(b, a).expect("rename");
    std::fs::rename(&aside, b).expect("rename");
    // A link in the pack's place, to the right bytes even.
    let real = tmp.path().join("real.pack");
    std::fs::rename(a, &real).expect("rename");
    symlink(&real, a).expect("symlink");
    assert!(store.adopt_pack(&packs).is_err(), "a link");
    std::fs::remove_file(a).expect("rm");
    std::fs::rename(&real, a).expect("rename");
    store.adopt_pack(&packs).expect("as written");
    let base = store.create("baseline").expect("baseline");
    assert_eq!(base.fingerprint, fp(&ws));
}
