//! Git tree objects built directly from a sorted entry list.
//!
//! Blob ids come from the stat cache, so building a tree reads no file and
//! looks up no object: each directory's tree is serialized and hashed here,
//! and written only if it is not among the trees this store is known to
//! hold already (an unchanged directory costs no object-database call).

use git2::{ObjectType, Odb, Oid, Signature};
use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;

use crate::workspace::{FingerprintEntry, WorkspaceError};

/// The author and committer of every checkpoint commit.
pub(crate) fn signature() -> Result<Signature<'static>, WorkspaceError> {
    Signature::now("minicoder", "minicoder@localhost")
        .map_err(WorkspaceError::git("making a signature"))
}

const MODE_TREE: u32 = 0o040000;

/// Writes the trees for `entries` (sorted by path bytes), deepest first, and
/// returns the id of the root tree. `stored` holds ids of trees known to be
/// in `odb`; those are not written again, and new ones are added.
pub(crate) fn write_tree(
    odb: &Odb<'_>,
    entries: &[FingerprintEntry],
    stored: &mut HashSet<Oid>,
) -> Result<Oid, WorkspaceError> {
    write_tree_reusing(odb, entries, stored, &HashMap::new(), &mut HashMap::new())
}

/// The tree ids of directories, by relative path with a trailing `/`.
pub(crate) type DirTrees = HashMap<Vec<u8>, Oid>;

/// [`write_tree`], taking the tree of each directory in `known` as it is
/// (without looking at its entries) and recording the trees of the other
/// directories in `made`.
pub(crate) fn write_tree_reusing(
    odb: &Odb<'_>,
    entries: &[FingerprintEntry],
    stored: &mut HashSet<Oid>,
    known: &DirTrees,
    made: &mut DirTrees,
) -> Result<Oid, WorkspaceError> {
    let items: Vec<TreeItem<'_>> = entries
        .iter()
        .filter(|e| !e.is_oversize())
        .map(|e| TreeItem {
            path: e.path.as_os_str().as_bytes(),
            mode: e.mode,
            id: e.blob,
        })
        .collect();
    let mut write = |buf: &[u8]| {
        let id = Oid::hash_object(ObjectType::Tree, buf)
            .map_err(WorkspaceError::git("hashing a tree"))?;
        if !stored.contains(&id) {
            let written = odb
                .write(ObjectType::Tree, buf)
                .map_err(WorkspaceError::git("writing a tree"))?;
            stored.insert(written);
        }
        Ok(id)
    };
    let mut trees = Trees {
        write: &mut write,
        known,
        made: Some(made),
    };
    trees.root(&items)
}

/// Sorted paths, each ending in `/`, none a prefix of another: the places
/// that changed.
pub(crate) fn outermost(mut paths: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    paths.sort_unstable();
    paths.dedup();
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(paths.len());
    for p in paths {
        if out.last().is_some_and(|o| p.starts_with(o)) {
            continue;
        }
        out.push(p);
    }
    out
}

/// Whether the directory `dir` (ending in `/`) is at or below one of
/// `roots` (as [`outermost`] gives them) or holds one.
pub(crate) fn touches(roots: &[Vec<u8>], dir: &[u8]) -> bool {
    // Roots are not nested, so a root that is a prefix of `dir` is the
    // greatest one not after it.
    let i = roots.partition_point(|r| r.as_slice() <= dir);
    if i > 0 && dir.starts_with(&roots[i - 1]) {
        return true;
    }
    let j = roots.partition_point(|r| r.as_slice() < dir);
    j < roots.len() && roots[j].starts_with(dir)
}

/// A file or symlink of a tree: its path, Git mode and object id.
pub(crate) struct TreeItem<'a> {
    pub path: &'a [u8],
    pub mode: u32,
    pub id: Oid,
}

/// Serializes the trees of `items` (sorted by path bytes), deepest first,
/// handing each to `write`, which gives its id; returns the root's.
pub(crate) fn build_tree(
    items: &[TreeItem<'_>],
    write: &mut dyn FnMut(&[u8]) -> Result<Oid, WorkspaceError>,
) -> Result<Oid, WorkspaceError> {
    let known = DirTrees::new();
    let mut trees = Trees {
        write,
        known: &known,
        made: None,
    };
    trees.root(items)
}

struct Trees<'w> {
    write: &'w mut dyn FnMut(&[u8]) -> Result<Oid, WorkspaceError>,
    known: &'w DirTrees,
    made: Option<&'w mut DirTrees>,
}

