//! A sandboxed workspace opened by an MCP client: a minicoder run whose
//! actions come from the client instead of a model
//! ([`crate::model::external`]). Every call goes through the run exactly as
//! a model's would — the policy, the sandbox, the bounds, the events in the
//! hash chain, the independent verifier — and a verified run ends with its
//! patch and receipt like any other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::task::JoinHandle;

use crate::model::external::{ExternalDriver, answer_to, external};
use crate::protocol::{CheckReport, Command, RunEvent, RunReport, VerificationReason};
use crate::runtime::{self, RunChannels, RunError, RunOptions};
use crate::trace::redact::shown;

/// At most this many workspaces are open at once (each holds a container).
pub(super) const MAX_OPEN: usize = 8;
/// The plan item a workspace's run works under.
const PLAN_ITEM: &str = "Changes made by the MCP client";
/// A patch larger than this is exported by path only.
const PATCH_INLINE_LIMIT: u64 = 1024 * 1024;

/// The open workspaces, by id (a random capability: knowing the id is
/// what lets a client use one).
#[derive(Default)]
pub(super) struct Workspaces {
    open: Mutex<HashMap<String, Arc<Workspace>>>,
    /// Workspaces being opened: their slots are taken before the slow
    /// set-up, so opens at once cannot pass the limit.
    opening: Mutex<usize>,
}

/// A slot among the [`MAX_OPEN`], held while a workspace is opened.
struct Slot<'a>(&'a Mutex<usize>);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let mut opening = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        *opening = opening.saturating_sub(1);
    }
}

impl Workspaces {
    pub(super) fn get(&self, id: &str) -> Result<Arc<Workspace>, String> {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
            .ok_or_else(|| format!("no open workspace {id:?}; open_workspace gives one"))
    }

    /// Takes a slot for a workspace about to open, if one is free.
    fn reserve(&self) -> Result<Slot<'_>, String> {
        let mut opening = self.opening.lock().unwrap_or_else(PoisonError::into_inner);
        let open = self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        if open + *opening >= MAX_OPEN {
            return Err(format!(
                "{MAX_OPEN} workspaces are open already; close one first"
            ));
        }
        *opening += 1;
        Ok(Slot(&self.opening))
    }

    fn insert(&self, workspace: Arc<Workspace>) {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(workspace.id.clone(), workspace);
    }

    pub(super) fn remove(&self, id: &str) -> Option<Arc<Workspace>> {
        self.open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
    }

    /// Opens a workspace on `opts.repo`: the run starts (private copy,
    /// command container, frozen checks) and waits for the first call.
    /// A client that gives up (`cancelled`) before the workspace is open
    /// never learns its id: it is closed at once.
    pub(super) async fn open(
        &self,
        mut opts: RunOptions,
        cancelled: &tokio_util::sync::CancellationToken,
    ) -> Result<Arc<Workspace>, String> {
        let _slot = self.reserve()?;
        // The client sets the pace: no turn limit worth meeting, a day of
        // wall time, an hour between two calls.
        opts.limits.max_turns = 100_000;
        opts.limits.timeout_ms = 24 * 3_600_000;
        opts.limits.model_timeout_ms = 3_600_000;
        opts.approval = crate::runtime::ApprovalMode::Never;
        // The client chooses every call: the person's MCP servers are not
        // offered to it here.
        opts.mcp = Arc::default();
        let (source, mut driver) = external("mcp");
        let (channels, commands, events) = RunChannels::pair();
        let run = tokio::spawn(runtime::run(opts, Box::new(source), channels));
        // The first request means the run is set up and listening.
        if driver.next_turn().await.is_none() {
            return Err(match run.await {
                Ok(Ok(report)) => format!("the run ended before it started: {}", report.reason),
                Ok(Err(e)) => e.to_string(),
                Err(e) => format!("the run stopped: {e}"),
            });
        }
        // (The first request can come before the run's start is announced:
        // the first turn is asked for while the workspace is prepared.)
        let workspace = Arc::new(Workspace {
            id: crate::ids::random_hex(16),
            driver: tokio::sync::Mutex::new(Some(driver)),
            commands,
            run: tokio::sync::Mutex::new(Ending::Running(run)),
            log: Mutex::new((events, RunLog::default())),
        });
        // Edits and commands need a plan: one item, in progress.
        let plan = plan_call("in_progress");
        if let Err(e) = workspace.call("update_plan", &plan).await {
            let _ = workspace.close().await;
            return Err(e);
        }
        if cancelled.is_cancelled() {
            let _ = workspace.close().await;
            return Err("cancelled: the workspace was closed".to_string());
        }
        self.insert(workspace.clone());
        Ok(workspace)
    }

    /// Closes every workspace (the server is stopping): nothing is left
    /// running.
    pub(super) async fn close_all(&self) {
        let all: Vec<Arc<Workspace>> = self
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .map(|(_, w)| w)
            .collect();
        for workspace in all {
            let _ = workspace.close().await;
        }
    }
}

