use std::path::Path;
use std::process::Command;

use super::super::*;
use super::sample;

#[test]
fn toggles_count_whole_unit_files_once() {
    let model = sample();
    let mut review = ReviewSelection::new(&model);
    assert_eq!(review.chosen(), (3, 3), "two hunks and one new file");
    review.toggle(0, 1);
    assert!(!review.is_included(0, 1));
    assert!(review.is_included(0, 0));
    assert_eq!(review.chosen(), (2, 3));
    review.toggle(1, 7);
    assert!(
        !review.is_included(1, 0),
        "any hunk of a new file toggles the file"
    );
    review.toggle_all();
    assert_eq!(review.chosen(), (3, 3), "all on when any is off");
    review.toggle_all();
    assert_eq!(review.chosen(), (0, 3), "else all off");
    review.toggle(9, 9);
    assert!(!review.is_included(9, 0));
    assert!(review.numbers().is_empty());
}

#[test]
fn the_chosen_hunks_are_sent_as_delivery_numbers_them() {
    let model = DiffModel::parse(
        "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,2 +1,4 @@ top\n x\n+new 1\n+new 2\n y\n@@ -10 +12 @@ later\n-old\n+new\n\
         diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+a\n+b\n@@ -7 +9 @@\n+c\n",
    );
    let mut review = ReviewSelection::new(&model);
    assert_eq!(review.numbers(), [1, 2, 3], "a new file is one number");
    review.toggle(0, 0);
    assert_eq!(review.numbers(), [2, 3]);
    review.toggle(1, 1);
    assert_eq!(review.numbers(), [2]);
    review.toggle_all();
    assert_eq!(review.numbers(), [1, 2, 3]);
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(["-c", "core.autocrlf=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("git prints UTF-8")
}

fn numbered(count: usize, label: &str) -> Vec<String> {
    (1..=count).map(|n| format!("{label} {n}")).collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    std::fs::write(path, lines.join("\n") + "\n").expect("write file");
}

#[test]
fn git_applies_the_patch_of_the_chosen_hunks() {
    let repo = tempfile::tempdir().expect("temp dir");
    let dir = repo.path();
    git(dir, &["init", "-q"]);
    let a = numbered(40, "line");
    let c = numbered(30, "row");
    write_lines(&dir.join("a.txt"), &a);
    write_lines(&dir.join("gone.txt"), &numbered(3, "old"));
    write_lines(&dir.join("c.txt"), &c);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);

    // a.txt: a word change at 3, two lines inserted after 20, a change at 38.
    let mut a_new = a.clone();
    a_new[37] = "line 38 changed".to_string();
    a_new.insert(20, "inserted two".to_string());
    a_new.insert(20, "inserted one".to_string());
    a_new[2] = "line three".to_string();
    write_lines(&dir.join("a.txt"), &a_new);
    std::fs::remove_file(dir.join("gone.txt")).expect("remove");
    write_lines(&dir.join("new dir file.txt"), &numbered(2, "fresh"));
    git(dir, &["mv", "c.txt", "d.txt"]);
    let mut d = c.clone();
    d[1] = "row two".to_string();
    d[27] = "row 28 edited".to_string();
    write_lines(&dir.join("d.txt"), &d);
    git(dir, &["add", "-A"]);
    let diff = git(dir, &["diff", "--cached", "-M"]);

    let model = DiffModel::parse(&diff);
    let paths: Vec<&str> = model.files.iter().map(|file| file.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "d.txt", "gone.txt", "new dir file.txt"]);
    assert_eq!(model.files[0].hunks.len(), 3);
    assert_eq!(model.files[1].status, FileStatus::Renamed);
    assert_eq!(model.files[1].hunks.len(), 2);

    let mut review = ReviewSelection::new(&model);
    review.toggle(0, 1); // not the insertion
    review.toggle(1, 0); // not d.txt's first change
    review.toggle(2, 0); // keep gone.txt
    assert_eq!(review.chosen(), (4, 7));
    // Delivery makes the patch of the numbers, numbering the hunks as the review did.
    use crate::delivery::hunks;
    let files = hunks::split(diff.as_bytes()).expect("git reads the diff");
    assert_eq!(hunks::numbering(&files).len(), review.chosen().1);
    let selection = hunks::by_numbers(&files, &review.numbers()).expect("hunks of the diff");
    let patch = String::from_utf8(hunks::build(&files, &selection)).expect("UTF-8");

    let reparsed = DiffModel::parse(&patch);
    let last = reparsed.files[0].hunks.last().expect("a.txt keeps hunks");
    assert_eq!(
        last.new_start, last.old_start,
        "the left-out insertion no longer shifts it"
    );

    git(dir, &["reset", "-q", "--hard"]);
    let patch_file = repo.path().join("chosen.patch");
    std::fs::write(&patch_file, &patch).expect("write patch");
    git(dir, &["apply", "--check", "chosen.patch"]);
    git(dir, &["apply", "chosen.patch"]);

    let mut a_expected = a.clone();
    a_expected[2] = "line three".to_string();
    a_expected[37] = "line 38 changed".to_string();
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect("read result");
    assert_eq!(read("a.txt"), a_expected.join("\n") + "\n");
    let mut d_expected = c.clone();
    d_expected[27] = "row 28 edited".to_string();
    assert_eq!(read("d.txt"), d_expected.join("\n") + "\n");
    assert!(!dir.join("c.txt").exists());
    assert_eq!(read("gone.txt"), "old 1\nold 2\nold 3\n");
    assert_eq!(read("new dir file.txt"), "fresh 1\nfresh 2\n");
}
