//! Turning a model's tool call (a name and JSON text) into typed arguments.

use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::ToolError;
use crate::protocol::PlanItem;

/// The ten tools, by their exact names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolName {
    ListTree,
    ReadFile,
    Ripgrep,
    TreeSitterSymbols,
    EditFile,
    RunShell,
    Git,
    ReadOutput,
    UpdatePlan,
    RequestCompletion,
}

impl ToolName {
    pub(crate) const ALL: [ToolName; 10] = [
        Self::ListTree,
        Self::ReadFile,
        Self::Ripgrep,
        Self::TreeSitterSymbols,
        Self::EditFile,
        Self::RunShell,
        Self::Git,
        Self::ReadOutput,
        Self::UpdatePlan,
        Self::RequestCompletion,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::ListTree => "list_tree",
            Self::ReadFile => "read_file",
            Self::Ripgrep => "ripgrep",
            Self::TreeSitterSymbols => "tree_sitter_symbols",
            Self::EditFile => "edit_file",
            Self::RunShell => "run_shell",
            Self::Git => "git",
            Self::ReadOutput => "read_output",
            Self::UpdatePlan => "update_plan",
            Self::RequestCompletion => "request_completion",
        }
    }

    pub(crate) fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    /// A minimal valid arguments object, shown in error messages.
    pub fn example(self) -> &'static str {
        match self {
            Self::ListTree => r#"{"path": ".", "max_depth": 3}"#,
            Self::ReadFile => r#"{"path": "src/main.rs", "start_line": 1, "end_line": 80}"#,
            Self::Ripgrep => r#"{"pattern": "fn main", "path": ".", "glob": "*.rs"}"#,
            Self::TreeSitterSymbols => r#"{"path": "src/lib.rs"}"#,
            Self::EditFile => {
                r#"{"path": "src/a.py", "patch": "--- a/src/a.py\n+++ b/src/a.py\n@@ -1,2 +1,2 @@\n def f():\n-    return 1\n+    return 2\n"}"#
            }
            Self::RunShell => r#"{"command": "pytest -q", "cwd": ".", "timeout_ms": 120000}"#,
            Self::Git => r#"{"subcommand": "diff", "args": ["--stat"]}"#,
            Self::ReadOutput => r#"{"id": "0004-call_2.stdout", "offset": 524288}"#,
            Self::UpdatePlan => {
                r#"{"items": [{"id": "1", "content": "Reproduce the bug", "status": "in_progress"}]}"#
            }
            Self::RequestCompletion => r#"{"summary": "Fixed the off-by-one in parse()"}"#,
        }
    }

    /// Whether the tool changes the workspace (the policy gates these).
    pub(crate) fn mutates_workspace(self) -> bool {
        matches!(self, Self::EditFile | Self::RunShell)
    }
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn default_dot() -> String {
    ".".into()
}

