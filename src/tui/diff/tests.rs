//! Tests of the diff model, viewer and review; shared samples and buffer helpers.

// Emphasis is compared with lists of byte ranges, often of one range.
#![allow(clippy::single_range_in_vec_init)]

mod emphasis;
mod navigation;
mod parse;
mod render;
mod review;
mod robustness;

use ratatui::buffer::Buffer;

use crate::tui::theme::Theme;

/// Two files: `src/lib.rs` with two hunks (a word change, an insertion) and a new
/// `README.md`.
const SAMPLE: &str = "\
diff --git a/src/lib.rs b/src/lib.rs
index 1111111..2222222 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,4 +1,4 @@ fn main
 use std::io;
-let x = foo(1);
+let x = foo(2);
 fn a() {}
 fn b() {}
@@ -10,3 +10,4 @@ impl Thing
 one
+two
 three
 four
diff --git a/README.md b/README.md
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/README.md
@@ -0,0 +1,2 @@
+# Title
+text
";

fn sample() -> super::DiffModel {
    super::DiffModel::parse(SAMPLE)
}

fn theme() -> Theme {
    Theme::load_coloured("default", None).expect("default theme loads")
}

/// The symbols of row `y` of `buf`, joined.
fn row_text(buf: &Buffer, y: u16) -> String {
    let area = buf.area;
    (area.left()..area.right())
        .map(|x| buf[(x, y)].symbol())
        .collect()
}

/// Every row of `buf`, joined by line feeds.
fn screen_text(buf: &Buffer) -> String {
    let area = buf.area;
    (area.top()..area.bottom())
        .map(|y| row_text(buf, y))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A diff of `files` modified files with `hunks` hunks each, every hunk of one word
/// change, one removed and one added line amid context: 10 lines per hunk.
fn large_diff(files: usize, hunks: usize) -> String {
    let mut text = String::new();
    for file in 0..files {
        text.push_str(&format!(
            "diff --git a/src/module_{file}.rs b/src/module_{file}.rs\nindex 1234567..89abcde 100644\n--- a/src/module_{file}.rs\n+++ b/src/module_{file}.rs\n"
        ));
        for hunk in 0..hunks {
            let start = 1 + hunk * 20;
            text.push_str(&format!("@@ -{start},9 +{start},9 @@ fn item_{hunk}()\n"));
            for context in 0..4 {
                text.push_str(&format!(
                    "     let value_{context} = compute({context}, \"text\");\n"
                ));
            }
            text.push_str(&format!(
                "-    let total = add(first_{hunk}, second) * 2;\n"
            ));
            text.push_str(&format!("+    let total = add(first_{hunk}, third) * 2;\n"));
            for context in 4..8 {
                text.push_str(&format!(
                    "     let value_{context} = compute({context}, \"text\");\n"
                ));
            }
        }
    }
    text
}
