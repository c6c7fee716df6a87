//! An OpenAI-compatible Chat Completions server for tests, on 127.0.0.1:0.
//!
//! Hand-rolled on tokio so a test can script what no framework does on
//! purpose: a connection dropped before the answer, or a stream cut mid-way.
//! Every request is recorded; replies come from a queue, and an empty queue
//! answers with the text "no more scripted replies". It speaks the OpenAI
//! format, or the Gemini or DeepSeek dialect ([`Dialect`]), in which it
//! refuses a history that lacks the hidden state it handed out.

#[path = "mock_dialect.rs"]
mod dialect;
#[path = "mock_wire.rs"]
mod wire;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use dialect::{Completion, Ledger, Rendered};
#[allow(unused_imports)]
pub use dialect::{Dialect, REASONING_MARKER, Shape};
use wire::{Answer, read_request, write_response};

/// One request as it reached the server.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When its head arrived, in milliseconds since the Unix epoch (as the
    /// event log's `ts`).
    pub received_ms: i64,
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

/// Whether a completion is streamed: fixed, or as the request asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Streaming {
    Plain,
    Sse,
    AsAsked,
}

#[derive(Debug, Clone)]
enum Kind {
    Completion {
        completion: Completion,
        streaming: Streaming,
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
    fn completion(content: Option<&str>, calls: &[(&str, Value)], streaming: Streaming) -> Self {
        Self {
            kind: Kind::Completion {
                completion: Completion {
                    content: content.map(str::to_string),
                    calls: calls
                        .iter()
                        .map(|(n, a)| (n.to_string(), a.to_string()))
                        .collect(),
                    usage: Some((100, 20)),
                    cached: 0,
                    shape: Shape::default(),
                },
                streaming,
                cut: false,
            },
            delay: Duration::ZERO,
        }
    }

    fn completion_mut(&mut self) -> Option<&mut Completion> {
        match &mut self.kind {
            Kind::Completion { completion, .. } => Some(completion),
            _ => None,
        }
    }

    /// A plain JSON completion with this text (usage 100 in, 20 out).
    pub fn text(content: &str) -> Self {
        Self::completion(Some(content), &[], Streaming::Plain)
    }

    /// A plain JSON completion calling these tools (ids `call_1`, … in the
    /// OpenAI format; unique across the server in a dialect).
    pub fn tool_calls(calls: &[(&str, Value)]) -> Self {
        Self::completion(None, calls, Streaming::Plain)
    }

    /// A completion calling these tools, streamed if the request asked for a
    /// stream and plain JSON if not.
    pub fn as_asked(calls: &[(&str, Value)]) -> Self {
        Self::completion(None, calls, Streaming::AsAsked)
    }

    /// A plain JSON completion whose tool calls carry these raw argument
    /// texts, which need not be valid JSON.
    pub fn tool_calls_raw(calls: &[(&str, &str)]) -> Self {
        let mut response = Self::completion(None, &[], Streaming::Plain);
        if let Some(completion) = response.completion_mut() {
            completion.calls = calls
                .iter()
                .map(|(n, a)| (n.to_string(), a.to_string()))
                .collect();
        }
        response
    }

    /// An SSE stream of this text, a few characters a chunk, then a usage chunk and `[DONE]`.
    pub fn sse_text(content: &str) -> Self {
        Self::completion(Some(content), &[], Streaming::Sse)
    }

    /// An SSE stream calling these tools: id and name in a call's first chunk,
    /// its arguments split over three more, interleaved between calls.
    pub fn sse_tool_calls(calls: &[(&str, Value)]) -> Self {
        Self::completion(None, calls, Streaming::Sse)
    }

    /// Adds leading text to a completion.
    pub fn with_content(mut self, text: &str) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.content = Some(text.to_string());
        }
        self
    }

    /// Reports this usage: `input` tokens in (`cached` of them from the
    /// prompt cache, said the way the dialect says it), `output` out.
    pub fn with_usage(mut self, input: u32, cached: u32, output: u32) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.usage = Some((input, output));
            completion.cached = cached;
        }
        self
    }

    /// Leaves token usage out of the reply.
    pub fn without_usage(mut self) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.usage = None;
        }
        self
    }

    /// In a Gemini stream: a variation of the shape ([`Shape`]).
    pub fn with_shape(mut self, shape: Shape) -> Self {
        if let Some(completion) = self.completion_mut() {
            completion.shape = shape;
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
    dialect: Dialect,
    ledger: Ledger,
    /// The 400 bodies of refused requests, in order.
    refusals: Vec<String>,
}

/// The running server; stopped when dropped.
pub struct MockOpenAi {
    addr: SocketAddr,
    shared: Arc<Mutex<Shared>>,
    task: JoinHandle<()>,
}

impl MockOpenAi {
    pub async fn start() -> Self {
        Self::speaking(Dialect::OpenAi).await
    }

    /// A server that answers in `dialect` and refuses histories that lack
    /// the hidden state it handed out.
    pub async fn speaking(dialect: Dialect) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Mutex::new(Shared {
            dialect,
            ..Shared::default()
        }));
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

    /// Gemini: the `extra_content` handed out, by tool call id.
    pub fn signatures(&self) -> HashMap<String, Value> {
        self.shared.lock().expect("lock").ledger.signatures.clone()
    }

    /// DeepSeek: the reasoning handed out, by tool call id.
    pub fn reasoning(&self) -> HashMap<String, String> {
        self.shared.lock().expect("lock").ledger.reasoning.clone()
    }

    /// Every tool call id handed out, in order.
    pub fn call_ids(&self) -> Vec<String> {
        self.shared.lock().expect("lock").ledger.order.clone()
    }

    /// The bodies of the requests refused for missing or altered state.
    pub fn refusals(&self) -> Vec<String> {
        self.shared.lock().expect("lock").refusals.clone()
    }
}

impl Shared {
    fn answer(&mut self, request: &RecordedRequest) -> (Answer, Duration) {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        if let Some(refusal) = dialect::refusal(self.dialect, &self.ledger, &body) {
            self.refusals.push(refusal.clone());
            let answer = Answer::Http {
                status: 400,
                headers: Vec::new(),
                content_type: "application/json".into(),
                body: refusal,
            };
            return (answer, Duration::ZERO);
        }
        let response = self
            .queue
            .pop_front()
            .unwrap_or_else(|| MockResponse::text("no more scripted replies"));
        let answer = match response.kind {
            Kind::Drop => Answer::Drop,
            Kind::Http {
                status,
                headers,
                content_type,
                body,
            } => Answer::Http {
                status,
                headers,
                content_type,
                body,
            },
            Kind::Completion {
                completion,
                streaming,
                cut,
            } => {
                let stream = match streaming {
                    Streaming::Plain => false,
                    Streaming::Sse => true,
                    Streaming::AsAsked => body["stream"] == true,
                };
                let model = body["model"].as_str().unwrap_or("mock-model");
                match dialect::render(self.dialect, &completion, stream, model, &mut self.ledger) {
                    Rendered::Json(body) => Answer::Http {
                        status: 200,
                        headers: Vec::new(),
                        content_type: "application/json".into(),
                        body,
                    },
                    Rendered::Events(events) => Answer::Events { events, cut },
                }
            }
        };
        (answer, response.delay)
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
    let (answer, delay) = {
        let mut shared = shared.lock().expect("lock");
        let answered = shared.answer(&request);
        shared.requests.push(request);
        answered
    };
    tokio::time::sleep(delay).await;
    // Write errors mean the client went away (e.g. it timed out): nothing to do.
    let _ = write_response(&mut stream, answer).await;
}
