//! Reading git-style unified diff text into a [`DiffModel`], tolerating anything.
//!
//! A file starts at `diff --git` (or at a `---` line followed by `+++` for plain
//! unified diffs). Lines before its first hunk are its header. A hunk takes as many
//! lines as its `@@` header counts, plus `\ No newline` markers; a line that cannot
//! belong to it ends it early (a truncated hunk keeps what it has). Lines that fit
//! nowhere are skipped.

use super::model::{DiffLine, DiffModel, FileDiff, FileStatus, Hunk, LineKind};
use super::paths;

impl DiffModel {
    /// Parses git-style unified diff text. Never fails: what it cannot read is skipped.
    pub fn parse(unified: &str) -> DiffModel {
        let mut model = parse(unified);
        for hunk in model
            .files
            .iter_mut()
            .flat_map(|file| file.hunks.iter_mut())
        {
            super::emphasis::emphasise(hunk);
        }
        model
    }
}

/// Parses `unified` without emphasis (see [`DiffModel::parse`]).
pub(super) fn parse(unified: &str) -> DiffModel {
    let mut files = Vec::new();
    let mut current: Option<FileBuilder> = None;
    let mut lines = unified.split_terminator('\n').peekable();
    while let Some(raw) = lines.next() {
        if let Some(file) = current.as_mut()
            && file.take_hunk_line(raw)
        {
            continue;
        }
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let plain_file_start = line.starts_with("--- ")
            && lines.peek().is_some_and(|next| next.starts_with("+++ "))
            && current.as_ref().is_none_or(FileBuilder::has_sides_or_hunks);
        if line.starts_with("diff ") || plain_file_start {
            files.extend(current.take().map(FileBuilder::finish));
            current = Some(FileBuilder::default());
        }
        let Some(file) = current.as_mut() else {
            continue;
        };
        if let Some(hunk) = parse_hunk_header(line) {
            file.start_hunk(hunk);
        } else if file.hunks.is_empty() {
            file.header_line(line);
        }
    }
    files.extend(current.map(FileBuilder::finish));
    DiffModel { files }
}

/// A file being read.
#[derive(Default)]
struct FileBuilder {
    header: Vec<String>,
    hunks: Vec<Hunk>,
    git_paths: Option<(String, String)>,
    old_side: Option<Option<String>>,
    new_side: Option<Option<String>>,
    rename_from: Option<String>,
    rename_to: Option<String>,
    copied: bool,
    new_file: bool,
    deleted_file: bool,
    binary: bool,
    /// Lines the open hunk still expects on the old and new side.
    old_left: u32,
    new_left: u32,
    old_no: u32,
    new_no: u32,
}

impl FileBuilder {
    fn has_sides_or_hunks(&self) -> bool {
        self.old_side.is_some() || !self.hunks.is_empty()
    }

    fn start_hunk(&mut self, hunk: Hunk) {
        self.old_left = hunk.old_len;
        self.new_left = hunk.new_len;
        self.old_no = hunk.old_start;
        self.new_no = hunk.new_start;
        self.hunks.push(hunk);
    }

    /// Adds `raw` to the open hunk if it belongs there.
    fn take_hunk_line(&mut self, raw: &str) -> bool {
        let expecting = self.old_left > 0 || self.new_left > 0;
        let Some(hunk) = self.hunks.last_mut() else {
            return false;
        };
        let first = raw.as_bytes().first().copied();
        let kind = match first {
            Some(b'\\') => LineKind::NoNewline,
            _ if !expecting => return false,
            // Some tools strip the space of an empty context line.
            None | Some(b' ') => LineKind::Context,
            Some(b'\r') if raw.len() == 1 => LineKind::Context,
            Some(b'+') => LineKind::Added,
            Some(b'-') => LineKind::Removed,
            Some(_) => {
                self.old_left = 0;
                self.new_left = 0;
                return false;
            }
        };
        let rest = match first {
            Some(b'\r') | None => "",
            _ => &raw[1..],
        };
        let (old_no, new_no) = match kind {
            LineKind::Context => (Some(self.old_no), Some(self.new_no)),
            LineKind::Removed => (Some(self.old_no), None),
            LineKind::Added => (None, Some(self.new_no)),
            LineKind::NoNewline => (None, None),
        };
        if old_no.is_some() {
            self.old_no = self.old_no.saturating_add(1);
            self.old_left = self.old_left.saturating_sub(1);
        }
        if new_no.is_some() {
            self.new_no = self.new_no.saturating_add(1);
            self.new_left = self.new_left.saturating_sub(1);
        }
        let text = match kind {
            LineKind::NoNewline => {
                let rest = rest.strip_suffix('\r').unwrap_or(rest);
                rest.strip_prefix(' ').unwrap_or(rest)
            }
            _ => rest,
        };
        hunk.lines.push(DiffLine {
            kind,
            old_no,
            new_no,
            text: text.to_string(),
            emphasis: Vec::new(),
        });
        true
    }

