//! The OpenAI-compatible adapter: one Chat Completions request to one provider.
//!
//! Requests are built from async-openai's types ([`super::wire`]); replies
//! and stream chunks are decoded leniently ([`super::decode`]), because real
//! providers leave out fields those types require. The HTTP exchange goes
//! through a `reqwest` client built here, because async-openai's client hides
//! the `Retry-After` header and cannot accept a plain JSON reply to a streamed
//! request; retries are never done here (reqwest's protocol-NACK retries are
//! switched off too) so that every retry is the chain's and observed. Every
//! body is read bounded ([`MAX_BODY_BYTES`]).

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};

use super::ModelObservation;
pub use super::classify::{AttemptError, classify_status};
use super::classify::{classify_error_body, excerpt};
use super::decode::{CALL_FIELDS, MESSAGE_FIELDS, WireReply, decode};
use super::provider::ProviderEndpoint;
use super::types::{ModelReply, ModelRequest};
use super::wire::{ReplyParts, StreamAssembler, chat_body, parts_from_response, reply};

/// The most bytes read from one reply (streamed or not); a longer one is cut
/// off and counts as a failed attempt.
pub(crate) const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The most bytes of an error body that are read.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Builds the HTTP client every adapter shares: no retries of its own.
pub(crate) fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .connect_timeout(Duration::from_secs(15))
        .build()
        .map_err(|e| format!("cannot set up the HTTP client: {e}"))
}

/// One provider endpoint, called with streaming (the default) or without.
#[derive(Debug, Clone)]
pub(crate) struct OpenAiAdapter {
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

    pub(crate) fn endpoint(&self) -> &ProviderEndpoint {
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
        let body = chat_body(req, &self.endpoint, self.streaming)
            .and_then(|b| {
                serde_json::to_vec(&b).map_err(|e| format!("cannot encode the request: {e}"))
            })
            .map_err(|detail| AttemptError::Rejected { status: 0, detail })?;
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
        let headers = response.headers().clone();
        if !status.is_success() {
            let bytes = read_bounded(response, MAX_ERROR_BODY_BYTES, true)
                .await
                .unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes);
            return Err(classify_status(status.as_u16(), &headers, &text));
        }
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        if is_sse {
            return read_event_stream(response, &headers, observe).await;
        }
        let bytes = read_bounded(response, MAX_BODY_BYTES, false).await?;
        let parts = decode_plain_body(&bytes, &headers)?;
        if let Some(text) = parts.content.clone() {
            observe(ModelObservation::Delta(text));
        }
        Ok(parts)
    }
}

/// The body, or an error once it passes `limit` bytes (`lenient`: the
/// bytes so far instead, for error bodies that are only quoted).
async fn read_bounded(
    response: reqwest::Response,
    limit: usize,
    lenient: bool,
) -> Result<Vec<u8>, AttemptError> {
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(piece) = stream.next().await {
        let piece = piece
            .map_err(|e| AttemptError::transient(format!("reply cut off: {}", error_chain(&e))))?;
        if body.len() + piece.len() > limit {
            if lenient {
                body.extend_from_slice(&piece[..limit - body.len()]);
                return Ok(body);
            }
            return Err(too_large(limit));
        }
        body.extend_from_slice(&piece);
    }
    Ok(body)
}

fn too_large(limit: usize) -> AttemptError {
    AttemptError::transient(format!(
        "the reply is larger than {} MiB; it was refused",
        limit / (1024 * 1024)
    ))
}

async fn read_event_stream(
    response: reqwest::Response,
    headers: &HeaderMap,
    observe: &mut (dyn FnMut(ModelObservation) + Send),
) -> Result<ReplyParts, AttemptError> {
    let mut received = 0usize;
    let bytes = response.bytes_stream().map(move |piece| {
        let piece = piece.map_err(|e| error_chain(&e))?;
        received += piece.len();
        if received > MAX_BODY_BYTES {
            return Err(format!(
                "the reply is larger than {} MiB; it was refused",
                MAX_BODY_BYTES / (1024 * 1024)
            ));
        }
        Ok(piece)
    });
    let mut events = bytes.eventsource();
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
        let chunk = decode_stream_chunk(data, headers)?;
        if let Some(text) = assembler.push(chunk).map_err(AttemptError::transient)? {
            observe(ModelObservation::Delta(text));
        }
    }
    assembler.finish().map_err(AttemptError::transient)
}

