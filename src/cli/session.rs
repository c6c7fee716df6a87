//! The interactive session: `minicoder` in a repository, or `minicoder run`
//! without `--non-interactive`.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use futures_util::future::BoxFuture;

use super::{Network, RunArgs, SessionArgs};
use crate::model::{Env, ModelChain, ModelSelection};
use crate::protocol::Outcome;
use crate::protocol::RunReport;
use crate::runtime::{self, RunChannels};
use crate::tui::app::App;
use crate::tui::delivery::RunStore;
use crate::tui::keymap::Keymap;
use crate::tui::session::{Launcher, Session};
use crate::tui::terminal::TerminalGuard;
use crate::tui::theme::{DEFAULT_THEME, Theme};

/// `minicoder` with no command: the repository around the current directory.
pub(crate) async fn run_here(args: SessionArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let repo = match git2::Repository::discover(&cwd) {
        Ok(repo) => match repo.workdir() {
            Some(dir) => dir.to_path_buf(),
            None => {
                return usage(
                    "the current directory is a bare Git repository; run minicoder in a work tree",
                );
            }
        },
        Err(_) => {
            return usage(&format!(
                "{} is not in a Git repository; cd into one, or use `minicoder run REPO \"TASK\"`",
                cwd.display()
            ));
        }
    };
    let template = RunArgs {
        repo,
        task: String::new(),
        task_file: None,
        non_interactive: false,
        model: args.model,
        benchmark: false,
        max_turns: args.max_turns,
        max_tokens: args.max_tokens,
        max_cost: args.max_cost,
        timeout: args.timeout,
        network: Network::None,
        artifact_dir: None,
        check: Vec::new(),
        approval: args.approval,
        theme: args.theme,
        events: false,
        allow_zero_tests: false,
        trust_project: args.trust_project,
        allow_config_edits: false,
        script: None,
    };
    interactive(template, None, None).await
}

/// `minicoder run REPO TASK` without `--non-interactive`.
pub(crate) async fn run_task(mut args: RunArgs) -> anyhow::Result<ExitCode> {
    match super::options::validate(&args, false) {
        Ok(repo) => args.repo = repo,
        Err(e) => return usage(&e),
    }
    let task = args.task.clone();
    interactive(args, Some(task), None).await
}

/// `minicoder resume RUN` in the session: the first run it starts is the
/// resumed one (with `task` shown as its task).
pub(crate) async fn resume_task(
    args: RunArgs,
    task: String,
    resume: runtime::ResumeRequest,
) -> anyhow::Result<ExitCode> {
    interactive(args, Some(task), Some(resume)).await
}

fn usage(message: &str) -> anyhow::Result<ExitCode> {
    err!("minicoder: {message}");
    Ok(ExitCode::from(super::EXIT_USAGE))
}

/// The theme: `--theme`, else `theme = "..."` in `config.toml`, else the default.
fn load_theme(flag: Option<&str>, config: Option<&Path>) -> Result<Theme, String> {
    let configured = crate::state::config_value(config, "theme")?;
    let name = flag
        .map(String::from)
        .or(configured)
        .unwrap_or_else(|| DEFAULT_THEME.to_string());
    let themes = config.map(|dir| dir.join("themes"));
    Theme::load(&name, themes.as_deref()).map_err(|e| e.to_string())
}

fn load_keymap(config: Option<&Path>) -> Result<Keymap, String> {
    let file = config
        .map(|dir| dir.join("keymap.toml"))
        .filter(|path| path.exists());
    Keymap::load(file.as_deref()).map_err(|e| e.to_string())
}

