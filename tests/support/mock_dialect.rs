//! How the mock server speaks: the idealised OpenAI format, or the dialects
//! of Gemini's and DeepSeek's OpenAI-compatible endpoints as their users
//! have recorded them (openai/openai-python#2806, THU-MAIC/OpenMAIC#1556,
//! open-webui/computer#224, QwenLM/qwen-code#3579, Gemini's thought-signature
//! and DeepSeek's thinking-mode documentation).
//!
//! In a dialect, the server hands out hidden state (a thought signature on
//! the first tool call of a reply, or the reply's reasoning) and remembers
//! it; a later request whose history lacks it, or carries it changed, is
//! refused with the provider's real HTTP 400 — as the providers do.

use std::collections::HashMap;

use serde_json::{Value, json};

/// The text every DeepSeek reasoning starts with, for tests to look for.
pub const REASONING_MARKER: &str = "hidden-chain-of-thought";

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Dialect {
    /// The OpenAI format, ids `call_1`, … in each reply.
    #[default]
    OpenAi,
    /// Gemini: index-less whole tool calls with `extra_content` signatures,
    /// chunks without `id`/`created`, `finish_reason: "stop"` on tool turns.
    Gemini,
    /// DeepSeek in thinking mode: `reasoning_content` beside the content.
    DeepSeek,
}

/// Variations of Gemini's stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// Each call's arguments in two index-less, id-less deltas.
    pub split_arguments: bool,
    /// The signature in a metadata-only delta after its call.
    pub late_signature: bool,
}

/// What one reply should say.
#[derive(Debug, Clone)]
pub struct Completion {
    pub content: Option<String>,
    /// Tool name and the raw arguments text (valid JSON or not).
    pub calls: Vec<(String, String)>,
    pub usage: Option<(u32, u32)>,
    /// Input tokens reported as served from the prompt cache.
    pub cached: u32,
    pub shape: Shape,
}

/// Hidden state handed out, by tool call id.
#[derive(Debug, Default)]
pub struct Ledger {
    next: u64,
    pub signatures: HashMap<String, Value>,
    pub reasoning: HashMap<String, String>,
    /// In the order they were handed out.
    pub order: Vec<String>,
}

/// A rendered reply: one JSON body, or SSE `data:` payloads.
pub enum Rendered {
    Json(String),
    Events(Vec<String>),
}

/// Renders `completion` in `dialect`, recording what it hands out.
pub fn render(
    dialect: Dialect,
    completion: &Completion,
    stream: bool,
    model: &str,
    ledger: &mut Ledger,
) -> Rendered {
    ledger.next += 1;
    let n = ledger.next;
    let ids: Vec<String> = (0..completion.calls.len())
        .map(|i| match dialect {
            Dialect::OpenAi => format!("call_{}", i + 1),
            Dialect::Gemini => format!("function-call-{n}-{}", i + 1),
            Dialect::DeepSeek => format!("call_0{i}_{n:08x}"),
        })
        .collect();
    let signature = (dialect == Dialect::Gemini && !ids.is_empty()).then(|| {
        let value = json!({"google": {"thought_signature": format!("CiQB{n:04}+Tm8gbm9ybWFsaXNpbmc/ICAg=")}});
        ledger.signatures.insert(ids[0].clone(), value.clone());
        value
    });
    let reasoning = (dialect == Dialect::DeepSeek).then(|| {
        let text = format!(
            "{REASONING_MARKER} #{n}: the failing test points at page_count → read it, then fix it.\n"
        );
        for id in &ids {
            ledger.reasoning.insert(id.clone(), text.clone());
        }
        text
    });
    ledger.order.extend(ids.iter().cloned());
    let calls: Vec<Call> = completion
        .calls
        .iter()
        .zip(&ids)
        .enumerate()
        .map(|(i, ((name, args), id))| Call {
            id: id.clone(),
            name: name.clone(),
            args: args.clone(),
            extra: if i == 0 { signature.clone() } else { None },
        })
        .collect();
    let reply = Reply {
        dialect,
        model,
        completion,
        calls,
        reasoning,
    };
    if stream {
        Rendered::Events(reply.events())
    } else {
        Rendered::Json(reply.plain().to_string())
    }
}

