//! [`Command`]: what a front end may say to a run. Approvals, follow-ups and
//! cancellation travel on this one channel, so they reach the run in the
//! order they were sent.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    /// The answer to `approval.requested` with the same `id`. An answer to an
    /// id that is not waiting (late, unknown or a second answer) changes
    /// nothing: it is never taken as a yes.
    Approval {
        id: String,
        decision: ApprovalDecision,
    },
    /// A message typed by the person while the run works; it goes to the
    /// model with the next turn.
    FollowUp { text: String },
    /// Stop the run: the work in progress stops, the partial patch is
    /// exported and the containers are removed.
    Cancel,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", content = "reason", rename_all = "snake_case")]
pub enum ApprovalDecision {
    Approve,
    /// Approve this edit and every later one of the run.
    ApproveAll,
    /// Refuse, with an optional reason that goes back to the agent.
    Refuse(Option<String>),
}

/// Who approves edits before they are applied to the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalMode {
    /// Every edit_file waits for a person.
    Each,
    /// The final patch is reviewed before `apply` (edits are not held up).
    Final,
    /// Unattended.
    Never,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_serialize_with_a_type_tag() {
        let c = Command::Approval {
            id: "approval-1".into(),
            decision: ApprovalDecision::Refuse(Some("not that file".into())),
        };
        let json = serde_json::to_value(&c).expect("json");
        assert_eq!(json["type"], "approval");
        assert_eq!(json["decision"]["decision"], "refuse");
        let back: Command = serde_json::from_value(json).expect("parse");
        assert_eq!(back, c);
        let json = serde_json::to_value(Command::Cancel).expect("json");
        assert_eq!(json["type"], "cancel");
    }
}
