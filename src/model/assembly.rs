//! Builds one reply from stream chunks, whatever dialect they speak.
//!
//! Tool-call pieces are matched to calls by `index` when present and by id
//! or arrival order when not: OpenAI splits a call over pieces that share an
//! `index`; Gemini streams each call whole, without `index`, may split its
//! arguments over index-less pieces and may send its thought signature in a
//! piece of its own; Qwen repeats the id on every piece; some gateways put
//! every call under index 0 with a new id, or append a second call's
//! arguments to the first call (repaired in [`split_concatenated`]). A tool
//! call is a tool call whatever the `finish_reason` says.

use serde_json::{Map, Value};

use super::decode::{ToolCallPiece, WireReply, WireUsage};
use super::types::{ProviderState, ToolCall};

/// The most a reply may hold (text, reasoning, arguments and provider
/// fields together); a larger one is refused rather than kept in memory.
pub(crate) const MAX_REPLY_CHARS: usize = 8 * 1024 * 1024;

/// What a reply carries, before the model id and the usage fallback are added.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ReplyParts {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<WireUsage>,
    /// Message-level provider fields (origin not yet set).
    pub provider: Map<String, Value>,
}

#[derive(Debug, Default)]
struct PartialCall {
    index: Option<u32>,
    id: String,
    name: String,
    arguments: String,
    fields: Map<String, Value>,
}

/// Accumulates the chunks of one streamed reply.
#[derive(Debug, Default)]
pub(crate) struct StreamAssembler {
    content: String,
    reasoning: String,
    message_fields: Map<String, Value>,
    calls: Vec<PartialCall>,
    /// Provider fields that arrived before any call they could belong to.
    pending_fields: Map<String, Value>,
    usage: Option<WireUsage>,
    finished: bool,
    size: usize,
}

impl StreamAssembler {
    /// Takes one chunk; returns the visible text it adds, if any. Errors when
    /// the reply grows past [`MAX_REPLY_CHARS`].
    pub(crate) fn push(&mut self, chunk: WireReply) -> Result<Option<String>, String> {
        if let Some(usage) = chunk.usage.and_then(WireUsage::given) {
            self.usage = Some(usage);
        }
        let mut added = String::new();
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
            let Some(delta) = choice.message else {
                continue;
            };
            if let Some(text) = delta.text() {
                added.push_str(&text);
            }
            let mut fields = delta.kept_fields();
            if let Some(Value::String(piece)) = fields.remove("reasoning_content") {
                self.grow(piece.len())?;
                self.reasoning.push_str(&piece);
            }
            self.grow(fields_len(&fields))?;
            merge(&mut self.message_fields, fields);
            for piece in delta.tool_calls {
                self.add_call_piece(piece)?;
            }
        }
        self.grow(added.len())?;
        self.content.push_str(&added);
        Ok((!added.is_empty()).then_some(added))
    }

    fn grow(&mut self, chars: usize) -> Result<(), String> {
        self.size += chars;
        if self.size > MAX_REPLY_CHARS {
            return Err(format!(
                "the reply is larger than {} MiB; it was refused",
                MAX_REPLY_CHARS / (1024 * 1024)
            ));
        }
        Ok(())
    }

    fn add_call_piece(&mut self, piece: ToolCallPiece) -> Result<(), String> {
        let fields = piece.kept_fields();
        let id = piece.id.filter(|i| !i.is_empty());
        let (name, arguments) = piece
            .function
            .map(|f| (f.name.filter(|n| !n.is_empty()), f.arguments))
            .unwrap_or_default();
        self.grow(
            id.as_ref().map_or(0, String::len)
                + name.as_ref().map_or(0, String::len)
                + arguments.as_ref().map_or(0, String::len)
                + fields_len(&fields),
        )?;
        // A piece with nothing but provider fields (Gemini's signature-only
        // delta) belongs to the call it names, else to the latest call.
        if name.is_none() && arguments.as_deref().is_none_or(str::is_empty) {
            let target = match &id {
                Some(id) => self.calls.iter().rposition(|c| c.id == *id),
                None => match piece.index {
                    Some(index) => self.calls.iter().rposition(|c| c.index == Some(index)),
                    None => self.calls.len().checked_sub(1),
                },
            };
            match target {
                Some(pos) => {
                    merge(&mut self.calls[pos].fields, fields);
                    if let Some(id) = id {
                        self.calls[pos].id = id;
                    }
                    return Ok(());
                }
                None if id.is_none() => {
                    merge(&mut self.pending_fields, fields);
                    return Ok(());
                }
                None => {}
            }
        }
        let pos = self.call_for(piece.index, id.as_deref(), name.as_deref());
        let call = &mut self.calls[pos];
        if let Some(id) = id {
            call.id = id;
        }
        if let Some(name) = name
            && call.name != name
        {
            call.name.push_str(&name);
        }
        if let Some(arguments) = arguments {
            call.arguments.push_str(&arguments);
        }
        merge(&mut call.fields, fields);
        Ok(())
    }

    /// The call a piece continues, or a new one.
    fn call_for(&mut self, index: Option<u32>, id: Option<&str>, name: Option<&str>) -> usize {
        let existing = match (id, index) {
            // The same id continues its call; a new id always starts one,
            // even under an index already used (calls sent whole at index 0).
            (Some(id), _) => self.calls.iter().rposition(|c| c.id == id),
            (None, Some(index)) => self.calls.iter().rposition(|c| c.index == Some(index)),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let continues = existing.is_some_and(|pos| {
            let call = &self.calls[pos];
            // An id-less piece naming a tool after the call already has its
            // name and complete arguments is the next call (sent without ids).
            id.is_some()
                || !name.is_some_and(|name| {
                    !call.name.is_empty()
                        && !call.arguments.trim().is_empty()
                        && (call.name != name || is_complete_json(&call.arguments))
                })
        });
        match existing {
            Some(pos) if continues => pos,
            _ => {
                let fields = std::mem::take(&mut self.pending_fields);
                self.calls.push(PartialCall {
                    index,
                    fields,
                    ..PartialCall::default()
                });
                self.calls.len() - 1
            }
        }
    }

    /// Records the `data: [DONE]` sentinel.
    pub(crate) fn mark_done(&mut self) {
        self.finished = true;
    }

    /// The assembled reply parts; an error when the stream stopped before the
    /// reply was complete (no `[DONE]` and no finish reason).
    pub(crate) fn finish(mut self) -> Result<ReplyParts, String> {
        if !self.finished {
            return Err("the stream ended before the reply was complete".to_string());
        }
        if !self.reasoning.is_empty() {
            self.message_fields
                .insert("reasoning_content".into(), Value::String(self.reasoning));
        }
        let calls = split_concatenated(self.calls);
        let calls = calls
            .into_iter()
            .enumerate()
            .map(|(pos, c)| normalized_call(pos, c.id, c.name, c.arguments, c.fields))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ReplyParts {
            content: (!self.content.is_empty()).then_some(self.content),
            tool_calls: calls,
            usage: self.usage,
            provider: self.message_fields,
        })
    }
}

