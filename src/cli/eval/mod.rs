//! `minicoder eval`: the conformance suite. Each case of
//! `assets/eval/cases/` (built into the binary) runs the real `minicoder`
//! on a fresh copy of its fixture — the real sandbox and verifier — with
//! the case's scripted replies standing in for a model, then the commands
//! that follow (resume, apply, undo …), and is judged against what it
//! expects. With `--model`, the cases about a model's work run with that
//! model instead of their scripts (the cases about minicoder's own
//! behaviour are skipped): that measures the model, which the scripted
//! suite does not.
//!
//! | file       | what it holds                                              |
//! |------------|------------------------------------------------------------|
//! | `case.rs`  | a case: its fixture, script, expectations; script expansion |
//! | `judge.rs` | the verdict from a run's report and events                  |
//! | `mod.rs`   | running the cases, the JSON and Markdown report             |

mod case;
mod judge;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use clap::Args;
use serde::Serialize;
use serde_json::Value;

use case::{Case, Mode, SourceState, Then};
use judge::{Observed, judge};

use crate::protocol::TokenTotals;

static ASSETS: include_dir::Dir<'static> =
    include_dir::include_dir!("$CARGO_MANIFEST_DIR/assets/eval");

const MODEL_QUALITY_NOT_MEASURED: &str = "not measured: scripted replies stand in for a model, so this run measures minicoder (sandbox, verifier, tools, delivery), not a model; `minicoder eval --model PROVIDER[:MODEL]` measures one";

/// `minicoder eval`.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Only the cases whose names contain one of these words
    pub only: Vec<String>,
    /// Run the cases about a model's work with this model (PROVIDER or
    /// PROVIDER:MODEL) instead of their scripts
    #[arg(long)]
    pub model: Option<String>,
    /// Cases at once
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub parallel: usize,
    /// Where eval.json and eval.md go (default: a new folder under the
    /// state directory's evals/)
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The JSON report on stdout instead of a line a case
    #[arg(long)]
    pub json: bool,
    /// List the cases and what each shows
    #[arg(long)]
    pub list: bool,
}

/// Every case of the suite, in name order.
fn cases() -> Result<Vec<Case>, String> {
    let dir = ASSETS
        .get_dir("cases")
        .ok_or("the suite has no cases folder")?;
    let mut cases = Vec::new();
    for file in dir.files() {
        let path = file.path();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let text = file
            .contents_utf8()
            .ok_or_else(|| format!("{stem}: not UTF-8"))?;
        cases.push(case::parse(stem, text)?);
    }
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(cases)
}

/// What one case came to.
#[derive(Debug, Clone, Default, Serialize)]
struct CaseResult {
    name: String,
    about: String,
    passed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<String>,
    misses: Vec<String>,
    outcome: String,
    verified: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    run_id: Option<String>,
    duration_ms: u64,
    tokens: TokenTotals,
    changed: Vec<String>,
    unrelated_changes: usize,
    expected_refusals: usize,
    refusals_seen: usize,
}

