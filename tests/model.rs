//! The model chain against mock OpenAI-compatible servers: streaming and plain
//! replies, retries, fallback, authentication and configuration errors, deadlines.

mod support;

use std::time::{Duration, Instant};

use minicoder::model::types::{ChatMessage, ModelId, ModelReply, ModelRequest, ToolCall, ToolSpec};
use minicoder::model::{
    ActionSource, Env, ModelChain, ModelError, ModelObservation, ModelSelection,
};
use serde_json::json;
use support::mock_openai::{MockOpenAi, MockResponse};

const TOOL_NAMES: [&str; 9] = [
    "list_tree",
    "read_file",
    "ripgrep",
    "tree_sitter_symbols",
    "edit_file",
    "run_shell",
    "git",
    "update_plan",
    "request_completion",
];

fn request() -> ModelRequest {
    ModelRequest {
        messages: vec![
            ChatMessage::system("You are a coding agent."),
            ChatMessage::user("Fix the failing test."),
        ],
        tools: TOOL_NAMES
            .iter()
            .map(|name| ToolSpec {
                name: name.to_string(),
                description: format!("the {name} tool"),
                parameters: json!({"type": "object", "properties": {}}),
            })
            .collect(),
    }
}

/// An environment with gemini on `primary` and qwen/deepseek on `secondary`.
fn env(primary: &MockOpenAi, secondary: Option<&MockOpenAi>) -> Env {
    let mut env = Env::from_pairs([
        ("MINICODER_FREE_TIER_CONFIRMED", "true"),
        ("MINICODER_RETRY_BASE_MS", "10"),
        ("GEMINI_API_KEY", "gemini-test-key"),
        ("GEMINI_MODEL", "gemini-test"),
    ]);
    env.set("GEMINI_BASE_URL", primary.base_url());
    if let Some(secondary) = secondary {
        env.set("FREELLMAPI_BASE_URL", secondary.base_url());
        env.set("FREELLMAPI_API_KEY", "free-test-key");
    }
    env
}

fn chain(env: &Env) -> ModelChain {
    ModelChain::from_env(env, &ModelSelection::default()).expect("chain")
}

struct Asked {
    result: Result<ModelReply, ModelError>,
    observations: Vec<ModelObservation>,
    elapsed: Duration,
}

impl Asked {
    fn reply(&self) -> &ModelReply {
        match &self.result {
            Ok(reply) => reply,
            Err(e) => panic!("expected a reply, got: {e}"),
        }
    }

    fn retries(&self) -> Vec<(u32, Duration, String)> {
        self.observations
            .iter()
            .filter_map(|o| match o {
                ModelObservation::Retry {
                    attempt,
                    delay,
                    reason,
                    ..
                } => Some((*attempt, *delay, reason.clone())),
                _ => None,
            })
            .collect()
    }

    fn fallbacks(&self) -> Vec<(ModelId, ModelId)> {
        self.observations
            .iter()
            .filter_map(|o| match o {
                ModelObservation::Fallback { from, to, .. } => Some((from.clone(), to.clone())),
                _ => None,
            })
            .collect()
    }

