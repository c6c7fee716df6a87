//! Every write or none. Deletions go first (a file may give way to a
//! directory of the same name), then each file is written to a temporary
//! name in its directory and renamed into place. When a step fails
//! (permission denied, disk full, a file where a directory must be), every
//! step done is undone from the pre-images held in memory, the directories
//! made are removed, and the source is left as it was.

use std::path::PathBuf;

use super::DeliveryError;
use super::image::{Image, Write};
use super::source::Source;

/// One path to set: from `pre` (what is there now) to `post`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step<'a> {
    pub path: &'a [u8],
    pub pre: &'a Image,
    pub post: &'a Image,
}

/// The steps that make the source hold what `writes` say.
pub(crate) fn steps_of(writes: &[Write]) -> Vec<Step<'_>> {
    writes
        .iter()
        .map(|w| Step {
            path: &w.path,
            pre: &w.pre,
            post: &w.post,
        })
        .collect()
}

/// Performs `steps` on `source`, all or none.
pub fn run(source: &Source, steps: &[Step<'_>]) -> Result<(), DeliveryError> {
    let mut order: Vec<&Step<'_>> = steps.iter().filter(|s| s.post == &Image::Absent).collect();
    order.extend(steps.iter().filter(|s| s.post != &Image::Absent));
    let mut created: Vec<PathBuf> = Vec::new();
    let mut done: Vec<&Step<'_>> = Vec::new();
    for step in order {
        if let Err(e) = source.put(step.path, step.post, &mut created) {
            let left = roll_back(source, &done, &mut created);
            return Err(if left.is_empty() {
                DeliveryError::RolledBack(Box::new(e))
            } else {
                DeliveryError::RollbackFailed {
                    cause: Box::new(e),
                    left,
                }
            });
        }
        done.push(step);
    }
    for step in steps.iter().filter(|s| s.post == &Image::Absent) {
        source.prune_empty_parents(step.path);
    }
    Ok(())
}

/// Puts back the pre-image of every step done; returns the paths that
/// could not be restored (with why).
fn roll_back(source: &Source, done: &[&Step<'_>], created: &mut Vec<PathBuf>) -> Vec<String> {
    let mut left = Vec::new();
    for step in done.iter().rev() {
        let mut more = Vec::new();
        if let Err(e) = source.put(step.path, step.pre, &mut more) {
            left.push(e.to_string());
        }
        created.extend(more);
    }
    for dir in created.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
    left
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

    #[test]
    fn a_failing_step_undoes_the_steps_before_it() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a.txt"), b"old").unwrap();
        std::fs::write(tmp.path().join("gone.txt"), b"bye").unwrap();
        // A file where the last step needs a directory.
        std::fs::write(tmp.path().join("zz"), b"in the way").unwrap();
        let source = Source::open(tmp.path()).unwrap();
        let (old, new, bye) = (file(b"old"), file(b"new"), file(b"bye"));
        let steps = [
            Step {
                path: b"a.txt",
                pre: &old,
                post: &new,
            },
            Step {
                path: b"gone.txt",
                pre: &bye,
                post: &Image::Absent,
            },
            Step {
                path: b"new/dir/b.txt",
                pre: &Image::Absent,
                post: &new,
            },
            Step {
                path: b"zz/c.txt",
                pre: &Image::Absent,
                post: &new,
            },
        ];
        let err = run(&source, &steps).unwrap_err();
        assert!(matches!(err, DeliveryError::RolledBack(_)), "{err}");
        assert!(err.to_string().contains("zz/c.txt"), "{err}");
        assert_eq!(std::fs::read(tmp.path().join("a.txt")).unwrap(), b"old");
        assert_eq!(std::fs::read(tmp.path().join("gone.txt")).unwrap(), b"bye");
        assert!(!tmp.path().join("new").exists());
        let mut names: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["a.txt", "gone.txt", "zz"]);
    }

    #[test]
    fn every_step_is_done_when_none_fails() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::write(tmp.path().join("d/x"), b"x").unwrap();
        let source = Source::open(tmp.path()).unwrap();
        let (x, link) = (
            file(b"x"),
            Image::Symlink {
                target: b"d2/y".to_vec(),
            },
        );
        let y = Image::File {
            bytes: b"y".to_vec(),
            mode: 0o755,
        };
        run(
            &source,
            &[
                Step {
                    path: b"d/x",
                    pre: &x,
                    post: &Image::Absent,
                },
                Step {
                    path: b"d2/y",
                    pre: &Image::Absent,
                    post: &y,
                },
                Step {
                    path: b"l",
                    pre: &Image::Absent,
                    post: &link,
                },
            ],
        )
        .unwrap();
        assert!(!tmp.path().join("d").exists(), "emptied directories go");
        assert_eq!(source.read(b"d2/y").unwrap(), y);
        assert_eq!(source.read(b"l").unwrap(), link);
    }
}
