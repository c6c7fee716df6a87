//! `manifest.json`: the immutable inputs and limits of a run.

use serde::{Deserialize, Serialize};

use crate::model::types::ModelId;
use crate::workspace::LeftOut;

/// The version of minicoder that writes artifacts.
pub const MINICODER_VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub run_id: String,
    /// The source repository (absolute path).
    pub repo: String,
    pub task: String,
    pub baseline_commit: String,
    pub baseline_fingerprint: String,
    /// The frozen verification checks, in order.
    pub checks: Vec<ManifestCheck>,
    /// Whether the checks came from `--check` flags rather than the
    /// repository's configuration.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub checks_from_flags: bool,
    /// Bootstrap commands, in order.
    pub bootstrap: Vec<String>,
    /// The providers and models the run may use, in fallback order.
    pub model_chain: Vec<ModelId>,
    pub limits: ManifestLimits,
    /// Source paths not copied into the workspace (credential files, paths
    /// git refuses): by path only, never their contents.
    #[serde(default)]
    pub left_out: Vec<LeftOut>,
    /// The project instruction files in the context from the start (those
    /// found later, in subdirectories, are `instructions.loaded` events).
    #[serde(default)]
    pub instructions: Vec<ManifestInstruction>,
    /// RFC 3339 UTC.
    pub created: String,
    pub minicoder_version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestCheck {
    pub name: String,
    pub command: String,
}

/// One project instruction file: its path, its size, whether it was cut.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestInstruction {
    pub path: String,
    pub bytes: u64,
    pub truncated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestLimits {
    pub max_turns: u32,
    /// The whole run.
    pub timeout_ms: u64,
    /// One sandboxed command.
    pub command_timeout_ms: u64,
    /// One model request.
    pub model_timeout_ms: u64,
    /// The context budget in tokens.
    pub max_tokens: u64,
    pub network: bool,
    /// `each`, `final` or `never`.
    pub approval: String,
}
