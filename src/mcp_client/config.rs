//! `mcp.json` in the person's configuration directory — never the
//! repository's — in the shape Claude Code's `.mcp.json` has:
//!
//! ```json
//! {"mcpServers": {
//!   "notes": {"command": "python3", "args": ["/opt/notes/server.py"], "env": {"NOTES": "/srv/notes"},
//!             "allow": ["lookup"], "timeout": 30},
//!   "tracker": {"type": "http", "url": "https://tracker.example/mcp", "bearer_env": "TRACKER_TOKEN"}
//! }}
//! ```
//!
//! `allow` lists the tools that run without asking the person; every other
//! call asks. The file is read bounded and refused when anyone but its owner
//! may write it (or the directory holding it): it names programs to run.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// The file's name in the configuration directory.
pub const FILE: &str = "mcp.json";
/// The most of the file that is read.
const MAX_BYTES: u64 = 256 * 1024;
/// A call's default time bound, and the longest one may be given.
const DEFAULT_TIMEOUT_S: u64 = 60;
const MAX_TIMEOUT_S: u64 = 600;

/// The configured servers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct McpConfig {
    pub servers: Vec<ServerSpec>,
}

/// One server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerSpec {
    pub name: String,
    pub transport: Transport,
    /// Tools that run without asking.
    pub allow: Vec<String>,
    /// The bound of one call.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    /// A program speaking MCP on its standard input and output.
    Command {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP, with the bearer token read from an environment
    /// variable (never from the file).
    Http {
        url: String,
        bearer_env: Option<String>,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShape {
    #[serde(default, rename = "mcpServers")]
    servers: BTreeMap<String, ServerShape>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerShape {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    bearer_env: Option<String>,
    #[serde(default)]
    allow: Vec<String>,
    #[serde(default)]
    timeout: Option<u64>,
}

impl McpConfig {
    /// Reads `mcp.json` of the configuration directory `dir`; none there is
    /// no servers.
    pub fn load(dir: Option<&Path>) -> Result<McpConfig, String> {
        let Some(dir) = dir else {
            return Ok(McpConfig::default());
        };
        let path = dir.join(FILE);
        let text = crate::hooks::config::read_owned_file(&path, MAX_BYTES)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        match text {
            None => Ok(McpConfig::default()),
            Some(text) => Self::parse(&text).map_err(|e| format!("{}: {e}", path.display())),
        }
    }

    /// Parses the file's text.
    pub fn parse(text: &str) -> Result<McpConfig, String> {
        let shape: FileShape = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let servers = shape
            .servers
            .into_iter()
            .map(|(name, s)| server(name, s))
            .collect::<Result<_, _>>()?;
        Ok(McpConfig { servers })
    }
}

/// A name that can stand between the `__` of `mcp__SERVER__TOOL`.
pub(crate) fn valid_name(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn server(name: String, s: ServerShape) -> Result<ServerSpec, String> {
    if !valid_name(&name, 32) {
        return Err(format!(
            "server name {name:?}: use at most 32 letters, digits, `-` or `_` (not `__`)"
        ));
    }
    let timeout = s.timeout.unwrap_or(DEFAULT_TIMEOUT_S);
    if timeout == 0 || timeout > MAX_TIMEOUT_S {
        return Err(format!(
            "{name}: timeout must be 1 to {MAX_TIMEOUT_S} seconds"
        ));
    }
    let transport = match (s.kind.as_deref(), s.command, s.url) {
        (None | Some("stdio"), Some(command), None) => Transport::Command {
            command,
            args: s.args,
            env: s.env,
        },
        (None | Some("http"), None, Some(url)) => {
            check_url(&name, &url)?;
            Transport::Http {
                url,
                bearer_env: s.bearer_env,
            }
        }
        _ => {
            return Err(format!(
                "{name}: give either `command` (and `args`, `env`) or `url` (and `bearer_env`)"
            ));
        }
    };
    Ok(ServerSpec {
        name,
        transport,
        allow: s.allow,
        timeout: Duration::from_secs(timeout),
    })
}

/// An https URL, or http on loopback; never with a user or password in
/// it (`http://127.0.0.1:1@elsewhere/` names `elsewhere`).
fn check_url(name: &str, url: &str) -> Result<(), String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("{name}: the url {url:?}: {e}"))?;
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(format!(
            "{name}: the url may not carry a user or a password"
        ));
    }
    match parsed.scheme() {
        "https" if parsed.host().is_some() => Ok(()),
        "http" if crate::model::provider::is_loopback(&parsed) => Ok(()),
        _ => Err(format!(
            "{name}: the url must be https, or http on loopback"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_server_and_an_http_server() {
        let c = McpConfig::parse(
            r#"{"mcpServers": {
                "notes": {"command": "python3", "args": ["s.py"], "env": {"A": "1"}, "allow": ["lookup"]},
                "remote": {"type": "http", "url": "https://x.example/mcp", "bearer_env": "T", "timeout": 5},
                "local": {"url": "http://127.0.0.1:8765/mcp"}
            }}"#,
        )
        .unwrap();
        assert_eq!(c.servers.len(), 3);
        assert_eq!(c.servers[1].name, "notes");
        assert_eq!(c.servers[1].allow, ["lookup"]);
        assert_eq!(c.servers[1].timeout, Duration::from_secs(60));
        assert!(
            matches!(&c.servers[1].transport, Transport::Command { command, .. } if command == "python3")
        );
        assert!(
            matches!(&c.servers[2].transport, Transport::Http { bearer_env: Some(v), .. } if v == "T")
        );
        assert_eq!(c.servers[2].timeout, Duration::from_secs(5));
    }

    #[test]
    fn bad_shapes_are_refused_with_the_reason() {
        for (text, want) in [
            (
                r#"{"mcpServers": {"a__b": {"command": "x"}}}"#,
                "server name",
            ),
            (r#"{"mcpServers": {"a": {}}}"#, "either `command`"),
            (
                r#"{"mcpServers": {"a": {"command": "x", "url": "https://y"}}}"#,
                "either",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "http://example.com/mcp"}}}"#,
                "https",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "http://127.0.0.1:1@evil.example/mcp"}}}"#,
                "user or a password",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "http://localhost.evil.example/mcp"}}}"#,
                "https",
            ),
            (r#"{"mcpServers": {"a": {"url": "not a url"}}}"#, "url"),
            (
                r#"{"mcpServers": {"a": {"command": "x", "timeout": 0}}}"#,
                "timeout",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "headers": {}}}}"#,
                "unknown field",
            ),
        ] {
            let e = McpConfig::parse(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn a_file_others_may_write_is_refused_and_none_is_no_servers() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            McpConfig::load(Some(dir.path())).unwrap(),
            McpConfig::default()
        );
        let file = dir.path().join(FILE);
        std::fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = McpConfig::load(Some(dir.path())).unwrap_err();
        assert!(e.contains("written by others"), "{e}");
    }
}
