//! The copy prepared for a repository's next run (see
//! `workspace::prepared`): which runs leave one, the detached process that
//! makes it, and the settings both sides agree on.

use std::path::Path;

use crate::state::StateDir;
use crate::workspace::prepared::{self, PrepareSettings};
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

/// Starts the detached process that prepares `repo`'s next copy, when there
/// is room for it (twice the copy's size free, and 1 GB to spare).
pub(crate) fn spawn(state: &StateDir, repo: &Path, bytes: u64) {
    let root = state.prepared_dir();
    if prepared::is_preparing(&root, repo) {
        return;
    }
    let free = rustix::fs::statvfs(state.root())
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize))
        .unwrap_or(0);
    if free < bytes.saturating_mul(2).saturating_add(1 << 30) {
        tracing::info!("no copy prepared for the next run: too little free disk");
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    use std::os::unix::process::CommandExt;
    let spawned = std::process::Command::new(exe)
        .arg("prepare-copy")
        .arg(repo)
        .env("MINICODER_STATE_DIR", state.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        // Not in the terminal's process group: an interrupt meant for the
        // session does not stop it.
        .process_group(0)
        .spawn();
    if let Ok(mut child) = spawned {
        // Reaped if this process lives on (a session); orphaned otherwise.
        std::thread::spawn(move || child.wait());
    }
}

/// `minicoder prepare-copy REPO` (hidden): what the detached process does.
pub fn prepare_copy(repo: &Path) -> Result<bool, String> {
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
    let made = prepared::prepare(&repo, &dir, &settings).map_err(|e| e.to_string())?;
    prepared::prune(&root, None);
    Ok(made)
}
