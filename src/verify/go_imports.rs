//! Whether every import of a Go module can be resolved inside the sandbox,
//! read from its files without running anything. Checks run without
//! network, so an import that neither the standard library, the module
//! itself nor a `require` of `go.mod` provides fails the check for want
//! of it — which the agent would take for a bug to fix. So does a `go`
//! directive newer than the image's toolchain (Go would try to download
//! one). `doctor` says so before a run does.
//!
//! The reading is bounded: at most [`MAX_FILES`] `.go` files, each read
//! up to [`MAX_FILE_BYTES`]; `vendor/`, `testdata/` and directories Go
//! itself skips (`_x`, `.x`) are not read.

use std::collections::BTreeSet;
use std::path::Path;

/// At most this many `.go` files are read.
const MAX_FILES: usize = 5_000;
/// At most this much of one file is read (imports come first).
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// What `go.mod` declares.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GoMod {
    /// The module path (`github.com/x/y`).
    pub module: String,
    /// The `go` directive (`1.24`), if any.
    pub go: Option<String>,
    /// Every module path a `require` or the left side of a `replace` names.
    pub provided: Vec<String>,
}

/// Reads `go.mod`'s text; comments and unknown directives are passed over.
pub fn parse_go_mod(text: &str) -> GoMod {
    let mut out = GoMod::default();
    let mut block: Option<String> = None;
    for raw in text.lines() {
        let line = raw.split("//").next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if let Some(kind) = &block {
            if line == ")" {
                block = None;
            } else if (kind == "require" || kind == "replace")
                && let Some(path) = line.split_whitespace().next()
            {
                out.provided.push(unquote(path));
            }
            continue;
        }
        let mut words = line.split_whitespace();
        let Some(directive) = words.next() else {
            continue;
        };
        let rest: Vec<&str> = words.collect();
        match (directive, rest.first().copied()) {
            (d, Some("(")) => block = Some(d.to_string()),
            ("module", Some(path)) => out.module = unquote(path),
            ("go", Some(version)) => out.go = Some(version.to_string()),
            ("require" | "replace", Some(path)) => out.provided.push(unquote(path)),
            _ => {}
        }
    }
    out
}

fn unquote(word: &str) -> String {
    word.trim_matches(|c| c == '"' || c == '`').to_string()
}

/// The import paths one Go source file names (its import declarations,
/// which Go requires before any other declaration).
pub fn imports_of(source: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_block = false;
    let mut in_comment = false;
    for raw in source.lines() {
        let mut line = raw.trim();
        if in_comment {
            match line.find("*/") {
                Some(end) => {
                    in_comment = false;
                    line = line[end + 2..].trim();
                }
                None => continue,
            }
        }
        if let Some(start) = line.find("/*")
            && !line[start..].contains("*/")
        {
            in_comment = true;
            line = line[..start].trim();
        }
        let line = line.split("//").next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        if in_block {
            if line.starts_with(')') {
                in_block = false;
            } else if let Some(path) = quoted(line) {
                out.push(path);
            }
            continue;
        }
        if line.starts_with("package ") {
            continue;
        }
        let Some(rest) = line.strip_prefix("import") else {
            // The first declaration that is not an import ends them.
            break;
        };
        let rest = rest.trim();
        if let Some(inner) = rest.strip_prefix('(') {
            let inner = inner.trim();
            let closed = inner.find(')');
            let specs = &inner[..closed.unwrap_or(inner.len())];
            out.extend(specs.split(';').filter_map(quoted));
            in_block = closed.is_none();
        } else if let Some(path) = quoted(rest) {
            out.push(path);
        }
    }
    out
}

/// The first `"…"` or `` `…` `` of a line.
fn quoted(line: &str) -> Option<String> {
    let start = line.find(['"', '`'])?;
    let quote = line[start..].chars().next()?;
    let rest = &line[start + 1..];
    let end = rest.find(quote)?;
    Some(rest[..end].to_string())
}

/// Whether an import path names a standard package: Go's rule is that no
/// standard package's first path element holds a dot.
pub fn is_std_path(path: &str) -> bool {
    !path.split('/').next().unwrap_or("").contains('.')
}

