use std::time::Instant;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;

use super::super::*;
use super::{large_diff, row_text, sample, screen_text, theme};
use crate::tui::theme::Meaning;

fn draw(model: &DiffModel, width: u16, height: u16, review: Option<&ReviewSelection>) -> Buffer {
    let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
    let mut state = DiffViewState::default();
    render_diff(
        buf.area,
        &mut buf,
        model,
        &mut state,
        &theme(),
        true,
        review,
    );
    buf
}

#[test]
fn a_narrow_pane_lists_files_above_the_hunks_with_gutters_and_word_emphasis() {
    let theme = theme();
    let buf = draw(&sample(), 80, 20, None);
    let title = row_text(&buf, 0);
    assert!(title.contains(" Diff 2 files +4 -1 "), "{title}");
    assert_eq!(buf[(0, 0)].style().fg, theme.get(Meaning::BorderFocused).fg);
    assert!(row_text(&buf, 1).starts_with("│M src/lib.rs"));
    assert!(row_text(&buf, 1).ends_with("+2 -1│"));
    assert!(
        buf[(5, 1)].modifier.contains(Modifier::REVERSED),
        "selected file"
    );
    assert!(row_text(&buf, 2).starts_with("│A README.md"));
    assert!(!buf[(5, 2)].modifier.contains(Modifier::REVERSED));
    assert!(row_text(&buf, 3).starts_with("│────"));
    assert!(row_text(&buf, 4).starts_with("│▌@@ -1,4 +1,4 @@ fn main"));
    assert_eq!(buf[(3, 4)].style().fg, theme.get(Meaning::DiffHunk).fg);
    assert!(row_text(&buf, 5).starts_with("│▌ 1  1  use std::io;"));
    assert!(row_text(&buf, 6).starts_with("│▌ 2    -let x = foo(1);"));
    assert!(row_text(&buf, 7).starts_with("│▌    2 +let x = foo(2);"));
    assert_eq!(buf[(10, 7)].style().fg, theme.get(Meaning::DiffAdded).fg);
    assert_eq!(buf[(21, 7)].symbol(), "2");
    assert_eq!(
        buf[(21, 7)].style().bg,
        theme.get(Meaning::DiffAddedWord).bg
    );
    assert_eq!(
        buf[(21, 6)].style().bg,
        theme.get(Meaning::DiffRemovedWord).bg
    );
    assert_ne!(
        buf[(20, 6)].style().bg,
        theme.get(Meaning::DiffRemovedWord).bg
    );
    assert!(row_text(&buf, 10).starts_with("│ @@ -10,3 +10,4 @@ impl Thing"));
    assert!(row_text(&buf, 12).starts_with("│    11 +two"));
}

#[test]
fn a_wide_pane_puts_the_file_list_in_a_left_column() {
    let buf = draw(&sample(), 160, 48, None);
    assert!(row_text(&buf, 1).starts_with("│M src/lib.rs"));
    assert_eq!(buf[(31, 1)].symbol(), "│");
    assert_eq!(buf[(31, 40)].symbol(), "│");
    let first = row_text(&buf, 1);
    let body: String = first.chars().skip(32).collect();
    assert!(body.starts_with("▌@@ -1,4 +1,4 @@ fn main"), "{body}");
    assert!(row_text(&buf, 2).starts_with("│A README.md"));
}

#[test]
fn an_unfocused_empty_pane_says_no_changes_yet_in_the_middle() {
    let theme = theme();
    let mut buf = Buffer::empty(Rect::new(0, 0, 40, 9));
    let mut state = DiffViewState::default();
    render_diff(
        buf.area,
        &mut buf,
        &DiffModel::default(),
        &mut state,
        &theme,
        false,
        None,
    );
    assert_eq!(buf[(0, 0)].style().fg, theme.get(Meaning::Border).fg);
    let middle = row_text(&buf, 4);
    assert_eq!(middle.trim_matches(['│', ' ']), "no changes yet");
    assert_eq!(middle.chars().position(|c| c == 'n'), Some(13));
    assert!(buf[(13, 4)].modifier.contains(Modifier::DIM));
}

