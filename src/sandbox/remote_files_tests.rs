use super::*;
use std::os::unix::fs::PermissionsExt;

fn limits(max_file_bytes: u64, max_bytes: u64, max_files: u64) -> WorkspaceLimits {
    WorkspaceLimits {
        max_file_bytes,
        max_bytes,
        max_files,
        min_free_bytes: 0,
        max_checkpoint_bytes: 0,
    }
}

/// One entry of a tar: its name, kind and bytes.
type Entry = (Vec<u8>, tar::EntryType, Vec<u8>);

/// Every entry of a tar.
fn entries(tar: impl Read) -> Vec<Entry> {
    let mut archive = tar::Archive::new(tar);
    archive
        .entries()
        .expect("tar")
        .map(|e| {
            let mut e = e.expect("entry");
            let name = e.path_bytes().into_owned();
            let kind = e.header().entry_type();
            let mut bytes = Vec::new();
            e.read_to_end(&mut bytes).expect("read");
            (name, kind, bytes)
        })
        .collect()
}

/// What `pack` uploads: its removed paths and its files' entries.
fn unpacked_push(file: std::fs::File) -> (Vec<String>, Vec<Entry>) {
    let outer = entries(file);
    assert_eq!(outer.len(), 2);
    assert_eq!(outer[0].0, b"in/removed.json");
    assert_eq!(outer[1].0, b"in/files.tar");
    let removed: Vec<String> = serde_json::from_slice(&outer[0].2).expect("json");
    let removed = removed
        .iter()
        .map(|h| String::from_utf8(hex::decode(h).expect("hex")).expect("utf-8"))
        .collect();
    (removed, entries(outer[1].2.as_slice()))
}

fn names(files: &[Entry]) -> Vec<String> {
    files
        .iter()
        .map(|(n, _, _)| String::from_utf8_lossy(n).into_owned())
        .collect()
}

/// The files tar of a first push of `root`.
fn unpacked_files_tar(root: &Path) -> std::io::Cursor<Vec<u8>> {
    let (tar, _) = HostSide::new(root, None)
        .pack()
        .expect("pack")
        .expect("a push");
    let outer = entries(tar);
    std::io::Cursor::new(outer[1].2.clone())
}