/// What stands in the way of a Go module's imports.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Gaps {
    /// Non-standard imports no `require` provides, with a file importing each.
    pub unprovided: Vec<(String, String)>,
    /// Standard-looking imports the image's toolchain does not have.
    pub not_in_std: Vec<(String, String)>,
    /// Required modules that `go.sum` has no line for.
    pub unsummed: Vec<String>,
    /// The `go` directive, when the image's toolchain is older.
    pub newer_go: Option<String>,
    /// How many files were read, and whether the reading stopped early.
    pub files: usize,
    pub truncated: bool,
}

impl Gaps {
    pub fn is_empty(&self) -> bool {
        self.unprovided.is_empty()
            && self.not_in_std.is_empty()
            && self.unsummed.is_empty()
            && self.newer_go.is_none()
    }
}

/// What the image's Go toolchain has: its version (`go1.24.4`) and its
/// standard packages (`go list std`).
#[derive(Debug, Default, Clone)]
pub struct Toolchain {
    pub version: String,
    pub std: BTreeSet<String>,
}

impl Toolchain {
    /// Reads `go env GOVERSION` followed by `go list std`, one per line.
    pub fn parse(output: &str) -> Option<Self> {
        let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
        let version = lines.next()?.to_string();
        if !version.starts_with("go1") {
            return None;
        }
        let std: BTreeSet<String> = lines
            .filter(|l| !l.contains(char::is_whitespace))
            .map(str::to_string)
            .collect();
        Some(Self { version, std })
    }
}

/// Finds the gaps of the Go module at `repo`, or `None` when it has no
/// `go.mod`. Without a `toolchain`, standard imports are taken as present.
pub fn gaps(repo: &Path, toolchain: Option<&Toolchain>) -> Option<Gaps> {
    let text = crate::workspace::read_bounded(&repo.join("go.mod"), MAX_FILE_BYTES)?;
    let module = parse_go_mod(&text);
    let mut out = Gaps::default();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let walk = ignore::WalkBuilder::new(repo)
        .hidden(true)
        .git_ignore(true)
        .filter_entry(|e| {
            let name = e.file_name().to_string_lossy();
            !(e.depth() > 0
                && e.file_type().is_some_and(|t| t.is_dir())
                && (name == "vendor"
                    || name == "testdata"
                    || name.starts_with('_')
                    || name.starts_with('.')))
        })
        .build();
    for entry in walk.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file())
            || entry.path().extension().is_none_or(|e| e != "go")
        {
            continue;
        }
        if out.files == MAX_FILES {
            out.truncated = true;
            break;
        }
        out.files += 1;
        let Some(source) = crate::workspace::read_bounded(entry.path(), MAX_FILE_BYTES) else {
            continue;
        };
        let rel = entry
            .path()
            .strip_prefix(repo)
            .unwrap_or(entry.path())
            .display()
            .to_string();
        for import in imports_of(&source) {
            if import == "C" || !seen.insert(import.clone()) {
                continue;
            }
            if is_std_path(&import) {
                if let Some(t) = toolchain
                    && !t.std.contains(&import)
                {
                    out.not_in_std.push((import, rel.clone()));
                }
                continue;
            }
            let within = |prefix: &str| {
                !prefix.is_empty()
                    && (import == prefix || import.starts_with(&format!("{prefix}/")))
            };
            if within(&module.module) || module.provided.iter().any(|p| within(p)) {
                continue;
            }
            out.unprovided.push((import, rel.clone()));
        }
    }
    let sum = crate::workspace::read_bounded(&repo.join("go.sum"), 16 << 20).unwrap_or_default();
    let summed: BTreeSet<&str> = sum
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    out.unsummed = module
        .provided
        .iter()
        .filter(|p| !summed.contains(p.as_str()))
        .cloned()
        .collect();
    if let (Some(t), Some(wanted)) = (toolchain, module.go.as_deref())
        && newer(wanted, t.version.trim_start_matches("go"))
    {
        out.newer_go = Some(wanted.to_string());
    }
    Some(out)
}

