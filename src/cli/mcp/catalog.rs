//! The tools `minicoder mcp` offers: names, schemas of their input and of
//! their structured output, and honest annotations.
//!
//! The workspace tools take the agent's own argument schemas
//! ([`crate::tools::specs`]) with a `workspace` field added, so a client
//! calls them exactly as the model does.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

/// An MCP tool and the agent tool it forwards to (if it forwards).
pub(super) struct Entry {
    pub(super) name: &'static str,
    pub(super) agent_tool: Option<&'static str>,
    title: &'static str,
    read_only: bool,
    destructive: bool,
    idempotent: bool,
    open_world: bool,
}

const fn entry(
    name: &'static str,
    agent_tool: Option<&'static str>,
    title: &'static str,
    [read_only, destructive, idempotent, open_world]: [bool; 4],
) -> Entry {
    Entry {
        name,
        agent_tool,
        title,
        read_only,
        destructive,
        idempotent,
        open_world,
    }
}

/// Every tool: read-only, destructive, idempotent, open-world. Edits and
/// commands change only the workspace's private copy (the repository is
/// never touched), but within it they can delete: destructive. `run`
/// reaches the model provider: open world.
pub(super) const ENTRIES: [Entry; 13] = [
    entry(
        "open_workspace",
        None,
        "Open a sandboxed workspace",
        [false, false, false, false],
    ),
    entry(
        "list_tree",
        Some("list_tree"),
        "List files",
        [true, false, true, false],
    ),
    entry(
        "read_file",
        Some("read_file"),
        "Read a file",
        [true, false, true, false],
    ),
    entry(
        "ripgrep",
        Some("ripgrep"),
        "Search files",
        [true, false, true, false],
    ),
    entry(
        "symbols",
        Some("tree_sitter_symbols"),
        "List symbols",
        [true, false, true, false],
    ),
    entry(
        "edit_file",
        Some("edit_file"),
        "Edit a file with a unified diff",
        [false, true, false, false],
    ),
    entry(
        "write_file",
        None,
        "Create a file",
        [false, false, false, false],
    ),
    entry(
        "run_shell",
        Some("run_shell"),
        "Run a command in the sandbox",
        [false, true, false, false],
    ),
    entry(
        "git",
        Some("git"),
        "Read the workspace's git state",
        [true, false, true, false],
    ),
    entry(
        "verify",
        None,
        "Verify the workspace",
        [false, false, false, false],
    ),
    entry(
        "export",
        None,
        "Export the patch and its receipt",
        [true, false, true, false],
    ),
    entry(
        "close",
        None,
        "Close the workspace",
        [false, true, true, false],
    ),
    entry(
        "run",
        None,
        "A whole minicoder run on a task",
        [false, false, false, true],
    ),
];

pub(super) fn find(name: &str) -> Option<&'static Entry> {
    ENTRIES.iter().find(|e| e.name == name)
}

/// The tool definitions as listed to clients.
pub(super) fn tools() -> Vec<Tool> {
    let specs = crate::tools::specs::specs();
    ENTRIES
        .iter()
        .map(|e| {
            let (description, input) = match e.agent_tool {
                Some(agent) => {
                    let spec = specs.iter().find(|s| s.name == agent);
                    let description = spec.map(|s| s.description.clone()).unwrap_or_default();
                    let params = spec.map(|s| s.parameters.clone()).unwrap_or(json!({}));
                    (
                        format!("In an open workspace (sandboxed private copy of the repository): {description}"),
                        with_workspace(params),
                    )
                }
                None => own(e.name),
            };
            let annotations = ToolAnnotations::with_title(e.title)
                .read_only(e.read_only)
                .destructive(e.destructive)
                .idempotent(e.idempotent)
                .open_world(e.open_world);
            Tool::new(e.name, description, object(input))
                .with_title(e.title)
                .with_raw_output_schema(object(output_schema(e.name)))
                .with_annotations(annotations)
        })
        .collect()
}

fn object(value: Value) -> Arc<JsonObject> {
    Arc::new(match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    })
}

/// An agent tool's schema with the `workspace` field added and required.
fn with_workspace(mut params: Value) -> Value {
    if let Some(props) = params.get_mut("properties").and_then(Value::as_object_mut) {
        props.insert("workspace".into(), workspace_field());
    }
    let required = params
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut all = vec![json!("workspace")];
    all.extend(required);
    params["required"] = Value::Array(all);
    params
}

fn workspace_field() -> Value {
    json!({"type": "string", "description": "The id open_workspace returned."})
}

fn checks_field() -> Value {
    json!({
        "type": "array",
        "description": "The verification checks, frozen at the start (default: the repository's .minicoder.json, else detected).",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "command": {"type": "string"}
            },
            "required": ["name", "command"],
            "additionalProperties": false
        }
    })
}

