use serde_json::json;

use super::*;
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

#[test]
fn request_maps_messages_and_tools_exactly() {
    let wire = serde_json::to_value(chat_request(&request(), "m-1", true)).expect("json");
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
}

#[test]
fn plain_request_has_no_stream_options_and_no_tools_means_no_tool_choice() {
    let mut req = request();
    req.tools.clear();
    let wire = serde_json::to_value(chat_request(&req, "m", false)).expect("json");
    assert_eq!(wire["stream"], false);
    assert!(wire.get("stream_options").is_none());
    assert!(wire.get("tools").is_none());
    assert!(wire.get("tool_choice").is_none());
}

fn chunk(
    choices: serde_json::Value,
    usage: serde_json::Value,
) -> CreateChatCompletionStreamResponse {
    serde_json::from_value(json!({
        "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": choices, "usage": usage
    }))
    .expect("chunk")
}

#[test]
fn stream_assembles_split_tool_calls_by_index() {
    let mut asm = StreamAssembler::default();
    let text = asm.push(chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": "Let me "}}]),
        json!(null),
    ));
    assert_eq!(text.as_deref(), Some("Let me "));
    asm.push(chunk(
        json!([{"index": 0, "delta": {"content": "look."}}]),
        json!(null),
    ));
    asm.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}}]}}]), json!(null)));
    asm.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": "{\"pa"}},
        {"index": 1, "id": "call_b", "type": "function", "function": {"name": "ripgrep", "arguments": "{\"pattern\""}}]}}]), json!(null)));
    asm.push(chunk(
        json!([{"index": 0, "delta": {"tool_calls": [
        {"index": 1, "function": {"arguments": ": \"x\"}"}},
        {"index": 0, "function": {"arguments": "th\": \"a.py\"}"}}]}}]),
        json!(null),
    ));
    asm.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
        json!(null),
    ));
    asm.push(chunk(
        json!([]),
        json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}),
    ));
    let ReplyParts {
        content,
        tool_calls: calls,
        usage,
    } = asm.finish().expect("complete");
    assert_eq!(content.as_deref(), Some("Let me look."));
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_a", "read_file")
    );
    assert_eq!(calls[0].arguments, r#"{"path": "a.py"}"#);
    assert_eq!(
        (calls[1].id.as_str(), calls[1].arguments.as_str()),
        ("call_b", r#"{"pattern": "x"}"#)
    );
    assert_eq!(usage.map(|u| u.prompt_tokens), Some(11));
}

#[test]
fn complete_calls_under_one_index_stay_separate() {
    let mut asm = StreamAssembler::default();
    for (id, name) in [("x1", "list_tree"), ("x2", "read_file")] {
        asm.push(chunk(json!([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]}}]), json!(null)));
    }
    asm.mark_done();
    let ReplyParts {
        tool_calls: calls,
        usage,
        ..
    } = asm.finish().expect("complete");
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["list_tree", "read_file"]);
    assert!(usage.is_none());
}

#[test]
fn a_stream_without_an_end_is_incomplete() {
    let mut asm = StreamAssembler::default();
    asm.push(chunk(
        json!([{"index": 0, "delta": {"content": "half"}}]),
        json!(null),
    ));
    assert!(asm.finish().is_err_and(|e| e.contains("ended before")));
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
}
