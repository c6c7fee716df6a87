//! What the patch changes, file by file, and where the source no longer is
//! what the run started from.
//!
//! The baseline of each touched file is read from the patch itself: the run
//! writes every `index` line with full object ids, so the patch (whose hash
//! the signed receipt holds) names the exact git blob and mode each file had
//! when the run started, and the exact blob it must have afterwards. A file
//! of the source whose blob id or mode differs from that pre-image was
//! changed since the baseline: that is an overlap. Paths the patch does not
//! touch are never looked at, so the user's other edits stay as they are.

use std::collections::BTreeMap;

use git2::{Delta, Diff, Oid};

use super::DeliveryError;
use super::image::Image;
use crate::workspace::quote_path;

/// One file's change as the patch states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub status: ChangeKind,
    /// The path before (absent for an added file).
    pub old_path: Option<Vec<u8>>,
    /// The path after (absent for a deleted file).
    pub new_path: Option<Vec<u8>>,
    /// The pre-image: blob id (`None` when the patch does not name it, as
    /// for a change of mode only) and git mode.
    pub old: Option<(Option<Oid>, u32)>,
    /// The post-image, likewise.
    pub new: Option<(Option<Oid>, u32)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Deleted,
    Modified,
    Renamed,
    Copied,
}

impl ChangeKind {
    pub(crate) fn letter(self) -> char {
        match self {
            ChangeKind::Added => 'A',
            ChangeKind::Deleted => 'D',
            ChangeKind::Modified => 'M',
            ChangeKind::Renamed => 'R',
            ChangeKind::Copied => 'C',
        }
    }
}

impl FileChange {
    /// `path` or `old -> new`, quoted as git quotes paths.
    pub fn display(&self) -> String {
        match (&self.old_path, &self.new_path) {
            (Some(old), Some(new)) if old != new => {
                format!("{} -> {}", quote_path(old), quote_path(new))
            }
            (_, Some(path)) | (Some(path), None) => quote_path(path).into_owned(),
            (None, None) => String::new(),
        }
    }

    /// Every path this change reads or writes.
    pub fn paths(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.old_path.iter().chain(
            self.new_path
                .iter()
                .filter(move |p| self.old_path.as_ref() != Some(*p)),
        )
    }
}

/// Parses a patch into its file changes (in patch order).
pub fn parse(patch: &[u8]) -> Result<(Diff<'static>, Vec<FileChange>), DeliveryError> {
    let diff = Diff::from_buffer(patch).map_err(|e| DeliveryError::BadPatch(e.message().into()))?;
    let mut changes = Vec::new();
    for delta in diff.deltas() {
        let status = match delta.status() {
            Delta::Added => ChangeKind::Added,
            Delta::Deleted => ChangeKind::Deleted,
            Delta::Modified | Delta::Typechange => ChangeKind::Modified,
            Delta::Renamed => ChangeKind::Renamed,
            Delta::Copied => ChangeKind::Copied,
            other => {
                return Err(DeliveryError::BadPatch(format!(
                    "a file change of kind {other:?} cannot be applied"
                )));
            }
        };
        let side = |file: git2::DiffFile<'_>| {
            let id = Some(file.id()).filter(|id| !id.is_zero());
            (
                file.path_bytes().map(<[u8]>::to_vec),
                (id, u32::from(file.mode())),
            )
        };
        let (old_path, old) = side(delta.old_file());
        let (new_path, new) = side(delta.new_file());
        changes.push(FileChange {
            status,
            old_path: old_path.filter(|_| status != ChangeKind::Added),
            new_path: new_path.filter(|_| status != ChangeKind::Deleted),
            old: Some(old).filter(|_| status != ChangeKind::Added),
            new: Some(new).filter(|_| status != ChangeKind::Deleted),
        });
    }
    Ok((diff, changes))
}

/// A touched path the source changed since the baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub path: Vec<u8>,
    /// What the source did to it, for the message.
    pub why: &'static str,
}

impl Overlap {
    pub fn display(&self) -> String {
        format!("{} ({})", quote_path(&self.path), self.why)
    }
}

