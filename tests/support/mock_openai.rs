//! An OpenAI-compatible Chat Completions server for tests, on 127.0.0.1:0.
//!
//! Hand-rolled on tokio so a test can script what no framework does on
//! purpose: a connection dropped before the answer, or a stream cut mid-way.
//! Every request is recorded; replies come from a queue, and an empty queue
//! answers with the text "no more scripted replies".

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One request as it reached the server.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RecordedRequest {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the request body is JSON")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The names in the request's `tools` field.
    pub fn tool_names(&self) -> Vec<String> {
        self.json()["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn messages(&self) -> Vec<Value> {
        self.json()["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

#[derive(Debug, Clone)]
enum Kind {
    Completion {
        content: Option<String>,
        /// Tool name and the raw arguments text (valid JSON or not).
        calls: Vec<(String, String)>,
        usage: Option<(u32, u32)>,
        stream: bool,
        cut: bool,
    },
    Http {
        status: u16,
        headers: Vec<(String, String)>,
        content_type: String,
        body: String,
    },
    Drop,
}

/// A scripted reply.
#[derive(Debug, Clone)]
pub struct MockResponse {
    kind: Kind,
    delay: Duration,
}

impl MockResponse {
    fn completion(content: Option<&str>, calls: &[(&str, Value)], stream: bool) -> Self {
        Self {
            kind: Kind::Completion {
                content: content.map(str::to_string),
                calls: calls
                    .iter()
                    .map(|(n, a)| (n.to_string(), a.to_string()))
                    .collect(),
                usage: Some((100, 20)),
                stream,
                cut: false,
            },
            delay: Duration::ZERO,
        }
    }

    /// A plain JSON completion with this text (usage 100 in, 20 out).
    pub fn text(content: &str) -> Self {
        Self::completion(Some(content), &[], false)
    }

    /// A plain JSON completion calling these tools (ids `call_1`, …).
    pub fn tool_calls(calls: &[(&str, Value)]) -> Self {
        Self::completion(None, calls, false)
    }

    /// A plain JSON completion whose tool calls carry these raw argument
    /// texts, which need not be valid JSON.
    pub fn tool_calls_raw(calls: &[(&str, &str)]) -> Self {
        let mut response = Self::completion(None, &[], false);
        if let Kind::Completion { calls: c, .. } = &mut response.kind {
            *c = calls
                .iter()
                .map(|(n, a)| (n.to_string(), a.to_string()))
                .collect();
        }
        response
    }

    /// An SSE stream of this text, a few characters a chunk, then a usage chunk and `[DONE]`.
    pub fn sse_text(content: &str) -> Self {
        Self::completion(Some(content), &[], true)
    }

    /// An SSE stream calling these tools: id and name in a call's first chunk,
    /// its arguments split over three more, interleaved between calls.
    pub fn sse_tool_calls(calls: &[(&str, Value)]) -> Self {
        Self::completion(None, calls, true)
    }

    /// Adds leading text to a completion.
    pub fn with_content(mut self, text: &str) -> Self {
        if let Kind::Completion { content, .. } = &mut self.kind {
            *content = Some(text.to_string());
        }
        self
    }

    /// Leaves token usage out of the reply.
    pub fn without_usage(mut self) -> Self {
        if let Kind::Completion { usage, .. } = &mut self.kind {
            *usage = None;
        }
        self
    }

    /// Cuts an SSE stream after its first chunks: no finish, no `[DONE]`, an
    /// unterminated chunked body.
    pub fn cut(mut self) -> Self {
        if let Kind::Completion { cut, .. } = &mut self.kind {
            *cut = true;
        }
        self
    }

    /// An HTTP error status with an OpenAI-style error body.
    pub fn status(status: u16) -> Self {
        let body = json!({"error": {"message": format!("scripted status {status}"), "type": "mock_error", "code": null, "param": null}});
        Self::raw(status, "application/json", &body.to_string())
    }

    /// 429 with this `Retry-After` value.
    pub fn rate_limited(retry_after: &str) -> Self {
        Self::status(429).with_header("Retry-After", retry_after)
    }

    /// Any status, content type and body.
    pub fn raw(status: u16, content_type: &str, body: &str) -> Self {
        Self {
            kind: Kind::Http {
                status,
                headers: Vec::new(),
                content_type: content_type.to_string(),
                body: body.to_string(),
            },
            delay: Duration::ZERO,
        }
    }

    /// A 200 whose body is not JSON.
    pub fn garbage() -> Self {
        Self::raw(
            200,
            "application/json",
            "{\"id\": \"oops\", this is not json <html>",
        )
    }

    /// Reads the request, then closes the connection without answering.
    pub fn dropped() -> Self {
        Self {
            kind: Kind::Drop,
            delay: Duration::ZERO,
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        if let Kind::Http { headers, .. } = &mut self.kind {
            headers.push((name.to_string(), value.to_string()));
        }
        self
    }

    /// Waits this long before answering.
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

#[derive(Default)]
struct Shared {
    queue: VecDeque<MockResponse>,
    requests: Vec<RecordedRequest>,
}

/// The running server; stopped when dropped.
pub struct MockOpenAi {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl MockOpenAi {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Mutex::new(Shared::default()));
        let for_task = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, for_task.clone()));
            }
        });
        Self { addr, shared, task }
    }

    /// The base URL to configure, e.g. `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn push(&self, response: MockResponse) -> &Self {
        self.shared.lock().expect("lock").queue.push_back(response);
        self
    }

    pub fn push_all(&self, responses: impl IntoIterator<Item = MockResponse>) -> &Self {
        self.shared.lock().expect("lock").queue.extend(responses);
        self
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().expect("lock").requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.lock().expect("lock").requests.len()
    }

    /// Scripted replies not yet served.
    pub fn pending(&self) -> usize {
        self.shared.lock().expect("lock").queue.len()
    }
}

