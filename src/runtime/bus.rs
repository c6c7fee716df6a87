//! The event bus: every [`RunEvent`] goes to `events.jsonl` (hash-chained,
//! redacted) and to each subscriber (the headless printer, the TUI).

use tokio::sync::mpsc::UnboundedSender;

use crate::protocol::RunEvent;
use crate::trace::{EventLog, TraceError};

pub struct EventBus {
    log: EventLog,
    subscribers: Vec<UnboundedSender<RunEvent>>,
    /// The first write error; the run goes on (its artifacts say so).
    write_error: Option<TraceError>,
}

impl EventBus {
    pub fn new(log: EventLog, subscribers: Vec<UnboundedSender<RunEvent>>) -> Self {
        Self {
            log,
            subscribers,
            write_error: None,
        }
    }

    pub fn emit(&mut self, event: RunEvent) {
        if event.is_persisted()
            && let Err(e) = self.log.append(&event)
            && self.write_error.is_none()
        {
            tracing::error!("writing events.jsonl: {e}");
            self.write_error = Some(e);
        }
        // A subscriber that went away (a closed TUI) must not stop the run.
        self.subscribers.retain(|s| s.send(event.clone()).is_ok());
    }
}
