//! The private copy of a source repository that a run works on.
//!
//! What is copied: the files Git tracks plus the untracked files that are not
//! ignored, as they are in the working tree (not as staged), with their
//! execute bit, and symlinks that stay inside the repository. Left out, and
//! listed by [`PrivateWorkspace::left_out`]: credential files
//! ([`SecretPaths`]) and paths git refuses. Refused, naming the path:
//! symlinks leading outside, submodules and nested repositories, fifos,
//! sockets and devices, and files their owner cannot read (judged on the
//! mode bits, which root would otherwise ignore). The source `.git` is never
//! copied; the copy gets a fresh repository with one baseline commit of
//! everything copied.
//!
//! The source is only read: libgit2 reads its index and computes its status
//! without writing either, and runs no hooks, filters or other programs.
//!
//! Files are copied in fixed-size chunks, and only their data: holes of a
//! sparse file (found with `SEEK_DATA`/`SEEK_HOLE`) stay holes, so a 2 GB
//! sparse file costs neither 2 GB of disk nor of memory. A file over the
//! per-file limit is copied but kept out of the baseline commit (and hidden
//! from `git status` by `.git/info/exclude`), as it is out of every
//! checkpoint: it is never read whole to be hashed.

use std::collections::{BTreeSet, HashSet};
use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use git2::{
    IndexEntry, IndexTime, ObjectType, Oid, Repository, RepositoryOpenFlags, StatusOptions,
};
use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

use super::checkpoint::signature;
use super::pack::{Pack, PackWriter};
use super::secrets::{LeftOut, REASON_CREDENTIAL, REASON_GIT_REFUSES, SecretPaths};
use super::tree::{TreeItem, build_tree};
use super::{WorkspaceError, WorkspaceRoot, verify_path};

const MODE_GITLINK: u32 = 0o160000;

/// A private copy of a source repository, with its baseline commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateWorkspace {
    path: PathBuf,
    baseline: Oid,
    owner: Option<(u32, u32)>,
    left_out: Vec<LeftOut>,
    /// Disk space the copied files take (`st_blocks` × 512), `.git` aside.
    allocated: u64,
    /// Files and symlinks copied.
    files: u64,
    pack: Pack,
}

impl PrivateWorkspace {
    /// Copies `source_repo` into `dest` (which must not exist or be empty)
    /// and commits the copy as the baseline. With `owner_uid_gid` set and
    /// running as root, everything in `dest` (`.git` included) is given to
    /// that uid/gid, e.g. the sandbox user. The default credential paths are
    /// left out.
    pub fn create(
        source_repo: &Path,
        dest: &Path,
        owner_uid_gid: Option<(u32, u32)>,
    ) -> Result<Self, WorkspaceError> {
        Self::create_with(source_repo, dest, owner_uid_gid, &SecretPaths::default())
    }

    /// [`Self::create`], leaving out the credential paths of `secrets`.
    pub fn create_with(
        source_repo: &Path,
        dest: &Path,
        owner_uid_gid: Option<(u32, u32)>,
        secrets: &SecretPaths,
    ) -> Result<Self, WorkspaceError> {
        Self::create_limited(
            source_repo,
            dest,
            owner_uid_gid,
            secrets,
            super::DEFAULT_MAX_FILE_BYTES,
            &mut |_| {},
        )
    }

    /// [`Self::create_with`]; files over `max_file_bytes` are copied but not
    /// committed to the baseline (see the module documentation), and
    /// `progress` hears after each source path.
    pub(crate) fn create_limited(
        source_repo: &Path,
        dest: &Path,
        owner_uid_gid: Option<(u32, u32)>,
        secrets: &SecretPaths,
        max_file_bytes: u64,
        progress: &mut dyn FnMut(CopyProgress),
    ) -> Result<Self, WorkspaceError> {
        let source = open_source(source_repo)?;
        let workdir = workdir_of(&source, source_repo)?;
        let paths = source_paths(&source, secrets)?;
        drop(source);

        prepare_dest(dest)?;
        let copier = Copier::new(&workdir)?;
        let mut copied = Vec::with_capacity(paths.len());
        let mut left_out = Vec::new();
        let mut done = CopyProgress {
            files: 0,
            total: paths.len() as u64,
            bytes: 0,
        };
        let mut allocated = 0u64;
        for rel in &paths {
            done.files += 1;
            if let Some(reason) = left_out_reason(rel, secrets) {
                left_out.push(LeftOut::new(rel, reason));
                progress(done);
                continue;
            }
            let rel = Path::new(OsStr::from_bytes(rel));
            if let Some(file) = copier.copy(rel, dest)? {
                done.bytes += file.size;
                allocated = allocated.saturating_add(file.allocated);
                copied.push(file);
            }
            progress(done);
        }
        let (baseline, pack) = commit_baseline(dest, &copied, max_file_bytes)?;
        let owner = owner_uid_gid.filter(|_| rustix::process::geteuid().is_root());
        if let Some((uid, gid)) = owner {
            chown_tree(dest, uid, gid)?;
        }
        Ok(Self {
            path: dest.to_path_buf(),
            baseline,
            owner,
            left_out,
            allocated,
            files: copied.len() as u64,
            pack,
        })
    }

