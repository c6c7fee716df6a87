//! Provider configuration: which endpoint, key, model and context ceiling
//! each provider uses, read from an [`Env`].

use std::net::IpAddr;

use reqwest::Url;

use super::dialect::Reasoning;
use super::env::Env;
pub(crate) use super::provider_kind::ProviderKind;
use super::types::ModelId;

/// A provider ready to be called.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct ProviderEndpoint {
    pub kind: ProviderKind,
    pub id: ModelId,
    /// Base URL without a trailing slash; requests go to `{base_url}/chat/completions`.
    pub base_url: String,
    pub api_key: String,
    pub context_limit: u64,
    /// Whether thinking is asked for (`MINICODER_REASONING`, `{PROVIDER}_REASONING`).
    pub reasoning: Reasoning,
}

impl ProviderEndpoint {
    pub(crate) fn chat_completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

impl std::fmt::Debug for ProviderEndpoint {
    // The key is never printed, not even in debug output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderEndpoint")
            .field("id", &self.id)
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("context_limit", &self.context_limit)
            .field("reasoning", &self.reasoning)
            .finish()
    }
}

/// What the environment says about one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ProviderStatus {
    Ready(ProviderEndpoint),
    /// Not usable (a key or endpoint is missing); the reason says which variable to set.
    Unavailable {
        id: ModelId,
        reason: String,
    },
}

/// Reads one provider's configuration. `model` overrides the model variable.
/// A malformed setting (a bad URL, a non-numeric limit) is an `Err` with a
/// message that names the variable; a missing key is [`ProviderStatus::Unavailable`].
pub(crate) fn resolve_provider(
    kind: ProviderKind,
    env: &Env,
    model: Option<&str>,
) -> Result<ProviderStatus, String> {
    let model_name = match model.or_else(|| env.get(kind.model_var())) {
        Some(m) => m.to_string(),
        None => match kind.default_model() {
            Some(m) => m.to_string(),
            None => {
                return Err(format!(
                    "no model is configured for {}: set {} or pass --model {}:MODEL",
                    kind.name(),
                    kind.model_var(),
                    kind.name()
                ));
            }
        },
    };
    let id = ModelId {
        provider: kind.name().to_string(),
        model: model_name,
    };
    let context_limit = env.u64_or(kind.context_var(), kind.default_context_limit())?;
    if context_limit == 0 {
        return Err(format!(
            "{} must be a positive number of tokens",
            kind.context_var()
        ));
    }
    let reasoning = Reasoning::from_env(env, kind)?;
    let base_url = match env
        .get(kind.base_url_var())
        .or_else(|| kind.default_base_url())
    {
        Some(url) => validate_base_url(url, kind.base_url_var())?,
        None => {
            return Ok(ProviderStatus::Unavailable {
                id,
                reason: format!("{} is not set", kind.base_url_var()),
            });
        }
    };
    let Some(api_key) = env.get(kind.key_var()) else {
        return Ok(ProviderStatus::Unavailable {
            id,
            reason: format!("{} is not set", kind.key_var()),
        });
    };
    Ok(ProviderStatus::Ready(ProviderEndpoint {
        kind,
        id,
        base_url,
        api_key: api_key.to_string(),
        context_limit,
        reasoning,
    }))
}

/// Accepts HTTPS anywhere and plain HTTP only on loopback (127.0.0.0/8, ::1,
/// localhost). Returns the URL without a trailing slash.
pub(crate) fn validate_base_url(url: &str, variable: &str) -> Result<String, String> {
    let parsed = Url::parse(url).map_err(|e| {
        format!("{variable}={url:?} is not a valid URL ({e}); use https://HOST/PATH")
    })?;
    match parsed.scheme() {
        "https" => {}
        "http" => {
            if !is_loopback(&parsed) {
                return Err(format!(
                    "{variable}={url:?} uses plain HTTP to a non-loopback host, which would send the API \
                     key unencrypted; use an https:// URL (plain http:// is allowed only for \
                     127.0.0.0/8, ::1 and localhost)"
                ));
            }
        }
        other => {
            return Err(format!(
                "{variable}={url:?} has the scheme {other:?}; use an https:// URL"
            ));
        }
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("{variable}={url:?} has no host"));
    }
    Ok(url.trim_end_matches('/').to_string())
}

pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_anywhere_http_only_on_loopback() {
        assert!(
            validate_base_url("https://example.com/v1/", "X")
                .is_ok_and(|u| u == "https://example.com/v1")
        );
        for ok in [
            "http://127.0.0.1:8080/v1",
            "http://127.3.4.5/v1",
            "http://[::1]:9/v1",
            "http://localhost:1/v1",
        ] {
            assert!(
                validate_base_url(ok, "X").is_ok(),
                "{ok} should be accepted"
            );
        }
        for bad in [
            "http://example.com/v1",
            "http://10.0.0.1/v1",
            "http://[::2]/v1",
            "ftp://x/",
            "nonsense",
        ] {
            let err = validate_base_url(bad, "GEMINI_BASE_URL").expect_err(bad);
            assert!(err.contains("GEMINI_BASE_URL"), "{err}");
        }
    }

    #[test]
    fn defaults_and_overrides() {
        let env = Env::from_pairs([("GEMINI_API_KEY", "k"), ("GEMINI_CONTEXT_LIMIT", "1000")]);
        let ProviderStatus::Ready(gemini) =
            resolve_provider(ProviderKind::Gemini, &env, None).expect("ok")
        else {
            panic!("gemini should be ready")
        };
        assert_eq!(gemini.id.model, "gemini-3.8-flash");
        assert_eq!(gemini.context_limit, 1000);
        assert_eq!(
            gemini.chat_completions_url(),
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"
        );
        assert!(!format!("{gemini:?}").contains("\"k\""));

        let qwen = resolve_provider(ProviderKind::Qwen, &env, None).expect("ok");
        assert!(
            matches!(qwen, ProviderStatus::Unavailable { ref reason, .. } if reason.contains("FREELLMAPI_BASE_URL"))
        );
        let env = env.with("FREELLMAPI_BASE_URL", "https://free.example/v1");
        let deepseek = resolve_provider(ProviderKind::Deepseek, &env, None).expect("ok");
        assert!(
            matches!(deepseek, ProviderStatus::Unavailable { ref reason, ref id } if reason.contains("FREELLMAPI_API_KEY") && id.model == "deepseek-v4-flash-0731")
        );

        let openai = resolve_provider(ProviderKind::OpenAi, &env, None);
        assert!(openai.is_err_and(|e| e.contains("OPENAI_MODEL")));
        let openai = resolve_provider(ProviderKind::OpenAi, &env, Some("gpt-x")).expect("ok");
        assert!(
            matches!(openai, ProviderStatus::Unavailable { ref id, .. } if id.model == "gpt-x")
        );
    }
}
