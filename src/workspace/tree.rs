//! Git tree objects built directly from a sorted entry list.
//!
//! Blob ids come from the stat cache, so building a tree reads no file and
//! looks up no object: each directory's tree is serialized and hashed here,
//! and written only if it is not among the trees this store is known to
//! hold already (an unchanged directory costs no object-database call).

use git2::{ObjectType, Odb, Oid};
use std::collections::HashSet;
use std::os::unix::ffi::OsStrExt;

use super::{FingerprintEntry, WorkspaceError};

const MODE_TREE: u32 = 0o040000;

/// Writes the trees for `entries` (sorted by path bytes), deepest first, and
/// returns the id of the root tree. `stored` holds ids of trees known to be
/// in `odb`; those are not written again, and new ones are added.
pub(crate) fn write_tree(
    odb: &Odb<'_>,
    entries: &[FingerprintEntry],
    stored: &mut HashSet<Oid>,
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
    build_tree(&items, &mut |buf| {
        let id = Oid::hash_object(ObjectType::Tree, buf)
            .map_err(WorkspaceError::git("hashing a tree"))?;
        if !stored.contains(&id) {
            let written = odb
                .write(ObjectType::Tree, buf)
                .map_err(WorkspaceError::git("writing a tree"))?;
            stored.insert(written);
        }
        Ok(id)
    })
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
    let mut trees = Trees { write };
    match trees.write_dir(items, 0)? {
        Some(id) => Ok(id),
        None => trees.write_items(Vec::new()),
    }
}

struct Trees<'w> {
    write: &'w mut dyn FnMut(&[u8]) -> Result<Oid, WorkspaceError>,
}

impl Trees<'_> {
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
                    let dir = &rest[..=slash];
                    let end = i + entries[i..]
                        .iter()
                        .take_while(|e| e.path[prefix..].starts_with(dir))
                        .count();
                    if let Some(oid) = self.write_dir(&entries[i..end], prefix + dir.len())? {
                        items.push((&rest[..slash], MODE_TREE, oid));
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
