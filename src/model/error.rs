//! What can go wrong when asking a model, as the runtime sees it.

use super::types::ModelId;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Every provider of the chain failed (or none was configured).
    #[error("MODEL_UNAVAILABLE: {}", describe_tried(.tried))]
    Unavailable { tried: Vec<(ModelId, String)> },
    /// The provider refused the credentials; retrying or falling back would
    /// hide a configuration mistake, so the run stops here.
    #[error(
        "authentication with {}/{} failed: {detail}; check the provider's API key variable",
        .model.provider, .model.model
    )]
    Auth { model: ModelId, detail: String },
    /// The provider rejected the request itself (HTTP 400/422 and similar):
    /// sending it again, here or to another provider, would fail again.
    /// `detail` quotes the provider's message, bounded and escaped.
    #[error(
        "{}/{} rejected the request (HTTP {status}): {detail} (the request itself was refused, so it is neither retried nor sent to another provider)",
        .model.provider, .model.model
    )]
    Rejected {
        model: ModelId,
        status: u16,
        detail: String,
    },
    /// The configuration is wrong; the message names the setting to fix.
    #[error("model configuration error: {0}")]
    Config(String),
    /// The run's deadline came before a model answered.
    #[error(
        "the run's time budget ran out while waiting for the model; raise --timeout to allow more"
    )]
    DeadlineExceeded,
}

fn describe_tried(tried: &[(ModelId, String)]) -> String {
    if tried.is_empty() {
        return "no model provider is configured; set GEMINI_API_KEY or FREELLMAPI_BASE_URL and \
                FREELLMAPI_API_KEY (with MINICODER_FREE_TIER_CONFIRMED=true), or pass --model openai \
                with OPENAI_API_KEY"
            .to_string();
    }
    let parts: Vec<String> = tried
        .iter()
        .map(|(id, reason)| format!("{}/{}: {reason}", id.provider, id.model))
        .collect();
    format!("no model could answer ({})", parts.join("; "))
}