    fn streamed_text(&self) -> String {
        self.observations
            .iter()
            .filter_map(|o| match o {
                ModelObservation::Delta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

async fn ask_within(source: &mut dyn ActionSource, req: &ModelRequest, budget: Duration) -> Asked {
    let start = Instant::now();
    let mut observations = Vec::new();
    let mut observe = |o: ModelObservation| observations.push(o);
    let result = source.complete(req, start + budget, &mut observe).await;
    Asked {
        result,
        observations,
        elapsed: start.elapsed(),
    }
}

async fn ask(source: &mut dyn ActionSource) -> Asked {
    ask_within(source, &request(), Duration::from_secs(30)).await
}

fn id(provider: &str, model: &str) -> ModelId {
    ModelId {
        provider: provider.into(),
        model: model.into(),
    }
}

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
async fn retry_after_is_honoured_then_success() {
    let server = MockOpenAi::start().await;
    server.push(MockResponse::rate_limited("1"));
    server.push(MockResponse::text("ok"));
    let mut chain = chain(&env(&server, None));
    let asked = ask(&mut chain).await;
    assert_eq!(asked.reply().content.as_deref(), Some("ok"));
    let retries = asked.retries();
    assert_eq!(retries.len(), 1);
    assert_eq!(retries[0].0, 1);
    assert_eq!(retries[0].1, Duration::from_secs(1));
    assert!(retries[0].2.contains("429"), "{}", retries[0].2);
    assert!(
        asked.elapsed >= Duration::from_secs(1),
        "{:?}",
        asked.elapsed
    );
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn server_errors_twice_then_success_uses_two_backed_off_retries() {
    let server = MockOpenAi::start().await;
    server.push_all([
        MockResponse::status(500),
        MockResponse::status(503),
        MockResponse::text("fine"),
    ]);
    let mut chain = chain(&env(&server, None));
    let asked = ask(&mut chain).await;
    assert_eq!(asked.reply().content.as_deref(), Some("fine"));
    let retries = asked.retries();
    let attempts_and_delays: Vec<_> = retries.iter().map(|(a, d, _)| (*a, *d)).collect();
    assert_eq!(
        attempts_and_delays,
        [
            (1, Duration::from_millis(10)),
            (2, Duration::from_millis(20))
        ]
    );
    assert!(retries[1].2.contains("503"));
    assert!(asked.fallbacks().is_empty());
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn three_unavailable_replies_fall_back_and_later_turns_stay() {
    let primary = MockOpenAi::start().await;
    let secondary = MockOpenAi::start().await;
    primary.push_all([
        MockResponse::status(503),
        MockResponse::status(503),
        MockResponse::status(503),
    ]);
    secondary.push_all([
        MockResponse::text("from qwen"),
        MockResponse::text("still qwen"),
    ]);
    let mut chain = chain(&env(&primary, Some(&secondary)));
    assert_eq!(chain.current(), id("gemini", "gemini-test"));
    // The smallest ceiling of the chain (qwen's 262144).
    assert_eq!(chain.context_limit(), 262_144);

    let asked = ask(&mut chain).await;
    assert_eq!(asked.reply().content.as_deref(), Some("from qwen"));
    assert_eq!(asked.reply().model, id("qwen", "qwen3.7-flash"));
    assert_eq!(asked.retries().len(), 2);
    assert_eq!(
        asked.fallbacks(),
        [(id("gemini", "gemini-test"), id("qwen", "qwen3.7-flash"))]
    );
    assert_eq!(
        secondary.requests()[0].header("authorization"),
        Some("Bearer free-test-key")
    );
    assert_eq!(secondary.requests()[0].json()["model"], "qwen3.7-flash");

    let asked = ask(&mut chain).await;
    assert_eq!(asked.reply().content.as_deref(), Some("still qwen"));
    assert!(asked.fallbacks().is_empty());
    assert_eq!(chain.current(), id("qwen", "qwen3.7-flash"));
    assert_eq!(primary.request_count(), 3);
    assert_eq!(secondary.request_count(), 2);
}

#[tokio::test]
async fn model_not_found_falls_back() {
    let primary = MockOpenAi::start().await;
    let secondary = MockOpenAi::start().await;
    primary.push_all([
        MockResponse::status(404),
        MockResponse::status(404),
        MockResponse::status(404),
    ]);
    let mut chain = chain(&env(&primary, Some(&secondary)));
    let asked = ask(&mut chain).await;
    assert_eq!(asked.reply().model.provider, "qwen");
    assert_eq!(asked.fallbacks().len(), 1);
    let reason = asked
        .observations
        .iter()
        .find_map(|o| match o {
            ModelObservation::Fallback { reason, .. } => Some(reason.clone()),
            _ => None,
        })
        .expect("a fallback");
    assert!(
        reason.contains("404") && reason.contains("3 attempts"),
        "{reason}"
    );
}

#[tokio::test]
async fn unauthorized_is_an_auth_error_without_fallback() {
    let primary = MockOpenAi::start().await;
    let secondary = MockOpenAi::start().await;
    primary.push(MockResponse::status(401));
    let mut chain = chain(&env(&primary, Some(&secondary)));
    let asked = ask(&mut chain).await;
    match &asked.result {
        Err(ModelError::Auth { model, detail }) => {
            assert_eq!(model, &id("gemini", "gemini-test"));
            assert!(detail.contains("401"), "{detail}");
        }
        other => panic!("expected an Auth error, got {other:?}"),
    }
    assert!(asked.observations.is_empty());
    assert_eq!(primary.request_count(), 1);
    assert_eq!(secondary.request_count(), 0);
    assert_eq!(chain.current().provider, "gemini");
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
async fn a_pinned_model_never_falls_back() {
    let primary = MockOpenAi::start().await;
    let secondary = MockOpenAi::start().await;
    primary.push_all([
        MockResponse::status(503),
        MockResponse::status(502),
        MockResponse::status(500),
    ]);
    let selection = ModelSelection {
        pinned: Some("gemini:gemini-pinned".into()),
        benchmark: false,
    };
    let mut chain =
        ModelChain::from_env(&env(&primary, Some(&secondary)), &selection).expect("chain");
    assert_eq!(chain.current(), id("gemini", "gemini-pinned"));
    assert_eq!(chain.context_limit(), 1_048_576);
    let asked = ask(&mut chain).await;
    let error = asked.result.as_ref().expect_err("unavailable");
    assert!(
        error.to_string().starts_with("MODEL_UNAVAILABLE"),
        "{error}"
    );
    assert!(
        error.to_string().contains("gemini/gemini-pinned"),
        "{error}"
    );
    assert_eq!(asked.retries().len(), 2);
    assert!(asked.fallbacks().is_empty());
    assert_eq!(primary.requests()[0].json()["model"], "gemini-pinned");
    assert_eq!(secondary.request_count(), 0);
}

#[tokio::test]
async fn benchmark_mode_disables_fallback() {
    let primary = MockOpenAi::start().await;
    let secondary = MockOpenAi::start().await;
    primary.push_all([
        MockResponse::status(503),
        MockResponse::status(503),
        MockResponse::status(503),
    ]);
    let selection = ModelSelection {
        pinned: None,
        benchmark: true,
    };
    let mut chain =
        ModelChain::from_env(&env(&primary, Some(&secondary)), &selection).expect("chain");
    assert!(!chain.fallback_enabled());
    let asked = ask(&mut chain).await;
    assert!(matches!(asked.result, Err(ModelError::Unavailable { .. })));
    assert_eq!(secondary.request_count(), 0);
}

#[tokio::test]
async fn providers_without_keys_are_skipped() {
    let primary = MockOpenAi::start().await;
    let secondary = MockOpenAi::start().await;
    secondary.push(MockResponse::text("qwen here"));
    let env = env(&primary, Some(&secondary)).with("GEMINI_API_KEY", "");
    let mut chain = chain(&env);
    assert_eq!(chain.current(), id("qwen", "qwen3.7-flash"));
    assert_eq!(chain.skipped().len(), 1);
    assert!(chain.skipped()[0].1.contains("GEMINI_API_KEY"));
    let asked = ask(&mut chain).await;
    assert_eq!(asked.reply().content.as_deref(), Some("qwen here"));
    assert_eq!(primary.request_count(), 0);

    let none = Env::from_pairs([("MINICODER_FREE_TIER_CONFIRMED", "true")]);
    let error = ModelChain::from_env(&none, &ModelSelection::default()).expect_err("no provider");
    assert!(matches!(error, ModelError::Unavailable { ref tried } if tried.len() == 3));
    assert!(
        error.to_string().starts_with("MODEL_UNAVAILABLE"),
        "{error}"
    );
}

#[tokio::test]
async fn the_free_chain_needs_confirmation() {
    let server = MockOpenAi::start().await;
    let env = env(&server, None).with("MINICODER_FREE_TIER_CONFIRMED", "false");
    let error = ModelChain::from_env(&env, &ModelSelection::default()).expect_err("refused");
    let text = error.to_string();
    assert!(matches!(error, ModelError::Config(_)));
    assert!(
        text.contains("MINICODER_FREE_TIER_CONFIRMED=true"),
        "{text}"
    );
    assert!(text.contains("free-tier"), "{text}");
}

#[tokio::test]
async fn plain_http_to_a_remote_host_is_refused() {
    let server = MockOpenAi::start().await;
    let env = env(&server, None).with("GEMINI_BASE_URL", "http://api.example.com/v1");
    let error = ModelChain::from_env(&env, &ModelSelection::default()).expect_err("refused");
    assert!(matches!(error, ModelError::Config(_)));
    let text = error.to_string();
    assert!(
        text.contains("GEMINI_BASE_URL") && text.contains("https://"),
        "{text}"
    );
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn a_long_retry_after_does_not_outlive_the_deadline() {
    let primary = MockOpenAi::start().await;
    let secondary = MockOpenAi::start().await;
    primary.push(MockResponse::rate_limited("60"));
    let mut chain = chain(&env(&primary, Some(&secondary)));
    let asked = ask_within(&mut chain, &request(), Duration::from_secs(1)).await;
    assert!(
        matches!(asked.result, Err(ModelError::DeadlineExceeded)),
        "{:?}",
        asked.result
    );
    assert!(
        asked.elapsed < Duration::from_millis(900),
        "{:?}",
        asked.elapsed
    );
    assert_eq!(secondary.request_count(), 0);
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
