//! The path validator agrees with git itself: every candidate is offered to
//! `git update-index` (with `core.protectHFS` and `core.protectNTFS` on, as
//! the validator assumes) and git's verdict must be ours.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;

use minicoder::workspace::verify_path;

const CANDIDATES: &[&[u8]] = &[
    b"a",
    b"src/main.rs",
    b".gitignore",
    b".gitmodules",
    b".github/workflows/ci.yml",
    b".gitx/y",
    b"x.git",
    b"git",
    b"git~2",
    b"back\\slash",
    b"\\.git",
    b"tab\tname",
    b"new\nline",
    b"esc\x1b[2J",
    b"\xff\xfe",
    b"...",
    b".git",
    b".git/config",
    b".GIT/hooks/x",
    b".Git/HEAD",
    b"sub/.git/config",
    b"a/b/.gIt",
    b".git./config",
    b".git../config",
    b".git /config",
    b"git~1/config",
    b"GIT~1",
    b".git::$INDEX_ALLOCATION/x",
    b".git:stream",
    b"a\\.git",
    b"a\\git~1",
    b".git\\x",
    b".git\xff",
    b"a//b",
    b"a/./b",
    b"a/../b",
    b"./a",
    b"gitmod~1",
    b"gi7eb~12",
    b".gitmodules.",
];

const HFS_ALIASES: &[&str] = &[
    "\u{feff}.git/x",
    ".g\u{200c}it/config",
    ".gi\u{200d}t",
    ".\u{202e}git/x",
    ".GI\u{206a}T/x",
    "sub/.git\u{200f}/config",
    "\u{202e}txt.exe",
];

/// Whether git accepts `path` in its index, for a file or a symlink.
fn git_accepts(repo: &std::path::Path, blob: &str, path: &[u8], symlink: bool) -> bool {
    // A fresh index each time, so one entry cannot conflict with another.
    let index = tempfile::NamedTempFile::new_in(repo).expect("index file");
    std::fs::remove_file(index.path()).expect("an index git creates");
    let mode = if symlink { "120000" } else { "100644" };
    let mut info = format!("{mode},{blob},").into_bytes();
    info.extend_from_slice(path);
    Command::new("git")
        .args([
            "-c",
            "core.protectHFS=true",
            "-c",
            "core.protectNTFS=true",
            "update-index",
            "--add",
            "--cacheinfo",
        ])
        .arg(OsStr::from_bytes(&info))
        .env("GIT_INDEX_FILE", index.path())
        .current_dir(repo)
        .output()
        .expect("run git")
        .status
        .success()
}

#[test]
fn the_validator_agrees_with_git() {
    let repo = tempfile::tempdir().expect("tempdir");
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(repo.path())
        .status()
        .expect("git init");
    assert!(init.success());
    let blob = git2::Repository::open(repo.path())
        .and_then(|r| r.blob(b"x\n"))
        .expect("blob")
        .to_string();
    let mut checked = 0;
    for path in CANDIDATES
        .iter()
        .copied()
        .chain(HFS_ALIASES.iter().map(|p| p.as_bytes()))
    {
        for symlink in [false, true] {
            let ours = verify_path(path, symlink);
            let git = git_accepts(repo.path(), &blob, path, symlink);
            assert_eq!(
                ours,
                git,
                "{:?} (symlink: {symlink}): git {}",
                String::from_utf8_lossy(path),
                if git { "accepts" } else { "refuses" }
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * (CANDIDATES.len() + HFS_ALIASES.len()));
}
