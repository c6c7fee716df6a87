//! `minicoder doctor`: static prerequisite checks. Never prints a key's value.
//! Inside a repository it also reports the detected checks and whether the
//! project's image can run them ([`super::doctor_project`]).

use std::process::ExitCode;

use crate::sandbox::{self, image, spec};
use crate::state::StateDir;

use super::doctor_project::Level;

fn line(level: Level, what: &str, detail: impl std::fmt::Display) {
    let mark = match level {
        Level::Ok => "[ OK ]",
        Level::Warn => "[WARN]",
        Level::Fail => "[FAIL]",
    };
    out!("{mark} {what}: {detail}");
}

/// The provider variables of the default model chain whose presence doctor reports.
pub(crate) const PROVIDER_KEYS: [(&str, &str); 4] = [
    ("gemini", "GEMINI_API_KEY"),
    ("qwen/deepseek", "FREELLMAPI_API_KEY"),
    ("qwen/deepseek endpoint", "FREELLMAPI_BASE_URL"),
    ("openai", "OPENAI_API_KEY"),
];

pub async fn run(live: bool) -> anyhow::Result<ExitCode> {
    let mut failed = false;
    let mut record = |level: Level, what: &str, detail: String| {
        failed |= level == Level::Fail;
        line(level, what, detail);
    };

    let connected = sandbox::connect().await;
    docker_and_image(&connected, &mut record).await;
    super::doctor_project::report(connected.as_ref().ok(), &mut record).await;

    host_git(&mut record);
    match StateDir::from_env() {
        Ok(state) => {
            match check_state_dir(&state) {
                Ok(detail) => record(Level::Ok, "state directory", detail),
                Err(e) => record(Level::Fail, "state directory", e),
            }
            trusted_repositories(&state, &mut record);
        }
        Err(e) => record(Level::Fail, "state directory", e.to_string()),
    }

    providers(&mut record);
    hooks(&mut record);
    repository_hooks(&mut record);
    mcp_servers(&mut record);
    let cwd = std::env::current_dir().ok();
    for detail in cwd
        .and_then(|d| super::doctor_instructions::report(&d))
        .unwrap_or_default()
    {
        record(Level::Ok, "project instructions", detail);
    }
    if live {
        // One real round trip with each configured provider.
        let env: std::collections::HashMap<String, String> = std::env::vars().collect();
        let targets: Vec<String> = super::smoke::configured(&env)
            .into_iter()
            .map(str::to_string)
            .collect();
        if targets.is_empty() {
            record(Level::Fail, "live", "no provider is configured".into());
        }
        for finding in super::smoke::check_all(&targets, &env).await {
            let level = if finding.result.is_ok() {
                Level::Ok
            } else {
                Level::Fail
            };
            record(level, &format!("live {}", finding.target), finding.line());
        }
    }

    Ok(if failed {
        ExitCode::from(super::EXIT_FAILURE)
    } else {
        ExitCode::SUCCESS
    })
}

/// Whether Docker answers, and the sandbox image is there and current.
async fn docker_and_image(
    connected: &Result<bollard::Docker, crate::sandbox::SandboxError>,
    record: &mut dyn FnMut(Level, &str, String),
) {
    match connected {
        Ok(docker) => {
            let version = docker.version().await.ok();
            let engine = version
                .as_ref()
                .and_then(|v| v.version.clone())
                .unwrap_or_else(|| "unknown version".into());
            let api = version.and_then(|v| v.api_version).unwrap_or_default();
            let which = crate::sandbox::engines::selected()
                .map(|e| format!("{} at {}: ", e.name, e.host))
                .unwrap_or_default();
            record(
                Level::Ok,
                "docker",
                format!("{which}engine {engine} (API {api}) answers"),
            );
            let name = spec::image_from_env();
            match image::installed_definition(docker, &name).await {
                Ok(Some(found))
                    if name != spec::DEFAULT_IMAGE || found == image::definition_hash() =>
                {
                    record(
                        Level::Ok,
                        "sandbox image",
                        format!("{name} is present and current"),
                    )
                }
                Ok(Some(_)) => record(
                    Level::Warn,
                    "sandbox image",
                    format!(
                        "{name} is out of date; it is rebuilt on first use, or run `minicoder sandbox build`"
                    ),
                ),
                Ok(None) if name == spec::DEFAULT_IMAGE => record(
                    Level::Warn,
                    "sandbox image",
                    format!(
                        "{name} is missing; it is built on first use, or run `minicoder sandbox build`"
                    ),
                ),
                Ok(None) => record(
                    Level::Fail,
                    "sandbox image",
                    format!("{name} (MINICODER_SANDBOX_IMAGE) does not exist"),
                ),
                Err(e) => record(Level::Fail, "sandbox image", e.to_string()),
            }
        }
        Err(e) => {
            record(Level::Fail, "docker", e.to_string());
            record(
                Level::Fail,
                "sandbox image",
                "cannot be checked without Docker".into(),
            );
        }
    }
}

