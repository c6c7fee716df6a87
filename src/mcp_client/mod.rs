//! MCP servers the person configures, as tools for the model.
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | starting the servers with a run, their tools as `mcp__SERVER__TOOL`, one call |
//! | `config.rs` | `mcp.json` of the person's configuration directory |
//!
//! The servers run outside the sandbox, as the person: they come only from
//! the person's configuration, never from the repository; each call asks
//! the person unless the tool is allow-listed (the agent decides that, see
//! `agent::effects::ExternalTools`); a server's environment holds no
//! variable named like a secret unless its entry sets it; what a server
//! says is bounded here, then capped and redacted like every tool's result.
//! The servers stop with the run (their processes killed).

pub mod config;

use std::collections::HashMap;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ContentBlock};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};

pub use config::{McpConfig, ServerSpec, Transport};

use crate::model::types::ToolSpec;

/// The prefix of every tool a server offers.
pub const PREFIX: &str = "mcp__";
/// The most tools taken from one server.
const MAX_TOOLS: usize = 64;
/// The longest description and input schema taken for a tool.
const MAX_DESCRIPTION: usize = 2048;
const MAX_SCHEMA: usize = 32 * 1024;
/// The most of a result kept (the runtime caps it again for the model).
const MAX_RESULT: usize = 256 * 1024;
/// How long a server may take to start and list its tools.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// `mcp__SERVER__TOOL`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("{PREFIX}{server}__{tool}")
}

struct Running {
    spec: ServerSpec,
    client: RunningService<RoleClient, ()>,
    /// The tools taken, by their name on the server.
    tools: Vec<String>,
}

/// The servers of one run.
#[derive(Default)]
pub struct McpServers {
    running: Vec<Running>,
}

/// What starting the servers gave.
#[derive(Default)]
pub struct Started {
    pub servers: McpServers,
    /// The tools to offer the model.
    pub specs: Vec<ToolSpec>,
    /// The offered tools that run without asking.
    pub allowed: Vec<String>,
    /// What went wrong, one line each (a server that did not start is left out).
    pub notes: Vec<String>,
}

/// Starts every configured server and lists its tools, at once.
pub async fn start(config: &McpConfig, env: &HashMap<String, String>) -> Started {
    let starts = config.servers.iter().map(|spec| async move {
        let result = tokio::time::timeout(START_TIMEOUT, connect(spec, env)).await;
        (spec.clone(), result)
    });
    let mut started = Started::default();
    for (spec, result) in futures_util::future::join_all(starts).await {
        let (client, tools) = match result {
            Ok(Ok(pair)) => pair,
            Ok(Err(e)) => {
                started
                    .notes
                    .push(format!("MCP server {} did not start: {e}", spec.name));
                continue;
            }
            Err(_) => {
                started.notes.push(format!(
                    "MCP server {} did not list its tools within {} s",
                    spec.name,
                    START_TIMEOUT.as_secs()
                ));
                continue;
            }
        };
        let mut taken = Vec::new();
        for tool in tools.into_iter().take(MAX_TOOLS) {
            let Some(offered) = offered(&spec.name, &tool) else {
                started.notes.push(format!(
                    "MCP server {}: tool {:?} left out (a name other than letters, digits, `-`, `_`, or a schema over {MAX_SCHEMA} bytes)",
                    spec.name,
                    crate::terminal_text::escape_line(&tool.name)
                ));
                continue;
            };
            if spec.allow.iter().any(|a| *a == tool.name) {
                started.allowed.push(offered.name.clone());
            }
            started.specs.push(offered);
            taken.push(tool.name.to_string());
        }
        started.servers.running.push(Running {
            spec,
            client,
            tools: taken,
        });
    }
    started
}

/// A server's tool as offered to the model, if it can be.
fn offered(server: &str, tool: &rmcp::model::Tool) -> Option<ToolSpec> {
    if !config::valid_name(&tool.name, 64) {
        return None;
    }
    let parameters = serde_json::Value::Object((*tool.input_schema).clone());
    if parameters.to_string().len() > MAX_SCHEMA {
        return None;
    }
    let description = tool.description.as_deref().unwrap_or("");
    let description: String = description.chars().take(MAX_DESCRIPTION).collect();
    Some(ToolSpec {
        name: tool_name(server, &tool.name),
        description: format!(
            "(MCP server `{server}`, outside the sandbox; the person may be asked first) {description}"
        ),
        parameters,
    })
}

/// The environment a server starts with: the person's, without variables
/// named like secrets, then its entry's own.
fn server_env(
    env: &HashMap<String, String>,
    own: &std::collections::BTreeMap<String, String>,
) -> Vec<(String, String)> {
    env.iter()
        .filter(|(name, _)| !crate::hooks::is_secret_name(name))
        .map(|(n, v)| (n.clone(), v.clone()))
        .chain(own.iter().map(|(n, v)| (n.clone(), v.clone())))
        .collect()
}

type Connected = (RunningService<RoleClient, ()>, Vec<rmcp::model::Tool>);