fn plan_call(status: &str) -> String {
    json!({"items": [{"id": "mcp", "content": PLAN_ITEM, "status": status}]}).to_string()
}

/// What the run's event stream said, kept for the client.
#[derive(Debug, Default)]
pub(super) struct RunLog {
    pub(super) run_id: Option<String>,
    pub(super) fingerprint: Option<String>,
    /// The checks of the latest completion's verification, and its verdict.
    pub(super) checks: Vec<CheckReport>,
    pub(super) passed: Option<bool>,
    completion_attempt: Option<u32>,
    /// Whether each of the latest calls succeeded, by call id.
    outcomes: std::collections::VecDeque<(String, bool)>,
}

/// How many call outcomes a log keeps.
const OUTCOMES_KEPT: usize = 32;

impl RunLog {
    /// Keeps what `verify` and the calls report from one event.
    pub(super) fn record(&mut self, event: &RunEvent) {
        match event {
            RunEvent::RunStarted {
                run_id,
                fingerprint,
                ..
            } => {
                self.run_id = Some(run_id.clone());
                self.fingerprint = Some(fingerprint.clone());
            }
            RunEvent::VerificationStarted {
                attempt,
                reason: VerificationReason::Completion,
                ..
            } => {
                self.completion_attempt = Some(*attempt);
                self.checks.clear();
                self.passed = None;
            }
            RunEvent::VerificationCheck { attempt, check }
                if self.completion_attempt == Some(*attempt) =>
            {
                self.checks.push(check.clone());
            }
            RunEvent::VerificationFinished {
                attempt,
                passed,
                fingerprint,
                ..
            } if self.completion_attempt == Some(*attempt) => {
                self.passed = Some(*passed);
                self.fingerprint = Some(fingerprint.clone());
            }
            RunEvent::ToolFinished { call_id, ok, .. } => self.outcome(call_id, *ok),
            RunEvent::PolicyRefused { call_id, .. } => self.outcome(call_id, false),
            _ => {}
        }
    }

    fn outcome(&mut self, call_id: &str, ok: bool) {
        if self.outcomes.len() == OUTCOMES_KEPT {
            self.outcomes.pop_front();
        }
        self.outcomes.push_back((call_id.to_string(), ok));
    }

    /// Whether the call failed (refused, or its tool reported a failure).
    fn failed(&self, call_id: &str) -> bool {
        self.outcomes
            .iter()
            .rev()
            .find(|(id, _)| id == call_id)
            .is_some_and(|(_, ok)| !ok)
    }
}

/// Reads a run's events until it ends, handing each progress line to
/// `progress`.
pub(super) async fn watch(
    mut events: UnboundedReceiver<RunEvent>,
    progress: UnboundedSender<String>,
) {
    while let Some(event) = events.recv().await {
        if let Some(line) = crate::headless::progress_line(&event) {
            let _ = progress.send(shown(&line).into_owned());
        }
    }
}

