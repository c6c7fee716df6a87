//! The repository's ignore rules, as they were at the baseline: what a
//! command creates that `.gitignore`, `.git/info/exclude` or the person's
//! core excludes match (`*.o`, `build/`, a test binary) is not the agent's
//! change. Such a path is left out of fingerprints, checkpoints and so the
//! patch and `changed_files`, as the tool caches of [`crate::workspace::ExcludeSet`]
//! are; a check that writes only such paths has not changed the workspace.
//!
//! The rules are fixed when the run starts — the `.gitignore` files of the
//! baseline commit, read from its blobs, plus the source's `info/exclude`
//! and the core excludes file — so a run cannot hide a file from its own
//! patch by editing a `.gitignore`. A path of the baseline is never
//! ignored, whatever the rules say (Git tracks a tracked file whatever its
//! ignore rules say), and neither is a directory holding one.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use git2::{ObjectType, Oid, Repository, TreeWalkMode, TreeWalkResult};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use sha2::{Digest, Sha256};

use crate::workspace::WorkspaceError;

/// The tool caches left out by default, matched by directory name at any depth.
pub const DEFAULT_EXCLUDES: [&str; 5] = [
    "__pycache__",
    ".pytest_cache",
    "target",
    "node_modules",
    ".venv",
];

/// Directory names left out of fingerprints and checkpoints. `.git` is always
/// left out and cannot be included. With the repository's ignore rules
/// ([`ExcludeSet::with_ignore_rules`]), what they ignore is left out too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExcludeSet {
    names: BTreeSet<OsString>,
    rules: Option<Arc<IgnoreRules>>,
}

impl Default for ExcludeSet {
    fn default() -> Self {
        Self::new(DEFAULT_EXCLUDES)
    }
}

impl ExcludeSet {
    pub fn new<I, S>(names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self {
            names: names.into_iter().map(Into::into).collect(),
            rules: None,
        }
    }

    /// The same, also leaving out what `rules` ignore.
    pub fn with_ignore_rules(mut self, rules: Arc<IgnoreRules>) -> Self {
        self.rules = Some(rules);
        self
    }

    /// The repository's ignore rules, if they are honoured.
    pub fn ignore_rules(&self) -> Option<&Arc<IgnoreRules>> {
        self.rules.as_ref()
    }

    /// Whether the entry `rel` (relative, `/`-separated), its directories
    /// above not left out, is left out by the ignore rules.
    pub(crate) fn ignores(&self, rel: &[u8], is_dir: bool) -> bool {
        self.rules.as_ref().is_some_and(|r| r.ignores(rel, is_dir))
    }

    /// Only `.git`.
    pub fn none() -> Self {
        Self::new(Vec::<OsString>::new())
    }

    pub fn with(mut self, name: impl Into<OsString>) -> Self {
        self.names.insert(name.into());
        self
    }

    pub fn names(&self) -> impl Iterator<Item = &OsStr> {
        self.names.iter().map(OsString::as_os_str)
    }

    /// Whether a directory called `name` is left out.
    pub(crate) fn excludes_dir(&self, name: &OsStr) -> bool {
        name == ".git" || self.names.contains(name)
    }
}

/// At most this much of one ignore file is read.
const MAX_RULES_BYTES: usize = 1 << 20;
/// At most this many `.gitignore` files are honoured.
const MAX_RULE_FILES: usize = 10_000;

/// The ignore rules of one run (see the module documentation).
#[derive(Debug)]
pub struct IgnoreRules {
    /// Every path of the baseline tree (files and symlinks).
    tracked: HashSet<Vec<u8>>,
    /// Every directory of the baseline tree that holds one of them.
    tracked_dirs: HashSet<Vec<u8>>,
    /// The `.gitignore` of each directory that has one (`""` for the root).
    per_dir: HashMap<Vec<u8>, Gitignore>,
    /// `info/exclude` and the core excludes file: below every `.gitignore`.
    global: Gitignore,
    /// Whether any rule exists at all (a walk skips every check without).
    any: bool,
    /// What the rules were built from, to compare two sets of rules.
    digest: [u8; 32],
}

