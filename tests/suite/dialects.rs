//! Real providers' stream shapes, recorded from public reports and the
//! providers' documentation (each fixture under `tests/fixtures/dialects/`
//! names its source), replayed through the adapter: every fixture asserts
//! the assembled reply and what the next request sends back. Then the mock
//! server speaking the Gemini and DeepSeek dialects, which refuses a history
//! that lacks the hidden state it handed out.

use crate::support;

use std::path::Path;
use std::time::Duration;

use minicoder::model::types::{ChatMessage, ModelReply, ModelRequest};
use minicoder::model::{Env, ModelChain, ModelError, ModelSelection};
use serde_json::{Value, json};
use support::mock_openai::{Dialect, MockOpenAi, MockResponse, REASONING_MARKER, Shape};
use support::model_harness::{Asked, ask_within, request};

/// A chain pinned to `provider`, pointed at `server` through its base-URL variable.
fn pinned(provider: &str, server: &MockOpenAi) -> ModelChain {
    let mut env = Env::from_pairs([
        ("MINICODER_FREE_TIER_CONFIRMED", "true"),
        ("MINICODER_RETRY_BASE_MS", "10"),
    ]);
    let (url, key) = match provider {
        "gemini" => ("GEMINI_BASE_URL", "GEMINI_API_KEY"),
        "qwen" | "deepseek" => ("FREELLMAPI_BASE_URL", "FREELLMAPI_API_KEY"),
        _ => ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
    };
    env.set(url, server.base_url());
    env.set(key, "test-key");
    env.set("OPENAI_MODEL", "gpt-test");
    let selection = ModelSelection {
        pinned: Some(provider.to_string()),
        benchmark: false,
    };
    ModelChain::from_env(&env, &selection).expect("chain")
}

/// The request after `reply`: its history message and a result per call.
fn next_request(reply: &ModelReply) -> ModelRequest {
    let mut req = request();
    req.messages.push(ChatMessage::from_reply(reply));
    for call in &reply.tool_calls {
        req.messages
            .push(ChatMessage::tool_result(&call.id, "result"));
    }
    req
}

async fn ask(chain: &mut ModelChain, req: &ModelRequest) -> Asked {
    ask_within(chain, req, Duration::from_secs(20)).await
}

fn sse_body(chunks: &[Value]) -> String {
    chunks
        .iter()
        .map(|c| match c {
            Value::String(raw) => format!("data: {raw}\n\n"),
            other => format!("data: {other}\n\n"),
        })
        .collect()
}

async fn replay(path: &Path) {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?");
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect(name);
    assert!(
        fixture["source"].as_str().is_some_and(|s| !s.is_empty()),
        "{name}: no source"
    );
    let expect = &fixture["expect"];
    let server = MockOpenAi::start().await;
    match fixture["stream"].as_array() {
        Some(chunks) => server.push(MockResponse::raw(
            200,
            "text/event-stream",
            &sse_body(chunks),
        )),
        None => server.push(MockResponse::raw(
            200,
            "application/json",
            &fixture["plain"].to_string(),
        )),
    };
    let provider = fixture["provider"].as_str().expect("provider");
    let mut chain = pinned(provider, &server);

    let asked = ask(&mut chain, &request()).await;
    let reply = match &asked.result {
        Ok(reply) => reply.clone(),
        Err(e) => panic!("{name}: {e}"),
    };
    assert_eq!(
        reply
            .content
            .as_ref()
            .map(|c| json!(c))
            .unwrap_or(Value::Null),
        expect["content"],
        "{name}"
    );
    let calls: Vec<Value> = reply
        .tool_calls
        .iter()
        .map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
        .collect();
    assert_eq!(Value::Array(calls), expect["tool_calls"], "{name}");
    match expect["usage"].as_object() {
        Some(usage) => {
            assert_eq!(json!(reply.usage.input), usage["input"], "{name}");
            assert_eq!(json!(reply.usage.output), usage["output"], "{name}");
            assert!(!reply.usage.estimated, "{name}");
        }
        None => assert!(reply.usage.estimated, "{name}: no usage was sent"),
    }
    assert_eq!(
        reply.provider.reasoning(),
        expect["reasoning"].as_str(),
        "{name}"
    );
    // What streams to the screen is the visible text only.
    assert_eq!(
        asked.streamed_text(),
        reply.content.clone().unwrap_or_default(),
        "{name}"
    );

    let asked = ask(&mut chain, &next_request(&reply)).await;
    assert!(asked.result.is_ok(), "{name}: {:?}", asked.result);
    let sent = &server.requests()[1].messages()[2];
    assert_eq!(sent, &expect["sent_back"], "{name}: what was sent back");
}

