//! The inputs of a run: flags over `MINICODER_*` environment variables over
//! defaults.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::protocol::ApprovalMode;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Limits {
    pub max_turns: u32,
    pub timeout_ms: u64,
    pub command_timeout_ms: u64,
    pub model_timeout_ms: u64,
    pub max_tokens: u64,
    /// The cost budget, in millionths of a dollar (needs prices).
    pub max_cost_micros: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_turns: 50,
            timeout_ms: 900_000,
            command_timeout_ms: 60_000,
            model_timeout_ms: 120_000,
            max_tokens: 2_000_000,
            max_cost_micros: None,
        }
    }
}

impl Limits {
    /// The defaults with `MINICODER_*` variables applied.
    pub fn from_env(env: &HashMap<String, String>) -> Result<Self, String> {
        Self::default().with_env(env)
    }

    /// These limits with `MINICODER_*` variables applied over them.
    pub fn with_env(self, env: &HashMap<String, String>) -> Result<Self, String> {
        let mut l = self;
        let num = |name: &str| -> Result<Option<u64>, String> {
            match env.get(name).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .map(Some)
                    .ok_or_else(|| format!("{name}={v:?} is not a positive whole number")),
            }
        };
        if let Some(n) = num("MINICODER_MAX_TURNS")? {
            l.max_turns =
                u32::try_from(n).map_err(|_| "MINICODER_MAX_TURNS is too large".to_string())?;
        }
        if let Some(n) = num("MINICODER_TIMEOUT_MS")? {
            l.timeout_ms = n;
        }
        if let Some(n) = num("MINICODER_COMMAND_TIMEOUT_MS")? {
            l.command_timeout_ms = n;
        }
        if let Some(n) = num("MINICODER_MODEL_TIMEOUT_MS")? {
            l.model_timeout_ms = n;
        }
        if let Some(n) = num("MINICODER_MAX_TOKENS")? {
            l.max_tokens = n;
        }
        if let Some(v) = env
            .get("MINICODER_MAX_COST")
            .filter(|v| !v.trim().is_empty())
        {
            l.max_cost_micros =
                Some(parse_usd(v).map_err(|e| format!("MINICODER_MAX_COST={v:?}: {e}"))?);
        }
        Ok(l)
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    pub(crate) fn command_timeout(&self) -> Duration {
        Duration::from_millis(self.command_timeout_ms)
    }
}

/// A budget in dollars (`2.50`, `$2.50`), in millionths of a dollar.
pub fn parse_usd(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let number = text.strip_prefix('$').unwrap_or(text).trim();
    let dollars: f64 = number
        .parse()
        .map_err(|_| "not an amount of dollars (like 2.50)".to_string())?;
    crate::protocol::budget_micros(dollars)
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub repo: PathBuf,
    pub task: String,
    pub limits: Limits,
    pub network: bool,
    pub artifact_dir: Option<PathBuf>,
    /// `--check NAME CMD` overrides, in order.
    pub checks: Vec<(String, String)>,
    pub approval: ApprovalMode,
    pub allow_zero_tests: bool,
    /// Whether the bootstrap may have the network at all
    /// (`MINICODER_BOOTSTRAP_NETWORK=false` says no): it gets it only when
    /// the project is trusted for it too.
    pub bootstrap_network: bool,
    /// The person trusts the repository's configuration for this run
    /// (`--trust-project`, or the session's answer), beyond what
    /// `minicoder trust` recorded.
    pub trust: Option<TrustGrant>,
    /// The run may change the repository's own configuration
    /// (`.minicoder.json`, `.minicoder/`); otherwise the tools refuse.
    pub allow_config_edits: bool,
    /// The person's hooks (none by default; front ends load them from the
    /// configuration directory).
    pub hooks: std::sync::Arc<crate::hooks::Hooks>,
    /// The person's MCP servers, whose tools the model is offered (none by
    /// default; front ends load them from the configuration directory).
    pub mcp: std::sync::Arc<crate::mcp_client::McpConfig>,
    /// A person can answer questions (the session).
    pub interactive: bool,
    /// Prices by model, from `config.toml` (empty: costs unknown).
    pub prices: std::sync::Arc<crate::protocol::PriceTable>,
}

/// Trust given for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustGrant {
    /// The configuration hash the person saw (`None`: as it is now).
    pub hash: Option<String>,
    /// With network for the bootstrap and the recipe.
    pub network: bool,
}

impl RunOptions {
    pub fn new(repo: impl Into<PathBuf>, task: impl Into<String>) -> Self {
        Self {
            repo: repo.into(),
            task: task.into(),
            limits: Limits::default(),
            network: false,
            artifact_dir: None,
            checks: Vec::new(),
            approval: ApprovalMode::Never,
            allow_zero_tests: false,
            bootstrap_network: true,
            trust: None,
            allow_config_edits: false,
            hooks: std::sync::Arc::default(),
            mcp: std::sync::Arc::default(),
            interactive: false,
            prices: Default::default(),
        }
    }

    /// A cost budget needs prices to be kept: without any, it is refused
    /// before anything starts (a model of the chain without a price stops the
    /// run at its first reply).
    pub fn check_cost_budget(&self) -> Result<(), String> {
        if self.limits.max_cost_micros.is_some() && self.prices.is_empty() {
            return Err(
                "a cost budget needs the models' prices: add them to config.toml, e.g. [prices.\"openai:gpt-5-mini\"] input = 0.25, cached_input = 0.025, output = 2.0 (dollars a million tokens)"
                    .into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn environment_overrides_defaults_and_bad_values_are_named() {
        let l = Limits::from_env(&env(&[
            ("MINICODER_MAX_TURNS", "7"),
            ("MINICODER_TIMEOUT_MS", "1000"),
        ]))
        .expect("limits");
        assert_eq!(l.max_turns, 7);
        assert_eq!(l.timeout_ms, 1000);
        assert_eq!(l.command_timeout_ms, 60_000);
        let e = Limits::from_env(&env(&[("MINICODER_MAX_TOKENS", "lots")])).expect_err("bad value");
        assert!(e.contains("MINICODER_MAX_TOKENS"), "{e}");
        assert!(Limits::from_env(&env(&[("MINICODER_MAX_TURNS", "0")])).is_err());
    }
}