impl PartialEq for IgnoreRules {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Eq for IgnoreRules {}

impl IgnoreRules {
    /// The rules of the tree `baseline` (a tree or commit id) in `repo`, with
    /// `extra` ignore texts (`info/exclude`, the core excludes file) below
    /// them.
    pub fn from_tree(
        repo: &Repository,
        baseline: Oid,
        extra: &[String],
    ) -> Result<Self, WorkspaceError> {
        let git = |source: git2::Error| WorkspaceError::Git {
            context: "reading the baseline's ignore rules".into(),
            source,
        };
        let tree = repo
            .find_object(baseline, None)
            .and_then(|o| o.peel_to_tree())
            .map_err(git)?;
        let mut tracked = HashSet::new();
        let mut tracked_dirs = HashSet::new();
        let mut files: Vec<(Vec<u8>, Oid)> = Vec::new();
        tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
            if entry.kind() == Some(ObjectType::Tree) {
                return TreeWalkResult::Ok;
            }
            let mut rel = dir.as_bytes().to_vec();
            rel.extend_from_slice(entry.name_bytes());
            if entry.name_bytes() == b".gitignore" && files.len() < MAX_RULE_FILES {
                files.push((dir.as_bytes().to_vec(), entry.id()));
            }
            tracked.insert(rel);
            TreeWalkResult::Ok
        })
        .map_err(git)?;
        for path in &tracked {
            let mut at = path.as_slice();
            while let Some(slash) = at.iter().rposition(|&b| b == b'/') {
                at = &at[..slash];
                if !tracked_dirs.insert(at.to_vec()) {
                    break;
                }
            }
        }
        let mut hasher = Sha256::new();
        let mut per_dir = HashMap::new();
        files.sort();
        for (dir, id) in files {
            let Ok(blob) = repo.find_blob(id) else {
                continue;
            };
            let text = String::from_utf8_lossy(&blob.content()[..blob.size().min(MAX_RULES_BYTES)])
                .into_owned();
            // `tree.walk` names directories with a trailing `/`.
            let dir = dir.strip_suffix(b"/").unwrap_or(&dir).to_vec();
            hasher.update((dir.len() as u64).to_le_bytes());
            hasher.update(&dir);
            hasher.update((text.len() as u64).to_le_bytes());
            hasher.update(text.as_bytes());
            per_dir.insert(dir, build(&text));
        }
        let mut global = String::new();
        for text in extra {
            hasher.update(b"\0extra\0");
            hasher.update(text.as_bytes());
            global.push_str(text);
            global.push('\n');
        }
        let global = build(&global);
        let any = !per_dir.is_empty() || !global.is_empty();
        Ok(Self {
            tracked,
            tracked_dirs,
            per_dir,
            global,
            any,
            digest: hasher.finalize().into(),
        })
    }

    /// Whether there is no rule at all (nothing is ever ignored).
    pub fn is_empty(&self) -> bool {
        !self.any
    }

    /// Whether the entry `rel` (relative, `/`-separated) is ignored: not a
    /// path of the baseline (nor, for a directory, one holding such a path),
    /// and matched by the rules itself or through a directory above it (as
    /// in Git, a file below an ignored directory cannot be re-included).
    pub fn ignores(&self, rel: &[u8], is_dir: bool) -> bool {
        if !self.any {
            return false;
        }
        let tracked = if is_dir {
            self.tracked_dirs.contains(rel)
        } else {
            self.tracked.contains(rel)
        };
        if tracked {
            return false;
        }
        let text = String::from_utf8_lossy(rel);
        let mut end = 0;
        while let Some(slash) = text[end..].find('/') {
            if self.matched(&text[..end + slash], true) {
                return true;
            }
            end += slash + 1;
        }
        self.matched(&text, is_dir)
    }

    /// What the rules say of `rel` alone: the `.gitignore` nearest to it
    /// that has an opinion decides, then the global rules.
    fn matched(&self, rel: &str, is_dir: bool) -> bool {
        let mut dir = rel;
        loop {
            dir = dir.rfind('/').map_or("", |at| &dir[..at]);
            if let Some(rules) = self.per_dir.get(dir.as_bytes()) {
                let below = if dir.is_empty() {
                    rel
                } else {
                    &rel[dir.len() + 1..]
                };
                match rules.matched(Path::new(below), is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            if dir.is_empty() {
                break;
            }
        }
        self.global.matched(Path::new(rel), is_dir).is_ignore()
    }
}

/// At most this many ignored entries are kept track of.
const MAX_IGNORED_ENTRIES: usize = 100_000;

/// Walks the workspace at `root` (never following a link, never into `.git`
/// or a cache folder `excludes` names) and calls `found` with each entry the
/// ignore rules ignore, without descending into an ignored directory.
fn walk_ignored(
    root: &Path,
    excludes: &crate::workspace::ExcludeSet,
    found: &mut dyn FnMut(&[u8], &Path, bool) -> bool,
) {
    // Without a rule nothing is ignored: no walk.
    if excludes.ignore_rules().is_none_or(|r| r.is_empty()) {
        return;
    }
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let at = root.join(std::ffi::OsStr::from_bytes(&dir));
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_IGNORED_ENTRIES * 10 {
                return;
            }
            let name = entry.file_name();
            let Ok(ft) = entry.file_type() else { continue };
            let is_dir = ft.is_dir();
            if name == ".git" || (is_dir && excludes.excludes_dir(&name)) {
                continue;
            }
            let mut rel = dir.clone();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(name.as_bytes());
            if excludes.ignores(&rel, is_dir) {
                if !found(&rel, &entry.path(), is_dir) {
                    return;
                }
            } else if is_dir {
                stack.push(rel);
            }
        }
    }
}

