//! Which providers a run may use, in which order, and whether it may fall back.

use super::env::Env;
use super::error::ModelError;
use super::provider::{ProviderEndpoint, ProviderKind, ProviderStatus, resolve_provider};
use super::types::ModelId;

/// The default chain, tried in this order.
pub(crate) const DEFAULT_CHAIN: [ProviderKind; 3] = [
    ProviderKind::Gemini,
    ProviderKind::Qwen,
    ProviderKind::Deepseek,
];

/// The user's choice from the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelSelection {
    /// `--model gemini|qwen|deepseek|openai` or `--model PROVIDER:MODEL`: pins
    /// one provider (and model) and disables fallback.
    pub pinned: Option<String>,
    /// `--benchmark`: the first available provider only, no fallback.
    pub benchmark: bool,
}

/// The providers a chain will use, resolved from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResolvedProviders {
    pub endpoints: Vec<ProviderEndpoint>,
    pub fallback: bool,
    /// Providers left out because a key or endpoint is missing, with the reason.
    pub skipped: Vec<(ModelId, String)>,
}

fn free_tier_refusal(what: &str) -> ModelError {
    ModelError::Config(format!(
        "{what} uses free-tier APIs (gemini, qwen, deepseek), whose providers may log or train on the \
         code and prompts sent to them; set MINICODER_FREE_TIER_CONFIRMED=true to accept that, or choose \
         another endpoint once with the line `model = \"openai\"` in config.toml of your configuration \
         directory (~/.config/minicoder; with OPENAI_API_KEY and OPENAI_MODEL set) or MINICODER_MODEL=openai, \
         or pass --model openai"
    ))
}

/// Resolves the chain for `selection`. Errors: a malformed setting or a missing
/// free-tier confirmation ([`ModelError::Config`]); no usable provider
/// ([`ModelError::Unavailable`]).
pub(crate) fn resolve_providers(
    env: &Env,
    selection: &ModelSelection,
) -> Result<ResolvedProviders, ModelError> {
    let free_tier_confirmed = env.flag("MINICODER_FREE_TIER_CONFIRMED");
    if let Some(pin) = selection.pinned.as_deref() {
        let (provider, model) = match pin.split_once(':') {
            Some((p, m)) if !m.trim().is_empty() => (p, Some(m.trim())),
            Some((p, _)) => (p, None),
            None => (pin, None),
        };
        let kind = ProviderKind::parse(provider).ok_or_else(|| {
            ModelError::Config(format!(
                "unknown provider {provider:?} in --model {pin:?}; use gemini, qwen, deepseek or \
                 openai, optionally as PROVIDER:MODEL"
            ))
        })?;
        if kind.is_free_tier() && !free_tier_confirmed {
            return Err(free_tier_refusal(&format!("--model {pin}")));
        }
        return match resolve_provider(kind, env, model).map_err(ModelError::Config)? {
            ProviderStatus::Ready(endpoint) => Ok(ResolvedProviders {
                endpoints: vec![endpoint],
                fallback: false,
                skipped: Vec::new(),
            }),
            ProviderStatus::Unavailable { id, reason } => Err(ModelError::Unavailable {
                tried: vec![(id, reason)],
            }),
        };
    }

    if !free_tier_confirmed {
        return Err(free_tier_refusal("the default model chain"));
    }
    let mut endpoints = Vec::new();
    let mut skipped = Vec::new();
    for kind in DEFAULT_CHAIN {
        match resolve_provider(kind, env, None).map_err(ModelError::Config)? {
            ProviderStatus::Ready(endpoint) => endpoints.push(endpoint),
            ProviderStatus::Unavailable { id, reason } => skipped.push((id, reason)),
        }
    }
    if endpoints.is_empty() {
        return Err(ModelError::Unavailable { tried: skipped });
    }
    if selection.benchmark {
        endpoints.truncate(1);
    }
    Ok(ResolvedProviders {
        fallback: !selection.benchmark && endpoints.len() > 1,
        endpoints,
        skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_env() -> Env {
        Env::from_pairs([
            ("MINICODER_FREE_TIER_CONFIRMED", "true"),
            ("GEMINI_API_KEY", "g"),
            ("FREELLMAPI_BASE_URL", "https://free.example/v1"),
            ("FREELLMAPI_API_KEY", "f"),
        ])
    }

    fn names(resolved: &ResolvedProviders) -> Vec<String> {
        resolved
            .endpoints
            .iter()
            .map(|e| e.id.provider.clone())
            .collect()
    }

    #[test]
    fn default_chain_in_order_with_fallback() {
        let resolved = resolve_providers(&free_env(), &ModelSelection::default()).expect("chain");
        assert_eq!(names(&resolved), ["gemini", "qwen", "deepseek"]);
        assert!(resolved.fallback);
    }

    #[test]
    fn benchmark_keeps_only_the_first_available() {
        let env = free_env().with("GEMINI_API_KEY", "");
        let selection = ModelSelection {
            pinned: None,
            benchmark: true,
        };
        let resolved = resolve_providers(&env, &selection).expect("chain");
        assert_eq!(names(&resolved), ["qwen"]);
        assert!(!resolved.fallback);
        assert_eq!(resolved.skipped.len(), 1);
    }

    #[test]
    fn pins_provider_and_model() {
        let selection = ModelSelection {
            pinned: Some("deepseek:deepseek-r9".into()),
            benchmark: false,
        };
        let resolved = resolve_providers(&free_env(), &selection).expect("chain");
        assert_eq!(resolved.endpoints.len(), 1);
        assert_eq!(resolved.endpoints[0].id.model, "deepseek-r9");
        assert!(!resolved.fallback);
    }

    #[test]
    fn openai_needs_no_free_tier_confirmation() {
        let env = Env::from_pairs([("OPENAI_API_KEY", "o"), ("OPENAI_MODEL", "gpt-q")]);
        let selection = ModelSelection {
            pinned: Some("openai".into()),
            benchmark: false,
        };
        let resolved = resolve_providers(&env, &selection).expect("chain");
        assert_eq!(resolved.endpoints[0].base_url, "https://api.openai.com/v1");
        let selection = ModelSelection {
            pinned: Some("gemini".into()),
            benchmark: false,
        };
        let err = resolve_providers(&env, &selection).expect_err("free tier");
        assert!(
            err.to_string()
                .contains("MINICODER_FREE_TIER_CONFIRMED=true"),
            "{err}"
        );
    }

    #[test]
    fn unknown_provider_is_a_config_error() {
        let selection = ModelSelection {
            pinned: Some("claude".into()),
            benchmark: false,
        };
        let err = resolve_providers(&free_env(), &selection).expect_err("unknown");
        assert!(matches!(err, ModelError::Config(ref m) if m.contains("gemini, qwen, deepseek")));
    }
}
