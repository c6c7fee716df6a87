//! What a parsed unified diff holds: files, their hunks and the lines of each hunk.

use std::ops::Range;

/// A unified diff, parsed once and then only read by the views.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffModel {
    pub files: Vec<FileDiff>,
}

/// How a file changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileStatus {
    Added,
    Deleted,
    Modified,
    Renamed,
    Copied,
}

impl FileStatus {
    /// The one-letter code `git status --short` uses.
    pub(crate) fn letter(self) -> char {
        match self {
            FileStatus::Added => 'A',
            FileStatus::Deleted => 'D',
            FileStatus::Modified => 'M',
            FileStatus::Renamed => 'R',
            FileStatus::Copied => 'C',
        }
    }
}

/// One file's part of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    /// The new path, or the old one for a deleted file.
    pub path: String,
    /// The path before a rename or copy.
    pub old_path: Option<String>,
    pub status: FileStatus,
    /// Lines added and removed over all hunks.
    pub added: usize,
    pub removed: usize,
    /// The raw lines before the first hunk (`diff --git`, modes, `index`, `---`, `+++`,
    /// and the data of a `GIT binary patch`), without line terminators.
    pub header: Vec<String>,
    pub hunks: Vec<Hunk>,
    /// Whether git reported the file as binary (no hunks are shown for it).
    pub binary: bool,
}

impl FileDiff {
    /// Whether the change touches the repository's own minicoder
    /// configuration (`.minicoder.json`, `.minicoder/`), on either side of a
    /// rename: such a patch changes what the next run honours.
    pub fn touches_config(&self) -> bool {
        let protected = |p: &str| crate::workspace::protected::is_protected(p.as_bytes());
        protected(&self.path) || self.old_path.as_deref().is_some_and(protected)
    }
}

impl FileDiff {
    /// Whether the file can only be taken or left as a whole in a review: additions,
    /// deletions, binary files and changes without hunks (modes, pure renames).
    pub(crate) fn is_whole_unit(&self) -> bool {
        crate::delivery::hunks::taken_whole(
            matches!(self.status, FileStatus::Added | FileStatus::Deleted),
            self.binary,
            self.hunks.len(),
        )
    }

    /// The header lines worth showing for a file without hunks (modes, renames),
    /// leaving out the ones the file list already says.
    pub(super) fn meta_lines(&self) -> impl Iterator<Item = &str> {
        self.header.iter().map(String::as_str).filter(|line| {
            !["diff ", "index ", "--- ", "+++ "]
                .iter()
                .any(|prefix| line.starts_with(prefix))
        })
    }
}

/// One `@@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hunk {
    /// The whole `@@ -a,b +c,d @@ section` line.
    pub header: String,
    pub old_start: u32,
    pub old_len: u32,
    pub new_start: u32,
    pub new_len: u32,
    pub lines: Vec<DiffLine>,
}

/// What a hunk line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LineKind {
    Context,
    Added,
    Removed,
    /// `\ No newline at end of file`, about the line before it.
    NoNewline,
}

impl LineKind {
    /// The character that starts such a line in a unified diff.
    pub fn sign(self) -> char {
        match self {
            LineKind::Context => ' ',
            LineKind::Added => '+',
            LineKind::Removed => '-',
            LineKind::NoNewline => '\\',
        }
    }
}

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    pub kind: LineKind,
    /// The line's number in the old file (context and removed lines).
    pub old_no: Option<u32>,
    /// The line's number in the new file (context and added lines).
    pub new_no: Option<u32>,
    /// The line without its sign and line feed; a carriage return of a CRLF file stays.
    /// For [`LineKind::NoNewline`], the words after `\ `.
    pub text: String,
    /// Byte ranges of `text` that changed at word level against the paired line.
    pub emphasis: Vec<Range<usize>>,
}

impl DiffModel {
    /// Whether there is no file in the diff.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The number of lines in all hunks.
    pub fn line_count(&self) -> usize {
        self.files
            .iter()
            .flat_map(|file| &file.hunks)
            .map(|hunk| hunk.lines.len())
            .sum()
    }

    /// Lines added and removed over all files.
    pub(crate) fn totals(&self) -> (usize, usize) {
        self.files.iter().fold((0, 0), |(added, removed), file| {
            (added + file.added, removed + file.removed)
        })
    }
}
