use super::*;
use crate::workspace::{CheckpointStore, fingerprint};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::process::Command;

/// A workspace, a store that watches it and a store that scans it whole.
struct Fixture {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    watched: CheckpointStore,
    reference: CheckpointStore,
}

fn fixture(bound: usize) -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    for dir in ["src/deep/er", "docs", "target/debug", ".git/objects"] {
        std::fs::create_dir_all(ws.join(dir)).expect("mkdir");
    }
    for (path, text) in [
        ("a.txt", "one\ntwo\n"),
        ("src/lib.rs", "fn main() {}\n"),
        ("src/deep/er/x.rs", "x\n"),
        ("docs/readme.md", "# docs\n"),
        ("target/debug/out", "built\n"),
        (".git/HEAD", "ref: refs/heads/main\n"),
    ] {
        std::fs::write(ws.join(path), text).expect("write");
    }
    symlink("src/lib.rs", ws.join("lib")).expect("symlink");
    let watched =
        CheckpointStore::open(&tmp.path().join("watched.git"), &ws, ExcludeSet::default())
            .expect("open")
            .watch_bounded(bound);
    assert!(watched.is_watched(), "inotify is available here");
    let reference = CheckpointStore::open(
        &tmp.path().join("reference.git"),
        &ws,
        ExcludeSet::default(),
    )
    .expect("open");
    let mut f = Fixture {
        _tmp: tmp,
        ws,
        watched,
        reference,
    };
    f.check("baseline");
    f
}

impl Fixture {
    fn path(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }

    /// Checkpoints with both stores: same tree, same fingerprint, and the
    /// fingerprint of a fresh scan. Returns (`lstat`s, files read) of the
    /// watched store's checkpoint.
    fn check(&mut self, what: &str) -> (usize, usize) {
        let (stats, _, reads) = self.watched.scan_counts();
        let ours = self.watched.create(what).expect("checkpoint");
        let (stats2, _, reads2) = self.watched.scan_counts();
        let theirs = self.reference.create(what).expect("reference checkpoint");
        assert_eq!(
            self.watched.tree_of(ours.id).expect("tree"),
            self.reference.tree_of(theirs.id).expect("tree"),
            "tree after {what}"
        );
        assert_eq!(
            ours.fingerprint, theirs.fingerprint,
            "fingerprint after {what}"
        );
        let fresh = fingerprint(&self.ws, &ExcludeSet::default()).expect("scan");
        assert_eq!(
            ours.fingerprint, fresh.fingerprint,
            "fresh scan after {what}"
        );
        (stats2 - stats, reads2 - reads)
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    fn sh(&self, script: &str) {
        let ok = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&self.ws)
            .status()
            .expect("sh")
            .success();
        assert!(ok, "{script}");
    }
}

#[test]
fn a_checkpoint_without_changes_reads_nothing() {
    let mut f = fixture(DEFAULT_BOUND);
    let first = f.watched.latest().expect("latest").expect("one");
    let counts = f.watched.scan_counts();
    let again = f.watched.create("again").expect("checkpoint");
    assert_eq!(f.watched.scan_counts(), counts, "nothing examined");
    let third = f.watched.create("third").expect("checkpoint");
    assert_eq!(f.watched.scan_counts(), counts, "nothing examined");
    let tree = f.watched.tree_of(first.id).expect("tree");
    assert_eq!(f.watched.tree_of(again.id).expect("tree"), tree);
    assert_eq!(f.watched.tree_of(third.id).expect("tree"), tree);
    assert_eq!(third.fingerprint, first.fingerprint);

    // What no checkpoint holds is not watched either.
    f.write("target/debug/out", "rebuilt\n");
    f.write(".git/HEAD", "ref: refs/heads/other\n");
    f.write("src/__pycache__/m.pyc", "cached\n");
    assert_eq!(f.check("excluded only"), (1, 0), "only the new directory");
    assert_eq!(f.check("nothing"), (0, 0));
}

