//! Performing one tool call: parse, (for edits) check for credentials and ask
//! for approval, execute, write the full redacted output to `outputs/`, and
//! report a changed workspace with its live diff.

use std::time::{Duration, Instant};

use super::approval::{self, APPROVAL_TIMEOUT, ApprovalDecision, ApprovalRequest, Approver};
use super::{ApprovalMode, EventBus};
use crate::agent::RunEvent;
use crate::model::types::ToolCall;
use crate::sandbox::{CommandContainer, SandboxError};
use crate::tools::{self, ParsedCall, ToolContext, ToolOutput};
use crate::trace::ArtifactDir;
use crate::workspace::{CheckpointStore, WorkspaceRoot};

/// The parts of a run a tool call touches.
pub struct Parts<'a> {
    pub root: &'a WorkspaceRoot,
    pub container: &'a mut CommandContainer,
    pub checkpoints: &'a mut CheckpointStore,
    pub baseline: git2::Oid,
    pub artifacts: &'a ArtifactDir,
    pub bus: &'a mut EventBus,
    pub approval: ApprovalMode,
    pub approver: Option<&'a Approver>,
    pub approve_all: &'a mut bool,
    pub command_timeout: Duration,
    pub edit_seq: &'a mut u32,
    pub last_fingerprint: &'a mut String,
    /// Numbers every tool call of the run: model call ids repeat across turns.
    pub call_seq: &'a mut u32,
}

/// What goes back to the agent.
pub struct ToolResult {
    pub ok: bool,
    pub content: String,
}

pub async fn execute(p: &mut Parts<'_>, call: &ToolCall) -> Result<ToolResult, SandboxError> {
    let started = Instant::now();
    *p.call_seq += 1;
    let stem = format!("{:04}-{}", *p.call_seq, sanitize(&call.id));
    let output = match tools::parse_call(&call.name, &call.arguments) {
        Err(e) => failed("invalid arguments", e.to_string()),
        Ok(ParsedCall::EditFile(args)) => edit(p, call, &args).await,
        Ok(parsed) => {
            let outputs_dir = p.artifacts.path().join("outputs");
            let mut ctx = ToolContext {
                root: p.root,
                container: p.container,
                outputs_dir: &outputs_dir,
                call_id: &stem,
                default_timeout: p.command_timeout,
            };
            tools::execute_checked(&parsed, &mut ctx).await?
        }
    };
    let output_file = p
        .artifacts
        .write_output(&format!("{stem}-{}.txt", call.name), output.full.as_bytes())
        .ok();
    p.bus.emit(RunEvent::ToolFinished {
        call_id: call.id.clone(),
        name: call.name.clone(),
        ok: output.ok,
        summary: output.summary.clone(),
        result: output.content.clone(),
        output_file,
        duration_ms: started.elapsed().as_millis() as u64,
        changed_files: output.changed_files.clone(),
    });
    if matches!(call.name.as_str(), "edit_file" | "run_shell") {
        report_changes(p);
    }
    Ok(ToolResult {
        ok: output.ok,
        content: output.content,
    })
}

fn failed(summary: &str, content: String) -> ToolOutput {
    ToolOutput {
        ok: false,
        full: content.clone(),
        content,
        summary: summary.to_string(),
        changed_files: Vec::new(),
        exit_code: None,
    }
}

