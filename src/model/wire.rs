//! Mapping between our chat types and the Chat Completions wire format.
//!
//! Requests are built from async-openai's types, then serialised to JSON and
//! given what those types cannot carry: the provider state of the history
//! (sent back to the provider it came from, exactly as received) and the
//! dialect's thinking fields. Replies are read with [`super::decode`].

use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionStreamOptions, ChatCompletionTool,
    ChatCompletionToolChoiceOption, ChatCompletionTools, CreateChatCompletionRequest, FunctionCall,
    FunctionObject, ToolChoiceOptions,
};
use serde_json::Value;

use super::assembly::normalized_call;
pub(crate) use super::assembly::{ReplyParts, StreamAssembler};
use super::decode::WireReply;
use super::provider::ProviderEndpoint;
use super::types::{
    ChatMessage, ModelId, ModelReply, ModelRequest, ProviderState, Role, ToolCall, Usage,
    estimate_tokens,
};

/// The request body for `endpoint`, streamed or not.
pub(crate) fn chat_body(
    req: &ModelRequest,
    endpoint: &ProviderEndpoint,
    stream: bool,
) -> Result<Value, String> {
    let typed = chat_request(req, &endpoint.id.model, stream);
    let mut body =
        serde_json::to_value(typed).map_err(|e| format!("cannot encode the request: {e}"))?;
    let provider = endpoint.id.provider.as_str();
    if let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) {
        for (wire, message) in messages.iter_mut().zip(&req.messages) {
            add_provider_state(wire, message, provider);
        }
    }
    if let Some(object) = body.as_object_mut() {
        for (key, value) in endpoint.reasoning.request_fields(endpoint.kind) {
            object.insert(key, value);
        }
    }
    Ok(body)
}

/// Puts the fields `provider` attached to this message and its tool calls
/// back where they came from.
fn add_provider_state(wire: &mut Value, message: &ChatMessage, provider: &str) {
    if let (Some(fields), Some(object)) =
        (message.provider.fields_for(provider), wire.as_object_mut())
    {
        for (key, value) in fields {
            object.insert(key.clone(), value.clone());
        }
    }
    let Some(calls) = wire.get_mut("tool_calls").and_then(Value::as_array_mut) else {
        return;
    };
    for (wire_call, call) in calls.iter_mut().zip(&message.tool_calls) {
        if let (Some(fields), Some(object)) = (
            call.provider.fields_for(provider),
            wire_call.as_object_mut(),
        ) {
            for (key, value) in fields {
                object.insert(key.clone(), value.clone());
            }
        }
    }
}

/// The typed request for `model`, without provider state.
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

/// The text, tool calls and provider fields of a complete (non-streamed) reply.
pub(crate) fn parts_from_response(response: WireReply) -> Result<ReplyParts, String> {
    let usage = response.usage.and_then(|u| u.given());
    let Some(choice) = response.choices.into_iter().find(|c| c.index == 0) else {
        return Err("the reply has no choices".to_string());
    };
    let message = choice.message.unwrap_or_default();
    let content = message.text();
    let provider = message.kept_fields();
    let mut calls = Vec::new();
    for (position, call) in message.tool_calls.iter().enumerate() {
        let fields = call.kept_fields();
        let function = call.function.clone().unwrap_or_default();
        calls.push(normalized_call(
            position,
            call.id.clone().unwrap_or_default(),
            function.name.unwrap_or_default(),
            function.arguments.unwrap_or_default(),
            fields,
        )?);
    }
    Ok(ReplyParts {
        content,
        tool_calls: calls,
        usage,
        provider,
    })
}

/// A reply with the provider's token counts (or estimated ones), its
/// provider state marked as coming from `model.provider`.
pub(crate) fn reply(req: &ModelRequest, model: ModelId, parts: ReplyParts) -> ModelReply {
    let ReplyParts {
        content,
        mut tool_calls,
        usage,
        provider,
    } = parts;
    for call in &mut tool_calls {
        if !call.provider.is_empty() {
            call.provider.origin = model.provider.clone();
        }
    }
    let usage = match usage {
        Some(u) => Usage {
            input: u.prompt_tokens.unwrap_or(0),
            output: u.completion_tokens.unwrap_or(0),
            cached: u.cached(),
            estimated: false,
        },
        None => estimated_usage(req, content.as_deref(), &tool_calls),
    };
    let provider = ProviderState {
        origin: if provider.is_empty() {
            String::new()
        } else {
            model.provider.clone()
        },
        fields: provider,
    };
    ModelReply {
        content,
        tool_calls,
        usage,
        model,
        provider,
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
        cached: 0,
        estimated: true,
    }
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
