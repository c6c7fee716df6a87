use serde_json::json;

use super::*;
use crate::model::dialect::Reasoning;
use crate::model::provider::ProviderKind;
use crate::model::types::ToolSpec;

fn request() -> ModelRequest {
    ModelRequest {
        messages: vec![
            ChatMessage::system("be brief"),
            ChatMessage::user("fix it"),
            ChatMessage::assistant(
                Some("looking".into()),
                vec![ToolCall {
                    id: "call_9".into(),
                    name: "read_file".into(),
                    arguments: r#"{"path":"a.py"}"#.into(),
                    ..ToolCall::default()
                }],
            ),
            ChatMessage::tool_result("call_9", "1: x = 1"),
        ],
        tools: vec![ToolSpec {
            name: "read_file".into(),
            description: "reads".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        }],
    }
}

fn endpoint(kind: ProviderKind, model: &str) -> ProviderEndpoint {
    ProviderEndpoint {
        kind,
        id: ModelId {
            provider: kind.name().into(),
            model: model.into(),
        },
        base_url: "https://example.invalid/v1".into(),
        api_key: "k".into(),
        context_limit: 1000,
        reasoning: Reasoning::ProviderDefault,
    }
}

fn body(req: &ModelRequest, endpoint: &ProviderEndpoint, stream: bool) -> Value {
    chat_body(req, endpoint, stream).expect("encodes")
}

#[test]
fn request_maps_messages_and_tools_exactly() {
    let wire = body(&request(), &endpoint(ProviderKind::OpenAi, "m-1"), true);
    assert_eq!(wire["model"], "m-1");
    assert_eq!(wire["stream"], true);
    assert_eq!(wire["stream_options"]["include_usage"], true);
    assert_eq!(wire["tool_choice"], "auto");
    assert_eq!(wire["tools"][0]["type"], "function");
    assert_eq!(wire["tools"][0]["function"]["name"], "read_file");
    assert_eq!(wire["tools"][0]["function"]["parameters"]["type"], "object");
    let messages = wire["messages"].as_array().expect("messages");
    assert_eq!(
        messages[0],
        json!({"role": "system", "content": "be brief"})
    );
    assert_eq!(messages[1], json!({"role": "user", "content": "fix it"}));
    assert_eq!(
        messages[2],
        json!({"role": "assistant", "content": "looking", "tool_calls": [
            {"type": "function", "id": "call_9", "function": {"name": "read_file", "arguments": "{\"path\":\"a.py\"}"}}
        ]})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "content": "1: x = 1", "tool_call_id": "call_9"})
    );
    for thinking in ["reasoning_effort", "thinking", "enable_thinking"] {
        assert!(
            wire.get(thinking).is_none(),
            "{thinking} was not configured"
        );
    }
}

#[test]
fn plain_request_has_no_stream_options_and_no_tools_means_no_tool_choice() {
    let mut req = request();
    req.tools.clear();
    let wire = body(&req, &endpoint(ProviderKind::OpenAi, "m"), false);
    assert_eq!(wire["stream"], false);
    assert!(wire.get("stream_options").is_none());
    assert!(wire.get("tools").is_none());
    assert!(wire.get("tool_choice").is_none());
}

fn with_state(origin: &str, fields: Value) -> ProviderState {
    ProviderState {
        origin: origin.into(),
        fields: fields.as_object().cloned().expect("object"),
    }
}

#[test]
fn provider_state_goes_back_to_its_provider_only_exactly_as_received() {
    let signature = json!({"google": {"thought_signature": "Ej+/=\u{e9}\"x"}});
    let mut req = request();
    req.messages[2].provider = with_state("deepseek", json!({"reasoning_content": "  why\n"}));
    req.messages[2].tool_calls[0].provider =
        with_state("gemini", json!({"extra_content": signature}));

    let gemini = body(&req, &endpoint(ProviderKind::Gemini, "g"), true);
    let sent = &gemini["messages"][2];
    assert_eq!(sent["tool_calls"][0]["extra_content"], signature);
    assert!(sent.get("reasoning_content").is_none(), "{sent}");

    let deepseek = body(&req, &endpoint(ProviderKind::Deepseek, "d"), true);
    let sent = &deepseek["messages"][2];
    assert_eq!(sent["reasoning_content"], "  why\n");
    assert!(
        sent["tool_calls"][0].get("extra_content").is_none(),
        "{sent}"
    );
}

