//! `manifest.json`: the immutable inputs and limits of a run.

use serde::{Deserialize, Serialize};

use std::path::Path;

use super::{ReceiptKey, TraceError};
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
    /// The source repository's HEAD commit when the run started (`None`
    /// for a repository without commits): `apply` writes only into a
    /// repository that holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_head: Option<String>,
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
    /// The repository's own configuration and how far the run honoured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<crate::protocol::ProjectTrust>,
    /// RFC 3339 UTC.
    pub created: String,
    pub minicoder_version: String,
    /// Lowercase hex HMAC-SHA256 (the receipt key) over the canonical JSON
    /// of every other field: `resume` and `apply` refuse a manifest whose
    /// inputs were changed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hmac: String,
}

impl Manifest {
    /// Signs the manifest as it is (what is signed must be written as is).
    pub fn sign(mut self, key: &ReceiptKey) -> Result<Self, TraceError> {
        self.hmac.clear();
        self.hmac = super::signing::sign(key, &self)?;
        Ok(self)
    }

    /// Checks the signature of a manifest read from `path`.
    pub fn verify(&self, key: &ReceiptKey, path: &Path) -> Result<(), TraceError> {
        if self.hmac.is_empty() {
            return Err(TraceError::ManifestUnsigned {
                path: path.to_path_buf(),
            });
        }
        if !super::signing::verify(key, self, &self.hmac) {
            return Err(TraceError::ManifestTampered {
                path: path.to_path_buf(),
            });
        }
        Ok(())
    }
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
    /// The token budget of the whole run.
    pub max_tokens: u64,
    /// The cost budget, in millionths of a dollar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost_micros: Option<u64>,
    pub network: bool,
    /// `each`, `final` or `never`.
    pub approval: String,
    /// The run may change the repository's own configuration.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_config_edits: bool,
    /// The workspace limits every command, bootstrap and check was held to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<crate::workspace::WorkspaceLimits>,
}