/// One chunk; a chunk that is an error body is classified as one.
fn decode_stream_chunk(data: &str, headers: &HeaderMap) -> Result<WireReply, AttemptError> {
    let chunk = decode(data.as_bytes()).map_err(|e| {
        AttemptError::transient(format!("undecodable stream chunk {}", quoted(&e, data)))
    })?;
    if let Some(error) = &chunk.error {
        let body = serde_json::json!({ "error": error });
        return Err(classify_error_body(&body, headers));
    }
    Ok(chunk)
}

/// Why `text` did not decode, quoting it — unless it carries fields of
/// hidden state, which an error message (and so an event) must never show.
fn quoted(error: &serde_json::Error, text: &str) -> String {
    let hidden = CALL_FIELDS
        .iter()
        .chain(MESSAGE_FIELDS.iter())
        .any(|field| text.contains(field));
    if hidden {
        return format!(
            "(at line {} column {}; not quoted: it carries hidden reasoning or signatures)",
            error.line(),
            error.column()
        );
    }
    format!("({error}): {}", excerpt(text))
}

/// A complete JSON reply; also accepts an SSE body sent without the SSE
/// content type. A 200 whose body is an error is classified as that error.
pub(crate) fn decode_plain_body(
    bytes: &[u8],
    headers: &HeaderMap,
) -> Result<ReplyParts, AttemptError> {
    match decode(bytes) {
        Ok(reply) => {
            if let Some(error) = &reply.error {
                let body = serde_json::json!({ "error": error });
                return Err(classify_error_body(&body, headers));
            }
            parts_from_response(reply).map_err(AttemptError::transient)
        }
        Err(e) => {
            let text = String::from_utf8_lossy(bytes);
            if text.trim_start().starts_with("data:") {
                return decode_sse_text(&text, headers);
            }
            Err(AttemptError::transient(format!(
                "undecodable reply {}",
                quoted(&e, &text)
            )))
        }
    }
}

fn decode_sse_text(text: &str, headers: &HeaderMap) -> Result<ReplyParts, AttemptError> {
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
            assembler
                .push(decode_stream_chunk(data, headers)?)
                .map_err(AttemptError::transient)?;
        }
    }
    assembler.finish().map_err(AttemptError::transient)
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
    use reqwest::header::RETRY_AFTER;

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
        assert!(matches!(
            classify_status(404, &HeaderMap::new(), "x"),
            AttemptError::Unavailable(_)
        ));
        for transient in [408, 500, 502, 503] {
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
        let headers = HeaderMap::new();
        let parts = decode_plain_body(sse.as_bytes(), &headers).expect("sse text");
        assert_eq!(parts.content.as_deref(), Some("hi"));
        assert!(matches!(
            decode_plain_body(b"<html>oops", &headers),
            Err(AttemptError::Transient { .. })
        ));
    }

    #[test]
    fn an_undecodable_chunk_with_hidden_state_is_not_quoted() {
        let headers = HeaderMap::new();
        let data = r#"{"choices": [{"delta": {"reasoning_content": "secret plan", "content": 7"#;
        let Err(AttemptError::Transient { reason, .. }) = decode_stream_chunk(data, &headers)
        else {
            panic!("undecodable");
        };
        assert!(!reason.contains("secret"), "{reason}");
        assert!(reason.contains("not quoted"), "{reason}");
        let Err(AttemptError::Transient { reason, .. }) = decode_stream_chunk("{oops", &headers)
        else {
            panic!("undecodable");
        };
        assert!(reason.contains("{oops"), "{reason}");
    }

    #[test]
    fn an_error_in_a_stream_is_classified() {
        let headers = HeaderMap::new();
        let data = r#"{"error": {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}}"#;
        assert!(matches!(
            decode_stream_chunk(data, &headers),
            Err(AttemptError::Auth(ref detail)) if detail.contains("API key not valid")
        ));
    }
}
