//! `minicoder runs` (the table of runs) and `minicoder show RUN` (one run:
//! report, task, plan, summary, verification matrix, patch stat; the patch,
//! the events, JSON, and a re-check of the chain, receipt and patch hash).
//! Everything read from a run is its text, printed escaped.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use super::{EXIT_FAILURE, EXIT_USAGE};
use crate::protocol::{CheckReport, PlanItem, PlanStatus};
use crate::runs::{self, RunLookupError, RunRecord, RunStatus, age, verifications};
use crate::state::StateDir;
use crate::terminal_text::cut_to as cut;
use crate::trace::artifacts::{EVENTS_FILE, FINAL_PATCH_FILE, STATE_FILE};

/// One row of `runs`, and the summary `show --json` starts with.
#[derive(Debug, Serialize)]
struct RunRow {
    id: String,
    created: String,
    repo: String,
    task: String,
    /// `success`, `failure`, `cancelled`, `running` or `interrupted`.
    outcome: &'static str,
    reason: Option<String>,
    /// Whether the final verification passed (`None`: the run has no report).
    verified: Option<bool>,
    applied: bool,
    changed_files: Vec<String>,
    /// How many files changed, when `changed_files` lists only the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    changed_total: Option<u64>,
    duration_ms: Option<u64>,
    /// Tokens (and cost, when priced) the run used.
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens: Option<crate::protocol::TokenTotals>,
    artifact_dir: String,
}

impl RunRow {
    fn of(run: &RunRecord, state: &StateDir) -> Self {
        let report = run.report.as_ref();
        Self {
            id: run.id.clone(),
            created: run.manifest.created.clone(),
            repo: run.manifest.repo.clone(),
            task: run.manifest.task.clone(),
            outcome: run.status(state).as_str(),
            reason: report.map(|r| r.reason.clone()),
            verified: report.map(|r| r.verification.passed),
            applied: run.applied(),
            changed_files: report.map(|r| r.changed_files.clone()).unwrap_or_default(),
            changed_total: report.and_then(|r| r.changed_total),
            duration_ms: report.map(|r| r.duration_ms),
            tokens: report.map(|r| r.tokens),
            artifact_dir: run.dir.display().to_string(),
        }
    }
}