    /// A workspace made some other way (rebuilt from checkpoints): its
    /// `.git` holds loose objects, so it has no baseline pack to hand on.
    pub(super) fn from_parts(
        path: PathBuf,
        baseline: Oid,
        owner: Option<(u32, u32)>,
        left_out: Vec<LeftOut>,
    ) -> Self {
        Self {
            path,
            baseline,
            owner,
            left_out,
            allocated: 0,
            files: 0,
            pack: Pack {
                pack: PathBuf::new(),
                index: PathBuf::new(),
            },
        }
    }

    /// A workspace taken from a copy prepared ahead (see the prepared
    /// module): its checkpoint store was seeded with the baseline's objects
    /// when the copy was made, so there is no pack to hand on.
    pub(super) fn from_prepared(
        path: PathBuf,
        baseline: Oid,
        owner: Option<(u32, u32)>,
        left_out: Vec<LeftOut>,
        allocated: u64,
        files: u64,
    ) -> Self {
        Self {
            allocated,
            files,
            ..Self::from_parts(path, baseline, owner, left_out)
        }
    }

    /// How many files and symlinks were copied (0 when rebuilt).
    pub(crate) fn copied_files(&self) -> u64 {
        self.files
    }

    /// The pack holding the baseline's files and trees in the workspace's
    /// `.git`: a checkpoint store can take the same objects from it.
    pub(crate) fn baseline_pack(&self) -> &Pack {
        &self.pack
    }

    /// The disk space of the copied files (without the workspace's `.git`):
    /// the source's size, as far as the workspace limits are concerned.
    pub(crate) fn allocated_bytes(&self) -> u64 {
        self.allocated
    }

    /// The source paths not copied, and why, in path order.
    pub fn left_out(&self) -> &[LeftOut] {
        &self.left_out
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id of the baseline commit in the workspace's own `.git`.
    pub fn baseline(&self) -> Oid {
        self.baseline
    }

    /// Confined access to the workspace, creating files as its owner.
    pub fn root(&self) -> Result<WorkspaceRoot, WorkspaceError> {
        Ok(WorkspaceRoot::open(&self.path)?.with_owner(self.owner))
    }
}

/// How far a copy is: `files` of the `total` source paths, `bytes` copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyProgress {
    pub files: u64,
    pub total: u64,
    pub bytes: u64,
}

/// A file copied into the workspace: path, git mode and size (a symlink's
/// target is its content).
#[derive(Debug, Clone)]
pub(super) struct CopiedFile {
    pub(super) path: Vec<u8>,
    pub(super) mode: u32,
    pub(super) size: u64,
    /// Disk space of the copy (`st_blocks` × 512).
    pub(super) allocated: u64,
    pub(super) target: Option<Vec<u8>>,
}

/// The source repository, opened without searching upwards.
pub(super) fn open_source(source_repo: &Path) -> Result<Repository, WorkspaceError> {
    Repository::open_ext(
        source_repo,
        RepositoryOpenFlags::NO_SEARCH,
        &[] as &[&OsStr],
    )
    .map_err(WorkspaceError::git(format!(
        "opening the source repository {}",
        source_repo.display()
    )))
}

/// The working tree of `source` (a bare repository has none).
pub(super) fn workdir_of(
    source: &Repository,
    source_repo: &Path,
) -> Result<PathBuf, WorkspaceError> {
    Ok(source
        .workdir()
        .ok_or_else(|| {
            WorkspaceError::io(source_repo, std::io::Error::other("is a bare repository"))
        })?
        .to_path_buf())
}

