//! From a verified patch and the source as it is now to the exact image
//! every touched path gets, or the reasons it cannot.
//!
//! The run's post-images are computed by applying the patch (libgit2, in an
//! in-memory object store, so nothing is written anywhere) to the baseline
//! images, and each is checked against the blob id the patch names: what
//! apply writes is byte for byte what the run produced. With `--merge`, an
//! overlapping file's baseline comes from the run's checkpoint store (its
//! blob id, named by the signed patch, authenticates it), and the user's
//! file, the baseline and the run's file are merged three ways.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path};

use git2::{Diff, IndexEntry, IndexTime, ObjectType, Odb, Oid, Repository};

use super::DeliveryError;
use super::conflict::{FileChange, Overlap, overlaps};
pub use super::image::Write;
use super::image::{GIT_MODE_LINK, Image};
use super::source::Source;
use crate::workspace::quote_path;

/// What applying the patch does, or why it must not.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub changes: Vec<FileChange>,
    pub writes: Vec<Write>,
    /// Touched paths the user changed since the baseline (without `--merge`,
    /// any of them refuses the whole patch).
    pub overlaps: Vec<Overlap>,
    /// With `--merge`: overlapping paths that do not merge cleanly.
    pub unmerged: Vec<String>,
}

/// Where `--merge` finds baseline blobs: the run's checkpoint store.
pub struct BaselineStore {
    repo: Option<Repository>,
}

impl BaselineStore {
    pub fn open(dir: &Path) -> Self {
        Self {
            repo: Repository::open_bare(dir).ok(),
        }
    }

    /// The blob `id`, checked against its id.
    fn blob(&self, id: Oid) -> Option<Vec<u8>> {
        let repo = self.repo.as_ref()?;
        let blob = repo.find_blob(id).ok()?;
        let bytes = blob.content().to_vec();
        (Oid::hash_object(ObjectType::Blob, &bytes).ok()? == id).then_some(bytes)
    }
}

pub fn plan(
    source: &Source,
    diff: &Diff<'_>,
    changes: Vec<FileChange>,
    merge: Option<&BaselineStore>,
) -> Result<Plan, DeliveryError> {
    let mut current = BTreeMap::new();
    for change in &changes {
        if let (Some(path), Some((_, mode))) = (&change.new_path, change.new) {
            source.check(path, mode == GIT_MODE_LINK)?;
        }
        for path in change.paths() {
            current.insert(path.clone(), source.read(path)?);
        }
    }
    let found = overlaps(&changes, &current);
    let mut plan = Plan {
        changes,
        overlaps: found,
        ..Plan::default()
    };
    let Some(store) = merge else {
        if !plan.overlaps.is_empty() {
            return Ok(plan);
        }
        plan.writes = writes(diff, &plan.changes, &current, &current, &[], None)?;
        super::links::check(source.root(), &plan.writes)?;
        return Ok(plan);
    };
    // The baseline: the current image where the user did not touch it, the
    // checkpoint store's blob where they did.
    let mut baseline = current.clone();
    for overlap in &plan.overlaps {
        let pre = plan
            .changes
            .iter()
            .find(|c| c.old_path.as_ref() == Some(&overlap.path))
            .and_then(|c| c.old);
        let image = match pre {
            Some((Some(id), mode)) => store
                .blob(id)
                .map(|bytes| Image::from_git(bytes, mode, &Image::Absent)),
            Some((None, _)) => None,
            None => Some(Image::Absent),
        };
        match image {
            Some(image) => {
                baseline.insert(overlap.path.clone(), image);
            }
            None => plan.unmerged.push(format!(
                "{} (the run's copy of its baseline is gone)",
                quote_path(&overlap.path)
            )),
        }
    }
    if !plan.unmerged.is_empty() {
        return Ok(plan);
    }
    let overlapping: Vec<Vec<u8>> = plan.overlaps.iter().map(|o| o.path.clone()).collect();
    let mut unmerged = Vec::new();
    plan.writes = writes(
        diff,
        &plan.changes,
        &baseline,
        &current,
        &overlapping,
        Some(&mut unmerged),
    )?;
    plan.unmerged = unmerged;
    super::links::check(source.root(), &plan.writes)?;
    Ok(plan)
}