pub fn run(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let all = match cases() {
        Ok(c) => c,
        Err(e) => {
            err!("minicoder eval: {e}");
            return Ok(ExitCode::from(super::EXIT_FAILURE));
        }
    };
    let chosen: Vec<Case> = all
        .into_iter()
        .filter(|c| args.only.is_empty() || args.only.iter().any(|w| c.name.contains(w.as_str())))
        .collect();
    if args.list {
        for c in &chosen {
            out!("{:<28} {}", c.name, c.about);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if chosen.is_empty() {
        err!("minicoder eval: no case matches {}", args.only.join(", "));
        return Ok(ExitCode::from(super::EXIT_USAGE));
    }
    if let Some(m) = &args.model {
        super::options::check_model_flag(Some(m)).map_err(anyhow::Error::msg)?;
    }
    let state = crate::state::StateDir::from_env()?;
    let out = match &args.out {
        Some(dir) => dir.clone(),
        None => state
            .root()
            .join("evals")
            .join(crate::runtime::new_run_id()),
    };
    crate::state::private_dir(&out)?;
    let work = tempfile::Builder::new()
        .prefix("minicoder-eval-")
        .tempdir()?;
    // The cases' runs keep to a state directory of their own, removed with
    // the rest: they are not the person's runs.
    crate::state::private_dir(&work.path().join("state"))?;
    stop::listen();
    let started = Instant::now();
    let results = run_all(
        &chosen,
        args.model.as_deref(),
        work.path(),
        args.parallel,
        args.json,
    );
    let mut report = report(
        &results,
        args.model.as_deref(),
        started.elapsed().as_millis() as u64,
    );
    let stopped = stop::asked();
    report["stopped"] = stopped.into();
    let json = serde_json::to_string_pretty(&report)? + "\n";
    crate::state::write_private_file(&out.join("eval.json"), json.as_bytes())?;
    crate::state::write_private_file(&out.join("eval.md"), markdown(&report, &results).as_bytes())?;
    if args.json {
        super::out_json_line(&report.to_string());
    } else {
        out!(
            "minicoder eval: {}/{} passed ({} skipped), {} unrelated changes, {}/{} expected refusals seen, {:.1} s",
            report["passed"],
            report["ran"],
            report["skipped"],
            report["unrelated_changes"],
            report["expected_refusals"]["seen"],
            report["expected_refusals"]["expected"],
            started.elapsed().as_secs_f64()
        );
        out!(
            "model quality: {}",
            report["model_quality"].as_str().unwrap_or_default()
        );
        out!("report: {} and eval.md", out.join("eval.json").display());
    }
    if stopped {
        err!(
            "minicoder eval: stopped: {} of {} cases ended; the running ones cancelled",
            results.len(),
            chosen.len()
        );
        return Ok(ExitCode::from(super::EXIT_CANCELLED));
    }
    let all_passed = results.iter().all(|r| r.passed || r.skipped.is_some());
    Ok(ExitCode::from(if all_passed {
        0
    } else {
        super::EXIT_FAILURE
    }))
}

/// Stopping the suite when the person asks (SIGINT, SIGTERM): no case
/// or step starts after that, the runs under way are told to cancel (each
/// removes its containers), and the report of what ran is written; the work
/// folder goes as it always does.
mod stop {
    use std::collections::BTreeSet;
    use std::process::{Child, Command};
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};

    static ASKED: AtomicBool = AtomicBool::new(false);
    /// The children under way, by pid.
    static CHILDREN: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

    pub(super) fn asked() -> bool {
        ASKED.load(Ordering::SeqCst)
    }

    /// Waits for the signals on the runtime the suite was started from.
    pub(super) fn listen() {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        handle.spawn(async {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut interrupt), Ok(mut terminate)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            // The first asks the runs to cancel; a second kills them.
            for signal in [libc::SIGINT, libc::SIGKILL] {
                tokio::select! {
                    _ = interrupt.recv() => {}
                    _ = terminate.recv() => {}
                }
                ASKED.store(true, Ordering::SeqCst);
                let children = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
                for pid in children.iter() {
                    signal_child(*pid, signal);
                }
            }
        });
    }

    /// Starts `command` unless the suite is stopping; a child started as
    /// the signal came is told to cancel at once.
    pub(super) fn spawn(command: &mut Command) -> Result<Child, String> {
        if asked() {
            return Err("the suite was stopped".into());
        }
        let mut children = CHILDREN.lock().unwrap_or_else(|e| e.into_inner());
        let child = command
            .spawn()
            .map_err(|e| format!("starting minicoder: {e}"))?;
        children.insert(child.id());
        if asked() {
            signal_child(child.id(), libc::SIGINT);
        }
        Ok(child)
    }

    /// Its output read to the end, the child is forgotten and only then
    /// reaped: a pid is never signalled once it could be another process's.
    pub(super) fn wait(mut child: Child) -> std::io::Result<std::process::Output> {
        use std::io::Read as _;
        let pid = child.id();
        let mut stderr = child.stderr.take();
        let reading = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(err) = stderr.as_mut() {
                let _ = err.read_to_end(&mut bytes);
            }
            bytes
        });
        let mut stdout = Vec::new();
        if let Some(mut out) = child.stdout.take() {
            let _ = out.read_to_end(&mut stdout);
        }
        let stderr = reading.join().unwrap_or_default();
        CHILDREN
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pid);
        let status = child.wait()?;
        Ok(std::process::Output {
            status,
            stdout,
            stderr,
        })
    }

    fn signal_child(pid: u32, signal: i32) {
        if let Ok(pid) = i32::try_from(pid)
            && pid > 0
        {
            // SAFETY: kill(2) of a child this process started and has not
            // reaped (it leaves the set before its wait).
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }
}

