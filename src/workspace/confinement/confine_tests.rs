use super::*;
use std::os::unix::fs::{PermissionsExt, symlink};

fn setup() -> (tempfile::TempDir, PathBuf, WorkspaceRoot) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir ws");
    let root = WorkspaceRoot::open(&ws).expect("open root");
    (tmp, ws, root)
}

fn is_escape(r: Result<impl std::fmt::Debug, WorkspaceError>) -> bool {
    matches!(r, Err(WorkspaceError::PathEscape { .. }))
}

#[test]
fn reads_and_writes_inside() {
    let (_t, ws, root) = setup();
    root.create_dir_all(Path::new("a/b")).expect("mkdir");
    root.write(Path::new("a/b/f.txt"), b"hello").expect("write");
    assert_eq!(
        std::fs::read(ws.join("a/b/f.txt")).expect("read back"),
        b"hello"
    );
    assert_eq!(
        root.read(Path::new("./a/b/f.txt"), 1 << 20).expect("read"),
        b"hello"
    );
    let names: Vec<_> = root
        .read_dir(Path::new("a"))
        .expect("ls")
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, vec![OsString::from("b")]);
    root.remove_file(Path::new("a/b/f.txt")).expect("rm");
    assert!(!ws.join("a/b/f.txt").exists());
}

#[test]
fn root_symlink_to_slash_cannot_reach_the_host() {
    let (tmp, ws, root) = setup();
    // What `ln -s / root` inside the sandbox leaves behind.
    symlink("/", ws.join("root")).expect("symlink");
    assert!(is_escape(root.read(Path::new("root/etc/passwd"), 1 << 20)));
    let outside = tmp.path().join("outside-target");
    symlink(tmp.path(), ws.join("up")).expect("symlink");
    assert!(is_escape(
        root.write(Path::new("root/tmp/minicoder-confine-test"), b"x")
    ));
    assert!(is_escape(root.write(Path::new("up/outside-target"), b"x")));
    assert!(!outside.exists());
    assert!(!Path::new("/tmp/minicoder-confine-test").exists());
    assert!(is_escape(root.create_dir_all(Path::new("root/tmp/mc-dir"))));
    assert!(is_escape(root.read_dir(Path::new("root/etc"))));
    assert!(is_escape(root.metadata(Path::new("root/etc/passwd"))));
}

#[test]
fn dotdot_absolute_and_relative_escapes_are_refused() {
    let (tmp, ws, root) = setup();
    std::fs::write(tmp.path().join("x"), b"secret").expect("write outside");
    assert!(is_escape(root.read(Path::new("../x"), 1 << 20)));
    assert!(is_escape(root.read(Path::new("/etc/passwd"), 1 << 20)));
    assert!(is_escape(root.write(Path::new("a/../../x"), b"pwned")));
    std::fs::create_dir(ws.join("d")).expect("mkdir");
    symlink("../../x", ws.join("d/link")).expect("symlink");
    assert!(is_escape(root.read(Path::new("d/link"), 1 << 20)));
    assert_eq!(
        std::fs::read(tmp.path().join("x")).expect("read"),
        b"secret"
    );
    let msg = root
        .read(Path::new("../x"), 1 << 20)
        .expect_err("refused")
        .to_string();
    assert!(
        msg.contains("outside the workspace") && msg.contains("relative"),
        "{msg}"
    );
}

#[test]
fn symlink_chain_inside_the_workspace_works() {
    let (_t, ws, root) = setup();
    std::fs::create_dir_all(ws.join("real/dir")).expect("mkdir");
    std::fs::write(ws.join("real/dir/f"), b"data").expect("write");
    symlink("real", ws.join("l1")).expect("symlink");
    symlink("l1/dir", ws.join("l2")).expect("symlink");
    symlink("../l2/f", ws.join("real/l3")).expect("symlink");
    assert_eq!(
        root.read(Path::new("l2/f"), 1 << 20).expect("read"),
        b"data"
    );
    assert_eq!(
        root.read(Path::new("real/l3"), 1 << 20).expect("read"),
        b"data"
    );
    root.write(Path::new("l2/g"), b"new")
        .expect("write through inside link");
    assert_eq!(std::fs::read(ws.join("real/dir/g")).expect("read"), b"new");
    assert_eq!(
        root.read_link(Path::new("l1")).expect("readlink"),
        PathBuf::from("real")
    );
}

