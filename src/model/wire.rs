//! Mapping between our chat types and the Chat Completions wire format
//! (async-openai's request, response and stream-chunk types).

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionStreamOptions, ChatCompletionTool,
    ChatCompletionToolChoiceOption, ChatCompletionTools, CompletionUsage,
    CreateChatCompletionRequest, CreateChatCompletionResponse, CreateChatCompletionStreamResponse,
    FunctionCall, FunctionObject, ToolChoiceOptions,
};

use super::types::{
    ChatMessage, ModelId, ModelReply, ModelRequest, Role, ToolCall, Usage, estimate_tokens,
};

/// The request body for `model`, streamed or not.
pub(crate) fn chat_request(
    req: &ModelRequest,
    model: &str,
    stream: bool,
) -> CreateChatCompletionRequest {
    let tools: Vec<ChatCompletionTools> = req
        .tools
        .iter()
        .map(|tool| {
            ChatCompletionTools::Function(ChatCompletionTool {
                function: FunctionObject {
                    name: tool.name.clone(),
                    description: Some(tool.description.clone()),
                    parameters: Some(tool.parameters.clone()),
                    strict: None,
                },
            })
        })
        .collect();
    let has_tools = !tools.is_empty();
    CreateChatCompletionRequest {
        messages: req.messages.iter().map(wire_message).collect(),
        model: model.to_string(),
        stream: Some(stream),
        stream_options: stream.then_some(ChatCompletionStreamOptions {
            include_usage: Some(true),
            include_obfuscation: None,
        }),
        tool_choice: has_tools.then_some(ChatCompletionToolChoiceOption::Mode(
            ToolChoiceOptions::Auto,
        )),
        tools: has_tools.then_some(tools),
        ..Default::default()
    }
}

fn wire_message(message: &ChatMessage) -> ChatCompletionRequestMessage {
    let text = message.content.clone().unwrap_or_default();
    match message.role {
        Role::System => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(text),
            name: None,
        }),
        Role::User => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(text),
            name: None,
        }),
        Role::Assistant => {
            let tool_calls: Vec<ChatCompletionMessageToolCalls> = message
                .tool_calls
                .iter()
                .map(|call| {
                    ChatCompletionMessageToolCalls::Function(ChatCompletionMessageToolCall {
                        id: call.id.clone(),
                        function: FunctionCall {
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        },
                    })
                })
                .collect();
            ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
                content: message
                    .content
                    .clone()
                    .map(ChatCompletionRequestAssistantMessageContent::Text),
                tool_calls: (!tool_calls.is_empty()).then_some(tool_calls),
                ..Default::default()
            })
        }
        Role::Tool => ChatCompletionRequestMessage::Tool(ChatCompletionRequestToolMessage {
            content: ChatCompletionRequestToolMessageContent::Text(text),
            tool_call_id: message.tool_call_id.clone().unwrap_or_default(),
        }),
    }
}

/// What a reply carries, before the model id and usage fallback are added.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ReplyParts {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Option<CompletionUsage>,
}

/// The text and tool calls of a complete (non-streamed) reply.
pub(crate) fn parts_from_response(
    response: CreateChatCompletionResponse,
) -> Result<ReplyParts, String> {
    let usage = response.usage;
    let Some(choice) = response.choices.into_iter().next() else {
        return Err("the reply has no choices".to_string());
    };
    let message = choice.message;
    let content = message.content.or(message.refusal);
    let mut calls = Vec::new();
    for (position, call) in message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let (id, name, arguments) = match call {
            ChatCompletionMessageToolCalls::Function(f) => {
                (f.id, f.function.name, f.function.arguments)
            }
            ChatCompletionMessageToolCalls::Custom(c) => {
                (c.id, c.custom_tool.name, c.custom_tool.input)
            }
        };
        calls.push(normalized_call(position, id, name, arguments)?);
    }
    Ok(ReplyParts {
        content,
        tool_calls: calls,
        usage,
    })
}

fn normalized_call(
    position: usize,
    id: String,
    name: String,
    arguments: String,
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
    })
}

#[derive(Debug, Default)]
struct PartialCall {
    index: u32,
    id: String,
    name: String,
    arguments: String,
}