/// Whether Go version `a` (`1.25`, `1.24.3`) is newer than `b`.
fn newer(a: &str, b: &str) -> bool {
    let parts = |v: &str| -> Vec<u64> {
        v.split(|c: char| !c.is_ascii_digit())
            .take(3)
            .map(|p| p.parse().unwrap_or(0))
            .collect()
    };
    let (mut a, mut b) = (parts(a), parts(b));
    a.resize(3, 0);
    b.resize(3, 0);
    a > b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_mod_directives_and_blocks_are_read() {
        let m = parse_go_mod(
            "module example.com/m // the module\n\ngo 1.22\n\nrequire (\n\tgithub.com/a/b v1.0.0\n\t// a comment\n\tgolang.org/x/text v0.3.0 // indirect\n)\nrequire github.com/c/d v2.0.0\nreplace github.com/e/f => ../f\n",
        );
        assert_eq!(m.module, "example.com/m");
        assert_eq!(m.go.as_deref(), Some("1.22"));
        assert_eq!(
            m.provided,
            [
                "github.com/a/b",
                "golang.org/x/text",
                "github.com/c/d",
                "github.com/e/f"
            ]
        );
    }

    #[test]
    fn imports_are_read_until_the_first_other_declaration() {
        let source = r#"// Package x does things.
/* a block
   comment */
package x

import "fmt"
import big "math/big"
import (
	"net/http" // the server
	_ "embed"
	. `strings`
	/* skipped */
)
import ("os"; "io")

func f() { _ = "github.com/not/an/import" }
"#;
        assert_eq!(
            imports_of(source),
            [
                "fmt", "math/big", "net/http", "embed", "strings", "os", "io"
            ]
        );
    }

    #[test]
    fn standard_paths_have_no_dot_in_their_first_element() {
        assert!(is_std_path("net/http"));
        assert!(is_std_path("testing/quick"));
        assert!(!is_std_path("github.com/x/y"));
        assert!(!is_std_path("golang.org/x/text"));
    }

    #[test]
    fn versions_compare_by_number() {
        assert!(newer("1.25", "1.24.4"));
        assert!(newer("1.24.5", "1.24.4"));
        assert!(!newer("1.24", "1.24.4"));
        assert!(!newer("1.9", "1.24"));
        assert!(!newer("1.24.4", "1.24.4"));
    }

    fn module(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    #[test]
    fn every_gap_is_found_and_a_complete_module_has_none() {
        let toolchain = Toolchain::parse("go1.24.4\nfmt\nmath/big\nnet/http\n").unwrap();
        let dir = module(&[
            (
                "go.mod",
                "module example.com/m\ngo 1.25\nrequire github.com/a/b v1.0.0\n",
            ),
            (
                "m.go",
                "package m\nimport (\n\"fmt\"\n\"math/big\"\n\"iter\"\n\"example.com/m/sub\"\n\"github.com/a/b/c\"\n\"github.com/x/y\"\n)\n",
            ),
            (
                "vendor/v/v.go",
                "package v\nimport \"github.com/vendored/z\"\n",
            ),
            ("testdata/t.go", "package t\nimport \"github.com/t/t\"\n"),
        ]);
        let gaps = gaps(dir.path(), Some(&toolchain)).unwrap();
        assert_eq!(
            gaps.unprovided,
            [("github.com/x/y".to_string(), "m.go".to_string())]
        );
        assert_eq!(gaps.not_in_std, [("iter".to_string(), "m.go".to_string())]);
        assert_eq!(gaps.unsummed, ["github.com/a/b"]);
        assert_eq!(gaps.newer_go.as_deref(), Some("1.25"));
        assert_eq!(gaps.files, 1);

        let clean = module(&[
            ("go.mod", "module example.com/m\ngo 1.24\n"),
            (
                "m.go",
                "package m\nimport (\n\"fmt\"\n\"math/big\"\n\"net/http\"\n)\n",
            ),
        ]);
        assert!(gaps_empty(&clean, &toolchain));
        assert!(super::gaps(module(&[("x.go", "package x")]).path(), None).is_none());
    }

    fn gaps_empty(dir: &tempfile::TempDir, toolchain: &Toolchain) -> bool {
        gaps(dir.path(), Some(toolchain)).unwrap().is_empty()
    }

    #[test]
    fn a_toolchain_listing_must_start_with_a_version() {
        assert!(Toolchain::parse("").is_none());
        assert!(Toolchain::parse("sh: go: not found\n").is_none());
        let t = Toolchain::parse("go1.24.4\nfmt\n\nos\n").unwrap();
        assert_eq!(t.version, "go1.24.4");
        assert_eq!(t.std.len(), 2);
    }
}
