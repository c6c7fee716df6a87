//! What each provider needs added to a request: whether to ask for thinking.
//!
//! Thinking is never requested unless configured: `MINICODER_REASONING=on`
//! (or `off`) sets it for every provider, `GEMINI_REASONING`,
//! `QWEN_REASONING`, `DEEPSEEK_REASONING` and `OPENAI_REASONING` for one.
//! Unset, the request carries no thinking field and the provider's own
//! default applies (DeepSeek V4 and Gemini 3 think by default; their hidden
//! state is sent back either way, see [`super::provider_state`]).

use serde_json::{Map, Value, json};

use super::env::Env;
use super::provider_kind::ProviderKind;

/// Whether to ask a provider for thinking.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Reasoning {
    /// Nothing is sent; the provider decides.
    #[default]
    ProviderDefault,
    On,
    Off,
}

impl Reasoning {
    /// Reads the provider's variable, else `MINICODER_REASONING`.
    pub fn from_env(env: &Env, kind: ProviderKind) -> Result<Self, String> {
        let own = reasoning_var(kind);
        for name in [own, "MINICODER_REASONING"] {
            if let Some(value) = env.get(name) {
                return match value.to_ascii_lowercase().as_str() {
                    "on" | "true" | "1" | "yes" => Ok(Self::On),
                    "off" | "false" | "0" | "no" => Ok(Self::Off),
                    _ => Err(format!(
                        "{name}={value:?} is not understood; set it to on or off (or leave it \
                         unset to keep the provider's default)"
                    )),
                };
            }
        }
        Ok(Self::ProviderDefault)
    }

    /// The top-level request fields that say so, in the provider's dialect.
    pub(crate) fn request_fields(self, kind: ProviderKind) -> Map<String, Value> {
        let fields = match (self, kind) {
            (Self::ProviderDefault, _) => json!({}),
            // Gemini 3 cannot think less than "minimal": signatures come anyway.
            (Self::On, ProviderKind::Gemini) => json!({"reasoning_effort": "high"}),
            (Self::Off, ProviderKind::Gemini) => json!({"reasoning_effort": "minimal"}),
            (Self::On, ProviderKind::Deepseek) => json!({"thinking": {"type": "enabled"}}),
            (Self::Off, ProviderKind::Deepseek) => json!({"thinking": {"type": "disabled"}}),
            (Self::On, ProviderKind::Qwen) => json!({"enable_thinking": true}),
            (Self::Off, ProviderKind::Qwen) => json!({"enable_thinking": false}),
            (Self::On, ProviderKind::OpenAi) => json!({"reasoning_effort": "high"}),
            // Models without reasoning refuse the field, so "off" sends nothing.
            (Self::Off, ProviderKind::OpenAi) => json!({}),
        };
        match fields {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }
}

fn reasoning_var(kind: ProviderKind) -> &'static str {
    match kind {
        ProviderKind::Gemini => "GEMINI_REASONING",
        ProviderKind::Qwen => "QWEN_REASONING",
        ProviderKind::Deepseek => "DEEPSEEK_REASONING",
        ProviderKind::OpenAi => "OPENAI_REASONING",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_means_nothing_is_requested() {
        let env = Env::default();
        for kind in ProviderKind::ALL {
            let reasoning = Reasoning::from_env(&env, kind).expect("valid");
            assert_eq!(reasoning, Reasoning::ProviderDefault);
            assert!(reasoning.request_fields(kind).is_empty());
        }
    }

    #[test]
    fn the_provider_variable_wins_over_the_global_one() {
        let env = Env::from_pairs([("MINICODER_REASONING", "on"), ("DEEPSEEK_REASONING", "off")]);
        let deepseek = Reasoning::from_env(&env, ProviderKind::Deepseek).expect("valid");
        assert_eq!(
            Value::Object(deepseek.request_fields(ProviderKind::Deepseek)),
            json!({"thinking": {"type": "disabled"}})
        );
        let gemini = Reasoning::from_env(&env, ProviderKind::Gemini).expect("valid");
        assert_eq!(
            Value::Object(gemini.request_fields(ProviderKind::Gemini)),
            json!({"reasoning_effort": "high"})
        );
        let bad = Env::from_pairs([("QWEN_REASONING", "maybe")]);
        assert!(
            Reasoning::from_env(&bad, ProviderKind::Qwen)
                .is_err_and(|e| e.contains("QWEN_REASONING"))
        );
    }
}
