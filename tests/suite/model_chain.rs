//! The provider chain against mock servers: retries and backoff,
//! Retry-After, fallback and its stickiness, auth and configuration errors,
//! pinning, benchmark mode, and the run's deadline.

use crate::support;

use std::time::Duration;

use minicoder::model::{
    ActionSource, Env, ModelChain, ModelError, ModelObservation, ModelSelection,
};
use support::mock_openai::{MockOpenAi, MockResponse};
use support::model_harness::*;

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
async fn model_not_found_falls_back_without_retrying() {
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
    assert!(reason.contains("404"), "{reason}");
    // Retrying cannot make a model appear: one request, then the next provider.
    assert_eq!(primary.request_count(), 1);
    assert!(asked.retries().is_empty());
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
    let server = MockOpenAi::start().await;
    server.push(MockResponse::rate_limited("60"));
    let mut chain = chain(&env(&server, None));
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
    assert!(asked.retries().is_empty());
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_wait_past_the_deadline_falls_back_at_once_when_it_can() {
    let primary = MockOpenAi::start().await;
    let secondary = MockOpenAi::start().await;
    primary.push(MockResponse::rate_limited("60"));
    secondary.push(MockResponse::text("qwen in time"));
    let mut chain = chain(&env(&primary, Some(&secondary)));
    let asked = ask_within(&mut chain, &request(), Duration::from_secs(5)).await;
    assert_eq!(asked.reply().content.as_deref(), Some("qwen in time"));
    assert_eq!(asked.fallbacks().len(), 1);
    assert!(
        asked.elapsed < Duration::from_secs(2),
        "{:?}",
        asked.elapsed
    );
    assert_eq!(primary.request_count(), 1);
}
