//! Fields a provider attaches to a reply that must come back to it, exactly
//! as received, on the following requests of the run: Gemini's
//! `extra_content` (its thought signatures) on each tool call, DeepSeek's
//! `reasoning_content` on the assistant message.
//!
//! This is hidden model state. It is kept with the history (and serialises,
//! so a run's private state can hold it for resume), but it is never part of
//! an event, an output, a report or the screen: its `Debug` form names the
//! fields and their sizes, never their values.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Raw provider fields of one assistant message or one tool call.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderState {
    /// The provider (`ModelId::provider`) whose reply carried the fields;
    /// they are sent back to that provider only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub origin: String,
    /// The fields, as received (never normalised).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub fields: Map<String, Value>,
}

impl ProviderState {
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The fields to send to `provider`: none when they came from another one.
    pub(crate) fn fields_for(&self, provider: &str) -> Option<&Map<String, Value>> {
        (!self.fields.is_empty() && self.origin == provider).then_some(&self.fields)
    }

    /// Characters these fields add to a request (for context estimates).
    pub(crate) fn char_len(&self) -> usize {
        self.fields
            .iter()
            .map(|(k, v)| k.len() + value_len(v))
            .sum()
    }

    /// DeepSeek's reasoning text, when the reply carried one.
    pub fn reasoning(&self) -> Option<&str> {
        self.fields.get("reasoning_content").and_then(Value::as_str)
    }
}

fn value_len(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(value_len).sum::<usize>() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 3 + value_len(v))
                .sum::<usize>()
                + 2
        }
        other => other.to_string().len(),
    }
}

impl std::fmt::Debug for ProviderState {
    // Names and sizes only: the values are hidden reasoning and signatures.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|(k, v)| format!("{k} ({} chars)", value_len(v)))
            .collect();
        f.debug_struct("ProviderState")
            .field("origin", &self.origin)
            .field("fields", &fields)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn debug_output_never_shows_the_values() {
        let mut state = ProviderState {
            origin: "deepseek".into(),
            fields: Map::new(),
        };
        state
            .fields
            .insert("reasoning_content".into(), json!("secret chain of thought"));
        let shown = format!("{state:?}");
        assert!(shown.contains("reasoning_content"), "{shown}");
        assert!(!shown.contains("secret"), "{shown}");
        assert_eq!(state.reasoning(), Some("secret chain of thought"));
        assert!(state.fields_for("deepseek").is_some());
        assert!(state.fields_for("qwen").is_none());
        let round: ProviderState =
            serde_json::from_value(serde_json::to_value(&state).expect("json")).expect("back");
        assert_eq!(round, state);
    }
}
