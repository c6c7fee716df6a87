//! The hunks of a patch, which of them a subset chooses, and the patch of
//! only those.
//!
//! Hunks are numbered from 1 in patch order, as the review offers them:
//! each `@@` hunk of a modified, renamed or copied text file is a number of
//! its own; an added or deleted file, a binary file and a change without
//! hunks (a mode change, a pure rename) is one number for the whole file,
//! since half a new file or a binary delta cannot be applied.
//!
//! The patch of a subset keeps each chosen file's header and moves the new
//! side of each hunk by the lines the hunks left out before it would have
//! added or removed. A file only partly chosen does not end as the run's
//! file, so the post-image id of its `index` line is set to zeros: the
//! images it produces are pinned by the re-verification instead.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::DeliveryError;
use super::conflict::{ChangeKind, FileChange};

/// One file of a patch, split into its header and hunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatchFile {
    /// The lines before the first hunk, each with its line feed.
    pub header: Vec<u8>,
    pub hunks: Vec<PatchHunk>,
    /// `path` or `old -> new`, quoted.
    pub display: String,
    pub change: FileChange,
    /// Taken or left as a whole (see the module documentation).
    pub whole: bool,
}

/// One `@@` hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PatchHunk {
    /// Its `@@` line, without the line feed.
    pub head: Vec<u8>,
    pub old_start: u64,
    pub old_len: u64,
    pub new_start: u64,
    pub new_len: u64,
    /// The text after the second `@@`.
    pub heading: Vec<u8>,
    /// The lines after the `@@` line, each with its line feed.
    pub body: Vec<u8>,
}

/// Which hunks of which files are chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selection {
    /// Per file, one flag per hunk (a file without hunks has one flag).
    pub chosen: Vec<Vec<bool>>,
}

/// A patch split into files; the file changes are git's reading of it.
pub(crate) fn split(patch: &[u8]) -> Result<Vec<PatchFile>, DeliveryError> {
    let (_, changes) = super::conflict::parse(patch)?;
    let sections = sections(patch)?;
    if sections.len() != changes.len() {
        return Err(DeliveryError::BadPatch(format!(
            "{} file sections but git reads {} file changes",
            sections.len(),
            changes.len()
        )));
    }
    Ok(sections
        .into_iter()
        .zip(changes)
        .map(|((header, hunks), change)| {
            let binary = lines(&header)
                .any(|l| l.starts_with(b"GIT binary patch") || l.starts_with(b"Binary files "));
            let whole = taken_whole(
                matches!(change.status, ChangeKind::Added | ChangeKind::Deleted),
                binary,
                hunks.len(),
            );
            PatchFile {
                header,
                hunks,
                display: change.display(),
                change,
                whole,
            }
        })
        .collect())
}

fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split_inclusive(|b| *b == b'\n')
}

type Section = (Vec<u8>, Vec<PatchHunk>);

/// Splits on `diff --git` lines, then on `@@` lines.
fn sections(patch: &[u8]) -> Result<Vec<Section>, DeliveryError> {
    let mut out: Vec<Section> = Vec::new();
    for line in lines(patch) {
        if line.starts_with(b"diff --git ") {
            out.push((line.to_vec(), Vec::new()));
            continue;
        }
        let Some((header, hunks)) = out.last_mut() else {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return Err(DeliveryError::BadPatch(
                "text before the first `diff --git` line".into(),
            ));
        };
        if line.starts_with(b"@@ ") {
            hunks.push(hunk_head(line)?);
        } else if let Some(hunk) = hunks.last_mut() {
            hunk.body.extend_from_slice(line);
        } else {
            header.extend_from_slice(line);
        }
    }
    Ok(out)
}

