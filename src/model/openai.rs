//! The OpenAI-compatible adapter: one Chat Completions request to one provider.
//!
//! Requests, replies and stream chunks use async-openai's types. The HTTP
//! exchange goes through a `reqwest` client built here, because async-openai's
//! client hides the `Retry-After` header and cannot accept a plain JSON reply
//! to a streamed request; retries are never done here (reqwest's protocol-NACK
//! retries are switched off too) so that every retry is the chain's and observed.

use std::time::{Duration, Instant, SystemTime};

use async_openai::error::WrappedError;
use async_openai::types::chat::{CreateChatCompletionResponse, CreateChatCompletionStreamResponse};
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, RETRY_AFTER};

use super::ModelObservation;
use super::provider::ProviderEndpoint;
use super::retry::parse_retry_after;
use super::types::{ModelReply, ModelRequest};
use super::wire::{ReplyParts, StreamAssembler, chat_request, parts_from_response, reply};

/// Why one attempt failed, classified for the retry logic.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptError {
    /// Worth retrying: 408, 429, 5xx, 404, connection errors, undecodable or cut replies.
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// 401 or 403.
    Auth(String),
    /// Any other 4xx: the request itself is wrong.
    Rejected { status: u16, detail: String },
    /// The run's deadline passed.
    Deadline,
}

impl AttemptError {
    fn transient(reason: impl Into<String>) -> Self {
        Self::Transient {
            reason: reason.into(),
            retry_after: None,
        }
    }
}

/// Builds the HTTP client every adapter shares: no retries of its own.
pub fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .connect_timeout(Duration::from_secs(15))
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

/// One provider endpoint, called with streaming (the default) or without.
#[derive(Debug, Clone)]
pub struct OpenAiAdapter {
    http: reqwest::Client,
    endpoint: ProviderEndpoint,
    request_timeout: Duration,
    streaming: bool,
}

impl OpenAiAdapter {
    pub fn new(
        http: reqwest::Client,
        endpoint: ProviderEndpoint,
        request_timeout: Duration,
    ) -> Self {
        Self {
            http,
            endpoint,
            request_timeout,
            streaming: true,
        }
    }

    /// Asks for a streamed (SSE) reply or a plain JSON one.
    pub fn with_streaming(mut self, streaming: bool) -> Self {
        self.streaming = streaming;
        self
    }

    pub fn endpoint(&self) -> &ProviderEndpoint {
        &self.endpoint
    }

    /// Sends one request; text deltas go to `observe` as they arrive.
    pub async fn complete(
        &self,
        req: &ModelRequest,
        deadline: Instant,
        observe: &mut (dyn FnMut(ModelObservation) + Send),
    ) -> Result<ModelReply, AttemptError> {
        let now = Instant::now();
        if now >= deadline {
            return Err(AttemptError::Deadline);
        }
        let budget = self.request_timeout.min(deadline - now);
        let exchange = self.exchange(req, observe);
        let parts = match tokio::time::timeout(budget, exchange).await {
            Ok(result) => result?,
            Err(_) if Instant::now() >= deadline => return Err(AttemptError::Deadline),
            Err(_) => {
                return Err(AttemptError::transient(format!(
                    "no complete reply within {} ms (MINICODER_MODEL_TIMEOUT_MS)",
                    budget.as_millis()
                )));
            }
        };
        Ok(reply(req, self.endpoint.id.clone(), parts))
    }

    async fn exchange(
        &self,
        req: &ModelRequest,
        observe: &mut (dyn FnMut(ModelObservation) + Send),
    ) -> Result<ReplyParts, AttemptError> {
        let body = chat_request(req, &self.endpoint.id.model, self.streaming);
        let body = serde_json::to_vec(&body).map_err(|e| AttemptError::Rejected {
            status: 0,
            detail: format!("cannot encode the request: {e}"),
        })?;
        let accept = if self.streaming {
            "text/event-stream, application/json"
        } else {
            "application/json"
        };
        let response = self
            .http
            .post(self.endpoint.chat_completions_url())
            .bearer_auth(&self.endpoint.api_key)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, accept)
            .body(body)
            .send()
            .await
            .map_err(|e| AttemptError::transient(format!("request failed: {}", error_chain(&e))))?;
        let status = response.status();
        if !status.is_success() {
            let headers = response.headers().clone();
            let text = response.text().await.unwrap_or_default();
            return Err(classify_status(status.as_u16(), &headers, &text));
        }
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        if is_sse {
            return read_event_stream(response, observe).await;
        }
        let bytes = response
            .bytes()
            .await
            .map_err(|e| AttemptError::transient(format!("reply cut off: {}", error_chain(&e))))?;
        let parts = decode_plain_body(&bytes)?;
        if let Some(text) = parts.content.clone() {
            observe(ModelObservation::Delta(text));
        }
        Ok(parts)
    }
}

async fn read_event_stream(
    response: reqwest::Response,
    observe: &mut (dyn FnMut(ModelObservation) + Send),
) -> Result<ReplyParts, AttemptError> {
    let mut events = response.bytes_stream().eventsource();
    let mut assembler = StreamAssembler::default();
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| AttemptError::transient(format!("stream cut off: {e}")))?;
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            assembler.mark_done();
            break;
        }
        let chunk = decode_stream_chunk(data)?;
        if let Some(text) = assembler.push(chunk) {
            observe(ModelObservation::Delta(text));
        }
    }
    assembler.finish().map_err(AttemptError::transient)
}

