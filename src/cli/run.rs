//! `minicoder run REPO TASK --non-interactive`.

use std::collections::HashMap;
use std::process::ExitCode;

use tokio::sync::mpsc::UnboundedSender;

use super::RunArgs;
use super::options::{exit_code, options};
use crate::headless::{self, StdoutMode};
use crate::model::{ActionSource, ModelChain};
use crate::protocol::{Command, RunReport};
use crate::runtime::{self, RunChannels, RunOptions};

/// Sends the run a cancel on Ctrl-C or SIGTERM.
pub(crate) fn cancel_on_signals(commands: UnboundedSender<Command>) {
    tokio::spawn(async move {
        super::shutdown_signal().await;
        err!(
            "minicoder: cancelling: stopping work, exporting the partial patch, removing containers"
        );
        let _ = commands.send(Command::Cancel);
    });
}

pub async fn run(mut args: RunArgs) -> anyhow::Result<ExitCode> {
    let from_file = args
        .task_file
        .take()
        .map(|file| super::options::task_from_file(&args.task, &file));
    if !args.non_interactive {
        if let Some(task) = from_file {
            args.task = task?;
        }
        return super::session::run_task(args).await;
    }
    let mode = if args.events {
        StdoutMode::Events
    } else {
        StdoutMode::Result
    };
    let usage = |args: &RunArgs, e: &str| {
        failure_object(
            &args.repo.display().to_string(),
            &args.task,
            e,
            mode,
            super::EXIT_USAGE,
        )
    };
    // The path, the task and the flags first: a usage error is reported
    // before any provider or Docker is asked.
    match from_file {
        Some(Ok(task)) => args.task = task,
        Some(Err(e)) => return Ok(usage(&args, &format!("{e:#}"))),
        None => {}
    }
    match super::options::validate(&args, true) {
        Ok(repo) => args.repo = repo,
        Err(e) => return Ok(usage(&args, &e)),
    }
    let env: HashMap<String, String> = std::env::vars().collect();
    let opts = match options(&args, &env) {
        Ok(o) => o,
        Err(e) => return Ok(usage(&args, &e)),
    };
    // Each edit waits for an answer: without a session only the person's
    // PermissionRequest hooks can give one.
    if opts.approval == crate::protocol::ApprovalMode::Each
        && opts
            .hooks
            .is_empty_for(crate::hooks::HookEvent::PermissionRequest)
    {
        return Ok(usage(
            &args,
            "--approval each needs the interactive session (or PermissionRequest hooks to answer it); use final or never with --non-interactive",
        ));
    }
    let source: Box<dyn ActionSource> = if let Some(script) = &args.script {
        match super::options::scripted_source(script) {
            Ok(source) => Box::new(source),
            Err(e) => return Ok(usage(&args, &e)),
        }
    } else {
        let selection =
            match super::options::model_selection(args.model.as_deref(), args.benchmark, &env) {
                Ok(selection) => selection,
                Err(e) => return Ok(usage(&args, &e)),
            };
        match ModelChain::from_env(&crate::model::Env::from_pairs(env.clone()), &selection) {
            Ok(chain) => Box::new(chain),
            Err(e) => return Ok(setup_failure(&args, &e.to_string(), mode)),
        }
    };
    let repo = args.repo.display().to_string();
    let (code, report) = run_with(
        Begin::Fresh(Box::new(opts)),
        source,
        mode,
        &repo,
        &args.task,
    )
    .await;
    if let Some(report) = report
        && mode == StdoutMode::Result
    {
        headless::print_result(&report);
    }
    Ok(code)
}

/// A new run, or one that goes on.
pub(crate) enum Begin {
    Fresh(Box<RunOptions>),
    Resume(Box<runtime::ResumeRequest>),
}

impl Begin {
    fn repo(&self) -> std::path::PathBuf {
        match self {
            Begin::Fresh(opts) => opts.repo.clone(),
            Begin::Resume(req) => req.run.manifest.repo.clone().into(),
        }
    }

    /// The trust given for this run on the command line.
    fn trust(&self) -> Option<crate::verify::Trust> {
        let grant = match self {
            Begin::Fresh(opts) => opts.trust.as_ref(),
            Begin::Resume(req) => req.trust.as_ref(),
        };
        grant.map(|g| crate::verify::Trust { network: g.network })
    }
}

/// Runs with a ready action source, progress on stderr (and events on
/// stdout in `Events` mode); returns the exit code and, for a run that
/// started, its report. A run that could not start prints its failure object.
pub(crate) async fn run_with(
    begin: Begin,
    source: Box<dyn ActionSource>,
    mode: StdoutMode,
    repo: &str,
    task: &str,
) -> (ExitCode, Option<RunReport>) {
    // Before Docker is asked for anything (the run checks again itself).
    if let Err(e) = source.preflight().await {
        return (
            failure_object(repo, task, &e, mode, super::EXIT_FAILURE),
            None,
        );
    }
    if let Err(e) = super::sandbox::ready_for_run(&begin.repo(), begin.trust()).await {
        return (
            failure_object(repo, task, &format!("{e:#}"), mode, super::EXIT_FAILURE),
            None,
        );
    }
    let (channels, commands, events) = RunChannels::pair();
    let consumer = tokio::spawn(headless::consume(events, mode, true));
    cancel_on_signals(commands);
    let result = match begin {
        Begin::Fresh(opts) => runtime::run(*opts, source, channels).await,
        Begin::Resume(req) => runtime::resume(*req, source, channels).await,
    };
    let _ = consumer.await;
    match result {
        Ok(report) => (ExitCode::from(exit_code(report.outcome)), Some(report)),
        Err(e) => (
            failure_object(repo, task, &e.to_string(), mode, super::EXIT_FAILURE),
            None,
        ),
    }
}

fn setup_failure(args: &RunArgs, reason: &str, mode: StdoutMode) -> ExitCode {
    failure_object(
        &args.repo.display().to_string(),
        &args.task,
        reason,
        mode,
        super::EXIT_FAILURE,
    )
}

/// A run that could not start still answers with one JSON object.
fn failure_object(repo: &str, task: &str, reason: &str, mode: StdoutMode, code: u8) -> ExitCode {
    err!("minicoder: {reason}");
    if mode == StdoutMode::Result {
        headless::print_result(&serde_json::json!({
            "run_id": null,
            "outcome": "failure",
            "reason": reason,
            "exit_code": code,
            "repo": repo,
            "task": task,
        }));
    }
    ExitCode::from(code)
}
