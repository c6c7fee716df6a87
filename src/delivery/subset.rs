//! Applying part of a run's patch: the chosen part is not what was verified,
//! so it is verified again before it is written. Until that verification
//! exists, every subset is refused.

use std::path::PathBuf;

use super::{ApplyOptions, ApplyReport, DeliveryError};
use crate::runs::RunRecord;
use crate::state::StateDir;
use crate::trace::ReceiptKey;

/// Which part of `final.patch` to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subset {
    /// Paths as `final.patch` names them.
    Paths(Vec<String>),
    /// 1-based hunk numbers in `final.patch` order.
    Hunks(Vec<usize>),
    /// A patch made of whole hunks of `final.patch`.
    Patch(String),
}

/// One frozen check run on the subset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubsetCheck {
    pub name: String,
    pub passed: bool,
    pub detail: String,
}

/// What the subset's verification found, and where it is recorded.
#[derive(Debug, Clone)]
pub struct SubsetVerification {
    pub passed: bool,
    pub checks: Vec<SubsetCheck>,
    pub record: PathBuf,
}

/// An applied subset and the verification it was applied on.
#[derive(Debug, Clone)]
pub struct SubsetApply {
    pub report: ApplyReport,
    pub verification: SubsetVerification,
}

/// The names of the checks that failed, for messages.
pub(crate) fn failed_names(checks: &[SubsetCheck]) -> String {
    checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Verifies `subset` of `run`'s patch, then applies it.
pub async fn apply_subset(
    _state: &StateDir,
    _key: &ReceiptKey,
    _run: &RunRecord,
    _subset: &Subset,
    _options: ApplyOptions,
    _progress: &(dyn Fn(&str) + Send + Sync),
) -> Result<SubsetApply, DeliveryError> {
    Err(DeliveryError::Unverified(
        "a part of the patch cannot be verified again yet; apply the whole run".into(),
    ))
}
