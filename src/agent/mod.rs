//! The agent: plan, events, and (as a pure reducer) its decisions.

pub mod events;
pub mod plan;

pub use events::{Outcome, RunEvent};
pub use plan::{Plan, PlanItem, PlanStatus};