/// The ignored entries of the workspace at `root` now (what the bootstrap
/// built, kept by [`remove_new_ignored`]); at most [`MAX_IGNORED_ENTRIES`].
pub fn ignored_entries(root: &Path, excludes: &crate::workspace::ExcludeSet) -> HashSet<Vec<u8>> {
    let mut kept = HashSet::new();
    walk_ignored(root, excludes, &mut |rel, _, _| {
        kept.insert(rel.to_vec());
        kept.len() < MAX_IGNORED_ENTRIES
    });
    kept
}

/// Removes what the ignore rules ignore in the workspace at `root` and
/// `kept` does not hold — build outputs made since the baseline — so a
/// verification runs on what the patch delivers (and what the bootstrap
/// installed), never on a stale or planted output a check would take as
/// built. Returns the paths removed.
pub fn remove_new_ignored(
    root: &Path,
    excludes: &crate::workspace::ExcludeSet,
    kept: &HashSet<Vec<u8>>,
) -> Vec<Vec<u8>> {
    let mut removed = Vec::new();
    walk_ignored(root, excludes, &mut |rel, path, is_dir| {
        if !kept.contains(rel) {
            let gone = if is_dir {
                std::fs::remove_dir_all(path)
            } else {
                std::fs::remove_file(path)
            };
            if gone.is_ok() {
                removed.push(rel.to_vec());
            }
        }
        true
    });
    removed
}

/// The default tool caches plus the ignore rules of the baseline `baseline`
/// (a commit or tree in the repository at `git_dir`) and of the source
/// repository `source`. Rules that cannot be read leave only the caches
/// out, and say so in the log.
pub fn run_excludes(git_dir: &Path, baseline: Oid, source: &Path) -> crate::workspace::ExcludeSet {
    let rules = Repository::open(git_dir)
        .map_err(|source| WorkspaceError::Git {
            context: format!("opening {}", git_dir.display()),
            source,
        })
        .and_then(|repo| IgnoreRules::from_tree(&repo, baseline, &source_excludes(source)));
    match rules {
        Ok(rules) => {
            crate::workspace::ExcludeSet::default().with_ignore_rules(std::sync::Arc::new(rules))
        }
        Err(e) => {
            tracing::warn!("the repository's ignore rules are not honoured: {e}");
            crate::workspace::ExcludeSet::default()
        }
    }
}

