//! The one error type of the tools. Each message is read by the model: it
//! says what was wrong and how to proceed.

use crate::workspace::WorkspaceError;

#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("unknown tool `{name}`; available: {available}")]
    UnknownTool { name: String, available: String },

    #[error(
        "arguments of `{tool}` are not valid JSON: {reason} — send a JSON object like {example}"
    )]
    InvalidJson {
        tool: &'static str,
        reason: String,
        example: &'static str,
    },

    #[error("invalid arguments for `{tool}`: {reason} — expected a JSON object like {example}")]
    InvalidArguments {
        tool: &'static str,
        reason: String,
        example: &'static str,
    },

    #[error(
        "`{path}` leads outside the workspace: use a path relative to the workspace root, without `..`, that does not pass through a symlink pointing outside"
    )]
    PathEscape { path: String },

    #[error(
        "`{path}` does not exist in the workspace; use list_tree or ripgrep to find the right path"
    )]
    NotFound { path: String },

    #[error("`{path}`: {problem}")]
    BadPath { path: String, problem: String },

    #[error("cannot access `{path}`: {reason}")]
    Io { path: String, reason: String },

    #[error("{0}")]
    Refused(String),

    #[error("`{name}` is carried out by the agent, not by the tool executor")]
    AgentTool { name: &'static str },
}

impl ToolError {
    /// Maps a workspace error on `path` to a model-facing error.
    pub(crate) fn from_workspace(path: &str, error: WorkspaceError) -> Self {
        match error {
            WorkspaceError::PathEscape { .. } => Self::PathEscape {
                path: path.to_string(),
            },
            WorkspaceError::Io { source, .. } => match source.raw_os_error() {
                Some(libc::ENOENT) => Self::NotFound {
                    path: path.to_string(),
                },
                Some(libc::ENOTDIR) => Self::BadPath {
                    path: path.to_string(),
                    problem: "a component of the path is not a directory".into(),
                },
                Some(libc::ELOOP) => Self::BadPath {
                    path: path.to_string(),
                    problem: "too many levels of symlinks".into(),
                },
                _ if source.kind() == std::io::ErrorKind::NotFound => Self::NotFound {
                    path: path.to_string(),
                },
                _ => Self::Io {
                    path: path.to_string(),
                    reason: source.to_string(),
                },
            },
            other => Self::Io {
                path: path.to_string(),
                reason: other.to_string(),
            },
        }
    }

    pub(crate) fn refused(message: impl Into<String>) -> Self {
        Self::Refused(message.into())
    }
}
