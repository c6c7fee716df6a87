//! Reading and writing paths of the source repository, confined to it: a
//! path git refuses, a path through `.git`, and a path whose parent is a
//! symbolic link are refused before anything is read or written. Files are
//! replaced by writing a temporary file in the same directory and renaming
//! it over the old one, so a reader sees the old content or the new.

use std::ffi::OsStr;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::DeliveryError;
use super::image::Image;
use crate::workspace::{quote_path, verify_path};

/// The work tree of the source repository.
#[derive(Debug, Clone)]
pub struct Source {
    root: PathBuf,
}

impl Source {
    pub fn open(root: &Path) -> Result<Self, DeliveryError> {
        let root = root.canonicalize().map_err(|e| DeliveryError::Io {
            what: format!("open the source repository {}", root.display()),
            source: e,
        })?;
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn full(&self, rel: &[u8]) -> PathBuf {
        self.root.join(OsStr::from_bytes(rel))
    }

    /// Refuses what git refuses, and any parent that is a symlink (which
    /// could lead out of the repository) or not a directory.
    pub fn check(&self, rel: &[u8], symlink: bool) -> Result<(), DeliveryError> {
        if !verify_path(rel, symlink) || rel.starts_with(b"/") {
            return Err(DeliveryError::RefusedPath {
                path: quote_path(rel).into_owned(),
                why: "git refuses this path".into(),
            });
        }
        let mut prefix = self.root.clone();
        let parts: Vec<&[u8]> = rel.split(|b| *b == b'/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            prefix.push(OsStr::from_bytes(part));
            match std::fs::symlink_metadata(&prefix) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(DeliveryError::RefusedPath {
                        path: quote_path(rel).into_owned(),
                        why: format!(
                            "its parent {} is a symbolic link, which could lead outside the repository",
                            self.relative(&prefix)
                        ),
                    });
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        Ok(())
    }

    /// What `rel` holds now. A directory, fifo or device there is an error.
    pub fn read(&self, rel: &[u8]) -> Result<Image, DeliveryError> {
        self.check(rel, false)?;
        let path = self.full(rel);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                return Ok(Image::Absent);
            }
            Err(e) => return Err(self.io("inspect", rel, e)),
        };
        let kind = meta.file_type();
        if kind.is_symlink() {
            let target = std::fs::read_link(&path).map_err(|e| self.io("read the link", rel, e))?;
            return Ok(Image::Symlink {
                target: target.as_os_str().as_bytes().to_vec(),
            });
        }
        if kind.is_file() {
            let bytes = std::fs::read(&path).map_err(|e| self.io("read", rel, e))?;
            return Ok(Image::File {
                bytes,
                mode: meta.permissions().mode() & 0o7777,
            });
        }
        Err(DeliveryError::RefusedPath {
            path: quote_path(rel).into_owned(),
            why: if kind.is_dir() {
                "a directory is there".into()
            } else {
                "it is neither a file nor a symbolic link".into()
            },
        })
    }

    /// Makes `rel` hold `image`. Directories it had to create are pushed on
    /// `created` (parents first) so that a rollback can remove them.
    pub fn put(
        &self,
        rel: &[u8],
        image: &Image,
        created: &mut Vec<PathBuf>,
    ) -> Result<(), DeliveryError> {
        self.check(rel, matches!(image, Image::Symlink { .. }))?;
        let path = self.full(rel);
        match image {
            Image::Absent => match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => Err(DeliveryError::RefusedPath {
                    path: quote_path(rel).into_owned(),
                    why: "a directory is there".into(),
                }),
                Ok(_) => std::fs::remove_file(&path).map_err(|e| self.io("delete", rel, e)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(self.io("inspect", rel, e)),
            },
            Image::File { bytes, mode } => {
                let tmp = self.prepare(rel, &path, created)?;
                let written = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&tmp)
                    .and_then(|mut f| {
                        f.write_all(bytes)?;
                        f.set_permissions(std::fs::Permissions::from_mode(*mode))
                    });
                self.install(rel, &tmp, &path, written)
            }
            Image::Symlink { target } => {
                let tmp = self.prepare(rel, &path, created)?;
                let made = std::os::unix::fs::symlink(OsStr::from_bytes(target), &tmp);
                self.install(rel, &tmp, &path, made)
            }
        }
    }

    /// Creates the missing parents of `path`; returns its temporary name.
    fn prepare(
        &self,
        rel: &[u8],
        path: &Path,
        created: &mut Vec<PathBuf>,
    ) -> Result<PathBuf, DeliveryError> {
        let parent = path.parent().unwrap_or(&self.root);
        let mut missing = Vec::new();
        let mut dir = parent;
        while dir != self.root && std::fs::symlink_metadata(dir).is_err() {
            missing.push(dir.to_path_buf());
            dir = dir.parent().unwrap_or(&self.root);
        }
        for dir in missing.into_iter().rev() {
            std::fs::create_dir(&dir).map_err(|e| DeliveryError::Io {
                what: format!("create the directory {}", self.relative(&dir)),
                source: e,
            })?;
            created.push(dir);
        }
        let name = path.file_name().unwrap_or_default().as_bytes();
        let mut tmp_name = b".".to_vec();
        tmp_name.extend_from_slice(&name[..name.len().min(100)]);
        tmp_name
            .extend_from_slice(format!(".minicoder-{}.tmp", crate::ids::random_hex(6)).as_bytes());
        let _ = rel;
        Ok(parent.join(OsStr::from_bytes(&tmp_name)))
    }

    fn install(
        &self,
        rel: &[u8],
        tmp: &Path,
        path: &Path,
        made: std::io::Result<()>,
    ) -> Result<(), DeliveryError> {
        let result = made.and_then(|()| {
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
                return Err(std::io::Error::other("a directory is there"));
            }
            std::fs::rename(tmp, path)
        });
        if let Err(e) = result {
            let _ = std::fs::remove_file(tmp);
            return Err(self.io("write", rel, e));
        }
        Ok(())
    }

    /// Removes the directories that lead to `rel` and are now empty (as git
    /// does after deleting a file).
    pub(crate) fn prune_empty_parents(&self, rel: &[u8]) {
        let mut dir = self.full(rel);
        while dir.pop() && dir != self.root && dir.starts_with(&self.root) {
            if std::fs::remove_dir(&dir).is_err() {
                break;
            }
        }
    }

    /// `path` (inside the root) relative to it, quoted as git quotes paths.
    pub(crate) fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        quote_path(rel.as_os_str().as_bytes()).into_owned()
    }

    fn io(&self, action: &str, rel: &[u8], source: std::io::Error) -> DeliveryError {
        DeliveryError::Io {
            what: format!("{action} {}", quote_path(rel)),
            source,
        }
    }
}