#[test]
fn binary_and_mode_only_files_show_notes() {
    let model = DiffModel::parse(
        "diff --git a/logo.png b/logo.png\nBinary files a/logo.png and b/logo.png differ\ndiff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
    );
    let buf = draw(&model, 60, 12, None);
    let screen = screen_text(&buf);
    assert!(screen.contains("binary file; not shown"), "{screen}");
    assert!(screen.contains("bin│"), "{screen}");
    let mut state = DiffViewState::default();
    state.next_file(&model);
    let mut buf = Buffer::empty(Rect::new(0, 0, 60, 12));
    render_diff(buf.area, &mut buf, &model, &mut state, &theme(), true, None);
    let screen = screen_text(&buf);
    assert!(screen.contains("no content changes"), "{screen}");
    assert!(screen.contains("new mode 100755"), "{screen}");
}

#[test]
fn review_marks_hunks_dims_left_out_ones_and_counts_in_the_title() {
    let model = sample();
    let mut review = ReviewSelection::new(&model);
    review.toggle(0, 1);
    let buf = draw(&model, 80, 20, Some(&review));
    assert!(row_text(&buf, 0).contains("2 of 3 hunks chosen"));
    assert!(row_text(&buf, 1).starts_with("│[~] M src/lib.rs"));
    assert!(row_text(&buf, 2).starts_with("│[x] A README.md"));
    assert!(row_text(&buf, 4).starts_with("│▌[x] @@ -1,4"));
    assert!(row_text(&buf, 10).starts_with("│ [ ] @@ -10,3"));
    assert!(!buf[(10, 7)].modifier.contains(Modifier::DIM));
    assert!(
        buf[(10, 12)].modifier.contains(Modifier::DIM),
        "left-out hunk dimmed"
    );
}

#[test]
fn long_paths_are_cut_on_the_left_and_tabs_become_four_spaces() {
    let model = DiffModel::parse(
        "diff --git a/very/long/directory/name/for/testing/file.rs b/very/long/directory/name/for/testing/file.rs\n--- a/very/long/directory/name/for/testing/file.rs\n+++ b/very/long/directory/name/for/testing/file.rs\n@@ -1 +1 @@\n-\tx\n+\ty\n",
    );
    let buf = draw(&model, 40, 12, None);
    let entry = row_text(&buf, 1);
    assert!(entry.starts_with("│M …"), "{entry}");
    assert!(entry.contains("testing/file.rs +1 -1│"), "{entry}");
    assert!(
        row_text(&buf, 5).starts_with("│▌  1 +    y"),
        "{}",
        row_text(&buf, 5)
    );
}

#[test]
fn the_patch_preview_names_each_file_before_its_hunks_and_scrolls() {
    let model = sample();
    let theme = theme();
    let mut buf = Buffer::empty(Rect::new(0, 0, 50, 6));
    render_patch(buf.area, &mut buf, &model, 0, &theme);
    assert!(row_text(&buf, 0).starts_with("M src/lib.rs"));
    assert!(row_text(&buf, 1).starts_with(" @@ -1,4 +1,4 @@"));
    assert_eq!(patch_height(&model), 16);
    let mut buf = Buffer::empty(Rect::new(0, 0, 50, 6));
    render_patch(buf.area, &mut buf, &model, 11, &theme);
    assert!(
        row_text(&buf, 0).starts_with(" 12 13  four"),
        "{}",
        row_text(&buf, 0)
    );
    assert!(row_text(&buf, 1).starts_with("A README.md"));
    assert!(row_text(&buf, 2).starts_with(" @@ -0,0 +1,2 @@"));
}

#[test]
fn a_5000_line_diff_parses_and_draws_quickly() {
    let text = large_diff(50, 10);
    let started = Instant::now();
    let model = DiffModel::parse(&text);
    let parse = started.elapsed();
    assert_eq!(model.line_count(), 5000);
    assert!(model.files[49].hunks[9].lines[4].emphasis.len() == 1);
    let theme = theme();
    let mut state = DiffViewState::default();
    let mut buf = Buffer::empty(Rect::new(0, 0, 80, 24));
    let frames: u32 = 200;
    let started = Instant::now();
    for frame in 0..frames {
        if frame % 20 == 0 {
            state.next_file(&model);
        }
        state.scroll_by(&model, 1);
        render_diff(buf.area, &mut buf, &model, &mut state, &theme, true, None);
    }
    let per_frame = started.elapsed() / frames;
    let mut wide = Buffer::empty(Rect::new(0, 0, 160, 48));
    let started = Instant::now();
    for _ in 0..frames {
        state.scroll_by(&model, 1);
        render_diff(wide.area, &mut wide, &model, &mut state, &theme, true, None);
    }
    let per_wide_frame = started.elapsed() / frames;
    println!(
        "5,000-line diff: parse with emphasis {parse:?}; frame 80x24 {per_frame:?}, 160x48 {per_wide_frame:?}"
    );
}
