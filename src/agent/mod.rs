//! The agent: plan, events, and (as a pure reducer) its decisions.

pub mod context;
pub mod plan;
pub mod policy;
pub mod reducer;

pub use plan::Plan;
