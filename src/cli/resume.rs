//! `minicoder resume RUN ["FOLLOW-UP"]`: the run's own task, checks, limits
//! and model, with `run`'s front ends (the session, or one JSON object with
//! `--non-interactive`, `--events` for JSON lines).

use std::collections::HashMap;
use std::process::ExitCode;

use super::run::{Begin, run_with};
use super::{Approval, EXIT_FAILURE, EXIT_USAGE, Network, ResumeArgs, RunArgs};
use crate::headless::{self, StdoutMode};
use crate::model::{ActionSource, Env, ModelChain, ModelSelection};
use crate::runtime::ResumeRequest;
use crate::state::StateDir;

fn usage(message: &str) -> anyhow::Result<ExitCode> {
    err!("minicoder: {message}");
    Ok(ExitCode::from(EXIT_USAGE))
}

pub(crate) async fn run(args: ResumeArgs) -> anyhow::Result<ExitCode> {
    if args.events && !args.non_interactive {
        return usage(
            "--events streams JSON lines on stdout instead of the full-screen session: add --non-interactive",
        );
    }
    if args.theme.is_some() && args.non_interactive {
        return usage(
            "--theme styles the full-screen session, which --non-interactive does not open: drop one of them",
        );
    }
    if args.non_interactive && args.approval == Some(Approval::Each) {
        return usage(
            "--approval each needs the interactive session; use final or never with --non-interactive",
        );
    }
    if let Err(e) = super::options::check_model_flag(args.model.as_deref()) {
        return usage(&e);
    }
    let max_cost_micros = match args.max_cost.as_deref().map(crate::runtime::parse_usd) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(e)) => return usage(&format!("--max-cost: {e}")),
    };
    if args.max_tokens == Some(0) {
        return usage("--max-tokens must be positive");
    }
    let state = StateDir::from_env()?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let run = match crate::runs::resolve(&state, &args.run, &cwd) {
        Ok(run) => run,
        Err(e) => return usage(&e.to_string()),
    };
    // The run's own model unless another is pinned.
    let pinned = args.model.clone().or_else(|| {
        run.manifest
            .model_chain
            .first()
            .map(|m| format!("{}:{}", m.provider, m.model))
    });
    let env: HashMap<String, String> = std::env::vars().collect();
    let selection = ModelSelection {
        pinned,
        benchmark: false,
    };
    let task = args
        .follow_up
        .clone()
        .unwrap_or_else(|| run.manifest.task.clone());
    let repo = run.manifest.repo.clone();
    let req = ResumeRequest {
        run,
        follow_up: args.follow_up.clone(),
        new_checks: args.new_checks,
        approval: args.approval.map(super::options::approval_mode),
        trust: super::options::trust_grant(args.trust_project),
        max_tokens: args.max_tokens,
        max_cost_micros,
    };
    if !args.non_interactive {
        let template = RunArgs {
            repo: repo.clone().into(),
            task: task.clone(),
            task_file: None,
            non_interactive: false,
            model: selection.pinned.clone(),
            benchmark: false,
            max_turns: None,
            max_tokens: None,
            max_cost: None,
            timeout: None,
            network: Network::None,
            artifact_dir: None,
            check: Vec::new(),
            approval: args.approval,
            theme: args.theme.clone(),
            events: false,
            allow_zero_tests: false,
            trust_project: args.trust_project,
            allow_config_edits: false,
            script: None,
        };
        return super::session::resume_task(template, task, req).await;
    }
    let mode = if args.events {
        StdoutMode::Events
    } else {
        StdoutMode::Result
    };
    let chain = match &args.script {
        Some(script) => super::options::scripted_source(script)
            .map(|s| Box::new(s) as Box<dyn ActionSource>)
            .map_err(|e| e.to_string()),
        None => ModelChain::from_env(&Env::from_pairs(env), &selection)
            .map(|c| Box::new(c) as Box<dyn ActionSource>)
            .map_err(|e| e.to_string()),
    };
    let source = match chain {
        Ok(source) => source,
        Err(e) => {
            err!("minicoder: {e}");
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
    };
    let (code, report) = run_with(Begin::Resume(Box::new(req)), source, mode, &repo, &task).await;
    if let Some(report) = report
        && mode == StdoutMode::Result
    {
        headless::print_result(&report);
    }
    Ok(code)
}