struct Call {
    id: String,
    name: String,
    args: String,
    extra: Option<Value>,
}

struct Reply<'a> {
    dialect: Dialect,
    model: &'a str,
    completion: &'a Completion,
    calls: Vec<Call>,
    reasoning: Option<String>,
}

impl Reply<'_> {
    fn usage(&self) -> Value {
        self.completion.usage.map_or(Value::Null, |(input, output)| {
            let mut usage = json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output});
            let cached = self.completion.cached;
            if cached > 0 {
                // Each provider's own way of saying it.
                match self.dialect {
                    Dialect::DeepSeek => {
                        usage["prompt_cache_hit_tokens"] = json!(cached);
                        usage["prompt_cache_miss_tokens"] = json!(input.saturating_sub(cached));
                    }
                    Dialect::OpenAi | Dialect::Gemini => {
                        usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
                    }
                }
            }
            usage
        })
    }

    fn whole_call(call: &Call) -> Value {
        let mut value = json!({"id": call.id, "type": "function",
                               "function": {"name": call.name, "arguments": call.args}});
        if let Some(extra) = &call.extra {
            value["extra_content"] = extra.clone();
        }
        value
    }

    fn plain(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.completion.content});
        if !self.calls.is_empty() {
            message["tool_calls"] = self.calls.iter().map(Self::whole_call).collect();
        }
        if let Some(reasoning) = &self.reasoning {
            message["reasoning_content"] = json!(reasoning);
        }
        let finish = if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        let mut body = json!({
            "id": "chatcmpl-mock", "object": "chat.completion", "created": 1, "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        });
        if self.completion.usage.is_some() {
            body["usage"] = self.usage();
        }
        body
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> String {
        match self.dialect {
            // As measured: no id, no created, the choice index after the delta.
            Dialect::Gemini => {
                let mut choice = json!({"delta": delta, "index": 0});
                if let Some(finish) = finish {
                    choice["finish_reason"] = json!(finish);
                }
                json!({"choices": [choice], "model": self.model, "object": "chat.completion.chunk"})
            }
            Dialect::OpenAi | Dialect::DeepSeek => json!({
                "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1,
                "model": self.model, "system_fingerprint": "fp_mock",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
                "usage": null
            }),
        }
        .to_string()
    }

    fn events(&self) -> Vec<String> {
        let mut events = Vec::new();
        match &self.reasoning {
            Some(reasoning) => {
                events.push(self.chunk(
                    json!({"role": "assistant", "content": null, "reasoning_content": ""}),
                    None,
                ));
                for piece in split_in(reasoning, 3) {
                    events.push(
                        self.chunk(json!({"content": null, "reasoning_content": piece}), None),
                    );
                }
            }
            None if self.dialect == Dialect::OpenAi => {
                events.push(self.chunk(json!({"role": "assistant", "content": ""}), None));
            }
            None => {}
        }
        if let Some(text) = &self.completion.content {
            let chars: Vec<char> = text.chars().collect();
            for piece in chars.chunks(4) {
                let piece: String = piece.iter().collect();
                events.push(self.chunk(json!({"content": piece}), None));
            }
        }
        match self.dialect {
            Dialect::Gemini => self.gemini_calls(&mut events),
            Dialect::OpenAi | Dialect::DeepSeek => self.indexed_calls(&mut events),
        }
        let usage = self.usage();
        match self.dialect {
            // Gemini ends every turn with "stop" and puts the usage on it.
            Dialect::Gemini => {
                let mut last: Value =
                    serde_json::from_str(&self.chunk(json!({}), Some("stop"))).unwrap_or_default();
                if !usage.is_null() {
                    last["usage"] = usage;
                }
                events.push(last.to_string());
            }
            Dialect::OpenAi | Dialect::DeepSeek => {
                let finish = if self.calls.is_empty() {
                    "stop"
                } else {
                    "tool_calls"
                };
                events.push(self.chunk(json!({}), Some(finish)));
                if !usage.is_null() {
                    events.push(
                        json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1,
                               "model": self.model, "choices": [], "usage": usage})
                        .to_string(),
                    );
                }
            }
        }
        events.push("[DONE]".to_string());
        events
    }

    /// Each call whole in one delta, without `index`.
    fn gemini_calls(&self, events: &mut Vec<String>) {
        let shape = self.completion.shape;
        for call in &self.calls {
            let mut whole = Self::whole_call(call);
            let extra = if shape.late_signature {
                whole
                    .as_object_mut()
                    .and_then(|o| o.remove("extra_content"))
            } else {
                None
            };
            if shape.split_arguments {
                let halves = split_in(&call.args, 2);
                whole["function"]["arguments"] = json!(halves[0]);
                events.push(self.chunk(json!({"role": "assistant", "tool_calls": [whole]}), None));
                events.push(self.chunk(
                    json!({"tool_calls": [{"function": {"arguments": halves[1]}}]}),
                    None,
                ));
            } else {
                events.push(self.chunk(json!({"role": "assistant", "tool_calls": [whole]}), None));
            }
            if let Some(extra) = extra {
                events.push(self.chunk(json!({"tool_calls": [{"extra_content": extra}]}), None));
            }
        }
    }

    /// The OpenAI way: id and name first, arguments in three interleaved pieces.
    fn indexed_calls(&self, events: &mut Vec<String>) {
        for (i, call) in self.calls.iter().enumerate() {
            events.push(self.chunk(
                json!({"tool_calls": [{"index": i, "id": call.id, "type": "function",
                                       "function": {"name": call.name, "arguments": ""}}]}),
                None,
            ));
        }
        let args: Vec<Vec<String>> = self.calls.iter().map(|c| split_in(&c.args, 3)).collect();
        for part in 0..3 {
            for (i, pieces) in args.iter().enumerate() {
                events.push(self.chunk(
                    json!({"tool_calls": [{"index": i, "function": {"arguments": pieces[part]}}]}),
                    None,
                ));
            }
        }
    }
}

