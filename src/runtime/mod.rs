//! The runtime driver: sets a run up, performs the agent's effects (model
//! calls, tools, checkpoints, verification, waiting for a person) and feeds
//! their results back to the reducer, and always finishes with artifacts and
//! no containers left. It decides nothing: every decision is the agent's.
//!
//! A front end speaks to a run through [`RunChannels`]: it receives every
//! [`RunEvent`] and sends [`Command`]s (approval answers, follow-ups, cancel)
//! on one channel, so they reach the run in the order they were sent.

pub mod ask;
mod baseline;
mod bus;
mod check_output;
mod driver;
mod finish;
mod hooks;
mod instructions;
pub(crate) mod options;
mod parts;
mod prefetch;
pub(crate) mod prepare_next;
mod resume;
mod resume_point;
mod setup;
mod steering;
mod tool_exec;

pub(crate) use crate::workspace::workspace_owner;
pub use bus::EventBus;
pub use options::{ApprovalMode, Limits, RunOptions, TrustGrant, parse_usd};
pub use resume::{ResumeRequest, resume};
pub(crate) use resume_point::interrupted_run;
pub use setup::{new_run_id, short_hash};

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use crate::model::ActionSource;
use crate::protocol::{Command, RunEvent, RunReport};

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

/// The run's side of a front end's connection: where events go, where
/// commands come from.
pub struct RunChannels {
    /// Each receives every event as it happens.
    pub subscribers: Vec<UnboundedSender<RunEvent>>,
    /// Approval answers, follow-ups and cancel, in the order they were sent.
    /// When every sender is gone, nobody can answer an approval: it is refused.
    pub commands: UnboundedReceiver<Command>,
}

impl RunChannels {
    /// Channels for one subscriber; returns the channels, the command sender
    /// and the event receiver.
    pub fn pair() -> (
        RunChannels,
        UnboundedSender<Command>,
        UnboundedReceiver<RunEvent>,
    ) {
        let (event_tx, event_rx) = unbounded_channel();
        let (command_tx, command_rx) = unbounded_channel();
        (
            RunChannels {
                subscribers: vec![event_tx],
                commands: command_rx,
            },
            command_tx,
            event_rx,
        )
    }
}

/// Runs one task to its end and returns the report. `Err` only when the run
/// could not start; every started run ends with an `Ok` report, whatever its
/// outcome, and its artifacts on disk.
pub async fn run(
    options: RunOptions,
    source: Box<dyn ActionSource>,
    channels: RunChannels,
) -> Result<RunReport, RunError> {
    let prepared = setup::prepare(options, source, channels).await?;
    Ok(driver::drive(prepared).await)
}
