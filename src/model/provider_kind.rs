//! The providers minicoder knows and the environment variables that configure each.

pub(crate) const GEMINI_DEFAULT_BASE_URL: &str =
    "https://generativelanguage.googleapis.com/v1beta/openai/";
pub(crate) const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The providers minicoder knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProviderKind {
    Gemini,
    Qwen,
    Deepseek,
    OpenAi,
}

impl ProviderKind {
    pub(crate) const ALL: [ProviderKind; 4] =
        [Self::Gemini, Self::Qwen, Self::Deepseek, Self::OpenAi];

    /// The name used on the command line and in [`ModelId::provider`].
    pub fn name(self) -> &'static str {
        match self {
            Self::Gemini => "gemini",
            Self::Qwen => "qwen",
            Self::Deepseek => "deepseek",
            Self::OpenAi => "openai",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name.trim()))
    }

    /// Free-tier providers need `MINICODER_FREE_TIER_CONFIRMED=true`.
    pub(crate) fn is_free_tier(self) -> bool {
        !matches!(self, Self::OpenAi)
    }

    pub fn key_var(self) -> &'static str {
        match self {
            Self::Gemini => "GEMINI_API_KEY",
            Self::Qwen | Self::Deepseek => "FREELLMAPI_API_KEY",
            Self::OpenAi => "OPENAI_API_KEY",
        }
    }

    pub(crate) fn base_url_var(self) -> &'static str {
        match self {
            Self::Gemini => "GEMINI_BASE_URL",
            Self::Qwen | Self::Deepseek => "FREELLMAPI_BASE_URL",
            Self::OpenAi => "OPENAI_BASE_URL",
        }
    }

    pub(super) fn default_base_url(self) -> Option<&'static str> {
        match self {
            Self::Gemini => Some(GEMINI_DEFAULT_BASE_URL),
            Self::Qwen | Self::Deepseek => None,
            Self::OpenAi => Some(OPENAI_DEFAULT_BASE_URL),
        }
    }

    pub(crate) fn model_var(self) -> &'static str {
        match self {
            Self::Gemini => "GEMINI_MODEL",
            Self::Qwen => "FREELLMAPI_QWEN_MODEL",
            Self::Deepseek => "FREELLMAPI_DEEPSEEK_MODEL",
            Self::OpenAi => "OPENAI_MODEL",
        }
    }

    pub(super) fn default_model(self) -> Option<&'static str> {
        match self {
            Self::Gemini => Some("gemini-3.8-flash"),
            Self::Qwen => Some("qwen3.7-flash"),
            Self::Deepseek => Some("deepseek-v4-flash-0731"),
            Self::OpenAi => None,
        }
    }

    pub(super) fn context_var(self) -> &'static str {
        match self {
            Self::Gemini => "GEMINI_CONTEXT_LIMIT",
            Self::Qwen => "QWEN_CONTEXT_LIMIT",
            Self::Deepseek => "DEEPSEEK_CONTEXT_LIMIT",
            Self::OpenAi => "OPENAI_CONTEXT_LIMIT",
        }
    }

    pub(super) fn default_context_limit(self) -> u64 {
        match self {
            Self::Gemini | Self::Deepseek => 1_048_576,
            Self::Qwen => 262_144,
            Self::OpenAi => 128_000,
        }
    }
}
