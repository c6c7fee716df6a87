//! The identity of the process that owns a run's resources.
//!
//! Containers, volumes and workspaces carry the owner's pid *and* its start
//! time, so `gc` can tell a live owner from a dead one even after the pid has
//! been reused by an unrelated process.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessIdentity {
    pub pid: u32,
    /// Start time in clock ticks since boot (field 22 of `/proc/PID/stat`).
    pub start_ticks: u64,
}

impl ProcessIdentity {
    /// The identity of this process.
    pub fn current() -> Self {
        let pid = std::process::id();
        Self {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(0),
        }
    }

    /// Whether the process is still running (and is the same process).
    pub(crate) fn is_alive(&self) -> bool {
        match start_ticks(self.pid) {
            Some(ticks) => self.start_ticks == 0 || ticks == self.start_ticks,
            None => false,
        }
    }

    /// The `pid:start` form used in labels and owner files.
    pub fn to_label(&self) -> String {
        format!("{}:{}", self.pid, self.start_ticks)
    }

    pub(crate) fn from_label(label: &str) -> Option<Self> {
        let (pid, start) = label.split_once(':')?;
        Some(Self {
            pid: pid.parse().ok()?,
            start_ticks: start.parse().ok()?,
        })
    }
}

/// Records `owner` as the owner of a resource in a small JSON file, written
/// atomically (write, then rename).
pub fn write_owner_file(path: &std::path::Path, owner: &ProcessIdentity) -> std::io::Result<()> {
    let tmp = path.with_extension("owner.tmp");
    std::fs::write(
        &tmp,
        serde_json::to_vec(owner).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, path)
}

/// Reads an owner file; `None` if it is missing or unreadable.
pub(crate) fn read_owner_file(path: &std::path::Path) -> Option<ProcessIdentity> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields
    // after it start at the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    // `rest` starts at field 3; field 22 is index 19 there.
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_round_trips() {
        let me = ProcessIdentity::current();
        assert!(me.start_ticks > 0);
        assert!(me.is_alive());
        assert_eq!(ProcessIdentity::from_label(&me.to_label()), Some(me));
    }

    #[test]
    fn owner_files_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("run.owner");
        assert_eq!(read_owner_file(&path), None);
        let me = ProcessIdentity::current();
        write_owner_file(&path, &me).expect("write");
        assert_eq!(read_owner_file(&path), Some(me));
    }

    #[test]
    fn a_reused_pid_is_not_the_owner() {
        let mut me = ProcessIdentity::current();
        me.start_ticks += 1;
        assert!(!me.is_alive());
    }

    #[test]
    fn a_finished_process_is_dead() {
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let pid = child.id();
        let id = ProcessIdentity {
            pid,
            start_ticks: start_ticks(pid).unwrap_or(1),
        };
        child.wait().expect("wait");
        assert!(!id.is_alive());
    }
}