#[test]
fn the_first_push_is_the_whole_copy_and_later_ones_only_what_changed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::write(root.join("a.txt"), "one\n").expect("write");
    std::fs::create_dir_all(root.join("src/deep")).expect("mkdir");
    std::fs::write(root.join("src/deep/b.rs"), "fn b() {}\n").expect("write");
    std::fs::write(root.join("src/run.sh"), "#!/bin/sh\n").expect("write");
    std::fs::set_permissions(
        root.join("src/run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .expect("chmod");
    std::os::unix::fs::symlink("/etc/passwd", root.join("outside")).expect("link");
    let fifo = root.join("fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .expect("fifo");

    let mut host = HostSide::new(root, None);
    let (tar, pending) = host.pack().expect("pack").expect("a first push");
    let (removed, files) = unpacked_push(tar);
    assert!(removed.is_empty());
    assert_eq!(
        names(&files),
        [
            "a.txt",
            "outside",
            "src",
            "src/deep",
            "src/deep/b.rs",
            "src/run.sh"
        ],
        "parents before children, no fifo"
    );
    let link = files.iter().find(|f| f.0 == b"outside").expect("link");
    assert_eq!(
        link.1,
        tar::EntryType::Symlink,
        "a link goes as a link, never followed"
    );
    let script = &files.iter().find(|f| f.0 == b"src/run.sh").expect("script");
    assert_eq!(script.2, b"#!/bin/sh\n");
    let mut check = tar::Archive::new(unpacked_files_tar(root));
    for entry in check.entries().expect("entries") {
        let entry = entry.expect("entry");
        if entry.path_bytes().as_ref() == b"a.txt" {
            let want = std::fs::symlink_metadata(root.join("a.txt")).expect("lstat");
            assert_eq!(
                entry.header().mtime().expect("mtime") as i64,
                std::os::unix::fs::MetadataExt::mtime(&want),
                "a file keeps its time"
            );
        }
    }
    host.pushed(pending);
    assert!(host.pack().expect("pack").is_none(), "nothing changed");

    std::fs::write(root.join("a.txt"), "two\n").expect("write");
    std::fs::remove_dir_all(root.join("src/deep")).expect("rm");
    let (tar, _) = host.pack().expect("pack").expect("a change");
    let (removed, files) = unpacked_push(tar);
    assert_eq!(removed, ["src/deep"], "a removed folder is named alone");
    assert_eq!(names(&files), ["a.txt"]);
    assert_eq!(files[0].2, b"two\n");
}

/// A tar entry whose name is written as given (the tar crate refuses `..`).
fn raw_entry(tar: &mut Vec<u8>, name: &[u8], kind: tar::EntryType, data: &[u8], link: &[u8]) {
    let mut h = tar::Header::new_ustar();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(data.len() as u64);
    h.set_cksum();
    tar.extend_from_slice(h.as_bytes());
    tar.extend_from_slice(data);
    tar.resize(tar.len().div_ceil(512) * 512, 0);
}

/// What a pull downloads: `/sync/out` with its two files.
fn download(removed: &[&[u8]], changes: &[u8]) -> Vec<u8> {
    let list: Vec<String> = removed.iter().map(hex::encode).collect();
    let list = serde_json::to_vec(&list).expect("json");
    // In the engine's directory order, which need not be the order of use.
    let mut b = tar::Builder::new(Vec::new());
    b.append_data(
        &mut header(changes.len() as u64),
        "out/changes.tar",
        changes,
    )
    .expect("append");
    b.append_data(
        &mut header(list.len() as u64),
        "out/removed.json",
        list.as_slice(),
    )
    .expect("append");
    b.into_inner().expect("tar")
}

fn finished(mut tar: Vec<u8>) -> Vec<u8> {
    tar.extend_from_slice(&[0; 1024]);
    tar
}

#[test]
fn a_pull_brings_back_changes_and_removals_whatever_they_replace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::write(root.join("keep.txt"), "kept").expect("write");
    std::fs::create_dir_all(root.join("gone/inner")).expect("mkdir");
    std::fs::write(root.join("gone/inner/x"), "x").expect("write");
    std::fs::create_dir_all(root.join("was_dir/sub")).expect("mkdir");
    std::fs::write(root.join("was_file"), "f").expect("write");
    let mut changes = Vec::new();
    use tar::EntryType::{Directory, Regular, Symlink};
    raw_entry(&mut changes, b"new", Directory, b"", b"");
    raw_entry(
        &mut changes,
        b"new/tool.sh",
        Regular,
        b"#!/bin/sh\necho hi\n",
        b"",
    );
    raw_entry(&mut changes, b"was_dir", Regular, b"now a file", b"");
    raw_entry(
        &mut changes,
        b"was_file/inside",
        Regular,
        b"now a folder",
        b"",
    );
    raw_entry(&mut changes, b"up", Symlink, b"", b"../../etc");
    raw_entry(&mut changes, b"name\xff", Regular, b"bytes", b"");
    let pulled_from = download(&[b"gone"], &finished(changes));

    let mut host = HostSide::new(root, None);
    let pulled = host
        .unpack(std::io::Cursor::new(pulled_from))
        .expect("unpack");
    assert_eq!(pulled.removed, 1);
    assert_eq!(pulled.entries, 6);
    assert!(!root.join("gone").exists());
    assert_eq!(std::fs::read(root.join("keep.txt")).expect("read"), b"kept");
    assert_eq!(
        std::fs::read(root.join("new/tool.sh")).expect("read"),
        b"#!/bin/sh\necho hi\n"
    );
    assert_eq!(
        std::fs::read(root.join("was_dir")).expect("read"),
        b"now a file"
    );
    assert_eq!(
        std::fs::read(root.join("was_file/inside")).expect("read"),
        b"now a folder"
    );
    let link = std::fs::symlink_metadata(root.join("up")).expect("lstat");
    assert!(link.file_type().is_symlink(), "a link stays a link");
    assert_eq!(
        std::fs::read_link(root.join("up")).expect("readlink"),
        Path::new("../../etc")
    );
    let odd = root.join(std::ffi::OsStr::from_bytes(b"name\xff"));
    assert_eq!(std::fs::read(odd).expect("read"), b"bytes");
    assert!(
        host.pack().expect("pack").is_none(),
        "what came back is synced"
    );
}

#[test]
fn a_hostile_pull_cannot_write_outside_the_workspace() {
    let outside = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ws");
    std::fs::create_dir(&root).expect("mkdir");
    std::os::unix::fs::symlink(outside.path(), root.join("door")).expect("link");
    use tar::EntryType::Regular;
    for name in [&b"../escape"[..], b"/abs/escape", b"a/../../escape", b""] {
        let mut changes = Vec::new();
        raw_entry(&mut changes, name, Regular, b"x", b"");
        let got = HostSide::new(&root, None)
            .unpack(std::io::Cursor::new(download(&[], &finished(changes))));
        let error = got.expect_err("refused");
        assert!(
            error.contains("outside the workspace") || error.contains("reading"),
            "{error}"
        );
    }
    let got = HostSide::new(&root, None).unpack(std::io::Cursor::new(download(
        &[&[b'a'; 3000][..]],
        &finished(Vec::new()),
    )));
    assert!(
        got.expect_err("refused")
            .contains("longer than the 2048 taken")
    );
    let got = HostSide::new(&root, None).unpack(std::io::Cursor::new(download(
        &[b"../x"],
        &finished(Vec::new()),
    )));
    assert!(got.expect_err("refused").contains("outside the workspace"));
    // Through a link planted by a command: the link goes, a folder takes its place.
    let mut changes = Vec::new();
    raw_entry(&mut changes, b"door/planted", Regular, b"x", b"");
    HostSide::new(&root, None)
        .unpack(std::io::Cursor::new(download(&[], &finished(changes))))
        .expect("unpack");
    assert_eq!(
        std::fs::read_dir(outside.path()).expect("list").count(),
        0,
        "nothing written through the link"
    );
    assert!(root.join("door").is_dir() && root.join("door/planted").is_file());
    assert!(!dir.path().join("escape").exists());
}

#[test]
fn a_pull_past_the_workspace_limits_is_refused_before_it_is_read_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    use tar::EntryType::Regular;
    let mut changes = Vec::new();
    raw_entry(&mut changes, b"big", Regular, &[b'x'; 2000], b"");
    let got = HostSide::new(root, Some(&limits(1000, 1 << 20, 100)))
        .unpack(std::io::Cursor::new(download(&[], &finished(changes))));
    assert!(
        got.expect_err("refused")
            .contains("past the limit of 1000 for one file")
    );
    assert!(!root.join("big").exists());

    let mut changes = Vec::new();
    for name in [b"a", b"b", b"c"] {
        raw_entry(&mut changes, name, Regular, &[b'x'; 600], b"");
    }
    let got = HostSide::new(root, Some(&limits(1000, 1500, 100))).unpack(std::io::Cursor::new(
        download(&[], &finished(changes.clone())),
    ));
    assert!(got.expect_err("refused").contains("limit of 1500 bytes"));
    let got = HostSide::new(root, Some(&limits(1000, 1 << 20, 2))).unpack(std::io::Cursor::new(
        download(&[b"a", b"b", b"c"], &finished(Vec::new())),
    ));
    assert!(
        got.expect_err("refused")
            .contains("more than the workspace's 2 entries")
    );
    let got = HostSide::new(root, Some(&limits(1000, 1 << 20, 2)))
        .unpack(std::io::Cursor::new(download(&[], &finished(changes))));
    assert!(got.expect_err("refused").contains("limit of 2 entries"));
}