enum Ending {
    Running(JoinHandle<Result<RunReport, RunError>>),
    Ended(Box<Result<RunReport, String>>),
}

/// One open workspace.
pub(super) struct Workspace {
    pub(super) id: String,
    /// One call at a time; `None` once the run stopped listening.
    driver: tokio::sync::Mutex<Option<ExternalDriver>>,
    commands: UnboundedSender<Command>,
    run: tokio::sync::Mutex<Ending>,
    /// The run's events, read as calls return (every event a call caused
    /// is sent before the run asks for the next call), and what they said.
    log: Mutex<(UnboundedReceiver<RunEvent>, RunLog)>,
}

/// Records every event already sent.
fn drain(events: &mut UnboundedReceiver<RunEvent>, log: &mut RunLog) {
    while let Ok(event) = events.try_recv() {
        log.record(&event);
    }
}

/// How a call went.
pub(super) enum Answer {
    /// The run answered the call.
    Result { text: String, failed: bool },
    /// The run ended (a verified completion, a cancel, a budget).
    Ended(Box<Result<RunReport, String>>),
}

impl Workspace {
    /// Performs one tool call in the run: its result text, and whether the
    /// call failed (refused by the policy, or the tool reported a failure).
    pub(super) async fn call(&self, tool: &str, arguments: &str) -> Result<(String, bool), String> {
        match self.perform(tool, arguments).await {
            Answer::Result { text, failed } => Ok((text, failed)),
            Answer::Ended(report) => Err(ended_message(&report)),
        }
    }

    /// The run's id (known once the run started: after the first call).
    pub(super) fn run_id(&self) -> String {
        self.read_log(|log| log.run_id.clone().unwrap_or_default())
    }

    fn read_log<T>(&self, read: impl FnOnce(&RunLog) -> T) -> T {
        let mut guard = self.log.lock().unwrap_or_else(PoisonError::into_inner);
        let (events, log) = &mut *guard;
        drain(events, log);
        read(log)
    }

    pub(super) async fn perform(&self, tool: &str, arguments: &str) -> Answer {
        let mut guard = self.driver.lock().await;
        let Some(driver) = guard.as_mut() else {
            return Answer::Ended(Box::new(self.report().await));
        };
        let answer = match driver.send(tool, arguments).await {
            Some(id) => driver
                .next_turn()
                .await
                .map(|req| (answer_to(&req, &id), id)),
            None => None,
        };
        match answer {
            Some((text, id)) => Answer::Result {
                text: shown(&text).into_owned(),
                failed: self.read_log(|log| log.failed(&id)),
            },
            None => {
                *guard = None;
                drop(guard);
                Answer::Ended(Box::new(self.report().await))
            }
        }
    }

    /// The run's report, once it ended (waits for its end).
    pub(super) async fn report(&self) -> Result<RunReport, String> {
        let mut run = self.run.lock().await;
        if let Ending::Running(handle) = &mut *run {
            let result = match handle.await {
                Ok(Ok(report)) => Ok(report),
                Ok(Err(e)) => Err(e.to_string()),
                Err(e) => Err(format!("the run stopped: {e}")),
            };
            *run = Ending::Ended(Box::new(result));
        }
        match &*run {
            Ending::Ended(result) => (**result).clone(),
            Ending::Running(_) => Err("the run is still going".to_string()),
        }
    }

    pub(super) fn ended(&self) -> bool {
        self.driver.try_lock().is_ok_and(|d| d.is_none())
    }