/// `minicoder runs [--repo PATH] [--json]`.
pub fn list(repo: Option<&Path>, json: bool) -> anyhow::Result<ExitCode> {
    let state = StateDir::from_env()?;
    let runs = match repo {
        Some(path) => {
            if !path.exists() {
                err!("minicoder: {} does not exist", path.display());
                return Ok(ExitCode::from(EXIT_USAGE));
            }
            let Some(root) = runs::repo_root(path) else {
                err!(
                    "minicoder: {} is not in a Git repository; --repo takes a repository's path",
                    path.display()
                );
                return Ok(ExitCode::from(EXIT_USAGE));
            };
            runs::list_for_repo(&state, &root)
        }
        None => runs::list(&state),
    };
    let rows: Vec<RunRow> = runs.iter().map(|r| RunRow::of(r, &state)).collect();
    if json {
        crate::headless::print_result(&rows);
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        out!("no runs yet; `minicoder run REPO \"TASK\"` starts one");
        return Ok(ExitCode::SUCCESS);
    }
    for line in table(&rows, chrono::Utc::now(), width()) {
        out!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The terminal's width, else `COLUMNS`, else 120.
fn width() -> usize {
    if std::io::stdout().is_terminal()
        && let Ok((w, _)) = crossterm::terminal::size()
    {
        return usize::from(w).max(60);
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(120)
        .max(60)
}

/// The table's lines, each at most `width` characters: the task takes what
/// the other columns leave. Text from runs is escaped before it is measured.
fn table(rows: &[RunRow], now: chrono::DateTime<chrono::Utc>, width: usize) -> Vec<String> {
    let header = [
        "ID",
        "AGE",
        "REPOSITORY",
        "TASK",
        "OUTCOME",
        "VERIFIED",
        "APPLIED",
        "FILES",
        "DURATION",
        "TOKENS",
    ];
    let cells: Vec<[String; 10]> = rows
        .iter()
        .map(|r| {
            [
                r.id.clone(),
                age(&r.created, now),
                cut(&escaped(&repo_name(&r.repo)), 24),
                escaped(&r.task.replace(['\n', '\r', '\t'], " ")),
                r.outcome.to_string(),
                match r.verified {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "-",
                }
                .to_string(),
                if r.applied { "yes" } else { "no" }.to_string(),
                r.changed_total
                    .unwrap_or(r.changed_files.len() as u64)
                    .to_string(),
                r.duration_ms.map_or("-".to_string(), duration),
                r.tokens.map_or("-".to_string(), |t| {
                    let total = crate::protocol::format_tokens(t.input + t.output);
                    match t.cost_micros {
                        Some(c) => format!("{total} {}", crate::protocol::format_usd(c)),
                        None => total,
                    }
                }),
            ]
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &cells {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let others: usize = widths
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3)
        .map(|(_, w)| w + 2)
        .sum();
    widths[3] = widths[3].min(width.saturating_sub(others).max(8));
    let line = |row: &[String]| {
        let mut out = String::new();
        for (i, cell) in row.iter().enumerate() {
            let cell = cut(cell, widths[i]);
            if i + 1 == row.len() {
                out.push_str(&cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count());
                out.push_str(&cell);
                out.push_str(&" ".repeat(pad + 2));
            }
        }
        out.trim_end().to_string()
    };
    let mut lines = vec![line(&header.map(String::from))];
    lines.extend(cells.iter().map(|row| line(row)));
    lines
}

fn escaped(text: &str) -> String {
    crate::terminal_text::escape_line(text).into_owned()
}

fn repo_name(repo: &str) -> String {
    Path::new(repo)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| repo.to_string())
}

/// `812ms`, `48.2s`, `3m 05s`.
fn duration(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => format!("{}m {:02}s", ms / 60_000, (ms / 1000) % 60),
    }
}

/// What `show` prints besides the run.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ShowFlags {
    pub diff: bool,
    pub events: bool,
    pub verify: bool,
    pub json: bool,
}

/// `minicoder show RUN`.
pub fn show(arg: &str, flags: ShowFlags) -> anyhow::Result<ExitCode> {
    let state = StateDir::from_env()?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    let run = match runs::resolve(&state, arg, &cwd) {
        Ok(run) => run,
        Err(e @ RunLookupError::Unreadable { .. }) => {
            err!("minicoder: {e}");
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
        Err(e) => {
            err!("minicoder: {e}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let details = Details::read(&run);
    let checks = if flags.verify {
        Some(super::show_verify::verify(&run, &state))
    } else {
        None
    };
    if flags.json {
        let value = serde_json::json!({
            "run": RunRow::of(&run, &state),
            "manifest": run.manifest,
            "report": run.report,
            "plan": details.plan,
            "checks": details.checks,
            "baseline_checks": details.baseline,
            "patch_stat": details.stat,
            "turns": details.turns.0,
            "patch": flags.diff.then_some(&details.patch),
            "subset": super::show_subset::subset_json(&run, &state),
            "verify": checks.as_ref().map(|c| c.iter().map(|c| serde_json::json!({
                "what": c.what, "ok": c.ok, "detail": c.detail,
            })).collect::<Vec<_>>()),
        });
        crate::headless::print_result(&value);
    } else {
        print_run(&run, &state, &details);
        if flags.diff {
            out!();
            match &details.patch {
                Some(patch) if !patch.is_empty() => print_patch(patch),
                _ => out!("(no patch)"),
            }
        }
        if flags.events {
            out!();
            print_events(&run.dir.join(EVENTS_FILE));
        }
        if let Some(checks) = &checks {
            out!();
            for c in checks {
                let mark = if c.ok { "[ OK ]" } else { "[FAIL]" };
                out!("{mark} {}: {}", c.what, c.detail);
            }
        }
    }
    let failed = checks.is_some_and(|c| c.iter().any(|c| !c.ok));
    Ok(if failed {
        if flags.json {
            err!("minicoder: the run {} does not verify", run.id);
        }
        ExitCode::from(EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}

/// What `show` reads beyond the manifest and report.
struct Details {
    plan: Vec<PlanItem>,
    /// The latest verification matrix: the report's, else the events'.
    checks: Vec<CheckReport>,
    /// The baseline's matrix (its last attempt), from the events.
    baseline: Vec<CheckReport>,
    patch: Option<String>,
    stat: Vec<FileStat>,
    /// Each reply's tokens (the latest), and how many earlier were left out.
    turns: (Vec<runs::TurnUsage>, usize),
}

impl Details {
    fn read(run: &RunRecord) -> Self {
        let plan = std::fs::read_to_string(run.dir.join(STATE_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v.get("plan").cloned())
            .and_then(|p| serde_json::from_value::<Vec<PlanItem>>(p).ok())
            .unwrap_or_default();
        let (latest, baseline) = verifications(&run.dir.join(EVENTS_FILE));
        let checks = match &run.report {
            Some(report) => report.verification.checks.clone(),
            None => latest,
        };
        let patch = std::fs::read(run.dir.join(FINAL_PATCH_FILE))
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        let stat = patch.as_deref().map(patch_stat).unwrap_or_default();
        Self {
            plan,
            checks,
            baseline,
            patch,
            stat,
            turns: runs::turn_usage(&run.dir.join(EVENTS_FILE)),
        }
    }
}

/// One `show` line per reply: its model, tokens and cost.
fn print_turns((turns, earlier): &(Vec<runs::TurnUsage>, usize)) {
    if turns.is_empty() {
        return;
    }
    out!();
    out!("tokens by turn:");
    if *earlier > 0 {
        out!("  … {earlier} earlier replies");
    }
    for t in turns {
        let totals = crate::protocol::TokenTotals {
            input: t.usage.input,
            output: t.usage.output,
            cached: t.usage.cached,
            cost_micros: t.cost_micros,
            estimated: t.usage.estimated,
        };
        out!(
            "  turn {:<3} {}:{}  {}",
            t.turn,
            t.model.provider,
            t.model.model,
            totals.describe()
        );
    }
}

/// One `show` line per check, with why it failed.
fn print_checks(checks: &[CheckReport]) {
    for c in checks {
        out!(
            "  {:<6} {}  exit {}  {}  `{}`{}",
            if c.passed { "pass" } else { "FAIL" },
            c.name,
            c.exit_code.map_or("-".into(), |e| e.to_string()),
            duration(c.duration_ms),
            c.command,
            [c.first_error.as_ref(), c.failure.as_ref()]
                .into_iter()
                .flatten()
                .filter(|_| !c.passed)
                .map(|w| format!(": {w}"))
                .collect::<String>()
        );
        if let Some(file) = c.output_file.as_ref().filter(|_| !c.passed) {
            out!("         output: {file}");
        }
    }
}

/// Lines added and removed in one file of a patch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct FileStat {
    path: String,
    added: u32,
    removed: u32,
    binary: bool,
}

/// Per-file counts of a unified Git diff.
fn patch_stat(patch: &str) -> Vec<FileStat> {
    let mut files: Vec<FileStat> = Vec::new();
    let mut in_hunk = false;
    for line in patch.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            let path = rest.rsplit_once(" b/").map_or(rest, |(_, b)| b).to_string();
            files.push(FileStat {
                path,
                added: 0,
                removed: 0,
                binary: false,
            });
            in_hunk = false;
            continue;
        }
        let Some(file) = files.last_mut() else {
            continue;
        };
        if line.starts_with("@@") {
            in_hunk = true;
        } else if line.starts_with("Binary files ") || line.starts_with("GIT binary patch") {
            file.binary = true;
        } else if in_hunk && line.starts_with('+') {
            file.added += 1;
        } else if in_hunk && line.starts_with('-') {
            file.removed += 1;
        }
    }
    files
}

fn print_run(run: &RunRecord, state: &StateDir, details: &Details) {
    let status = run.status(state);
    let m = &run.manifest;
    out!("run {}", run.id);
    out!("  repository: {}", m.repo);
    out!("  started:    {}", m.created);
    match &run.report {
        Some(r) => {
            out!("  outcome:    {} — {}", status.as_str(), r.reason);
            out!(
                "  model:      {}:{}; {} turns, {} tool calls; {}",
                r.model.provider,
                r.model.model,
                r.turns,
                r.tool_calls,
                duration(r.duration_ms)
            );
            out!("  tokens:     {}", r.tokens.describe());
            match &r.source.head {
                Some(head) => out!("  source:     HEAD {head}"),
                None => out!("  source:     HEAD not recorded"),
            }
            if let Some(notice) = r.source.dirty_notice() {
                out!("              {notice}");
            }
        }
        None if status == RunStatus::Running => {
            out!("  outcome:    running (no report yet)");
        }
        None => out!(
            "  outcome:    interrupted — the run ended without a report; `minicoder resume {}` continues it",
            run.id
        ),
    }
    out!("  applied:    {}", if run.applied() { "yes" } else { "no" });
    out!("  artifacts:  {}", run.dir.display());
    out!();
    out!("task:");
    for line in m.task.lines() {
        out!("  {line}");
    }
    out!();
    out!("plan:");
    if details.plan.is_empty() {
        out!("  (none)");
    }
    for item in &details.plan {
        let mark = match item.status {
            PlanStatus::Done => "[x]",
            PlanStatus::InProgress => "[~]",
            PlanStatus::Pending => "[ ]",
        };
        out!("  {mark} {}", item.content);
    }
    if let Some(summary) = run.report.as_ref().and_then(|r| r.summary.as_deref()) {
        out!();
        out!("summary:");
        for line in summary.lines() {
            out!("  {line}");
        }
    }
    out!();
    out!("verification (baseline, before any change):");
    if details.baseline.is_empty() {
        out!("  (no check ran)");
    }
    print_checks(&details.baseline);
    out!("verification (completion):");
    if details.checks.is_empty() {
        let why = run
            .report
            .as_ref()
            .map(|r| format!(": the run ended first ({})", r.reason))
            .unwrap_or_default();
        out!("  (no check ran{why})");
    }
    print_checks(&details.checks);
    print_turns(&details.turns);
    out!();
    let (added, removed) = details
        .stat
        .iter()
        .fold((0, 0), |(a, r), f| (a + f.added, r + f.removed));
    out!(
        "patch: {} {}, +{added} -{removed} ({})",
        details.stat.len(),
        if details.stat.len() == 1 {
            "file"
        } else {
            "files"
        },
        run.dir.join(FINAL_PATCH_FILE).display()
    );
    for f in &details.stat {
        if f.binary {
            out!("  {} (binary)", f.path);
        } else {
            out!("  {}  +{} -{}", f.path, f.added, f.removed);
        }
    }
    super::show_subset::print_subset(run, state);
    if let Some(r) = &run.report {
        out!();
        out!("next: {}", crate::headless::next_step(&run.id, r.outcome));
    }
}

/// The patch line by line, each escaped, tabs kept (indentation in
/// Makefiles and Go code is tabs; a tab moves the cursor, nothing more).
fn print_patch(patch: &str) {
    for line in patch.lines() {
        super::out_keeping_tabs(line);
    }
}

fn print_events(path: &Path) {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            for line in text.lines() {
                // Each line is JSON: escaped as JSON, so it stays JSON.
                super::out_json_line(line);
            }
        }
        Err(e) => err!("minicoder: cannot read {}: {e}", path.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(task: &str) -> RunRow {
        RunRow {
            id: "20261201-120000-abcdef".into(),
            created: "2026-12-01T12:00:00Z".into(),
            repo: "/src/pagination".into(),
            task: task.into(),
            outcome: "success",
            reason: Some("verified".into()),
            verified: Some(true),
            applied: false,
            changed_files: vec!["a.py".into()],
            changed_total: None,
            duration_ms: Some(48_200),
            tokens: Some(crate::protocol::TokenTotals {
                input: 12_000,
                output: 345,
                cached: 8_000,
                cost_micros: Some(21_000),
                estimated: false,
            }),
            artifact_dir: "/s/r".into(),
        }
    }

    #[test]
    fn the_task_is_cut_to_fit_and_escaped() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-01T15:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let long = format!("fix \u{1b}[2J the bug {}", "x".repeat(200));
        let lines = table(&[row(&long)], now, 120);
        assert!(lines.iter().all(|l| l.chars().count() <= 120), "{lines:?}");
        assert!(lines[1].contains("fix \\x1b[2J the bug"), "{}", lines[1]);
        assert!(lines[1].contains('…'));
        assert!(lines[1].contains(" 3h "), "{}", lines[1]);
        assert!(lines[1].contains("48.2s"));
        assert!(
            lines[1].ends_with("12.3k $0.02"),
            "tokens and cost: {}",
            lines[1]
        );
        assert!(!lines[1].contains('\u{1b}'));
    }

    #[test]
    fn patch_stat_counts_each_file() {
        let patch = "diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n-old\n+new\n+more\n ctx\ndiff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n";
        let stat = patch_stat(patch);
        assert_eq!(stat.len(), 2);
        assert_eq!((stat[0].added, stat[0].removed), (2, 1));
        assert_eq!(stat[0].path, "a.py");
        assert!(stat[1].binary);
    }

    #[test]
    fn durations_and_ages_read_at_a_glance() {
        assert_eq!(duration(812), "812ms");
        assert_eq!(duration(185_000), "3m 05s");
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-08T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(age("2026-12-01T12:00:00Z", now), "7d");
        assert_eq!(age("garbage", now), "?");
    }
}
