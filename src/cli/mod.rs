//! The command line: parsing (clap) and dispatch. Each command lives in its
//! own file. Exit codes: 0 success, 1 failure, 2 invalid usage (and commands
//! not built yet), 130 cancelled.

/// `println!` that never panics (a closed stdout, `| head`, is not an error
/// worth dying for mid-run, with containers to remove) and that escapes
/// every control character of the line ([`crate::terminal_text::escape_line`]):
/// one call prints one line, so a line break goes in its own `out!()`.
macro_rules! out {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($arg:tt)*) => {{
        crate::terminal_text::write_line(
            &mut std::io::stdout().lock(),
            &crate::trace::redact::shown(&format!($($arg)*)),
        );
    }};
}

/// A line of a patch on stdout: escaped like [`out!`], its tabs kept (they
/// indent Makefiles and Go code, and only move the cursor).
pub(crate) fn out_keeping_tabs(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stdout().lock(),
        "{}",
        crate::terminal_text::escape_keeping_tabs(line)
    );
}

/// A JSON line on stdout, escaped as JSON so it stays JSON.
pub(crate) fn out_json_line(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stdout().lock(),
        "{}",
        crate::terminal_text::escape_json(&crate::trace::redact::shown(line))
    );
}

/// `eprintln!` with the same guarantees as [`out!`], on stderr.
macro_rules! err {
    ($($arg:tt)*) => {{
        crate::terminal_text::write_line(
            &mut std::io::stderr().lock(),
            &crate::trace::redact::shown(&format!($($arg)*)),
        );
    }};
}

mod apply;
mod ask;
mod batch;
pub mod demo;
mod doctor;
mod doctor_instructions;
mod doctor_project;
mod env_file;
mod eval;
mod gc;
mod init;
mod mcp;
mod options;
mod progress;
mod resume;
mod run;
pub(crate) mod runs;
mod sandbox;
mod session;
mod show_subset;
mod show_verify;
mod smoke;
mod trust;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub(crate) const EXIT_FAILURE: u8 = 1;
pub(crate) const EXIT_USAGE: u8 = 2;
pub(crate) const EXIT_CANCELLED: u8 = 130;

#[derive(Debug, Parser)]
#[command(
    name = "minicoder",
    version,
    about = "A terminal-native coding agent: works in Docker, proves its patches, never touches your repository until you apply",
    after_help = "Without a command, opens the interactive session on the Git repository in the current directory."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The Docker engine `[engines.NAME]` of config.toml, instead of the one
    /// DOCKER_HOST names
    #[arg(long, global = true, value_name = "NAME")]
    pub engine: Option<String>,
    #[command(flatten)]
    pub session: SessionArgs,
}

/// Flags of the interactive session started by `minicoder` with no command.
#[derive(Debug, Args)]
pub(crate) struct SessionArgs {
    /// Colour theme (default, light, high-contrast, or a file in the config directory)
    #[arg(long, global = false)]
    pub theme: Option<String>,
    /// When edits are approved: each edit, the final patch, or never
    /// (default: `approval` in config.toml, else final)
    #[arg(long, value_enum)]
    pub approval: Option<Approval>,
    /// Pin a provider or PROVIDER:MODEL (disables fallback)
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Token budget of the whole run (input and output)
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Cost budget of the whole run in dollars (needs [prices] in config.toml)
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<String>,
    /// Whole-run budget in seconds
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    /// Honour the repository's own configuration (bootstrap, image,
    /// packages, recipe, looser limits) for this session's runs;
    /// `=network` also gives its bootstrap and recipe the network
    #[arg(long, value_enum, value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "config")]
    pub trust_project: Option<TrustLevel>,
}

