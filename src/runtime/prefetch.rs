//! A new run's first model request, sent while its workspace is copied (once
//! the image is known to have the programs the checks need, so a run that
//! cannot verify asks the model nothing): the model's first answer takes the
//! time the copy takes. The request is the one the agent will make once the
//! run starts, built from the same inputs (the project instructions read
//! from the source, only where the copy takes them as they are); the
//! driver's first request takes the answer if it is exactly that request,
//! and otherwise the answer is dropped and the request sent as usual.

use std::time::Instant;

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::model::types::{ModelId, ModelReply, ModelRequest};
use crate::model::{ActionSource, CompletionFuture, ModelError, ModelObservation};

/// The source back, and the answer if the request was sent.
type Answered = (
    Box<dyn ActionSource>,
    Option<Result<ModelReply, ModelError>>,
);

/// An [`ActionSource`] whose first request may already be in flight.
pub(crate) struct Prefetching {
    state: State,
    current: ModelId,
    context_limit: u64,
}

enum State {
    InFlight {
        request: ModelRequest,
        task: AbortOnDrop,
        observed: mpsc::UnboundedReceiver<ModelObservation>,
    },
    Ready(Box<dyn ActionSource>),
    /// The early request's task died (or was dropped half-way).
    Lost,
}

/// The task is stopped with its handle: a run that never starts asks the
/// provider nothing more.
struct AbortOnDrop(JoinHandle<Answered>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Prefetching {
    /// Sends `request` through `source` once `gate` says yes (never if it
    /// says no or is dropped), answering before `deadline`.
    pub(crate) fn start(
        mut source: Box<dyn ActionSource>,
        request: ModelRequest,
        deadline: Instant,
        gate: oneshot::Receiver<bool>,
    ) -> Self {
        let (current, context_limit) = (source.current(), source.context_limit());
        let (tx, observed) = mpsc::unbounded_channel();
        let sent_request = request.clone();
        let task = tokio::spawn(async move {
            let mut observe = move |o: ModelObservation| {
                let _ = tx.send(o);
            };
            if gate.await != Ok(true) {
                return (source, None);
            }
            let result = source.complete(&sent_request, deadline, &mut observe).await;
            (source, Some(result))
        });
        Self {
            state: State::InFlight {
                request,
                task: AbortOnDrop(task),
                observed,
            },
            current,
            context_limit,
        }
    }

    #[cfg(test)]
    fn in_flight(&self) -> bool {
        matches!(self.state, State::InFlight { .. })
    }
}

impl ActionSource for Prefetching {
    fn complete<'a>(
        &'a mut self,
        req: &'a ModelRequest,
        deadline: Instant,
        observe: &'a mut (dyn FnMut(ModelObservation) + Send),
    ) -> CompletionFuture<'a> {
        Box::pin(async move {
            if let State::InFlight { .. } = self.state
                && let State::InFlight {
                    request,
                    mut task,
                    mut observed,
                } = std::mem::replace(&mut self.state, State::Lost)
            {
                // What the early request observed so far, then as it comes;
                // of an answer that will be dropped, only a fallback (the
                // chain stays on the next model).
                let same = *req == request;
                let mut pass = |o: ModelObservation| {
                    if same || matches!(o, ModelObservation::Fallback { .. }) {
                        observe(o);
                    }
                };
                let joined = loop {
                    tokio::select! {
                        biased;
                        Some(o) = observed.recv() => pass(o),
                        joined = &mut task.0 => break joined,
                    }
                };
                while let Ok(o) = observed.try_recv() {
                    pass(o);
                }
                let (source, result) = joined.map_err(|e| {
                    ModelError::Config(format!("the run's first model request was lost: {e}"))
                })?;
                self.state = State::Ready(source);
                match result {
                    Some(result) if same => return result,
                    Some(_) => tracing::debug!(
                        "the first request changed before it was taken; asked again"
                    ),
                    None => {}
                }
            }
            match &mut self.state {
                State::Ready(source) => source.complete(req, deadline, observe).await,
                _ => Err(ModelError::Config(
                    "the model source was lost with the run's first request".into(),
                )),
            }
        })
    }

    fn current(&self) -> ModelId {
        match &self.state {
            State::Ready(source) => source.current(),
            _ => self.current.clone(),
        }
    }

    fn context_limit(&self) -> u64 {
        match &self.state {
            State::Ready(source) => source.context_limit(),
            _ => self.context_limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;
    use crate::model::types::ChatMessage;
    use crate::model::{ScriptedSource, scripted::ScriptedTurn};

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            messages: vec![ChatMessage::user(text)],
            tools: Vec::new(),
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(30)
    }

    /// A gate already open (`true`) or shut.
    fn gate(open: bool) -> oneshot::Receiver<bool> {
        let (tx, rx) = oneshot::channel();
        let _ = tx.send(open);
        rx
    }

    fn scripted(replies: &[&str]) -> (Box<dyn ActionSource>, crate::model::RequestLog) {
        let mut source = ScriptedSource::new(
            replies
                .iter()
                .map(|r| ScriptedTurn {
                    content: Some(r.to_string()),
                    ..ScriptedTurn::default()
                })
                .collect(),
        );
        let log = source.request_log();
        (Box::new(source), log)
    }

    #[tokio::test]
    async fn the_same_first_request_takes_the_early_answer_and_asks_once() {
        let (source, log) = scripted(&["early", "second"]);
        let mut p = Prefetching::start(source, request("task"), far(), gate(true));
        assert!(p.in_flight());
        let mut seen = Vec::new();
        let reply = p
            .complete(&request("task"), far(), &mut |o| seen.push(o))
            .await
            .expect("reply");
        assert_eq!(reply.content.as_deref(), Some("early"));
        assert_eq!(seen, vec![ModelObservation::Delta("early".into())]);
        assert!(!p.in_flight());
        let reply = p
            .complete(&request("next"), far(), &mut |_| {})
            .await
            .expect("reply");
        assert_eq!(reply.content.as_deref(), Some("second"));
        assert_eq!(log.requests(), vec![request("task"), request("next")]);
    }

    #[tokio::test]
    async fn a_changed_first_request_drops_the_early_answer_and_asks_again() {
        let (source, log) = scripted(&["early", "asked again"]);
        let mut p = Prefetching::start(source, request("task"), far(), gate(true));
        let mut seen = Vec::new();
        let reply = p
            .complete(&request("task, and a message"), far(), &mut |o| {
                seen.push(o)
            })
            .await
            .expect("reply");
        assert_eq!(reply.content.as_deref(), Some("asked again"));
        assert_eq!(
            log.requests(),
            vec![request("task"), request("task, and a message")]
        );
        assert_eq!(
            seen,
            vec![ModelObservation::Delta("asked again".into())],
            "nothing of the dropped answer"
        );
    }

    /// Answers after a minute; says whether its answer was dropped unfinished.
    struct Slow(Arc<AtomicBool>);

    struct Flag(Arc<AtomicBool>);

    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    impl ActionSource for Slow {
        fn complete<'a>(
            &'a mut self,
            _req: &'a ModelRequest,
            _deadline: Instant,
            _observe: &'a mut (dyn FnMut(ModelObservation) + Send),
        ) -> CompletionFuture<'a> {
            let flag = Flag(self.0.clone());
            Box::pin(async move {
                tokio::time::sleep(Duration::from_secs(60)).await;
                std::mem::forget(flag);
                Err(ModelError::DeadlineExceeded)
            })
        }

        fn current(&self) -> ModelId {
            ScriptedSource::model_id()
        }

        fn context_limit(&self) -> u64 {
            1000
        }
    }

    #[tokio::test]
    async fn a_run_that_never_starts_stops_its_early_request() {
        let dropped = Arc::new(AtomicBool::new(false));
        let p = Prefetching::start(
            Box::new(Slow(dropped.clone())),
            request("task"),
            far(),
            gate(true),
        );
        assert_eq!(p.current(), ScriptedSource::model_id());
        assert_eq!(p.context_limit(), 1000);
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!dropped.load(Ordering::SeqCst), "in flight");
        drop(p);
        for _ in 0..100 {
            if dropped.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the early request went on after its run was dropped");
    }

    #[tokio::test]
    async fn a_shut_gate_sends_nothing_early() {
        for shut in [Some(false), None] {
            let (source, log) = scripted(&["asked once"]);
            let (tx, rx) = oneshot::channel();
            let mut p = Prefetching::start(source, request("task"), far(), rx);
            tokio::time::sleep(Duration::from_millis(20)).await;
            assert!(log.is_empty(), "waits for the gate");
            match shut {
                Some(open) => tx.send(open).expect("send"),
                None => drop(tx),
            }
            let reply = p
                .complete(&request("task"), far(), &mut |_| {})
                .await
                .expect("reply");
            assert_eq!(reply.content.as_deref(), Some("asked once"));
            assert_eq!(
                log.requests(),
                vec![request("task")],
                "asked once, when taken"
            );
        }
    }
}