#[test]
fn a_pull_without_its_record_of_removals_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = tar::Builder::new(Vec::new());
    let changes = finished(Vec::new());
    b.append_data(
        &mut header(changes.len() as u64),
        "out/changes.tar",
        changes.as_slice(),
    )
    .expect("append");
    let bytes = b.into_inner().expect("tar");
    let got = HostSide::new(dir.path(), None).unpack(std::io::Cursor::new(bytes));
    assert!(
        got.expect_err("refused")
            .contains("no record of removed paths")
    );
    let got = HostSide::new(dir.path(), None).unpack(std::io::Cursor::new(b"not a tar at all"));
    assert!(got.is_err());
}

#[test]
fn the_volumes_are_tmpfs_sized_by_the_limits_and_owned_by_the_sandbox_user() {
    let options = tmpfs_options(1 << 30, 5000);
    assert_eq!(options["type"], "tmpfs");
    assert_eq!(options["device"], "tmpfs");
    assert_eq!(
        options["o"],
        format!(
            "size={},nr_inodes=5000,uid={},gid={},mode=0755",
            1u64 << 30,
            super::super::SANDBOX_UID,
            super::super::SANDBOX_GID
        )
    );
    let mib = 1u64 << 20;
    assert_eq!(
        tmpfs_size(&limits(mib, 100 * mib, 10)),
        (100 * mib + 40960 + 64 * mib, 1034),
        "a page per file"
    );
    assert_eq!(
        tmpfs_size(&limits(mib, 100 * mib, 1_000_000)),
        (200 * mib + 64 * mib, 1_001_024),
        "never more than the limit again"
    );
    let v = Volumes::of("minicoder-r1-command-ab12");
    assert_eq!(v.workspace, "minicoder-r1-command-ab12-workspace");
    assert_eq!(v.sync, "minicoder-r1-command-ab12-sync");
}

