use super::super::*;
use super::sample;

fn only_file(text: &str) -> FileDiff {
    let mut model = DiffModel::parse(text);
    assert_eq!(model.files.len(), 1, "one file in {text:?}");
    model.files.remove(0)
}

#[test]
fn a_modified_file_keeps_header_hunks_and_line_numbers() {
    let model = sample();
    assert_eq!(model.files.len(), 2);
    assert_eq!(model.totals(), (4, 1));
    assert_eq!(model.line_count(), 11);
    let lib = &model.files[0];
    assert_eq!(lib.path, "src/lib.rs");
    assert_eq!(lib.old_path, None);
    assert_eq!(lib.status, FileStatus::Modified);
    assert_eq!((lib.added, lib.removed), (2, 1));
    assert_eq!(lib.header.len(), 4);
    assert_eq!(lib.header[0], "diff --git a/src/lib.rs b/src/lib.rs");
    assert_eq!(lib.hunks.len(), 2);
    let second = &lib.hunks[1];
    assert_eq!(second.header, "@@ -10,3 +10,4 @@ impl Thing");
    assert_eq!(
        (
            second.old_start,
            second.old_len,
            second.new_start,
            second.new_len
        ),
        (10, 3, 10, 4)
    );
    let numbers: Vec<_> = second
        .lines
        .iter()
        .map(|line| (line.kind, line.old_no, line.new_no, line.text.as_str()))
        .collect();
    assert_eq!(
        numbers,
        [
            (LineKind::Context, Some(10), Some(10), "one"),
            (LineKind::Added, None, Some(11), "two"),
            (LineKind::Context, Some(11), Some(12), "three"),
            (LineKind::Context, Some(12), Some(13), "four"),
        ]
    );
}

#[test]
fn new_and_deleted_files_take_their_path_from_the_side_that_exists() {
    let model = sample();
    let readme = &model.files[1];
    assert_eq!(readme.status, FileStatus::Added);
    assert_eq!(readme.path, "README.md");
    assert_eq!(readme.hunks[0].lines[0].new_no, Some(1));

    let deleted = only_file(
        "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\nindex 1..0\n--- a/old.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n",
    );
    assert_eq!(deleted.status, FileStatus::Deleted);
    assert_eq!(deleted.path, "old.txt");
    assert_eq!((deleted.added, deleted.removed), (0, 2));
}

#[test]
fn renames_with_and_without_changes() {
    let pure = only_file(
        "diff --git a/a.rs b/b.rs\nsimilarity index 100%\nrename from a.rs\nrename to b.rs\n",
    );
    assert_eq!(pure.status, FileStatus::Renamed);
    assert_eq!(pure.path, "b.rs");
    assert_eq!(pure.old_path.as_deref(), Some("a.rs"));
    assert!(pure.hunks.is_empty());
    assert!(pure.is_whole_unit());

    let edited = only_file(
        "diff --git a/x/a.rs b/y/a.rs\nsimilarity index 90%\nrename from x/a.rs\nrename to y/a.rs\nindex 1..2 100644\n--- a/x/a.rs\n+++ b/y/a.rs\n@@ -1 +1 @@\n-old\n+new\n",
    );
    assert_eq!(edited.status, FileStatus::Renamed);
    assert_eq!(edited.path, "y/a.rs");
    assert_eq!(edited.old_path.as_deref(), Some("x/a.rs"));
    assert_eq!(edited.hunks[0].old_len, 1, "a missing length means 1");
    assert!(!edited.is_whole_unit());
}

#[test]
fn binary_files_and_mode_changes_have_no_hunks() {
    let plain = only_file(
        "diff --git a/logo.png b/logo.png\nindex 1..2 100644\nBinary files a/logo.png and b/logo.png differ\n",
    );
    assert!(plain.binary);
    assert_eq!(plain.path, "logo.png");
    assert!(plain.hunks.is_empty());

    let patch = only_file(
        "diff --git a/icon.bin b/icon.bin\nnew file mode 100644\nindex 0000000..1234567\nGIT binary patch\nliteral 12\nTcmZ?l%u7ia$;r$~N@fg00N9E*e7\n\nliteral 0\nHcmV?d00001\n\n",
    );
    assert!(patch.binary);
    assert_eq!(patch.status, FileStatus::Added);
    assert_eq!(patch.path, "icon.bin");
    assert!(patch.header.iter().any(|line| line == "literal 12"));

    let mode = only_file("diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n");
    assert_eq!(mode.status, FileStatus::Modified);
    assert_eq!(mode.path, "run.sh");
    assert!(mode.hunks.is_empty() && !mode.binary);
}

