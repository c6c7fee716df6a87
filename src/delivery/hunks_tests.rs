use super::*;
use crate::workspace::{CheckpointStore, ExcludeSet};

const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n";

/// The patch a run exports: `a.txt` gets two hunks (one adds a line),
/// `new.txt` is added, `gone.txt` deleted.
fn run_patch() -> (tempfile::TempDir, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), TEN).unwrap();
    std::fs::write(ws.join("gone.txt"), "bye\n").unwrap();
    let mut store =
        CheckpointStore::open(&tmp.path().join("store"), &ws, ExcludeSet::default()).unwrap();
    let base = store.create("baseline").unwrap();
    let edited = edit(true, true);
    std::fs::write(ws.join("a.txt"), edited).unwrap();
    std::fs::write(ws.join("new.txt"), "new\n").unwrap();
    std::fs::remove_file(ws.join("gone.txt")).unwrap();
    let export = store.export_patch(base.id).unwrap();
    (tmp, export.patch.into_bytes())
}

/// TEN with line 2 made two lines and line 18 changed, as asked.
fn edit(first: bool, second: bool) -> String {
    (1..=20)
        .map(|n| match n {
            2 if first => "two\nand a half\n".to_string(),
            18 if second => "eighteen\n".to_string(),
            n => format!("{n}\n"),
        })
        .collect()
}

/// What libgit2 makes of `patch` applied to `a.txt` = TEN.
fn applied_a(patch: &[u8]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("a.txt"), TEN).unwrap();
    std::fs::write(tmp.path().join("gone.txt"), "bye\n").unwrap();
    let source = super::super::Source::open(tmp.path()).unwrap();
    let (diff, changes) = super::super::conflict::parse(patch).unwrap();
    let plan = super::super::plan::plan(&source, &diff, changes, None).unwrap();
    let write = plan.writes.iter().find(|w| w.path == b"a.txt").unwrap();
    String::from_utf8(write.post.content().unwrap().to_vec()).unwrap()
}

#[test]
fn hunks_are_numbered_per_hunk_and_whole_files_once() {
    let (_t, patch) = run_patch();
    let files = split(&patch).unwrap();
    assert_eq!(files.len(), 3, "{}", String::from_utf8_lossy(&patch));
    let a = files.iter().position(|f| f.display == "a.txt").unwrap();
    assert_eq!(files[a].hunks.len(), 2);
    assert!(!files[a].whole);
    assert!(
        files
            .iter()
            .filter(|f| f.display != "a.txt")
            .all(|f| f.whole)
    );
    assert_eq!(numbering(&files).len(), 4);
    let all = by_numbers(&files, &[1, 2, 3, 4]).unwrap();
    assert_eq!(all.counts(&files), (4, 4));
    assert_eq!(build(&files, &all), patch, "all hunks give the patch back");
}

#[test]
fn the_second_hunk_alone_applies_at_its_moved_start() {
    let (_t, patch) = run_patch();
    let files = split(&patch).unwrap();
    let a = files.iter().position(|f| f.display == "a.txt").unwrap();
    let mut only = Selection::none(&files);
    only.chosen[a][1] = true;
    let subset = build(&files, &only);
    let text = String::from_utf8_lossy(&subset);
    // The first hunk added a line: without it the second starts one earlier.
    let run_head = String::from_utf8_lossy(&files[a].hunks[1].head).into_owned();
    assert!(run_head.starts_with("@@ -15,6 +16,6 @@"), "{run_head}");
    assert!(text.contains("@@ -15,6 +15,6 @@"), "{text}");
    assert!(
        text.contains("..0000000000000000000000000000000000000000"),
        "{text}"
    );
    assert_eq!(applied_a(&subset), edit(false, true));
    let mut first = Selection::none(&files);
    first.chosen[a][0] = true;
    assert_eq!(applied_a(&build(&files, &first)), edit(true, false));
}

