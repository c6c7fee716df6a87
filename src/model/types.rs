//! Provider-neutral chat types: what the agent sends to a model and gets back.
//! The OpenAI-compatible adapter maps these to and from the wire format.

use serde::{Deserialize, Serialize};

pub use super::provider_state::ProviderState;
pub use crate::protocol::{ModelId, Usage};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One tool call requested by the model. `arguments` is the raw JSON text as
/// the model produced it (it may be invalid; the agent answers that with an
/// error result).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
    /// Fields the provider attached to this call (Gemini's `extra_content`),
    /// sent back with it; never shown or logged.
    #[serde(default, skip_serializing_if = "ProviderState::is_empty")]
    pub provider: ProviderState,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Set on assistant messages that call tools.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Set on `Role::Tool` messages: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Fields the provider attached to this assistant message (DeepSeek's
    /// `reasoning_content`), sent back with it; never shown or logged.
    #[serde(default, skip_serializing_if = "ProviderState::is_empty")]
    pub provider: ProviderState,
}

impl ChatMessage {
    pub fn system(text: impl Into<String>) -> Self {
        Self::text(Role::System, text)
    }

    pub fn user(text: impl Into<String>) -> Self {
        Self::text(Role::User, text)
    }

    pub fn assistant(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        Self {
            role: Role::Assistant,
            content,
            tool_calls,
            tool_call_id: None,
            provider: ProviderState::default(),
        }
    }

    /// The history message of a reply: its text, its tool calls, and the
    /// provider state that must go back to the provider with them.
    pub fn from_reply(reply: &ModelReply) -> Self {
        Self {
            provider: reply.provider.clone(),
            ..Self::assistant(reply.content.clone(), reply.tool_calls.clone())
        }
    }

    pub fn tool_result(call_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            role: Role::Tool,
            content: Some(text.into()),
            tool_calls: Vec::new(),
            tool_call_id: Some(call_id.into()),
            provider: ProviderState::default(),
        }
    }

    fn text(role: Role, text: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(text.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            provider: ProviderState::default(),
        }
    }

    /// This message without its provider state, for anything shareable
    /// (artifacts, reports): hidden reasoning and signatures stay private.
    #[cfg(test)]
    pub(crate) fn shareable(&self) -> Self {
        Self {
            provider: ProviderState::default(),
            tool_calls: self
                .tool_calls
                .iter()
                .map(|c| ToolCall {
                    provider: ProviderState::default(),
                    ..c.clone()
                })
                .collect(),
            ..self.clone()
        }
    }

    /// Characters this message contributes to the context (for estimates),
    /// provider state included: it is sent back too.
    pub(crate) fn char_len(&self) -> usize {
        self.content.as_deref().map_or(0, str::len)
            + self.provider.char_len()
            + self
                .tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.len() + c.id.len() + c.provider.char_len())
                .sum::<usize>()
    }
}

/// A tool offered to the model (the Chat Completions `tools` field).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    /// The visible text (never the hidden reasoning).
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub model: ModelId,
    /// Message-level provider state (DeepSeek's `reasoning_content`); goes
    /// into the history through [`ChatMessage::from_reply`], nowhere else.
    pub provider: ProviderState,
}

/// Estimated tokens of a text: a conservative four characters a token.
pub(crate) fn estimate_tokens(chars: usize) -> u64 {
    chars.div_ceil(4) as u64
}
