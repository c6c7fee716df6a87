//! How the chain reacts to each kind of failure, as one table: the status
//! (or the error a provider puts in a 200 body) decides between a
//! configuration error, a retry, a fallback and a refused request.

use crate::support;

use std::time::Duration;

use minicoder::model::ModelError;
use serde_json::json;
use support::mock_openai::{MockOpenAi, MockResponse};
use support::model_harness::*;

#[derive(Debug)]
enum Expect {
    /// A configuration error: one request, no retry, no fallback.
    Auth,
    /// The request is wrong: one request, the provider's message quoted.
    Rejected(&'static str),
    /// This many attempts on the first provider, then the second answers.
    FellBack(usize),
    /// Answered by the first provider after this many attempts.
    Retried(usize),
}

fn json_body(status: u16, body: serde_json::Value) -> MockResponse {
    MockResponse::raw(status, "application/json", &body.to_string())
}

fn rows() -> Vec<(&'static str, Vec<MockResponse>, Expect)> {
    let gemini_signature = json!([{"error": {"code": 400, "message": "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:read_file` , position 3. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.", "status": "INVALID_ARGUMENT"}}]);
    let deepseek_reasoning = json!({"error": {"message": "The `reasoning_content` in the thinking mode must be passed back to the API.", "type": "invalid_request_error", "param": null, "code": "invalid_request_error"}});
    let hostile = json!({"error": {"message": format!("\u{1b}]0;pwned\u{7}\u{1b}[2J{}", "x".repeat(5000)), "type": "invalid_request_error"}});
    let not_found = json!([{"error": {"code": 404, "message": "models/gemini-test is not found for API version v1main", "status": "NOT_FOUND"}}]);
    let three = |r: fn() -> MockResponse| vec![r(), r(), r()];
    vec![
        ("401", vec![MockResponse::status(401)], Expect::Auth),
        ("403", vec![MockResponse::status(403)], Expect::Auth),
        (
            "404 model",
            vec![json_body(404, not_found.clone())],
            Expect::FellBack(1),
        ),
        (
            "408 then ok",
            vec![MockResponse::status(408), MockResponse::text("ok")],
            Expect::Retried(2),
        ),
        (
            "429 with Retry-After",
            three(|| MockResponse::rate_limited("0")),
            Expect::FellBack(3),
        ),
        (
            "5xx",
            vec![
                MockResponse::status(500),
                MockResponse::status(502),
                MockResponse::status(503),
            ],
            Expect::FellBack(3),
        ),
        (
            "400 Gemini signature",
            vec![json_body(400, gemini_signature)],
            Expect::Rejected("Function call is missing a thought_signature"),
        ),
        (
            "400 DeepSeek reasoning",
            vec![json_body(400, deepseek_reasoning)],
            Expect::Rejected("The `reasoning_content` in the thinking mode must be passed back"),
        ),
        (
            "422",
            vec![MockResponse::status(422)],
            Expect::Rejected("scripted status 422"),
        ),
        (
            "400 hostile message",
            vec![json_body(400, hostile)],
            Expect::Rejected("pwned"),
        ),
        (
            "200 error body 429",
            three(|| {
                json_body(
                    200,
                    json!({"error": {"code": 429, "message": "Resource has been exhausted (e.g. check quota).", "status": "RESOURCE_EXHAUSTED"}}),
                )
            }),
            Expect::FellBack(3),
        ),
        (
            "200 error body 401",
            vec![json_body(
                200,
                json!({"error": {"code": 401, "message": "API key not valid.", "status": "UNAUTHENTICATED"}}),
            )],
            Expect::Auth,
        ),
        (
            "200 error body 400",
            vec![json_body(
                200,
                json!({"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}}),
            )],
            Expect::Rejected("Invalid JSON payload received."),
        ),
        (
            "200 error array, then ok",
            vec![
                json_body(
                    200,
                    json!([{"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}]),
                ),
                MockResponse::text("ok"),
            ],
            Expect::Retried(2),
        ),
        (
            "error inside a stream, then ok",
            vec![
                MockResponse::raw(
                    200,
                    "text/event-stream",
                    "data: {\"error\": {\"message\": \"upstream timed out\", \"code\": 504}}\n\n",
                ),
                MockResponse::sse_text("ok"),
            ],
            Expect::Retried(2),
        ),
        (
            "200 error body without a code, then ok",
            vec![
                json_body(200, json!({"error": {"message": "something broke"}})),
                MockResponse::text("ok"),
            ],
            Expect::Retried(2),
        ),
    ]
}

#[tokio::test]
async fn each_failure_gets_its_reaction() {
    for (name, responses, expect) in rows() {
        let primary = MockOpenAi::start().await;
        let secondary = MockOpenAi::start().await;
        primary.push_all(responses);
        secondary.push(MockResponse::text("from the fallback"));
        let mut chain = chain(&env(&primary, Some(&secondary)));
        let asked = ask(&mut chain).await;
        let attempts = primary.request_count();
        match expect {
            Expect::Auth => {
                assert!(
                    matches!(asked.result, Err(ModelError::Auth { .. })),
                    "{name}: {:?}",
                    asked.result
                );
                assert_eq!((attempts, secondary.request_count()), (1, 0), "{name}");
                let text = asked.result.as_ref().expect_err("auth").to_string();
                assert!(text.contains("API key"), "{name}: {text}");
            }
            Expect::Rejected(quoted) => {
                let Err(error @ ModelError::Rejected { .. }) = &asked.result else {
                    panic!(
                        "{name}: expected a rejected request, got {:?}",
                        asked.result
                    );
                };
                let text = error.to_string();
                assert!(text.contains(quoted), "{name}: {text}");
                assert!(
                    !text.contains('\u{1b}') && !text.contains('\u{7}'),
                    "{name}: {text:?}"
                );
                assert!(text.chars().count() < 800, "{name}: {} chars", text.len());
                assert_eq!((attempts, secondary.request_count()), (1, 0), "{name}");
                assert!(asked.observations.is_empty(), "{name}");
            }
            Expect::FellBack(n) => {
                assert_eq!(
                    asked.reply().content.as_deref(),
                    Some("from the fallback"),
                    "{name}"
                );
                assert_eq!(attempts, n, "{name}");
                assert_eq!(asked.retries().len(), n - 1, "{name}");
                assert_eq!(asked.fallbacks().len(), 1, "{name}");
            }
            Expect::Retried(n) => {
                assert_eq!(asked.reply().content.as_deref(), Some("ok"), "{name}");
                assert_eq!(attempts, n, "{name}");
                assert_eq!(asked.retries().len(), n - 1, "{name}");
                assert!(asked.fallbacks().is_empty(), "{name}");
                assert_eq!(secondary.request_count(), 0, "{name}");
            }
        }
        if name == "429 with Retry-After" {
            // The server's wait (0 s), not the 10 ms backoff.
            let delays: Vec<Duration> = asked.retries().iter().map(|r| r.1).collect();
            assert_eq!(delays, [Duration::ZERO, Duration::ZERO]);
        }
    }
}