#[test]
fn no_newline_markers_belong_to_the_hunk_without_counting() {
    let file = only_file(
        "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-last\n\\ No newline at end of file\n+last\n\\ No newline at end of file\n",
    );
    let kinds: Vec<_> = file.hunks[0].lines.iter().map(|line| line.kind).collect();
    assert_eq!(
        kinds,
        [
            LineKind::Removed,
            LineKind::NoNewline,
            LineKind::Added,
            LineKind::NoNewline
        ]
    );
    assert_eq!(file.hunks[0].lines[1].text, "No newline at end of file");
    assert_eq!((file.added, file.removed), (1, 1));
}

#[test]
fn crlf_diff_text_parses_like_lf_and_content_keeps_its_carriage_return() {
    let file = only_file(
        "diff --git a/w.txt b/w.txt\r\nindex 1..2 100644\r\n--- a/w.txt\r\n+++ b/w.txt\r\n@@ -1,2 +1,2 @@\r\n keep\r\n-a b\r\n+a c\r\n",
    );
    assert_eq!(file.path, "w.txt");
    assert_eq!(file.header[0], "diff --git a/w.txt b/w.txt");
    let lines = &file.hunks[0].lines;
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[2].text, "a c\r");
    assert_eq!(
        lines[2].emphasis,
        [2..3],
        "the carriage return is not a change"
    );
}

#[test]
fn paths_with_spaces_tabs_and_quotes() {
    let spaced = only_file(
        "diff --git a/my dir/a b.txt b/my dir/a b.txt\nindex 1..2 100644\n--- a/my dir/a b.txt\t\n+++ b/my dir/a b.txt\t\n@@ -1 +1 @@\n-x\n+y\n",
    );
    assert_eq!(spaced.path, "my dir/a b.txt");

    let quoted = only_file(
        "diff --git \"a/caf\\303\\251 \\\"x\\\".txt\" \"b/caf\\303\\251 \\\"x\\\".txt\"\nnew file mode 100644\nindex 0..1\n",
    );
    assert_eq!(quoted.path, "café \"x\".txt");
    assert_eq!(quoted.status, FileStatus::Added);

    let spaced_binary = only_file(
        "diff --git a/a b/c d b/a b/c d\nindex 1..2 100644\nBinary files a/a b/c d and b/a b/c d differ\n",
    );
    assert_eq!(
        spaced_binary.path, "a b/c d",
        "the split where both sides match"
    );

    let tab = only_file(
        "diff --git \"a/t\\tb\" \"b/t\\tb\"\n--- \"a/t\\tb\"\n+++ \"b/t\\tb\"\n@@ -1 +1 @@\n-\tx\n+\ty\n",
    );
    assert_eq!(tab.path, "t\tb");
    assert_eq!(tab.hunks[0].lines[1].text, "\ty");
}

#[test]
fn a_truncated_hunk_keeps_its_lines_and_the_next_file_still_parses() {
    let model = DiffModel::parse(
        "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,5 +1,5 @@\n one\n-two\ndiff --git a/b b/b\n--- a/b\n+++ b/b\n@@ -3 +3 @@\n-x\n+y",
    );
    assert_eq!(model.files.len(), 2);
    assert_eq!(model.files[0].hunks[0].lines.len(), 2);
    assert_eq!(model.files[1].path, "b");
    assert_eq!(model.files[1].hunks[0].lines[1].text, "y");
}

#[test]
fn plain_unified_diffs_without_git_headers_split_into_files() {
    let model = DiffModel::parse(
        "--- a/one.txt\t2024-01-01\n+++ b/one.txt\t2024-01-02\n@@ -1 +1 @@\n-a\n+b\n--- a/two.txt\n+++ b/two.txt\n@@ -1,2 +1 @@\n x\n---y\n",
    );
    let paths: Vec<_> = model.files.iter().map(|file| file.path.as_str()).collect();
    assert_eq!(paths, ["one.txt", "two.txt"]);
    let last = &model.files[1].hunks[0].lines[1];
    assert_eq!((last.kind, last.text.as_str()), (LineKind::Removed, "--y"));
}

#[test]
fn an_empty_context_line_and_garbage_around_files() {
    let model = DiffModel::parse(
        "some preamble\nFrom: someone\ndiff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,3 +1,3 @@\n x\n\n-y\n+z\ntrailing words\n@@ broken @@\n",
    );
    let file = &model.files[0];
    assert_eq!(file.hunks.len(), 1);
    assert_eq!(file.hunks[0].lines.len(), 4);
    assert_eq!(file.hunks[0].lines[1].kind, LineKind::Context);
    assert_eq!(file.hunks[0].lines[1].old_no, Some(2));
    assert!(DiffModel::parse("").is_empty());
    assert!(DiffModel::parse("just words\n+++ nothing\n@@ -1 +1 @@\n").is_empty());
}