/// Builds one reply from stream chunks. Tool calls arrive in pieces keyed by
/// `index`: the id and name usually first, the arguments split over several.
#[derive(Debug, Default)]
pub(crate) struct StreamAssembler {
    content: String,
    calls: Vec<PartialCall>,
    usage: Option<CompletionUsage>,
    finished: bool,
}

impl StreamAssembler {
    /// Takes one chunk; returns the text it adds, if any.
    pub(crate) fn push(&mut self, chunk: CreateChatCompletionStreamResponse) -> Option<String> {
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        let mut added = String::new();
        for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
            let delta = choice.delta;
            for text in [delta.content, delta.refusal].into_iter().flatten() {
                added.push_str(&text);
            }
            for piece in delta.tool_calls.unwrap_or_default() {
                let (name, arguments) = piece
                    .function
                    .map(|f| (f.name, f.arguments))
                    .unwrap_or_default();
                self.add_call_piece(piece.index, piece.id, name, arguments);
            }
        }
        self.content.push_str(&added);
        (!added.is_empty()).then_some(added)
    }

    fn add_call_piece(
        &mut self,
        index: u32,
        id: Option<String>,
        name: Option<String>,
        arguments: Option<String>,
    ) {
        let id = id.filter(|i| !i.is_empty());
        let latest = self.calls.iter().rposition(|c| c.index == index);
        // A new id on an index that already has one starts a new call (some
        // providers send every call complete under index 0).
        let starts_new = match (latest, &id) {
            (None, _) => true,
            (Some(pos), Some(new_id)) => {
                !self.calls[pos].id.is_empty() && self.calls[pos].id != *new_id
            }
            (Some(_), None) => false,
        };
        let pos = match latest {
            Some(pos) if !starts_new => pos,
            _ => {
                self.calls.push(PartialCall {
                    index,
                    ..PartialCall::default()
                });
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[pos];
        if let Some(id) = id {
            call.id = id;
        }
        if let Some(name) = name.filter(|n| !n.is_empty())
            && call.name != name
        {
            call.name.push_str(&name);
        }
        if let Some(arguments) = arguments {
            call.arguments.push_str(&arguments);
        }
    }

    /// Records the `data: [DONE]` sentinel.
    pub(crate) fn mark_done(&mut self) {
        self.finished = true;
    }

    /// The assembled reply parts; an error when the stream stopped before the
    /// reply was complete (no `[DONE]` and no finish reason).
    pub(crate) fn finish(self) -> Result<ReplyParts, String> {
        if !self.finished {
            return Err("the stream ended before the reply was complete".to_string());
        }
        let calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(pos, c)| normalized_call(pos, c.id, c.name, c.arguments))
            .collect::<Result<Vec<_>, _>>()?;
        let content = (!self.content.is_empty()).then_some(self.content);
        Ok(ReplyParts {
            content,
            tool_calls: calls,
            usage: self.usage,
        })
    }
}

/// A reply with the provider's token counts, or estimated ones.
pub(crate) fn reply(req: &ModelRequest, model: ModelId, parts: ReplyParts) -> ModelReply {
    let ReplyParts {
        content,
        tool_calls,
        usage,
    } = parts;
    let usage = match usage {
        Some(u) => Usage {
            input: u64::from(u.prompt_tokens),
            output: u64::from(u.completion_tokens),
            estimated: false,
        },
        None => estimated_usage(req, content.as_deref(), &tool_calls),
    };
    ModelReply {
        content,
        tool_calls,
        usage,
        model,
    }
}

/// Token counts estimated from the characters sent and received.
pub(crate) fn estimated_usage(
    req: &ModelRequest,
    content: Option<&str>,
    tool_calls: &[ToolCall],
) -> Usage {
    let input_chars = req
        .messages
        .iter()
        .map(ChatMessage::char_len)
        .sum::<usize>()
        + req
            .tools
            .iter()
            .map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len())
            .sum::<usize>();
    let output_chars = content.map_or(0, str::len)
        + tool_calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len())
            .sum::<usize>();
    Usage {
        input: estimate_tokens(input_chars),
        output: estimate_tokens(output_chars),
        estimated: true,
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
