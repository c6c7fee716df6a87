//! What `run` and the session share: run options from the flags and the
//! environment, and the exit code of an outcome.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{Approval, Network, RunArgs, TrustLevel};
use crate::protocol::Outcome;
use crate::runtime::{ApprovalMode, Limits, RunOptions};

pub fn exit_code(outcome: Outcome) -> u8 {
    match outcome {
        Outcome::Success => 0,
        Outcome::Failure | Outcome::Budget => super::EXIT_FAILURE,
        Outcome::Cancelled => super::EXIT_CANCELLED,
    }
}

/// When edits are approved: the flag, else `approval = "each|final|never"`
/// in `config.toml`, else final.
pub(crate) fn approval_choice(
    flag: Option<Approval>,
    env: &HashMap<String, String>,
) -> Result<Approval, String> {
    if let Some(flag) = flag {
        return Ok(flag);
    }
    let config = crate::state::config_dir(env);
    match crate::state::config_value(config.as_deref(), "approval")?.as_deref() {
        None | Some("final") => Ok(Approval::Final),
        Some("each") => Ok(Approval::Each),
        Some("never") => Ok(Approval::Never),
        Some(other) => Err(format!(
            "config.toml: approval = {other:?} is not each, final or never"
        )),
    }
}

pub(crate) fn approval_mode(approval: Approval) -> ApprovalMode {
    match approval {
        Approval::Each => ApprovalMode::Each,
        Approval::Final => ApprovalMode::Final,
        Approval::Never => ApprovalMode::Never,
    }
}

/// Turns the flags and the environment into run options; `Err` is a usage error.
pub(crate) fn options(args: &RunArgs, env: &HashMap<String, String>) -> Result<RunOptions, String> {
    let mut opts = base_options(&args.repo, &args.task, env)?;
    let limits = &mut opts.limits;
    if let Some(n) = args.max_turns {
        limits.max_turns = n;
    }
    if let Some(s) = args.timeout {
        limits.timeout_ms = s.saturating_mul(1000);
    }
    if let Some(n) = args.max_tokens {
        limits.max_tokens = n;
    }
    if let Some(cost) = &args.max_cost {
        limits.max_cost_micros =
            Some(crate::runtime::parse_usd(cost).map_err(|e| format!("--max-cost {cost}: {e}"))?);
    }
    if limits.max_turns == 0 || limits.timeout_ms == 0 || limits.max_tokens == 0 {
        return Err("--max-turns, --max-tokens and --timeout must be positive".into());
    }
    opts.check_cost_budget()?;
    opts.network = args.network == Network::Enabled;
    opts.artifact_dir = args.artifact_dir.clone();
    opts.checks = args
        .check
        .chunks(2)
        .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
        .collect();
    opts.approval = approval_mode(approval_choice(args.approval, env)?);
    opts.allow_zero_tests = args.allow_zero_tests;
    opts.trust = trust_grant(args.trust_project);
    opts.allow_config_edits = args.allow_config_edits;
    Ok(opts)
}