#[test]
fn planted_symlink_at_final_component_is_replaced_not_followed() {
    let (tmp, ws, root) = setup();
    let target = tmp.path().join("victim");
    std::fs::write(&target, b"original").expect("write");
    symlink(&target, ws.join("f")).expect("symlink");
    std::fs::write(ws.join("inner"), b"inner").expect("write");
    symlink("inner", ws.join("g")).expect("symlink");
    root.write(Path::new("f"), b"new")
        .expect("write replaces link");
    root.write(Path::new("g"), b"new")
        .expect("write replaces link");
    assert_eq!(std::fs::read(&target).expect("read"), b"original");
    assert_eq!(std::fs::read(ws.join("inner")).expect("read"), b"inner");
    let meta = std::fs::symlink_metadata(ws.join("f")).expect("lstat");
    assert!(meta.file_type().is_file());
    // Removing a link removes the link only.
    symlink(&target, ws.join("h")).expect("symlink");
    root.remove_file(Path::new("h")).expect("rm");
    assert!(target.exists());
}

#[test]
fn write_keeps_or_sets_the_mode() {
    let (_t, ws, root) = setup();
    root.write_with_mode(Path::new("run.sh"), b"#!/bin/sh\n", 0o755)
        .expect("write");
    let mode = std::fs::metadata(ws.join("run.sh"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    root.write(Path::new("run.sh"), b"#!/bin/sh\ntrue\n")
        .expect("rewrite");
    let meta = root.metadata(Path::new("run.sh")).expect("meta");
    assert_eq!(
        (meta.kind, meta.permissions & 0o777, meta.len),
        (EntryKind::File, 0o755, 15)
    );
}

#[test]
fn reading_a_fifo_does_not_block() {
    let (_t, ws, root) = setup();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.join("fifo"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    assert!(root.read(Path::new("fifo"), 1 << 20).is_err());
    assert_eq!(
        root.metadata(Path::new("fifo")).expect("meta").kind,
        EntryKind::Special
    );
}

#[test]
fn owner_is_applied_to_new_entries() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    let (_t, ws, root) = setup();
    let root = root.with_owner(Some((10001, 10001)));
    root.create_dir_all(Path::new("d")).expect("mkdir");
    root.write(Path::new("d/f"), b"x").expect("write");
    root.symlink(Path::new("d/l"), Path::new("f"))
        .expect("symlink");
    use std::os::unix::fs::MetadataExt;
    for p in ["d", "d/f", "d/l"] {
        let m = std::fs::symlink_metadata(ws.join(p)).expect("lstat");
        assert_eq!((m.uid(), m.gid()), (10001, 10001), "{p}");
    }
}

#[test]
fn a_prefix_read_stops_at_its_limit_and_stays_inside() {
    let (tmp, ws, root) = setup();
    std::fs::write(ws.join("big"), vec![b'x'; 100_000]).expect("write");
    let (bytes, size) = root.read_prefix(Path::new("big"), 1000).expect("read");
    assert_eq!((bytes.len(), size), (1000, 100_000));
    let (bytes, size) = root.read_prefix(Path::new("big"), 1 << 20).expect("read");
    assert_eq!((bytes.len(), size), (100_000, 100_000));
    std::fs::write(tmp.path().join("outside"), b"secret").expect("write");
    symlink("../outside", ws.join("link")).expect("symlink");
    assert!(is_escape(root.read_prefix(Path::new("link"), 10)));
    rustix::fs::mknodat(
        rustix::fs::CWD,
        ws.join("fifo"),
        FileType::Fifo,
        Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    assert!(
        root.read_prefix(Path::new("fifo"), 10).is_err(),
        "does not block"
    );
    assert!(root.read_prefix(Path::new("missing"), 10).is_err());
}

#[test]
fn a_file_over_the_bound_is_refused_without_being_read() {
    let (_t, ws, root) = setup();
    // 1 GiB, sparse: reading it whole would take a gibibyte of memory.
    std::fs::File::create(ws.join("big"))
        .and_then(|f| f.set_len(1 << 30))
        .expect("sparse file");
    match root.read(Path::new("big"), 4096) {
        Err(WorkspaceError::Io { source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::FileTooLarge)
        }
        other => panic!("{:?}", other.map(|b| b.len())),
    }
    std::fs::write(ws.join("small"), b"exactly 16 bytes").expect("write");
    assert_eq!(
        root.read(Path::new("small"), 16).expect("read"),
        b"exactly 16 bytes"
    );
    assert!(root.read(Path::new("small"), 15).is_err());
}
