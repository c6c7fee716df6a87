//! A workspace rebuilt from a run's checkpoint store, for `resume`: the
//! files of one checkpoint, and a `.git` whose baseline commit is the very
//! commit the run started from (its raw bytes were kept when the workspace
//! was first made, so the id matches the manifest and the receipt).

use std::path::Path;

use git2::{ObjectType, Oid, Repository};

use super::copy::{chown_tree, prepare_dest};
use crate::workspace::{CheckpointStore, LeftOut, PrivateWorkspace, WorkspaceError, WorkspaceRoot};

/// The raw bytes of commit `id` in the workspace repository at `workspace`,
/// read right after the copy made it (before any command ran there).
pub(crate) fn baseline_commit_raw(workspace: &Path, id: Oid) -> Result<Vec<u8>, WorkspaceError> {
    let repo = Repository::open_bare(workspace.join(".git"))
        .map_err(WorkspaceError::git("opening the workspace repository"))?;
    let odb = repo
        .odb()
        .map_err(WorkspaceError::git("opening the workspace object database"))?;
    let object = odb
        .read(id)
        .map_err(WorkspaceError::git("reading the baseline commit"))?;
    Ok(object.data().to_vec())
}

/// Where a rebuilt workspace comes from.
#[derive(Clone, Copy)]
pub(crate) struct RebuildFrom<'a> {
    pub store: &'a CheckpointStore,
    /// The checkpoint whose files the workspace gets.
    pub at: Oid,
    /// The baseline commit's id and raw bytes.
    pub baseline: Oid,
    pub raw_commit: &'a [u8],
    /// The store's baseline tree, committed when the store lacks the
    /// commit's own tree.
    pub fallback_tree: Oid,
}

impl PrivateWorkspace {
    /// Makes `dest` (missing or empty) hold checkpoint `from.at`, with a
    /// `.git` whose HEAD is the baseline commit `from.raw_commit`. Its
    /// tree's objects come from the store; when the store does not hold
    /// that tree, `from.fallback_tree` is committed instead and the
    /// workspace gets a new baseline id.
    pub(crate) fn rebuild(
        dest: &Path,
        owner_uid_gid: Option<(u32, u32)>,
        from: &RebuildFrom<'_>,
        left_out: Vec<LeftOut>,
    ) -> Result<Self, WorkspaceError> {
        let RebuildFrom {
            store,
            at,
            baseline,
            raw_commit,
            fallback_tree,
        } = *from;
        prepare_dest(dest)?;
        store.export(at, &WorkspaceRoot::open(dest)?)?;
        let repo = Repository::init(dest)
            .map_err(WorkspaceError::git("creating the workspace repository"))?;
        let src = store
            .repository()
            .odb()
            .map_err(WorkspaceError::git("opening the checkpoint store"))?;
        let dst = repo
            .odb()
            .map_err(WorkspaceError::git("opening the workspace object database"))?;
        let tree = commit_tree(raw_commit).filter(|t| src.exists(*t));
        let commit = match tree {
            Some(tree) => {
                copy_tree(&src, &dst, tree)?;
                let id = dst
                    .write(ObjectType::Commit, raw_commit)
                    .map_err(WorkspaceError::git("writing the baseline commit"))?;
                if id != baseline {
                    return Err(WorkspaceError::git("rebuilding the workspace")(
                        git2::Error::from_str("the saved baseline commit does not match its id"),
                    ));
                }
                id
            }
            None => {
                copy_tree(&src, &dst, fallback_tree)?;
                let tree = repo
                    .find_tree(fallback_tree)
                    .map_err(WorkspaceError::git("reading the baseline tree"))?;
                let sig = crate::workspace::store::tree::signature()?;
                repo.commit(None, &sig, &sig, "minicoder baseline", &tree, &[])
                    .map_err(WorkspaceError::git("committing the baseline"))?
            }
        };
        let head = repo
            .find_reference("HEAD")
            .ok()
            .and_then(|r| r.symbolic_target().ok().flatten().map(str::to_string))
            .unwrap_or_else(|| "refs/heads/main".to_string());
        repo.reference(&head, commit, true, "baseline")
            .map_err(WorkspaceError::git("setting the baseline"))?;
        let tree = repo
            .find_commit(commit)
            .and_then(|c| c.tree())
            .map_err(WorkspaceError::git("reading the baseline tree"))?;
        let mut index = repo
            .index()
            .map_err(WorkspaceError::git("opening the workspace index"))?;
        index
            .read_tree(&tree)
            .and_then(|()| index.write())
            .map_err(WorkspaceError::git("writing the workspace index"))?;
        drop(tree);
        drop(index);
        drop(dst);
        drop(repo);
        let owner = owner_uid_gid.filter(|_| rustix::process::geteuid().is_root());
        if let Some((uid, gid)) = owner {
            chown_tree(dest, uid, gid)?;
        }
        Ok(PrivateWorkspace::from_parts(
            dest.to_path_buf(),
            commit,
            owner,
            left_out,
        ))
    }
}

/// The tree a raw commit names on its first line.
fn commit_tree(raw: &[u8]) -> Option<Oid> {
    let line = raw.split(|b| *b == b'\n').next()?;
    let hex = std::str::from_utf8(line.strip_prefix(b"tree ")?).ok()?;
    Oid::from_str(hex).ok()
}

/// Copies tree `id` and everything under it from `src` to `dst`, unchanged.
fn copy_tree(src: &git2::Odb<'_>, dst: &git2::Odb<'_>, id: Oid) -> Result<(), WorkspaceError> {
    let mut stack = vec![id];
    while let Some(id) = stack.pop() {
        if dst.exists(id) {
            continue;
        }
        let object = src
            .read(id)
            .map_err(WorkspaceError::git("reading a baseline object"))?;
        if object.kind() == ObjectType::Tree {
            stack.extend(tree_children(object.data()));
        }
        dst.write(object.kind(), object.data())
            .map_err(WorkspaceError::git("writing a baseline object"))?;
    }
    Ok(())
}

/// The ids of a raw tree's blobs and subtrees (`MODE NAME\0ID` entries;
/// gitlinks, which name commits of other repositories, are left out).
fn tree_children(mut raw: &[u8]) -> Vec<Oid> {
    let mut out = Vec::new();
    while let Some(space) = raw.iter().position(|b| *b == b' ') {
        let mode = &raw[..space];
        let Some(nul) = raw[space..].iter().position(|b| *b == 0) else {
            break;
        };
        let start = space + nul + 1;
        let Some(id) = raw.get(start..start + 20) else {
            break;
        };
        if mode != b"160000"
            && let Ok(id) = Oid::from_bytes(id)
        {
            out.push(id);
        }
        raw = &raw[start + 20..];
    }
    out
}