/// A call whose arguments are two or more JSON objects back to back got a
/// later call's arguments (a gateway attached them to the wrong index): each
/// extra object goes to the next call still without arguments, else becomes a
/// call of its own to the same tool.
fn split_concatenated(calls: Vec<PartialCall>) -> Vec<PartialCall> {
    let mut out: Vec<PartialCall> = Vec::with_capacity(calls.len());
    let mut spilled: Vec<(String, String, String)> = Vec::new();
    for mut call in calls {
        if call.arguments.trim().is_empty() && !spilled.is_empty() {
            let (_, _, arguments) = spilled.remove(0);
            call.arguments = arguments;
        }
        if let Some(mut values) = concatenated_objects(&call.arguments) {
            call.arguments = values.remove(0);
            for (n, arguments) in values.into_iter().enumerate() {
                spilled.push((
                    format!("{}-{}", call.id, n + 2),
                    call.name.clone(),
                    arguments,
                ));
            }
        }
        out.push(call);
    }
    for (id, name, arguments) in spilled {
        out.push(PartialCall {
            id,
            name,
            arguments,
            ..PartialCall::default()
        });
    }
    out
}

/// The texts of two or more JSON objects that make up `text` exactly
/// (whitespace between them aside); `None` for anything else.
fn concatenated_objects(text: &str) -> Option<Vec<String>> {
    let trimmed = text.trim();
    if !trimmed.starts_with('{') || serde_json::from_str::<Value>(trimmed).is_ok() {
        return None;
    }
    let mut values = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(trimmed).into_iter::<Value>();
    let mut start = 0;
    while let Some(item) = stream.next() {
        let value = item.ok()?;
        if !value.is_object() {
            return None;
        }
        let end = stream.byte_offset();
        values.push(trimmed[start..end].trim().to_string());
        start = end;
    }
    (values.len() >= 2).then_some(values)
}

fn is_complete_json(text: &str) -> bool {
    serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok()
}

/// One finished call: a generated id when the provider gave none, `{}` for
/// empty arguments; an error when it names no tool.
pub(crate) fn normalized_call(
    position: usize,
    id: String,
    name: String,
    arguments: String,
    fields: Map<String, Value>,
) -> Result<ToolCall, String> {
    if name.trim().is_empty() {
        return Err(format!("tool call #{} has no function name", position + 1));
    }
    Ok(ToolCall {
        id: if id.is_empty() {
            format!("call_{}", position + 1)
        } else {
            id
        },
        name,
        arguments: if arguments.trim().is_empty() {
            "{}".to_string()
        } else {
            arguments
        },
        provider: ProviderState {
            origin: String::new(),
            fields,
        },
    })
}

/// Adds `new` to `into`: objects merge key by key, anything else replaces.
fn merge(into: &mut Map<String, Value>, new: Map<String, Value>) {
    for (key, value) in new {
        match (into.get_mut(&key), value) {
            (Some(Value::Object(old)), Value::Object(value)) => merge(old, value),
            (_, value) => {
                into.insert(key, value);
            }
        }
    }
}

fn fields_len(fields: &Map<String, Value>) -> usize {
    if fields.is_empty() {
        return 0;
    }
    Value::Object(fields.clone()).to_string().len()
}

#[cfg(test)]
#[path = "assembly_tests.rs"]
mod tests;