/// Runs the cases, `parallel` at once, a line on stdout as each ends.
fn run_all(
    cases: &[Case],
    model: Option<&str>,
    work: &Path,
    parallel: usize,
    quiet: bool,
) -> Vec<CaseResult> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<CaseResult>>> = Mutex::new(vec![None; cases.len()]);
    std::thread::scope(|scope| {
        for _ in 0..parallel.clamp(1, 8) {
            scope.spawn(|| {
                loop {
                    if stop::asked() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(case) = cases.get(i) else { break };
                    let result = run_case(case, model, &work.join(&case.name));
                    if !quiet {
                        let mark = match (&result.skipped, result.passed) {
                            (Some(_), _) => "-",
                            (None, true) => "✓",
                            (None, false) => "✗",
                        };
                        out!(
                            "{mark} {:<28} {:>6.1} s  {}",
                            result.name,
                            result.duration_ms as f64 / 1000.0,
                            result
                                .skipped
                                .clone()
                                .unwrap_or_else(|| result.misses.join("; "))
                        );
                    }
                    if let Ok(mut r) = results.lock() {
                        r[i] = Some(result);
                    }
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect()
}

/// Writes the case's fixture as a one-commit repository in `repo`;
/// returns its text files (path -> text).
fn materialize(case: &Case, repo: &Path) -> Result<BTreeMap<String, String>, String> {
    let mut files = BTreeMap::new();
    if case.fixture == "demo" {
        for (path, text) in super::demo::fixture_files() {
            files.insert(path.to_string(), text.to_string());
        }
    } else {
        let dir = ASSETS
            .get_dir(format!("fixtures/{}", case.fixture))
            .ok_or_else(|| format!("no fixture {}", case.fixture))?;
        collect(dir, dir.path(), &mut files);
    }
    for (path, text) in &files {
        let file = repo.join(path);
        if let Some(parent) = file.parent() {
            crate::state::private_dir(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
    }
    for (link, target) in &case.setup.symlinks {
        std::os::unix::fs::symlink(target, repo.join(link)).map_err(|e| e.to_string())?;
    }
    super::demo::commit_everything(repo, "fixture").map_err(|e| e.to_string())?;
    Ok(files)
}

fn collect(dir: &include_dir::Dir<'_>, root: &Path, files: &mut BTreeMap<String, String>) {
    for f in dir.files() {
        if let (Ok(rel), Some(text)) = (f.path().strip_prefix(root), f.contents_utf8()) {
            files.insert(rel.to_string_lossy().into_owned(), text.to_string());
        }
    }
    for d in dir.dirs() {
        collect(d, root, files);
    }
}

/// A `minicoder` command's exit code and output (stdout, then stderr).
fn minicoder(args: &[String], log: &Path) -> Result<(i32, String, String), String> {
    // WORK/CASE/log.txt: the cases' state directory is WORK/state.
    let state = log
        .ancestors()
        .nth(2)
        .map(|work| work.join("state"))
        .ok_or("no state directory for the cases")?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut command = Command::new(exe);
    // The suite's engine is its cases' engine.
    if let Some(engine) = crate::sandbox::engines::selected() {
        command.arg("--engine").arg(&engine.name);
    }
    let child = stop::spawn(
        command
            .args(args)
            .env("MINICODER_STATE_DIR", state)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )?;
    let out = stop::wait(child).map_err(|e| format!("waiting for minicoder: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if let Ok(mut file) = super::batch::append_private(log) {
        use std::io::Write as _;
        let _ = write!(file, "$ minicoder {}\n{stderr}\n", args.join(" "));
    }
    Ok((out.status.code().unwrap_or(-1), stdout, stderr))
}

fn run_case(case: &Case, model: Option<&str>, work: &Path) -> CaseResult {
    let started = Instant::now();
    let mut result = CaseResult {
        name: case.name.clone(),
        about: case.about.clone(),
        ..CaseResult::default()
    };
    if model.is_some() && (case.expect.about_calls() || !case.then.is_empty()) {
        result.skipped = Some("about minicoder's own behaviour, not a model's".into());
        return result;
    }
    if let Err(e) = run_steps(case, model, work, &mut result) {
        result.misses.push(e);
    }
    result.passed = result.misses.is_empty();
    result.duration_ms = started.elapsed().as_millis() as u64;
    result
}

fn run_steps(
    case: &Case,
    model: Option<&str>,
    work: &Path,
    result: &mut CaseResult,
) -> Result<(), String> {
    let repo = work.join("repo");
    crate::state::private_dir(&repo).map_err(|e| e.to_string())?;
    let files = materialize(case, &repo)?;
    let script_path = work.join("script.json");
    let script = case::expand(case, files)?;
    std::fs::write(&script_path, script.to_string()).map_err(|e| e.to_string())?;
    let log = work.join("log.txt");
    let original = super::demo::tree_digest(&repo).map_err(|e| e.to_string())?;
    let args = case_args(case, model, &repo, &script_path);
    let (_, stdout, _) = minicoder(&args, &log)?;
    let printed: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
        format!(
            "the run printed no result object ({e}); see {}",
            log.display()
        )
    })?;
    let mut observed = Observed::default();
    let mut artifacts = None;
    match case.mode {
        Mode::Ask => {
            observed.answer = printed["answer"].as_str().map(str::to_string);
            observed.citations_found = printed["citations"]
                .as_array()
                .map_or(0, |c| c.iter().filter(|c| c["found"] == true).count());
            if let Ok(t) = serde_json::from_value(printed["tokens"].clone()) {
                result.tokens = t;
            }
        }
        Mode::Run if printed["artifact_dir"].is_null() => {
            let reason = printed["reason"].as_str().unwrap_or_default();
            result.outcome = printed["outcome"].as_str().unwrap_or_default().into();
            match &case.expect.start_refused {
                Some(text) if reason.contains(text.as_str()) => {}
                Some(text) => result
                    .misses
                    .push(format!("refused to start with {reason:?}, not {text:?}")),
                None => result
                    .misses
                    .push(format!("the run did not start: {reason}")),
            }
            if super::demo::tree_digest(&repo).map_err(|e| e.to_string())? != original {
                result.misses.push("the source repository changed".into());
            }
            return Ok(());
        }
        Mode::Run => {
            if case.expect.start_refused.is_some() {
                result
                    .misses
                    .push("the run started; it should have refused".into());
            }
            let dir = PathBuf::from(printed["artifact_dir"].as_str().unwrap_or_default());
            let report: Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join("report.json"))
                    .map_err(|e| format!("no report: {} ({e})", printed["reason"]))?,
            )
            .map_err(|e| e.to_string())?;
            observed.outcome = report["outcome"].as_str().unwrap_or_default().into();
            observed.verified =
                report["verification"]["passed"] == true && observed.outcome == "success";
            observed.changed =
                serde_json::from_value(report["changed_files"].clone()).unwrap_or_default();
            observed.read_events(
                &std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default(),
            );
            result.run_id = report["run_id"].as_str().map(str::to_string);
            result.tokens = serde_json::from_value(report["tokens"].clone()).unwrap_or_default();
            artifacts = Some(dir);
        }
    }
    result.outcome = observed.outcome.clone();
    result.verified = observed.verified;
    result.changed = observed.changed.clone();
    let expect = match model {
        Some(_) => case.expect.for_a_model(),
        None => case.expect.clone(),
    };
    let verdict = judge(&expect, &observed);
    result.misses.extend(verdict.misses);
    result.unrelated_changes = verdict.unrelated.len();
    result.expected_refusals = verdict.expected_refusals;
    result.refusals_seen = verdict.refusals_seen;
    if super::demo::tree_digest(&repo).map_err(|e| e.to_string())? != original {
        result
            .misses
            .push("the run changed its source repository".into());
    }
    for (i, step) in case.then.iter().enumerate() {
        then(
            step,
            &repo,
            artifacts.as_deref(),
            result,
            &script_path,
            &original,
            &log,
        )
        .map_err(|e| format!("step {} after the run: {e}", i + 1))?;
    }
    Ok(())
}

/// The command line of a case's run: the model, or the case's script.
fn case_args(case: &Case, model: Option<&str>, repo: &Path, script_path: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        match case.mode {
            Mode::Run => "run",
            Mode::Ask => "ask",
        }
        .into(),
        repo.display().to_string(),
        case.task.clone(),
        "--non-interactive".into(),
    ];
    match model {
        Some(m) => args.extend(["--model".into(), m.to_string()]),
        None => args.extend(["--script".into(), script_path.display().to_string()]),
    }
    if case.mode == Mode::Run {
        args.extend(case.args.iter().cloned());
    }
    args
}

/// One step after the run.
fn then(
    step: &Then,
    repo: &Path,
    artifacts: Option<&Path>,
    result: &CaseResult,
    script: &Path,
    original: &str,
    log: &Path,
) -> Result<(), String> {
    let digest = || super::demo::tree_digest(repo).map_err(|e| e.to_string());
    match step {
        Then::Write { write } => {
            for (path, edit) in write {
                replace_in(&repo.join(path), &edit.old, &edit.new)?;
            }
            Ok(())
        }
        Then::Tamper { tamper } => {
            let dir = artifacts.ok_or("no artifacts to tamper with")?;
            replace_in(&dir.join(&tamper.file), &tamper.old, &tamper.new)
        }
        Then::Run {
            run,
            exit,
            source,
            source_contains,
            output_contains,
            report,
        } => {
            let run_id = result.run_id.clone().unwrap_or_default();
            let args: Vec<String> = run
                .iter()
                .map(|a| {
                    a.replace("{run}", &run_id)
                        .replace("{script}", &script.display().to_string())
                })
                .collect();
            let before = digest()?;
            let (code, stdout, stderr) = minicoder(&args, log)?;
            let mut misses = Vec::new();
            if code != *exit {
                misses.push(format!("exit {code}, expected {exit}"));
            }
            if let Some(text) = output_contains
                && !stdout.contains(text.as_str())
                && !stderr.contains(text.as_str())
            {
                misses.push(format!("its output does not say {text:?}"));
            }
            let after = digest()?;
            match source {
                Some(SourceState::Unchanged) if after != before => {
                    misses.push("the source changed".into())
                }
                Some(SourceState::Changed) if after == before => {
                    misses.push("the source did not change".into())
                }
                Some(SourceState::Original) if after != original => {
                    misses.push("the source is not as it was".into());
                }
                _ => {}
            }
            for (path, text) in source_contains {
                let now = std::fs::read_to_string(repo.join(path)).unwrap_or_default();
                if !now.contains(text.as_str()) {
                    misses.push(format!("{path} does not hold {text:?}"));
                }
            }
            if let (Some(expect), Some(dir)) = (report, artifacts) {
                let r: Value = serde_json::from_str(
                    &std::fs::read_to_string(dir.join("report.json")).map_err(|e| e.to_string())?,
                )
                .map_err(|e| e.to_string())?;
                if let Some(o) = &expect.outcome
                    && r["outcome"] != o.as_str()
                {
                    misses.push(format!("then outcome {}, expected {o:?}", r["outcome"]));
                }
                if let Some(v) = expect.verified
                    && (r["verification"]["passed"] == true) != v
                {
                    misses.push(format!("then verified {}, expected {v}", !v));
                }
            }
            if misses.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "minicoder {}: {}",
                    args.join(" "),
                    misses.join("; ")
                ))
            }
        }
    }
}