/// Compares the source's current images of the touched paths with the
/// patch's pre-images. `current` holds every path of [`FileChange::paths`].
pub(crate) fn overlaps(changes: &[FileChange], current: &BTreeMap<Vec<u8>, Image>) -> Vec<Overlap> {
    let mut found = Vec::new();
    for change in changes {
        if let (Some(path), Some((id, mode))) = (&change.old_path, change.old) {
            let now = current.get(path).unwrap_or(&Image::Absent);
            let why = match now.git_mode() {
                None => Some("deleted since the run's baseline"),
                // A mode of 0: the patch does not state it (a pure rename).
                Some(m) if mode != 0 && m != mode => {
                    Some("its type or mode changed since the run's baseline")
                }
                Some(_) if id.is_some_and(|id| now.blob_id() != Some(id)) => {
                    Some("changed since the run's baseline")
                }
                Some(_) => None,
            };
            if let Some(why) = why {
                found.push(Overlap {
                    path: path.clone(),
                    why,
                });
            }
        }
        // A path another change of the patch deletes first (a file that
        // becomes a symlink is a deletion and an addition) is checked there.
        let replaced = |path: &Vec<u8>| {
            changes
                .iter()
                .any(|c| c.old_path.as_ref() == Some(path) && c.new_path.as_ref() != Some(path))
        };
        if let Some(path) = &change.new_path
            && change.old_path.as_ref() != Some(path)
            && !replaced(path)
            && current.get(path).is_some_and(|i| *i != Image::Absent)
        {
            found.push(Overlap {
                path: path.clone(),
                why: "created since the run's baseline",
            });
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found.dedup_by(|a, b| a.path == b.path);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(bytes: &[u8]) -> Image {
        Image::File {
            bytes: bytes.to_vec(),
            mode: 0o644,
        }
    }

    fn blob(bytes: &[u8]) -> Oid {
        Oid::hash_object(git2::ObjectType::Blob, bytes).unwrap()
    }

    fn patch_for(old: &[u8], new: &[u8]) -> String {
        format!(
            "diff --git a/a.txt b/a.txt\nindex {}..{} 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-{}+{}",
            blob(old),
            blob(new),
            String::from_utf8_lossy(old),
            String::from_utf8_lossy(new)
        )
    }

    #[test]
    fn a_patch_names_full_pre_and_post_images() {
        let (_, changes) = parse(patch_for(b"one\n", b"two\n").as_bytes()).unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].status, ChangeKind::Modified);
        assert_eq!(changes[0].old, Some((Some(blob(b"one\n")), 0o100644)));
        assert_eq!(changes[0].new, Some((Some(blob(b"two\n")), 0o100644)));
    }

    #[test]
    fn an_unchanged_file_does_not_overlap_and_an_edited_one_does() {
        let (_, changes) = parse(patch_for(b"one\n", b"two\n").as_bytes()).unwrap();
        let mut current = BTreeMap::from([(b"a.txt".to_vec(), file(b"one\n"))]);
        assert!(overlaps(&changes, &current).is_empty());
        current.insert(b"a.txt".to_vec(), file(b"mine\n"));
        let found = overlaps(&changes, &current);
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].display(),
            "a.txt (changed since the run's baseline)"
        );
        current.insert(b"a.txt".to_vec(), Image::Absent);
        assert_eq!(
            overlaps(&changes, &current)[0].why,
            "deleted since the run's baseline"
        );
        current.insert(
            b"a.txt".to_vec(),
            Image::File {
                bytes: b"one\n".to_vec(),
                mode: 0o755,
            },
        );
        assert!(overlaps(&changes, &current)[0].why.contains("mode"));
    }

    #[test]
    fn a_file_the_run_adds_overlaps_one_the_user_created() {
        let patch = format!(
            "diff --git a/n.txt b/n.txt\nnew file mode 100644\nindex 0000000000000000000000000000000000000000..{}\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+new\n",
            blob(b"new\n")
        );
        let (_, changes) = parse(patch.as_bytes()).unwrap();
        assert_eq!(changes[0].status, ChangeKind::Added);
        let mut current = BTreeMap::from([(b"n.txt".to_vec(), Image::Absent)]);
        assert!(overlaps(&changes, &current).is_empty());
        current.insert(b"n.txt".to_vec(), file(b"x"));
        assert_eq!(
            overlaps(&changes, &current)[0].why,
            "created since the run's baseline"
        );
    }
}
