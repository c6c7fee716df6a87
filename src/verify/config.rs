//! The source repository's `.minicoder.json`, read once at run start (and then
//! frozen by the caller), and the `--check NAME CMD` overrides.
//!
//! ```json
//! {"bootstrap": ["pip install -e ."], "verification": ["pytest -q", {"name": "lint", "command": "ruff check ."}],
//!  "secret_paths": ["config/master.key.txt", "!.env.test"]}
//! ```
//!
//! `secret_paths` adds gitignore patterns to the default credential paths
//! left out of the workspace ([`crate::workspace::DEFAULT_SECRET_PATHS`]);
//! `!PATTERN` keeps a path the defaults leave out.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::VerifyError;
use super::detect::detect_checks;
use super::names::{derive_check_name, valid_check_name};
use crate::workspace::SecretPaths;

/// The configuration file, at the root of the source repository.
pub const CONFIG_FILE: &str = ".minicoder.json";
/// At most this many checks (SPEC §6).
pub const MAX_CHECKS: usize = 16;

/// One check of the verification matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckSpec {
    pub name: String,
    /// Run with `/bin/sh -c` in `/workspace`.
    pub command: String,
}

impl CheckSpec {
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: command.into(),
        }
    }
}

/// The validated contents of `.minicoder.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectConfig {
    pub bootstrap: Vec<String>,
    pub verification: Vec<CheckSpec>,
    /// Patterns after the default credential paths (validated).
    #[serde(default)]
    pub secret_paths: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    bootstrap: Vec<String>,
    #[serde(default)]
    verification: Vec<serde_json::Value>,
    #[serde(default)]
    secret_paths: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedCheck {
    name: String,
    command: String,
}

/// Reads `<repo>/.minicoder.json`; `None` when there is none.
pub fn load_config(repo: &Path) -> Result<Option<ProjectConfig>, VerifyError> {
    let path = repo.join(CONFIG_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(VerifyError::ConfigRead { path, source }),
    };
    parse_config(&path, &text).map(Some)
}

/// Parses and validates the text of a configuration file read from `path`.
pub fn parse_config(path: &Path, text: &str) -> Result<ProjectConfig, VerifyError> {
    let raw: RawConfig = serde_json::from_str(text).map_err(|e| VerifyError::ConfigSyntax {
        path: path.to_path_buf(),
        line: e.line(),
        column: e.column(),
        message: strip_position(&e.to_string()),
    })?;
    let invalid = |message: String| VerifyError::ConfigInvalid {
        path: path.to_path_buf(),
        message,
    };
    if let Some(i) = raw.bootstrap.iter().position(|c| c.trim().is_empty()) {
        return Err(invalid(format!(
            "bootstrap command {} is empty; remove it or give it a command",
            i + 1
        )));
    }
    let mut entries = Vec::with_capacity(raw.verification.len());
    for (i, value) in raw.verification.into_iter().enumerate() {
        let entry = match value {
            serde_json::Value::String(command) => (None, command),
            value @ serde_json::Value::Object(_) => {
                let named: NamedCheck = serde_json::from_value(value).map_err(|e| {
                    invalid(format!(
                        "verification entry {} must be {{\"name\": ..., \"command\": ...}}: {e}",
                        i + 1
                    ))
                })?;
                (Some(named.name), named.command)
            }
            other => {
                return Err(invalid(format!(
                    "verification entry {} is {other}; write a command string or {{\"name\": ..., \"command\": ...}}",
                    i + 1
                )));
            }
        };
        entries.push(entry);
    }
    if let Err(problem) = SecretPaths::with_overrides(&raw.secret_paths) {
        return Err(invalid(format!("secret_paths: {problem}")));
    }
    let origin = path.display().to_string();
    Ok(ProjectConfig {
        bootstrap: raw.bootstrap,
        verification: name_checks(entries, &origin)?,
        secret_paths: raw.secret_paths,
    })
}

/// The credential paths of a run on `repo`: the defaults, then the
/// project's `secret_paths`.
pub fn secret_paths(
    repo: &Path,
    config: Option<&ProjectConfig>,
) -> Result<SecretPaths, VerifyError> {
    let overrides = config.map(|c| c.secret_paths.as_slice()).unwrap_or(&[]);
    SecretPaths::with_overrides(overrides).map_err(|message| VerifyError::ConfigInvalid {
        path: config_path(repo),
        message: format!("secret_paths: {message}"),
    })
}

/// The frozen check list of a run: the overrides if any, else the configured
/// checks, else the checks detected in `repo`.
pub fn resolve_checks(
    repo: &Path,
    config: Option<&ProjectConfig>,
    overrides: &[(String, String)],
) -> Result<Vec<CheckSpec>, VerifyError> {
    if !overrides.is_empty() {
        let entries = overrides
            .iter()
            .map(|(name, command)| (Some(name.clone()), command.clone()))
            .collect();
        return name_checks(entries, "--check");
    }
    if let Some(config) = config
        && !config.verification.is_empty()
    {
        // Validated when loaded, but a config can be built by hand.
        let entries = config
            .verification
            .iter()
            .map(|c| (Some(c.name.clone()), c.command.clone()))
            .collect();
        return name_checks(entries, CONFIG_FILE);
    }
    detect_checks(repo)
}

/// Validates explicit names, derives missing ones, and enforces the limits.
fn name_checks(
    entries: Vec<(Option<String>, String)>,
    origin: &str,
) -> Result<Vec<CheckSpec>, VerifyError> {
    if entries.len() > MAX_CHECKS {
        return Err(VerifyError::TooManyChecks {
            count: entries.len(),
            max: MAX_CHECKS,
            origin: origin.to_string(),
        });
    }
    let mut taken = BTreeSet::new();
    for (name, _) in &entries {
        if let Some(name) = name {
            if !valid_check_name(name) {
                return Err(VerifyError::InvalidCheckName {
                    name: name.clone(),
                    origin: origin.to_string(),
                });
            }
            if !taken.insert(name.clone()) {
                return Err(VerifyError::DuplicateCheckName {
                    name: name.clone(),
                    origin: origin.to_string(),
                });
            }
        }
    }
    let mut checks = Vec::with_capacity(entries.len());
    for (i, (name, command)) in entries.into_iter().enumerate() {
        let name = match name {
            Some(name) => name,
            None => {
                let derived = derive_check_name(&command, i + 1, &taken);
                taken.insert(derived.clone());
                derived
            }
        };
        if command.trim().is_empty() {
            return Err(VerifyError::EmptyCommand {
                name,
                origin: origin.to_string(),
            });
        }
        checks.push(CheckSpec { name, command });
    }
    Ok(checks)
}

/// serde_json appends " at line L column C"; the error carries them apart.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// The path of the configuration file of `repo`.
pub fn config_path(repo: &Path) -> PathBuf {
    repo.join(CONFIG_FILE)
}
