//! The workspace on an engine that does not see this machine's files
//! (`files = "remote"`, [`super::engines`]).
//!
//! This machine's private copy stays the truth: the file tools read and
//! edit it, checkpoints and fingerprints are taken of it, the patch is made
//! from it. Each container gets two volumes on its engine, both tmpfs
//! (kernel-side limits, nothing left on the engine's disk):
//!
//! | volume | mounted at | holds | bounded by |
//! |---|---|---|---|
//! | workspace | `/workspace` | the copy the commands see | the workspace's size and entry limits |
//! | sync | `/sync` | what goes over the wire, and the record of the last sync | the same size, once more |
//!
//! Around every command (the agent's, the bootstrap's, each check's):
//! 1. **push** — what changed here since the last sync (an lstat walk of the
//!    copy against the record of the last one) goes as one tar stream to
//!    `/sync`, and `sync.py apply` (run by the supervisor, as the sandbox
//!    user) removes what was removed and extracts the rest. The first push,
//!    when the container starts, is the whole copy;
//! 2. the command runs;
//! 3. **pull** — `sync.py collect` compares `/workspace` with its record and
//!    writes what the command changed as a tar, which comes back as one
//!    download and is extracted here through [`WorkspaceRoot`]: confined to
//!    the workspace by the kernel, links kept as links, no special files,
//!    every size counted against the workspace's limits. Everything from the
//!    engine is hostile input; a command that tampers with `/sync` can only
//!    keep its own changes from coming back, and the verdict and the patch
//!    are made from this side's copy.
//!
//! The tmpfs pages are charged to the memory of the container that writes
//! them, so on the engine a workspace (and the run's dependency volume, a
//! tmpfs too) also fits within the container's memory limit (1 GiB by
//! default).
//!
//! A container that is lost takes its volumes with it; the next one is
//! filled from this side again. The provider key and the source repository
//! never go: only the private copy does.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Seek, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use bollard::Docker;
use bollard::models::VolumeCreateRequest;
use futures_util::StreamExt;

use super::SandboxError;
use crate::workspace::WorkspaceLimits;
use crate::workspace::{EntryKind, WorkspaceRoot};

/// Where the sync volume is mounted.
pub(crate) const SYNC_MOUNT: &str = "/sync";

/// Where the host's CA bundle lands on the engine, for a container with
/// network (a TLS-intercepting proxy then still works). Not a credential.
pub(crate) const SHIPPED_CA_BUNDLE: &str = "/sync/ca-bundle.pem";

/// The largest CA bundle sent.
const MAX_CA_BUNDLE_BYTES: u64 = 16 << 20;

/// The helper the supervisor runs between commands.
pub(crate) const SYNC_SCRIPT: &str = include_str!("../../sandbox/sync.py");

/// Bounds when a container has no workspace limits (a probe).
pub(crate) const UNLIMITED: WorkspaceLimits = WorkspaceLimits {
    max_file_bytes: 1 << 30,
    max_bytes: 8 << 30,
    max_files: 1_000_000,
    min_free_bytes: 0,
    max_checkpoint_bytes: 0,
};

/// Room on the tmpfs for block rounding and the sync's own files.
const SLACK_BYTES: u64 = 64 << 20;

/// The two volumes of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Volumes {
    pub workspace: String,
    pub sync: String,
}

impl Volumes {
    /// The volumes of the container called `container`.
    pub(crate) fn of(container: &str) -> Self {
        Self {
            workspace: format!("{container}-workspace"),
            sync: format!("{container}-sync"),
        }
    }
}

/// The driver options of a tmpfs volume owned by the sandbox user that holds
/// at most `bytes` and `entries`.
pub(crate) fn tmpfs_options(bytes: u64, entries: u64) -> std::collections::HashMap<String, String> {
    std::collections::HashMap::from([
        ("type".to_string(), "tmpfs".to_string()),
        ("device".to_string(), "tmpfs".to_string()),
        (
            "o".to_string(),
            format!(
                "size={bytes},nr_inodes={entries},uid={uid},gid={gid},mode=0755",
                uid = super::SANDBOX_UID,
                gid = super::SANDBOX_GID
            ),
        ),
    ])
}

