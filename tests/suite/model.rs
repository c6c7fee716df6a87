//! The OpenAI-compatible adapter against a mock server: streamed and plain
//! replies, split tool calls, usage, the wire format of tool results, and
//! replies that are broken, cut or late.

use crate::support;

use std::time::Duration;

use minicoder::model::ModelError;
use minicoder::model::types::{ChatMessage, ToolCall};
use serde_json::json;
use support::mock_openai::{MockOpenAi, MockResponse};
use support::model_harness::*;

#[tokio::test]
async fn streamed_tool_calls_split_across_chunks_are_assembled() {
    let server = MockOpenAi::start().await;
    server.push(
        MockResponse::sse_tool_calls(&[
            ("read_file", json!({"path": "src/app.py", "start_line": 1})),
            ("ripgrep", json!({"pattern": "def main"})),
        ])
        .with_content("Reading the code."),
    );
    let mut chain = chain(&env(&server, None));
    let asked = ask(&mut chain).await;
    let reply = asked.reply();
    assert_eq!(reply.content.as_deref(), Some("Reading the code."));
    assert_eq!(asked.streamed_text(), "Reading the code.");
    assert_eq!(reply.tool_calls.len(), 2);
    assert_eq!(reply.tool_calls[0].id, "call_1");
    assert_eq!(reply.tool_calls[0].name, "read_file");
    let args: serde_json::Value =
        serde_json::from_str(&reply.tool_calls[0].arguments).expect("json");
    assert_eq!(args, json!({"path": "src/app.py", "start_line": 1}));
    assert_eq!(reply.tool_calls[1].name, "ripgrep");
    assert_eq!(reply.usage.input, 100);
    assert_eq!(reply.usage.output, 20);
    assert!(!reply.usage.estimated);
    assert_eq!(reply.model, id("gemini", "gemini-test"));

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer gemini-test-key")
    );
    let body = requests[0].json();
    assert_eq!(body["model"], "gemini-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(requests[0].tool_names(), TOOL_NAMES);
}

#[tokio::test]
async fn plain_json_replies_work_streamed_or_not() {
    let server = MockOpenAi::start().await;
    server.push(MockResponse::tool_calls(&[(
        "list_tree",
        json!({"path": "."}),
    )]));
    server.push(MockResponse::text("All done."));
    // A streamed request answered with plain JSON.
    let mut streaming = chain(&env(&server, None));
    let asked = ask(&mut streaming).await;
    assert_eq!(asked.reply().tool_calls[0].name, "list_tree");
    assert_eq!(asked.reply().tool_calls[0].arguments, r#"{"path":"."}"#);
    // The non-streamed path.
    let mut plain = chain(&env(&server, None)).with_streaming(false);
    let asked = ask(&mut plain).await;
    assert_eq!(asked.reply().content.as_deref(), Some("All done."));
    assert!(asked.reply().tool_calls.is_empty());
    assert_eq!(asked.reply().usage.input, 100);
    let bodies: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.json()["stream"].clone())
        .collect();
    assert_eq!(bodies, [json!(true), json!(false)]);
    assert!(server.requests()[1].json().get("stream_options").is_none());
}

#[tokio::test]
async fn missing_usage_is_estimated() {
    let server = MockOpenAi::start().await;
    server.push(MockResponse::sse_text("Thinking about it.").without_usage());
    server.push(MockResponse::text("plain").without_usage());
    let mut chain = chain(&env(&server, None));
    for _ in 0..2 {
        let asked = ask(&mut chain).await;
        let usage = asked.reply().usage;
        assert!(usage.estimated);
        assert!(usage.input > 0 && usage.output > 0, "{usage:?}");
    }
}

#[tokio::test]
async fn tool_results_reach_the_model_with_their_call_ids() {
    let server = MockOpenAi::start().await;
    let mut chain = chain(&env(&server, None));
    let mut req = request();
    req.messages.push(ChatMessage::assistant(
        None,
        vec![ToolCall {
            id: "call_7".into(),
            name: "edit_file".into(),
            arguments: r#"{"path": "a.py"}"#.into(),
            ..ToolCall::default()
        }],
    ));
    req.messages.push(ChatMessage::tool_result(
        "call_7",
        "refused: a plan is required before edit_file; call update_plan first",
    ));
    let asked = ask_within(&mut chain, &req, Duration::from_secs(10)).await;
    assert_eq!(
        asked.reply().content.as_deref(),
        Some("no more scripted replies")
    );
    let messages = server.requests()[0].messages();
    assert_eq!(messages[2]["role"], "assistant");
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_7");
    assert_eq!(
        messages[2]["tool_calls"][0]["function"]["name"],
        "edit_file"
    );
    assert_eq!(messages[3]["role"], "tool");
    assert_eq!(messages[3]["tool_call_id"], "call_7");
    assert!(
        messages[3]["content"]
            .as_str()
            .is_some_and(|c| c.contains("a plan is required"))
    );
}

#[tokio::test]
async fn garbage_dropped_and_cut_replies_are_retried() {
    let server = MockOpenAi::start().await;
    server.push_all([
        MockResponse::garbage(),
        MockResponse::dropped(),
        MockResponse::sse_text("partial answer").cut(),
        MockResponse::sse_text("whole answer"),
    ]);
    let mut chain = chain(&env(&server, None));
    let asked = ask(&mut chain).await;
    // Garbage, then a dropped connection: two retries, then the third attempt is cut.
    let reasons: Vec<String> = asked.retries().into_iter().map(|(_, _, r)| r).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].contains("undecodable"), "{reasons:?}");
    assert!(reasons[1].contains("request failed"), "{reasons:?}");
    match &asked.result {
        Err(ModelError::Unavailable { tried }) => {
            assert_eq!(tried.len(), 1);
            assert!(tried[0].1.contains("stream"), "{tried:?}");
        }
        other => panic!("expected MODEL_UNAVAILABLE (no fallback configured), got {other:?}"),
    }
    // The next turn starts afresh and gets the whole answer.
    let asked = ask(&mut chain).await;
    assert_eq!(asked.reply().content.as_deref(), Some("whole answer"));
}

#[tokio::test]
async fn a_slow_reply_times_out_and_is_retried() {
    let server = MockOpenAi::start().await;
    server.push(MockResponse::text("too late").with_delay(Duration::from_secs(3)));
    server.push(MockResponse::text("in time"));
    let env = env(&server, None).with("MINICODER_MODEL_TIMEOUT_MS", "200");
    let mut chain = chain(&env);
    let asked = ask(&mut chain).await;
    assert_eq!(asked.reply().content.as_deref(), Some("in time"));
    let retries = asked.retries();
    assert_eq!(retries.len(), 1);
    assert!(retries[0].2.contains("200 ms"), "{retries:?}");
    assert!(
        asked.elapsed < Duration::from_secs(2),
        "{:?}",
        asked.elapsed
    );
}
