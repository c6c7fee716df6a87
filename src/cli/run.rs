//! `minicoder run REPO TASK --non-interactive`.

use std::collections::HashMap;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

use super::{Approval, Network, RunArgs};
use crate::agent::Outcome;
use crate::headless::{self, StdoutMode};
use crate::model::{ActionSource, ModelChain, ModelSelection};
use crate::runtime::{self, ApprovalMode, Limits, RunHooks, RunOptions};
use crate::trace::RunReport;

pub fn exit_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Success => 0,
        Outcome::Failure => super::EXIT_FAILURE,
        Outcome::Cancelled => super::EXIT_CANCELLED,
    }
}

/// Turns the flags and the environment into run options; `Err` is a usage error.
pub fn options(args: &RunArgs, env: &HashMap<String, String>) -> Result<RunOptions, String> {
    let mut limits = Limits::from_env(env)?;
    if let Some(n) = args.max_turns {
        limits.max_turns = n;
    }
    if let Some(s) = args.timeout {
        limits.timeout_ms = s.saturating_mul(1000);
    }
    if limits.max_turns == 0 || limits.timeout_ms == 0 {
        return Err("--max-turns and --timeout must be positive".into());
    }
    let mut opts = RunOptions::new(&args.repo, &args.task);
    opts.limits = limits;
    opts.network = args.network == Network::Enabled;
    opts.artifact_dir = args.artifact_dir.clone();
    opts.checks = args
        .check
        .chunks(2)
        .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
        .collect();
    opts.approval = match args.approval {
        Approval::Each => ApprovalMode::Each,
        Approval::Final => ApprovalMode::Final,
        Approval::Never => ApprovalMode::Never,
    };
    opts.allow_zero_tests = args.allow_zero_tests;
    opts.bootstrap_network = env
        .get("MINICODER_BOOTSTRAP_NETWORK")
        .is_none_or(|v| !matches!(v.as_str(), "false" | "0" | "no"));
    Ok(opts)
}

/// Cancels `token` on Ctrl-C or SIGTERM.
pub fn cancel_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        super::shutdown_signal().await;
        eprintln!(
            "minicoder: cancelling: stopping work, exporting the partial patch, removing containers"
        );
        token.cancel();
    });
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if !args.non_interactive {
        return super::session::run_task(args).await;
    }
    if args.approval == Approval::Each {
        eprintln!(
            "minicoder: --approval each needs the interactive session; use final or never with --non-interactive"
        );
        return Ok(ExitCode::from(super::EXIT_USAGE));
    }
    let env: HashMap<String, String> = std::env::vars().collect();
    let opts = match options(&args, &env) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("minicoder: {e}");
            return Ok(ExitCode::from(super::EXIT_USAGE));
        }
    };
    let mode = if args.events {
        StdoutMode::Events
    } else {
        StdoutMode::Result
    };
    let selection = ModelSelection {
        pinned: args.model.clone(),
        benchmark: args.benchmark,
    };
    let source: Box<dyn ActionSource> =
        match ModelChain::from_env(&crate::model::Env::from_pairs(env.clone()), &selection) {
            Ok(chain) => Box::new(chain),
            Err(e) => return Ok(setup_failure(&args, &e.to_string(), mode)),
        };
    let repo = args.repo.display().to_string();
    let (code, report) = run_with(opts, source, mode, &repo, &args.task).await;
    if let Some(report) = report
        && mode == StdoutMode::Result
    {
        headless::print_result(&report);
    }
    Ok(code)
}

/// Runs with a ready action source, progress on stderr (and events on
/// stdout in `Events` mode); returns the exit code and, for a run that
/// started, its report. A run that could not start prints its failure object.
pub async fn run_with(
    opts: RunOptions,
    source: Box<dyn ActionSource>,
    mode: StdoutMode,
    repo: &str,
    task: &str,
) -> (ExitCode, Option<RunReport>) {
    match super::sandbox::docker_with_project_image(&opts.repo).await {
        Ok((docker, _)) => super::sandbox::startup_gc(&docker).await,
        Err(e) => return (failure_object(repo, task, &format!("{e:#}"), mode), None),
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let consumer = tokio::spawn(headless::consume(rx, mode, true));
    let cancel = CancellationToken::new();
    cancel_on_signals(cancel.clone());
    let hooks = RunHooks {
        subscribers: vec![tx],
        approver: None,
        cancel,
        follow_ups: None,
    };
    let result = runtime::run(opts, source, hooks).await;
    let _ = consumer.await;
    match result {
        Ok(report) => (ExitCode::from(exit_code(report.outcome)), Some(report)),
        Err(e) => (failure_object(repo, task, &e.to_string(), mode), None),
    }
}

fn setup_failure(args: &RunArgs, reason: &str, mode: StdoutMode) -> ExitCode {
    failure_object(&args.repo.display().to_string(), &args.task, reason, mode)
}

/// A run that could not start still answers with one JSON object.
fn failure_object(repo: &str, task: &str, reason: &str, mode: StdoutMode) -> ExitCode {
    eprintln!("minicoder: {reason}");
    if mode == StdoutMode::Result {
        headless::print_result(&serde_json::json!({
            "run_id": null,
            "outcome": "failure",
            "reason": reason,
            "exit_code": super::EXIT_FAILURE,
            "repo": repo,
            "task": task,
        }));
    }
    ExitCode::from(super::EXIT_FAILURE)
}
