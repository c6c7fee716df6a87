//! Host-side file access confined to the workspace by the kernel.
//!
//! The sandboxed commands own the workspace: they can plant symlinks such as
//! `root -> /` anywhere in it. Every host-side access therefore resolves its
//! path relative to a directory file descriptor with `openat2(2)` and
//! `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`, so the kernel refuses `..`,
//! absolute paths and symlinks that lead outside, whatever races a command
//! runs. Absolute paths and `..` components are also refused up front, only
//! to give a clearer message. Symlinks that stay inside the workspace work.
//!
//! Writes and deletions open the *parent* directory beneath the root and then
//! act on the final component relative to that descriptor without following
//! it, so a symlink planted at the final name cannot redirect them.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;
use rustix::process::{Gid, Uid};

use crate::workspace::WorkspaceError;

const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// What a directory entry is, seen without following symlinks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    /// A fifo, socket or device.
    Special,
}

impl EntryKind {
    pub(crate) fn from_file_type(t: FileType) -> Self {
        match t {
            FileType::RegularFile => Self::File,
            FileType::Directory => Self::Dir,
            FileType::Symlink => Self::Symlink,
            _ => Self::Special,
        }
    }
}

/// `lstat`-like facts about one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryMetadata {
    pub kind: EntryKind,
    /// Permission bits (`st_mode & 0o7777`).
    pub permissions: u32,
    pub len: u64,
}

/// One entry of [`WorkspaceRoot::read_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntryInfo {
    pub name: OsString,
    pub kind: EntryKind,
}

/// An open workspace directory through which all host-side access goes.
#[derive(Debug)]
pub struct WorkspaceRoot {
    dir: OwnedFd,
    path: PathBuf,
    owner: Option<(u32, u32)>,
}