/// The bytes and entries of a workspace's tmpfs for `limits`. The tmpfs
/// counts whole pages where the limit counts bytes: a page per file more,
/// but never more than the limit again, and room for the sync's files. What
/// comes back is counted against the limits themselves ([`HostSide::unpack`]).
pub(crate) fn tmpfs_size(limits: &WorkspaceLimits) -> (u64, u64) {
    let pages = limits.max_files.saturating_mul(4096).min(limits.max_bytes);
    let bytes = limits
        .max_bytes
        .saturating_add(pages)
        .saturating_add(SLACK_BYTES);
    (bytes, limits.max_files.saturating_add(1024))
}

/// Creates the volumes of a container labelled `labels`, sized by `limits`.
pub(crate) async fn create(
    docker: &Docker,
    volumes: &Volumes,
    labels: &std::collections::HashMap<String, String>,
    limits: Option<&WorkspaceLimits>,
) -> Result<(), SandboxError> {
    let (bytes, entries) = tmpfs_size(limits.unwrap_or(&UNLIMITED));
    for name in [&volumes.workspace, &volumes.sync] {
        docker
            .create_volume(VolumeCreateRequest {
                name: Some(name.clone()),
                driver: Some("local".to_string()),
                driver_opts: Some(tmpfs_options(bytes, entries)),
                labels: Some(labels.clone()),
                ..Default::default()
            })
            .await
            .map_err(|e| SandboxError::docker("create the workspace's volume", e))?;
    }
    Ok(())
}

/// Removes the volumes (their container must be gone).
pub(crate) async fn remove(docker: &Docker, volumes: &Volumes) {
    for name in [&volumes.workspace, &volumes.sync] {
        let options = bollard::query_parameters::RemoveVolumeOptions { force: true };
        if let Err(e) = docker.remove_volume(name, Some(options)).await {
            tracing::warn!("removing volume {name}: {e}");
        }
    }
}

/// What an lstat says of one entry, enough to tell that it changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Facts {
    kind: EntryKind,
    mode: u32,
    len: u64,
    mtime_ns: i128,
    ctime_ns: i128,
    ino: u64,
}

impl Facts {
    fn of(meta: &std::fs::Metadata) -> Self {
        let t = meta.file_type();
        let kind = if t.is_dir() {
            EntryKind::Dir
        } else if t.is_file() {
            EntryKind::File
        } else if t.is_symlink() {
            EntryKind::Symlink
        } else {
            EntryKind::Special
        };
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        if kind == EntryKind::Dir {
            // A directory changes with its entries: only its mode is its own.
            return Self {
                kind,
                mode: meta.mode() & 0o7777,
                len: 0,
                mtime_ns: 0,
                ctime_ns: 0,
                ino: 0,
            };
        }
        Self {
            kind,
            mode: meta.mode() & 0o7777,
            len: meta.len(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
        }
    }
}

/// Every entry under a root, by path relative to it.
type Listing = BTreeMap<PathBuf, Facts>;

/// Lists `root` without following a symlink (this side's copy, which no
/// container writes: only this process's tools and pulls do).
fn list(root: &Path) -> std::io::Result<Listing> {
    let mut found = Listing::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        for entry in std::fs::read_dir(root.join(&rel))? {
            let entry = entry?;
            let path = rel.join(entry.file_name());
            let facts = Facts::of(&entry.metadata()?);
            if facts.kind == EntryKind::Dir {
                stack.push(path.clone());
            }
            found.insert(path, facts);
        }
    }
    Ok(found)
}