/// The model of `--script FILE`: its replies read from the file (at most
/// 4 MiB, a JSON list of replies).
pub(crate) fn scripted_source(path: &Path) -> Result<crate::model::ScriptedSource, String> {
    use std::io::Read as _;
    const MAX: u64 = 4 << 20;
    let file =
        std::fs::File::open(path).map_err(|e| format!("--script {}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("--script {}: {e}", path.display()))?;
    if text.len() as u64 > MAX {
        return Err(format!("--script {}: larger than 4 MiB", path.display()));
    }
    crate::model::ScriptedSource::from_json(&text)
        .map(crate::model::ScriptedSource::going_on)
        .map_err(|e| format!("--script {}: {e}", path.display()))
}

/// What every run takes from the environment, before any flag: the limits,
/// whether the bootstrap may have the network, the person's hooks.
pub(crate) fn base_options(
    repo: &Path,
    task: &str,
    env: &HashMap<String, String>,
) -> Result<RunOptions, String> {
    let mut opts = RunOptions::new(repo, task);
    let config_dir = crate::state::config_dir(env);
    opts.limits = configured_limits(config_dir.as_deref())?.with_env(env)?;
    opts.bootstrap_network = crate::verify::bootstrap_network(
        env.get(crate::verify::BOOTSTRAP_NETWORK_ENV)
            .map(String::as_str),
    );
    opts.hooks = std::sync::Arc::new(
        crate::hooks::Hooks::load(config_dir.as_deref()).map_err(|e| format!("your hooks: {e}"))?,
    );
    opts.mcp = std::sync::Arc::new(
        crate::mcp_client::McpConfig::load(config_dir.as_deref())
            .map_err(|e| format!("your MCP servers: {e}"))?,
    );
    opts.prices = std::sync::Arc::new(crate::state::prices(config_dir.as_deref())?);
    Ok(opts)
}

/// What one ask-mode conversation may spend: the person's prices, and
/// their token and cost budgets (`[limits]`, `MINICODER_*`) where those
/// are tighter than ask mode's own.
pub(crate) fn ask_config(
    env: &HashMap<String, String>,
) -> Result<crate::agent::ask::AskConfig, String> {
    let config_dir = crate::state::config_dir(env);
    let limits = configured_limits(config_dir.as_deref())?.with_env(env)?;
    let base = crate::agent::ask::AskConfig::default();
    let ask = crate::agent::ask::AskConfig {
        max_tokens: base.max_tokens.min(limits.max_tokens),
        max_cost_micros: limits.max_cost_micros,
        prices: crate::state::prices(config_dir.as_deref())?,
        ..base
    };
    if ask.max_cost_micros.is_some() && ask.prices.is_empty() {
        return Err(
            "a cost budget needs the models' prices: add [prices.\"PROVIDER:MODEL\"] to config.toml"
                .into(),
        );
    }
    Ok(ask)
}

/// The defaults with the `[limits]` of `config.toml` over them.
fn configured_limits(config_dir: Option<&Path>) -> Result<Limits, String> {
    let c = crate::state::config_limits(config_dir)?;
    let mut l = Limits::default();
    if let Some(n) = c.max_turns {
        l.max_turns = n;
    }
    if let Some(s) = c.timeout_seconds {
        l.timeout_ms = s.saturating_mul(1000);
    }
    if let Some(s) = c.command_timeout_seconds {
        l.command_timeout_ms = s.saturating_mul(1000);
    }
    if let Some(n) = c.max_tokens {
        l.max_tokens = n;
    }
    if c.max_cost_micros.is_some() {
        l.max_cost_micros = c.max_cost_micros;
    }
    Ok(l)
}

/// What `--trust-project[=LEVEL]` grants for one run.
pub(crate) fn trust_grant(level: Option<TrustLevel>) -> Option<crate::runtime::TrustGrant> {
    level.map(|level| crate::runtime::TrustGrant {
        hash: None,
        network: level == TrustLevel::Network,
    })
}

/// Checks what can be checked of a run's flags before anything starts, and
/// resolves the repository: a path inside a repository names the
/// repository around it. `Err` is a usage error (exit 2), and says what to
/// change. `non_interactive` says which mode the flags are for.
/// The longest task `--task-file` reads.
pub(crate) const MAX_TASK_FILE_BYTES: u64 = 1 << 20;

/// The task of `--task-file FILE` (none may be given beside it).
pub(crate) fn task_from_file(given: &str, file: &Path) -> anyhow::Result<String> {
    use std::io::Read as _;
    if !given.is_empty() {
        anyhow::bail!("name the task or --task-file, not both");
    }
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_TASK_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| anyhow::anyhow!("--task-file {}: {e}", file.display()))?;
    if bytes.len() as u64 > MAX_TASK_FILE_BYTES {
        anyhow::bail!(
            "--task-file {}: larger than {} MiB",
            file.display(),
            MAX_TASK_FILE_BYTES >> 20
        );
    }
    String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("--task-file {}: not UTF-8 text", file.display()))
}