/// The host's git program, and the libgit2 built in.
fn host_git(record: &mut dyn FnMut(Level, &str, String)) {
    let libgit2 = git2::Version::get();
    let (major, minor, patch) = libgit2.libgit2_version();
    match std::process::Command::new("git").arg("--version").output() {
        Ok(out) if out.status.success() => record(
            Level::Ok,
            "git",
            format!(
                "{} on the host; libgit2 {major}.{minor}.{patch} built in",
                String::from_utf8_lossy(&out.stdout).trim()
            ),
        ),
        _ => record(
            Level::Warn,
            "git",
            format!(
                "no git program on the host (minicoder uses its built-in libgit2 {major}.{minor}.{patch}; git is only needed to apply patches by hand)"
            ),
        ),
    }
}

/// Which providers have a key, which are usable, and the free-tier chain.
fn providers(record: &mut dyn FnMut(Level, &str, String)) {
    let env: std::collections::HashMap<String, String> = std::env::vars().collect();
    match super::options::model_selection(None, false, &env) {
        Ok(selection) => {
            let chosen = match (&selection.pinned, env.get("MINICODER_MODEL")) {
                (Some(model), Some(_)) => format!("{model} (from MINICODER_MODEL)"),
                (Some(model), None) => format!("{model} (from config.toml)"),
                (None, _) => {
                    "the free-tier chain, when confirmed (choose one with `model = \"PROVIDER[:MODEL]\"` in config.toml, or MINICODER_MODEL)"
                        .to_string()
                }
            };
            record(Level::Ok, "default model", chosen);
        }
        Err(e) => record(Level::Fail, "default model", e),
    }
    if let Some(dir) = crate::state::config_dir_from_env() {
        let path = super::env_file::path_in(&dir);
        match super::env_file::read(&path) {
            Ok(Some(vars)) => {
                let ignored: Vec<&str> = vars
                    .keys()
                    .map(String::as_str)
                    .filter(|n| !super::env_file::settable(n))
                    .collect();
                record(
                    if ignored.is_empty() {
                        Level::Ok
                    } else {
                        Level::Warn
                    },
                    "saved keys",
                    if ignored.is_empty() {
                        format!("{} ({} variables, private)", path.display(), vars.len())
                    } else {
                        format!(
                            "{}: {} ignored (only provider settings are read from it)",
                            path.display(),
                            ignored.join(", ")
                        )
                    },
                )
            }
            Ok(None) => record(
                Level::Ok,
                "saved keys",
                format!(
                    "none ({} does not exist; `minicoder init` writes it)",
                    path.display()
                ),
            ),
            Err(e) => record(Level::Fail, "saved keys", e),
        }
    }
    for (provider, var) in PROVIDER_KEYS {
        let origin = super::env_file::origin(var);
        record(
            if origin.is_some() {
                Level::Ok
            } else {
                Level::Warn
            },
            &format!("provider {provider}"),
            match origin {
                Some(from) => format!("{var} is set ({from})"),
                None => format!("{var} is not set (`minicoder init` saves it)"),
            },
        );
    }
    let (usable, unusable) = usable_providers();
    if usable.is_empty() {
        record(
            Level::Fail,
            "providers",
            format!("no provider is usable: {}", unusable.join("; ")),
        );
    } else {
        record(
            Level::Ok,
            "providers",
            format!("usable: {}", usable.join(", ")),
        );
    }
    let confirmed = std::env::var("MINICODER_FREE_TIER_CONFIRMED").is_ok_and(|v| v == "true");
    record(
        if confirmed { Level::Ok } else { Level::Warn },
        "free-tier chain",
        if confirmed {
            "MINICODER_FREE_TIER_CONFIRMED=true".to_string()
        } else {
            "MINICODER_FREE_TIER_CONFIRMED is not true: the gemini → qwen → deepseek chain is off"
                .to_string()
        },
    );
}

