//! The copy prepared for a repository's next run (see
//! `workspace::prepared`): which runs leave one, the detached process that
//! makes it, and the settings both sides agree on.

use std::path::Path;

use crate::state::StateDir;
use crate::workspace::prepared::{self, PrepareSettings};
use crate::workspace::recycle::{self, HandOff};
use crate::workspace::{LimitOverrides, SecretPaths, WorkspaceLimits};

/// `MINICODER_PREPARED_COPY`: `never` (or `0`), `always` (or `1`), else by size.
const ENV: &str = "MINICODER_PREPARED_COPY";
/// A repository this small copies in well under a second: not worth the disk.
const MIN_FILES: u64 = 1_000;
const MIN_BYTES: u64 = 64 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Never,
    Always,
    BySize,
}

fn policy() -> Policy {
    match std::env::var(ENV).ok().as_deref().map(str::trim) {
        Some("never" | "0" | "off") => Policy::Never,
        Some("always" | "1" | "on") => Policy::Always,
        _ => Policy::BySize,
    }
}

/// Whether a copy of this size earns a prepared copy for the next run.
pub(crate) fn worth_it(files: u64, bytes: u64) -> bool {
    match policy() {
        Policy::Never => false,
        Policy::Always => true,
        Policy::BySize => files >= MIN_FILES || bytes >= MIN_BYTES,
    }
}

/// Whether runs may take prepared copies at all.
pub(crate) fn enabled() -> bool {
    policy() != Policy::Never
}

pub(crate) fn settings(
    secrets: &SecretPaths,
    overrides: &LimitOverrides,
    owner: Option<(u32, u32)>,
) -> PrepareSettings {
    PrepareSettings {
        secrets: secrets.clone(),
        max_file_bytes: WorkspaceLimits::new(0, overrides).max_file_bytes,
        owner,
    }
}

/// What an ended run hands on for its workspace to become the next
/// prepared copy (see `workspace::recycle`); `None` for a workspace that
/// was rebuilt from checkpoints.
pub(crate) fn hand_off(ws: &super::parts::RunWorkspace) -> Option<HandOff> {
    let as_of = ws.workspace.as_of_ns()?;
    // The commit's first line names its tree.
    let raw = std::str::from_utf8(&ws.baseline_raw).ok()?;
    let tree = git2::Oid::from_str(raw.strip_prefix("tree ")?.get(..40)?).ok()?;
    let settings = PrepareSettings {
        secrets: ws.checkpoints.secret_paths().clone(),
        max_file_bytes: ws.checkpoints.max_file_bytes(),
        owner: super::workspace_owner(),
    };
    Some(HandOff::new(ws.checkpoints.dir(), tree, as_of, &settings))
}

/// Has the ended run's workspace `ws_dir` become `repo`'s next prepared
/// copy, recycled from it when `hand_off` allows (else copied afresh), or
/// removed when no copy is worth preparing or there is no room; either way
/// `ws_dir` is gone from where it was at once, and this process does not
/// wait for the rest.
pub(crate) fn hand_on(
    state: &StateDir,
    repo: &Path,
    ws_dir: &Path,
    hand_off: Option<HandOff>,
    files: u64,
    bytes: u64,
) {
    let root = state.prepared_dir();
    let wanted = files > 0 && worth_it(files, bytes) && !prepared::is_preparing(&root, repo);
    let recycled = hand_off.filter(|_| wanted).and_then(|h| {
        let dir = prepared::prepared_dir(&root, repo);
        let into = dir.join(format!("recycle-{}", crate::ids::random_hex(4)));
        crate::state::private_dir(&into).ok()?;
        let json = serde_json::to_vec(&h).ok()?;
        let moved = crate::state::write_private_file(&into.join(recycle::HAND_OFF), &json).is_ok()
            && std::fs::rename(ws_dir, into.join("ws")).is_ok();
        if !moved {
            let _ = std::fs::remove_dir_all(&into);
            return None;
        }
        Some(into)
    });
    if recycled.is_none() {
        crate::sandbox::gc::remove_detached(&[ws_dir]);
    }
    if wanted {
        spawn(state, repo, bytes, recycled.as_deref());
    }
}

/// Starts the detached process that prepares `repo`'s next copy (from the
/// ended run's workspace in `recycled`, when given), when there is room
/// for it (twice the copy's size free, and 1 GB to spare).
fn spawn(state: &StateDir, repo: &Path, bytes: u64, recycled: Option<&Path>) {
    let free = rustix::fs::statvfs(state.root())
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
        .unwrap_or(0);
    let forget = || {
        if let Some(r) = recycled {
            crate::sandbox::gc::remove_detached(&[r]);
        }
    };
    if free < bytes.saturating_mul(2).saturating_add(1 << 30) {
        tracing::info!("no copy prepared for the next run: too little free disk");
        return forget();
    }
    let Ok(exe) = std::env::current_exe() else {
        return forget();
    };
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new(exe);
    command.arg("prepare-copy").arg(repo);
    if let Some(r) = recycled {
        command.arg("--recycle").arg(r);
    }
    let spawned = command
        .env("MINICODER_STATE_DIR", state.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // Not in the terminal's process group: an interrupt meant for the
        // session does not stop it.
        .process_group(0)
        .spawn();
    match spawned {
        // Reaped if this process lives on (a session); orphaned otherwise.
        Ok(mut child) => drop(std::thread::spawn(move || child.wait())),
        Err(_) => forget(),
    }
}

/// `minicoder prepare-copy REPO [--recycle DIR]` (hidden): what the
/// detached process does.
pub fn prepare_copy(repo: &Path, recycled: Option<&Path>) -> Result<bool, String> {
    let state = StateDir::from_env().map_err(|e| e.to_string())?;
    let repo = repo.canonicalize().map_err(|e| e.to_string())?;
    // As the next run will honour the configuration, unless it is given
    // other trust (its copy is then made afresh).
    let files = crate::verify::load_project(&repo).map_err(|e| e.to_string())?;
    let honoured = files.honour(files.recorded_trust(&state, &repo));
    let config = honoured.config;
    let secrets = crate::verify::secret_paths(&repo, config.as_ref()).map_err(|e| e.to_string())?;
    let overrides = config.as_ref().map(|c| c.limits).unwrap_or_default();
    let settings = settings(&secrets, &overrides, super::workspace_owner());
    let root = state.prepared_dir();
    let dir = prepared::prepared_dir(&root, &repo);
    // Only a directory of this repository's prepared copies is recycled.
    let recycled = recycled.filter(|r| r.parent() == Some(dir.as_path()));
    let make = recycled.map(|r| recycle::maker(&repo, r, &settings));
    let from = recycled.zip(make.as_ref().map(|m| m as prepared::MakeFrom<'_>));
    let made = prepared::prepare_from(&repo, &dir, &settings, from).map_err(|e| e.to_string())?;
    prepared::prune(&root, None);
    Ok(made)
}