/// Why the source path `rel` is not copied, if it is not.
pub(super) fn left_out_reason(rel: &[u8], secrets: &SecretPaths) -> Option<&'static str> {
    if secrets.matches(rel, false) {
        Some(REASON_CREDENTIAL)
    } else if !verify_path(rel, false) {
        Some(REASON_GIT_REFUSES)
    } else {
        None
    }
}

/// Tracked paths (stage 0..3, deduplicated) plus untracked, not ignored ones.
pub(super) fn source_paths(
    repo: &Repository,
    secrets: &SecretPaths,
) -> Result<BTreeSet<Vec<u8>>, WorkspaceError> {
    let index = repo
        .index()
        .map_err(WorkspaceError::git("reading the source index"))?;
    let mut paths = BTreeSet::new();
    for entry in index.iter() {
        if entry.mode == MODE_GITLINK {
            return Err(WorkspaceError::Submodule {
                path: PathBuf::from(OsStr::from_bytes(&entry.path)),
            });
        }
        paths.insert(entry.path);
    }
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .include_unmodified(false)
        .update_index(false);
    let statuses = repo
        .statuses(Some(&mut opts))
        .map_err(WorkspaceError::git("listing untracked files of the source"))?;
    for entry in statuses.iter() {
        if !entry.status().is_wt_new() {
            continue;
        }
        let path = entry.path_bytes();
        // An untracked directory that Git does not enter is a nested repository.
        if let Some(dir) = path.strip_suffix(b"/") {
            return Err(WorkspaceError::Submodule {
                path: PathBuf::from(OsStr::from_bytes(dir)),
            });
        }
        paths.insert(path.to_vec());
    }
    // Git's status does not report fifos, sockets or devices at all: find
    // the ones that are not ignored, to refuse them.
    let workdir = repo.workdir().unwrap_or(Path::new("."));
    find_special_files(repo, workdir, Path::new(""), secrets)?;
    Ok(paths)
}

fn find_special_files(
    repo: &Repository,
    workdir: &Path,
    rel: &Path,
    secrets: &SecretPaths,
) -> Result<(), WorkspaceError> {
    let dir = workdir.join(rel);
    for entry in std::fs::read_dir(&dir).map_err(|e| WorkspaceError::io(&dir, e))? {
        let entry = entry.map_err(|e| WorkspaceError::io(&dir, e))?;
        let ft = entry
            .file_type()
            .map_err(|e| WorkspaceError::io(entry.path(), e))?;
        let path = rel.join(entry.file_name());
        if entry.file_name() == ".git" || ft.is_file() || ft.is_symlink() {
            continue;
        }
        // What is left out is never looked into.
        let bytes = path.as_os_str().as_bytes();
        if left_out_reason(bytes, secrets).is_some() || secrets.matches(bytes, ft.is_dir()) {
            continue;
        }
        let ignored = || {
            repo.is_path_ignored(&path)
                .map_err(WorkspaceError::git("checking .gitignore"))
        };
        if ft.is_dir() {
            if !ignored()? {
                find_special_files(repo, workdir, &path, secrets)?;
            }
        } else if !ignored()? {
            return Err(WorkspaceError::SpecialFile {
                kind: special_kind(&ft),
                path,
            });
        }
    }
    Ok(())
}

fn special_kind(ft: &std::fs::FileType) -> &'static str {
    if ft.is_fifo() {
        "fifo"
    } else if ft.is_socket() {
        "socket"
    } else {
        "device"
    }
}

pub(super) fn prepare_dest(dest: &Path) -> Result<(), WorkspaceError> {
    match std::fs::read_dir(dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(WorkspaceError::DestinationNotEmpty {
                    path: dest.to_path_buf(),
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dest).map_err(|e| WorkspaceError::io(dest, e))?;
        }
        Err(e) => return Err(WorkspaceError::io(dest, e)),
    }
    Ok(())
}

pub(super) struct Copier<'a> {
    workdir: &'a Path,
    dir_fd: OwnedFd,
    checked_dirs: std::cell::RefCell<HashSet<PathBuf>>,
}

