//! The agent: plan, events, and (as a pure reducer) its decisions.

pub mod context;
pub mod events;
pub mod plan;
pub mod policy;
pub mod reducer;

pub use events::{Outcome, RunEvent};
pub use plan::{Plan, PlanItem, PlanStatus};
