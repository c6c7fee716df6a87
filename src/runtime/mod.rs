//! The runtime driver: sets a run up, performs the agent's effects (model
//! calls, tools, checkpoints, verification) and feeds their results back to
//! the reducer, owns cancellation and the deadline, and always finishes with
//! artifacts and no containers left.

mod approval;
mod baseline;
mod bus;
mod driver;
mod finish;
pub mod options;
mod setup;
mod tool_exec;

use std::time::Duration;

pub use approval::{ApprovalDecision, ApprovalRequest, Approver};
pub use bus::EventBus;
pub use options::{ApprovalMode, Limits, RunOptions};

use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::model::ActionSource;
use crate::protocol::RunEvent;
use crate::protocol::RunReport;

/// A run that could not start: nothing was changed, and the reason says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    #[error(transparent)]
    Workspace(#[from] crate::workspace::WorkspaceError),
    #[error(transparent)]
    Verify(#[from] crate::verify::VerifyError),
    #[error(transparent)]
    Trace(#[from] crate::trace::TraceError),
}

/// How the caller watches and steers a run.
#[derive(Default)]
pub struct RunHooks {
    /// Receives every event as it happens.
    pub subscribers: Vec<UnboundedSender<RunEvent>>,
    /// Answers `--approval each` requests; without one, edits are refused
    /// when approval is required (a missing answer is never a yes).
    pub approver: Option<Approver>,
    /// Cancelling it stops the run (Ctrl-C, SIGTERM, the TUI).
    pub cancel: CancellationToken,
    /// Messages typed while the run works, sent with the next turn.
    pub follow_ups: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
}

/// Runs one task to its end and returns the report. `Err` only when the run
/// could not start; every started run ends with an `Ok` report, whatever its
/// outcome, and its artifacts on disk.
pub async fn run(
    options: RunOptions,
    source: Box<dyn ActionSource>,
    hooks: RunHooks,
) -> Result<RunReport, RunError> {
    let prepared = setup::prepare(options, source, hooks).await?;
    Ok(driver::drive(prepared).await)
}

/// The teardown budget: containers are force-removed, never stopped gracefully.
pub const TEARDOWN_LIMIT: Duration = Duration::from_secs(5);
