//! `hooks.json` in the person's configuration directory, in the shape
//! Claude Code's settings give their `hooks` key:
//!
//! ```json
//! {"hooks": {"PreToolUse": [{"matcher": "run_shell|edit_file",
//!   "hooks": [{"type": "command", "command": "~/bin/policy", "timeout": 30}]}]}}
//! ```
//!
//! A matcher is a regular expression on the tool's name (anchored at both
//! ends, as a tool name is matched whole; empty or `*` matches every tool)
//! and is read only for events about a tool. The file is read bounded, and
//! refused when anyone but its owner may write it or the directory holding
//! it: whoever can write it can run programs as the person.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::HookEvent;

/// The file's name in the configuration directory.
pub const FILE: &str = "hooks.json";

/// The most of the file that is read.
const MAX_BYTES: u64 = 1 << 20;

/// The longest a hook may be given.
const MAX_TIMEOUT_S: u64 = 3600;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{path}: {why}")]
    Bad { path: PathBuf, why: String },
}

/// One command hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    /// Run with `sh -c`.
    pub command: String,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
struct Group {
    matcher: Option<regex::Regex>,
    /// The matcher as written.
    pattern: Option<String>,
    hooks: Vec<HookSpec>,
}

/// The configured hooks, by event.
#[derive(Debug, Clone, Default)]
pub struct HooksConfig {
    groups: BTreeMap<HookEvent, Vec<Group>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default)]
    hooks: BTreeMap<String, Vec<GroupShape>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupShape {
    #[serde(default)]
    matcher: Option<String>,
    hooks: Vec<HookShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HookShape {
    #[serde(rename = "type")]
    kind: String,
    command: String,
    #[serde(default)]
    timeout: Option<u64>,
}

impl HooksConfig {
    /// Reads `path`; a missing file is no hooks.
    pub fn load(path: &Path) -> Result<HooksConfig, ConfigError> {
        let bad = |why: String| ConfigError::Bad {
            path: path.to_path_buf(),
            why,
        };
        match read_owned_file(path, MAX_BYTES).map_err(bad)? {
            None => Ok(HooksConfig::default()),
            Some(text) => HooksConfig::parse(&text).map_err(bad),
        }
    }

    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<HooksConfig, String> {
        let shape: FileShape = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut config = HooksConfig::default();
        for (name, groups) in shape.hooks {
            let event = HookEvent::from_name(&name).ok_or_else(|| {
                format!(
                    "unknown hook event `{name}` (known: {})",
                    HookEvent::ALL.map(HookEvent::name).join(", ")
                )
            })?;
            for group in groups {
                let pattern = group
                    .matcher
                    .filter(|m| !m.is_empty() && m != "*" && event.has_tool());
                let matcher = match &pattern {
                    Some(p) => Some(
                        regex::Regex::new(&format!("^(?:{p})$"))
                            .map_err(|e| format!("{name}: matcher `{p}`: {e}"))?,
                    ),
                    None => None,
                };
                let mut hooks = Vec::new();
                for hook in group.hooks {
                    if hook.kind != "command" {
                        return Err(format!(
                            "{name}: hook type `{}` (only `command` hooks are run)",
                            hook.kind
                        ));
                    }
                    if hook.command.trim().is_empty() {
                        return Err(format!("{name}: a hook with an empty command"));
                    }
                    let seconds = hook
                        .timeout
                        .unwrap_or(super::DEFAULT_TIMEOUT.as_secs())
                        .clamp(1, MAX_TIMEOUT_S);
                    hooks.push(HookSpec {
                        command: hook.command,
                        timeout: Duration::from_secs(seconds),
                    });
                }
                config.groups.entry(event).or_default().push(Group {
                    matcher,
                    pattern,
                    hooks,
                });
            }
        }
        Ok(config)
    }

    pub fn is_empty(&self) -> bool {
        self.groups.values().flatten().all(|g| g.hooks.is_empty())
    }

    /// Whether any hook is configured for `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.groups
            .get(&event)
            .is_some_and(|groups| groups.iter().any(|g| !g.hooks.is_empty()))
    }

    /// The hooks of `event` whose matcher takes `tool`, in file order.
    pub fn matching(&self, event: HookEvent, tool: Option<&str>) -> Vec<&HookSpec> {
        self.groups
            .get(&event)
            .into_iter()
            .flatten()
            .filter(|g| match (&g.matcher, tool) {
                (None, _) => true,
                (Some(m), Some(tool)) => m.is_match(tool),
                (Some(_), None) => false,
            })
            .flat_map(|g| g.hooks.iter())
            .collect()
    }

    /// Every hook with its event and matcher.
    pub fn listed(&self) -> Vec<(HookEvent, Option<String>, &HookSpec)> {
        self.groups
            .iter()
            .flat_map(|(event, groups)| {
                groups
                    .iter()
                    .flat_map(move |g| g.hooks.iter().map(move |h| (*event, g.pattern.clone(), h)))
            })
            .collect()
    }
}

/// Reads a file of the person's configuration that names programs to run
/// (`None` when there is none): a regular file of at most `max` bytes that
/// only its owner — the running user, or root — may write, in a directory
/// of which the same holds. Whoever could write it could run programs as
/// the person.
pub(crate) fn read_owned_file(path: &Path, max: u64) -> Result<Option<String>, String> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max {
        return Err(format!("over {max} bytes"));
    }
    only_owner_writes(path, &meta)?;
    // The directory holding it must be checked too; one that cannot be
    // is refused rather than trusted.
    let dir = path
        .parent()
        .filter(|d| d.is_absolute())
        .ok_or_else(|| "not an absolute path".to_string())?;
    let dir_meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    only_owner_writes(dir, &dir_meta)?;
    std::fs::read_to_string(path)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Refuses `path` when its group or others may write it, or when it is
/// not the running user's (or root's).
fn only_owner_writes(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(format!(
            "{} belongs to another user (uid {}); programs to run are read only from your own files",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "{} can be written by others (mode {:o}): what it names runs as you, so `chmod go-w {}` first",
            path.display(),
            meta.mode() & 0o7777,
            path.display()
        ));
    }
    Ok(())
}