/// Every hook of the person's configuration, and where it runs.
fn hooks(record: &mut dyn FnMut(Level, &str, String)) {
    let dir = crate::state::config_dir_from_env();
    let file = dir
        .as_ref()
        .map(|d| d.join(crate::hooks::config::FILE).display().to_string())
        .unwrap_or_else(|| "no configuration directory".into());
    match crate::hooks::Hooks::load(dir.as_deref()) {
        Err(e) => record(
            Level::Fail,
            "hooks",
            format!("{e} (apply refuses until it is fixed)"),
        ),
        Ok(hooks) if hooks.is_empty() => {
            record(Level::Ok, "hooks", format!("none ({file})"));
        }
        Ok(hooks) => {
            for (event, matcher, spec) in hooks.listed() {
                let (level, runs) = if let Some(unmatched) = matcher_misses(event, &matcher) {
                    (Level::Warn, unmatched)
                } else {
                    (Level::Ok, "runs on the host".to_string())
                };
                let matcher = matcher.map_or(String::new(), |m| format!(" on tools `{m}`"));
                record(
                    level,
                    "hook",
                    format!(
                        "{}{matcher}: `{}` {runs}, timeout {} s (from {file})",
                        event.name(),
                        spec.command,
                        spec.timeout.as_secs()
                    ),
                );
            }
        }
    }
}

/// The person's MCP servers, and what their tools may do without asking.
fn mcp_servers(record: &mut dyn FnMut(Level, &str, String)) {
    use crate::mcp_client::Transport;
    let dir = crate::state::config_dir_from_env();
    let file = dir
        .as_ref()
        .map(|d| {
            d.join(crate::mcp_client::config::FILE)
                .display()
                .to_string()
        })
        .unwrap_or_else(|| "no configuration directory".into());
    match crate::mcp_client::McpConfig::load(dir.as_deref()) {
        Err(e) => record(
            Level::Fail,
            "MCP servers",
            format!("{e} (runs refuse to start until it is fixed)"),
        ),
        Ok(config) if config.servers.is_empty() => {
            record(Level::Ok, "MCP servers", format!("none ({file})"));
        }
        Ok(config) => {
            for server in &config.servers {
                let what = match &server.transport {
                    Transport::Command { command, args, .. } => {
                        format!("`{command} {}` on the host", args.join(" "))
                    }
                    Transport::Http { url, .. } => url.clone(),
                };
                let allowed = if server.allow.is_empty() {
                    "every call asks".to_string()
                } else {
                    format!("without asking: {}", server.allow.join(", "))
                };
                record(
                    Level::Ok,
                    "MCP server",
                    format!(
                        "{} ({what}): tools offered as mcp__{}__TOOL, {allowed} (from {file})",
                        server.name, server.name
                    ),
                );
            }
        }
    }
}

/// The hooks of the repository around the current directory, which run
/// only in its command container and only once its configuration is trusted.
fn repository_hooks(record: &mut dyn FnMut(Level, &str, String)) {
    let Some(repo) = std::env::current_dir()
        .ok()
        .and_then(|d| git2::Repository::discover(d).ok())
        .and_then(|r| r.workdir().map(std::path::Path::to_path_buf))
    else {
        return;
    };
    let path = repo.join(".minicoder").join(crate::hooks::config::FILE);
    let text = match crate::verify::config::read_config_text(&path) {
        Ok(Some(text)) => text,
        Ok(None) => return,
        Err(e) => return record(Level::Fail, "repository hooks", e.to_string()),
    };
    match crate::hooks::HooksConfig::parse(&text) {
        Err(e) => record(
            Level::Fail,
            "repository hooks",
            format!("{}: {e}", path.display()),
        ),
        Ok(config) => {
            for (event, matcher, spec) in config.listed() {
                let matcher = matcher.map_or(String::new(), |m| format!(" on tools `{m}`"));
                let runs = match event {
                    crate::hooks::HookEvent::PreToolUse
                    | crate::hooks::HookEvent::PostToolUse
                    | crate::hooks::HookEvent::Stop => {
                        "runs in the run's sandbox, never on the host, once the repository is trusted"
                    }
                    _ => {
                        "is not run: a repository's hooks run only for PreToolUse, PostToolUse and Stop"
                    }
                };
                record(
                    Level::Ok,
                    "repository hook",
                    format!("{}{matcher}: `{}` {runs}", event.name(), spec.command),
                );
            }
        }
    }
}