/// What differs between two listings: the paths new or changed in `now`
/// (parents before children), and those gone from it (a gone directory
/// named alone).
fn diff(before: &Listing, now: &Listing) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let changed = now
        .iter()
        .filter(|(p, f)| before.get(*p) != Some(*f))
        .map(|(p, _)| p.clone())
        .collect();
    let mut removed: Vec<PathBuf> = Vec::new();
    for path in before.keys().filter(|p| !now.contains_key(*p)) {
        if removed.last().is_some_and(|gone| path.starts_with(gone)) {
            continue;
        }
        removed.push(path.clone());
    }
    (changed, removed)
}

/// Paths over the wire as hex of their bytes: names need not be UTF-8.
fn to_hex(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| hex::encode(p.as_os_str().as_bytes()))
        .collect()
}

/// This side of one container's sync: what it held at the last one.
#[derive(Debug)]
pub(crate) struct HostSide {
    root: PathBuf,
    synced: Listing,
    limits: WorkspaceLimits,
    /// The CA bundle to send with the first push, until it is sent.
    ca_bundle: Option<PathBuf>,
}

/// What a pull brought back.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pulled {
    pub entries: u64,
    pub removed: u64,
    pub bytes: u64,
}

impl HostSide {
    /// Nothing synced yet: the first push is the whole copy at `root`.
    pub(crate) fn new(root: &Path, limits: Option<&WorkspaceLimits>) -> Self {
        Self {
            root: root.to_path_buf(),
            synced: Listing::new(),
            limits: *limits.unwrap_or(&UNLIMITED),
            ca_bundle: None,
        }
    }

    /// Sends `bundle` (a regular file of at most 16 MiB) with the first
    /// push, to [`SHIPPED_CA_BUNDLE`].
    pub(crate) fn with_ca_bundle(mut self, bundle: Option<&Path>) -> Self {
        self.ca_bundle = bundle.map(Path::to_path_buf);
        self
    }

    /// What changed here since the last sync, as the tar to upload to
    /// [`SYNC_MOUNT`] (`in/files.tar`, `in/removed.json`), with the listing
    /// it brings the other side to; `None` when nothing changed.
    pub(crate) fn pack(&self) -> std::io::Result<Option<(std::fs::File, PendingListing)>> {
        let now = list(&self.root)?;
        let (changed, removed) = diff(&self.synced, &now);
        if changed.is_empty() && removed.is_empty() && self.ca_bundle.is_none() {
            return Ok(None);
        }
        let mut files = tempfile::tempfile()?;
        {
            let mut tar = tar::Builder::new(&mut files);
            tar.follow_symlinks(false);
            for rel in &changed {
                let facts = &now[rel];
                // A file past the limit for one file is never read here (as
                // anywhere else): it does not go.
                if facts.kind == EntryKind::File && facts.len > self.limits.max_file_bytes {
                    continue;
                }
                append(&mut tar, &self.root, rel, facts)?;
            }
            tar.finish()?;
        }
        let files_len = files.stream_position()?;
        files.rewind()?;
        let removed = serde_json::to_vec(&to_hex(&removed))?;
        let mut outer = tempfile::tempfile()?;
        {
            let mut tar = tar::Builder::new(&mut outer);
            tar.append_data(
                &mut header(removed.len() as u64),
                "in/removed.json",
                &*removed,
            )?;
            tar.append_data(&mut header(files_len), "in/files.tar", files)?;
            if let Some(bundle) = &self.ca_bundle {
                let meta = std::fs::metadata(bundle)?;
                if meta.is_file() && meta.len() <= MAX_CA_BUNDLE_BYTES {
                    let bytes = std::fs::read(bundle)?;
                    tar.append_data(&mut header(bytes.len() as u64), "ca-bundle.pem", &*bytes)?;
                }
            }
            tar.finish()?;
        }
        outer.rewind()?;
        Ok(Some((outer, PendingListing(now))))
    }

    /// Counts what comes back against `limits` from now on.
    pub(crate) fn set_limits(&mut self, limits: &WorkspaceLimits) {
        self.limits = *limits;
    }