fn replace_in(file: &Path, old: &str, new: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    if !text.contains(old) {
        return Err(format!("{} holds no {old:?}", file.display()));
    }
    std::fs::write(file, text.replacen(old, new, 1)).map_err(|e| format!("{}: {e}", file.display()))
}

fn report(results: &[CaseResult], model: Option<&str>, duration_ms: u64) -> Value {
    let ran: Vec<&CaseResult> = results.iter().filter(|r| r.skipped.is_none()).collect();
    let passed = ran.iter().filter(|r| r.passed).count();
    let mut tokens = TokenTotals::default();
    for r in &ran {
        tokens.input = tokens.input.saturating_add(r.tokens.input);
        tokens.output = tokens.output.saturating_add(r.tokens.output);
    }
    serde_json::json!({
        "suite": "minicoder conformance",
        "model": model.unwrap_or("scripted"),
        "model_quality": match model {
            None => MODEL_QUALITY_NOT_MEASURED.to_string(),
            Some(m) => format!("measured with {m}: the cases about a model's work ran with it, without their scripts"),
        },
        "cases": results.len(),
        "ran": ran.len(),
        "skipped": results.len() - ran.len(),
        "passed": passed,
        "pass_rate": if ran.is_empty() { 0.0 } else { passed as f64 / ran.len() as f64 },
        "unrelated_changes": ran.iter().map(|r| r.unrelated_changes).sum::<usize>(),
        "expected_refusals": {
            "expected": ran.iter().map(|r| r.expected_refusals).sum::<usize>(),
            "seen": ran.iter().map(|r| r.refusals_seen).sum::<usize>(),
        },
        "duration_ms": duration_ms,
        "tokens": {"input": tokens.input, "output": tokens.output},
        "results": results,
    })
}