/// What is wrong with a tool event's matcher that matches none of the
/// tools a hook is asked about (a Claude Code matcher such as `Bash|Edit`
/// names tools minicoder does not have).
fn matcher_misses(event: crate::hooks::HookEvent, matcher: &Option<String>) -> Option<String> {
    use crate::tools::ToolName;
    let pattern = matcher.as_ref().filter(|_| event.has_tool())?;
    let regex = regex::Regex::new(&format!("^(?:{pattern})$")).ok()?;
    let hooked: Vec<&str> = ToolName::ALL
        .iter()
        .filter(|t| !matches!(t, ToolName::UpdatePlan | ToolName::RequestCompletion))
        .map(|t| t.as_str())
        .collect();
    // (An MCP server's tools are known only once it runs: a matcher that
    // can name one is taken as meant.)
    if hooked.iter().any(|t| regex.is_match(t)) || pattern.starts_with(crate::mcp_client::PREFIX) {
        return None;
    }
    Some(format!(
        "runs for no tool: its matcher matches none of {}",
        hooked.join(", ")
    ))
}

/// The repositories whose configuration the person trusts.
fn trusted_repositories(state: &StateDir, record: &mut dyn FnMut(Level, &str, String)) {
    match crate::verify::TrustStore::load(state) {
        Err(e) => record(Level::Fail, "trusted repositories", e),
        Ok(store) if store.entries().is_empty() => record(
            Level::Ok,
            "trusted repositories",
            "none (`minicoder trust REPO` trusts one's own configuration)".to_string(),
        ),
        Ok(store) => {
            let listed: Vec<String> = store
                .entries()
                .iter()
                .map(|e| {
                    format!(
                        "{} at {}{}",
                        e.repo,
                        crate::runtime::short_hash(&e.hash),
                        if e.network { " with network" } else { "" }
                    )
                })
                .collect();
            record(Level::Ok, "trusted repositories", listed.join(", "));
        }
    }
}

fn check_state_dir(state: &StateDir) -> Result<String, String> {
    let root = state.root();
    state
        .ensure()
        .map_err(|e| format!("cannot use {}: {e}", root.display()))?;
    let probe = root.join(format!(".doctor-{}", crate::ids::random_hex(4)));
    std::fs::write(&probe, b"ok")
        .map_err(|e| format!("{} is not writable: {e}", root.display()))?;
    let _ = std::fs::remove_file(&probe);
    let free = rustix::fs::statvfs(root)
        .map(|s| s.f_bavail.saturating_mul(s.f_frsize) / (1 << 20))
        .unwrap_or(0);
    if free < 2048 {
        return Err(format!(
            "{} has only {free} MiB free; runs and the image build need at least 2 GiB",
            root.display()
        ));
    }
    Ok(format!(
        "{} is writable, {} GiB free; {}",
        root.display(),
        free / 1024,
        state_usage(state)
    ))
}

/// The providers a run could use as the environment stands (each one
/// pinned with `--model`; nothing is asked over the network).
/// Returns the usable providers' names, and why each other one is not.
fn usable_providers() -> (Vec<&'static str>, Vec<String>) {
    let env = crate::model::Env::from_pairs(std::env::vars());
    let mut usable = Vec::new();
    let mut unusable = Vec::new();
    let confirmed = env.flag("MINICODER_FREE_TIER_CONFIRMED");
    let mut unconfirmed = Vec::new();
    for kind in crate::model::provider::ProviderKind::ALL {
        if kind.is_free_tier() && !confirmed {
            unconfirmed.push(kind.name());
            continue;
        }
        let selection = crate::model::ModelSelection {
            pinned: Some(kind.name().to_string()),
            benchmark: false,
        };
        match crate::model::ModelChain::from_env(&env, &selection) {
            Ok(_) => usable.push(kind.name()),
            Err(e) => unusable.push(format!("{}: {e}", kind.name())),
        }
    }
    if !unconfirmed.is_empty() {
        unusable.insert(
            0,
            format!(
                "{}: free-tier APIs, off until MINICODER_FREE_TIER_CONFIRMED=true",
                unconfirmed.join(", ")
            ),
        );
    }
    (usable, unusable)
}

/// `uses 213 MiB (runs 12 MiB, checkpoints 190 MiB, workspaces 0 MiB, other 11 MiB)`.
fn state_usage(state: &StateDir) -> String {
    let mib = |bytes: u64| bytes.div_ceil(1 << 20);
    let total = crate::runs::disk_usage(state.root());
    let runs = crate::runs::disk_usage(&state.runs_dir());
    let checkpoints = crate::runs::disk_usage(&state.checkpoints_dir());
    let workspaces = crate::runs::disk_usage(&state.workspaces_dir());
    let other = total.saturating_sub(runs + checkpoints + workspaces);
    format!(
        "uses {} MiB (runs {} MiB, checkpoints {} MiB, workspaces {} MiB, other {} MiB); `minicoder gc --older-than 7d` frees old runs",
        mib(total),
        mib(runs),
        mib(checkpoints),
        mib(workspaces),
        mib(other)
    )
}