/// How far `--trust-project` trusts a repository's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TrustLevel {
    /// Its bootstrap, image, packages, recipe and limits, without network
    Config,
    /// The same, and network for its bootstrap and recipe
    Network,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// One run on REPO: full-screen by default, one JSON object with --non-interactive
    Run(RunArgs),
    /// Ask about a repository: read-only tools over a private copy, no container, no edits
    Ask(ask::AskArgs),
    /// Many runs, up to N at once, from a tasks file or SWE-bench instances; resumable
    Batch(batch::BatchArgs),
    /// The conformance suite: scripted cases through the real sandbox and verifier (--model to measure a model)
    Eval(eval::EvalArgs),
    /// Fix the bundled buggy fixture end to end (scripted model, real Docker and verifier)
    Demo,
    /// Apply a run's verified patch to its source repository (conflict- and receipt-checked)
    Apply {
        run: String,
        /// Print what would change and any conflict; write nothing
        #[arg(long)]
        dry_run: bool,
        /// Merge files you changed since the run started three ways (only when all merge cleanly)
        #[arg(long)]
        merge: bool,
        /// Commit the change in the source (no hooks run)
        #[arg(long)]
        commit: bool,
        /// Apply the patch of a run that did not succeed, or a subset whose checks failed (recorded in the journal)
        #[arg(long)]
        unverified: bool,
        /// Apply only these files of the patch, verified again first
        #[arg(long, value_name = "PATH", num_args = 1.., conflicts_with = "hunks")]
        paths: Vec<String>,
        /// Apply only these hunks (1,3-4; `--dry-run --hunks 1` lists them), verified again first
        #[arg(long, value_name = "LIST")]
        hunks: Option<String>,
        /// The repository to apply to, when it moved since the run (it must
        /// hold the commit the run started from)
        #[arg(long, value_name = "PATH")]
        repo: Option<PathBuf>,
    },
    /// Revert an applied run, refusing files changed since unless --force
    Undo {
        run: String,
        /// Restore files changed since the apply too
        #[arg(long)]
        force: bool,
        /// Record the revert as a commit (no hooks run)
        #[arg(long)]
        commit: bool,
    },
    /// Continue a run that did not finish, or a finished one with a follow-up
    Resume(ResumeArgs),
    /// List runs, newest first
    Runs {
        /// Only the runs of the repository at PATH
        #[arg(long, value_name = "PATH")]
        repo: Option<PathBuf>,
        /// Print a JSON array instead of the table
        #[arg(long)]
        json: bool,
    },
    /// Show a run's report, plan, verification and patch
    Show {
        /// A run id, a unique prefix of one, or `last`
        run: String,
        /// Print the patch
        #[arg(long)]
        diff: bool,
        /// Print the event log (JSON lines)
        #[arg(long)]
        events: bool,
        /// Re-check the event chain, the receipt and the patch hash (exit 1 on a mismatch)
        #[arg(long)]
        verify: bool,
        /// Print one JSON object
        #[arg(long)]
        json: bool,
    },
    /// Build the sandbox image, or prove its isolation boundaries
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Serve the sandbox, the tools and the verifier over MCP (stdio, or
    /// Streamable HTTP on loopback with --http)
    Mcp {
        /// Serve Streamable HTTP on 127.0.0.1 instead of stdio; the bearer
        /// token is written to mcp-http.json in the state directory (0600)
        #[arg(long)]
        http: bool,
        /// The port for --http (0: any free one, printed on stderr)
        #[arg(long, default_value_t = 0, requires = "http")]
        port: u16,
    },
    /// Check prerequisites: Docker, the image, git, the state directory, provider keys
    Doctor {
        /// Also one real tool round trip with each configured provider
        #[arg(long)]
        live: bool,
    },
    /// One tool round trip with each configured provider (or PROVIDER, or `fallback`)
    Smoke {
        /// gemini, qwen, deepseek, openai, or fallback (the chain moving on)
        target: Option<String>,
    },
    /// Save provider keys (asked without echo) in a private file, and write a commented config.toml
    Init {
        /// Take the keys from the environment instead of asking
        #[arg(long)]
        from_env: bool,
    },
    /// Trust REPO's own configuration (.minicoder.json, .minicoder/) at its current hash
    Trust {
        /// The repository (default: the one around the current directory)
        repo: Option<PathBuf>,
        /// Also give its bootstrap and its recipe's build the network
        #[arg(long)]
        network: bool,
    },
    /// Stop trusting REPO's configuration
    Untrust {
        /// The repository (default: the one around the current directory)
        repo: Option<PathBuf>,
    },
    /// Prepare the copy of REPO that its next run takes (started by runs, in the background)
    #[command(hide = true)]
    PrepareCopy {
        repo: PathBuf,
        /// An ended run's workspace to make the copy from
        #[arg(long)]
        recycle: Option<PathBuf>,
    },
    /// Remove containers, volumes and workspaces left by runs whose process is gone
    Gc {
        /// Also drop every project's dependency cache (the next run of each
        /// project fetches its dependencies again)
        #[arg(long)]
        caches: bool,
        /// Also remove every ended run older than DURATION (`7d`, `12h`,
        /// `30m`): its artifacts, workspace and checkpoint store
        #[arg(long, value_name = "DURATION")]
        older_than: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Build the sandbox image (skipped when its definition has not changed)
    Build {
        /// Rebuild even if the image is up to date
        #[arg(long)]
        force: bool,
    },
    /// Prove each isolation boundary with a [PASS]/[FAIL] line
    Probe,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Network {
    None,
    Enabled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Approval {
    Each,
    Final,
    Never,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// The Git repository to work on
    pub repo: PathBuf,
    /// What to do
    #[arg(
        required_unless_present = "task_file",
        default_value = "",
        hide_default_value = true
    )]
    pub task: String,
    /// Read the task from FILE instead (at most 1 MiB): a task longer
    /// than a command line holds
    #[arg(long, value_name = "FILE")]
    pub task_file: Option<PathBuf>,
    /// Print one JSON object on stdout instead of the full-screen session
    #[arg(long)]
    pub non_interactive: bool,
    /// Pin a provider or PROVIDER:MODEL (disables fallback)
    #[arg(long)]
    pub model: Option<String>,
    /// Disable provider fallback
    #[arg(long)]
    pub benchmark: bool,
    #[arg(long, value_name = "N")]
    pub max_turns: Option<u32>,
    /// Token budget of the whole run (input and output)
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// Cost budget of the whole run in dollars (needs [prices] in config.toml)
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<String>,
    /// Whole-run budget in seconds
    #[arg(long, value_name = "SECONDS")]
    pub timeout: Option<u64>,
    #[arg(long, value_enum, default_value = "none")]
    pub network: Network,
    /// Where to write the run's artifacts (outside the repository)
    #[arg(long, value_name = "DIR")]
    pub artifact_dir: Option<PathBuf>,
    /// A verification check (repeatable); overrides .minicoder.json
    #[arg(long, num_args = 2, value_names = ["NAME", "CMD"], action = clap::ArgAction::Append)]
    pub check: Vec<String>,
    /// When edits are approved (default: `approval` in config.toml, else final)
    #[arg(long, value_enum)]
    pub approval: Option<Approval>,
    #[arg(long)]
    pub theme: Option<String>,
    /// Stream JSONL events on stdout instead of the result object
    #[arg(long)]
    pub events: bool,
    /// Accept a recognised zero-test result as passing
    #[arg(long)]
    pub allow_zero_tests: bool,
    /// Honour the repository's own configuration (bootstrap, image,
    /// packages, recipe, looser limits) for this run; `=network` also gives
    /// its bootstrap and recipe the network
    #[arg(long, value_enum, value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "config")]
    pub trust_project: Option<TrustLevel>,
    /// Let the run change the repository's own minicoder configuration
    /// (.minicoder.json, .minicoder/); the tools refuse it otherwise
    #[arg(long)]
    pub allow_config_edits: bool,
    /// Take the model's replies from FILE (a JSON list, as the demo's
    /// script) instead of a provider: rehearsals, batches and conformance
    #[arg(long, value_name = "FILE", conflicts_with_all = ["model", "benchmark"])]
    pub script: Option<PathBuf>,
}

/// `minicoder resume RUN ["FOLLOW-UP"]`.
#[derive(Debug, Clone, Args)]
pub struct ResumeArgs {
    /// A run id, a unique prefix of one, or `last`
    pub run: String,
    /// A new instruction (needed to continue a run that succeeded)
    pub follow_up: Option<String>,
    /// Print exactly one JSON object on stdout (progress on stderr)
    #[arg(long)]
    pub non_interactive: bool,
    /// With --non-interactive: stream every event as a JSON line instead
    #[arg(long)]
    pub events: bool,
    /// When edits are approved from now on (default: as the run had it)
    #[arg(long, value_enum)]
    pub approval: Option<Approval>,
    /// Colour theme of the session
    #[arg(long)]
    pub theme: Option<String>,
    /// Pin a provider or PROVIDER:MODEL (default: the run's model)
    #[arg(long)]
    pub model: Option<String>,
    /// Go on with the repository's checks as they are now, if they changed
    #[arg(long)]
    pub new_checks: bool,
    /// A larger token budget for the rest of the run
    #[arg(long, value_name = "N")]
    pub max_tokens: Option<u64>,
    /// A larger cost budget for the rest of the run, in dollars
    #[arg(long, value_name = "USD")]
    pub max_cost: Option<String>,
    /// Honour the repository's own configuration for this run (see `run`)
    #[arg(long, value_enum, value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "config")]
    pub trust_project: Option<TrustLevel>,
    /// Take the model's replies from FILE (see `run --script`); a script
    /// goes on from the replies the run already has
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub script: Option<PathBuf>,
}

/// Parses the command line, runs the command, and maps the result to an exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The person's saved keys, before any thread exists (the environment
    // wins over them). A file others can read is refused, not used.
    // (`doctor` goes on to report it.)
    if let Err(e) = env_file::load_at_start()
        && !matches!(cli.command, Some(Command::Doctor { .. }))
    {
        err!("minicoder: {e}");
        return ExitCode::from(EXIT_FAILURE);
    }
    let session = match &cli.command {
        None => true,
        Some(Command::Run(args)) => !args.non_interactive,
        Some(Command::Resume(args)) => !args.non_interactive,
        _ => false,
    };
    init_tracing(
        session,
        !matches!(cli.command, Some(Command::Doctor { .. })),
    );
    // The state directory is private before anything is written under it,
    // and one that others could read is refused (`doctor` reports it).
    if !matches!(cli.command, Some(Command::Doctor { .. })) {
        let ensured = crate::state::StateDir::from_env()
            .map_err(|e| e.to_string())
            .and_then(|state| state.ensure().map_err(|e| e.to_string()));
        if let Err(e) = ensured {
            err!("minicoder: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    }
    if let Err(e) = crate::tools::isolate_libgit2() {
        err!("minicoder: {e}");
        return ExitCode::from(EXIT_FAILURE);
    }
    if let Some(name) = &cli.engine {
        match crate::sandbox::engines::named(name) {
            Ok(engine) => crate::sandbox::engines::select(engine),
            Err(e) => {
                err!("minicoder: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        }
    }
    if let Some(code) = run_without_async(&cli.command) {
        return code;
    }
    if matches!(
        cli.command,
        Some(Command::Sandbox {
            command: SandboxCommand::Probe
        })
    ) {
        sandbox::set_probe_sentinel();
    }
    // The environment is final now: the redactor every run needs is built
    // meanwhile.
    crate::trace::Redactor::warm_up();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            err!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILURE);
        }
    };
    let result = runtime.block_on(dispatch(cli));
    // A blocking read of standard input (the MCP server's over stdio) may
    // still wait for a line that never comes: not waited for past this.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(code) => code,
        Err(e) => {
            err!("error: {e:#}");
            ExitCode::from(EXIT_FAILURE)
        }
    }
}

/// The commands that need no async runtime; `None` for the others.
fn run_without_async(command: &Option<Command>) -> Option<ExitCode> {
    Some(match command {
        Some(Command::Init { from_env }) => init::run(*from_env),
        Some(Command::PrepareCopy { repo, recycle }) => {
            match crate::runtime::prepare_next::prepare_copy(repo, recycle.as_deref()) {
                Ok(_) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::warn!("preparing a copy of {}: {e}", repo.display());
                    ExitCode::from(EXIT_FAILURE)
                }
            }
        }
        Some(Command::Apply {
            run,
            dry_run,
            merge,
            commit,
            unverified,
            paths,
            hunks,
            repo,
        }) => {
            let hooks =
                match crate::hooks::Hooks::load(crate::state::config_dir_from_env().as_deref()) {
                    Ok(hooks) => std::sync::Arc::new(hooks),
                    Err(e) => {
                        err!("minicoder: your hooks: {e}");
                        return Some(ExitCode::from(EXIT_USAGE));
                    }
                };
            let options = crate::delivery::ApplyOptions {
                dry_run: *dry_run,
                merge: *merge,
                commit: *commit,
                unverified: *unverified,
                repo: repo.clone(),
                hooks: Some(hooks),
            };
            let subset = match (hunks, paths.is_empty()) {
                (Some(list), _) => match crate::delivery::hunks::parse_numbers(list) {
                    Ok(numbers) => Some(crate::delivery::subset::Subset::Hunks(numbers)),
                    Err(why) => {
                        err!("minicoder: --hunks {list}: {why}");
                        return Some(ExitCode::from(EXIT_USAGE));
                    }
                },
                (None, false) => Some(crate::delivery::subset::Subset::Paths(paths.clone())),
                (None, true) => None,
            };
            match subset {
                Some(subset) => apply::apply_subset(run, &subset, options),
                None => apply::apply(run, options),
            }
        }
        Some(Command::Undo { run, force, commit }) => apply::undo(
            run,
            crate::delivery::UndoOptions {
                force: *force,
                commit: *commit,
            },
        ),
        _ => return None,
    })
}

/// The commands that run on the async runtime.
async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Sandbox {
            command: SandboxCommand::Build { force },
        }) => sandbox::build(force).await,
        Some(Command::Sandbox {
            command: SandboxCommand::Probe,
        }) => sandbox::probe().await,
        Some(Command::Doctor { live }) => doctor::run(live).await,
        Some(Command::Smoke { target }) => Ok(smoke::run(target).await),
        Some(Command::Ask(args)) => Ok(ask::run(args).await),
        Some(Command::Batch(args)) => batch::run(args).await,
        Some(Command::Eval(args)) => tokio::task::spawn_blocking(move || eval::run(args)).await?,
        Some(Command::Mcp { http, port }) => mcp::run(http, port).await,
        Some(Command::Trust { repo, network }) => trust::trust(repo.as_deref(), network),
        Some(Command::Untrust { repo }) => trust::untrust(repo.as_deref()),
        Some(Command::Run(args)) => run::run(args).await,
        Some(Command::Resume(args)) => resume::run(args).await,
        Some(Command::Demo) => demo::run().await,
        Some(Command::Gc { caches, older_than }) => gc::run(caches, older_than).await,
        Some(Command::Runs { repo, json }) => runs::list(repo.as_deref(), json),
        Some(Command::Show {
            run,
            diff,
            events,
            verify,
            json,
        }) => runs::show(
            &run,
            runs::ShowFlags {
                diff,
                events,
                verify,
                json,
            },
        ),
        None => session::run_here(cli.session).await,
        _ => Ok(ExitCode::from(EXIT_USAGE)),
    }
}