fn markdown(report: &Value, results: &[CaseResult]) -> String {
    let mut md = String::from("# minicoder conformance\n\n");
    md.push_str(&format!(
        "- model: {}\n- model quality: {}\n- passed: {} of {} ({} skipped), pass rate {:.0} %\n- unrelated changes: {}\n- expected refusals seen: {} of {}\n- duration: {:.1} s; tokens: {} in, {} out\n\n",
        report["model"].as_str().unwrap_or_default(),
        report["model_quality"].as_str().unwrap_or_default(),
        report["passed"],
        report["ran"],
        report["skipped"],
        report["pass_rate"].as_f64().unwrap_or(0.0) * 100.0,
        report["unrelated_changes"],
        report["expected_refusals"]["seen"],
        report["expected_refusals"]["expected"],
        report["duration_ms"].as_u64().unwrap_or(0) as f64 / 1000.0,
        report["tokens"]["input"],
        report["tokens"]["output"],
    ));
    md.push_str("| case | verdict | outcome | refusals | unrelated | time | tokens |\n");
    md.push_str("|---|---|---|---|---|---|---|\n");
    for r in results {
        let verdict = match (&r.skipped, r.passed) {
            (Some(_), _) => "skipped",
            (None, true) => "pass",
            (None, false) => "FAIL",
        };
        md.push_str(&format!(
            "| {} | {verdict} | {} | {}/{} | {} | {:.1} s | {} |\n",
            r.name,
            if r.outcome.is_empty() {
                "-"
            } else {
                &r.outcome
            },
            r.refusals_seen,
            r.expected_refusals,
            r.unrelated_changes,
            r.duration_ms as f64 / 1000.0,
            r.tokens.input.saturating_add(r.tokens.output),
        ));
    }
    for r in results.iter().filter(|r| !r.misses.is_empty()) {
        md.push_str(&format!("\n## {}\n\n", r.name));
        for m in &r.misses {
            md.push_str(&format!("- {}\n", m.replace('\n', " ")));
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_suite_has_every_kind_of_case_and_each_expands() {
        let cases = cases().expect("cases");
        assert!(cases.len() >= 25, "{} cases", cases.len());
        for c in &cases {
            let files: BTreeMap<String, String> = if c.fixture == "demo" {
                super::super::demo::fixture_files()
                    .iter()
                    .map(|(p, t)| (p.to_string(), t.to_string()))
                    .collect()
            } else {
                let dir = ASSETS
                    .get_dir(format!("fixtures/{}", c.fixture))
                    .unwrap_or_else(|| panic!("{}: no fixture {}", c.name, c.fixture));
                let mut files = BTreeMap::new();
                collect(dir, dir.path(), &mut files);
                files
            };
            case::expand(c, files).unwrap_or_else(|e| panic!("{e}"));
        }
        for kind in [
            "single-file-fix",
            "multi-file-fix",
            "explain-only",
            "failed-fix-recovery",
            "premature-submission",
            "stale-verification",
            "failed-test-refusal",
            "zero-test-refusal",
            "checkpoint-resume",
            "authenticated-apply-undo",
            "sandbox-",
            "hostile-",
            "ecosystem-",
        ] {
            assert!(cases.iter().any(|c| c.name.starts_with(kind)), "{kind}");
        }
    }

    #[test]
    fn the_report_says_model_quality_is_not_measured_without_a_model() {
        let results = vec![
            CaseResult {
                name: "a".into(),
                passed: true,
                expected_refusals: 1,
                refusals_seen: 1,
                ..CaseResult::default()
            },
            CaseResult {
                name: "b".into(),
                passed: false,
                unrelated_changes: 2,
                misses: vec!["outcome".into()],
                ..CaseResult::default()
            },
            CaseResult {
                name: "c".into(),
                skipped: Some("about minicoder".into()),
                ..CaseResult::default()
            },
        ];
        let r = report(&results, None, 1000);
        assert_eq!(r["model_quality"], MODEL_QUALITY_NOT_MEASURED);
        assert_eq!(
            (
                r["ran"].as_u64(),
                r["passed"].as_u64(),
                r["skipped"].as_u64()
            ),
            (Some(2), Some(1), Some(1))
        );
        assert_eq!(r["pass_rate"], 0.5);
        assert_eq!(r["unrelated_changes"], 2);
        let md = markdown(&r, &results);
        assert!(md.contains("| b | FAIL |"), "{md}");
        assert!(md.contains("## b\n\n- outcome"), "{md}");
        let with = report(&results, Some("openai:gpt-5"), 1);
        assert!(
            with["model_quality"]
                .as_str()
                .expect("text")
                .starts_with("measured with openai:gpt-5")
        );
    }
}
