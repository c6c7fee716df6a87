//! A deterministic action source for the demo and tests: replies come from a
//! JSON script instead of a model.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::Deserialize;

use super::error::ModelError;
use super::types::{ModelId, ModelReply, ModelRequest, ToolCall};
use super::wire::estimated_usage;
use super::{ActionSource, CompletionFuture, ModelObservation};

/// Context ceiling reported by the scripted source.
pub(crate) const SCRIPTED_CONTEXT_LIMIT: u64 = 128_000;

/// One scripted reply.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTurn {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// How long the reply takes to come, as a real model's would (for
    /// rehearsals where time matters: batches, timeouts).
    #[serde(default)]
    pub delay_ms: u64,
}

/// One scripted tool call; `arguments` is an object or a raw string (so a
/// script can send invalid JSON on purpose).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub name: String,
    #[serde(default = "empty_arguments")]
    pub arguments: serde_json::Value,
}

fn empty_arguments() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl ScriptedCall {
    fn arguments_text(&self) -> String {
        match &self.arguments {
            serde_json::Value::String(raw) => raw.clone(),
            other => other.to_string(),
        }
    }
}

/// The requests a [`ScriptedSource`] received, shared so a test can read them
/// after handing the source to the runtime.
#[derive(Debug, Clone, Default)]
pub struct RequestLog {
    requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl RequestLog {
    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn len(&self) -> usize {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&self, request: ModelRequest) {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(request);
    }
}

/// Replays a script; after its end, replies with text and no tool call.
#[derive(Debug, Clone)]
pub struct ScriptedSource {
    turns: std::collections::VecDeque<ScriptedTurn>,
    next_call: u64,
    /// Every request, kept only where a test asked for them: a long run
    /// would otherwise hold each request's whole history again.
    log: Option<RequestLog>,
    /// Whether the next request's assistant messages are replies to drop
    /// (set for a script going on, until its first request).
    skip_given: bool,
}

impl ScriptedSource {
    pub fn new(turns: Vec<ScriptedTurn>) -> Self {
        Self {
            turns: turns.into(),
            next_call: 1,
            log: None,
            skip_given: false,
        }
    }

    /// Parses a script: `[{"content": "...", "tool_calls": [{"name": ..., "arguments": {...}}]}, ...]`.
    pub(crate) fn from_json(script: &str) -> Result<Self, ModelError> {
        let turns: Vec<ScriptedTurn> = serde_json::from_str(script).map_err(|e| {
            ModelError::Config(format!(
                "the model script is not valid ({e}); it must be a JSON list of \
                 {{\"content\": TEXT, \"tool_calls\": [{{\"name\": TOOL, \"arguments\": OBJECT or STRING}}]}}"
            ))
        })?;
        Ok(Self::new(turns))
    }

    /// A script that goes on where the conversation is: the replies the
    /// first request already holds (a resumed run's) are not given again.
    pub(crate) fn going_on(mut self) -> Self {
        self.skip_given = true;
        self
    }

    /// A handle on the requests this source receives.
    #[cfg(test)]
    pub(crate) fn request_log(&mut self) -> RequestLog {
        self.log.get_or_insert_with(RequestLog::default).clone()
    }

    pub(crate) fn model_id() -> ModelId {
        ModelId {
            provider: "scripted".to_string(),
            model: "demo".to_string(),
        }
    }

    /// Drops the replies the conversation already has (one per assistant
    /// message), so a resumed run goes on where the script was.
    fn skip_given(&mut self, req: &ModelRequest) {
        let given = req
            .messages
            .iter()
            .filter(|m| m.role == super::types::Role::Assistant)
            .count();
        for _ in 0..given {
            match self.turns.pop_front() {
                Some(turn) => self.next_call += turn.tool_calls.len() as u64,
                None => break,
            }
        }
    }

