//! Project instructions: `AGENTS.md` at the repository root and in each
//! directory on the way to the files the agent works on (root first, then
//! each directory down), with `CLAUDE.md` — and at the root
//! `.github/copilot-instructions.md` — where a directory has no `AGENTS.md`.
//!
//! Finding them never walks the tree: the root is looked at when the run
//! starts, and a directory when a tool call first names a path in it. Each
//! file is cut to [`MAX_FILE_BYTES`], all of them together to
//! [`MAX_TOTAL_BYTES`] (and to a quarter of the context budget), each cut
//! with a note saying so. They sit in the never-compacted part of every
//! request.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Bytes kept of one instruction file.
pub(crate) const MAX_FILE_BYTES: usize = 32 * 1024;
/// Bytes kept of all instruction files together.
pub(crate) const MAX_TOTAL_BYTES: usize = 64 * 1024;
/// Directories looked at in one run, at most (the state stays bounded).
pub(crate) const MAX_DIRS: usize = 512;
/// Directory levels below the root that are looked at.
const MAX_DEPTH: usize = 16;

/// The candidates of one directory, best first: the first that exists is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionLookup {
    /// Relative, `/`-separated; empty for the root.
    pub dir: String,
    pub candidates: Vec<String>,
}

/// One instruction file as read (at most [`MAX_FILE_BYTES`] of it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionDoc {
    /// Relative to the workspace root, `/`-separated.
    pub path: String,
    pub text: String,
    /// The file's size.
    pub bytes: u64,
    /// Whether `text` is less than the whole file.
    pub truncated: bool,
}

/// The candidates for one directory.
pub(crate) fn lookup(dir: &str) -> InstructionLookup {
    let join = |name: &str| {
        if dir.is_empty() {
            name.to_string()
        } else {
            format!("{dir}/{name}")
        }
    };
    let mut candidates = vec![join("AGENTS.md"), join("CLAUDE.md")];
    if dir.is_empty() {
        candidates.push(".github/copilot-instructions.md".to_string());
    }
    InstructionLookup {
        dir: dir.to_string(),
        candidates,
    }
}

/// The directories from the root down to `path` (excluding the root):
/// `a/b/c.py` as a file gives `a`, `a/b`; as a directory also `a/b/c.py`.
/// `None` for a path that leaves the workspace or enters `.git`.
pub(crate) fn dirs_on_the_way(path: &str, is_dir: bool) -> Option<Vec<String>> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => return None,
            p if p.eq_ignore_ascii_case(".git") => return None,
            p => parts.push(p),
        }
    }
    if path.starts_with('/') || path.contains('\0') {
        return None;
    }
    if !is_dir {
        parts.pop();
    }
    parts.truncate(MAX_DEPTH);
    Some((1..=parts.len()).map(|n| parts[..n].join("/")).collect())
}

/// The directories a tool call works in, from its arguments.
pub(crate) fn dirs_of_call(tool: &str, arguments: &str) -> Vec<String> {
    let Ok(args) = serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(arguments)
    else {
        return Vec::new();
    };
    let text = |key: &str| args.get(key).and_then(|v| v.as_str());
    let (path, is_dir) = match tool {
        "read_file" | "edit_file" | "tree_sitter_symbols" => (text("path"), false),
        "list_tree" | "ripgrep" => (text("path"), true),
        "run_shell" => (text("cwd"), true),
        _ => (None, false),
    };
    path.and_then(|p| dirs_on_the_way(p, is_dir))
        .unwrap_or_default()
}

/// The instructions of a run: what was found, and where it was looked.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ProjectInstructions {
    docs: Vec<InstructionDoc>,
    /// Directories already looked at (the root is "").
    looked: BTreeSet<String>,
    /// Bytes of every doc's text.
    kept: usize,
    /// The total bound: [`MAX_TOTAL_BYTES`] or less for a small context.
    cap: usize,
}

impl ProjectInstructions {
    /// The root's instructions (read at start), within a context of
    /// `context_limit` tokens.
    pub fn new(root: Vec<InstructionDoc>, context_limit: u64) -> (Self, Vec<InstructionDoc>) {
        // A quarter of the budget, at four characters a token.
        let quarter = usize::try_from(context_limit).unwrap_or(usize::MAX);
        let mut me = Self {
            cap: MAX_TOTAL_BYTES.min(quarter),
            ..Self::default()
        };
        me.looked.insert(String::new());
        let admitted = root.into_iter().filter_map(|d| me.admit(d)).collect();
        (me, admitted)
    }

    pub fn docs(&self) -> &[InstructionDoc] {
        &self.docs
    }

    /// Lookups for the directories of `dirs` not yet looked at; they count
    /// as looked at from now on.
    pub(crate) fn lookups(&mut self, dirs: Vec<String>) -> Vec<InstructionLookup> {
        let mut out = Vec::new();
        for dir in dirs {
            if self.looked.len() >= MAX_DIRS {
                break;
            }
            if self.looked.insert(dir.clone()) {
                out.push(lookup(&dir));
            }
        }
        out
    }

    /// Adds a doc within the total bound; returns it as kept (cut if the
    /// bound was reached), or `None` when it was known already or nothing of
    /// it fits.
    pub(crate) fn admit(&mut self, mut doc: InstructionDoc) -> Option<InstructionDoc> {
        if self.docs.iter().any(|d| d.path == doc.path) {
            return None;
        }
        let room = self.cap.saturating_sub(self.kept);
        if room == 0 {
            return None;
        }
        if doc.text.len() > room {
            let mut cut = room;
            while !doc.text.is_char_boundary(cut) {
                cut -= 1;
            }
            doc.text.truncate(cut);
            doc.truncated = true;
        }
        self.kept += doc.text.len();
        self.docs.push(doc.clone());
        // Root first, then each directory down.
        self.docs.sort_by(|a, b| {
            depth(&a.path)
                .cmp(&depth(&b.path))
                .then(a.path.cmp(&b.path))
        });
        Some(doc)
    }