    /// The other side now holds `pending`.
    pub(crate) fn pushed(&mut self, pending: PendingListing) {
        self.synced = pending.0;
        self.ca_bundle = None;
    }

    /// Extracts what a pull downloaded (the tar of [`SYNC_MOUNT`]`/out`,
    /// hostile) into this side's copy, then records it as synced: what was
    /// removed first (a changed path may take a removed one's place), then
    /// what changed, whatever order the engine sent them in.
    pub(crate) fn unpack(&mut self, mut download: impl Read + Seek) -> Result<Pulled, String> {
        let owner = owner_of(&self.root);
        let root = WorkspaceRoot::open(&self.root)
            .map_err(|e| e.to_string())?
            .with_owner(owner);
        let mut pulled = Pulled::default();
        let removed = member(&mut download, b"out/removed.json", |entry| {
            let mut text = Vec::new();
            entry
                .take(64 << 20)
                .read_to_end(&mut text)
                .map_err(|e| format!("reading the removed paths: {e}"))?;
            from_hex(&text, self.limits.max_files)
        })?
        .ok_or("the pull held no record of removed paths")?;
        for rel in &removed {
            remove_tree(&root, rel)?;
        }
        pulled.removed = removed.len() as u64;
        download
            .rewind()
            .map_err(|e| format!("reading the pull: {e}"))?;
        member(&mut download, b"out/changes.tar", scan_headers)?
            .ok_or("the pull held no changes")?;
        download
            .rewind()
            .map_err(|e| format!("reading the pull: {e}"))?;
        member(&mut download, b"out/changes.tar", |entry| {
            extract(&root, entry, &self.limits, &mut pulled)
        })?
        .ok_or("the pull held no changes")?;
        self.synced = list(&self.root).map_err(|e| format!("listing the workspace: {e}"))?;
        Ok(pulled)
    }
}

/// Hands the member `name` of the tar `from` to `take`; `None` when there
/// is no such member.
fn member<T>(
    from: impl Read,
    name: &[u8],
    take: impl FnOnce(&mut dyn Read) -> Result<T, String>,
) -> Result<Option<T>, String> {
    let mut archive = tar::Archive::new(from);
    for entry in archive
        .entries()
        .map_err(|e| format!("reading the pull: {e}"))?
    {
        let mut entry = entry.map_err(|e| format!("reading the pull: {e}"))?;
        if entry.path_bytes().as_ref() == name {
            return take(&mut entry).map(Some);
        }
    }
    Ok(None)
}

/// A listing waiting for its push to land.
#[derive(Debug)]
pub(crate) struct PendingListing(Listing);

/// The uid and gid files created here get: the workspace's own, when this
/// process may give them.
fn owner_of(root: &Path) -> Option<(u32, u32)> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    std::fs::metadata(root).ok().map(|m| (m.uid(), m.gid()))
}

fn header(len: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_size(len);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    h
}