async fn interactive(
    template: RunArgs,
    task: Option<String>,
    resume: Option<runtime::ResumeRequest>,
) -> anyhow::Result<ExitCode> {
    if let Err(e) = super::options::check_model_flag(template.model.as_deref()) {
        return usage(&e);
    }
    let env: HashMap<String, String> = std::env::vars().collect();
    let config = crate::state::config_dir(&env);
    let theme = match load_theme(template.theme.as_deref(), config.as_deref()) {
        Ok(theme) => theme,
        Err(e) => return usage(&e),
    };
    let keymap = match load_keymap(config.as_deref()) {
        Ok(keymap) => keymap,
        Err(e) => return usage(&e),
    };
    if let Err(e) = super::options::options(&template, &env) {
        return usage(&e);
    }
    let has_work_tree =
        git2::Repository::open(&template.repo).is_ok_and(|repo| repo.workdir().is_some());
    if !has_work_tree {
        return usage(&format!(
            "{} is not a Git repository with a working tree; run minicoder on one (git init creates one)",
            template.repo.display()
        ));
    }
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        return usage(
            "the full-screen session needs a terminal; add --non-interactive for JSON output",
        );
    }
    let selection = match super::options::model_selection(
        template.model.as_deref(),
        template.benchmark,
        &env,
    ) {
        Ok(selection) => selection,
        Err(e) => return usage(&e),
    };
    if let Err(e) = ModelChain::from_env(&Env::from_pairs(env.clone()), &selection) {
        err!("minicoder: {e}");
        return Ok(ExitCode::from(super::EXIT_FAILURE));
    }
    // Trust in the repository's own configuration is asked for, the image
    // built (with progress) and leftovers collected before the screen is taken.
    match super::trust::ask_before_session(&template.repo, template.trust_project.is_some()) {
        Ok(true) => {}
        Ok(false) => return Ok(ExitCode::SUCCESS),
        Err(e) => {
            err!("minicoder: {e}");
            return Ok(ExitCode::from(super::EXIT_FAILURE));
        }
    }
    let granted = super::options::trust_grant(template.trust_project)
        .map(|g| crate::verify::Trust { network: g.network });
    super::sandbox::ready_for_run(&template.repo, granted).await?;

    let approval = match super::options::approval_choice(template.approval, &env) {
        Ok(a) => super::options::approval_mode(a),
        Err(e) => {
            err!("minicoder: {e}");
            return Ok(ExitCode::from(super::EXIT_USAGE));
        }
    };
    let repo = template.repo.display().to_string();
    let interrupted = (task.is_none() && resume.is_none())
        .then(|| runtime::interrupted_run(&template.repo))
        .flatten();
    let launcher = Arc::new(CliLauncher {
        template,
        env,
        selection,
        resume: std::sync::Mutex::new(resume),
        ask: Arc::new(tokio::sync::Mutex::new(None)),
    });
    let mut app = App::new(&repo, keymap, theme, approval);
    if let Some(task) = task {
        app.start(&task);
    } else if let Some((run_id, task)) = interrupted {
        app.offer_resume(&run_id, &task);
    }
    let mut session = Session::new(Some(launcher));
    // Applies, undos and the runs browser read the state directory; without
    // one the session still runs, and says so when they are asked for.
    if let Ok(state) = crate::state::StateDir::from_env() {
        session = session.with_store(RunStore {
            state,
            repo: PathBuf::from(&repo),
        });
    }
    let signals = session.sender();
    tokio::spawn(async move {
        super::shutdown_signal().await;
        let _ = signals.send(crate::tui::app::AppEvent::Terminate);
    });
    let mut guard = TerminalGuard::enter().context("entering the full-screen terminal")?;
    let input = crossterm::event::EventStream::new();
    let result = session.run(&mut guard.terminal, &mut app, input).await;
    drop(guard);
    result.context("drawing the session")?;
    Ok(summary(&app))
}

/// What is left on the normal screen after the session: the run's result and where it is.
fn summary(app: &App) -> ExitCode {
    let Some(report) = app.report() else {
        // A run applied from the runs browser, with no run of this session.
        if let Some(run) = app.applied_run() {
            out!("applied: run {} is in the source, uncommitted", run.id);
            out!("next: `minicoder undo {}` reverts it", run.id);
        }
        if let crate::tui::run_view::Phase::Failed(reason) = &app.view.phase {
            err!("minicoder: the run could not start: {reason}");
            return ExitCode::from(super::EXIT_FAILURE);
        }
        return ExitCode::SUCCESS;
    };
    print_report(report);
    if let Some(path) = app.reviewed_patch() {
        out!("reviewed patch: {path}");
    }
    match app.applied_run() {
        Some(run) => {
            out!("applied: run {} is in the source, uncommitted", run.id);
            out!("next: `minicoder undo {}` reverts it", run.id);
        }
        None => out!(
            "next: {}",
            crate::headless::next_step(&report.run_id, report.outcome)
        ),
    }
    ExitCode::from(super::options::exit_code(report.outcome))
}

fn print_report(report: &RunReport) {
    let outcome = match report.outcome {
        Outcome::Success => "success",
        Outcome::Failure => "failure",
        Outcome::Cancelled => "cancelled",
        Outcome::Budget => "budget",
    };
    out!("run {}: {outcome} — {}", report.run_id, report.reason);
    out!("patch: {}", report.patch);
    out!("artifacts: {}", report.artifact_dir);
    if let Some(notice) = report.source.dirty_notice() {
        out!("note: {notice}");
    }
}