#[tokio::test]
async fn recorded_streams_of_each_provider_assemble_and_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dialects");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    let providers: std::collections::BTreeSet<String> = paths
        .iter()
        .filter_map(|p| {
            p.file_name()?
                .to_str()?
                .split('-')
                .next()
                .map(str::to_string)
        })
        .collect();
    for provider in ["gemini", "deepseek", "qwen", "openai"] {
        assert!(providers.contains(provider), "no {provider} fixture");
    }
    for path in &paths {
        replay(path).await;
    }
}

/// Two tool rounds against the mock in `dialect`: the second request must
/// carry the hidden state of the first reply, or the mock refuses it.
async fn two_rounds(
    dialect: Dialect,
    provider: &str,
    response: MockResponse,
) -> (MockOpenAi, ModelReply) {
    let server = MockOpenAi::speaking(dialect).await;
    server.push(response);
    server.push(MockResponse::text("done"));
    let mut chain = pinned(provider, &server);
    let asked = ask(&mut chain, &request()).await;
    let reply = asked.reply().clone();
    assert!(
        !asked.streamed_text().contains(REASONING_MARKER),
        "reasoning reached the visible stream"
    );
    let asked = ask(&mut chain, &next_request(&reply)).await;
    assert_eq!(asked.reply().content.as_deref(), Some("done"));
    assert!(server.refusals().is_empty(), "{:?}", server.refusals());
    (server, reply)
}

#[tokio::test]
async fn the_gemini_dialect_gets_its_signatures_back_streamed_or_not() {
    let calls = [
        ("read_file", json!({"path": "pagination.py"})),
        ("ripgrep", json!({"pattern": "page_count"})),
    ];
    let shapes = [
        Shape::default(),
        Shape {
            split_arguments: true,
            late_signature: true,
        },
    ];
    for shape in shapes {
        for response in [
            MockResponse::sse_tool_calls(&calls).with_shape(shape),
            MockResponse::tool_calls(&calls[..1]),
        ] {
            let (server, reply) = two_rounds(Dialect::Gemini, "gemini", response).await;
            let signatures = server.signatures();
            let first = &reply.tool_calls[0];
            assert_eq!(
                first.provider.fields.get("extra_content"),
                signatures.get(&first.id),
                "{shape:?}"
            );
            let sent = &server.requests()[1].messages()[2]["tool_calls"];
            assert_eq!(sent[0]["extra_content"], signatures[&first.id]);
            assert_eq!(
                server.requests()[1].json()["messages"][2]["tool_calls"][0]["function"]["arguments"],
                calls[0].1.to_string()
            );
        }
    }
}

#[tokio::test]
async fn the_deepseek_dialect_gets_its_reasoning_back_streamed_or_not() {
    let calls = [
        ("update_plan", json!({"items": []})),
        ("read_file", json!({"path": "pagination.py"})),
    ];
    for response in [
        MockResponse::sse_tool_calls(&calls).with_content("Planning."),
        MockResponse::tool_calls(&calls[..1]),
    ] {
        let (server, reply) = two_rounds(Dialect::DeepSeek, "deepseek", response).await;
        let handed_out = &server.reasoning()[&reply.tool_calls[0].id];
        assert!(handed_out.starts_with(REASONING_MARKER));
        assert_eq!(reply.provider.reasoning(), Some(handed_out.as_str()));
        assert!(
            !reply
                .content
                .clone()
                .unwrap_or_default()
                .contains(REASONING_MARKER),
            "the reasoning is not in the visible text"
        );
        let sent = &server.requests()[1].messages()[2];
        assert_eq!(sent["reasoning_content"], json!(handed_out));
    }
}

#[tokio::test]
async fn a_history_without_the_hidden_state_is_refused_with_the_providers_message() {
    for (dialect, provider, quoted) in [
        (Dialect::Gemini, "gemini", "missing a thought_signature"),
        (
            Dialect::DeepSeek,
            "deepseek",
            "must be passed back to the API",
        ),
    ] {
        let server = MockOpenAi::speaking(dialect).await;
        server.push(MockResponse::sse_tool_calls(&[(
            "git",
            json!({"op": "status"}),
        )]));
        let mut chain = pinned(provider, &server);
        let reply = ask(&mut chain, &request()).await.reply().clone();
        // The history as it was built before: text and calls only.
        let mut req = request();
        let bare: Vec<_> = reply
            .tool_calls
            .iter()
            .map(|c| minicoder::model::types::ToolCall {
                provider: Default::default(),
                ..c.clone()
            })
            .collect();
        req.messages
            .push(ChatMessage::assistant(reply.content.clone(), bare));
        req.messages
            .push(ChatMessage::tool_result(&reply.tool_calls[0].id, "clean"));
        let asked = ask(&mut chain, &req).await;
        match &asked.result {
            Err(ModelError::Rejected {
                status: 400,
                detail,
                ..
            }) => {
                assert!(detail.contains(quoted), "{detail}")
            }
            other => panic!("{provider}: expected a rejected request, got {other:?}"),
        }
        assert_eq!(server.refusals().len(), 1);
        assert_eq!(server.request_count(), 2, "a 400 is not retried");
    }
}