    /// Asks for completion: the plan is marked done and the independent
    /// verifier runs the frozen checks. A pass ends the run with its patch
    /// and receipt; a failure leaves the workspace open for more work.
    pub(super) async fn verify(&self, summary: &str) -> Value {
        let _ = self.perform("update_plan", &plan_call("done")).await;
        let arguments = json!({ "summary": summary }).to_string();
        let answer = self.perform("request_completion", &arguments).await;
        let (checks, fingerprint, passed) = self.read_log(|log| {
            let checks: Vec<Value> = log
                .checks
                .iter()
                .map(|c| serde_json::to_value(c).unwrap_or(Value::Null))
                .collect();
            (checks, log.fingerprint.clone(), log.passed)
        });
        let mut result = json!({
            "workspace": self.id,
            "run_id": self.run_id(),
            "fingerprint": fingerprint,
            "checks": checks,
        });
        let (verified, message, ended) = match &answer {
            Answer::Ended(ended) => match &**ended {
                Ok(report) => (
                    report.outcome == crate::protocol::Outcome::Success,
                    report.reason.clone(),
                    true,
                ),
                Err(e) => (false, e.clone(), true),
            },
            Answer::Result { text, .. } => (passed == Some(true), text.clone(), false),
        };
        result["verified"] = json!(verified);
        result["message"] = json!(shown(&message));
        result["ended"] = json!(ended);
        result
    }

    /// The run's patch and receipt; only once the run ended.
    pub(super) async fn export(&self) -> Result<Value, String> {
        if !self.ended() {
            return Err(
                "the workspace's run is still open: verify it first (a verified run ends with its patch and receipt), or close it"
                    .to_string(),
            );
        }
        let report = self.report().await?;
        let dir = std::path::Path::new(&report.artifact_dir);
        let receipt = std::fs::read_to_string(dir.join("receipt.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok());
        let patch_path = std::path::Path::new(&report.patch);
        let size = std::fs::metadata(patch_path).map(|m| m.len()).unwrap_or(0);
        let patch = if size <= PATCH_INLINE_LIMIT {
            std::fs::read_to_string(patch_path)
                .ok()
                .map(|p| shown(&p).into_owned())
        } else {
            None
        };
        Ok(json!({
            "workspace": self.id,
            "run_id": report.run_id,
            "outcome": report.outcome,
            "verified": report.outcome == crate::protocol::Outcome::Success,
            "changed_files": report.changed_files,
            "patch": patch,
            "patch_path": report.patch,
            "patch_bytes": size,
            "receipt": receipt,
            "artifact_dir": report.artifact_dir,
        }))
    }

    /// Stops the run if it still works (the command in progress too, the
    /// containers removed) and returns its report.
    pub(super) async fn close(&self) -> Result<RunReport, String> {
        if !self.ended() {
            let _ = self.commands.send(Command::Cancel);
        }
        // The cancel reaches the run between two calls or during one; a
        // call in progress ends and gives its guard back.
        let mut guard = self.driver.lock().await;
        *guard = None;
        drop(guard);
        self.report().await
    }

    /// Cancels the run from outside a call (the client cancelled the call
    /// in progress): the command stops and the containers go.
    pub(super) fn cancel(&self) {
        let _ = self.commands.send(Command::Cancel);
    }
}

fn ended_message(report: &Result<RunReport, String>) -> String {
    match report {
        Ok(r) => format!(
            "the workspace's run ended ({}): {}; export gives its patch",
            serde_json::to_value(r.outcome)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            r.reason
        ),
        Err(e) => format!("the workspace's run ended: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_before_the_set_up_so_opens_at_once_cannot_pass_the_limit() {
        let workspaces = Workspaces::default();
        let slots: Vec<Slot<'_>> = (0..MAX_OPEN)
            .map(|_| workspaces.reserve().expect("a free slot"))
            .collect();
        let refused = workspaces.reserve().err().expect("the ninth is refused");
        assert!(refused.contains("close one first"), "{refused}");
        drop(slots);
        assert!(
            workspaces.reserve().is_ok(),
            "slots come back when set-up ends"
        );
    }
}
