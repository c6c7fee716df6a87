//! A directory walker confined to the workspace: it lists directories only
//! through [`WorkspaceRoot`], never follows symlinks, skips generated
//! folders, and honours `.gitignore` files (read through the root too, with
//! the `ignore` crate's matcher), so no file outside the workspace is ever
//! opened, whatever a command planted.

use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::ToolError;
use super::paths::{SKIPPED_DIRS, display};
use crate::workspace::{EntryKind, WorkspaceRoot};

/// The most entries one walk looks at, to bound the time of a call.
const MAX_VISITED: usize = 200_000;
/// The largest ignore file read; a larger one is not taken into account.
const MAX_RULES_BYTES: u64 = 1 << 20;

/// One entry met by the walk.
#[derive(Debug, Clone)]
pub(crate) struct WalkEntry {
    pub rel: PathBuf,
    pub name: String,
    pub kind: EntryKind,
    /// 1 for the children of the start directory.
    pub depth: usize,
}

/// What the visitor wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Visit {
    Continue,
    Stop,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct WalkStats {
    /// Directories that could not be listed.
    pub unreadable: usize,
    /// The walk stopped at [`MAX_VISITED`] entries.
    pub exhausted: bool,
}

pub(crate) struct ConfinedWalk<'a> {
    root: &'a WorkspaceRoot,
    max_depth: usize,
    visited: usize,
    stats: WalkStats,
}

impl<'a> ConfinedWalk<'a> {
    pub fn new(root: &'a WorkspaceRoot, max_depth: usize) -> Self {
        Self {
            root,
            max_depth,
            visited: 0,
            stats: WalkStats::default(),
        }
    }

    /// Walks the directory `start` depth-first in name order, calling
    /// `visit` for every entry not ignored.
    pub fn run(
        mut self,
        start: &Path,
        visit: &mut dyn FnMut(&WalkEntry) -> Visit,
    ) -> Result<WalkStats, ToolError> {
        self.root
            .read_dir(start)
            .map_err(|e| ToolError::from_workspace(&display(start), e))?;
        let mut ignores = self.ancestor_ignores(start);
        self.walk_dir(start, 1, &mut ignores, visit);
        Ok(self.stats)
    }

    /// The ignore rules of `.git/info/exclude` and of every directory from
    /// the root down to `start` (inclusive), outermost first.
    fn ancestor_ignores(&self, start: &Path) -> Vec<Gitignore> {
        let mut ignores = Vec::new();
        if let Some(exclude) = self.load_rules(Path::new(""), Path::new(".git/info/exclude")) {
            ignores.push(exclude);
        }
        let mut dirs = vec![PathBuf::new()];
        let mut dir = PathBuf::new();
        for component in start.components() {
            dir.push(component);
            dirs.push(dir.clone());
        }
        for dir in dirs {
            if let Some(rules) = self.load_rules(&dir, &dir.join(".gitignore")) {
                ignores.push(rules);
            }
        }
        ignores
    }

    /// Loads a gitignore-format file through the root, if it is a regular
    /// file (a symlinked `.gitignore` is not read).
    fn load_rules(&self, dir: &Path, file: &Path) -> Option<Gitignore> {
        let meta = self.root.metadata(file).ok()?;
        if meta.kind != EntryKind::File || meta.len > MAX_RULES_BYTES {
            return None;
        }
        let bytes = self.root.read(file, MAX_RULES_BYTES).ok()?;
        let text = String::from_utf8_lossy(&bytes);
        let mut builder = GitignoreBuilder::new(self.root.path().join(dir));
        for line in text.lines() {
            let _ = builder.add_line(None, line);
        }
        builder.build().ok().filter(|g| !g.is_empty())
    }

    fn is_ignored(&self, ignores: &[Gitignore], rel: &Path, is_dir: bool) -> bool {
        let host = self.root.path().join(rel);
        for rules in ignores.iter().rev() {
            let matched = rules.matched(&host, is_dir);
            if matched.is_ignore() {
                return true;
            }
            if matched.is_whitelist() {
                return false;
            }
        }
        false
    }

    fn walk_dir(
        &mut self,
        dir: &Path,
        depth: usize,
        ignores: &mut Vec<Gitignore>,
        visit: &mut dyn FnMut(&WalkEntry) -> Visit,
    ) -> bool {
        let pushed = match self.load_rules(dir, &dir.join(".gitignore")) {
            Some(rules) if depth > 1 => {
                ignores.push(rules);
                true
            }
            _ => false,
        };
        let keep_going = self.walk_children(dir, depth, ignores, visit);
        if pushed {
            ignores.pop();
        }
        keep_going
    }

    fn walk_children(
        &mut self,
        dir: &Path,
        depth: usize,
        ignores: &mut Vec<Gitignore>,
        visit: &mut dyn FnMut(&WalkEntry) -> Visit,
    ) -> bool {
        let mut entries = match self.root.read_dir(dir) {
            Ok(entries) => entries,
            Err(_) => {
                self.stats.unreadable += 1;
                return true;
            }
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            self.visited += 1;
            if self.visited > MAX_VISITED {
                self.stats.exhausted = true;
                return false;
            }
            let name = entry.name.to_string_lossy().into_owned();
            let rel = dir.join(&entry.name);
            let is_dir = entry.kind == EntryKind::Dir;
            if is_dir && SKIPPED_DIRS.contains(&name.as_str()) {
                continue;
            }
            if self.is_ignored(ignores, &rel, is_dir) {
                continue;
            }
            let item = WalkEntry {
                rel,
                name,
                kind: entry.kind,
                depth,
            };
            match visit(&item) {
                Visit::Stop => return false,
                Visit::Continue => {}
            }
            if is_dir
                && depth < self.max_depth
                && !self.walk_dir(&item.rel, depth + 1, ignores, visit)
            {
                return false;
            }
        }
        true
    }
}