pub fn validate(args: &RunArgs, non_interactive: bool) -> Result<PathBuf, String> {
    if args.events && !non_interactive {
        return Err(
            "--events streams JSON lines on stdout instead of the full-screen session: add --non-interactive"
                .into(),
        );
    }
    if args.theme.is_some() && non_interactive {
        return Err(
            "--theme styles the full-screen session, which --non-interactive does not open: drop one of them"
                .into(),
        );
    }
    let repo = repository(&args.repo)?;
    check_model_flag(args.model.as_deref())?;
    if args.task.trim().is_empty() {
        return Err("the task is empty: say what to do".into());
    }
    if let Some(dir) = &args.artifact_dir {
        let resolved = crate::trace::artifacts::resolve_maybe_missing(dir)
            .map_err(|e| format!("--artifact-dir {}: {e}", dir.display()))?;
        if resolved.starts_with(&repo) {
            return Err(format!(
                "--artifact-dir {} is inside the repository {}: choose a directory outside it (a run never writes to its source)",
                dir.display(),
                repo.display()
            ));
        }
    }
    if !args.check.is_empty() {
        let checks: Vec<(String, String)> = args
            .check
            .chunks(2)
            .map(|c| (c[0].clone(), c.get(1).cloned().unwrap_or_default()))
            .collect();
        crate::verify::resolve_checks(&repo, None, &checks).map_err(|e| e.to_string())?;
    }
    Ok(repo)
}

/// The work tree root of the repository at or around `path`.
pub fn repository(path: &Path) -> Result<PathBuf, String> {
    if !path.exists() {
        return Err(format!("{} does not exist", path.display()));
    }
    let repo = git2::Repository::discover(path).map_err(|_| {
        format!(
            "{} is not in a Git repository; run minicoder on one (git init creates one)",
            path.display()
        )
    })?;
    let root = repo.workdir().ok_or_else(|| {
        format!(
            "{} is a bare Git repository; run minicoder on a work tree",
            path.display()
        )
    })?;
    root.canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", root.display()))
}

/// A `--model` value that names no provider. (A known provider without
/// its key is a setup failure, found when the chain is built.)
pub(crate) fn check_model_flag(model: Option<&str>) -> Result<(), String> {
    let Some(pin) = model else { return Ok(()) };
    let provider = pin.split_once(':').map_or(pin, |(p, _)| p);
    match crate::model::provider::ProviderKind::parse(provider) {
        Some(_) => Ok(()),
        None => Err(format!(
            "unknown provider {provider:?} in --model {pin:?}; use gemini, qwen, deepseek or openai, optionally as PROVIDER:MODEL"
        )),
    }
}

/// Which model a run uses: `--model`, else `MINICODER_MODEL`, else
/// `model = "..."` in `config.toml`, else the default chain. Each is checked
/// like the flag, and an error names where the bad value came from.
pub(crate) fn model_selection(
    flag: Option<&str>,
    benchmark: bool,
    env: &HashMap<String, String>,
) -> Result<crate::model::ModelSelection, String> {
    let pinned = match flag {
        Some(flag) => Some(flag.to_string()),
        None => match env.get("MINICODER_MODEL").filter(|v| !v.trim().is_empty()) {
            Some(value) => {
                check_model_flag(Some(value)).map_err(|e| format!("MINICODER_MODEL: {e}"))?;
                Some(value.trim().to_string())
            }
            None => {
                let config = crate::state::config_dir(env);
                let value = crate::state::config_value(config.as_deref(), "model")?;
                if let Some(value) = &value {
                    check_model_flag(Some(value)).map_err(|e| {
                        format!(
                            "`model` in config.toml of {}: {e}",
                            config.unwrap_or_default().display()
                        )
                    })?;
                }
                value.map(|v| v.trim().to_string())
            }
        },
    };
    Ok(crate::model::ModelSelection { pinned, benchmark })
}

#[cfg(test)]
mod model_selection_tests {
    use super::*;