async fn connect(spec: &ServerSpec, env: &HashMap<String, String>) -> Result<Connected, String> {
    let client = match &spec.transport {
        Transport::Command {
            command,
            args,
            env: own,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .env_clear()
                .envs(server_env(env, own))
                .kill_on_drop(true)
                .process_group(0);
            let (transport, _) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(std::process::Stdio::null())
                .spawn()
                .map_err(|e| format!("{command}: {e}"))?;
            ().serve(transport).await.map_err(|e| e.to_string())?
        }
        Transport::Http { url, bearer_env } => {
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(var) = bearer_env {
                let token = env
                    .get(var)
                    .ok_or_else(|| format!("{var} (its bearer token) is not set"))?;
                config = config.auth_header(token.clone());
            }
            let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
            ().serve(transport).await.map_err(|e| e.to_string())?
        }
    };
    let tools = client.list_all_tools().await.map_err(|e| e.to_string())?;
    Ok((client, tools))
}

/// The answer to one call: whether it succeeded, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub ok: bool,
    pub text: String,
}

impl McpServers {
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Calls `name` (`mcp__SERVER__TOOL`) with `arguments` (a JSON object),
    /// within the server's time bound.
    pub async fn call(&self, name: &str, arguments: &str) -> Answer {
        let failed = |text: String| Answer { ok: false, text };
        let Some((server, tool)) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once("__"))
        else {
            return failed(format!("{name} is not an MCP server's tool"));
        };
        let Some(running) = self
            .running
            .iter()
            .find(|r| r.spec.name == server && r.tools.iter().any(|t| t == tool))
        else {
            return failed(format!(
                "the MCP server {server} is not running, or has no tool {tool}"
            ));
        };
        let arguments = match serde_json::from_str::<serde_json::Value>(arguments) {
            Ok(serde_json::Value::Object(map)) => map,
            _ => return failed("the arguments must be a JSON object".to_string()),
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let timeout = running.spec.timeout;
        match tokio::time::timeout(timeout, running.client.call_tool(params)).await {
            Err(_) => failed(format!(
                "the MCP server {server} did not answer within {} s",
                timeout.as_secs()
            )),
            Ok(Err(e)) => failed(format!("the MCP server {server} failed: {e}")),
            Ok(Ok(result)) => Answer {
                ok: result.is_error != Some(true),
                text: result_text(&result),
            },
        }
    }

    /// Stops every server.
    pub async fn stop(self) {
        for running in self.running {
            let _ = tokio::time::timeout(Duration::from_secs(5), running.client.cancel()).await;
        }
    }
}

/// A result as text: its text blocks, other blocks named, the structured
/// content when there is no text; at most [`MAX_RESULT`] bytes.
fn result_text(result: &rmcp::model::CallToolResult) -> String {
    let mut text = String::new();
    for block in &result.content {
        match block {
            ContentBlock::Text(t) => text.push_str(&t.text),
            ContentBlock::Image(i) => text.push_str(&format!("[an image, {}]", i.mime_type)),
            ContentBlock::Audio(a) => text.push_str(&format!("[audio, {}]", a.mime_type)),
            _ => text.push_str("[a resource]"),
        }
        if text.len() > MAX_RESULT {
            break;
        }
    }
    if text.is_empty()
        && let Some(value) = &result.structured_content
    {
        text = value.to_string();
    }
    if text.len() > MAX_RESULT {
        let mut cut = MAX_RESULT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[cut: the server's answer was longer]");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_named_variables_stay_behind_unless_the_entry_sets_them() {
        let env = HashMap::from([
            ("PATH".to_string(), "/bin".to_string()),
            ("OPENAI_API_KEY".to_string(), "sk-x".to_string()),
            ("GITHUB_TOKEN".to_string(), "t".to_string()),
        ]);
        let own = std::collections::BTreeMap::from([("NOTES_TOKEN".to_string(), "n".to_string())]);
        let got: HashMap<_, _> = server_env(&env, &own).into_iter().collect();
        assert_eq!(got.get("PATH").map(String::as_str), Some("/bin"));
        assert!(!got.contains_key("OPENAI_API_KEY"));
        assert!(!got.contains_key("GITHUB_TOKEN"));
        assert_eq!(got.get("NOTES_TOKEN").map(String::as_str), Some("n"));
    }

    #[test]
    fn a_tool_is_offered_under_its_servers_prefix_only_with_a_clean_name() {
        let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}});
        let serde_json::Value::Object(schema) = schema else {
            unreachable!()
        };
        let tool = rmcp::model::Tool::new("lookup", "Look a note up", std::sync::Arc::new(schema));
        let spec = offered("notes", &tool).unwrap();
        assert_eq!(spec.name, "mcp__notes__lookup");
        assert!(spec.description.contains("outside the sandbox"));
        let bad = rmcp::model::Tool::new(
            "look\u{1b}[2Jup",
            "x",
            std::sync::Arc::new(serde_json::Map::new()),
        );
        assert!(offered("notes", &bad).is_none());
    }

    #[tokio::test]
    async fn a_call_to_a_server_that_is_not_running_fails_clearly() {
        let servers = McpServers::default();
        let answer = servers.call("mcp__notes__lookup", "{}").await;
        assert!(!answer.ok);
        assert!(answer.text.contains("not running"), "{}", answer.text);
        let answer = servers.call("read_file", "{}").await;
        assert!(!answer.ok);
    }

    #[tokio::test]
    async fn a_server_that_cannot_start_is_a_note_not_a_failure() {
        let config =
            McpConfig::parse(r#"{"mcpServers": {"ghost": {"command": "/nonexistent/server"}}}"#)
                .unwrap();
        let started = start(&config, &HashMap::new()).await;
        assert!(started.specs.is_empty());
        assert_eq!(started.notes.len(), 1, "{:?}", started.notes);
        assert!(started.notes[0].contains("ghost"), "{:?}", started.notes);
    }
}