impl<'a> Copier<'a> {
    pub(super) fn new(workdir: &'a Path) -> Result<Self, WorkspaceError> {
        let dir_fd = rustix::fs::open(
            workdir,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| WorkspaceError::io(workdir, e))?;
        Ok(Self {
            workdir,
            dir_fd,
            checked_dirs: Default::default(),
        })
    }

    /// Copies one working-tree path; `None` when it is gone or a directory.
    pub(super) fn copy(
        &self,
        rel: &Path,
        dest: &Path,
    ) -> Result<Option<CopiedFile>, WorkspaceError> {
        let src = self.workdir.join(rel);
        if !self.parents_are_dirs(rel)? {
            return Ok(None);
        }
        let meta = match std::fs::symlink_metadata(&src) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(WorkspaceError::io(&src, e)),
        };
        let ft = meta.file_type();
        let to = dest.join(rel);
        let (mode, size, allocated, target) = if ft.is_file() {
            if meta.permissions().mode() & 0o400 == 0 {
                return Err(WorkspaceError::Unreadable {
                    path: rel.to_path_buf(),
                    mode: meta.permissions().mode() & 0o7777,
                });
            }
            let exec = meta.permissions().mode() & 0o111 != 0;
            create_parent(&to)?;
            let perm = if exec { 0o755 } else { 0o644 };
            let (size, allocated) = copy_file(&src, &to, perm)?;
            (
                if exec { 0o100755 } else { 0o100644 },
                size,
                allocated,
                None,
            )
        } else if ft.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| WorkspaceError::io(&src, e))?;
            self.check_link(rel, &target)?;
            create_parent(&to)?;
            std::os::unix::fs::symlink(&target, &to).map_err(|e| WorkspaceError::io(&to, e))?;
            let bytes = target.as_os_str().as_bytes().to_vec();
            (0o120000, bytes.len() as u64, 0, Some(bytes))
        } else if ft.is_dir() {
            if src.join(".git").exists() {
                return Err(WorkspaceError::Submodule {
                    path: rel.to_path_buf(),
                });
            }
            return Ok(None);
        } else {
            return Err(WorkspaceError::SpecialFile {
                path: rel.to_path_buf(),
                kind: special_kind(&ft),
            });
        };
        Ok(Some(CopiedFile {
            path: rel.as_os_str().as_bytes().to_vec(),
            mode,
            size,
            allocated,
            target,
        }))
    }

    /// Whether every ancestor of `rel` is a real directory; an ancestor that
    /// is a symlink is refused (Git never tracks a path beyond one).
    fn parents_are_dirs(&self, rel: &Path) -> Result<bool, WorkspaceError> {
        for dir in rel
            .ancestors()
            .skip(1)
            .filter(|p| !p.as_os_str().is_empty())
        {
            if self.checked_dirs.borrow().contains(dir) {
                break;
            }
            match std::fs::symlink_metadata(self.workdir.join(dir)) {
                Ok(m) if m.file_type().is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(WorkspaceError::BeyondSymlink {
                        path: rel.to_path_buf(),
                    });
                }
                _ => return Ok(false),
            }
            self.checked_dirs.borrow_mut().insert(dir.to_path_buf());
        }
        Ok(true)
    }

    /// Refuses a link whose target leaves the repository, judged both on the
    /// text of the target and by the kernel resolving it beneath the root.
    pub(super) fn check_link(&self, rel: &Path, target: &Path) -> Result<(), WorkspaceError> {
        let outside = || WorkspaceError::OutsideSymlink {
            path: rel.to_path_buf(),
            target: target.to_path_buf(),
        };
        let mut depth = rel.components().count().saturating_sub(1) as i64;
        for c in target.components() {
            match c {
                Component::RootDir | Component::Prefix(_) => return Err(outside()),
                Component::ParentDir => depth -= 1,
                Component::Normal(_) => depth += 1,
                Component::CurDir => {}
            }
            if depth < 0 {
                return Err(outside());
            }
        }
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(
            &self.dir_fd,
            rel,
            OFlags::PATH | OFlags::CLOEXEC,
            Mode::empty(),
            resolve,
        ) {
            Err(Errno::XDEV) => Err(outside()),
            _ => Ok(()),
        }
    }
}

fn create_parent(to: &Path) -> Result<(), WorkspaceError> {
    match to.parent() {
        Some(parent) => std::fs::create_dir_all(parent).map_err(|e| WorkspaceError::io(parent, e)),
        None => Ok(()),
    }
}

