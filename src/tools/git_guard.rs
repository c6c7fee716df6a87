//! Opening the workspace repository safely. Sandboxed commands can write to
//! the workspace `.git`, so before libgit2 touches it: `.git` must be a real
//! directory with no symlinks inside, with no `alternates` or `commondir`
//! (which would lead libgit2 to object stores outside), and with no config
//! that makes libgit2 read files outside (`include`, `excludesFile`,
//! `attributesFile`). The work dir is forced to the workspace whatever
//! `core.worktree` says, and host git configuration never applies.
//! libgit2 runs no hooks, filters or diff drivers.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use git2::{ConfigLevel, Repository};

use super::ToolError;
use crate::workspace::{EntryKind, WorkspaceError, WorkspaceRoot};

/// The most `.git` entries inspected for symlinks.
const MAX_GIT_ENTRIES: usize = 200_000;

/// Config keys that make libgit2 read files named by the config.
const REFUSED_CONFIG: [&str; 4] = ["[include", "excludesfile", "attributesfile", "[includeif"];

/// Opens the workspace's repository with the checks above.
pub(crate) fn open_workspace_repo(root: &WorkspaceRoot) -> Result<Repository, ToolError> {
    // Set once in `main` before anything runs; this only makes sure of it
    // for embedders that did not.
    isolate_libgit2().map_err(ToolError::refused)?;
    let git = Path::new(".git");
    match root.metadata(git) {
        Ok(meta) if meta.kind == EntryKind::Dir => {}
        Ok(meta) => {
            return Err(unsafe_repo(format!(
                ".git is a {} instead of a directory",
                kind_name(meta.kind)
            )));
        }
        Err(_) => {
            return Err(ToolError::refused(
                "the workspace has no .git directory, so git cannot run; use list_tree and read_file instead",
            ));
        }
    }
    for planted in [
        ".git/objects/info/alternates",
        ".git/objects/info/http-alternates",
        ".git/commondir",
        ".git/gitdir",
    ] {
        if root.metadata(Path::new(planted)).is_ok() {
            return Err(unsafe_repo(format!("`{planted}` exists")));
        }
    }
    if let Some(symlink) = find_symlink(root, git)? {
        return Err(unsafe_repo(format!(
            "`{}` inside .git is a symlink",
            symlink.display()
        )));
    }
    let config = match root.read(Path::new(".git/config"), MAX_CONFIG_BYTES) {
        Ok(config) => Some(config),
        Err(WorkspaceError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::FileTooLarge =>
        {
            return Err(unsafe_repo(format!(
                ".git/config is larger than {MAX_CONFIG_BYTES} bytes, which no real config is"
            )));
        }
        Err(_) => None,
    };
    if let Some(config) = config {
        let text = String::from_utf8_lossy(&config).to_ascii_lowercase();
        if let Some(key) = REFUSED_CONFIG.iter().find(|k| text.contains(*k)) {
            return Err(unsafe_repo(format!(
                ".git/config sets `{}`, which would make git read files outside the workspace",
                key.trim_start_matches('[')
            )));
        }
    }
    let repo = Repository::open_bare(root.path().join(git)).map_err(|e| {
        ToolError::refused(format!(
            "the workspace repository cannot be opened: {}",
            e.message()
        ))
    })?;
    repo.set_workdir(root.path(), false).map_err(|e| {
        ToolError::refused(format!(
            "the workspace repository cannot be used: {}",
            e.message()
        ))
    })?;
    Ok(repo)
}

/// The largest `.git/config` the guard reads to look for refused keys.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

fn unsafe_repo(reason: String) -> ToolError {
    ToolError::refused(format!(
        "git refused: {reason}. A command has tampered with the workspace repository; the git tool does not read it in this state. Use read_file and the run's checkpoints instead, or remove what was planted with run_shell"
    ))
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Dir => "directory",
        EntryKind::Symlink => "symlink",
        EntryKind::Special => "special file",
    }
}

/// The first symlink (or special file) under `dir`, walked through the root.
fn find_symlink(root: &WorkspaceRoot, dir: &Path) -> Result<Option<PathBuf>, ToolError> {
    let mut stack = vec![dir.to_path_buf()];
    let mut seen = 0usize;
    while let Some(current) = stack.pop() {
        let entries = root
            .read_dir(&current)
            .map_err(|e| unsafe_repo(format!("`{}` cannot be listed ({e})", current.display())))?;
        for entry in entries {
            seen += 1;
            if seen > MAX_GIT_ENTRIES {
                return Err(unsafe_repo(format!(
                    ".git holds more than {MAX_GIT_ENTRIES} entries"
                )));
            }
            let path = current.join(&entry.name);
            match entry.kind {
                EntryKind::Dir => stack.push(path),
                EntryKind::File => {}
                EntryKind::Symlink | EntryKind::Special => return Ok(Some(path)),
            }
        }
    }
    Ok(None)
}

/// `<state>/git-config-empty`: a directory of this user's only (0700, not
/// a link), empty, shared by every process instead of one temporary
/// directory each. `None` when it cannot be had so.
fn empty_state_dir() -> Option<std::path::PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    let root = crate::state::StateDir::from_env()
        .ok()?
        .root()
        .to_path_buf();
    let dir = root.join("git-config-empty");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .ok()?;
    let meta = std::fs::symlink_metadata(&dir).ok()?;
    let ours = meta.uid() == rustix::process::geteuid().as_raw();
    let private = meta.permissions().mode() & 0o077 == 0;
    let empty = std::fs::read_dir(&dir).ok()?.next().is_none();
    (meta.is_dir() && ours && private && empty).then_some(dir)
}

/// Points libgit2's system, global, XDG and program-data config search at
/// an empty private directory, once per process, and turns off its
/// ownership check (the workspace belongs to the sandbox user, not to us;
/// we open it by explicit path and run nothing from it). The options are
/// process-global: `main` sets them before the async runtime starts, so no
/// thread ever sees them change.
pub fn isolate_libgit2() -> Result<(), String> {
    static ISOLATED: OnceLock<Result<(), String>> = OnceLock::new();
    ISOLATED
        .get_or_init(|| {
            let empty = match empty_state_dir() {
                Some(dir) => dir,
                // No state directory to hold it: a private temporary one,
                // kept for the life of the process.
                None => tempfile::Builder::new()
                    .prefix("minicoder-no-git-config-")
                    .tempdir()
                    .map_err(|e| format!("cannot create an empty config directory: {e}"))?
                    .keep(),
            };
            for level in [
                ConfigLevel::System,
                ConfigLevel::Global,
                ConfigLevel::XDG,
                ConfigLevel::ProgramData,
            ] {
                // SAFETY: libgit2 options are process-global; this runs once,
                // and only replaces search paths with an empty directory.
                unsafe { git2::opts::set_search_path(level, empty.as_os_str()) }
                    .map_err(|e| format!("cannot isolate git from host config: {e}"))?;
            }
            // SAFETY: as above; a process-global flag set once.
            unsafe { git2::opts::set_verify_owner_validation(false) }
                .map_err(|e| format!("cannot configure libgit2: {e}"))?;
            Ok(())
        })
        .clone()
}
