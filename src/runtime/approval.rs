//! Approval of edits (`--approval each`): the runtime emits
//! `approval.requested` and waits on a oneshot; the TUI answers. A dropped or
//! timed-out responder is a refusal, never a yes.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRequest {
    pub id: String,
    pub call_id: String,
    pub path: String,
    pub patch: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    Approve,
    /// Approve this edit and every later one of the run.
    ApproveAll,
    /// Refuse, with an optional reason that goes back to the agent.
    Refuse(Option<String>),
}

/// The channel to whoever approves.
pub type Approver = mpsc::UnboundedSender<(ApprovalRequest, oneshot::Sender<ApprovalDecision>)>;

/// How long an edit waits for a person before it counts as refused.
pub const APPROVAL_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Asks and waits. No approver, a closed channel, a dropped responder and a
/// timeout all mean refusal.
pub async fn ask(
    approver: Option<&Approver>,
    request: ApprovalRequest,
    timeout: Duration,
) -> ApprovalDecision {
    let Some(approver) = approver else {
        return ApprovalDecision::Refuse(Some(
            "edits need approval and no one is there to approve them".into(),
        ));
    };
    let (tx, rx) = oneshot::channel();
    if approver.send((request, tx)).is_err() {
        return ApprovalDecision::Refuse(Some("the approval channel is closed".into()));
    }
    match tokio::time::timeout(timeout, rx).await {
        Ok(Ok(decision)) => decision,
        Ok(Err(_)) => ApprovalDecision::Refuse(Some("the approval was abandoned".into())),
        Err(_) => ApprovalDecision::Refuse(Some(format!(
            "no answer within {} minutes",
            timeout.as_secs() / 60
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> ApprovalRequest {
        ApprovalRequest {
            id: "a1".into(),
            call_id: "c1".into(),
            path: "a.py".into(),
            patch: "+x".into(),
        }
    }

    #[tokio::test]
    async fn a_dropped_or_missing_responder_is_a_refusal() {
        assert!(matches!(
            ask(None, req(), APPROVAL_TIMEOUT).await,
            ApprovalDecision::Refuse(_)
        ));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let asking = tokio::spawn(async move { ask(Some(&tx), req(), APPROVAL_TIMEOUT).await });
        let (_, responder) = rx.recv().await.expect("request");
        drop(responder);
        assert!(matches!(
            asking.await.expect("join"),
            ApprovalDecision::Refuse(_)
        ));
    }

    #[tokio::test]
    async fn a_timeout_is_a_refusal_and_an_answer_is_returned() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let d = ask(Some(&tx), req(), Duration::from_millis(20)).await;
        assert!(matches!(d, ApprovalDecision::Refuse(Some(r)) if r.contains("no answer")));
        let _stale = rx.recv().await.expect("the timed-out request");
        let asking = tokio::spawn(async move { ask(Some(&tx), req(), APPROVAL_TIMEOUT).await });
        let (r, responder) = rx.recv().await.expect("request");
        assert_eq!(r.path, "a.py");
        responder.send(ApprovalDecision::Approve).expect("send");
        assert_eq!(asking.await.expect("join"), ApprovalDecision::Approve);
    }
}