/// Logs go to `logs/minicoder.log` under the state directory: a command's
/// output is what it prints, never log records. With `MINICODER_LOG` (or
/// `MINICODER_LOG_STDERR`) set, a command other than the full-screen session
/// logs to stderr instead; nothing ever draws over the session's screen.
/// `doctor`, which writes nothing into the state directory, logs only so.
fn init_tracing(session: bool, may_write_state: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MINICODER_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Log records quote paths, errors and output: escaped like every other
    // line (and so without colours, whose escapes would be shown).
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    let stderr_asked = ["MINICODER_LOG", "MINICODER_LOG_STDERR"]
        .iter()
        .any(|name| std::env::var_os(name).is_some());
    if !session && stderr_asked {
        let _ = builder
            .with_writer(|| {
                crate::terminal_text::EscapingWriter(RedactingWriter(std::io::stderr()))
            })
            .try_init();
        return;
    }
    let _ = match may_write_state.then(log_file).flatten() {
        // Escaped as on a terminal: the file is read with one.
        Some(file) => builder
            .with_writer(std::sync::Mutex::new(crate::terminal_text::EscapingWriter(
                RedactingWriter(file),
            )))
            .try_init(),
        None => builder.with_writer(std::io::sink).try_init(),
    };
}

/// A writer that redacts what passes through it (a log record, written whole).
struct RedactingWriter<W: std::io::Write>(W);

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0
            .write_all(crate::trace::redact::shown(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The log file, opened for appending; `None` if it cannot be.
fn log_file() -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let state = crate::state::StateDir::from_env().ok()?;
    // The root first, private (or refused: the command then says why).
    state.ensure().ok()?;
    let dir = state.logs_dir();
    crate::state::private_dir(&dir).ok()?;
    // Bounded: past its size the log starts again, the last one kept beside.
    let log = dir.join("minicoder.log");
    if std::fs::symlink_metadata(&log).is_ok_and(|m| m.is_file() && m.len() > MAX_LOG_BYTES) {
        let _ = std::fs::rename(&log, dir.join("minicoder.log.1"));
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(log)
        .ok()
}

/// The log file's size past which a new one is started.
const MAX_LOG_BYTES: u64 = 16 << 20;

/// Resolves on the first Ctrl-C (SIGINT) or SIGTERM.
pub(crate) async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).ok();
    let terminated = async {
        match term.as_mut() {
            Some(t) => t.recv().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminated => {}
    }
}

/// Runs `work` until it ends or Ctrl-C / SIGTERM arrives. On a signal the
/// work is dropped, every container this process owns is removed, and `None`
/// is returned: the caller exits 130.
pub(crate) async fn until_cancelled<T>(
    docker: Option<&bollard::Docker>,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    tokio::select! {
        out = work => return Some(out),
        _ = shutdown_signal() => {}
    }
    err!("minicoder: cancelled; removing this process's containers");
    if let Some(docker) = docker {
        let owner = crate::owner::ProcessIdentity::current();
        let cleanup = crate::sandbox::gc::remove_owned(docker, &owner);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), cleanup).await;
    }
    None
}
