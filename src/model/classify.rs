//! How the chain reacts to a failed attempt, decided from the HTTP status or,
//! when a provider answers 200 with an error body (`{"error": {...}}`, also
//! inside a stream), from that body's code, status or type.
//!
//! | what came back                 | reaction                                   |
//! |--------------------------------|--------------------------------------------|
//! | 401, 403                       | configuration error: no retry, no fallback |
//! | 404 (model not found)          | the next provider at once: no retry        |
//! | 408, 429, 5xx                  | retried (`Retry-After` honoured), then the next provider |
//! | any other 4xx (400, 422, …)    | the request is wrong: stops, quoting the provider |
//!
//! The provider's message is quoted bounded and escaped: it is hostile text
//! on its way to a terminal and the run's artifacts.

use std::time::{Duration, SystemTime};

use reqwest::header::{HeaderMap, RETRY_AFTER};
use serde_json::Value;

use super::retry::parse_retry_after;

/// Why one attempt failed, classified for the retry logic.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptError {
    /// Worth retrying: 408, 429, 5xx, connection errors, undecodable or cut replies.
    Transient {
        reason: String,
        retry_after: Option<Duration>,
    },
    /// 404: this provider does not serve the model. Retrying cannot help;
    /// the next provider of the chain may.
    Unavailable(String),
    /// 401 or 403.
    Auth(String),
    /// Any other 4xx: the request itself is wrong.
    Rejected { status: u16, detail: String },
    /// The run's deadline passed.
    Deadline,
}

impl AttemptError {
    pub(crate) fn transient(reason: impl Into<String>) -> Self {
        Self::Transient {
            reason: reason.into(),
            retry_after: None,
        }
    }
}

/// Characters of a provider's message that are quoted.
const MESSAGE_LIMIT: usize = 500;

/// Maps an HTTP error status to how the chain should react.
pub fn classify_status(status: u16, headers: &HeaderMap, body: &str) -> AttemptError {
    let detail = match serde_json::from_str::<Value>(body) {
        Ok(value) if error_object(&value).is_some() => describe(error_object(&value)),
        _ if body.trim().is_empty() => "(empty body)".to_string(),
        _ => excerpt(body),
    };
    react(status, detail, retry_after(headers))
}

/// Classifies a body that reports an error although the status was 200.
pub(crate) fn classify_error_body(body: &Value, headers: &HeaderMap) -> AttemptError {
    let error = error_object(body);
    let status = error.map_or(500, status_of);
    let detail = format!(
        "the provider answered 200 with an error: {}",
        describe(error)
    );
    react(status, detail, retry_after(headers))
}

fn react(status: u16, detail: String, retry_after: Option<Duration>) -> AttemptError {
    match status {
        401 | 403 => AttemptError::Auth(format!("HTTP {status}: {detail}")),
        404 => AttemptError::Unavailable(format!("HTTP {status}: {detail}")),
        408 | 429 | 500..=599 => AttemptError::Transient {
            reason: format!("HTTP {status}: {detail}"),
            retry_after,
        },
        400..=499 => AttemptError::Rejected { status, detail },
        // Anything else that is not success (1xx, 3xx, unknown codes) may pass.
        _ => AttemptError::Transient {
            reason: format!("HTTP {status}: {detail}"),
            retry_after,
        },
    }
}

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, SystemTime::now()))
}

/// The error object of `{"error": {...}}`, `[{"error": {...}}]` (Gemini) or
/// `{"error": "text"}`.
fn error_object(body: &Value) -> Option<&Value> {
    match body {
        Value::Array(items) => items.first().and_then(|item| item.get("error")),
        other => other.get("error"),
    }
    .filter(|e| !e.is_null())
}

