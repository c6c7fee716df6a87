//! Symbolic links the patch writes, resolved on the tree as it will be once
//! applied: each link's target is followed component by component, through
//! the links the patch writes and those already in the source, and must
//! never climb above the repository's root. Checking each link on its own is
//! not enough: `x -> .` and `y -> x/..` are each harmless text, and together
//! `y` names the directory above the repository.

use std::collections::{BTreeMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use super::DeliveryError;
use super::image::{GIT_MODE_LINK, Image, Write};
use crate::workspace::quote_path;

/// Links followed while resolving one target, as the kernel allows.
const MAX_HOPS: usize = 40;

/// Refuses the plan when a link it writes resolves outside the repository
/// at `root` (or loops).
pub(crate) fn check(root: &Path, writes: &[Write]) -> Result<(), DeliveryError> {
    let written: BTreeMap<&[u8], &Image> = writes
        .iter()
        .map(|w| (w.path.as_slice(), &w.post))
        .collect();
    let tree = Tree { root, written };
    for w in writes {
        if w.post.git_mode() == Some(GIT_MODE_LINK) {
            let target = w.post.content().unwrap_or_default();
            tree.resolve(&w.path, target)
                .map_err(|why| DeliveryError::RefusedPath {
                    path: quote_path(&w.path).into_owned(),
                    why,
                })?;
        }
    }
    Ok(())
}

/// The repository as it will be: the patch's writes over the source.
struct Tree<'a> {
    root: &'a Path,
    written: BTreeMap<&'a [u8], &'a Image>,
}

impl Tree<'_> {
    /// The link target at `rel` in the tree to be, if `rel` is a link.
    fn link_at(&self, rel: &[u8]) -> Option<Vec<u8>> {
        if let Some(image) = self.written.get(rel) {
            return match image {
                Image::Symlink { target } => Some(target.clone()),
                _ => None,
            };
        }
        let path = self.root.join(OsStr::from_bytes(rel));
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.file_type().is_symlink() {
            return None;
        }
        std::fs::read_link(&path)
            .ok()
            .map(|t| t.as_os_str().as_bytes().to_vec())
    }

    /// Follows the link at `link` (whose text is `target`) to where it
    /// leads; `Err` says why it leaves the repository.
    fn resolve(&self, link: &[u8], target: &[u8]) -> Result<(), String> {
        let outside = |t: &[u8]| {
            format!(
                "it is a symbolic link to {}, which leads outside the repository once the patch is applied",
                quote_path(t)
            )
        };
        let mut at: Vec<OsString> = Path::new(OsStr::from_bytes(link))
            .parent()
            .map(|p| {
                p.components()
                    .map(|c| c.as_os_str().to_os_string())
                    .collect()
            })
            .unwrap_or_default();
        let mut pending: VecDeque<OsString> = VecDeque::new();
        push_front(&mut pending, target).map_err(|()| outside(target))?;
        let mut hops = 0;
        while let Some(part) = pending.pop_front() {
            if part == ".." {
                if at.pop().is_none() {
                    return Err(outside(target));
                }
                continue;
            }
            at.push(part);
            let rel: PathBuf = at.iter().collect();
            if let Some(next) = self.link_at(rel.as_os_str().as_bytes()) {
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(format!(
                        "it is a symbolic link to {} that loops through other links",
                        quote_path(target)
                    ));
                }
                at.pop();
                push_front(&mut pending, &next).map_err(|()| outside(target))?;
            }
        }
        Ok(())
    }
}

/// Puts the components of `target` in front of `pending`; an absolute
/// target is refused (`Err`).
fn push_front(pending: &mut VecDeque<OsString>, target: &[u8]) -> Result<(), ()> {
    let path = Path::new(OsStr::from_bytes(target));
    let mut parts = Vec::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => return Err(()),
            Component::CurDir => {}
            Component::ParentDir => parts.push(OsString::from("..")),
            Component::Normal(name) => parts.push(name.to_os_string()),
        }
    }
    for part in parts.into_iter().rev() {
        pending.push_front(part);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(path: &str, target: &str) -> Write {
        Write {
            path: path.as_bytes().to_vec(),
            pre: Image::Absent,
            post: Image::Symlink {
                target: target.as_bytes().to_vec(),
            },
            merged: false,
        }
    }

    #[test]
    fn a_chain_that_climbs_out_is_refused_though_each_link_looks_harmless() {
        let repo = tempfile::tempdir().expect("tempdir");
        let err = check(repo.path(), &[link("x", "."), link("y", "x/..")]).expect_err("refused");
        assert!(err.to_string().contains("outside the repository"), "{err}");
        assert!(check(repo.path(), &[link("x", "."), link("y", "x/a")]).is_ok());
        assert!(check(repo.path(), &[link("d/l", "../b"), link("b", "d")]).is_ok());
        assert!(check(repo.path(), &[link("l", "/etc/passwd")]).is_err());
        assert!(check(repo.path(), &[link("a/l", "../../b")]).is_err());
        let looped = check(repo.path(), &[link("a", "b"), link("b", "a")]).expect_err("loop");
        assert!(looped.to_string().contains("loops"), "{looped}");
    }

    #[test]
    fn links_already_in_the_source_count_too() {
        let repo = tempfile::tempdir().expect("tempdir");
        std::os::unix::fs::symlink(".", repo.path().join("here")).expect("link");
        assert!(check(repo.path(), &[link("up", "here/..")]).is_err());
        assert!(check(repo.path(), &[link("ok", "here/file")]).is_ok());
    }
}
