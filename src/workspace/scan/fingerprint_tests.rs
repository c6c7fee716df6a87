use super::*;
use std::os::unix::fs::{PermissionsExt, symlink};

fn tree() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(ws.join("src/deep")).expect("mkdir");
    std::fs::write(ws.join("README"), b"hello\n").expect("write");
    std::fs::write(ws.join("src/main.py"), b"print(1)\n").expect("write");
    std::fs::write(ws.join("src/deep/x.txt"), b"xx").expect("write");
    symlink("main.py", ws.join("src/link")).expect("symlink");
    (tmp, ws)
}

fn fp(ws: &Path) -> Fingerprint {
    fingerprint(ws, &ExcludeSet::default())
        .expect("fingerprint")
        .fingerprint
}

#[test]
fn stable_and_sensitive_to_every_field() {
    let (_t, ws) = tree();
    let base = fp(&ws);
    assert_eq!(base, fp(&ws));
    assert_eq!(base.to_string().len(), 64);

    std::fs::write(ws.join("README"), b"hellO\n").expect("write");
    let content = fp(&ws);
    assert_ne!(content, base);

    std::fs::set_permissions(ws.join("README"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let mode = fp(&ws);
    assert_ne!(mode, content);

    std::fs::write(ws.join("new"), b"").expect("write");
    let added = fp(&ws);
    assert_ne!(added, mode);
    std::fs::remove_file(ws.join("new")).expect("rm");
    assert_eq!(fp(&ws), mode);
    std::fs::remove_file(ws.join("src/deep/x.txt")).expect("rm");
    let deleted = fp(&ws);
    assert_ne!(deleted, mode);

    std::fs::remove_file(ws.join("src/link")).expect("rm");
    symlink("deep", ws.join("src/link")).expect("symlink");
    assert_ne!(fp(&ws), deleted);
}

#[test]
fn excluded_directories_and_git_do_not_count() {
    let (_t, ws) = tree();
    let base = fp(&ws);
    for dir in [
        ".git",
        "src/__pycache__",
        "node_modules",
        "a/b/target",
        ".venv",
        "src/.pytest_cache",
    ] {
        std::fs::create_dir_all(ws.join(dir)).expect("mkdir");
        std::fs::write(ws.join(dir).join("junk"), b"junk").expect("write");
    }
    std::fs::create_dir_all(ws.join("empty/dir")).expect("mkdir");
    assert_eq!(fp(&ws), base);
    // A *file* called `target` is not a cache directory.
    std::fs::write(ws.join("target"), b"t").expect("write");
    assert_ne!(fp(&ws), base);
    // Excludes are configurable.
    let custom = fingerprint(&ws, &ExcludeSet::none())
        .expect("fp")
        .fingerprint;
    assert_ne!(custom, fp(&ws));
}

#[test]
fn paths_with_newlines_cannot_collide() {
    let e = |path: &str, sum: u8| FingerprintEntry {
        path: PathBuf::from(path),
        kind: EntryKind::File,
        mode: MODE_FILE,
        digest: EntryDigest::Content([sum; 32]),
        blob: Oid::ZERO_SHA1,
    };
    let a = digest(&[e("a\nb", 1)]);
    let b = digest(&[e("a", 1), e("b", 1)]);
    assert_ne!(a, b);
}

#[test]
fn incremental_rehashes_only_what_changed() {
    let (_t, ws) = tree();
    let mut f = Fingerprinter::new(&ws, ExcludeSet::default());
    let first = f.scan().expect("scan");
    assert_eq!(first.rehashed, 3);
    // Make every cache entry old enough to be trusted.
    age_cache(&mut f);
    let second = f.scan().expect("scan");
    assert_eq!(second.rehashed, 0);
    assert_eq!(second.fingerprint, first.fingerprint);
    std::fs::write(ws.join("src/main.py"), b"print(22)\n").expect("write");
    let third = f.scan().expect("scan");
    assert_eq!(third.rehashed, 1);
    assert_eq!(third.fingerprint, fp(&ws));
}

#[test]
fn racy_entries_are_rehashed_and_trusted_ones_are_not() {
    let (_t, ws) = tree();
    let mut f = Fingerprinter::new(&ws, ExcludeSet::default());
    let before = f.scan().expect("scan").fingerprint;
    // Same size, and pretend the stat facts are identical to the cached ones
    // (what a same-tick rewrite looks like): only the racy rule can tell.
    std::fs::write(ws.join("README"), b"HELLO\n").expect("write");
    let truth = fp(&ws);
    let st = std::fs::symlink_metadata(ws.join("README")).expect("lstat");
    use std::os::unix::fs::MetadataExt;
    let key = StatKey {
        size: st.size(),
        mtime_ns: st.mtime() * 1_000_000_000 + st.mtime_nsec(),
        ctime_ns: st.ctime() * 1_000_000_000 + st.ctime_nsec(),
        ino: st.ino(),
        mode: st.mode(),
    };
    let set_key = |f: &mut Fingerprinter, recorded_ns: i64| {
        let mut entries = f.cache.take_entries();
        let e = entries.get_mut(b"README".as_slice()).expect("cached");
        e.key = key;
        e.recorded_ns = recorded_ns;
        f.cache.set_entries(entries);
    };
    set_key(&mut f, key.mtime_ns);
    assert_eq!(
        f.scan().expect("scan").fingerprint,
        truth,
        "racy entry trusted"
    );
    // Control: an entry recorded long after the file's times is trusted,
    // so a stale hash shows; only the racy rule saved the case above.
    let mut g = Fingerprinter::new(&ws, ExcludeSet::default());
    g.scan().expect("scan"); // caches the hash of "HELLO\n"
    std::fs::write(ws.join("README"), b"hello\n").expect("write back");
    assert_eq!(fp(&ws), before);
    let st = std::fs::symlink_metadata(ws.join("README")).expect("lstat");
    let mut entries = g.cache.take_entries();
    let e = entries.get_mut(b"README".as_slice()).expect("cached");
    e.key.ctime_ns = st.ctime() * 1_000_000_000 + st.ctime_nsec();
    e.key.mtime_ns = st.mtime() * 1_000_000_000 + st.mtime_nsec();
    e.key.ino = st.ino();
    e.recorded_ns = e.key.mtime_ns.max(e.key.ctime_ns)
        + 10 * crate::workspace::scan::stat_cache::RACY_WINDOW_NS;
    g.cache.set_entries(entries);
    assert_eq!(
        g.scan().expect("scan").fingerprint,
        truth,
        "trusted entry was not used"
    );
}

#[test]
fn cache_file_persists_and_must_be_outside() {
    let (t, ws) = tree();
    let file = t.path().join("statcache");
    let mut f = Fingerprinter::new(&ws, ExcludeSet::default())
        .with_cache_file(&file)
        .expect("cache");
    let a = f.scan().expect("scan");
    assert!(file.exists());
    let g = Fingerprinter::new(&ws, ExcludeSet::default())
        .with_cache_file(&file)
        .expect("cache");
    assert_eq!(
        g.cache().len(),
        a.entries
            .iter()
            .filter(|e| e.kind == EntryKind::File)
            .count()
    );
    let inside = Fingerprinter::new(&ws, ExcludeSet::default()).with_cache_file(ws.join("c"));
    assert!(matches!(
        inside,
        Err(WorkspaceError::CacheInsideWorkspace { .. })
    ));
}

#[test]
fn fifo_is_skipped_not_opened() {
    let (_t, ws) = tree();
    let base = fp(&ws);
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.join("pipe"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    assert_eq!(fp(&ws), base);
}

pub(crate) fn age_cache(f: &mut Fingerprinter) {
    let mut entries = f.cache.take_entries();
    for e in entries.values_mut() {
        e.recorded_ns = i64::MAX;
    }
    f.cache.set_entries(entries);
}

#[test]
fn parallel_walk_finds_every_entry_of_a_wide_deep_tree() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let mut expected = Vec::new();
    for a in 0..12 {
        for b in 0..4 {
            let dir = ws.join(format!("d{a}/e{b}/f"));
            std::fs::create_dir_all(&dir).expect("mkdir");
            for c in 0..3 {
                std::fs::write(dir.join(format!("x{c}")), format!("{a}{b}{c}")).expect("write");
                expected.push(format!("d{a}/e{b}/f/x{c}"));
            }
        }
        symlink("e0", ws.join(format!("d{a}/link"))).expect("symlink");
        expected.push(format!("d{a}/link"));
    }
    expected.sort();
    let mut f = Fingerprinter::new(&ws, ExcludeSet::default());
    let first = f.scan().expect("scan");
    let paths: Vec<String> = first
        .entries
        .iter()
        .map(|e| e.path.to_string_lossy().into_owned())
        .collect();
    assert_eq!(paths, expected);
    assert_eq!(first.rehashed, 12 * 4 * 3);
    assert_eq!(first.fingerprint, fp(&ws));

    std::fs::write(ws.join("d7/e2/f/x1"), b"changed").expect("write");
    std::fs::remove_file(ws.join("d3/e0/f/x0")).expect("rm");
    let again = f.scan().expect("scan");
    assert_eq!(again.fingerprint, fp(&ws));
    assert_ne!(again.fingerprint, first.fingerprint);
    assert_eq!(again.entries.len(), expected.len() - 1);
    assert_eq!(f.cache().len(), 12 * 4 * 3 - 1);
}

#[test]
fn a_file_over_the_limit_is_known_by_size_and_mtime_without_being_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let big = dir.path().join("big");
    std::fs::write(&big, vec![1u8; 4096]).expect("write");
    // Never read: other bytes of the same size and mtime leave the
    // fingerprint as it was.
    let mut f = Fingerprinter::new(dir.path(), ExcludeSet::default()).with_max_file_bytes(1024);
    let first = f.scan().expect("scan");
    assert!(first.entries[0].is_oversize());
    assert_eq!(first.rehashed, 0);
    let mtime = std::fs::metadata(&big)
        .expect("meta")
        .modified()
        .expect("mtime");
    std::fs::write(&big, vec![2u8; 4096]).expect("write");
    std::fs::File::options()
        .write(true)
        .open(&big)
        .expect("open")
        .set_modified(mtime)
        .expect("set mtime");
    assert_eq!(f.scan().expect("scan").fingerprint, first.fingerprint);
    std::fs::write(&big, vec![2u8; 4097]).expect("grow");
    assert_ne!(f.scan().expect("scan").fingerprint, first.fingerprint);
    // Under a higher limit it is hashed like any file.
    let mut all = Fingerprinter::new(dir.path(), ExcludeSet::default());
    let hashed = all.scan().expect("scan");
    assert!(!hashed.entries[0].is_oversize());
    assert_eq!(hashed.rehashed, 1);
}