#[test]
fn the_ca_bundle_goes_with_the_first_push_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("mkdir");
    let bundle = dir.path().join("ca.pem");
    std::fs::write(&bundle, "-----BEGIN CERTIFICATE-----\n").expect("write");
    let mut host = HostSide::new(&ws, None).with_ca_bundle(Some(&bundle));
    let (tar, pending) = host
        .pack()
        .expect("pack")
        .expect("sent though the copy is empty");
    let outer = entries(tar);
    let names: Vec<&[u8]> = outer.iter().map(|e| e.0.as_slice()).collect();
    assert_eq!(
        names,
        [&b"in/removed.json"[..], b"in/files.tar", b"ca-bundle.pem"]
    );
    assert_eq!(outer[2].2, b"-----BEGIN CERTIFICATE-----\n");
    host.pushed(pending);
    assert!(host.pack().expect("pack").is_none(), "sent once");
}

#[test]
fn times_go_to_the_nanosecond_both_ways() {
    assert_eq!(pax_record("mtime", "1.5"), "13 mtime=1.5\n");
    let long = pax_record("mtime", "1700000000.123456789");
    assert_eq!(
        long.len(),
        long.split(' ').next().unwrap().parse::<usize>().unwrap()
    );
    assert_eq!(
        parse_time("1700000000.123456789"),
        Some((1_700_000_000, 123_456_789))
    );
    assert_eq!(
        parse_time("1700000000.5"),
        Some((1_700_000_000, 500_000_000))
    );
    assert_eq!(parse_time("12"), Some((12, 0)));
    assert_eq!(parse_time("12.x"), None);

    // Pushed with its time; pulled back with the engine's.
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::write(root.join("a.txt"), "a").expect("write");
    let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123_456_789);
    std::fs::File::options()
        .write(true)
        .open(root.join("a.txt"))
        .expect("open")
        .set_modified(t)
        .expect("set time");
    let mut files = tar::Archive::new(unpacked_files_tar(root));
    let mut entry = files
        .entries()
        .expect("entries")
        .next()
        .expect("one")
        .expect("entry");
    assert_eq!(entry.path_bytes().as_ref(), b"a.txt");
    assert_eq!(mtime_of(&mut entry), Some((1_700_000_000, 123_456_789)));

    let mut changes = Vec::new();
    let record = pax_record("mtime", "1600000000.000000042");
    raw_entry(
        &mut changes,
        b"PaxHeaders/x",
        tar::EntryType::XHeader,
        record.as_bytes(),
        b"",
    );
    raw_entry(
        &mut changes,
        b"built.o",
        tar::EntryType::Regular,
        b"obj",
        b"",
    );
    HostSide::new(root, None)
        .unpack(std::io::Cursor::new(download(&[], &finished(changes))))
        .expect("unpack");
    let got = std::fs::metadata(root.join("built.o"))
        .expect("stat")
        .modified()
        .expect("time");
    assert_eq!(
        got,
        std::time::UNIX_EPOCH + std::time::Duration::new(1_600_000_000, 42)
    );
}

#[test]
fn a_pull_with_a_huge_extension_header_is_refused_before_it_is_held() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut changes = Vec::new();
    let record = pax_record("comment", &"x".repeat(100_000));
    raw_entry(
        &mut changes,
        b"PaxHeaders/x",
        tar::EntryType::XHeader,
        record.as_bytes(),
        b"",
    );
    raw_entry(&mut changes, b"f", tar::EntryType::Regular, b"f", b"");
    let got = HostSide::new(dir.path(), None)
        .unpack(std::io::Cursor::new(download(&[], &finished(changes))));
    assert!(
        got.expect_err("refused")
            .contains("more than the 65536 taken")
    );
    assert!(!dir.path().join("f").exists());
}

#[test]
fn a_file_past_the_limit_for_one_file_is_never_read_for_a_push() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::write(root.join("small"), "s").expect("write");
    // 1 TB, sparse: reading it would take hours.
    let big = std::fs::File::create(root.join("big")).expect("create");
    big.set_len(1 << 40).expect("sparse");
    let (tar, _) = HostSide::new(root, Some(&limits(1 << 20, 1 << 30, 100)))
        .pack()
        .expect("pack")
        .expect("a push");
    let (_, files) = unpacked_push(tar);
    assert_eq!(names(&files), ["small"]);
}