    /// The message that carries them, if any were found.
    pub fn render(&self) -> Option<String> {
        if self.docs.is_empty() {
            return None;
        }
        let mut out = String::from(
            "Project instructions, from the repository (root first; each file applies to its \
             directory and below, and a deeper one takes precedence). Follow them unless they \
             conflict with the runtime contract or the task.\n",
        );
        for doc in &self.docs {
            out.push_str(&format!("\n--- {} ---\n", doc.path));
            out.push_str(doc.text.trim_end());
            out.push('\n');
            if doc.truncated {
                out.push_str(&format!(
                    "[… {} was cut: it has {} bytes, the first {} are shown. Read the rest with read_file if you need it.]\n",
                    doc.path,
                    doc.bytes,
                    doc.text.len()
                ));
            }
        }
        Some(out)
    }
}

fn depth(path: &str) -> usize {
    path.matches('/').count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(path: &str, text: &str) -> InstructionDoc {
        InstructionDoc {
            path: path.into(),
            text: text.into(),
            bytes: text.len() as u64,
            truncated: false,
        }
    }

    #[test]
    fn agents_md_comes_first_and_the_root_has_two_fallbacks() {
        assert_eq!(
            lookup("").candidates,
            ["AGENTS.md", "CLAUDE.md", ".github/copilot-instructions.md"]
        );
        assert_eq!(lookup("a/b").candidates, ["a/b/AGENTS.md", "a/b/CLAUDE.md"]);
    }

    #[test]
    fn the_directories_on_the_way_go_from_the_root_down() {
        assert_eq!(
            dirs_on_the_way("./src/app/main.py", false),
            Some(vec!["src".to_string(), "src/app".to_string()])
        );
        assert_eq!(
            dirs_on_the_way("src/app", true),
            Some(vec!["src".to_string(), "src/app".to_string()])
        );
        assert_eq!(dirs_on_the_way("main.py", false), Some(vec![]));
        assert_eq!(dirs_on_the_way("../x/y.py", false), None);
        assert_eq!(dirs_on_the_way("/etc/passwd", false), None);
        assert_eq!(dirs_on_the_way("a/.GIT/hooks", true), None);
        let deep = "d/".repeat(100);
        assert_eq!(
            dirs_on_the_way(&deep, true).map(|d| d.len()),
            Some(MAX_DEPTH)
        );
        assert_eq!(
            dirs_of_call("edit_file", r#"{"path":"pkg/sub/m.go","patch":""}"#),
            ["pkg", "pkg/sub"]
        );
        assert_eq!(
            dirs_of_call("run_shell", r#"{"command":"ls","cwd":"pkg"}"#),
            ["pkg"]
        );
        assert!(dirs_of_call("update_plan", r#"{"items":[]}"#).is_empty());
        assert!(dirs_of_call("read_file", "not json").is_empty());
    }

    #[test]
    fn each_directory_is_looked_at_once_and_the_root_never_again() {
        let (mut p, _) = ProjectInstructions::new(vec![], 1_000_000);
        assert!(
            p.lookups(vec![String::new()]).is_empty(),
            "the root is looked at start"
        );
        let first = p.lookups(vec!["a".into(), "a/b".into()]);
        assert_eq!(first.len(), 2);
        assert_eq!(first[1].dir, "a/b");
        assert!(p.lookups(vec!["a".into(), "a/b".into()]).is_empty());
        for i in 0..MAX_DIRS * 2 {
            p.lookups(vec![format!("d{i}")]);
        }
        assert!(p.looked.len() <= MAX_DIRS, "bounded");
    }

    #[test]
    fn the_total_is_bounded_with_a_note_and_docs_sort_root_first() {
        let (mut p, admitted) =
            ProjectInstructions::new(vec![doc("AGENTS.md", &"r".repeat(40_000))], 1_000_000);
        assert_eq!(admitted.len(), 1);
        let kept = p
            .admit(doc("a/b/AGENTS.md", &"é".repeat(20_000)))
            .expect("a cut part fits");
        assert!(kept.truncated);
        assert_eq!(kept.text.len(), MAX_TOTAL_BYTES - 40_000);
        assert!(
            p.admit(doc("c/AGENTS.md", "more")).is_none(),
            "nothing fits any more"
        );
        assert!(
            p.admit(doc("AGENTS.md", "again")).is_none(),
            "known already"
        );
        let text = p.render().expect("rendered");
        let root = text.find("--- AGENTS.md ---").expect("root");
        let deep = text.find("--- a/b/AGENTS.md ---").expect("deep");
        assert!(root < deep);
        assert!(
            text.contains("a/b/AGENTS.md was cut: it has 40000 bytes, the first 25536 are shown"),
            "{}",
            &text[text.len() - 300..]
        );
    }

    #[test]
    fn a_small_context_gets_a_quarter_of_it_at_most() {
        let (p, admitted) =
            ProjectInstructions::new(vec![doc("CLAUDE.md", &"x".repeat(30_000))], 8_000);
        assert_eq!(
            admitted[0].text.len(),
            8_000,
            "8,000 tokens: 2,000 tokens of text"
        );
        assert!(admitted[0].truncated);
        assert_eq!(p.docs().len(), 1);
        assert!(ProjectInstructions::new(vec![], 8_000).0.render().is_none());
    }
}
