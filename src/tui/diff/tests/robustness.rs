//! Parsing, drawing, navigating and reviewing must never panic, whatever the text.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::super::*;
use super::{SAMPLE, theme};
use crate::tui::theme::Theme;

/// Pieces of diffs and of garbage that random inputs are made of.
const FRAGMENTS: [&str; 24] = [
    "diff --git a/x b/x",
    "diff --git \"a/q\\303\" b/q",
    "diff --git a/",
    "--- a/x",
    "+++ b/x",
    "--- /dev/null",
    "+++ /dev/null",
    "@@ -1,3 +1,2 @@ f",
    "@@ -0,0 +1 @@",
    "@@ -4294967295,4294967295 +1,1 @@",
    "@@ -x +y @@",
    " context é",
    "-removed\tword",
    "+added\tword ü",
    "\\ No newline at end of file",
    "",
    "\r",
    "rename from a",
    "rename to b",
    "new file mode 100644",
    "Binary files a/x and b/x differ",
    "GIT binary patch",
    "\"unterminated \\",
    "🦀🦀🦀 wide 漢字",
];

/// A small deterministic generator, so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) as usize
    }
}

fn exercise(text: &str, theme: &Theme) {
    let model = DiffModel::parse(text);
    let _ = (model.is_empty(), model.line_count(), model.totals());
    let mut review = ReviewSelection::new(&model);
    review.toggle(0, 1);
    let _ = review.numbers();
    let mut state = DiffViewState::default();
    for (width, height) in [(80, 24), (160, 48), (12, 4), (3, 3), (1, 1)] {
        let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
        render_diff(
            buf.area,
            &mut buf,
            &model,
            &mut state,
            theme,
            true,
            Some(&review),
        );
        render_patch(buf.area, &mut buf, &model, 3, theme);
        state.next_hunk(&model);
        state.page(&model, 1);
        state.scroll_by(&model, -2);
        state.toggle_file_list();
    }
    // An area outside the buffer is clipped, not indexed.
    let mut buf = Buffer::empty(Rect::new(0, 0, 10, 10));
    render_diff(
        Rect::new(5, 5, 40, 40),
        &mut buf,
        &model,
        &mut state,
        theme,
        false,
        None,
    );
    render_patch(Rect::new(50, 50, 4, 4), &mut buf, &model, usize::MAX, theme);
}

#[test]
fn random_fragments_never_panic() {
    let theme = theme();
    let mut random = Lcg(7);
    for _ in 0..400 {
        let lines = random.next() % 40;
        let text: Vec<&str> = (0..lines)
            .map(|_| FRAGMENTS[random.next() % FRAGMENTS.len()])
            .collect();
        let separator = if random.next().is_multiple_of(4) {
            "\r\n"
        } else {
            "\n"
        };
        exercise(&text.join(separator), &theme);
    }
}

#[test]
fn every_truncation_of_a_real_diff_parses() {
    let theme = theme();
    let crlf = SAMPLE.replace('\n', "\r\n");
    for text in [SAMPLE, crlf.as_str()] {
        for (at, _) in text.char_indices() {
            exercise(&text[..at], &theme);
        }
    }
}