impl WorkspaceRoot {
    /// Opens `path` (`O_PATH | O_DIRECTORY`). Files and directories created
    /// through it keep the process's uid/gid unless [`Self::with_owner`] is set.
    pub fn open(path: &Path) -> Result<Self, WorkspaceError> {
        let dir = rustix::fs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WorkspaceError::io(path, e))?;
        Ok(Self {
            dir,
            path: path.to_path_buf(),
            owner: None,
        })
    }

    /// Makes every file, directory and symlink created through this root
    /// belong to `owner` (uid, gid), e.g. the sandbox user.
    pub(crate) fn with_owner(mut self, owner: Option<(u32, u32)>) -> Self {
        self.owner = owner;
        self
    }

    /// The host path the root was opened from (for messages only: access
    /// never goes through it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The contents of a regular file (symlinks inside are followed), of at
    /// most `max` bytes: a sandboxed command decides how big a workspace
    /// file is, so a larger one (or one that grows past `max` while it is
    /// read) is refused with `ErrorKind::FileTooLarge`, never read whole.
    pub fn read(&self, rel: &Path, max: u64) -> Result<Vec<u8>, WorkspaceError> {
        let (bytes, size) = self.read_prefix(
            rel,
            usize::try_from(max.saturating_add(1)).unwrap_or(usize::MAX),
        )?;
        if size > max || bytes.len() as u64 > max {
            return Err(WorkspaceError::io(
                clean(rel)?,
                std::io::Error::new(
                    std::io::ErrorKind::FileTooLarge,
                    format!(
                        "{} bytes, over the {max} this reads",
                        size.max(bytes.len() as u64)
                    ),
                ),
            ));
        }
        Ok(bytes)
    }

    /// At most `limit` bytes from the start of a regular file (symlinks
    /// inside are followed), and the file's size: the file is never read
    /// whole, and a fifo or device is refused without blocking.
    pub(crate) fn read_prefix(
        &self,
        rel: &Path,
        limit: usize,
    ) -> Result<(Vec<u8>, u64), WorkspaceError> {
        let rel = clean(rel)?;
        let fd = self.open_beneath(&rel, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| self.err(&rel, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(WorkspaceError::io(
                rel,
                std::io::Error::other("not a regular file"),
            ));
        }
        let size = u64::try_from(st.st_size).unwrap_or(0);
        let mut bytes = Vec::with_capacity(limit.min(usize::try_from(size).unwrap_or(limit)));
        std::fs::File::from(fd)
            .take(u64::try_from(limit).unwrap_or(u64::MAX))
            .read_to_end(&mut bytes)
            .map_err(|e| WorkspaceError::io(&rel, e))?;
        Ok((bytes, size))
    }

    /// Atomically replaces (or creates) a regular file, keeping the mode of
    /// the file it replaces (0644 for a new one).
    pub fn write(&self, rel: &Path, bytes: &[u8]) -> Result<(), WorkspaceError> {
        let mode = match self.metadata(rel) {
            Ok(m) if m.kind == EntryKind::File => m.permissions,
            _ => 0o644,
        };
        self.write_with_mode(rel, bytes, mode)
    }

    /// Atomically replaces (or creates) a regular file with the given
    /// permission bits: the bytes go to a new temporary file in the same
    /// directory, which is then renamed over the final name. A symlink at the
    /// final name is replaced, never followed.
    pub(crate) fn write_with_mode(
        &self,
        rel: &Path,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), WorkspaceError> {
        let rel = clean(rel)?;
        let (parent, name) = split(&rel)?;
        let dir = self.open_dir(parent)?;
        let tmp = temp_name();
        let fd = rustix::fs::openat(
            &dir,
            tmp.as_os_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode & 0o7777),
        )
        .map_err(|e| self.err(&rel, e))?;
        let written = (|| -> Result<(), WorkspaceError> {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o7777))
                .map_err(|e| self.err(&rel, e))?;
            if let Some((uid, gid)) = self.owner {
                rustix::fs::fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
                    .map_err(|e| self.err(&rel, e))?;
            }
            std::fs::File::from(fd)
                .write_all(bytes)
                .map_err(|e| WorkspaceError::io(&rel, e))?;
            rustix::fs::renameat(&dir, tmp.as_os_str(), &dir, name).map_err(|e| self.err(&rel, e))
        })();
        if written.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_os_str(), AtFlags::empty());
        }
        written
    }

    /// Atomically creates (or replaces) a symlink `rel -> target`. The target
    /// is stored as given; confined access never follows it outside.
    pub fn symlink(&self, rel: &Path, target: &Path) -> Result<(), WorkspaceError> {
        let rel = clean(rel)?;
        let (parent, name) = split(&rel)?;
        let dir = self.open_dir(parent)?;
        let tmp = temp_name();
        rustix::fs::symlinkat(target, &dir, tmp.as_os_str()).map_err(|e| self.err(&rel, e))?;
        let done = (|| -> Result<(), WorkspaceError> {
            self.chown_at(&dir, &tmp, &rel)?;
            rustix::fs::renameat(&dir, tmp.as_os_str(), &dir, name).map_err(|e| self.err(&rel, e))
        })();
        if done.is_err() {
            let _ = rustix::fs::unlinkat(&dir, tmp.as_os_str(), AtFlags::empty());
        }
        done
    }

    /// Creates `rel` and its missing ancestors (mode 0755).
    pub fn create_dir_all(&self, rel: &Path) -> Result<(), WorkspaceError> {
        let rel = clean(rel)?;
        let mut parent = PathBuf::new();
        for name in rel.iter() {
            let dir = self.open_dir(&parent)?;
            match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                Ok(()) => self.chown_at(&dir, name, &rel)?,
                Err(Errno::EXIST) => {}
                Err(e) => return Err(self.err(&rel, e)),
            }
            parent.push(name);
        }
        // Proves the whole path is a directory beneath the root.
        self.open_dir(&rel).map(drop)
    }

    /// Sets the modification time of `rel` itself (a symlink is never
    /// followed), leaving its access time as it is.
    pub(crate) fn set_mtime(
        &self,
        rel: &Path,
        secs: i64,
        nanos: u32,
    ) -> Result<(), WorkspaceError> {
        let rel = clean(rel)?;
        let (parent, name) = split(&rel)?;
        let dir = self.open_dir(parent)?;
        let times = rustix::fs::Timestamps {
            last_access: rustix::fs::Timespec {
                tv_sec: 0,
                tv_nsec: rustix::fs::UTIME_OMIT,
            },
            last_modification: rustix::fs::Timespec {
                tv_sec: secs,
                tv_nsec: i64::from(nanos.min(999_999_999)),
            },
        };
        rustix::fs::utimensat(&dir, name, &times, AtFlags::SYMLINK_NOFOLLOW)
            .map_err(|e| self.err(&rel, e))
    }

    /// Removes a file or symlink (the link itself, never its target).
    pub fn remove_file(&self, rel: &Path) -> Result<(), WorkspaceError> {
        self.unlink(rel, AtFlags::empty())
    }

    /// Removes an empty directory.
    pub(crate) fn remove_dir(&self, rel: &Path) -> Result<(), WorkspaceError> {
        self.unlink(rel, AtFlags::REMOVEDIR)
    }

    /// Facts about `rel` itself (a symlink is described, not followed).
    pub fn metadata(&self, rel: &Path) -> Result<EntryMetadata, WorkspaceError> {
        let rel = clean(rel)?;
        let st = match split(&rel) {
            Ok((parent, name)) => {
                let dir = self.open_dir(parent)?;
                rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            }
            Err(_) => rustix::fs::fstat(&self.dir),
        }
        .map_err(|e| self.err(&rel, e))?;
        Ok(EntryMetadata {
            kind: EntryKind::from_file_type(FileType::from_raw_mode(st.st_mode)),
            permissions: st.st_mode & 0o7777,
            len: u64::try_from(st.st_size).unwrap_or(0),
        })
    }

    /// The entries of a directory (without `.` and `..`), in no set order.
    pub fn read_dir(&self, rel: &Path) -> Result<Vec<DirEntryInfo>, WorkspaceError> {
        let rel = clean(rel)?;
        let fd = self.open_beneath(&rel, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC)?;
        let mut dir = Dir::new(fd).map_err(|e| self.err(&rel, e))?;
        let mut out = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| self.err(&rel, e))?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            let name = OsStr::from_bytes(name).to_os_string();
            let kind = match entry.file_type() {
                FileType::Unknown => self.metadata(&rel.join(&name))?.kind,
                t => EntryKind::from_file_type(t),
            };
            out.push(DirEntryInfo { name, kind });
        }
        Ok(out)
    }

    /// The target of the symlink `rel`.
    pub fn read_link(&self, rel: &Path) -> Result<PathBuf, WorkspaceError> {
        let rel = clean(rel)?;
        let (parent, name) = split(&rel)?;
        let dir = self.open_dir(parent)?;
        let target =
            rustix::fs::readlinkat(&dir, name, Vec::new()).map_err(|e| self.err(&rel, e))?;
        Ok(PathBuf::from(OsStr::from_bytes(target.as_bytes())))
    }

    fn unlink(&self, rel: &Path, flags: AtFlags) -> Result<(), WorkspaceError> {
        let rel = clean(rel)?;
        let (parent, name) = split(&rel)?;
        let dir = self.open_dir(parent)?;
        rustix::fs::unlinkat(&dir, name, flags).map_err(|e| self.err(&rel, e))
    }

    fn chown_at(&self, dir: &OwnedFd, name: &OsStr, rel: &Path) -> Result<(), WorkspaceError> {
        if let Some((uid, gid)) = self.owner {
            rustix::fs::chownat(
                dir,
                name,
                Some(Uid::from_raw(uid)),
                Some(Gid::from_raw(gid)),
                AtFlags::SYMLINK_NOFOLLOW,
            )
            .map_err(|e| self.err(rel, e))?;
        }
        Ok(())
    }

    /// A directory beneath the root (`O_PATH`), usable as a `*at` base.
    fn open_dir(&self, rel: &Path) -> Result<OwnedFd, WorkspaceError> {
        self.open_beneath(rel, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC)
    }

    fn open_beneath(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, WorkspaceError> {
        let path: &Path = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        let mut attempts = 0;
        loop {
            match rustix::fs::openat2(self.dir.as_fd(), path, flags, Mode::empty(), RESOLVE) {
                // The kernel asks for a retry when a rename raced the lookup.
                Err(Errno::AGAIN) if attempts < 8 => attempts += 1,
                other => return other.map_err(|e| self.err(rel, e)),
            }
        }
    }

    fn err(&self, rel: &Path, e: Errno) -> WorkspaceError {
        if e == Errno::XDEV {
            WorkspaceError::PathEscape {
                path: rel.to_path_buf(),
            }
        } else {
            WorkspaceError::io(rel, e)
        }
    }
}

/// Checks that `rel` is relative and has no `..`; drops `.` components.
pub(crate) fn clean(rel: &Path) -> Result<PathBuf, WorkspaceError> {
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(WorkspaceError::PathEscape {
                    path: rel.to_path_buf(),
                });
            }
        }
    }
    Ok(out)
}

fn split(rel: &Path) -> Result<(&Path, &OsStr), WorkspaceError> {
    match (rel.parent(), rel.file_name()) {
        (Some(parent), Some(name)) => Ok((parent, name)),
        _ => Err(WorkspaceError::io(
            rel,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "names the workspace root itself",
            ),
        )),
    }
}

fn temp_name() -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    OsString::from(format!(".minicoder-tmp-{}-{n}", std::process::id()))
}

#[cfg(test)]
#[path = "confine_tests.rs"]
mod tests;
