//! The repository's own minicoder configuration inside a workspace
//! (`.minicoder.json` and `.minicoder/`): what the next run would read, so a
//! run may not rewrite it — a patch that turns the checks into `true` or
//! plants a recipe would otherwise verify itself on the next run. Unless the
//! person allowed it for the run, `edit_file` refuses these paths, and a
//! command that changed them has them put back as the baseline had them.
//!
//! Everything is read through the confined [`WorkspaceRoot`], bounded: at
//! most [`MAX_ENTRIES`] entries and [`MAX_BYTES`] of content are compared; a
//! protected tree past those bounds counts as changed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, TreeWalkMode, TreeWalkResult};

use crate::workspace::store::checkpoint::CheckpointStore;
use crate::workspace::{EntryKind, WorkspaceError, WorkspaceRoot};

/// The protected names at the workspace root.
pub const PROTECTED: [&str; 2] = [".minicoder.json", ".minicoder"];
const MAX_ENTRIES: usize = 1000;
const MAX_BYTES: u64 = 64 << 20;

/// Whether `path` (relative, `/`-separated) is or lies under a protected
/// name (compared without regard to ASCII case, as a case-insensitive
/// filesystem of the source would).
pub fn is_protected(path: &[u8]) -> bool {
    let path = path.strip_prefix(b"./").unwrap_or(path);
    PROTECTED.iter().any(|name| {
        let name = name.as_bytes();
        path.len() >= name.len()
            && path[..name.len()].eq_ignore_ascii_case(name)
            && (path.len() == name.len() || path[name.len()] == b'/')
    })
}

/// One protected entry: path, git mode and blob id.
type Entry = (Vec<u8>, u32, Oid);

impl CheckpointStore {
    /// Whether the protected paths of the workspace differ from checkpoint
    /// `id`'s.
    pub(crate) fn protected_changed(
        &self,
        id: Oid,
        root: &WorkspaceRoot,
    ) -> Result<bool, WorkspaceError> {
        let want = self.protected_in(id)?;
        Ok(match protected_on_disk(root)? {
            Some(have) => have != want,
            None => true,
        })
    }

    /// Puts the protected paths of the workspace back as checkpoint `id`
    /// has them: whatever is there now goes, what the checkpoint holds is
    /// written again. Returns the paths that were there or are written.
    pub(crate) fn restore_protected(
        &self,
        id: Oid,
        root: &WorkspaceRoot,
    ) -> Result<Vec<String>, WorkspaceError> {
        let mut touched = Vec::new();
        for name in PROTECTED {
            if remove_tree(root, Path::new(name))? {
                touched.push(name.to_string());
            }
        }
        let repo = self.repository();
        for (path, mode, blob) in self.protected_in(id)? {
            let path = PathBuf::from(OsStr::from_bytes(&path));
            crate::workspace::store::checkpoint::write_entry(repo, root, &path, mode, blob)?;
            let shown = path.display().to_string();
            if !touched.iter().any(|t| shown.starts_with(t.as_str())) {
                touched.push(shown);
            }
        }
        Ok(touched)
    }

    /// The protected entries of checkpoint `id`, sorted.
    fn protected_in(&self, id: Oid) -> Result<Vec<Entry>, WorkspaceError> {
        let repo = self.repository();
        let tree = repo
            .find_tree(self.tree_of(id)?)
            .map_err(WorkspaceError::git("reading a checkpoint tree"))?;
        let mut out = Vec::new();
        for name in PROTECTED {
            let Ok(entry) = tree.get_path(Path::new(name)) else {
                continue;
            };
            match entry.kind() {
                Some(ObjectType::Blob) => {
                    out.push((
                        name.as_bytes().to_vec(),
                        entry.filemode() as u32,
                        entry.id(),
                    ));
                }
                Some(ObjectType::Tree) => {
                    let sub = repo
                        .find_tree(entry.id())
                        .map_err(WorkspaceError::git("reading a checkpoint tree"))?;
                    sub.walk(TreeWalkMode::PreOrder, |dir, e| {
                        if e.kind() == Some(ObjectType::Blob) {
                            let mut path = format!("{name}/{dir}").into_bytes();
                            path.extend_from_slice(e.name_bytes());
                            out.push((path, e.filemode() as u32, e.id()));
                        }
                        TreeWalkResult::Ok
                    })
                    .map_err(WorkspaceError::git("reading a checkpoint tree"))?;
                }
                _ => {}
            }
        }
        out.sort();
        Ok(out)
    }
}

