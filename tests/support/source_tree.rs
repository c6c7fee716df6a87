//! Real-sized source trees for the benches: Git repositories of thousands
//! of files of real source text (the crate sources in cargo's registry,
//! repeated as needed).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Source files no bigger than this are taken from the registry.
const MAX_FILE: u64 = 256 * 1024;

pub fn registry_sources() -> Vec<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").expect("HOME")).join(".cargo"));
    let mut files = Vec::new();
    let Ok(indexes) = std::fs::read_dir(home.join("registry/src")) else {
        panic!("no crate sources under {}/registry/src", home.display());
    };
    for index in indexes.flatten() {
        for entry in ignore::WalkBuilder::new(index.path())
            .standard_filters(false)
            .build()
            .flatten()
        {
            let path = entry.path();
            if entry.file_type().is_some_and(|t| t.is_file())
                && entry.metadata().is_ok_and(|m| m.len() <= MAX_FILE)
                && !path.components().any(|c| c.as_os_str() == ".git")
            {
                files.push(path.to_path_buf());
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "the registry holds no source files");
    files
}

pub fn git(dir: &Path, args: &[&str]) {
    // No background gc: the repository is copied right after its commit.
    let ok = Command::new("git")
        .args(["-c", "gc.auto=0"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .status()
        .expect("git")
        .success();
    assert!(ok, "git {args:?}");
}

/// A committed repository of `count` files copied from `sources` (repeated
/// under `copyN/` when there are fewer sources than files).
pub fn build_repo(root: &Path, sources: &[PathBuf], count: usize) -> (usize, u64) {
    std::fs::create_dir_all(root).unwrap();
    let mut bytes = 0;
    for i in 0..count {
        let src = &sources[i % sources.len()];
        let rel = src
            .components()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<PathBuf>();
        let dest = root.join(format!("copy{}", i / sources.len())).join(rel);
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        if dest.exists() {
            continue;
        }
        bytes += std::fs::copy(src, &dest).unwrap();
    }
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-q", "-m", "sources"]);
    let files = String::from_utf8(
        Command::new("git")
            .args(["ls-files"])
            .current_dir(root)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap()
    .lines()
    .count();
    (files, bytes)
}

/// `minicoder run REPO TASK --non-interactive` against the scripted model
/// `mock`, with a builtin check (`true`), its artifacts in `artifacts` and
/// its state in `state`: what the benches time.
pub fn scripted_run(
    repo: &Path,
    task: &str,
    state: &Path,
    artifacts: &Path,
    mock: &super::mock_openai::MockOpenAi,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(super::bin());
    cmd.arg("run")
        .arg(repo)
        .arg(task)
        .args([
            "--non-interactive",
            "--model",
            "openai",
            "--check",
            "t",
            "true",
        ])
        .arg("--artifact-dir")
        .arg(artifacts)
        .env("MINICODER_STATE_DIR", state)
        .env("OPENAI_BASE_URL", mock.base_url())
        .env("OPENAI_API_KEY", super::project_run::API_KEY)
        .env("OPENAI_MODEL", "mock-model");
    cmd
}