#[test]
fn thinking_is_requested_in_the_dialect_when_configured() {
    let mut deepseek = endpoint(ProviderKind::Deepseek, "d");
    deepseek.reasoning = Reasoning::On;
    assert_eq!(
        body(&request(), &deepseek, true)["thinking"],
        json!({"type": "enabled"})
    );
    let mut qwen = endpoint(ProviderKind::Qwen, "q");
    qwen.reasoning = Reasoning::Off;
    assert_eq!(body(&request(), &qwen, true)["enable_thinking"], false);
}

#[test]
fn reply_marks_the_origin_and_the_history_message_keeps_it() {
    let parts = ReplyParts {
        content: Some("visible".into()),
        tool_calls: vec![ToolCall {
            id: "c".into(),
            name: "git".into(),
            arguments: "{}".into(),
            provider: with_state(
                "",
                json!({"extra_content": {"google": {"thought_signature": "s"}}}),
            ),
        }],
        usage: None,
        provider: json!({"reasoning_content": "hidden"})
            .as_object()
            .cloned()
            .expect("object"),
    };
    let model = ModelId {
        provider: "gemini".into(),
        model: "m".into(),
    };
    let reply = reply(&request(), model, parts);
    assert_eq!(reply.provider.origin, "gemini");
    assert_eq!(reply.tool_calls[0].provider.origin, "gemini");
    let message = ChatMessage::from_reply(&reply);
    assert_eq!(message.content.as_deref(), Some("visible"));
    assert_eq!(message.provider.reasoning(), Some("hidden"));
    assert_eq!(message.tool_calls, reply.tool_calls);
    // The state counts toward the context: it is sent back.
    assert!(message.char_len() > "visible".len() + "hidden".len());
    // Serialised for resume, it keeps the state; the shareable form does not.
    let private = serde_json::to_string(&message).expect("json");
    assert!(private.contains("hidden") && private.contains("thought_signature"));
    let back: ChatMessage = serde_json::from_str(&private).expect("back");
    assert_eq!(back, message);
    let shared = serde_json::to_string(&message.shareable()).expect("json");
    assert!(
        !shared.contains("hidden") && !shared.contains("thought_signature"),
        "{shared}"
    );
}

#[test]
fn plain_replies_keep_calls_whatever_the_finish_reason() {
    let response = crate::model::decode::decode(
        br#"{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant",
        "reasoning_content":"r","content":null,"tool_calls":[{"id":"x","type":"function",
        "function":{"name":"git","arguments":""},"extra_content":{"google":{"thought_signature":"s"}}}]}}],
        "usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
    )
    .expect("decodes");
    let parts = parts_from_response(response).expect("parts");
    assert_eq!(parts.tool_calls.len(), 1);
    assert_eq!(parts.tool_calls[0].arguments, "{}");
    assert_eq!(
        parts.tool_calls[0].provider.fields["extra_content"]["google"]["thought_signature"],
        "s"
    );
    assert_eq!(parts.provider["reasoning_content"], "r");
    assert_eq!(parts.usage.and_then(|u| u.prompt_tokens), Some(3));
}

#[test]
fn usage_is_estimated_when_absent() {
    let req = request();
    let parts = ReplyParts {
        content: Some("abcd".into()),
        ..ReplyParts::default()
    };
    let model = ModelId {
        provider: "p".into(),
        model: "m".into(),
    };
    let reply = reply(&req, model, parts);
    assert!(reply.usage.estimated);
    assert_eq!(reply.usage.output, 1);
    assert!(reply.usage.input > 5);
    assert!(reply.provider.is_empty() && reply.provider.origin.is_empty());
}

#[test]
fn cached_input_is_read_as_each_provider_reports_it() {
    let usage = |json: &str| {
        let response = crate::model::decode::decode(
            format!(
                r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"ok"}}}}],"usage":{json}}}"#
            )
            .as_bytes(),
        )
        .expect("decodes");
        response.usage.expect("usage").cached()
    };
    // OpenAI, and Gemini's and Qwen's compatible endpoints.
    assert_eq!(
        usage(
            r#"{"prompt_tokens":900,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":768}}"#
        ),
        768
    );
    // DeepSeek.
    assert_eq!(
        usage(
            r#"{"prompt_tokens":900,"completion_tokens":5,"prompt_cache_hit_tokens":640,"prompt_cache_miss_tokens":260}"#
        ),
        640
    );
    // None reported, a null breakdown, or more cached than sent.
    assert_eq!(usage(r#"{"prompt_tokens":900,"completion_tokens":5}"#), 0);
    assert_eq!(
        usage(r#"{"prompt_tokens":900,"completion_tokens":5,"prompt_tokens_details":null}"#),
        0
    );
    assert_eq!(
        usage(
            r#"{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":99}}"#
        ),
        10
    );
}