/// Adds one entry of this side's copy (never following a link; a file read
/// as it is now, at most as long as its listing said plus what the limit
/// allows).
fn append(
    tar: &mut tar::Builder<&mut std::fs::File>,
    root: &Path,
    rel: &Path,
    facts: &Facts,
) -> std::io::Result<()> {
    let full = root.join(rel);
    let mut h = tar::Header::new_gnu();
    h.set_mode(facts.mode & 0o777);
    // The file's own time, to the nanosecond (a build tool there judges an
    // output by it against its sources, often within the same second).
    let secs = facts.mtime_ns.div_euclid(1_000_000_000);
    h.set_mtime(u64::try_from(secs).unwrap_or(0));
    if matches!(facts.kind, EntryKind::File | EntryKind::Symlink) {
        let nanos = facts.mtime_ns.rem_euclid(1_000_000_000);
        let mut x = tar::Header::new_ustar();
        x.set_entry_type(tar::EntryType::XHeader);
        x.set_mode(0o644);
        let record = pax_record("mtime", &format!("{secs}.{nanos:09}"));
        x.set_size(record.len() as u64);
        tar.append_data(&mut x, "PaxHeaders/mtime", record.as_bytes())?;
    }
    match facts.kind {
        EntryKind::Dir => {
            h.set_entry_type(tar::EntryType::Directory);
            h.set_size(0);
            tar.append_data(&mut h, rel, std::io::empty())
        }
        EntryKind::Symlink => {
            let target = std::fs::read_link(&full)?;
            h.set_entry_type(tar::EntryType::Symlink);
            h.set_size(0);
            tar.append_link(&mut h, rel, target)
        }
        EntryKind::File => {
            use std::os::unix::fs::OpenOptionsExt;
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&full)?;
            // Streamed, exactly as long as listed (a file that shrank since
            // is padded: the header's size is the one written).
            h.set_entry_type(tar::EntryType::Regular);
            h.set_size(facts.len);
            let data = (&mut file)
                .take(facts.len)
                .chain(std::io::repeat(0))
                .take(facts.len);
            tar.append_data(&mut h, rel, data)
        }
        // A fifo, socket or device has no place on the other side.
        EntryKind::Special => Ok(()),
    }
}

/// One PAX record: `LEN KEY=VALUE\n`, its length counting its own digits.
fn pax_record(key: &str, value: &str) -> String {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while len.to_string().len() + body.len() != len {
        len = len.to_string().len() + body.len();
    }
    format!("{len}{body}")
}

/// The modification time an entry carries: its PAX `mtime` (to the
/// nanosecond) where it has one, else its header's seconds.
fn mtime_of<R: Read>(entry: &mut tar::Entry<'_, R>) -> Option<(i64, u32)> {
    if let Ok(Some(pax)) = entry.pax_extensions() {
        for ext in pax.flatten() {
            if ext.key_bytes() == b"mtime"
                && let Some(t) = std::str::from_utf8(ext.value_bytes())
                    .ok()
                    .and_then(parse_time)
            {
                return Some(t);
            }
        }
    }
    let secs = entry.header().mtime().ok()?;
    Some((i64::try_from(secs).ok()?, 0))
}

/// `SECS[.FRACTION]` as seconds and nanoseconds.
fn parse_time(text: &str) -> Option<(i64, u32)> {
    let (secs, fraction) = text.split_once('.').unwrap_or((text, ""));
    let secs: i64 = secs.parse().ok()?;
    let digits: String = fraction.chars().take(9).collect();
    if !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let nanos = format!("{digits:0<9}").parse().ok()?;
    Some((secs, nanos))
}

fn from_hex(text: &[u8], max: u64) -> Result<Vec<PathBuf>, String> {
    let list: Vec<String> =
        serde_json::from_slice(text).map_err(|e| format!("the removed paths: {e}"))?;
    if list.len() as u64 > max {
        return Err(format!(
            "the engine named {} removed paths, more than the workspace's {max} entries",
            list.len()
        ));
    }
    list.iter()
        .map(|h| {
            hex::decode(h)
                .map(|b| PathBuf::from(OsString::from_vec(b)))
                .map_err(|e| format!("a removed path: {e}"))
        })
        .collect()
}

/// The longest path taken from the other side: this side's copy lives
/// deeper than `/workspace`, and a path it cannot name would fail every
/// later push.
const MAX_PATH_BYTES: usize = 2048;

/// A path of the other side, checked: relative, no `..`, nothing empty,
/// not too long to name here.
fn checked(raw: &[u8]) -> Result<PathBuf, String> {
    let path = PathBuf::from(OsString::from_vec(raw.to_vec()));
    if raw.len() > MAX_PATH_BYTES {
        return Err(format!(
            "the engine sent a path of {} bytes, longer than the {MAX_PATH_BYTES} taken",
            raw.len()
        ));
    }
    let plain = !raw.is_empty()
        && path
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !plain {
        return Err(format!(
            "the engine sent a path outside the workspace: {}",
            crate::terminal_text::clean_line(&String::from_utf8_lossy(raw), 200)
        ));
    }
    Ok(path)
}

