//! The source repository's `.minicoder.json`, read once at run start (and then
//! frozen by the caller), and the `--check NAME CMD` overrides.
//!
//! ```json
//! {"bootstrap": ["pip install -e ."], "verification": ["pytest -q", {"name": "lint", "command": "ruff check ."}],
//!  "secret_paths": ["config/master.key.txt", "!.env.test"],
//!  "image": "minicoder-sandbox:v1", "packages": ["jq"],
//!  "limits": {"max_file_bytes": 104857600, "workspace_bytes": 4294967296,
//!             "workspace_files": 200000, "min_free_bytes": 1073741824}}
//! ```
//!
//! `secret_paths` adds gitignore patterns to the default credential paths
//! left out of the workspace ([`crate::workspace::DEFAULT_SECRET_PATHS`]);
//! `!PATTERN` keeps a path the defaults leave out.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::VerifyError;
pub use super::check_spec::CheckSpec;
use super::detect::detect_checks;
use super::names::{derive_check_name, valid_check_name};
use crate::workspace::SecretPaths;

/// The configuration file, at the root of the source repository.
pub const CONFIG_FILE: &str = ".minicoder.json";
/// The most of `.minicoder.json` that is read: a larger file is refused.
pub const MAX_CONFIG_BYTES: u64 = 256 << 10;
/// At most this many checks: a longer list is refused, not cut.
pub const MAX_CHECKS: usize = 16;
/// At most this many `"packages"`.
pub(crate) const MAX_PACKAGES: usize = 64;

/// The validated contents of `.minicoder.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectConfig {
    pub bootstrap: Vec<String>,
    pub verification: Vec<CheckSpec>,
    /// Patterns after the default credential paths (validated).
    #[serde(default)]
    pub secret_paths: Vec<String>,
    /// The sandbox image of the project (default: `MINICODER_SANDBOX_IMAGE`
    /// or the built-in one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Debian packages added on top of that image.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    /// Workspace limits (each unset one takes its default).
    #[serde(default)]
    pub limits: crate::workspace::LimitOverrides,
}

