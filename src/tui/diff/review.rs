//! Choosing hunks before a patch is applied, and the patch of only the chosen ones.
//!
//! Each hunk of a modified or renamed file is a choice of its own. Added, deleted and
//! binary files, and changes without hunks (modes, pure renames), are one choice each:
//! all of their hunks are taken or left together, since half a new file or a binary
//! delta cannot be applied.

use std::fmt::Write as _;

use super::model::{DiffModel, FileDiff, Hunk, LineKind};

/// Which hunks of a [`DiffModel`] are chosen; all are at the start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewSelection {
    /// Per file, one flag per hunk, or a single flag for a whole-unit file.
    files: Vec<Vec<bool>>,
}

impl ReviewSelection {
    pub fn new(model: &DiffModel) -> Self {
        let files = model
            .files
            .iter()
            .map(|file| vec![true; choice_count(file)])
            .collect();
        ReviewSelection { files }
    }

    /// Flips hunk `hunk` of file `file` (the whole file when it is one unit).
    pub fn toggle(&mut self, file: usize, hunk: usize) {
        let Some(flags) = self.files.get_mut(file) else {
            return;
        };
        let index = if flags.len() == 1 { 0 } else { hunk };
        if let Some(flag) = flags.get_mut(index) {
            *flag = !*flag;
        }
    }

    /// Chooses every hunk if any is left out, else leaves every hunk out.
    pub(crate) fn toggle_all(&mut self) {
        let all = self.files.iter().flatten().all(|flag| *flag);
        for flag in self.files.iter_mut().flatten() {
            *flag = !all;
        }
    }

    /// Whether hunk `hunk` of file `file` is chosen (false for indices out of range).
    pub(crate) fn is_included(&self, file: usize, hunk: usize) -> bool {
        let Some(flags) = self.files.get(file) else {
            return false;
        };
        let index = if flags.len() == 1 { 0 } else { hunk };
        flags.get(index).copied().unwrap_or(false)
    }

    /// Whether any choice of file `file` is chosen.
    pub(crate) fn file_included(&self, file: usize) -> bool {
        self.files
            .get(file)
            .is_some_and(|flags| flags.iter().any(|flag| *flag))
    }

    /// (chosen choices, all choices); a whole-unit file counts as one.
    pub fn chosen(&self) -> (usize, usize) {
        let flags = self.files.iter().flatten();
        let total = flags.clone().count();
        (flags.filter(|flag| **flag).count(), total)
    }

    /// A unified diff of only the chosen hunks that `git apply` accepts: file headers
    /// kept, files with nothing chosen dropped, and the new-side start of each hunk
    /// moved by the lines that left-out hunks before it would have added or removed.
    pub(crate) fn selected_patch(&self, model: &DiffModel) -> String {
        let mut patch = String::new();
        for (index, file) in model.files.iter().enumerate() {
            let whole = file.is_whole_unit();
            if !self.file_included(index) {
                continue;
            }
            for line in &file.header {
                push_line(&mut patch, line);
            }
            let mut shift: i64 = 0;
            for (number, hunk) in file.hunks.iter().enumerate() {
                if whole || self.is_included(index, number) {
                    push_hunk(&mut patch, hunk, shift);
                } else {
                    shift += i64::from(hunk.new_len) - i64::from(hunk.old_len);
                }
            }
        }
        patch
    }
}

/// How many choices a file offers.
fn choice_count(file: &FileDiff) -> usize {
    if file.is_whole_unit() {
        1
    } else {
        file.hunks.len()
    }
}

fn push_line(patch: &mut String, line: &str) {
    patch.push_str(line);
    patch.push('\n');
}

/// Writes `hunk`, its new start moved back by `shift` lines.
fn push_hunk(patch: &mut String, hunk: &Hunk, shift: i64) {
    if shift == 0 {
        push_line(patch, &hunk.header);
    } else {
        let new_start = (i64::from(hunk.new_start) - shift).max(0);
        let heading = hunk
            .header
            .strip_prefix("@@ ")
            .and_then(|rest| rest.split_once(" @@"))
            .map_or("", |(_, heading)| heading);
        let _ = write!(patch, "@@ -{}", hunk.old_start);
        push_len(patch, hunk.old_len);
        let _ = write!(patch, " +{new_start}");
        push_len(patch, hunk.new_len);
        patch.push_str(" @@");
        push_line(patch, heading);
    }
    for line in &hunk.lines {
        patch.push(line.kind.sign());
        if line.kind == LineKind::NoNewline {
            patch.push(' ');
        }
        push_line(patch, &line.text);
    }
}

/// Writes `,len` as git does: left out when the length is 1.
fn push_len(patch: &mut String, len: u32) {
    if len != 1 {
        let _ = write!(patch, ",{len}");
    }
}