/// The HTTP status an error body stands for: its numeric `code`, else its
/// `status` or `type` name; unknown errors count as a server error.
fn status_of(error: &Value) -> u16 {
    let code = error.get("code").and_then(|c| match c {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    });
    if let Some(code) = code.filter(|c| (100..=599).contains(c)) {
        return code as u16;
    }
    let names = ["status", "type", "code"]
        .iter()
        .filter_map(|k| error.get(*k).and_then(Value::as_str))
        .map(str::to_ascii_lowercase);
    for name in names {
        let status = match name.as_str() {
            "invalid_argument"
            | "invalid_request_error"
            | "failed_precondition"
            | "bad_request" => 400,
            "unauthenticated" | "authentication_error" | "invalid_api_key" => 401,
            "permission_denied" | "permission_error" => 403,
            "not_found" | "not_found_error" | "model_not_found" => 404,
            "resource_exhausted"
            | "rate_limit_error"
            | "rate_limit_exceeded"
            | "insufficient_quota" => 429,
            "unavailable" | "overloaded_error" | "service_unavailable" => 503,
            "deadline_exceeded" => 504,
            _ => continue,
        };
        return status;
    }
    500
}

/// `type: message` (or `STATUS: message`), bounded and escaped.
fn describe(error: Option<&Value>) -> String {
    let Some(error) = error else {
        return "(no error message)".to_string();
    };
    if let Some(text) = error.as_str() {
        return excerpt(text);
    }
    let mut message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("(no error message)")
        .to_string();
    // Gateways wrap the upstream's JSON error in their own message.
    if let Ok(inner) = serde_json::from_str::<Value>(message.trim())
        && let Some(inner) = error_object(&inner)
        && let Some(text) = inner.get("message").and_then(Value::as_str)
    {
        message = text.to_string();
    }
    let kind = ["type", "status"]
        .iter()
        .find_map(|k| error.get(*k).and_then(Value::as_str))
        .filter(|k| !k.is_empty());
    match kind {
        Some(kind) => format!("{}: {}", excerpt(kind), excerpt(&message)),
        None => excerpt(&message),
    }
}

/// At most [`MESSAGE_LIMIT`] characters on one line, control characters and
/// escape sequences written out (`\u{1b}`) so they cannot act on a terminal.
pub(crate) fn excerpt(text: &str) -> String {
    let trimmed = text.trim();
    let mut out = String::with_capacity(trimmed.len().min(MESSAGE_LIMIT + 8));
    for (n, c) in trimmed.chars().enumerate() {
        if n == MESSAGE_LIMIT {
            out.push('…');
            break;
        }
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            c if c.is_control() || is_bidi_control(c) => {
                out.extend(c.escape_unicode());
            }
            c => out.push(c),
        }
    }
    out
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_bounded_and_escaped() {
        let shown = excerpt("bad \u{1b}[2Jthing\nnext");
        assert_eq!(shown, "bad \\u{1b}[2Jthing next");
        let long = excerpt(&"x".repeat(1000));
        assert_eq!(long.chars().count(), MESSAGE_LIMIT + 1);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn error_bodies_name_their_status() {
        let headers = HeaderMap::new();
        let gemini =
            json!([{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}]);
        assert!(matches!(
            classify_error_body(&gemini, &headers),
            AttemptError::Transient { ref reason, .. } if reason.contains("HTTP 429") && reason.contains("RESOURCE_EXHAUSTED: quota")
        ));
        let by_type = json!({"error": {"message": "no", "type": "invalid_request_error", "code": "invalid_request_error"}});
        assert!(matches!(
            classify_error_body(&by_type, &headers),
            AttemptError::Rejected { status: 400, .. }
        ));
        let by_string_code = json!({"error": {"message": "who?", "code": "401"}});
        assert!(matches!(
            classify_error_body(&by_string_code, &headers),
            AttemptError::Auth(_)
        ));
        let unknown = json!({"error": "upstream exploded"});
        assert!(matches!(
            classify_error_body(&unknown, &headers),
            AttemptError::Transient { ref reason, .. } if reason.contains("upstream exploded")
        ));
    }

    #[test]
    fn a_wrapped_upstream_message_is_unwrapped() {
        let body = json!({"error": {"message": "{\n \"error\": {\"code\": 400, \"message\": \"missing a thought_signature\", \"status\": \"INVALID_ARGUMENT\"}\n}\n", "code": 400, "status": "Bad Request"}});
        let AttemptError::Rejected { detail, .. } =
            classify_status(400, &HeaderMap::new(), &body.to_string())
        else {
            panic!("a 400 is rejected");
        };
        assert_eq!(detail, "Bad Request: missing a thought_signature");
    }
}