#[test]
fn every_kind_of_change_gives_what_a_full_scan_gives() {
    let mut f = fixture(DEFAULT_BOUND);
    let small = |(stats, reads): (usize, usize), most: usize, what: &str| {
        assert!(
            stats <= most && reads <= most,
            "{what}: {stats} lstats, {reads} reads"
        );
    };

    // In place, same size.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(f.path("a.txt"))
        .expect("open");
    std::os::unix::fs::FileExt::write_at(&file, b"ONE", 0).expect("write");
    drop(file);
    small(f.check("in place"), 1, "in place");

    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(f.path("a.txt"))
        .expect("open");
    std::io::Write::write_all(&mut file, b"three\n").expect("append");
    drop(file);
    small(f.check("append"), 1, "append");

    f.sh("truncate -s 2 a.txt");
    small(f.check("truncate"), 1, "truncate");

    std::fs::set_permissions(f.path("src/lib.rs"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    small(f.check("chmod"), 1, "chmod");

    f.write("src/deep/new.rs", "new\n");
    small(f.check("create"), 1, "create");

    std::fs::remove_file(f.path("src/deep/er/x.rs")).expect("rm");
    small(f.check("delete"), 1, "delete");

    symlink("../a.txt", f.path("docs/link")).expect("symlink");
    std::fs::remove_file(f.path("lib")).expect("rm");
    symlink("docs", f.path("lib")).expect("symlink");
    small(f.check("symlinks"), 2, "symlinks");

    std::fs::rename(f.path("docs/readme.md"), f.path("src/readme.md")).expect("mv");
    small(f.check("rename a file"), 2, "rename a file");

    std::fs::rename(f.path("src/deep"), f.path("moved")).expect("mv dir");
    f.check("rename a directory");
    f.write("moved/er/later.rs", "later\n");
    small(
        f.check("in the moved directory"),
        1,
        "in the moved directory",
    );

    f.sh("mkdir -p n/e/s/t && echo 1 > n/one && echo 2 > n/e/s/t/two && ln -s two n/e/s/t/l");
    small(f.check("nested directories"), 6, "nested directories");
    f.write("n/e/s/t/three", "3\n");
    small(f.check("in a new directory"), 1, "in a new directory");

    // A removed directory is a full scan (a descriptor opened through it
    // may have written on unseen), then the journal vouches again.
    f.sh("rm -r n/e");
    f.check("remove a tree");
    f.write("n/again", "again\n");
    small(f.check("after the removal"), 1, "after the removal");

    // A file swapped for a directory, and back.
    std::fs::remove_file(f.path("src/readme.md")).expect("rm");
    f.write("src/readme.md/inner", "inner\n");
    f.check("file to directory");
    std::fs::remove_dir_all(f.path("src/readme.md")).expect("rm");
    f.write("src/readme.md", "file again\n");
    f.check("directory to file");

    // Names git refuses, and excluded names, below watched directories.
    f.write("src/.GIT/x", "hidden\n");
    f.write("src/node_modules/m.js", "m\n");
    f.check("refused names");
}

#[test]
fn a_write_through_a_removed_directory_is_seen() {
    let mut f = fixture(DEFAULT_BOUND);
    f.write("kept", "before\n");
    f.check("kept");
    // Opened through a second name in a directory that then goes: the
    // writes fire events on no watched directory.
    f.sh("mkdir a && ln kept a/f && exec 3>>a/f && rm a/f && rmdir a && echo after >&3");
    f.check("written through a removed directory");
}

#[test]
fn writes_through_other_names_are_seen() {
    let mut f = fixture(DEFAULT_BOUND);
    std::fs::hard_link(f.path("a.txt"), f.path("docs/second")).expect("ln");
    std::fs::hard_link(f.path("a.txt"), f.path("target/third")).expect("ln");
    f.check("hard links");
    f.write("docs/second", "through the second name\n");
    f.check("write through a second name");
    // No event at all: the excluded name is not watched.
    std::fs::write(f.path("target/third"), "through the third\n").expect("write");
    f.check("write through an unwatched name");
}

#[test]
fn a_write_through_a_shared_mapping_is_seen() {
    let mut f = fixture(DEFAULT_BOUND);
    let script = "import mmap, sys\n\
        f = open(sys.argv[1], 'r+b')\n\
        m = mmap.mmap(f.fileno(), 0)\n\
        f.close()\n\
        m[0:4] = b'MMAP'\n\
        m.close()\n";
    let ok = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(f.path("src/lib.rs"))
        .status()
        .expect("python3")
        .success();
    assert!(ok);
    assert!(
        std::fs::read_to_string(f.path("src/lib.rs"))
            .expect("read")
            .starts_with("MMAP")
    );
    assert_eq!(f.check("write through a shared mapping").1, 1);
}

#[test]
fn many_creates_and_an_overflowing_bound() {
    let mut f = fixture(DEFAULT_BOUND);
    for i in 0..20_000 {
        f.write(&format!("many/d{}/f{i}.txt", i % 50), &format!("{i}\n"));
    }
    f.check("20,000 files");
    assert_eq!(f.check("nothing after many"), (0, 0));

    let mut f = fixture(5);
    for i in 0..10 {
        f.write(&format!("over/f{i}"), "x\n");
    }
    let (stats, _) = f.check("past the bound");
    assert!(stats >= 10, "a full scan");
    f.write("over/f3", "changed\n");
    assert!(f.check("within the bound again").0 <= 1);
}

#[test]
fn a_restore_is_seen() {
    let mut f = fixture(DEFAULT_BOUND);
    let first = f.watched.latest().expect("latest").expect("one");
    f.write("src/lib.rs", "changed\n");
    f.write("extra/new.txt", "new\n");
    f.check("changed");
    let root = crate::workspace::WorkspaceRoot::open(&f.ws).expect("root");
    f.watched.restore(first.id, &root).expect("restore");
    f.check("restored");
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_changes_match_full_scans() {
    let mut f = fixture(DEFAULT_BOUND);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let dirs = ["", "src", "src/deep", "docs", "n", "n/m", "target", "k/l/m"];
    let names = ["a", "b", "c.rs", "d.txt", "e"];
    let pick = |rng: &mut Rng| {
        let dir = dirs[rng.below(dirs.len())];
        let name = names[rng.below(names.len())];
        if dir.is_empty() {
            name.to_string()
        } else {
            format!("{dir}/{name}")
        }
    };
    for batch in 0..20 {
        for _ in 0..15 {
            let path = pick(&mut rng);
            let full = f.path(&path);
            let other = f.path(&pick(&mut rng));
            let _ = match rng.below(10) {
                0 | 1 => std::fs::create_dir_all(full.parent().expect("parent"))
                    .and_then(|()| std::fs::write(&full, format!("{}\n", rng.next()))),
                2 => std::fs::OpenOptions::new()
                    .append(true)
                    .open(&full)
                    .and_then(|mut file| std::io::Write::write_all(&mut file, b"more\n")),
                3 => std::fs::remove_file(&full),
                4 => std::fs::set_permissions(
                    &full,
                    std::fs::Permissions::from_mode(if rng.below(2) == 0 { 0o755 } else { 0o644 }),
                ),
                5 => symlink(&path, &full),
                6 => std::fs::rename(&full, &other),
                7 => std::fs::hard_link(&full, &other),
                8 => {
                    let dir = f.path(dirs[1 + rng.below(dirs.len() - 1)]);
                    let to = f.path(&format!("r{}", rng.below(3)));
                    std::fs::rename(dir, to)
                }
                _ => std::fs::remove_dir_all(f.path(dirs[1 + rng.below(dirs.len() - 1)])),
            };
        }
        f.check(&format!("batch {batch}"));
    }
}