/// One ignore file's rules; a line that is not a valid pattern is skipped,
/// as Git skips it.
fn build(text: &str) -> Gitignore {
    let mut builder = GitignoreBuilder::new("");
    for line in text.lines() {
        let _ = builder.add_line(None, line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

/// The ignore texts of the source repository beyond its `.gitignore`
/// files: its `info/exclude` and the core excludes file of the person's Git
/// configuration (by default `$XDG_CONFIG_HOME/git/ignore`), each read
/// bounded; what cannot be read is left out.
pub fn source_excludes(source: &Path) -> Vec<String> {
    let mut texts = Vec::new();
    let git_dir = Repository::open_ext(
        source,
        git2::RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&std::ffi::OsStr>(),
    )
    .ok()
    .map(|r| r.path().to_path_buf());
    let files = git_dir
        .map(|d| d.join("info").join("exclude"))
        .into_iter()
        .chain(ignore::gitignore::gitconfig_excludes_path());
    for file in files {
        if let Some(text) = read_bounded(&file, MAX_RULES_BYTES as u64) {
            texts.push(text);
        }
    }
    texts
}

/// A regular file's first `max` bytes as text (invalid UTF-8 replaced),
/// never through a link at its last component, never a fifo or a device;
/// `None` when it cannot be read so.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository whose one commit holds `files`.
    fn committed(files: &[(&str, &str)]) -> (tempfile::TempDir, Repository, Oid) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init(dir.path()).expect("init");
        let mut index = repo.index().expect("index");
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(&full, text).expect("write");
            index.add_path(Path::new(path)).expect("add");
        }
        let tree = index.write_tree().expect("tree");
        drop(index);
        (dir, repo, tree)
    }

    #[test]
    fn rules_ignore_new_outputs_but_never_a_tracked_path() {
        let (_dir, repo, tree) = committed(&[
            (".gitignore", "*.o\n/build/\ntest_*\n!keep.o\n"),
            ("clamp.c", "int x;"),
            ("vendored.o", "tracked although it matches"),
            ("sub/.gitignore", "local.txt\n!special.tmp\n"),
            ("sub/a.c", ""),
        ]);
        let rules = IgnoreRules::from_tree(&repo, tree, &["*.tmp\n".to_string()]).expect("rules");
        for ignored in ["clamp.o", "sub/x.o", "test_clamp", "sub/local.txt", "x.tmp"] {
            assert!(rules.ignores(ignored.as_bytes(), false), "{ignored}");
        }
        assert!(rules.ignores(b"build", true));
        assert!(rules.ignores(b"build/deep/out.bin", false));
        for kept in [
            "clamp.c",
            "vendored.o",
            "keep.o",
            "new.c",
            "sub/special.tmp",
            "local.txt",
        ] {
            assert!(!rules.ignores(kept.as_bytes(), false), "{kept}");
        }
        // `/build/` is anchored at the root and matches directories only.
        assert!(!rules.ignores(b"sub/build", true));
        assert!(!rules.ignores(b"build", false));
        assert!(!rules.ignores(b"sub", true));
    }

    #[test]
    fn a_directory_holding_a_tracked_file_is_never_ignored() {
        let (_dir, repo, tree) = committed(&[
            (".gitignore", "generated/\n"),
            ("generated/schema.json", "{}"),
        ]);
        let rules = IgnoreRules::from_tree(&repo, tree, &[]).expect("rules");
        // The walk enters it, and keeps the tracked file...
        assert!(!rules.ignores(b"generated", true));
        assert!(!rules.ignores(b"generated/schema.json", false));
        // ...but a new file below the ignored directory is ignored, as Git
        // ignores it.
        assert!(rules.ignores(b"generated/new.json", false));
    }

    #[test]
    fn outputs_made_since_the_baseline_are_removed_and_the_bootstraps_kept() {
        let (dir, repo, tree) = committed(&[
            (".gitignore", "*.o\n/build/\n/test_clamp\n"),
            ("clamp.c", "int x;"),
            ("vendored.o", "tracked"),
        ]);
        let rules = IgnoreRules::from_tree(&repo, tree, &[]).expect("rules");
        let excludes =
            crate::workspace::ExcludeSet::default().with_ignore_rules(std::sync::Arc::new(rules));
        let root = dir.path();
        std::fs::create_dir_all(root.join("build/deep")).expect("mkdir");
        std::fs::write(root.join("build/deep/dep.bin"), "from the bootstrap").expect("write");
        let kept = ignored_entries(root, &excludes);
        assert_eq!(kept, HashSet::from([b"build".to_vec()]));
        // What commands built since: a planted test binary, a stale object.
        std::fs::write(root.join("test_clamp"), "#!/bin/sh\nexit 0\n").expect("write");
        std::fs::write(root.join("clamp.o"), "stale").expect("write");
        std::fs::create_dir_all(root.join("node_modules/x")).expect("mkdir");
        std::fs::write(root.join("node_modules/x/a.o"), "cache").expect("write");
        let mut removed = remove_new_ignored(root, &excludes, &kept);
        removed.sort();
        assert_eq!(removed, vec![b"clamp.o".to_vec(), b"test_clamp".to_vec()]);
        assert!(root.join("build/deep/dep.bin").exists(), "the bootstrap's");
        assert!(root.join("vendored.o").exists(), "tracked");
        assert!(root.join("clamp.c").exists());
        assert!(
            root.join("node_modules/x/a.o").exists(),
            "a cache folder is left alone"
        );
        assert!(root.join(".git").exists());
    }

    #[test]
    fn no_rules_ignore_nothing_and_equal_inputs_compare_equal() {
        let (_dir, repo, tree) = committed(&[("a.txt", "a")]);
        let rules = IgnoreRules::from_tree(&repo, tree, &[]).expect("rules");
        assert!(!rules.ignores(b"a.o", false));
        let again = IgnoreRules::from_tree(&repo, tree, &[]).expect("rules");
        assert_eq!(rules, again);
        let other = IgnoreRules::from_tree(&repo, tree, &["*.o".into()]).expect("rules");
        assert_ne!(rules, other);
        assert!(other.ignores(b"a.o", false));
    }
}
