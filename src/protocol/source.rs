//! The repository a run started from, as the run found it.

use serde::{Deserialize, Serialize};

/// The source repository's HEAD and whether its working tree differed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceState {
    /// The commit HEAD named; `None` for a repository without commits (or a
    /// report written before this was recorded).
    #[serde(default)]
    pub head: Option<String>,
    /// Whether the working tree differed from HEAD.
    #[serde(default)]
    pub dirty: bool,
    /// Tracked files changed, added to the index, deleted or renamed.
    #[serde(default)]
    pub modified: u32,
    /// Untracked files that are not ignored.
    #[serde(default)]
    pub untracked: u32,
}

impl SourceState {
    /// `baseline includes 1 modified and 1 untracked file not in HEAD`, or
    /// `None` for a clean working tree.
    pub(crate) fn dirty_notice(&self) -> Option<String> {
        if !self.dirty {
            return None;
        }
        let mut parts = Vec::new();
        if self.modified > 0 {
            parts.push(format!("{} modified", self.modified));
        }
        if self.untracked > 0 {
            parts.push(format!("{} untracked", self.untracked));
        }
        // "1 modified and 1 untracked file", "2 untracked files".
        let last = if self.untracked > 0 {
            self.untracked
        } else {
            self.modified
        };
        let noun = if last == 1 { "file" } else { "files" };
        let base = if self.head.is_some() {
            "not in HEAD"
        } else {
            "in a repository without commits"
        };
        Some(format!(
            "baseline includes {} {noun} {base}",
            parts.join(" and ")
        ))
    }
}
