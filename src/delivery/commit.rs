//! `--commit`: a commit in the source made with libgit2, so no hook or
//! other program of the repository runs. Its tree is `HEAD`'s with the
//! touched paths set to what apply wrote (the user's other staged or
//! unstaged changes stay out of it); the index entries of those paths are
//! updated to match.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use git2::build::TreeUpdateBuilder;
use git2::{FileMode, Repository, RepositoryOpenFlags};

use super::DeliveryError;
use super::image::{GIT_MODE_EXEC, GIT_MODE_LINK, Image};

fn git(what: &'static str) -> impl Fn(git2::Error) -> DeliveryError {
    move |e| DeliveryError::Git {
        what: what.to_string(),
        message: e.message().to_string(),
    }
}

/// Commits `paths` (each with the image now in the work tree) on `HEAD`.
pub fn commit(
    repo_dir: &Path,
    paths: &[(&[u8], &Image)],
    message: &str,
) -> Result<String, DeliveryError> {
    let repo = Repository::open_ext(repo_dir, RepositoryOpenFlags::NO_SEARCH, &[] as &[&OsStr])
        .map_err(git("open the source repository"))?;
    let parent = match repo.head() {
        Ok(head) => Some(head.peel_to_commit().map_err(git("read HEAD"))?),
        Err(e) if e.code() == git2::ErrorCode::UnbornBranch => None,
        Err(e) => return Err(git("read HEAD")(e)),
    };
    let base = match &parent {
        Some(c) => c.tree().map_err(git("read HEAD's tree"))?,
        None => {
            let id = repo
                .treebuilder(None)
                .and_then(|b| b.write())
                .map_err(git("write an empty tree"))?;
            repo.find_tree(id).map_err(git("read a tree"))?
        }
    };
    let mut update = TreeUpdateBuilder::new();
    for (path, image) in paths {
        let name = String::from_utf8_lossy(path).into_owned();
        match (image.content(), image.git_mode()) {
            (Some(content), Some(mode)) => {
                let id = repo.blob(content).map_err(git("store a blob"))?;
                let mode = match mode {
                    GIT_MODE_LINK => FileMode::Link,
                    GIT_MODE_EXEC => FileMode::BlobExecutable,
                    _ => FileMode::Blob,
                };
                update.upsert(name.as_str(), id, mode);
            }
            _ => {
                update.remove(name.as_str());
            }
        }
    }
    let tree_id = update
        .create_updated(&repo, &base)
        .map_err(git("write the tree"))?;
    let tree = repo.find_tree(tree_id).map_err(git("read the tree"))?;
    let sig = repo
        .signature()
        .or_else(|_| git2::Signature::now("minicoder", "minicoder@localhost"))
        .map_err(git("make a signature"))?;
    let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
    let id = repo
        .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
        .map_err(git("commit"))?;
    let mut index = repo.index().map_err(git("read the index"))?;
    for (path, image) in paths {
        let rel = Path::new(OsStr::from_bytes(path));
        if **image == Image::Absent {
            let _ = index.remove_path(rel);
        } else {
            index.add_path(rel).map_err(git("update the index"))?;
        }
    }
    index.write().map_err(git("write the index"))?;
    Ok(id.to_string())
}

/// A commit message: the subject (first line of `title`, bounded), a body,
/// and trailers; control characters are dropped.
pub fn message(title: &str, body: &str, trailers: &[(&str, &str)]) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| !c.is_control() || *c == '\n')
            .collect()
    };
    let subject: String = clean(title.lines().next().unwrap_or(""))
        .chars()
        .take(72)
        .collect();
    let subject = if subject.trim().is_empty() {
        "minicoder run".to_string()
    } else {
        subject.trim().to_string()
    };
    let mut out = format!("{subject}\n\n");
    let body = clean(body);
    if !body.trim().is_empty() {
        out.push_str(body.trim());
        out.push_str("\n\n");
    }
    for (key, value) in trailers {
        out.push_str(&format!("{key}: {}\n", clean(value).replace('\n', " ")));
    }
    out
}
