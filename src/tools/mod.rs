//! The agent's tools: their JSON schemas, the parsing of a model's
//! call into typed arguments, and the executors of the eight tools that act
//! on the workspace and the run's outputs. `update_plan` and `request_completion` are parsed here
//! but carried out by the agent, since they change its state.
//!
//! Every host-side file access goes through [`WorkspaceRoot`], which the
//! kernel confines to the workspace; commands run only in the sandbox.

pub mod cap;
mod edit_file;
mod error;
mod git;
mod git_guard;
mod list_tree;
mod parse;
mod paths;
mod read_file;
mod read_output;
mod ripgrep;
mod run_shell;
pub(crate) mod specs;
mod symbols;
pub(crate) mod unified_diff;
mod walk;

use std::path::Path;
use std::time::Duration;

use crate::sandbox::{CommandContainer, SandboxError};
use crate::trace::Redactor;
use crate::workspace::WorkspaceRoot;

pub use cap::{MODEL_CHAR_LIMIT, cap_for_model};
pub use edit_file::{PreparedEdit, apply_edit, edit_output, prepare_edit};
pub use error::ToolError;
pub use git_guard::isolate_libgit2;
pub use parse::{
    EditFileArgs, GitArgs, GitSubcommand, ListTreeArgs, ParsedCall, ReadFileArgs, ReadOutputArgs,
    RipgrepArgs, RunShellArgs, SymbolsArgs, ToolName, parse_call,
};
pub use read_output::MAX_READ_BYTES;
pub use specs::specs;
pub use symbols::{Symbol, extract_symbols};
pub use unified_diff::{FilePatch, Hunk, HunkLine, parse_unified_diff};

/// The longest a `run_shell` command may run, whatever it asks for.
pub(crate) const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// What an executor needs from the run.
pub struct ToolContext<'a> {
    pub root: &'a WorkspaceRoot,
    pub container: &'a mut CommandContainer,
    /// Where `run_shell` spools the full output of its streams, and where
    /// `read_output` finds them.
    pub outputs_dir: &'a Path,
    /// What `read_output` hides of what it returns.
    pub redactor: &'a Redactor,
    /// The model's id of the call (the spool file stem).
    pub call_id: &'a str,
    /// The timeout of a command that names none (60 s).
    pub default_timeout: Duration,
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub ok: bool,
    /// What the model sees: at most [`MODEL_CHAR_LIMIT`] characters.
    pub content: String,
    /// The complete text, for `outputs/`.
    pub full: String,
    /// One line, e.g. "exit 0 in 412 ms" or "12 matches in 4 files".
    pub summary: String,
    /// Workspace-relative paths the call changed (edit_file only).
    pub changed_files: Vec<String>,
    pub exit_code: Option<i32>,
}

impl ToolOutput {
    /// A successful result whose model-facing text is `full`, capped.
    pub fn success(full: String, summary: impl Into<String>) -> Self {
        Self {
            ok: true,
            content: cap_for_model(&full, MODEL_CHAR_LIMIT),
            full,
            summary: summary.into(),
            changed_files: Vec::new(),
            exit_code: None,
        }
    }

    /// A failed call: `message` says what was wrong and how to proceed.
    pub fn failure(message: impl Into<String>) -> Self {
        let full: String = message.into();
        let summary = full.lines().next().unwrap_or("failed").to_string();
        Self {
            ok: false,
            content: cap_for_model(&full, MODEL_CHAR_LIMIT),
            full,
            summary: cap_for_model(&summary, 200),
            changed_files: Vec::new(),
            exit_code: None,
        }
    }

    fn from_error(error: &ToolError) -> Self {
        Self::failure(error.to_string())
    }
}

/// Runs one workspace tool. Every failure, including a broken sandbox, is a
/// `ToolOutput` with `ok: false`; use [`execute_checked`] to tell a broken
/// sandbox apart.
pub async fn execute(call: &ParsedCall, ctx: &mut ToolContext<'_>) -> ToolOutput {
    match execute_checked(call, ctx).await {
        Ok(output) => output,
        Err(e) => ToolOutput::failure(format!(
            "the sandbox failed while running the command: {e}; the run cannot continue to use it"
        )),
    }
}

/// Runs one workspace tool; `Err` only when the sandbox itself broke, which
/// should end the run. `update_plan` and `request_completion` are the
/// agent's to carry out: passed here they give a failed output saying so.
pub(crate) async fn execute_checked(
    call: &ParsedCall,
    ctx: &mut ToolContext<'_>,
) -> Result<ToolOutput, SandboxError> {
    match call {
        ParsedCall::RunShell(args) => run_shell::run_shell(args, ctx).await,
        ParsedCall::ReadOutput(args) => {
            Ok(
                read_output::read_output(args, ctx.outputs_dir, ctx.redactor)
                    .unwrap_or_else(|e| ToolOutput::from_error(&e)),
            )
        }
        ParsedCall::UpdatePlan { .. } | ParsedCall::RequestCompletion { .. } => {
            Ok(ToolOutput::from_error(&ToolError::AgentTool {
                name: call.name().as_str(),
            }))
        }
        _ => Ok(execute_without_container(call, ctx.root)
            .unwrap_or_else(|| ToolOutput::failure("this tool needs the agent"))),
    }
}

/// Runs one of the six tools that need no container (all but `run_shell`).
/// Returns `None` for `run_shell` and the two agent tools.
pub fn execute_without_container(call: &ParsedCall, root: &WorkspaceRoot) -> Option<ToolOutput> {
    let result = match call {
        ParsedCall::ListTree(args) => list_tree::list_tree(args, root),
        ParsedCall::ReadFile(args) => read_file::read_file(args, root),
        ParsedCall::Ripgrep(args) => ripgrep::ripgrep(args, root),
        ParsedCall::TreeSitterSymbols(args) => symbols::symbols_tool(args, root),
        ParsedCall::EditFile(args) => edit_file::edit_file(args, root),
        ParsedCall::Git(args) => git::git_tool(args, root),
        _ => return None,
    };
    Some(result.unwrap_or_else(|e| ToolOutput::from_error(&e)))
}