#[test]
fn a_reviewed_patch_maps_back_to_its_hunks_and_a_foreign_hunk_is_refused() {
    let (_t, patch) = run_patch();
    let files = split(&patch).unwrap();
    let a = files.iter().position(|f| f.display == "a.txt").unwrap();
    let mut only = Selection::none(&files);
    only.chosen[a][1] = true;
    let new = files.iter().position(|f| f.display == "new.txt").unwrap();
    only.chosen[new][0] = true;
    let reviewed = build(&files, &only);
    assert_eq!(by_patch(&files, &reviewed).unwrap(), only);
    // The review keeps the run's header, post-image id included.
    let header = String::from_utf8(files[a].header.clone()).unwrap();
    let zeroed = String::from_utf8(without_post_id(&files[a].header)).unwrap();
    assert_ne!(header, zeroed);
    let as_reviewed = String::from_utf8(reviewed.clone())
        .unwrap()
        .replace(&zeroed, &header);
    assert_eq!(by_patch(&files, as_reviewed.as_bytes()).unwrap(), only);

    let forged = String::from_utf8(reviewed.clone())
        .unwrap()
        .replace("+eighteen", "+rm -rf");
    match by_patch(&files, forged.as_bytes()) {
        Err(DeliveryError::BadSubset(why)) => {
            assert!(why.contains("is not a hunk of final.patch"), "{why}");
            assert!(why.contains("a.txt"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    let other_file = String::from_utf8(reviewed)
        .unwrap()
        .replace("b/new.txt", "b/other.txt");
    assert!(matches!(
        by_patch(&files, other_file.as_bytes()),
        Err(DeliveryError::BadSubset(_))
    ));
    assert!(
        matches!(by_patch(&files, b""), Err(DeliveryError::BadSubset(w)) if w.contains("empty"))
    );
}

#[test]
fn unknown_numbers_and_paths_are_named_and_paths_take_whole_files() {
    let (_t, patch) = run_patch();
    let files = split(&patch).unwrap();
    match by_numbers(&files, &[2, 9]) {
        Err(DeliveryError::BadSubset(why)) => {
            assert!(
                why.starts_with("hunk 9 is not in final.patch, which has 4"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
    match by_paths(&files, &["a.txt".into(), "nope.txt".into()]) {
        Err(DeliveryError::BadSubset(why)) => assert!(why.ends_with("nope.txt"), "{why}"),
        other => panic!("{other:?}"),
    }
    let a = by_paths(&files, &["a.txt".into()]).unwrap();
    assert_eq!(a.counts(&files), (2, 4));
    assert_eq!(a.files().len(), 1);
}

#[test]
fn hunk_lists_parse_ranges_and_refuse_nonsense() {
    assert_eq!(parse_numbers("1,3-4").unwrap(), vec![1, 3, 4]);
    assert_eq!(parse_numbers(" 2 , 5-5 ").unwrap(), vec![2, 5]);
    assert!(parse_numbers("0").is_err());
    assert!(parse_numbers("4-2").unwrap_err().contains("backwards"));
    assert!(parse_numbers("x").is_err());
    assert!(parse_numbers(",").is_err());
}

#[test]
fn a_post_id_is_zeroed_and_the_mode_kept() {
    assert_eq!(
        zero_post_id(b"index abc1..def2 100644\n"),
        b"index abc1..0000 100644\n".to_vec()
    );
    assert_eq!(zero_post_id(b"--- a/x\n"), b"--- a/x\n".to_vec());
}

#[test]
fn every_kind_of_change_splits_into_files_git_agrees_with() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), TEN).unwrap();
    std::fs::write(ws.join("run.sh"), "#!/bin/sh\n").unwrap();
    std::fs::write(ws.join("logo.bin"), b"\x89PNG\0\0\x01binary\xff").unwrap();
    std::fs::write(ws.join("kind.txt"), "becomes a link\n").unwrap();
    std::fs::write(ws.join("old.txt"), "to be removed\n").unwrap();
    let mut store =
        CheckpointStore::open(&tmp.path().join("store"), &ws, ExcludeSet::default()).unwrap();
    let base = store.create("baseline").unwrap();
    std::fs::write(ws.join("a.txt"), edit(true, true)).unwrap();
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(ws.join("logo.bin"), b"\x89PNG\0\0\x02other\xfe").unwrap();
    std::fs::remove_file(ws.join("kind.txt")).unwrap();
    std::os::unix::fs::symlink("a.txt", ws.join("kind.txt")).unwrap();
    std::fs::remove_file(ws.join("old.txt")).unwrap();
    std::os::unix::fs::symlink("a.txt", ws.join("link.txt")).unwrap();
    let patch = store.export_patch(base.id).unwrap().patch.into_bytes();

    let files = split(&patch).unwrap();
    let shown: Vec<(&str, bool)> = files
        .iter()
        .map(|f| (f.display.as_str(), f.whole))
        .collect();
    for (path, whole) in [
        ("a.txt", false),
        ("run.sh", true),
        ("logo.bin", true),
        ("old.txt", true),
        ("link.txt", true),
    ] {
        assert!(shown.contains(&(path, whole)), "{path}: {shown:?}");
    }
    // A file that becomes a link: a deletion and an addition, each whole.
    assert_eq!(shown.iter().filter(|(p, _)| *p == "kind.txt").count(), 2);
    let all = by_paths(&files, &["a.txt".into()]).unwrap();
    assert_eq!(all.counts(&files).0, 2);
    let every: Vec<usize> = (1..=numbering(&files).len()).collect();
    assert_eq!(build(&files, &by_numbers(&files, &every).unwrap()), patch);
    // Each whole file alone is a patch git reads.
    for n in 1..=numbering(&files).len() {
        let one = build(&files, &by_numbers(&files, &[n]).unwrap());
        super::super::conflict::parse(&one).unwrap();
    }
}