fn default_depth() -> usize {
    3
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ListTreeArgs {
    #[serde(default = "default_dot")]
    pub path: String,
    #[serde(default = "default_depth")]
    pub max_depth: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReadFileArgs {
    pub path: String,
    #[serde(default)]
    pub start_line: Option<usize>,
    #[serde(default)]
    pub end_line: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RipgrepArgs {
    pub pattern: String,
    #[serde(default = "default_dot")]
    pub path: String,
    #[serde(default)]
    pub glob: Option<String>,
    #[serde(default)]
    pub case_insensitive: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SymbolsArgs {
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct EditFileArgs {
    pub path: String,
    pub patch: String,
}

/// A part of an earlier command's full output: a byte range (`offset`,
/// `length`) or a line range (`start_line`, `end_line`), never both.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReadOutputArgs {
    /// The output's id as a result named it, e.g. `0004-call_2.stdout`.
    pub id: String,
    #[serde(default)]
    pub offset: Option<u64>,
    #[serde(default)]
    pub length: Option<u64>,
    #[serde(default)]
    pub start_line: Option<u64>,
    #[serde(default)]
    pub end_line: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RunShellArgs {
    pub command: String,
    #[serde(default = "default_dot")]
    pub cwd: String,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The read-only git subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GitSubcommand {
    Status,
    Diff,
    Log,
    Show,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitArgs {
    pub subcommand: GitSubcommand,
    pub args: Vec<String>,
}

#[derive(Deserialize)]
struct RawGitArgs {
    subcommand: String,
    #[serde(default)]
    args: Vec<String>,
}

#[derive(Deserialize)]
struct RawPlanArgs {
    items: Vec<PlanItem>,
}

#[derive(Deserialize)]
struct RawCompletionArgs {
    summary: String,
}

/// A tool call with typed arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedCall {
    ListTree(ListTreeArgs),
    ReadFile(ReadFileArgs),
    Ripgrep(RipgrepArgs),
    TreeSitterSymbols(SymbolsArgs),
    EditFile(EditFileArgs),
    RunShell(RunShellArgs),
    Git(GitArgs),
    ReadOutput(ReadOutputArgs),
    UpdatePlan { items: Vec<PlanItem> },
    RequestCompletion { summary: String },
}

impl ParsedCall {
    pub fn name(&self) -> ToolName {
        match self {
            Self::ListTree(_) => ToolName::ListTree,
            Self::ReadFile(_) => ToolName::ReadFile,
            Self::Ripgrep(_) => ToolName::Ripgrep,
            Self::TreeSitterSymbols(_) => ToolName::TreeSitterSymbols,
            Self::EditFile(_) => ToolName::EditFile,
            Self::RunShell(_) => ToolName::RunShell,
            Self::Git(_) => ToolName::Git,
            Self::ReadOutput(_) => ToolName::ReadOutput,
            Self::UpdatePlan { .. } => ToolName::UpdatePlan,
            Self::RequestCompletion { .. } => ToolName::RequestCompletion,
        }
    }
}

/// Parses a model's call. Empty argument text counts as `{}` (some models
/// send nothing for a call whose arguments are all optional).
pub fn parse_call(name: &str, arguments: &str) -> Result<ParsedCall, ToolError> {
    let tool = ToolName::from_name(name.trim()).ok_or_else(|| ToolError::UnknownTool {
        name: name.to_string(),
        available: ToolName::ALL.map(ToolName::as_str).join(", "),
    })?;
    let text = if arguments.trim().is_empty() {
        "{}"
    } else {
        arguments
    };
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| ToolError::InvalidJson {
            tool: tool.as_str(),
            reason: e.to_string(),
            example: tool.example(),
        })?;
    if !value.is_object() {
        return Err(invalid(
            tool,
            format!(
                "the arguments must be a JSON object, not {}",
                kind_of(&value)
            ),
        ));
    }
    Ok(match tool {
        ToolName::ListTree => ParsedCall::ListTree(typed(tool, value)?),
        ToolName::ReadFile => {
            let args: ReadFileArgs = typed(tool, value)?;
            check_line_range(tool, &args)?;
            ParsedCall::ReadFile(args)
        }
        ToolName::Ripgrep => {
            let args: RipgrepArgs = typed(tool, value)?;
            if args.pattern.is_empty() {
                return Err(invalid(tool, "`pattern` is empty".into()));
            }
            ParsedCall::Ripgrep(args)
        }
        ToolName::TreeSitterSymbols => ParsedCall::TreeSitterSymbols(typed(tool, value)?),
        ToolName::EditFile => ParsedCall::EditFile(typed(tool, value)?),
        ToolName::RunShell => {
            let args: RunShellArgs = typed(tool, value)?;
            if args.command.trim().is_empty() {
                return Err(invalid(tool, "`command` is empty".into()));
            }
            ParsedCall::RunShell(args)
        }
        ToolName::Git => {
            let raw: RawGitArgs = typed(tool, value)?;
            ParsedCall::Git(GitArgs {
                subcommand: git_subcommand(&raw.subcommand)?,
                args: raw.args,
            })
        }
        ToolName::ReadOutput => {
            let args: ReadOutputArgs = typed(tool, value)?;
            check_output_range(tool, &args)?;
            ParsedCall::ReadOutput(args)
        }
        ToolName::UpdatePlan => {
            let raw: RawPlanArgs = typed(tool, value)?;
            ParsedCall::UpdatePlan { items: raw.items }
        }
        ToolName::RequestCompletion => {
            let raw: RawCompletionArgs = typed(tool, value)?;
            ParsedCall::RequestCompletion {
                summary: raw.summary,
            }
        }
    })
}

fn typed<T: DeserializeOwned>(tool: ToolName, value: serde_json::Value) -> Result<T, ToolError> {
    serde_json::from_value(value).map_err(|e| invalid(tool, e.to_string()))
}

fn invalid(tool: ToolName, reason: String) -> ToolError {
    ToolError::InvalidArguments {
        tool: tool.as_str(),
        reason,
        example: tool.example(),
    }
}

fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn check_line_range(tool: ToolName, args: &ReadFileArgs) -> Result<(), ToolError> {
    if args.start_line == Some(0) || args.end_line == Some(0) {
        return Err(invalid(tool, "line numbers start at 1".into()));
    }
    if let (Some(start), Some(end)) = (args.start_line, args.end_line)
        && end < start
    {
        return Err(invalid(
            tool,
            format!("end_line {end} is before start_line {start}"),
        ));
    }
    Ok(())
}

fn check_output_range(tool: ToolName, args: &ReadOutputArgs) -> Result<(), ToolError> {
    if args.id.trim().is_empty() {
        return Err(invalid(tool, "`id` is empty".into()));
    }
    let lines = args.start_line.is_some() || args.end_line.is_some();
    if lines && (args.offset.is_some() || args.length.is_some()) {
        return Err(invalid(
            tool,
            "give a byte range (offset, length) or a line range (start_line, end_line), not both"
                .into(),
        ));
    }
    if args.start_line == Some(0) || args.end_line == Some(0) {
        return Err(invalid(tool, "line numbers start at 1".into()));
    }
    if args.length == Some(0) {
        return Err(invalid(tool, "`length` is 0".into()));
    }
    if let (Some(start), Some(end)) = (args.start_line, args.end_line)
        && end < start
    {
        return Err(invalid(
            tool,
            format!("end_line {end} is before start_line {start}"),
        ));
    }
    Ok(())
}

fn git_subcommand(name: &str) -> Result<GitSubcommand, ToolError> {
    match name.trim() {
        "status" => Ok(GitSubcommand::Status),
        "diff" => Ok(GitSubcommand::Diff),
        "log" => Ok(GitSubcommand::Log),
        "show" => Ok(GitSubcommand::Show),
        remote @ ("push" | "fetch" | "pull" | "clone" | "remote" | "ls-remote" | "submodule") => {
            Err(ToolError::refused(format!(
                "git {remote} is a remote operation and is not available: the workspace has no remote, and changes reach the source repository only through `minicoder apply`. Available: status, diff, log, show"
            )))
        }
        write @ ("add" | "commit" | "checkout" | "switch" | "reset" | "restore" | "stash"
        | "merge" | "rebase" | "cherry-pick" | "revert" | "tag" | "branch" | "rm"
        | "mv" | "clean" | "apply" | "am" | "config" | "gc" | "init" | "worktree") => {
            Err(ToolError::refused(format!(
                "git {write} would change the repository and is not available: the git tool is read-only (status, diff, log, show). Change files with edit_file; the runtime checkpoints your work itself"
            )))
        }
        other => Err(ToolError::refused(format!(
            "unknown git subcommand `{other}`; the git tool is read-only and offers: status, diff, log, show"
        ))),
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
