//! The agent: its plan, its policy, its context, and (as a pure reducer over
//! explicit phases) every decision of a run.

pub mod context;
pub mod effects;
pub mod phase;
pub mod plan;
pub mod policy;
pub mod reducer;

pub use plan::Plan;