    /// Records a line before the first hunk and what it says about the file.
    fn header_line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            self.git_paths = paths::git_line_paths(rest);
        } else if line.starts_with("new file mode ") {
            self.new_file = true;
        } else if line.starts_with("deleted file mode ") {
            self.deleted_file = true;
        } else if let Some(name) = line.strip_prefix("rename from ") {
            self.rename_from = Some(header_name(name));
        } else if let Some(name) = line.strip_prefix("rename to ") {
            self.rename_to = Some(header_name(name));
        } else if let Some(name) = line.strip_prefix("copy from ") {
            self.rename_from = Some(header_name(name));
            self.copied = true;
        } else if let Some(name) = line.strip_prefix("copy to ") {
            self.rename_to = Some(header_name(name));
            self.copied = true;
        } else if let Some(value) = line.strip_prefix("--- ") {
            self.old_side = Some(paths::side_path(value, "a/"));
        } else if let Some(value) = line.strip_prefix("+++ ") {
            self.new_side = Some(paths::side_path(value, "b/"));
        } else if line == "GIT binary patch"
            || (line.starts_with("Binary files ") && line.ends_with(" differ"))
        {
            self.binary = true;
        }
        self.header.push(line.to_string());
    }

    fn finish(self) -> FileDiff {
        let (git_old, git_new) = self.git_paths.unwrap_or_default();
        let added_side = matches!(self.old_side, Some(None));
        let deleted_side = matches!(self.new_side, Some(None));
        let renamed = self.rename_from.is_some() || self.rename_to.is_some();
        let old_name = self
            .rename_from
            .or_else(|| self.old_side.clone().flatten())
            .unwrap_or(git_old);
        let new_name = self
            .rename_to
            .or_else(|| self.new_side.clone().flatten())
            .unwrap_or(git_new);
        let status = if self.new_file || added_side {
            FileStatus::Added
        } else if self.deleted_file || deleted_side {
            FileStatus::Deleted
        } else if self.copied {
            FileStatus::Copied
        } else if renamed {
            FileStatus::Renamed
        } else {
            FileStatus::Modified
        };
        let (path, old_path) = match status {
            FileStatus::Deleted => (non_empty_or(old_name, new_name), None),
            FileStatus::Renamed | FileStatus::Copied => (new_name, Some(old_name)),
            _ => (non_empty_or(new_name, old_name), None),
        };
        let count = |kind| {
            self.hunks
                .iter()
                .flat_map(|hunk| &hunk.lines)
                .filter(|line| line.kind == kind)
                .count()
        };
        FileDiff {
            path,
            old_path,
            status,
            added: count(LineKind::Added),
            removed: count(LineKind::Removed),
            header: self.header,
            binary: self.binary,
            hunks: self.hunks,
        }
    }
}

fn non_empty_or(name: String, fallback: String) -> String {
    if name.is_empty() { fallback } else { name }
}

/// A name after `rename from ` and the like: quoted or taken as is.
fn header_name(value: &str) -> String {
    match paths::unquote(value) {
        Some((name, _)) => name,
        None => value.to_string(),
    }
}

/// Reads `@@ -a[,b] +c[,d] @@ heading`; `None` when the line is not one.
pub(super) fn parse_hunk_header(line: &str) -> Option<Hunk> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _heading) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let (old_start, old_len) = parse_range(old)?;
    let (new_start, new_len) = parse_range(new)?;
    Some(Hunk {
        header: line.to_string(),
        old_start,
        old_len,
        new_start,
        new_len,
        lines: Vec::new(),
    })
}

fn parse_range(range: &str) -> Option<(u32, u32)> {
    match range.split_once(',') {
        Some((start, len)) => Some((start.parse().ok()?, len.parse().ok()?)),
        None => Some((range.parse().ok()?, 1)),
    }
}