/// Removes `rel` whatever it is (a directory with all under it), confined.
fn remove_tree(root: &WorkspaceRoot, rel: &Path) -> Result<(), String> {
    let rel = checked(rel.as_os_str().as_bytes())?;
    let meta = match root.metadata(&rel) {
        Ok(m) => m,
        Err(_) => return Ok(()),
    };
    if meta.kind == EntryKind::Dir {
        for entry in root.read_dir(&rel).map_err(|e| e.to_string())? {
            remove_tree(root, &rel.join(entry.name))?;
        }
        root.remove_dir(&rel).map_err(|e| e.to_string())
    } else {
        root.remove_file(&rel).map_err(|e| e.to_string())
    }
}

/// Makes room at `rel` for an entry of `kind`: whatever else is there goes.
fn clear_for(root: &WorkspaceRoot, rel: &Path, kind: EntryKind) -> Result<(), String> {
    match root.metadata(rel) {
        Ok(m) if m.kind == EntryKind::Dir && kind == EntryKind::Dir => Ok(()),
        Ok(m) if m.kind == EntryKind::Dir => remove_tree(root, rel),
        Ok(_) if kind == EntryKind::Dir => root.remove_file(rel).map_err(|e| e.to_string()),
        _ => Ok(()),
    }
}

/// The largest header of names or extensions taken (the tar reader holds
/// one whole while it reads the entry it describes).
const MAX_EXTENSION_BYTES: u64 = 64 << 10;

/// Refuses a changes tar with a long-name or extension header larger than
/// [`MAX_EXTENSION_BYTES`], before any of it is read whole.
fn scan_headers(tar: &mut dyn Read) -> Result<(), String> {
    let mut archive = tar::Archive::new(tar);
    let entries = archive
        .entries()
        .map_err(|e| format!("reading the changes: {e}"))?
        .raw(true);
    for entry in entries {
        let entry = entry.map_err(|e| format!("reading the changes: {e}"))?;
        let kind = entry.header().entry_type();
        let extension = kind.is_pax_local_extensions()
            || kind.is_pax_global_extensions()
            || kind.is_gnu_longname()
            || kind.is_gnu_longlink();
        let size = entry.header().entry_size().unwrap_or(u64::MAX);
        if extension && size > MAX_EXTENSION_BYTES {
            return Err(format!(
                "the engine sent a tar header of {size} bytes, more than the {MAX_EXTENSION_BYTES} taken"
            ));
        }
    }
    Ok(())
}