/// Applies the patch to `baseline` and makes the writes that turn `current`
/// into the result; overlapping paths are merged.
fn writes(
    diff: &Diff<'_>,
    changes: &[FileChange],
    baseline: &BTreeMap<Vec<u8>, Image>,
    current: &BTreeMap<Vec<u8>, Image>,
    overlapping: &[Vec<u8>],
    unmerged: Option<&mut Vec<String>>,
) -> Result<Vec<Write>, DeliveryError> {
    let git = |what: &'static str| {
        move |e: git2::Error| DeliveryError::Git {
            what: what.to_string(),
            message: e.message().to_string(),
        }
    };
    let odb = Odb::new().map_err(git("open an object store in memory"))?;
    odb.add_new_mempack_backend(1000)
        .map_err(git("open an object store in memory"))?;
    let repo = Repository::from_odb(odb).map_err(git("open an object store in memory"))?;

    let mut index = git2::Index::new().map_err(git("make an index"))?;
    for (path, image) in baseline {
        if let (Some(content), Some(mode)) = (image.content(), image.git_mode())
            && changes.iter().any(|c| c.old_path.as_ref() == Some(path))
        {
            let id = repo.blob(content).map_err(git("store a baseline blob"))?;
            index
                .add(&entry(path, id, mode))
                .map_err(git("make an index"))?;
        }
    }
    let tree_id = index
        .write_tree_to(&repo)
        .map_err(git("write the baseline tree"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(git("read the baseline tree"))?;
    let result = repo
        .apply_to_tree(&tree, diff, None)
        .map_err(|e| DeliveryError::DoesNotApply(e.message().to_string()))?;

    let mut unmerged = unmerged;
    let mut out = Vec::new();
    for change in changes {
        let mut post = Image::Absent;
        if let Some(path) = &change.new_path {
            let Some(e) = result.get_path(Path::new(OsStr::from_bytes(path)), 0) else {
                return Err(DeliveryError::DoesNotApply(format!(
                    "{} is missing after the patch",
                    quote_path(path)
                )));
            };
            if let Some((Some(want), _)) = change.new
                && want != e.id
            {
                return Err(DeliveryError::DoesNotApply(format!(
                    "{} does not come out as the run's file (blob {} instead of {want}); the patch was altered or cannot carry it",
                    quote_path(path),
                    e.id
                )));
            }
            let blob = repo.find_blob(e.id).map_err(git("read a result blob"))?;
            let like = current.get(path).unwrap_or(&Image::Absent);
            post = Image::from_git(blob.content().to_vec(), e.mode, like);
            if post.git_mode() == Some(GIT_MODE_LINK) {
                check_link(path, post.content().unwrap_or_default())?;
            }
        }
        let mut merged = false;
        if let Some(path) = change.new_path.as_ref().or(change.old_path.as_ref())
            && overlapping.contains(path)
        {
            let base = baseline.get(path).unwrap_or(&Image::Absent);
            let mine = current.get(path).unwrap_or(&Image::Absent);
            match merge3(&repo, path, base, mine, &post) {
                Ok(image) => {
                    post = image;
                    merged = true;
                }
                Err(why) => {
                    if let Some(list) = unmerged.as_deref_mut() {
                        list.push(format!("{} ({why})", quote_path(path)));
                    }
                    continue;
                }
            }
        }
        if let Some(old) = &change.old_path
            && change.new_path.as_ref() != Some(old)
            && change.status != super::conflict::ChangeKind::Copied
        {
            out.push(Write {
                path: old.clone(),
                pre: current.get(old).cloned().unwrap_or(Image::Absent),
                post: Image::Absent,
                merged: false,
            });
        }
        if let Some(path) = &change.new_path {
            // A path deleted by one change and added by another (a change
            // of type) is one write: from what is there to the last image.
            if let Some(earlier) = out.iter_mut().find(|w| &w.path == path) {
                earlier.post = post;
                earlier.merged |= merged;
                continue;
            }
            out.push(Write {
                path: path.clone(),
                pre: current.get(path).cloned().unwrap_or(Image::Absent),
                post,
                merged,
            });
        }
    }
    Ok(out)
}

fn entry(path: &[u8], id: Oid, mode: u32) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: 0,
        id,
        flags: (path.len().min(0xfff)) as u16,
        flags_extended: 0,
        path: path.to_vec(),
    }
}

