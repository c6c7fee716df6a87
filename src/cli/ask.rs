//! `minicoder ask [REPO] "QUESTION"`: an answer about the repository from a
//! read-only look at a private copy — no container, no edits. The answer on
//! stdout (one JSON object with `--non-interactive`), what was looked at on
//! stderr.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use super::{EXIT_FAILURE, EXIT_USAGE};
use crate::model::{ActionSource, ModelChain};
use crate::runtime::ask::{AskSession, AskUpdate};

#[derive(Debug, Clone, clap::Args)]
pub struct AskArgs {
    /// [REPO] QUESTION: the repository (default: the one around the
    /// current directory) and the question
    #[arg(num_args = 1..=2, required = true, value_names = ["REPO", "QUESTION"])]
    pub words: Vec<String>,
    /// Print one JSON object on stdout
    #[arg(long)]
    pub non_interactive: bool,
    /// Pin a provider or PROVIDER:MODEL (disables fallback)
    #[arg(long)]
    pub model: Option<String>,
    /// Take the model's replies from FILE (see `run --script`)
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub script: Option<PathBuf>,
}

fn failed(non_interactive: bool, code: u8, message: &str) -> ExitCode {
    if non_interactive {
        crate::headless::print_result(&serde_json::json!({
            "outcome": "failure",
            "reason": message,
            "exit_code": code,
        }));
    }
    err!("minicoder ask: {message}");
    ExitCode::from(code)
}

pub(crate) async fn run(args: AskArgs) -> ExitCode {
    let json = args.non_interactive;
    let (repo, question) = match args.words.as_slice() {
        [question] => (PathBuf::from("."), question.clone()),
        [repo, question] => (PathBuf::from(repo), question.clone()),
        _ => return failed(json, EXIT_USAGE, "say what to ask"),
    };
    if question.trim().is_empty() {
        return failed(json, EXIT_USAGE, "the question is empty");
    }
    let repo = match super::options::repository(&repo) {
        Ok(repo) => repo,
        Err(e) => return failed(json, EXIT_USAGE, &e),
    };
    if let Err(e) = super::options::check_model_flag(args.model.as_deref()) {
        return failed(json, EXIT_USAGE, &e);
    }
    let env: HashMap<String, String> = std::env::vars().collect();
    let source: Box<dyn ActionSource> = if let Some(script) = &args.script {
        match super::options::scripted_source(script) {
            Ok(source) => Box::new(source),
            Err(e) => return failed(json, EXIT_USAGE, &e),
        }
    } else {
        let selection = match super::options::model_selection(args.model.as_deref(), false, &env) {
            Ok(s) => s,
            Err(e) => return failed(json, EXIT_USAGE, &e),
        };
        match ModelChain::from_env(&crate::model::Env::from_pairs(env.clone()), &selection) {
            Ok(chain) => Box::new(chain),
            Err(e) => return failed(json, EXIT_FAILURE, &e.to_string()),
        }
    };
    let config = match super::options::ask_config(&env) {
        Ok(c) => c,
        Err(e) => return failed(json, EXIT_USAGE, &e),
    };
    err!(
        "minicoder ask: reading a private copy of {}",
        repo.display()
    );
    let mut session = match AskSession::open(&repo, source, config).await {
        Ok(s) => s,
        Err(e) => return failed(json, EXIT_FAILURE, &e),
    };
    let mut updates = |u: AskUpdate| err!("  {}", u.line());
    let asked = tokio::select! {
        asked = session.ask(&question, &mut updates) => asked,
        () = super::shutdown_signal() => Err("cancelled".to_string()),
    };
    session.close();
    let answer = match asked {
        Ok(answer) => answer,
        Err(e) => return failed(json, EXIT_FAILURE, &e),
    };
    if json {
        let mut value = serde_json::to_value(&answer).unwrap_or_default();
        value["outcome"] = "answered".into();
        value["repo"] = repo.display().to_string().into();
        value["question"] = question.into();
        crate::headless::print_result(&value);
    } else {
        for line in answer.answer.lines() {
            out!("{line}");
        }
        for c in answer.citations.iter().filter(|c| !c.found) {
            err!(
                "note: {}:{} is not a line of the repository",
                c.path,
                c.line
            );
        }
        err!(
            "tokens: {}; {} tool calls{}",
            answer.tokens.describe(),
            answer.tool_calls,
            if answer.refused_calls > 0 {
                format!(", {} refused (read-only)", answer.refused_calls)
            } else {
                String::new()
            }
        );
    }
    ExitCode::SUCCESS
}