impl Drop for MockOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut stream: TcpStream, shared: Arc<Mutex<Shared>>) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let response = {
        let mut shared = shared.lock().expect("lock");
        shared.requests.push(request);
        shared
            .queue
            .pop_front()
            .unwrap_or_else(|| MockResponse::text("no more scripted replies"))
    };
    tokio::time::sleep(response.delay).await;
    // Write errors mean the client went away (e.g. it timed out): nothing to do.
    let _ = write_response(&mut stream, response.kind).await;
}

async fn read_request(stream: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let header_end = loop {
        if let Some(pos) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split_whitespace();
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[header_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(RecordedRequest {
        method,
        path,
        headers,
        body,
    })
}

async fn write_response(stream: &mut TcpStream, kind: Kind) -> std::io::Result<()> {
    match kind {
        Kind::Drop => stream.shutdown().await,
        Kind::Http {
            status,
            headers,
            content_type,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
                reason_phrase(status),
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            stream.shutdown().await
        }
        Kind::Completion {
            content,
            calls,
            usage,
            stream: false,
            ..
        } => {
            let body = plain_completion(content, &calls, usage).to_string();
            Box::pin(write_response(
                stream,
                Kind::Http {
                    status: 200,
                    headers: Vec::new(),
                    content_type: "application/json".into(),
                    body,
                },
            ))
            .await
        }
        Kind::Completion {
            content,
            calls,
            usage,
            stream: true,
            cut,
        } => {
            stream
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                )
                .await?;
            let events = sse_events(content, &calls, usage);
            let keep = if cut {
                2.min(events.len())
            } else {
                events.len()
            };
            for event in &events[..keep] {
                let data = format!("data: {event}\n\n");
                stream
                    .write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
                    .await?;
                stream.flush().await?;
            }
            if !cut {
                stream.write_all(b"0\r\n\r\n").await?;
            }
            stream.shutdown().await
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn usage_json(usage: Option<(u32, u32)>) -> Value {
    usage.map_or(Value::Null, |(input, output)| {
        json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
    })
}

fn plain_completion(
    content: Option<String>,
    calls: &[(String, String)],
    usage: Option<(u32, u32)>,
) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{}", i + 1), "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": content});
    if !tool_calls.is_empty() {
        message["tool_calls"] = Value::Array(tool_calls);
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let mut body = json!({
        "id": "chatcmpl-mock", "object": "chat.completion", "created": 1, "model": "mock-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    });
    if usage.is_some() {
        body["usage"] = usage_json(usage);
    }
    body
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({
        "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], "usage": null
    })
    .to_string()
}

fn sse_events(
    content: Option<String>,
    calls: &[(String, String)],
    usage: Option<(u32, u32)>,
) -> Vec<String> {
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    if let Some(text) = content {
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(4) {
            events.push(chunk(
                json!({"content": piece.iter().collect::<String>()}),
                None,
            ));
        }
    }
    let args: Vec<Vec<String>> = calls.iter().map(|(_, a)| split_in_three(a)).collect();
    for (i, (name, _)) in calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": i, "id": format!("call_{}", i + 1), "type": "function",
                                   "function": {"name": name, "arguments": ""}}]}),
            None,
        ));
    }
    for part in 0..3 {
        for (i, pieces) in args.iter().enumerate() {
            events.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": pieces[part]}}]}),
                None,
            ));
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(chunk(json!({}), Some(finish)));
    if usage.is_some() {
        events.push(
            json!({"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1,
                   "model": "mock-model", "choices": [], "usage": usage_json(usage)})
            .to_string(),
        );
    }
    events.push("[DONE]".to_string());
    events
}

fn split_in_three(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let third = chars.len().div_ceil(3).max(1);
    let mut parts: Vec<String> = chars.chunks(third).map(|c| c.iter().collect()).collect();
    parts.resize(3, String::new());
    parts
}