/// Descriptions and input schemas of the tools minicoder adds.
fn own(name: &str) -> (String, Value) {
    let ws_only = || {
        json!({
            "type": "object",
            "properties": {"workspace": workspace_field()},
            "required": ["workspace"],
            "additionalProperties": false
        })
    };
    let (description, input) = match name {
        "open_workspace" => (
            "Open a sandboxed workspace on a local Git repository: a private copy (the repository itself is never changed), a command container without network unless asked, the verification checks frozen. Returns the workspace id the other tools take.",
            json!({
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "Absolute path of the repository (or a path inside it)."},
                    "checks": checks_field(),
                    "network": {"type": "boolean", "description": "Give commands the network.", "default": false}
                },
                "required": ["repo"],
                "additionalProperties": false
            }),
        ),
        "write_file" => (
            "Create a new file in an open workspace with the given text (use edit_file to change an existing one).",
            json!({
                "type": "object",
                "properties": {
                    "workspace": workspace_field(),
                    "path": {"type": "string", "description": "File to create, relative to the workspace root."},
                    "content": {"type": "string", "description": "The file's whole text."}
                },
                "required": ["workspace", "path", "content"],
                "additionalProperties": false
            }),
        ),
        "verify" => (
            "Run the independent verifier on the workspace: each frozen check in a fresh container, bound to the workspace's fingerprint. A pass ends the workspace's run with its patch and receipt (see export); a failure leaves it open for more work.",
            json!({
                "type": "object",
                "properties": {
                    "workspace": workspace_field(),
                    "summary": {"type": "string", "description": "What was changed and why (it becomes the run's summary)."}
                },
                "required": ["workspace"],
                "additionalProperties": false
            }),
        ),
        "export" => (
            "The patch of a workspace whose run ended (verified, or closed) and its signed receipt; `minicoder apply RUN_ID` applies it to the repository.",
            ws_only(),
        ),
        "close" => (
            "Close a workspace: a command in progress is stopped, the containers are removed, the partial patch is kept with the run's artifacts.",
            ws_only(),
        ),
        _ => (
            "A whole minicoder run: the configured model works on the task in the sandbox until the independent verifier agrees, or a budget ends it. Progress arrives as notifications; the result is the run's JSON report. Cancelling the call cancels the run.",
            json!({
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "Absolute path of the repository (or a path inside it)."},
                    "task": {"type": "string", "description": "What to do."},
                    "checks": checks_field(),
                    "model": {"type": "string", "description": "PROVIDER or PROVIDER:MODEL (default: the configured chain)."},
                    "max_turns": {"type": "integer", "minimum": 1, "maximum": 1000},
                    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 86400}
                },
                "required": ["repo", "task"],
                "additionalProperties": false
            }),
        ),
    };
    (description.to_string(), input)
}

/// The structured output of each tool.
fn output_schema(name: &str) -> Value {
    let string = json!({"type": "string"});
    let props = match name {
        "open_workspace" => json!({
            "workspace": string, "run_id": string, "repo": string,
            "fingerprint": string, "checks": {"type": "array", "items": string}
        }),
        "verify" => json!({
            "workspace": string, "run_id": string, "verified": {"type": "boolean"},
            "ended": {"type": "boolean"}, "fingerprint": {"type": ["string", "null"]},
            "checks": {"type": "array", "items": {"type": "object"}}, "message": string
        }),
        "export" => json!({
            "workspace": string, "run_id": string, "outcome": string,
            "verified": {"type": "boolean"}, "changed_files": {"type": "array", "items": string},
            "patch": {"type": ["string", "null"]}, "patch_path": string,
            "patch_bytes": {"type": "integer"}, "receipt": {"type": ["object", "null"]},
            "artifact_dir": string
        }),
        "close" => json!({
            "workspace": string, "run_id": string, "outcome": string, "patch_path": string
        }),
        "run" => json!({
            "run_id": {"type": ["string", "null"]}, "outcome": string, "reason": string,
            "exit_code": {"type": "integer"}
        }),
        _ => json!({"workspace": string, "output": string}),
    };
    let required: Vec<&str> = match name {
        "run" => vec!["outcome"],
        "open_workspace" | "verify" | "export" | "close" => vec!["workspace", "run_id"],
        _ => vec!["workspace", "output"],
    };
    json!({"type": "object", "properties": props, "required": required})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_for_input_and_output_and_annotations() {
        let tools = tools();
        assert_eq!(tools.len(), ENTRIES.len());
        for tool in &tools {
            assert_eq!(
                tool.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                tool.name
            );
            let output = tool.output_schema.as_ref().expect("output schema");
            assert_eq!(output.get("type"), Some(&json!("object")), "{}", tool.name);
            assert!(tool.annotations.is_some(), "{}", tool.name);
            assert!(
                !tool.description.as_deref().unwrap_or("").is_empty(),
                "{}",
                tool.name
            );
        }
    }

    #[test]
    fn forwarded_tools_take_the_agents_schema_and_require_a_workspace() {
        let tools = tools();
        let read = tools.iter().find(|t| t.name == "read_file").unwrap();
        let required = read.input_schema.get("required").unwrap();
        assert_eq!(required, &json!(["workspace", "path"]));
        let props = read.input_schema.get("properties").unwrap();
        assert!(props.get("start_line").is_some());
        let symbols = find("symbols").unwrap();
        assert_eq!(symbols.agent_tool, Some("tree_sitter_symbols"));
    }

    #[test]
    fn only_reading_tools_say_they_are_read_only() {
        for e in &ENTRIES {
            let reads = matches!(
                e.name,
                "list_tree" | "read_file" | "ripgrep" | "symbols" | "git" | "export"
            );
            assert_eq!(e.read_only, reads, "{}", e.name);
            if e.read_only {
                assert!(!e.destructive, "{}", e.name);
            }
        }
        assert!(find("run_shell").unwrap().destructive);
        assert!(find("run").unwrap().open_world);
    }
}