/// Copies the regular file `src` to the new file `to` (created with mode
/// `perm`, whatever the umask), data only: holes stay holes. The kernel
/// copies the data (`copy_file_range`) where it can, otherwise it goes
/// through a buffer in chunks. Returns the size copied and the disk space
/// the copy takes.
fn copy_file(src: &Path, to: &Path, perm: u32) -> Result<(u64, u64), WorkspaceError> {
    use std::os::unix::fs::MetadataExt;
    let from = std::fs::File::open(src).map_err(|e| WorkspaceError::io(src, e))?;
    let size = from
        .metadata()
        .map_err(|e| WorkspaceError::io(src, e))?
        .len();
    let out = std::fs::File::create(to).map_err(|e| WorkspaceError::io(to, e))?;
    out.set_permissions(std::fs::Permissions::from_mode(perm))
        .map_err(|e| WorkspaceError::io(to, e))?;
    let mut buf = Vec::new();
    if size <= SMALL_FILE {
        // Too small for a hole to matter: one extent, no seeking.
        copy_range(&from, &out, 0, size, &mut buf).map_err(|e| e.at(src, to))?;
    } else {
        let mut pos = 0u64;
        while pos < size {
            // The next data extent; a filesystem without SEEK_DATA reports
            // the whole file as data.
            let start = match rustix::fs::seek(&from, rustix::fs::SeekFrom::Data(pos)) {
                Ok(start) => start,
                Err(Errno::NXIO) => break, // only a hole is left
                Err(_) => pos,
            };
            let end = rustix::fs::seek(&from, rustix::fs::SeekFrom::Hole(start))
                .unwrap_or(size)
                .min(size);
            copy_range(&from, &out, start, end, &mut buf).map_err(|e| e.at(src, to))?;
            pos = end.max(start + 1);
        }
    }
    out.set_len(size).map_err(|e| WorkspaceError::io(to, e))?;
    let allocated = out
        .metadata()
        .map_err(|e| WorkspaceError::io(to, e))?
        .blocks()
        .saturating_mul(512);
    Ok((size, allocated))
}

/// Files up to this size are copied as one extent, without looking for holes.
const SMALL_FILE: u64 = 64 << 10;

/// Which side of a copy failed.
enum CopyError {
    Read(std::io::Error),
    Write(std::io::Error),
}

impl CopyError {
    fn at(self, src: &Path, to: &Path) -> WorkspaceError {
        match self {
            Self::Read(e) => WorkspaceError::io(src, e),
            Self::Write(e) => WorkspaceError::io(to, e),
        }
    }
}

/// Copies bytes `start..end` of `from` to the same offsets of `out`: by
/// `copy_file_range` while the kernel takes it, the rest through `buf`. A
/// source that ends early ends the copy (the caller sets the length).
fn copy_range(
    from: &std::fs::File,
    out: &std::fs::File,
    start: u64,
    end: u64,
    buf: &mut Vec<u8>,
) -> Result<(), CopyError> {
    use std::os::unix::fs::FileExt;
    let mut at = start;
    while at < end {
        let want = usize::try_from(end - at).unwrap_or(usize::MAX).min(1 << 30);
        let (mut off_in, mut off_out) = (at, at);
        match rustix::fs::copy_file_range(from, Some(&mut off_in), out, Some(&mut off_out), want) {
            Ok(0) => return Ok(()),
            Ok(n) => at += n as u64,
            Err(Errno::INTR) => {}
            // Not between these files (another filesystem, a kernel or
            // filesystem without it): through the buffer.
            Err(_) => break,
        }
    }
    if at < end && buf.is_empty() {
        buf.resize(super::fingerprint::CHUNK, 0);
    }
    while at < end {
        let want = usize::try_from(end - at)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = from
            .read_at(&mut buf[..want], at)
            .map_err(CopyError::Read)?;
        if n == 0 {
            break;
        }
        out.write_all_at(&buf[..n], at).map_err(CopyError::Write)?;
        at += n as u64;
    }
    Ok(())
}

/// A `.gitignore` pattern matching exactly the path `rel`, if it has one.
fn exact_pattern(rel: &[u8]) -> Option<Vec<u8>> {
    if rel.iter().any(|&b| b == b'\n' || b == b'\r') {
        return None;
    }
    let mut out = vec![b'/'];
    for &b in rel {
        if matches!(b, b'*' | b'?' | b'[' | b'\\' | b' ' | b'!' | b'#') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'\n');
    Some(out)
}