/// `text` in `parts` pieces (some possibly empty), split on characters.
pub fn split_in(text: &str, parts: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let size = chars.len().div_ceil(parts).max(1);
    let mut pieces: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    pieces.resize(parts, String::new());
    pieces
}

/// The provider's refusal (HTTP 400 body) when the history of `request`
/// lacks or alters hidden state this server handed out.
pub fn refusal(dialect: Dialect, ledger: &Ledger, request: &Value) -> Option<String> {
    let messages = request["messages"].as_array()?;
    for (position, message) in messages.iter().enumerate() {
        if message["role"] != "assistant" {
            continue;
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            let id = call["id"].as_str().unwrap_or_default();
            match dialect {
                Dialect::Gemini => {
                    let Some(expected) = ledger.signatures.get(id) else {
                        continue;
                    };
                    let message = match call.get("extra_content") {
                        Some(given) if given == expected => continue,
                        Some(_) => "Corrupted thought signature.".to_string(),
                        None => format!(
                            "Function call is missing a thought_signature in functionCall parts. \
                             This is required for tools to work correctly, and missing \
                             thought_signature may lead to degraded model performance. Additional \
                             data, function call `default_api:{}` , position {}. Please refer to \
                             https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
                            call["function"]["name"].as_str().unwrap_or_default(),
                            position + 1
                        ),
                    };
                    return Some(
                        json!([{"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}])
                            .to_string(),
                    );
                }
                Dialect::DeepSeek => {
                    let Some(expected) = ledger.reasoning.get(id) else {
                        continue;
                    };
                    if message["reasoning_content"].as_str() == Some(expected.as_str()) {
                        continue;
                    }
                    return Some(
                        json!({"error": {
                            "message": "The `reasoning_content` in the thinking mode must be passed back to the API.",
                            "type": "invalid_request_error", "param": null, "code": "invalid_request_error"}})
                        .to_string(),
                    );
                }
                Dialect::OpenAi => return None,
            }
        }
    }
    None
}