async fn edit(p: &mut Parts<'_>, call: &ToolCall, args: &tools::EditFileArgs) -> ToolOutput {
    let prepared = match tools::prepare_edit(args, p.root) {
        Ok(prepared) => prepared,
        Err(e) => return failed("patch did not apply", e.to_string()),
    };
    if p.checkpoints
        .secret_paths()
        .matches(prepared.path.as_bytes(), false)
    {
        return failed(
            "refused: credential file",
            format!(
                "Refused: `{}` is a credential file, which minicoder keeps out of the workspace and out of every \
                 patch. Read secrets from the environment or a file the user provides instead.",
                prepared.path
            ),
        );
    }
    let credentials = p.artifacts.redactor().added_credentials(&prepared.patch);
    if !credentials.is_empty() {
        return failed(
            "refused: credential",
            format!(
                "Refused: this patch would add a credential ({}). Keep secrets out of the code; read them from \
                 the environment or a configuration file the user provides.",
                credentials.join(", ")
            ),
        );
    }
    if p.approval == ApprovalMode::Each && !*p.approve_all {
        let request = ApprovalRequest {
            id: format!("approval-{}", call.id),
            call_id: call.id.clone(),
            path: prepared.path.clone(),
            patch: prepared.patch.clone(),
        };
        p.bus.emit(RunEvent::ApprovalRequested {
            id: request.id.clone(),
            call_id: request.call_id.clone(),
            path: request.path.clone(),
            patch: request.patch.clone(),
        });
        let id = request.id.clone();
        let decision = approval::ask(p.approver, request, APPROVAL_TIMEOUT).await;
        let (approved, reason) = match &decision {
            ApprovalDecision::Approve => (true, None),
            ApprovalDecision::ApproveAll => {
                (true, Some("approved for the rest of the run".to_string()))
            }
            ApprovalDecision::Refuse(reason) => (false, reason.clone()),
        };
        p.bus.emit(RunEvent::ApprovalResolved {
            id,
            approved,
            reason: reason.clone(),
        });
        match decision {
            ApprovalDecision::ApproveAll => *p.approve_all = true,
            ApprovalDecision::Approve => {}
            ApprovalDecision::Refuse(_) => {
                let why = reason
                    .map(|r| format!(" Their reason: {r}"))
                    .unwrap_or_default();
                return failed(
                    "refused by the person",
                    format!(
                        "The person reviewing your edits refused this patch to {}; the file is unchanged.{why} \
                         Take this into account and propose a different change.",
                        prepared.path
                    ),
                );
            }
        }
    }
    if let Err(e) = tools::apply_edit(&prepared, p.root) {
        return failed("edit failed", e.to_string());
    }
    *p.edit_seq += 1;
    let _ = p
        .artifacts
        .write_patch(*p.edit_seq, &prepared.path, &prepared.patch);
    let (added, removed) = count_lines(&prepared.patch);
    let content = format!(
        "Applied the patch to {}: +{added} -{removed} lines.",
        prepared.path
    );
    ToolOutput {
        ok: true,
        full: format!("{content}\n{}", prepared.patch),
        content,
        summary: format!("+{added} -{removed}"),
        changed_files: vec![prepared.path.clone()],
        exit_code: None,
    }
}

/// A call id as a file-name part.
fn sanitize(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(48)
        .collect()
}

fn count_lines(patch: &str) -> (usize, usize) {
    let mut added = 0;
    let mut removed = 0;
    for line in patch.lines() {
        if line.starts_with('+') && !line.starts_with("+++") {
            added += 1;
        } else if line.starts_with('-') && !line.starts_with("---") {
            removed += 1;
        }
    }
    (added, removed)
}

/// Emits `workspace.changed` (with the whole diff against the baseline) when
/// the workspace fingerprint moved.
fn report_changes(p: &mut Parts<'_>) {
    let fingerprint = match p.checkpoints.scan() {
        Ok(snapshot) => snapshot.fingerprint.to_string(),
        Err(e) => {
            tracing::warn!("fingerprinting the workspace: {e}");
            return;
        }
    };
    if fingerprint == *p.last_fingerprint {
        return;
    }
    *p.last_fingerprint = fingerprint.clone();
    match p.checkpoints.export_patch(p.baseline) {
        Ok(export) => p.bus.emit(RunEvent::WorkspaceChanged {
            fingerprint,
            changed_files: export.changed_files,
            diff: export.patch,
        }),
        Err(e) => tracing::warn!("diffing the workspace: {e}"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn added_and_removed_lines_are_counted() {
        // The changed files now come from the tree diff: see
        // `workspace::checkpoint` tests and tests/checkpoint_export.rs.
        assert_eq!(super::count_lines("--- a\n+++ b\n-x\n+y\n+z\n"), (2, 1));
    }
}
