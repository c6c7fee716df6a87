//! The language of a run, shared by everything that speaks to or about one:
//! [`RunEvent`]s come out of a run, [`Command`]s go into it, and
//! [`RunReport`] is what it leaves. This module depends on nothing else in
//! the crate; the runtime, the agent, the front ends and the artifacts all
//! depend on it.

pub mod command;
pub mod event;
pub mod model;
pub mod plan;
pub mod report;
pub mod source;

pub use command::{ApprovalDecision, ApprovalMode, Command};
pub use event::{
    CallApproval, CheckReport, Outcome, RunEvent, ToolCallSummary, VerificationReason,
    preparing_text, project_notice,
};
pub use model::{ModelId, Price, PriceTable, Usage, budget_micros, format_tokens, format_usd};
pub use plan::{PlanItem, PlanStatus};
pub use report::{
    PhaseDurations, PreparePhases, PreparedCopy, ProjectTrust, RecoverySummary, RunReport,
    TokenTotals, VerificationSummary, exit_code_for,
};
pub use source::SourceState;
