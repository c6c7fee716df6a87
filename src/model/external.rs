//! An action source driven from outside: another program (an MCP client)
//! chooses each tool call, and the run performs it exactly as it performs a
//! model's — the same policy, sandbox, bounds, events and verifier.
//!
//! The two ends meet over two channels. Each request the run makes is handed
//! to the driver ([`ExternalDriver::next_turn`]): it carries the results of
//! the previous call. The driver answers with the next call
//! ([`ExternalDriver::send`]). A driver that goes away ends the source's
//! answers: the run is then cancelled by whoever owns it.

use std::time::Instant;

use tokio::sync::mpsc;

use super::error::ModelError;
use super::types::{ModelId, ModelReply, ModelRequest, ToolCall};
use super::wire::estimated_usage;
use super::{ActionSource, CompletionFuture, ModelObservation};

/// The context ceiling reported: the driver keeps its own context.
const EXTERNAL_CONTEXT_LIMIT: u64 = 1_000_000;

/// The run's side: answers each request with the driver's next call.
pub struct ExternalSource {
    turns: mpsc::Sender<ModelRequest>,
    calls: mpsc::Receiver<ToolCall>,
    label: String,
}

/// The driver's side.
pub struct ExternalDriver {
    turns: mpsc::Receiver<ModelRequest>,
    calls: mpsc::Sender<ToolCall>,
    next_call: u64,
}

/// A source and its driver; `label` names the driver in the run's records
/// (`external:LABEL`).
pub fn external(label: &str) -> (ExternalSource, ExternalDriver) {
    let (turns_tx, turns_rx) = mpsc::channel(1);
    let (calls_tx, calls_rx) = mpsc::channel(1);
    (
        ExternalSource {
            turns: turns_tx,
            calls: calls_rx,
            label: label.to_string(),
        },
        ExternalDriver {
            turns: turns_rx,
            calls: calls_tx,
            next_call: 1,
        },
    )
}

impl ExternalDriver {
    /// Waits for the run's next request; `None` once the run stopped asking.
    pub async fn next_turn(&mut self) -> Option<ModelRequest> {
        self.turns.recv().await
    }

    /// Gives the run its next call: a tool name and its JSON arguments.
    /// Returns the call's id (`call_N`), or `None` when the run no longer
    /// listens.
    pub async fn send(&mut self, name: &str, arguments: &str) -> Option<String> {
        let id = format!("call_{}", self.next_call);
        self.next_call += 1;
        let call = ToolCall {
            id: id.clone(),
            name: name.to_string(),
            arguments: arguments.to_string(),
            ..ToolCall::default()
        };
        self.calls.send(call).await.ok().map(|()| id)
    }
}

/// The text the run answered a call with: the tool result with the call's
/// id, else (the run spoke instead, e.g. a refusal before the call ran) the
/// last message of the request.
pub fn answer_to(request: &ModelRequest, call_id: &str) -> String {
    request
        .messages
        .iter()
        .rev()
        .find(|m| m.tool_call_id.as_deref() == Some(call_id))
        .or_else(|| request.messages.last())
        .and_then(|m| m.content.clone())
        .unwrap_or_default()
}

impl ExternalSource {
    fn model_id(&self) -> ModelId {
        ModelId {
            provider: "external".to_string(),
            model: self.label.clone(),
        }
    }
}

impl ActionSource for ExternalSource {
    fn complete<'a>(
        &'a mut self,
        req: &'a ModelRequest,
        deadline: Instant,
        _observe: &'a mut (dyn FnMut(ModelObservation) + Send),
    ) -> CompletionFuture<'a> {
        Box::pin(async move {
            let until = tokio::time::Instant::from_std(deadline);
            let handed = tokio::time::timeout_at(until, self.turns.send(req.clone())).await;
            match handed {
                Err(_) => return Err(ModelError::DeadlineExceeded),
                Ok(Err(_)) => return Err(gone()),
                Ok(Ok(())) => {}
            }
            let call = match tokio::time::timeout_at(until, self.calls.recv()).await {
                Err(_) => return Err(ModelError::DeadlineExceeded),
                Ok(None) => return Err(gone()),
                Ok(Some(call)) => call,
            };
            let tool_calls = vec![call];
            let usage = estimated_usage(req, None, &tool_calls);
            Ok(ModelReply {
                content: None,
                tool_calls,
                usage,
                model: self.model_id(),
                provider: Default::default(),
            })
        })
    }

    fn current(&self) -> ModelId {
        self.model_id()
    }

    fn context_limit(&self) -> u64 {
        EXTERNAL_CONTEXT_LIMIT
    }
}

fn gone() -> ModelError {
    ModelError::Config("the program driving this run went away".to_string())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::types::ChatMessage;

    fn request(messages: Vec<ChatMessage>) -> ModelRequest {
        ModelRequest {
            messages,
            tools: Vec::new(),
        }
    }

    #[tokio::test]
    async fn each_request_reaches_the_driver_and_its_call_comes_back() {
        let (mut source, mut driver) = external("test");
        let req = request(vec![ChatMessage::user("task")]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let turn = tokio::spawn(async move {
            let mut observe = |_: ModelObservation| {};
            let reply = source.complete(&req, deadline, &mut observe).await;
            (source, reply)
        });
        let seen = driver.next_turn().await.unwrap();
        assert_eq!(seen.messages[0].content.as_deref(), Some("task"));
        let id = driver.send("read_file", r#"{"path":"a"}"#).await;
        assert_eq!(id.as_deref(), Some("call_1"));
        let (source, reply) = turn.await.unwrap();
        let reply = reply.unwrap();
        assert_eq!(reply.tool_calls.len(), 1);
        assert_eq!(reply.tool_calls[0].id, "call_1");
        assert_eq!(reply.tool_calls[0].name, "read_file");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(source.current().provider, "external");
        assert_eq!(source.current().model, "test");
    }

    #[tokio::test]
    async fn a_driver_that_goes_away_ends_the_answers() {
        let (mut source, driver) = external("test");
        drop(driver);
        let req = request(vec![ChatMessage::user("task")]);
        let mut observe = |_: ModelObservation| {};
        let reply = source
            .complete(&req, Instant::now() + Duration::from_secs(10), &mut observe)
            .await;
        assert!(matches!(reply, Err(ModelError::Config(_))), "{reply:?}");
    }

    #[tokio::test]
    async fn a_silent_driver_meets_the_deadline() {
        let (mut source, mut driver) = external("test");
        let req = request(vec![ChatMessage::user("task")]);
        let waiting = tokio::spawn(async move { driver.next_turn().await.map(|_| driver) });
        let mut observe = |_: ModelObservation| {};
        let reply = source
            .complete(
                &req,
                Instant::now() + Duration::from_millis(50),
                &mut observe,
            )
            .await;
        assert!(
            matches!(reply, Err(ModelError::DeadlineExceeded)),
            "{reply:?}"
        );
        drop(waiting);
    }

    #[test]
    fn the_answer_is_the_result_of_the_call_else_what_the_run_said() {
        let req = request(vec![
            ChatMessage::user("task"),
            ChatMessage::tool_result("call_1", "first"),
            ChatMessage::tool_result("call_2", "second"),
            ChatMessage::user("a note"),
        ]);
        assert_eq!(answer_to(&req, "call_1"), "first");
        assert_eq!(answer_to(&req, "call_2"), "second");
        assert_eq!(answer_to(&req, "call_9"), "a note");
    }
}
