//! The agent: its plan, its policy, its context, and (as a pure reducer over
//! explicit phases) every decision of a run.

pub mod ask;
pub mod budget;
pub mod compaction;
pub mod context;
pub(crate) mod discovery;
pub mod effects;
pub(crate) mod evidence;
pub mod instructions;
pub mod phase;
pub mod plan;
pub mod policy;
pub mod reducer;
pub(crate) mod run_state;

pub use plan::Plan;
