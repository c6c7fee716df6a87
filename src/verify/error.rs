use std::path::PathBuf;

use crate::sandbox::SandboxError;
use crate::workspace::WorkspaceError;

/// What can go wrong while configuring or running verification. Every message
/// says what happened and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read {path}: {source}; fix its permissions or remove it")]
    ConfigRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("{path} is not valid at line {line}, column {column}: {message}; fix the file")]
    ConfigSyntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },

    #[error("{path}: {message}")]
    ConfigInvalid { path: PathBuf, message: String },

    #[error(
        "invalid check name {name:?} ({origin}): a name is 1 to 32 characters of a-z, 0-9, '_' and '-', starting with a letter"
    )]
    InvalidCheckName { name: String, origin: String },

    #[error("the check {name:?} ({origin}) has an empty command; give it a command to run")]
    EmptyCommand { name: String, origin: String },

    #[error("{count} checks are configured ({origin}); at most {max} are allowed, so merge some")]
    TooManyChecks {
        count: usize,
        max: usize,
        origin: String,
    },

    #[error("the check name {name:?} is used twice ({origin}); give every check its own name")]
    DuplicateCheckName { name: String, origin: String },

    #[error(
        "the project is ambiguous: it looks like {found}; say which checks prove a change with `--check NAME CMD` or a \"verification\" list in .minicoder.json"
    )]
    AmbiguousProject { found: String },

    #[error(
        "no meaningful check was found (no package test script, Cargo.toml, go.mod, pytest configuration, tests/test_*.py or Makefile test target): a run with no meaningful check cannot succeed; configure one with `--check NAME CMD` or a \"verification\" list in .minicoder.json"
    )]
    NoMeaningfulCheck,

    #[error("{detail}")]
    MissingPrograms { image: String, detail: String },

    #[error("the pre-flight could not run: {0}")]
    Preflight(String),

    #[error("reading {path} to detect checks: {source}")]
    DetectRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("the verifier has no check to run; resolve checks before verifying")]
    NoChecks,

    #[error("cannot create the output directory {path}: {source}")]
    Outputs {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(transparent)]
    Sandbox(#[from] SandboxError),

    #[error("fingerprinting the workspace failed: {0}")]
    Workspace(#[from] WorkspaceError),
}