/// A three-way merge of one regular file: the user's edit and the run's
/// must not touch the same lines.
fn merge3(
    repo: &Repository,
    path: &[u8],
    base: &Image,
    mine: &Image,
    theirs: &Image,
) -> Result<Image, &'static str> {
    let (
        Image::File { bytes: b, .. },
        Image::File { bytes: m, mode },
        Image::File { bytes: t, .. },
    ) = (base, mine, theirs)
    else {
        return Err("only the contents of regular files are merged");
    };
    let store = |bytes: &[u8]| repo.blob(bytes).map_err(|_| "cannot store a blob");
    let (bi, mi, ti) = (store(b)?, store(m)?, store(t)?);
    let base_mode = base.git_mode().unwrap_or_default();
    let their_mode = theirs.git_mode().unwrap_or_default();
    let result = repo
        .merge_file_from_index(
            &entry(path, bi, base_mode),
            &entry(path, mi, mine.git_mode().unwrap_or_default()),
            &entry(path, ti, their_mode),
            None,
        )
        .map_err(|_| "the merge failed")?;
    if !result.is_automergeable() {
        return Err("the user's edit and the run's touch the same lines");
    }
    // The run's change of mode wins when it made one; otherwise the user's.
    let mode = if base_mode != their_mode {
        if their_mode == super::image::GIT_MODE_EXEC {
            mode | 0o111
        } else {
            mode & !0o111
        }
    } else {
        *mode
    };
    Ok(Image::File {
        bytes: result.content().to_vec(),
        mode,
    })
}

/// A symbolic link the patch creates must lead inside the repository.
fn check_link(path: &[u8], target: &[u8]) -> Result<(), DeliveryError> {
    let refuse = || DeliveryError::RefusedPath {
        path: quote_path(path).into_owned(),
        why: format!(
            "it is a symbolic link to {}, outside the repository",
            quote_path(target)
        ),
    };
    let target = Path::new(OsStr::from_bytes(target));
    if target.is_absolute() {
        return Err(refuse());
    }
    let mut depth: i64 = Path::new(OsStr::from_bytes(path)).components().count() as i64 - 1;
    for component in target.components() {
        match component {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return Err(refuse());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_for(files: &[(&str, &str)], patch: &str) -> (tempfile::TempDir, Plan) {
        let tmp = tempfile::tempdir().unwrap();
        for (path, text) in files {
            std::fs::write(tmp.path().join(path), text).unwrap();
        }
        let source = Source::open(tmp.path()).unwrap();
        let (diff, changes) = super::super::conflict::parse(patch.as_bytes()).unwrap();
        let plan = plan(&source, &diff, changes, None).unwrap();
        (tmp, plan)
    }

    #[test]
    fn a_rename_deletes_the_old_path_and_writes_the_new_one() {
        let patch = "diff --git a/a.txt b/b.txt\nsimilarity index 100%\nrename from a.txt\nrename to b.txt\n";
        let (_t, plan) = plan_for(&[("a.txt", "one\n")], patch);
        assert!(plan.overlaps.is_empty());
        let writes: Vec<(&[u8], &Image)> = plan
            .writes
            .iter()
            .map(|w| (w.path.as_slice(), &w.post))
            .collect();
        assert_eq!(writes.len(), 2, "{writes:?}");
        assert_eq!(writes[0], (&b"a.txt"[..], &Image::Absent));
        assert_eq!(writes[1].0, b"b.txt");
        assert_eq!(writes[1].1.content(), Some(&b"one\n"[..]));
    }

    #[test]
    fn a_result_other_than_the_blob_the_patch_names_is_refused() {
        let one = Oid::hash_object(ObjectType::Blob, b"one\n").unwrap();
        let patch = format!(
            "diff --git a/a.txt b/a.txt\nindex {one}..{} 100644\n--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+two\n",
            Oid::hash_object(ObjectType::Blob, b"not two\n").unwrap()
        );
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), "one\n").unwrap();
        let source = Source::open(tmp.path()).unwrap();
        let (diff, changes) = super::super::conflict::parse(patch.as_bytes()).unwrap();
        match plan(&source, &diff, changes, None) {
            Err(DeliveryError::DoesNotApply(why)) => {
                assert!(why.contains("does not come out as the run's file"), "{why}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn links_must_stay_inside_the_repository() {
        assert!(check_link(b"a/l", b"../b").is_ok());
        assert!(check_link(b"a/l", b"../../b").is_err());
        assert!(check_link(b"l", b"/etc/passwd").is_err());
        assert!(check_link(b"l", b"x/../../y").is_err());
    }
}