    #[test]
    fn a_task_file_is_read_whole_bounded_and_never_beside_a_task() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("task.txt");
        let long = "fix the bug\n".repeat(20_000);
        std::fs::write(&file, &long).expect("write");
        assert_eq!(task_from_file("", &file).expect("read"), long);
        let both = task_from_file("fix it", &file).expect_err("both");
        assert!(both.to_string().contains("not both"), "{both}");
        std::fs::write(&file, vec![b'x'; (MAX_TASK_FILE_BYTES + 1) as usize]).expect("write");
        let big = task_from_file("", &file).expect_err("too large");
        assert!(big.to_string().contains("larger than 1 MiB"), "{big}");
        std::fs::write(&file, [0xff, 0xfe]).expect("write");
        let bytes = task_from_file("", &file).expect_err("not text");
        assert!(bytes.to_string().contains("not UTF-8"), "{bytes}");
    }

    fn env_with(config: &Path, pairs: &[(&str, &str)]) -> HashMap<String, String> {
        let mut env: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        env.insert("MINICODER_CONFIG_DIR".into(), config.display().to_string());
        env
    }

    #[test]
    fn the_flag_wins_then_the_environment_then_config_toml_else_the_default_chain() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "model = \"openai:gpt-x\"\n").unwrap();
        let env = env_with(dir.path(), &[("MINICODER_MODEL", "deepseek")]);
        let pinned = |flag: Option<&str>, env: &HashMap<String, String>| {
            model_selection(flag, false, env).unwrap().pinned
        };
        assert_eq!(pinned(Some("qwen"), &env).as_deref(), Some("qwen"));
        assert_eq!(pinned(None, &env).as_deref(), Some("deepseek"));
        let env = env_with(dir.path(), &[]);
        assert_eq!(pinned(None, &env).as_deref(), Some("openai:gpt-x"));
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(pinned(None, &env_with(empty.path(), &[])), None);
    }

    #[test]
    fn a_bad_default_says_where_it_came_from() {
        let dir = tempfile::tempdir().unwrap();
        let e = model_selection(
            None,
            false,
            &env_with(dir.path(), &[("MINICODER_MODEL", "nope")]),
        )
        .unwrap_err();
        assert!(
            e.starts_with("MINICODER_MODEL:") && e.contains("unknown provider"),
            "{e}"
        );
        std::fs::write(dir.path().join("config.toml"), "model = \"nope:x\"\n").unwrap();
        let e = model_selection(None, false, &env_with(dir.path(), &[])).unwrap_err();
        assert!(
            e.contains("config.toml") && e.contains("unknown provider"),
            "{e}"
        );
        std::fs::write(dir.path().join("config.toml"), "model = 3\n").unwrap();
        let e = model_selection(None, false, &env_with(dir.path(), &[])).unwrap_err();
        assert!(e.contains("must be a string"), "{e}");
        std::fs::write(dir.path().join("config.toml"), "model = [\n").unwrap();
        assert!(model_selection(None, false, &env_with(dir.path(), &[])).is_err());
    }

    #[test]
    fn the_approval_default_comes_from_config_toml_below_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let env = env_with(dir.path(), &[]);
        assert_eq!(approval_choice(None, &env), Ok(Approval::Final));
        std::fs::write(dir.path().join("config.toml"), "approval = \"never\"\n").unwrap();
        assert_eq!(approval_choice(None, &env), Ok(Approval::Never));
        assert_eq!(
            approval_choice(Some(Approval::Each), &env),
            Ok(Approval::Each)
        );
        std::fs::write(dir.path().join("config.toml"), "approval = \"always\"\n").unwrap();
        let e = approval_choice(None, &env).unwrap_err();
        assert!(e.contains("each, final or never"), "{e}");
    }

    #[test]
    fn limits_in_config_toml_sit_below_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            "[limits]\nmax_turns = 7\nmax_tokens = 5000\nmax_cost = 0.5\n",
        )
        .unwrap();
        let limits = configured_limits(Some(dir.path()))
            .unwrap()
            .with_env(&HashMap::from([(
                "MINICODER_MAX_TURNS".to_string(),
                "9".to_string(),
            )]))
            .unwrap();
        assert_eq!(limits.max_turns, 9, "the environment wins");
        assert_eq!(limits.max_tokens, 5000);
        assert_eq!(limits.max_cost_micros, Some(500_000));
        std::fs::write(dir.path().join("config.toml"), "[limits]\nmax_turn = 7\n").unwrap();
        let e = configured_limits(Some(dir.path())).unwrap_err();
        assert!(e.contains("max_turn is not a limit"), "{e}");
    }
}