/// Reads `@@ -a[,b] +c[,d] @@ heading`.
fn hunk_head(line: &[u8]) -> Result<PatchHunk, DeliveryError> {
    let bad = || {
        DeliveryError::BadPatch(format!(
            "a malformed hunk header: {}",
            String::from_utf8_lossy(line).trim_end()
        ))
    };
    let head = line.strip_suffix(b"\n").unwrap_or(line);
    let rest = head.strip_prefix(b"@@ -").ok_or_else(bad)?;
    let end = rest.windows(3).position(|w| w == b" @@").ok_or_else(bad)?;
    let ranges = std::str::from_utf8(&rest[..end]).map_err(|_| bad())?;
    let (old, new) = ranges.split_once(" +").ok_or_else(bad)?;
    let range = |r: &str| -> Option<(u64, u64)> {
        match r.split_once(',') {
            Some((start, len)) => Some((start.parse().ok()?, len.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (old_start, old_len) = range(old).ok_or_else(bad)?;
    let (new_start, new_len) = range(new).ok_or_else(bad)?;
    Ok(PatchHunk {
        head: head.to_vec(),
        old_start,
        old_len,
        new_start,
        new_len,
        heading: rest[end + 3..].to_vec(),
        body: Vec::new(),
    })
}

impl Selection {
    pub fn none(files: &[PatchFile]) -> Self {
        Self {
            chosen: files
                .iter()
                .map(|f| vec![false; f.hunks.len().max(1)])
                .collect(),
        }
    }

    /// Chosen numbers and all numbers (a whole file counts once).
    pub fn counts(&self, files: &[PatchFile]) -> (usize, usize) {
        let mut chosen = 0;
        let mut total = 0;
        for (file, flags) in files.iter().zip(&self.chosen) {
            if file.whole {
                total += 1;
                chosen += usize::from(flags.iter().any(|f| *f));
            } else {
                total += flags.len();
                chosen += flags.iter().filter(|f| **f).count();
            }
        }
        (chosen, total)
    }

    /// The indices of the files with anything chosen.
    pub fn files(&self) -> Vec<usize> {
        (0..self.chosen.len())
            .filter(|i| self.chosen[*i].iter().any(|f| *f))
            .collect()
    }

    fn is_empty(&self) -> bool {
        self.files().is_empty()
    }
}

/// The one rule of what can be chosen apart: a file added or deleted, a
/// binary file and a file without hunks is taken or left whole.
pub(crate) fn taken_whole(added_or_deleted: bool, binary: bool, hunks: usize) -> bool {
    added_or_deleted || binary || hunks == 0
}

/// One numbered choice: hunk `Some(h)` of file `file`, or the whole file.
pub(crate) type Choice = (usize, Option<usize>);

/// The numbered choices of files given as `(taken whole, hunk count)`, in
/// patch order: number `n` is the `n - 1`th of the list. Whoever offers the
/// choices (the review, `show --diff`) numbers them through this.
pub(crate) fn number(files: impl IntoIterator<Item = (bool, usize)>) -> Vec<Choice> {
    let mut out = Vec::new();
    for (i, (whole, hunks)) in files.into_iter().enumerate() {
        if whole {
            out.push((i, None));
        } else {
            out.extend((0..hunks).map(|h| (i, Some(h))));
        }
    }
    out
}

/// The numbered choices of a split patch.
pub(crate) fn numbering(files: &[PatchFile]) -> Vec<Choice> {
    number(files.iter().map(|f| (f.whole, f.hunks.len())))
}

/// `1,3-4` → `[1, 3, 4]`.
pub fn parse_numbers(text: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |s: &str| {
            s.trim()
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{s:?} is not a hunk number (they start at 1)"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if b < a {
                    return Err(format!("the range {part} goes backwards"));
                }
                if b - a > 100_000 {
                    return Err(format!("the range {part} is too long"));
                }
                out.extend(a..=b);
            }
            None => out.push(number(part)?),
        }
    }
    if out.is_empty() {
        return Err("no hunk number given".into());
    }
    Ok(out)
}

pub(crate) fn by_numbers(
    files: &[PatchFile],
    numbers: &[usize],
) -> Result<Selection, DeliveryError> {
    let choices = numbering(files);
    let mut selection = Selection::none(files);
    let mut unknown = BTreeSet::new();
    for n in numbers {
        match n.checked_sub(1).and_then(|i| choices.get(i)) {
            Some((file, Some(hunk))) => selection.chosen[*file][*hunk] = true,
            Some((file, None)) => selection.chosen[*file].fill(true),
            None => {
                unknown.insert(*n);
            }
        }
    }
    if !unknown.is_empty() {
        let list: Vec<String> = unknown.iter().map(ToString::to_string).collect();
        return Err(DeliveryError::BadSubset(format!(
            "hunk {} is not in final.patch, which has {} (numbered as `apply --dry-run --hunks 1-{}` lists them)",
            list.join(", "),
            choices.len(),
            choices.len()
        )));
    }
    nonempty(selection)
}

pub(crate) fn by_paths(files: &[PatchFile], paths: &[String]) -> Result<Selection, DeliveryError> {
    let mut selection = Selection::none(files);
    let mut unknown = Vec::new();
    for want in paths {
        let want_bytes =
            crate::workspace::unquote_path(want).unwrap_or_else(|| want.as_bytes().to_vec());
        let dir = {
            let mut d = want_bytes.clone();
            if !d.ends_with(b"/") {
                d.push(b'/');
            }
            d
        };
        let mut found = false;
        for (i, file) in files.iter().enumerate() {
            let hit = file.display == *want
                || file
                    .change
                    .paths()
                    .any(|p| *p == want_bytes || p.starts_with(&dir));
            if hit {
                selection.chosen[i].fill(true);
                found = true;
            }
        }
        if !found {
            unknown.push(want.clone());
        }
    }
    if !unknown.is_empty() {
        return Err(DeliveryError::BadSubset(format!(
            "not a path final.patch changes: {}",
            unknown.join(", ")
        )));
    }
    nonempty(selection)
}

/// The selection a patch of whole hunks of `files` makes; anything in it
/// that is not a hunk of `files` (in their order) is refused and named.
pub(crate) fn by_patch(files: &[PatchFile], patch: &[u8]) -> Result<Selection, DeliveryError> {
    let bad = |why: String| DeliveryError::BadSubset(why);
    if patch.iter().all(u8::is_ascii_whitespace) {
        return Err(empty());
    }
    let theirs = sections(patch).map_err(|e| bad(format!("the reviewed patch: {e}")))?;
    let mut selection = Selection::none(files);
    let mut next = 0;
    for (header, hunks) in &theirs {
        let name = String::from_utf8_lossy(lines(header).next().unwrap_or_default())
            .trim_end()
            .to_string();
        // A partly chosen file's post-image id may be the run's or zeros.
        let Some(offset) = files[next.min(files.len())..]
            .iter()
            .position(|f| without_post_id(&f.header) == without_post_id(header))
        else {
            return Err(bad(format!(
                "the reviewed patch's `{name}` is not a file of final.patch as the run made it (or is out of order)"
            )));
        };
        let index = next + offset;
        next = index + 1;
        let file = &files[index];
        let mut from = 0;
        for hunk in hunks {
            let found = file.hunks[from..].iter().position(|h| {
                h.old_start == hunk.old_start
                    && h.old_len == hunk.old_len
                    && h.new_len == hunk.new_len
                    && h.body == hunk.body
            });
            let Some(at) = found else {
                return Err(bad(format!(
                    "the hunk `{}` of {} is not a hunk of final.patch",
                    String::from_utf8_lossy(&hunk.head),
                    file.display
                )));
            };
            selection.chosen[index][from + at] = true;
            from += at + 1;
        }
        if file.hunks.is_empty() {
            selection.chosen[index][0] = true;
        }
        if file.whole && selection.chosen[index].iter().any(|f| !f) {
            return Err(bad(format!(
                "{} can only be taken whole (an added, deleted or binary file)",
                file.display
            )));
        }
    }
    nonempty(selection)
}

fn empty() -> DeliveryError {
    DeliveryError::BadSubset("the subset is empty: choose at least one hunk or path".into())
}

fn nonempty(selection: Selection) -> Result<Selection, DeliveryError> {
    if selection.is_empty() {
        return Err(empty());
    }
    Ok(selection)
}

/// The patch of the chosen hunks (see the module documentation).
pub(crate) fn build(files: &[PatchFile], selection: &Selection) -> Vec<u8> {
    let mut out = Vec::new();
    for (file, flags) in files.iter().zip(&selection.chosen) {
        if !flags.iter().any(|f| *f) {
            continue;
        }
        let partial = flags.iter().any(|f| !f);
        if partial {
            for line in lines(&file.header) {
                out.extend_from_slice(&zero_post_id(line));
            }
        } else {
            out.extend_from_slice(&file.header);
        }
        let mut shift: i64 = 0;
        for (hunk, chosen) in file.hunks.iter().zip(flags) {
            let delta = hunk.new_len as i64 - hunk.old_len as i64;
            if !*chosen {
                shift += delta;
                continue;
            }
            if shift == 0 {
                out.extend_from_slice(&hunk.head);
            } else {
                let start = (hunk.new_start as i64 - shift).max(0);
                let mut head = format!("@@ -{}", hunk.old_start);
                push_len(&mut head, hunk.old_len);
                let _ = write!(head, " +{start}");
                push_len(&mut head, hunk.new_len);
                head.push_str(" @@");
                out.extend_from_slice(head.as_bytes());
                out.extend_from_slice(&hunk.heading);
            }
            out.push(b'\n');
            out.extend_from_slice(&hunk.body);
        }
    }
    out
}

fn push_len(head: &mut String, len: u64) {
    if len != 1 {
        let _ = write!(head, ",{len}");
    }
}

fn without_post_id(header: &[u8]) -> Vec<u8> {
    lines(header).flat_map(zero_post_id).collect()
}

/// `index A..B[ mode]` → `index A..000…[ mode]`.
fn zero_post_id(line: &[u8]) -> Vec<u8> {
    let Some(rest) = line.strip_prefix(b"index ") else {
        return line.to_vec();
    };
    let Some(dots) = rest.windows(2).position(|w| w == b"..") else {
        return line.to_vec();
    };
    let after = &rest[dots + 2..];
    let len = after
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(after.len());
    let mut out = b"index ".to_vec();
    out.extend_from_slice(&rest[..dots + 2]);
    out.extend(std::iter::repeat_n(b'0', len));
    out.extend_from_slice(&after[len..]);
    out
}

#[cfg(test)]
#[path = "hunks_tests.rs"]
mod tests;