impl Trees<'_> {
    fn root(&mut self, items: &[TreeItem<'_>]) -> Result<Oid, WorkspaceError> {
        match self.write_dir(items, 0)? {
            Some(id) => Ok(id),
            None => self.write_items(Vec::new()),
        }
    }

    /// All of `entries` share the first `prefix` bytes of their paths, which
    /// name the directory being written (empty, or ending in `/`); `None`
    /// for a directory without entries.
    fn write_dir(
        &mut self,
        entries: &[TreeItem<'_>],
        prefix: usize,
    ) -> Result<Option<Oid>, WorkspaceError> {
        let mut items: Vec<(&[u8], u32, Oid)> = Vec::new();
        let mut i = 0;
        while i < entries.len() {
            let rest = &entries[i].path[prefix..];
            match rest.iter().position(|&b| b == b'/') {
                None => {
                    items.push((rest, entries[i].mode, entries[i].id));
                    i += 1;
                }
                Some(slash) => {
                    // The directory's path, and its entries (sorted, so
                    // they come together).
                    let full = &entries[i].path[..=prefix + slash];
                    let end = i + entries[i..].partition_point(|e| e.path.starts_with(full));
                    if let Some(&oid) = self.known.get(full) {
                        items.push((&rest[..slash], MODE_TREE, oid));
                    } else if let Some(oid) = self.write_dir(&entries[i..end], full.len())? {
                        items.push((&rest[..slash], MODE_TREE, oid));
                        if let Some(made) = &mut self.made {
                            made.insert(full.to_vec(), oid);
                        }
                    }
                    i = end;
                }
            }
        }
        if items.is_empty() {
            return Ok(None);
        }
        self.write_items(items).map(Some)
    }

    fn write_items(&mut self, mut items: Vec<(&[u8], u32, Oid)>) -> Result<Oid, WorkspaceError> {
        // Git orders a tree's entries by name, comparing a directory as if its
        // name ended in '/'. Sorting full paths by bytes already yields that
        // order, so this only confirms it (linear on sorted input).
        items.sort_by(|a, b| git_name(a).cmp(git_name(b)));
        let mut buf = Vec::with_capacity(items.len() * 48);
        for (name, mode, oid) in items {
            push_mode(&mut buf, mode);
            buf.extend_from_slice(name);
            buf.push(0);
            buf.extend_from_slice(oid.as_bytes());
        }
        (self.write)(&buf)
    }
}

/// The octal mode as Git writes it in a tree (no leading zero), and a space.
fn push_mode(buf: &mut Vec<u8>, mode: u32) {
    match mode {
        MODE_TREE => buf.extend_from_slice(b"40000 "),
        0o100644 => buf.extend_from_slice(b"100644 "),
        0o100755 => buf.extend_from_slice(b"100755 "),
        0o120000 => buf.extend_from_slice(b"120000 "),
        _ => buf.extend_from_slice(format!("{mode:o} ").as_bytes()),
    }
}

fn git_name<'a>((name, mode, _): &'a (&[u8], u32, Oid)) -> impl Iterator<Item = u8> + 'a {
    let suffix: &[u8] = if *mode == MODE_TREE { b"/" } else { b"" };
    name.iter().chain(suffix).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::{EntryDigest, EntryKind};
    use std::path::PathBuf;

    #[test]
    fn directories_on_the_way_to_a_change_are_touched() {
        let roots = outermost(
            ["a/b/", "a-b/", "a/b/c/", "z/"]
                .iter()
                .map(|r| r.as_bytes().to_vec())
                .collect(),
        );
        assert_eq!(roots, [b"a-b/".to_vec(), b"a/b/".to_vec(), b"z/".to_vec()]);
        for dir in ["a/", "a/b/", "a/b/c/d/", "a-b/", "z/y/"] {
            assert!(touches(&roots, dir.as_bytes()), "{dir}");
        }
        for dir in ["a/c/", "b/", "a/bc/", "a-/", "y/", "z0/"] {
            assert!(!touches(&roots, dir.as_bytes()), "{dir}");
        }
    }

    #[test]
    fn matches_what_git_builds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = git2::Repository::init_bare(dir.path()).expect("init");
        let odb = repo.odb().expect("odb");
        let mut paths = ["a.txt", "a/b", "a/c/d", "a0", "a-b", "b", "z/\u{e9}"];
        paths.sort_by(|x, y| x.as_bytes().cmp(y.as_bytes()));
        let entries: Vec<FingerprintEntry> = paths
            .iter()
            .map(|p| FingerprintEntry {
                path: PathBuf::from(p),
                kind: EntryKind::File,
                mode: if *p == "b" { 0o100755 } else { 0o100644 },
                digest: EntryDigest::Content([0; 32]),
                blob: odb.write(ObjectType::Blob, p.as_bytes()).expect("blob"),
            })
            .collect();
        let mut stored = HashSet::new();
        let ours = write_tree(&odb, &entries, &mut stored).expect("tree");
        assert_eq!(
            write_tree(&odb, &entries, &mut stored).expect("again"),
            ours
        );
        assert!(stored.contains(&ours));

        let mut index = git2::Index::new().expect("index");
        for e in &entries {
            let mut ie = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: e.mode,
                uid: 0,
                gid: 0,
                file_size: 0,
                id: e.blob,
                flags: 0,
                flags_extended: 0,
                path: e.path.as_os_str().as_bytes().to_vec(),
            };
            ie.flags = ie.path.len() as u16;
            index.add(&ie).expect("add");
        }
        let theirs = index.write_tree_to(&repo).expect("write tree");
        assert_eq!(ours, theirs);
    }
}