/// Extracts the changes tar, bounded by `limits`.
fn extract(
    root: &WorkspaceRoot,
    tar: &mut dyn Read,
    limits: &WorkspaceLimits,
    pulled: &mut Pulled,
) -> Result<(), String> {
    let mut archive = tar::Archive::new(tar);
    // Folders made by this pull: each is made once, not once per entry in it.
    let mut made = std::collections::HashSet::new();
    for entry in archive
        .entries()
        .map_err(|e| format!("reading the changes: {e}"))?
    {
        let mut entry = entry.map_err(|e| format!("reading the changes: {e}"))?;
        let rel = checked(&entry.path_bytes())?;
        made.remove(&rel);
        pulled.entries += 1;
        if pulled.entries > limits.max_files {
            return Err(format!(
                "the command's changes pass the workspace's limit of {} entries",
                limits.max_files
            ));
        }
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty())
            && !made.contains(parent)
        {
            clear_for(root, parent, EntryKind::Dir)?;
            root.create_dir_all(parent).map_err(|e| e.to_string())?;
            made.insert(parent.to_path_buf());
        }
        let kind = entry.header().entry_type();
        let mode = entry.header().mode().unwrap_or(0o644) & 0o777;
        if kind.is_dir() {
            clear_for(root, &rel, EntryKind::Dir)?;
            root.create_dir_all(&rel).map_err(|e| e.to_string())?;
        } else if kind.is_symlink() {
            let target = entry
                .link_name_bytes()
                .ok_or_else(|| "a link without a target".to_string())?
                .into_owned();
            clear_for(root, &rel, EntryKind::Symlink)?;
            let target = PathBuf::from(OsString::from_vec(target));
            root.symlink(&rel, &target).map_err(|e| e.to_string())?;
        } else if kind.is_file() {
            let size = entry.header().size().map_err(|e| e.to_string())?;
            if size > limits.max_file_bytes {
                return Err(format!(
                    "{} is {size} bytes, past the limit of {} for one file",
                    rel.display(),
                    limits.max_file_bytes
                ));
            }
            pulled.bytes = pulled.bytes.saturating_add(size);
            if pulled.bytes > limits.max_bytes {
                return Err(format!(
                    "the command's changes pass the workspace's limit of {} bytes",
                    limits.max_bytes
                ));
            }
            let mut bytes = Vec::new();
            (&mut entry)
                .take(size)
                .read_to_end(&mut bytes)
                .map_err(|e| format!("reading {}: {e}", rel.display()))?;
            let mtime = mtime_of(&mut entry);
            clear_for(root, &rel, EntryKind::File)?;
            root.write_with_mode(&rel, &bytes, mode)
                .map_err(|e| e.to_string())?;
            // The engine's time: a build output there stays as new as it was
            // against the sources it was made from.
            if let Some((secs, nanos)) = mtime {
                root.set_mtime(&rel, secs, nanos)
                    .map_err(|e| e.to_string())?;
            }
        }
        // Anything else (a hard link, a device) is not taken.
    }
    Ok(())
}

/// Uploads `tar` into the sync volume of container `id`.
pub(crate) async fn upload(
    docker: &Docker,
    id: &str,
    tar: std::fs::File,
) -> Result<(), SandboxError> {
    let file = tokio::fs::File::from_std(tar);
    let stream = tokio_util::io::ReaderStream::new(file);
    let options = bollard::query_parameters::UploadToContainerOptionsBuilder::default()
        .path(SYNC_MOUNT)
        .build();
    docker
        .upload_to_container(id, Some(options), bollard::body_try_stream(stream))
        .await
        .map_err(|e| SandboxError::docker("send the workspace's changes to the engine", e))
}

/// Downloads `/sync/out` of container `id` into a file, of at most `max`
/// bytes.
pub(crate) async fn download(
    docker: &Docker,
    id: &str,
    max: u64,
) -> Result<std::fs::File, SandboxError> {
    let options = bollard::query_parameters::DownloadFromContainerOptionsBuilder::default()
        .path(&format!("{SYNC_MOUNT}/out"))
        .build();
    let mut stream = docker.download_from_container(id, Some(options));
    let mut file = tempfile::tempfile()
        .map_err(|e| SandboxError::Protocol(format!("a file for the pull: {e}")))?;
    let mut got = 0u64;
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| SandboxError::docker("bring the command's changes back", e))?;
        got += chunk.len() as u64;
        if got > max {
            return Err(SandboxError::Protocol(format!(
                "the command's changes from the engine pass {max} bytes"
            )));
        }
        file.write_all(&chunk)
            .map_err(|e| SandboxError::Protocol(format!("keeping the pull: {e}")))?;
    }
    file.rewind()
        .map_err(|e| SandboxError::Protocol(format!("reading the pull: {e}")))?;
    Ok(file)
}

/// The largest download a pull may be for `limits`.
pub(crate) fn download_cap(limits: Option<&WorkspaceLimits>) -> u64 {
    let l = limits.unwrap_or(&UNLIMITED);
    l.max_bytes
        .saturating_add(l.max_files.saturating_mul(3 * 512))
        .saturating_add(SLACK_BYTES)
}

#[cfg(test)]
#[path = "remote_files_tests.rs"]
mod tests;
