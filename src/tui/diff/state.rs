//! Where the diff viewer is: the selected file and hunk, and the scroll position.
//!
//! Navigation clamps at the ends instead of wrapping, so holding a key never jumps
//! back to the top. Hunk navigation crosses into the neighbouring file: `next_hunk`
//! on a file's last hunk selects the next file's first hunk. Scrolling keeps the
//! selected hunk while any of it is visible, and otherwise selects the hunk at the top.
//! Every method tolerates a model that changed under it.

use super::model::DiffModel;
use super::rows::{body_rows, hunk_at_row, hunk_first_row};

/// How far line text can be scrolled sideways.
const MAX_COLUMN: usize = 4096;

/// The diff viewer's state, kept by the app between frames.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct DiffViewState {
    file: usize,
    hunk: usize,
    /// The body row shown at the top.
    scroll: usize,
    hide_file_list: bool,
    /// The first file shown in the file list when it is above the hunks.
    pub(super) list_scroll: usize,
    /// How many body rows the last frame showed.
    viewport: usize,
    /// Columns of line text scrolled off to the left.
    column: usize,
}

impl DiffViewState {
    pub(crate) fn selected_file(&self) -> usize {
        self.file
    }

    pub(crate) fn selected_hunk(&self) -> usize {
        self.hunk
    }

    /// Columns of line text scrolled off to the left.
    pub fn column(&self) -> usize {
        self.column
    }

    /// Scrolls line text sideways by `delta` columns (never before the first).
    pub(crate) fn scroll_horizontally(&mut self, delta: isize) {
        self.column = self.column.saturating_add_signed(delta).min(MAX_COLUMN);
    }

    /// The body row at the top of the hunk view.
    pub fn scroll(&self) -> usize {
        self.scroll
    }

    /// The selected file's path, if the model has it.
    pub(crate) fn selected_path<'m>(&self, model: &'m DiffModel) -> Option<&'m str> {
        model.files.get(self.file).map(|file| file.path.as_str())
    }

    pub(crate) fn file_list_shown(&self) -> bool {
        !self.hide_file_list
    }

    /// Shows or hides the file list (the hunks then take the whole pane).
    #[cfg(test)]
    pub(crate) fn toggle_file_list(&mut self) {
        self.hide_file_list = !self.hide_file_list;
    }

    pub(crate) fn next_file(&mut self, model: &DiffModel) {
        self.clamp(model);
        if self.file + 1 < model.files.len() {
            self.select(model, self.file + 1, 0);
        }
    }

    pub(crate) fn prev_file(&mut self, model: &DiffModel) {
        self.clamp(model);
        if self.file > 0 {
            self.select(model, self.file - 1, 0);
        }
    }

    pub(crate) fn next_hunk(&mut self, model: &DiffModel) {
        self.clamp(model);
        let hunks = model
            .files
            .get(self.file)
            .map_or(0, |file| file.hunks.len());
        if self.hunk + 1 < hunks {
            self.select(model, self.file, self.hunk + 1);
        } else if self.file + 1 < model.files.len() {
            self.select(model, self.file + 1, 0);
        }
    }

    pub(crate) fn prev_hunk(&mut self, model: &DiffModel) {
        self.clamp(model);
        if self.hunk > 0 {
            self.select(model, self.file, self.hunk - 1);
        } else if self.file > 0 {
            let previous = self.file - 1;
            let last = model.files[previous].hunks.len().saturating_sub(1);
            self.select(model, previous, last);
        }
    }

    /// Scrolls the hunk view by `delta` rows.
    pub(crate) fn scroll_by(&mut self, model: &DiffModel, delta: isize) {
        self.clamp(model);
        let target = self.scroll.saturating_add_signed(delta);
        self.scroll = target.min(self.max_scroll(model));
        self.keep_hunk_visible(model);
    }

    /// Scrolls by whole pages of the height last rendered (less one row of overlap).
    pub fn page(&mut self, model: &DiffModel, delta_pages: isize) {
        let page = self.viewport.saturating_sub(1).max(1);
        let rows = isize::try_from(page).unwrap_or(isize::MAX);
        self.scroll_by(model, delta_pages.saturating_mul(rows));
    }

    /// The selected file's first row and first hunk.
    pub(crate) fn top(&mut self, model: &DiffModel) {
        self.clamp(model);
        self.scroll = 0;
        self.hunk = 0;
    }

    /// The selected file's last rows and last hunk.
    pub fn bottom(&mut self, model: &DiffModel) {
        self.clamp(model);
        self.scroll = self.max_scroll(model);
        self.hunk = model
            .files
            .get(self.file)
            .map_or(0, |file| file.hunks.len())
            .saturating_sub(1);
    }

    /// Carries the position over to a replaced model: the same file (by path), the hunk
    /// nearest to the selected one and the same offset into it; indices are clamped when
    /// the file is gone.
    pub(crate) fn follow_model(&mut self, old: &DiffModel, new: &DiffModel) {
        let Some(old_file) = old.files.get(self.file) else {
            self.clamp(new);
            return;
        };
        let Some(index) = new.files.iter().position(|file| file.path == old_file.path) else {
            self.file = self.file.min(new.files.len().saturating_sub(1));
            self.hunk = 0;
            self.scroll = 0;
            self.clamp(new);
            return;
        };
        let new_file = &new.files[index];
        let offset = self
            .scroll
            .saturating_sub(hunk_first_row(old_file, self.hunk));
        let hunk = match old_file.hunks.get(self.hunk) {
            Some(old_hunk) => new_file
                .hunks
                .iter()
                .enumerate()
                .min_by_key(|(_, hunk)| hunk.new_start.abs_diff(old_hunk.new_start))
                .map_or(0, |(index, _)| index),
            None => 0,
        };
        let hunk_rows = new_file.hunks.get(hunk).map_or(1, |h| 1 + h.lines.len());
        self.file = index;
        self.hunk = hunk;
        self.scroll = hunk_first_row(new_file, hunk) + offset.min(hunk_rows - 1);
        self.clamp(new);
    }

    /// Records the height of the hunk view and brings every index within `model`.
    pub(super) fn fit(&mut self, model: &DiffModel, viewport: usize) {
        self.viewport = viewport;
        self.clamp(model);
    }

    fn select(&mut self, model: &DiffModel, file: usize, hunk: usize) {
        self.file = file;
        self.hunk = hunk;
        self.scroll = model
            .files
            .get(file)
            .map_or(0, |file| hunk_first_row(file, hunk))
            .min(self.max_scroll(model));
    }

    fn clamp(&mut self, model: &DiffModel) {
        self.file = self.file.min(model.files.len().saturating_sub(1));
        let hunks = model
            .files
            .get(self.file)
            .map_or(0, |file| file.hunks.len());
        self.hunk = self.hunk.min(hunks.saturating_sub(1));
        self.scroll = self.scroll.min(self.max_scroll(model));
    }

    fn max_scroll(&self, model: &DiffModel) -> usize {
        let rows = model.files.get(self.file).map_or(0, body_rows);
        rows.saturating_sub(self.viewport.max(1))
    }

    fn keep_hunk_visible(&mut self, model: &DiffModel) {
        let Some(file) = model.files.get(self.file) else {
            return;
        };
        let Some(hunk) = file.hunks.get(self.hunk) else {
            return;
        };
        let first = hunk_first_row(file, self.hunk);
        let end = first + 1 + hunk.lines.len();
        let visible_end = self.scroll + self.viewport.max(1);
        if end <= self.scroll || first >= visible_end {
            self.hunk = hunk_at_row(file, self.scroll);
        }
    }
}
