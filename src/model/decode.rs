//! What providers send back, decoded leniently.
//!
//! async-openai's response types require fields that real providers leave
//! out (Gemini's stream chunks carry neither `id` nor `created`, tool-call
//! pieces come without `index`), so replies are read into these types, where
//! everything is optional and `null` counts as absent. Provider fields that
//! must round-trip are kept raw (`serde_json::Value`), never normalised.

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

/// Message-level fields kept and sent back: DeepSeek's reasoning, and any
/// `extra_content` a provider attaches to the message itself.
pub(crate) const MESSAGE_FIELDS: [&str; 2] = ["reasoning_content", "extra_content"];
/// Tool-call-level fields kept and sent back: Gemini's thought signatures.
pub(crate) const CALL_FIELDS: [&str; 1] = ["extra_content"];

/// `null` and absent both become the default.
fn nullable<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Token counts as providers report them. Cached input comes as OpenAI's
/// `prompt_tokens_details.cached_tokens` (Gemini's and Qwen's compatible
/// endpoints use it too) or DeepSeek's `prompt_cache_hit_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default, deserialize_with = "nullable")]
    pub prompt_tokens_details: PromptDetails,
    #[serde(default)]
    pub prompt_cache_hit_tokens: Option<u64>,
}

/// The breakdown of the prompt's tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub(crate) struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

impl WireUsage {
    /// Counts worth using: at least one of the two is given.
    pub(crate) fn given(self) -> Option<Self> {
        (self.prompt_tokens.is_some() || self.completion_tokens.is_some()).then_some(self)
    }

    /// Input tokens served from the provider's prompt cache, never more
    /// than the input (a gateway's nonsense is not believed).
    pub(crate) fn cached(&self) -> u64 {
        let cached = self
            .prompt_tokens_details
            .cached_tokens
            .or(self.prompt_cache_hit_tokens)
            .unwrap_or(0);
        cached.min(self.prompt_tokens.unwrap_or(0))
    }
}

/// A function name and (a piece of) its arguments.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct FunctionPiece {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "arguments_text")]
    pub arguments: Option<String>,
}

/// Arguments are text; a provider that sends an object gets it re-encoded.
fn arguments_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text),
        Some(other) => Some(other.to_string()),
    })
}

/// One tool call of a plain reply, or one piece of a streamed one.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct ToolCallPiece {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionPiece>,
    /// Everything else, from which [`CALL_FIELDS`] are kept.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl ToolCallPiece {
    pub(crate) fn kept_fields(&self) -> Map<String, Value> {
        keep(&self.rest, &CALL_FIELDS)
    }
}

/// The assistant message of a plain reply, or the delta of a stream chunk.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct MessagePart {
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub refusal: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    pub tool_calls: Vec<ToolCallPiece>,
    /// Everything else, from which [`MESSAGE_FIELDS`] are kept.
    #[serde(flatten)]
    pub rest: Map<String, Value>,
}

impl MessagePart {
    /// The visible text: a string, or the text parts of a content array.
    pub(crate) fn text(&self) -> Option<String> {
        let mut text = match &self.content {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
            _ => String::new(),
        };
        if let Some(refusal) = &self.refusal {
            text.push_str(refusal);
        }
        (!text.is_empty()).then_some(text)
    }

    pub(crate) fn kept_fields(&self) -> Map<String, Value> {
        keep(&self.rest, &MESSAGE_FIELDS)
    }
}

fn keep(rest: &Map<String, Value>, names: &[&str]) -> Map<String, Value> {
    names
        .iter()
        .filter_map(|name| match rest.get(*name) {
            None | Some(Value::Null) => None,
            Some(value) => Some((name.to_string(), value.clone())),
        })
        .collect()
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct Choice {
    #[serde(default, deserialize_with = "nullable")]
    pub index: u32,
    #[serde(default, alias = "delta")]
    pub message: Option<MessagePart>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

/// A plain reply or one stream chunk: the same shape, `message` or `delta`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub(crate) struct WireReply {
    #[serde(default, deserialize_with = "nullable")]
    pub choices: Vec<Choice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Set when a provider answers 200 with an error body.
    #[serde(default)]
    pub error: Option<Value>,
}

/// Decodes one JSON reply or chunk; an array of one error object (Gemini's
/// error shape) is read as that object.
pub(crate) fn decode(bytes: &[u8]) -> Result<WireReply, serde_json::Error> {
    let value: Value = serde_json::from_slice(bytes)?;
    let value = match value {
        Value::Array(mut items) if items.len() == 1 && items[0].get("error").is_some() => {
            items.remove(0)
        }
        other => other,
    };
    serde_json::from_value(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_null_fields_are_absent_and_provider_fields_are_kept_raw() {
        let chunk = br#"{"choices":[{"delta":{"role":"assistant","content":null,
            "reasoning_content":"think","tool_calls":[{"id":"a","type":"function",
            "function":{"name":"git","arguments":{"op":"status"}},
            "extra_content":{"google":{"thought_signature":"c2ln+/="}}}]},"index":null}],
            "model":"m","object":"chat.completion.chunk","usage":null}"#;
        let reply = decode(chunk).expect("decodes without id or created");
        let choice = &reply.choices[0];
        assert_eq!(choice.index, 0);
        let delta = choice.message.as_ref().expect("delta");
        assert_eq!(delta.text(), None);
        assert_eq!(delta.kept_fields()["reasoning_content"], "think");
        let call = &delta.tool_calls[0];
        assert_eq!(call.index, None);
        assert_eq!(
            call.function.as_ref().and_then(|f| f.arguments.as_deref()),
            Some(r#"{"op":"status"}"#)
        );
        assert_eq!(
            Value::Object(call.kept_fields()),
            serde_json::json!({"extra_content": {"google": {"thought_signature": "c2ln+/="}}})
        );
        assert!(reply.usage.is_none());
    }

    #[test]
    fn content_arrays_and_error_arrays() {
        let reply = decode(br#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#)
            .expect("decodes");
        assert_eq!(
            reply.choices[0]
                .message
                .as_ref()
                .and_then(MessagePart::text)
                .as_deref(),
            Some("ab")
        );
        let error =
            decode(br#"[{"error":{"code":400,"message":"no","status":"INVALID_ARGUMENT"}}]"#)
                .expect("decodes");
        assert_eq!(error.error.expect("error")["code"], 400);
    }
}
