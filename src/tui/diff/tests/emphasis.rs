use super::super::emphasis::{changed_words, words};
use super::super::*;
use super::sample;

#[test]
fn a_changed_argument_is_the_only_emphasis_of_the_pair() {
    let model = sample();
    let lines = &model.files[0].hunks[0].lines;
    assert_eq!(lines[1].text, "let x = foo(1);");
    assert_eq!(lines[1].emphasis, [12..13]);
    assert_eq!(lines[2].emphasis, [12..13]);
    assert!(lines[0].emphasis.is_empty(), "context lines have none");
    assert!(
        model.files[1].hunks[0]
            .lines
            .iter()
            .all(|line| line.emphasis.is_empty()),
        "added lines without a removed partner have none"
    );
}

#[test]
fn neighbouring_changes_separated_by_spaces_merge_into_one_range() {
    let (old, new) = changed_words("one a b two", "one x y two").expect("similar enough");
    assert_eq!(old, [4..7]);
    assert_eq!(new, [4..7]);
    let (old, _) = changed_words("call(a, b, c)", "call(x, y, c)").expect("similar enough");
    assert_eq!(old, [5..6, 8..9], "punctuation between keeps them apart");
    let (old, new) = changed_words("keep this word", "keep that other word").expect("similar");
    assert_eq!(old, [5..9]);
    assert_eq!(new, [5..15]);
}

#[test]
fn very_different_or_long_lines_get_no_emphasis() {
    assert!(changed_words("fn main() {", "let total = 42;").is_none());
    let long_old = "a ".repeat(300);
    let long_new = format!("{long_old}b");
    assert!(changed_words(&long_old, &long_new).is_none());
    assert!(changed_words("same", "same").is_none());
}

#[test]
fn removed_and_added_runs_pair_line_by_line() {
    let model = DiffModel::parse(
        "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1,3 +1,2 @@\n-alpha one\n-beta two\n-gamma three\n+alpha ONE\n+beta TWO\n",
    );
    let lines = &model.files[0].hunks[0].lines;
    assert_eq!(lines[0].emphasis, [6..9]);
    assert_eq!(lines[1].emphasis, [5..8]);
    assert!(
        lines[2].emphasis.is_empty(),
        "the third removed line has no partner"
    );
    assert_eq!(lines[3].emphasis, [6..9]);
    assert_eq!(lines[4].emphasis, [5..8]);
}

#[test]
fn words_split_identifiers_punctuation_and_spaces_on_char_boundaries() {
    let text = "é_1(x)  ü";
    let pieces: Vec<&str> = words(text).into_iter().map(|range| &text[range]).collect();
    assert_eq!(pieces, ["é_1", "(", "x", ")", "  ", "ü"]);
}