/// A fresh repository in `dest` whose index and one commit hold exactly the
/// copied bytes (no filters run), streamed into one pack; files over
/// `max_file_bytes` are left out and listed in `.git/info/exclude`.
pub(super) fn commit_baseline(
    dest: &Path,
    files: &[CopiedFile],
    max_file_bytes: u64,
) -> Result<(Oid, Pack), WorkspaceError> {
    let repo =
        Repository::init(dest).map_err(WorkspaceError::git("creating the workspace repository"))?;
    let mut index = repo
        .index()
        .map_err(WorkspaceError::git("opening the workspace index"))?;
    let odb = repo
        .odb()
        .map_err(WorkspaceError::git("opening the workspace object database"))?;
    let mut pack = PackWriter::new(&repo.path().join("objects"))?;
    let mut excluded = Vec::new();
    let mut entries = Vec::with_capacity(files.len());
    for f in files {
        let id = match &f.target {
            Some(target) => pack.add_blob(&mut target.as_slice(), f.size)?,
            None if f.size > max_file_bytes => {
                if let Some(pattern) = exact_pattern(&f.path) {
                    excluded.extend_from_slice(&pattern);
                }
                continue;
            }
            None => {
                let path = dest.join(OsStr::from_bytes(&f.path));
                let mut file =
                    std::fs::File::open(&path).map_err(|e| WorkspaceError::io(&path, e))?;
                pack.add_blob(&mut file, f.size)
                    .map_err(|e| e.at(path.clone()))?
            }
        };
        entries.push(IndexEntry {
            ctime: IndexTime::new(0, 0),
            mtime: IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: f.mode,
            uid: 0,
            gid: 0,
            file_size: u32::try_from(f.size).unwrap_or(u32::MAX),
            id,
            flags: 0,
            flags_extended: 0,
            path: f.path.clone(),
        });
    }
    // The trees go into the pack too (the paths are in Git's order).
    let items: Vec<TreeItem<'_>> = entries
        .iter()
        .map(|e| TreeItem {
            path: &e.path,
            mode: e.mode,
            id: e.id,
        })
        .collect();
    let tree_id = build_tree(&items, &mut |buf| pack.add_bytes(ObjectType::Tree, buf))?;
    drop(items);
    let pack = pack.finish()?;
    // The index names the objects: they are in place before it is built.
    odb.refresh()
        .map_err(WorkspaceError::git("reading the baseline pack"))?;
    for entry in &entries {
        index.add(entry).map_err(WorkspaceError::git(format!(
            "adding {} to the baseline",
            String::from_utf8_lossy(&entry.path)
        )))?;
    }
    if !excluded.is_empty() {
        let info = repo.path().join("info");
        std::fs::create_dir_all(&info).map_err(|e| WorkspaceError::io(&info, e))?;
        let exclude = info.join("exclude");
        let mut text = std::fs::read(&exclude).unwrap_or_default();
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(b"# over minicoder's per-file limit: not in the baseline\n");
        text.extend_from_slice(&excluded);
        std::fs::write(&exclude, text).map_err(|e| WorkspaceError::io(&exclude, e))?;
    }
    index
        .write()
        .map_err(WorkspaceError::git("writing the workspace index"))?;
    let tree = repo
        .find_tree(tree_id)
        .map_err(WorkspaceError::git("reading the baseline tree"))?;
    let sig = signature()?;
    let commit = repo
        .commit(Some("HEAD"), &sig, &sig, "minicoder baseline", &tree, &[])
        .map_err(WorkspaceError::git("committing the baseline"))?;
    Ok((commit, pack))
}

pub(super) fn chown_tree(path: &Path, uid: u32, gid: u32) -> Result<(), WorkspaceError> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .map_err(|e| WorkspaceError::io(path, e))?;
    if std::fs::symlink_metadata(path)
        .map_err(|e| WorkspaceError::io(path, e))?
        .is_dir()
    {
        for entry in std::fs::read_dir(path).map_err(|e| WorkspaceError::io(path, e))? {
            let entry = entry.map_err(|e| WorkspaceError::io(path, e))?;
            chown_tree(&entry.path(), uid, gid)?;
        }
    }
    Ok(())
}