    fn next_reply(&mut self, req: &ModelRequest) -> (ModelReply, u64) {
        if std::mem::take(&mut self.skip_given) {
            self.skip_given(req);
        }
        if let Some(log) = &self.log {
            log.push(req.clone());
        }
        let turn = self.turns.pop_front().unwrap_or_else(|| ScriptedTurn {
            content: Some("The script has no more replies.".to_string()),
            ..ScriptedTurn::default()
        });
        let tool_calls: Vec<ToolCall> = turn
            .tool_calls
            .iter()
            .map(|call| {
                let id = format!("call_{}", self.next_call);
                self.next_call += 1;
                ToolCall {
                    id,
                    name: call.name.clone(),
                    arguments: call.arguments_text(),
                    ..ToolCall::default()
                }
            })
            .collect();
        let usage = estimated_usage(req, turn.content.as_deref(), &tool_calls);
        let reply = ModelReply {
            content: turn.content,
            tool_calls,
            usage,
            model: Self::model_id(),
            provider: Default::default(),
        };
        (reply, turn.delay_ms)
    }
}

impl ActionSource for ScriptedSource {
    fn complete<'a>(
        &'a mut self,
        req: &'a ModelRequest,
        deadline: Instant,
        observe: &'a mut (dyn FnMut(ModelObservation) + Send),
    ) -> CompletionFuture<'a> {
        if Instant::now() >= deadline {
            return Box::pin(std::future::ready(Err(ModelError::DeadlineExceeded)));
        }
        let (reply, delay_ms) = self.next_reply(req);
        if delay_ms == 0 {
            if let Some(text) = &reply.content {
                observe(ModelObservation::Delta(text.clone()));
            }
            return Box::pin(std::future::ready(Ok(reply)));
        }
        let ready_at = Instant::now() + std::time::Duration::from_millis(delay_ms);
        Box::pin(async move {
            if ready_at > deadline {
                tokio::time::sleep_until(deadline.into()).await;
                return Err(ModelError::DeadlineExceeded);
            }
            tokio::time::sleep_until(ready_at.into()).await;
            if let Some(text) = &reply.content {
                observe(ModelObservation::Delta(text.clone()));
            }
            Ok(reply)
        })
    }

    fn current(&self) -> ModelId {
        Self::model_id()
    }

    fn context_limit(&self) -> u64 {
        SCRIPTED_CONTEXT_LIMIT
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::types::ChatMessage;

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            messages: vec![ChatMessage::user(text)],
            tools: Vec::new(),
        }
    }

    async fn ask(source: &mut ScriptedSource, text: &str) -> Result<ModelReply, ModelError> {
        let req = request(text);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = Vec::new();
        let mut observe = |o: ModelObservation| seen.push(o);
        source.complete(&req, deadline, &mut observe).await
    }

    #[tokio::test]
    async fn replays_the_script_with_generated_ids_then_ends() {
        let mut source = ScriptedSource::from_json(
            r#"[{"content": "reading", "tool_calls": [{"name": "read_file", "arguments": {"path": "a.py"}},
                                                      {"name": "ripgrep", "arguments": "{not json"}]},
                {"tool_calls": [{"name": "update_plan", "arguments": {"items": []}}]}]"#,
        )
        .expect("script");
        let log = source.request_log();
        let first = ask(&mut source, "one").await.expect("reply");
        assert_eq!(first.content.as_deref(), Some("reading"));
        assert_eq!(first.tool_calls[0].id, "call_1");
        assert_eq!(first.tool_calls[0].arguments, r#"{"path":"a.py"}"#);
        assert_eq!(first.tool_calls[1].id, "call_2");
        assert_eq!(first.tool_calls[1].arguments, "{not json");
        assert!(first.usage.estimated);
        let second = ask(&mut source, "two").await.expect("reply");
        assert_eq!(second.tool_calls[0].id, "call_3");
        let third = ask(&mut source, "three").await.expect("reply");
        assert!(third.tool_calls.is_empty());
        assert_eq!(source.current(), ScriptedSource::model_id());
        let texts: Vec<_> = log
            .requests()
            .iter()
            .map(|r| r.messages[0].content.clone().unwrap_or_default())
            .collect();
        assert_eq!(texts, ["one", "two", "three"]);
    }

    #[tokio::test]
    async fn a_delayed_reply_comes_after_its_delay_or_not_past_the_deadline() {
        let script =
            r#"[{"content": "slow", "delay_ms": 40}, {"content": "never", "delay_ms": 600000}]"#;
        let mut source = ScriptedSource::from_json(script).expect("script");
        let req = request("go");
        let mut observe = |_: ModelObservation| {};
        let started = Instant::now();
        let deadline = started + Duration::from_secs(30);
        let reply = source
            .complete(&req, deadline, &mut observe)
            .await
            .expect("reply");
        assert_eq!(reply.content.as_deref(), Some("slow"));
        assert!(started.elapsed() >= Duration::from_millis(40));
        let deadline = Instant::now() + Duration::from_millis(20);
        let late = source.complete(&req, deadline, &mut observe).await;
        assert!(
            matches!(late, Err(ModelError::DeadlineExceeded)),
            "{late:?}"
        );
    }

    #[tokio::test]
    async fn a_script_going_on_skips_the_replies_the_conversation_has() {
        let script = r#"[{"tool_calls": [{"name": "read_file", "arguments": {"path": "a"}}]},
                         {"tool_calls": [{"name": "read_file", "arguments": {"path": "b"}}]},
                         {"content": "done"}]"#;
        let mut source = ScriptedSource::from_json(script)
            .expect("script")
            .going_on();
        let mut req = request("go on");
        let earlier = ChatMessage {
            role: crate::model::types::Role::Assistant,
            ..ChatMessage::user("")
        };
        req.messages.push(earlier);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut observe = |_: ModelObservation| {};
        let reply = source
            .complete(&req, deadline, &mut observe)
            .await
            .expect("reply");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"b"}"#);
        assert_eq!(reply.tool_calls[0].id, "call_2", "ids go on too");
        let reply = source
            .complete(&req, deadline, &mut observe)
            .await
            .expect("reply");
        assert_eq!(
            reply.content.as_deref(),
            Some("done"),
            "only the first request skips"
        );
        // A script that is not going on starts at its beginning whatever the history.
        let mut fresh = ScriptedSource::from_json(script).expect("script");
        let reply = fresh
            .complete(&req, deadline, &mut observe)
            .await
            .expect("reply");
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"a"}"#);
    }

    #[tokio::test]
    async fn invalid_scripts_and_past_deadlines_are_errors() {
        assert!(matches!(
            ScriptedSource::from_json(r#"[{"tool_calls": [{"arguments": {}}]}]"#),
            Err(ModelError::Config(_))
        ));
        let mut source = ScriptedSource::new(Vec::new());
        let log = source.request_log();
        let req = request("x");
        let mut observe = |_: ModelObservation| {};
        let late = source.complete(&req, Instant::now(), &mut observe).await;
        assert!(matches!(late, Err(ModelError::DeadlineExceeded)));
        assert!(log.is_empty());
    }
}