fn decode_stream_chunk(data: &str) -> Result<CreateChatCompletionStreamResponse, AttemptError> {
    let undecodable = |e: serde_json::Error| match serde_json::from_str::<WrappedError>(data) {
        Ok(wrapped) => AttemptError::transient(format!("error in stream: {}", wrapped.error)),
        Err(_) => {
            AttemptError::transient(format!("undecodable stream chunk ({e}): {}", excerpt(data)))
        }
    };
    let mut value: serde_json::Value = serde_json::from_str(data).map_err(undecodable)?;
    number_tool_call_pieces(&mut value);
    serde_json::from_value(value).map_err(undecodable)
}

/// Some OpenAI-compatible servers leave `index` out of tool-call pieces when
/// each call arrives whole; number them by position so they still decode.
fn number_tool_call_pieces(chunk: &mut serde_json::Value) {
    let Some(choices) = chunk.get_mut("choices").and_then(|c| c.as_array_mut()) else {
        return;
    };
    for choice in choices {
        let pieces = choice
            .get_mut("delta")
            .and_then(|d| d.get_mut("tool_calls"))
            .and_then(|t| t.as_array_mut());
        for (position, piece) in pieces.into_iter().flatten().enumerate() {
            if let Some(piece) = piece.as_object_mut() {
                piece.entry("index").or_insert_with(|| position.into());
            }
        }
    }
}

/// A complete JSON reply; also accepts an SSE body sent without the SSE content type.
fn decode_plain_body(bytes: &[u8]) -> Result<ReplyParts, AttemptError> {
    let text = String::from_utf8_lossy(bytes);
    match serde_json::from_slice::<CreateChatCompletionResponse>(bytes) {
        Ok(response) => parts_from_response(response).map_err(AttemptError::transient),
        Err(e) => {
            if text.trim_start().starts_with("data:") {
                return decode_sse_text(&text);
            }
            if let Ok(wrapped) = serde_json::from_slice::<WrappedError>(bytes) {
                return Err(AttemptError::transient(format!(
                    "the provider answered with an error: {}",
                    wrapped.error
                )));
            }
            Err(AttemptError::transient(format!(
                "undecodable reply ({e}): {}",
                excerpt(&text)
            )))
        }
    }
}

fn decode_sse_text(text: &str) -> Result<ReplyParts, AttemptError> {
    let mut assembler = StreamAssembler::default();
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data:") else {
            continue;
        };
        let data = data.trim();
        if data == "[DONE]" {
            assembler.mark_done();
            break;
        }
        if !data.is_empty() {
            assembler.push(decode_stream_chunk(data)?);
        }
    }
    assembler.finish().map_err(AttemptError::transient)
}

/// Maps an HTTP error status to how the chain should react.
pub fn classify_status(status: u16, headers: &HeaderMap, body: &str) -> AttemptError {
    let detail = match serde_json::from_str::<WrappedError>(body) {
        Ok(wrapped) => wrapped.error.to_string(),
        Err(_) if body.trim().is_empty() => "(empty body)".to_string(),
        Err(_) => excerpt(body),
    };
    match status {
        401 | 403 => AttemptError::Auth(format!("HTTP {status}: {detail}")),
        404 | 408 | 429 | 500..=599 => AttemptError::Transient {
            reason: format!("HTTP {status}: {detail}"),
            retry_after: headers
                .get(RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| parse_retry_after(v, SystemTime::now())),
        },
        _ => AttemptError::Rejected { status, detail },
    }
}

fn excerpt(text: &str) -> String {
    const LIMIT: usize = 300;
    let trimmed = text.trim();
    match trimmed.char_indices().nth(LIMIT) {
        Some((cut, _)) => format!("{}…", &trimmed[..cut]),
        None => trimmed.to_string(),
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, "3".parse().expect("header"));
        let body = r#"{"error": {"message": "slow down", "type": "rate_limit"}}"#;
        assert_eq!(
            classify_status(429, &headers, body),
            AttemptError::Transient {
                reason: "HTTP 429: rate_limit: slow down".into(),
                retry_after: Some(Duration::from_secs(3))
            }
        );
        assert!(matches!(
            classify_status(401, &HeaderMap::new(), ""),
            AttemptError::Auth(_)
        ));
        assert!(matches!(
            classify_status(403, &HeaderMap::new(), ""),
            AttemptError::Auth(_)
        ));
        for transient in [404, 408, 500, 502, 503] {
            assert!(
                matches!(
                    classify_status(transient, &HeaderMap::new(), "x"),
                    AttemptError::Transient { .. }
                ),
                "{transient}"
            );
        }
        assert!(matches!(
            classify_status(400, &HeaderMap::new(), "bad"),
            AttemptError::Rejected { status: 400, .. }
        ));
    }

    #[test]
    fn plain_bodies_decode_or_fail_as_transient() {
        let sse = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        let parts = decode_plain_body(sse.as_bytes()).expect("sse text");
        assert_eq!(parts.content.as_deref(), Some("hi"));
        assert!(matches!(
            decode_plain_body(b"<html>oops"),
            Err(AttemptError::Transient { .. })
        ));
    }

    #[test]
    fn tool_call_pieces_without_an_index_are_numbered() {
        let data = r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[
            {"id":"a","type":"function","function":{"name":"list_tree","arguments":"{}"}},
            {"id":"b","type":"function","function":{"name":"git","arguments":"{}"}}]}}]}"#;
        let chunk = decode_stream_chunk(data).expect("decodes");
        let pieces = chunk.choices[0]
            .delta
            .tool_calls
            .clone()
            .unwrap_or_default();
        let indexes: Vec<u32> = pieces.iter().map(|p| p.index).collect();
        assert_eq!(indexes, [0, 1]);
    }
}
