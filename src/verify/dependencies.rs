//! What a bootstrap installs into ignored folders (`node_modules`, `.venv`)
//! stays out of checkpoints, patches and fingerprints, so a copy of
//! the baseline checkpoint lacks it. [`share`] gives such a copy the
//! workspace's installed dependencies, as hard links (copies where a link is
//! refused), so the baseline verification runs with the same dependencies as
//! the agent's workspace. Build output (`target`) is not shared: it is
//! rebuilt from the cache, and a build writes its files in place.

use std::io;
use std::path::Path;

/// The folders shared: installed dependencies, not build output or caches.
pub(crate) const SHARED_DIRS: [&str; 2] = ["node_modules", ".venv"];
/// How deep the workspace is searched for them (monorepos nest them).
const SEARCH_DEPTH: usize = 4;
/// At most this many entries are shared in all.
const MAX_ENTRIES: usize = 500_000;

/// Shares every [`SHARED_DIRS`] folder of `from` (searched [`SEARCH_DEPTH`]
/// deep, `.git` skipped) into the same place under `to`; new directories and
/// copies are given to `owner` when set. Returns how many entries were
/// shared. Stops quietly at [`MAX_ENTRIES`].
pub(crate) fn share(from: &Path, to: &Path, owner: Option<(u32, u32)>) -> io::Result<usize> {
    let mut count = 0;
    search(from, to, 0, owner, &mut count)?;
    Ok(count)
}

fn search(
    from: &Path,
    to: &Path,
    depth: usize,
    owner: Option<(u32, u32)>,
    count: &mut usize,
) -> io::Result<()> {
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        let name = entry.file_name();
        if name == ".git" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if SHARED_DIRS.iter().any(|d| name == *d) {
            if !dst.exists() {
                replicate(&src, &dst, owner, count)?;
            }
        } else if depth + 1 < SEARCH_DEPTH && dst.is_dir() {
            search(&src, &dst, depth + 1, owner, count)?;
        }
    }
    Ok(())
}

fn replicate(
    src: &Path,
    dst: &Path,
    owner: Option<(u32, u32)>,
    count: &mut usize,
) -> io::Result<()> {
    std::fs::create_dir(dst)?;
    give(dst, owner)?;
    for entry in std::fs::read_dir(src)? {
        if *count >= MAX_ENTRIES {
            return Ok(());
        }
        *count += 1;
        let entry = entry?;
        let kind = entry.file_type()?;
        let (s, d) = (entry.path(), dst.join(entry.file_name()));
        if kind.is_dir() {
            replicate(&s, &d, owner, count)?;
        } else if kind.is_symlink() {
            // Recreated as it is: inside the container it resolves as in the
            // workspace, and the host never follows it.
            std::os::unix::fs::symlink(std::fs::read_link(&s)?, &d)?;
        } else if kind.is_file() && std::fs::hard_link(&s, &d).is_err() {
            std::fs::copy(&s, &d)?;
            give(&d, owner)?;
        }
    }
    Ok(())
}

fn give(path: &Path, owner: Option<(u32, u32)>) -> io::Result<()> {
    match owner {
        Some((uid, gid)) => std::os::unix::fs::chown(path, Some(uid), Some(gid)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn installed_dependencies_are_linked_and_build_output_is_not() {
        let from = tempfile::tempdir().expect("tempdir");
        let to = tempfile::tempdir().expect("tempdir");
        let w = |p: &str, text: &str| {
            let path = from.path().join(p);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        w("node_modules/jest/index.js", "x");
        w("packages/web/node_modules/left-pad/index.js", "y");
        w(".venv/lib/site.py", "z");
        w("target/debug/app", "bin");
        w("src/main.js", "code");
        std::os::unix::fs::symlink("../jest/index.js", from.path().join("node_modules/.bin"))
            .expect("symlink");
        std::fs::create_dir_all(to.path().join("packages/web")).expect("mkdir");
        std::fs::create_dir_all(to.path().join("src")).expect("mkdir");
        let shared = share(from.path(), to.path(), None).expect("share");
        assert!(shared >= 5, "{shared}");
        let a = from.path().join("node_modules/jest/index.js");
        let b = to.path().join("node_modules/jest/index.js");
        assert_eq!(
            std::fs::metadata(&a).expect("a").ino(),
            std::fs::metadata(&b).expect("b").ino(),
            "a hard link, not a copy"
        );
        assert!(
            to.path()
                .join("packages/web/node_modules/left-pad/index.js")
                .exists()
        );
        assert!(to.path().join(".venv/lib/site.py").exists());
        assert_eq!(
            std::fs::read_link(to.path().join("node_modules/.bin")).expect("link"),
            Path::new("../jest/index.js")
        );
        assert!(!to.path().join("target").exists());
        assert!(
            !to.path().join("src/main.js").exists(),
            "code comes from the checkpoint"
        );
    }
}