/// The protected entries on disk, as a checkpoint would hold them (`None`:
/// past the bounds, or something no checkpoint holds, such as a FIFO).
fn protected_on_disk(root: &WorkspaceRoot) -> Result<Option<Vec<Entry>>, WorkspaceError> {
    let mut out = Vec::new();
    let mut budget = MAX_BYTES;
    let mut stack: Vec<PathBuf> = PROTECTED.iter().map(PathBuf::from).collect();
    while let Some(rel) = stack.pop() {
        let meta = match root.metadata(&rel) {
            Ok(meta) => meta,
            Err(e) if e.is_not_found() => continue,
            Err(e) => return Err(e),
        };
        if out.len() + stack.len() >= MAX_ENTRIES {
            return Ok(None);
        }
        let bytes = rel.as_os_str().as_bytes().to_vec();
        match meta.kind {
            EntryKind::Dir => {
                for entry in root.read_dir(&rel)? {
                    stack.push(rel.join(&entry.name));
                }
            }
            EntryKind::Symlink => {
                let target = root.read_link(&rel)?;
                let blob = Oid::hash_object(ObjectType::Blob, target.as_os_str().as_bytes())
                    .map_err(WorkspaceError::git("hashing a link"))?;
                out.push((bytes, crate::workspace::scan::fingerprint::MODE_LINK, blob));
            }
            EntryKind::File => {
                if meta.len > budget {
                    return Ok(None);
                }
                budget -= meta.len;
                let content = root.read(&rel, meta.len)?;
                let blob = Oid::hash_object(ObjectType::Blob, &content)
                    .map_err(WorkspaceError::git("hashing a file"))?;
                let mode = if meta.permissions & 0o111 != 0 {
                    crate::workspace::scan::fingerprint::MODE_EXEC
                } else {
                    crate::workspace::scan::fingerprint::MODE_FILE
                };
                out.push((bytes, mode, blob));
            }
            EntryKind::Special => return Ok(None),
        }
    }
    out.sort();
    Ok(Some(out))
}

/// Removes `rel` and everything below it through `root`; whether it was there.
fn remove_tree(root: &WorkspaceRoot, rel: &Path) -> Result<bool, WorkspaceError> {
    let meta = match root.metadata(rel) {
        Ok(meta) => meta,
        Err(e) if e.is_not_found() => return Ok(false),
        Err(e) => return Err(e),
    };
    if meta.kind != EntryKind::Dir {
        root.remove_file(rel)?;
        return Ok(true);
    }
    // Depth first, with a bound: a directory the sandbox filled with a
    // million entries is removed all the same, one level at a time.
    let mut dirs = vec![rel.to_path_buf()];
    let mut order = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in root.read_dir(&dir)? {
            let path = dir.join(&entry.name);
            if entry.kind == EntryKind::Dir {
                dirs.push(path);
            } else {
                root.remove_file(&path)?;
            }
        }
        order.push(dir);
    }
    for dir in order.into_iter().rev() {
        root.remove_dir(&dir)?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_paths_and_nothing_else_are_protected() {
        for yes in [
            ".minicoder.json",
            ".minicoder",
            ".minicoder/Dockerfile",
            "./.minicoder/hooks.json",
            ".MiniCoder.JSON",
        ] {
            assert!(is_protected(yes.as_bytes()), "{yes}");
        }
        for no in [
            ".minicoder.json.bak",
            ".minicoderx/Dockerfile",
            "src/.minicoder.json",
            "minicoder.json",
            "",
        ] {
            assert!(!is_protected(no.as_bytes()), "{no}");
        }
    }
}
