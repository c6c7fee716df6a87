//! `minicoder demo`: fixes a bundled buggy fixture end to end with a scripted
//! model — no API key — but the real Docker sandbox and verifier.

use std::path::Path;
use std::process::ExitCode;

use crate::headless::StdoutMode;
use crate::model::ScriptedSource;
use crate::runtime::{ApprovalMode, RunOptions};
use crate::state::StateDir;

const FIXTURE: [(&str, &str); 5] = [
    (
        "pagination.py",
        include_str!("../../assets/demo/fixture/pagination.py"),
    ),
    (
        "tests/test_pagination.py",
        include_str!("../../assets/demo/fixture/tests/test_pagination.py"),
    ),
    (
        "pyproject.toml",
        include_str!("../../assets/demo/fixture/pyproject.toml"),
    ),
    (
        ".minicoder.json",
        include_str!("../../assets/demo/fixture/.minicoder.json"),
    ),
    (
        "README.md",
        include_str!("../../assets/demo/fixture/README.md"),
    ),
];
const SCRIPT: &str = include_str!("../../assets/demo/script.json");
pub(crate) const TASK: &str =
    "Fix the pagination bug: page_count(21, 10) returns 2, so the partial last page is lost.";

/// The fixture's files: (path, text).
pub(crate) fn fixture_files() -> &'static [(&'static str, &'static str)] {
    &FIXTURE
}

/// Writes the fixture as a fresh one-commit Git repository in `dir`.
pub fn write_fixture(dir: &Path) -> anyhow::Result<()> {
    for (path, text) in FIXTURE {
        let file = dir.join(path);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&file, text)?;
    }
    commit_everything(dir, "pagination helpers")
}

/// Makes `dir` a Git repository whose one commit holds every file in it.
pub(crate) fn commit_everything(dir: &Path, message: &str) -> anyhow::Result<()> {
    let repo = git2::Repository::init(dir)?;
    let mut index = repo.index()?;
    index.add_all(["*"], git2::IndexAddOption::DEFAULT, None)?;
    index.write()?;
    let tree = repo.find_tree(index.write_tree()?)?;
    let sig = git2::Signature::now("minicoder demo", "demo@minicoder.invalid")?;
    repo.commit(Some("HEAD"), &sig, &sig, message, &tree, &[])?;
    Ok(())
}

pub async fn run() -> anyhow::Result<ExitCode> {
    // Fail early, before writing the fixture, if Docker is not there.
    super::sandbox::docker_with_image().await?;
    let state = StateDir::from_env()?;
    let dir = state.root().join("demo").join(crate::ids::random_hex(4));
    crate::state::private_dir(&dir)?;
    write_fixture(&dir)?;
    let before = tree_digest(&dir)?;
    let source = ScriptedSource::from_json(SCRIPT)?;
    let mut opts = RunOptions::new(&dir, TASK);
    opts.approval = ApprovalMode::Never;
    err!(
        "minicoder demo: fixing {} with a scripted model in the real sandbox",
        dir.display()
    );
    let (code, report) = super::run::run_with(
        super::run::Begin::Fresh(Box::new(opts)),
        Box::new(source),
        StdoutMode::Nothing,
        &dir.display().to_string(),
        TASK,
    )
    .await;
    let unchanged = tree_digest(&dir)? == before;
    if let Some(report) = report {
        print_summary(&report, unchanged);
    }
    if !unchanged {
        anyhow::bail!(
            "the source repository {} changed during the run",
            dir.display()
        );
    }
    Ok(code)
}

fn print_summary(report: &crate::protocol::RunReport, unchanged: bool) {
    out!();
    for line in summary_lines(report, unchanged) {
        out!("{line}");
    }
}

/// The lines of the closing summary, unescaped (the printer escapes each).
fn summary_lines(report: &crate::protocol::RunReport, unchanged: bool) -> Vec<String> {
    let checks: Vec<String> = report
        .verification
        .checks
        .iter()
        .map(|c| format!("{} {}", c.name, if c.passed { "passed" } else { "failed" }))
        .collect();
    let checks = if checks.is_empty() {
        "none".to_string()
    } else {
        checks.join(", ")
    };
    let source = if unchanged {
        "unchanged, byte for byte"
    } else {
        "CHANGED"
    };
    vec![
        format!(
            "minicoder demo: {:?} in {:.2} s ({})",
            report.outcome,
            report.duration_ms as f64 / 1000.0,
            report.reason
        ),
        format!(
            "  {} turns, {} tool calls; verification: {checks}",
            report.turns, report.tool_calls
        ),
        format!("  changed:   {}", report.changed_files.join(", ")),
        format!("  source:    {source}"),
        format!("  patch:     {}", report.patch),
        format!("  artifacts: {}", report.artifact_dir),
        format!(
            "next: {}",
            crate::headless::next_step(&report.run_id, report.outcome)
        ),
    ]
}

/// SHA-256 over every file of a tree (paths and bytes), `.git` included.
pub fn tree_digest(dir: &Path) -> anyhow::Result<String> {
    use sha2::{Digest, Sha256};
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    let mut h = Sha256::new();
    for f in files {
        h.update(f.strip_prefix(dir)?.to_string_lossy().as_bytes());
        h.update([0]);
        h.update(std::fs::read(&f)?);
        h.update([0]);
    }
    Ok(hex::encode(h.finalize()))
}