struct CliLauncher {
    template: RunArgs,
    env: HashMap<String, String>,
    selection: ModelSelection,
    /// The run to resume, taken by the first launch.
    resume: std::sync::Mutex<Option<runtime::ResumeRequest>>,
    /// Ask mode's conversation and its private copy, once a question came.
    ask: Arc<tokio::sync::Mutex<Option<runtime::ask::AskSession>>>,
}

impl Launcher for CliLauncher {
    fn launch(
        &self,
        task: String,
        channels: RunChannels,
    ) -> BoxFuture<'static, Result<RunReport, String>> {
        let mut args = self.template.clone();
        args.task = task;
        let options = super::options::options(&args, &self.env).map(|mut o| {
            // The person is at the keyboard to answer.
            o.interactive = true;
            o
        });
        let source = ModelChain::from_env(&Env::from_pairs(self.env.clone()), &self.selection)
            .map_err(|e| e.to_string());
        let resume = self.resume.lock().ok().and_then(|mut r| r.take());
        // (`minicoder resume RUN` in the session: its first launch.)
        Box::pin(async move {
            let source = source?;
            match resume {
                Some(req) => runtime::resume(req, Box::new(source), channels).await,
                None => runtime::run(options?, Box::new(source), channels).await,
            }
            .map_err(|e| e.to_string())
        })
    }

    fn ask(
        &self,
        question: String,
        updates: crate::tui::session::AppSender,
    ) -> BoxFuture<'static, Result<runtime::ask::Answer, String>> {
        let conversation = self.ask.clone();
        let repo = self.template.repo.clone();
        let source = ModelChain::from_env(&Env::from_pairs(self.env.clone()), &self.selection)
            .map_err(|e| e.to_string());
        let config = super::options::ask_config(&self.env);
        Box::pin(async move {
            let mut conversation = conversation.lock().await;
            if conversation.is_none() {
                let source = source?;
                *conversation =
                    Some(runtime::ask::AskSession::open(&repo, Box::new(source), config?).await?);
            }
            let Some(session) = conversation.as_mut() else {
                return Err("ask mode could not start".into());
            };
            let mut tell = |u: runtime::ask::AskUpdate| {
                let _ = updates.send(crate::tui::app::AppEvent::AskUpdate(u));
            };
            session.ask(&question, &mut tell).await
        })
    }

    fn code(
        &self,
        task: String,
        channels: RunChannels,
    ) -> BoxFuture<'static, Result<RunReport, String>> {
        // The conversation ends; what it learnt goes with the task.
        let learnt = self
            .ask
            .try_lock()
            .ok()
            .and_then(|mut c| c.take())
            .map(|session| {
                let learnt = session.learnt();
                session.close();
                learnt
            });
        let task = match learnt {
            Some(learnt) => format!("{task}\n\n{learnt}"),
            None => task,
        };
        self.launch(task, channels)
    }

    fn resume(
        &self,
        run_id: String,
        channels: RunChannels,
    ) -> BoxFuture<'static, Result<RunReport, String>> {
        let found = crate::state::StateDir::from_env()
            .map_err(|e| e.to_string())
            .and_then(|state| {
                crate::runs::resolve(&state, &run_id, &self.template.repo)
                    .map_err(|e| e.to_string())
            });
        let env = self.env.clone();
        let mut selection = self.selection.clone();
        let approval = super::options::approval_choice(self.template.approval, &self.env).map_or(
            crate::protocol::ApprovalMode::Final,
            super::options::approval_mode,
        );
        let trust = super::options::trust_grant(self.template.trust_project);
        Box::pin(async move {
            let run = found?;
            // The run's own model unless the session pinned one.
            if selection.pinned.is_none() {
                selection.pinned = run
                    .manifest
                    .model_chain
                    .first()
                    .map(|m| format!("{}:{}", m.provider, m.model));
            }
            let source = ModelChain::from_env(&Env::from_pairs(env), &selection)
                .map_err(|e| e.to_string())?;
            let req = runtime::ResumeRequest {
                run,
                follow_up: None,
                new_checks: false,
                approval: Some(approval),
                trust,
                max_tokens: None,
                max_cost_micros: None,
            };
            runtime::resume(req, Box::new(source), channels)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