impl ProjectConfig {
    /// What the project asks of its sandbox image (no recipe: whether one
    /// is built is [`super::Honoured::image_request`]'s to say).
    pub(crate) fn image_request(&self) -> crate::sandbox::derived::ImageRequest {
        crate::sandbox::derived::ImageRequest {
            image: self.image.clone(),
            packages: self.packages.clone(),
            ..Default::default()
        }
    }
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
    image: Option<String>,
    #[serde(default)]
    packages: Vec<String>,
    #[serde(default)]
    limits: crate::workspace::LimitOverrides,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedCheck {
    name: String,
    command: String,
}

/// Reads `<repo>/.minicoder.json` as it is (bounded, never through a
/// link); `None` when there is none. What of it a run may honour is
/// [`super::project::load_project`]'s to say.
pub fn load_config(repo: &Path) -> Result<Option<ProjectConfig>, VerifyError> {
    let path = repo.join(CONFIG_FILE);
    read_config_text(&path)?
        .map(|text| parse_config(&path, &text))
        .transpose()
}

/// Parses and validates the text of a configuration file read from `path`.
pub(crate) fn parse_config(path: &Path, text: &str) -> Result<ProjectConfig, VerifyError> {
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
    if let Some(image) = &raw.image
        && !valid_image_name(image)
    {
        return Err(invalid(format!(
            "\"image\" is {image:?}, not an image name (such as minicoder-sandbox:v1 or registry.example/team/image:tag)"
        )));
    }
    if raw.packages.len() > MAX_PACKAGES {
        return Err(invalid(format!(
            "\"packages\" lists {} packages; at most {MAX_PACKAGES}",
            raw.packages.len()
        )));
    }
    if let Some(bad) = raw.packages.iter().find(|p| !valid_package_name(p)) {
        return Err(invalid(format!(
            "\"packages\" holds {bad:?}, not a Debian package name (lower-case letters, digits, '+', '-' and '.', optionally =VERSION)"
        )));
    }
    let l = &raw.limits;
    for (name, value) in [
        ("max_file_bytes", l.max_file_bytes),
        ("workspace_bytes", l.workspace_bytes),
        ("workspace_files", l.workspace_files),
        ("min_free_bytes", l.min_free_bytes),
    ] {
        if value == Some(0) {
            return Err(invalid(format!(
                "\"limits\".{name} is 0; give a positive number or leave it out for the default"
            )));
        }
    }
    let origin = path.display().to_string();
    Ok(ProjectConfig {
        bootstrap: raw.bootstrap,
        verification: name_checks(entries, &origin)?,
        secret_paths: raw.secret_paths,
        image: raw.image,
        packages: raw.packages,
        limits: raw.limits,
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

/// A Debian package name (`jq`, `libssl-dev`, `g++`), optionally pinned
/// (`jq=1.7.1-3`): nothing a shell or a Dockerfile could read as more.
pub(crate) fn valid_package_name(name: &str) -> bool {
    let (package, version) = match name.split_once('=') {
        Some((p, v)) => (p, Some(v)),
        None => (name, None),
    };
    let mut chars = package.chars();
    let starts = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    starts
        && package.len() >= 2
        && package.len() <= 128
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
        && version.is_none_or(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".+~:-".contains(c))
        })
}

/// A Docker image reference: `name[:tag][@digest]` in Docker's characters.
pub(crate) fn valid_image_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:@".contains(c))
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
pub(crate) fn config_path(repo: &Path) -> PathBuf {
    repo.join(CONFIG_FILE)
}

/// The text of `.minicoder.json`, `None` when there is none: a regular
/// file, not followed through a symlink, at most [`MAX_CONFIG_BYTES`].
pub(crate) fn read_config_text(path: &Path) -> Result<Option<String>, VerifyError> {
    let invalid = |message: String| VerifyError::ConfigInvalid {
        path: path.to_path_buf(),
        message,
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        // Not through a link, and a FIFO does not block the open.
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(invalid(
                "it is a symbolic link; minicoder reads a project's configuration only from a regular file inside the repository: replace the link with the file".to_string(),
            ));
        }
        Err(source) => {
            return Err(VerifyError::ConfigRead {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let meta = file.metadata().map_err(|source| VerifyError::ConfigRead {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Err(invalid(
            "it is not a regular file; make it one or remove it".to_string(),
        ));
    }
    if meta.len() > MAX_CONFIG_BYTES {
        return Err(invalid(format!(
            "it holds {} bytes; a configuration holds at most {} KiB",
            meta.len(),
            MAX_CONFIG_BYTES >> 10
        )));
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| VerifyError::ConfigRead {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(invalid(format!(
            "it grew past {} KiB while it was read",
            MAX_CONFIG_BYTES >> 10
        )));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| invalid("it is not UTF-8 text; write it as JSON".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_are_debians() {
        for ok in ["jq", "libssl-dev", "g++", "python3.13", "jq=1.7.1-3", "0ad"] {
            assert!(valid_package_name(ok), "{ok}");
        }
        for bad in [
            "",
            "j",
            "JQ",
            "jq; rm -rf /",
            "-jq",
            "jq=",
            "jq\nRUN x",
            "a b",
            "jq=1 2",
        ] {
            assert!(!valid_package_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn image_names_are_references() {
        for ok in [
            "minicoder-sandbox:v1",
            "reg.example:5000/team/img:tag",
            "img@sha256:abc",
        ] {
            assert!(valid_image_name(ok), "{ok}");
        }
        for bad in ["", ":v1", "img name", "img\nRUN", "-img"] {
            assert!(!valid_image_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn image_and_packages_are_read_and_checked() {
        let path = Path::new(".minicoder.json");
        let config =
            parse_config(path, r#"{"image": "img:1", "packages": ["jq", "curl"]}"#).expect("valid");
        assert_eq!(config.image.as_deref(), Some("img:1"));
        assert_eq!(config.packages, vec!["jq".to_string(), "curl".to_string()]);
        let err = parse_config(path, r#"{"packages": ["jq && curl evil"]}"#).expect_err("bad");
        assert!(err.to_string().contains("Debian package name"), "{err}");
        let err = parse_config(path, r#"{"image": "a b"}"#).expect_err("bad");
        assert!(err.to_string().contains("image"), "{err}");
    }
}
