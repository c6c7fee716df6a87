//! The agent's plan: replaced whole by `update_plan`, validated first (unique
//! ids, at most one item in progress).

use serde::{Deserialize, Serialize};

use crate::protocol::{PlanItem, PlanStatus};

/// Why a proposed plan was refused; the message goes back to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the plan is empty: give at least one item")]
    Empty,
    #[error("plan item ids must be unique; {0:?} appears more than once")]
    DuplicateId(String),
    #[error("plan item {0:?} has an empty id or content")]
    Blank(String),
    #[error("at most one plan item may be in_progress; these are: {}", .0.join(", "))]
    SeveralInProgress(Vec<String>),
    #[error("a plan has at most {max} items; this one has {got}")]
    TooLong { max: usize, got: usize },
}

/// The current plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub items: Vec<PlanItem>,
}

pub(crate) const MAX_PLAN_ITEMS: usize = 50;

impl Plan {
    /// Validates `items` as a complete replacement of the plan.
    pub fn validate(items: &[PlanItem]) -> Result<(), PlanError> {
        if items.is_empty() {
            return Err(PlanError::Empty);
        }
        if items.len() > MAX_PLAN_ITEMS {
            return Err(PlanError::TooLong {
                max: MAX_PLAN_ITEMS,
                got: items.len(),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for item in items {
            if item.id.trim().is_empty() || item.content.trim().is_empty() {
                return Err(PlanError::Blank(item.id.clone()));
            }
            if !seen.insert(item.id.as_str()) {
                return Err(PlanError::DuplicateId(item.id.clone()));
            }
        }
        let in_progress: Vec<String> = items
            .iter()
            .filter(|i| i.status == PlanStatus::InProgress)
            .map(|i| i.id.clone())
            .collect();
        if in_progress.len() > 1 {
            return Err(PlanError::SeveralInProgress(in_progress));
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Items not yet `done`.
    pub(crate) fn unfinished(&self) -> Vec<&PlanItem> {
        self.items
            .iter()
            .filter(|i| i.status != PlanStatus::Done)
            .collect()
    }

    pub fn in_progress(&self) -> Option<&PlanItem> {
        self.items
            .iter()
            .find(|i| i.status == PlanStatus::InProgress)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, status: PlanStatus) -> PlanItem {
        PlanItem {
            id: id.into(),
            content: format!("do {id}"),
            status,
            notes: None,
        }
    }

    #[test]
    fn valid_plans_pass_and_bad_ones_say_why() {
        use PlanStatus::*;
        assert_eq!(
            Plan::validate(&[item("a", InProgress), item("b", Pending)]),
            Ok(())
        );
        assert_eq!(Plan::validate(&[]), Err(PlanError::Empty));
        assert_eq!(
            Plan::validate(&[item("a", Done), item("a", Pending)]),
            Err(PlanError::DuplicateId("a".into()))
        );
        assert!(matches!(
            Plan::validate(&[item("a", InProgress), item("b", InProgress)]),
            Err(PlanError::SeveralInProgress(v)) if v == ["a", "b"]
        ));
        assert!(matches!(
            Plan::validate(&[item(" ", Done)]),
            Err(PlanError::Blank(_))
        ));
    }

    #[test]
    fn statuses_use_the_wire_names() {
        let json = serde_json::to_string(&item("a", PlanStatus::InProgress)).expect("json");
        assert!(json.contains(r#""status":"in_progress""#), "{json}");
        let back: PlanItem =
            serde_json::from_str(r#"{"id":"x","content":"c","status":"done"}"#).expect("parse");
        assert_eq!(back.status, PlanStatus::Done);
    }
}
