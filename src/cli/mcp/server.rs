//! The MCP handler: lists the catalog and performs each call.

use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use super::catalog;
use super::workspace::{Workspaces, watch};
use crate::model::{ActionSource, ModelChain};
use crate::protocol::Command;
use crate::runtime::{self, RunChannels, RunOptions};
use crate::trace::redact::shown;

/// The server's state, shared by every connection (a workspace id is the
/// capability that reaches a workspace).
#[derive(Clone, Default)]
pub(super) struct Server {
    pub(super) workspaces: Arc<Workspaces>,
}

const INSTRUCTIONS: &str = "minicoder's sandbox and verifier. open_workspace gives a private copy of a local repository with a command container; list_tree, read_file, ripgrep, symbols, edit_file, write_file, run_shell and git work on it; verify runs the independent checks, and a pass ends the workspace with a patch and a signed receipt (export); close ends it. The repository itself is never changed: `minicoder apply RUN_ID` does that, for the person. `run` does a whole task with minicoder's own model.";

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("minicoder", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(catalog::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(entry) = catalog::find(&request.name) else {
            return Err(ErrorData::invalid_params(
                format!("no tool {:?}", request.name),
                None,
            ));
        };
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let result = match entry.name {
            "open_workspace" => self.open(&args, &context).await.map_err(error),
            "verify" => self.verify(&args).await.map_err(error),
            "export" => self.export(&args).await.map_err(error),
            "close" => self.close(&args).await.map_err(error),
            "write_file" => {
                self.forward(&args, "edit_file", &context, write_file_args)
                    .await
            }
            "run" => self.run(&args, &context).await.map_err(error),
            _ => {
                let agent = entry.agent_tool.unwrap_or(entry.name);
                self.forward(&args, agent, &context, |a| Ok(a.clone()))
                    .await
            }
        };
        Ok(match result {
            Ok(value) => CallToolResult::structured(value),
            Err(value) => CallToolResult::structured_error(value),
        }
        .into())
    }
}

/// A failure as structured content.
fn error(message: String) -> Value {
    json!({ "error": shown(&message) })
}

fn text<'a>(args: &'a Value, field: &str) -> Result<&'a str, String> {
    args.get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{field} is required (a string)"))
}

/// `write_file` as the agent's edit_file with a patch that creates the file:
/// the same checks (paths, configuration, credentials) apply.
fn write_file_args(args: &Value) -> Result<Value, String> {
    let path = text(args, "path")?;
    let content = text(args, "content")?;
    Ok(json!({"path": path, "patch": creation_patch(path, content)}))
}

fn creation_patch(path: &str, content: &str) -> String {
    let lines: Vec<&str> = content.split_inclusive('\n').collect();
    let mut patch = format!(
        "--- /dev/null\n+++ b/{path}\n@@ -0,0 +1,{} @@\n",
        lines.len()
    );
    for line in &lines {
        patch.push('+');
        patch.push_str(line);
    }
    if !content.is_empty() && !content.ends_with('\n') {
        patch.push_str("\n\\ No newline at end of file\n");
    }
    patch
}

/// The repository and checks a call names, as run options.
fn run_options(args: &Value, task: &str) -> Result<RunOptions, String> {
    let repo = crate::cli::options::repository(std::path::Path::new(text(args, "repo")?))?;
    let env: HashMap<String, String> = std::env::vars().collect();
    let mut opts = crate::cli::options::base_options(&repo, task, &env)?;
    if let Some(checks) = args.get("checks").and_then(Value::as_array) {
        for check in checks {
            let name = text(check, "name")?;
            let command = text(check, "command")?;
            opts.checks.push((name.to_string(), command.to_string()));
        }
    }
    opts.network = args.get("network").and_then(Value::as_bool) == Some(true);
    Ok(opts)
}

/// The sandbox image is there (built if need be) and leftovers of dead runs
/// are gone, as before any run.
async fn ready(repo: &std::path::Path) -> Result<(), String> {
    crate::cli::sandbox::ready_for_run(repo, None)
        .await
        .map_err(|e| format!("{e:#}"))
}

impl Server {
    async fn open(
        &self,
        args: &Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, String> {
        let opts = run_options(args, "Work on the repository as an MCP client directs")?;
        ready(&opts.repo).await?;
        let repo = opts.repo.display().to_string();
        let checks: Vec<String> = opts.checks.iter().map(|(n, _)| n.clone()).collect();
        // (Set-up is not stopped half-way: the opened workspace is closed
        // instead, so nothing is left behind.)
        let workspace = self.workspaces.open(opts, &context.ct).await?;
        Ok(json!({
            "workspace": workspace.id,
            "run_id": workspace.run_id(),
            "repo": repo,
            "checks": checks,
        }))
    }

    async fn forward(
        &self,
        args: &Value,
        agent_tool: &str,
        context: &RequestContext<RoleServer>,
        shape: impl Fn(&Value) -> Result<Value, String>,
    ) -> Result<Value, Value> {
        let workspace = text(args, "workspace")
            .and_then(|id| self.workspaces.get(id))
            .map_err(error)?;
        let mut call = shape(args).map_err(error)?;
        if let Some(map) = call.as_object_mut() {
            map.remove("workspace");
        }
        let cancelled = context.ct.clone();
        let arguments = call.to_string();
        let (output, failed) = tokio::select! {
            output = workspace.call(agent_tool, &arguments) => output.map_err(error)?,
            () = cancelled.cancelled() => {
                // The command stops with the run, its containers go.
                workspace.cancel();
                let _ = workspace.close().await;
                self.workspaces.remove(&workspace.id);
                return Err(error("cancelled: the workspace was closed".to_string()));
            }
        };
        let result = json!({"workspace": workspace.id, "output": output});
        if failed {
            // The tool's own answer, marked as the error it is.
            return Err(result);
        }
        Ok(result)
    }

    async fn verify(&self, args: &Value) -> Result<Value, String> {
        let workspace = self.workspaces.get(text(args, "workspace")?)?;
        let summary = args
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("Changes made through minicoder's MCP server.");
        Ok(workspace.verify(summary).await)
    }

    async fn export(&self, args: &Value) -> Result<Value, String> {
        let workspace = self.workspaces.get(text(args, "workspace")?)?;
        workspace.export().await
    }

    async fn close(&self, args: &Value) -> Result<Value, String> {
        let id = text(args, "workspace")?;
        let workspace = self.workspaces.get(id)?;
        let report = workspace.close().await;
        self.workspaces.remove(id);
        let report = report?;
        Ok(json!({
            "workspace": workspace.id,
            "run_id": report.run_id,
            "outcome": report.outcome,
            "patch_path": report.patch,
        }))
    }

    /// A whole run with the configured model; progress as notifications.
    async fn run(
        &self,
        args: &Value,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, String> {
        let task = text(args, "task")?;
        let mut opts = run_options(args, task)?;
        if let Some(n) = args.get("max_turns").and_then(Value::as_u64) {
            opts.limits.max_turns = u32::try_from(n.clamp(1, 1000)).unwrap_or(1000);
        }
        if let Some(s) = args.get("timeout_s").and_then(Value::as_u64) {
            opts.limits.timeout_ms = s.clamp(1, 86_400) * 1000;
        }
        let vars: HashMap<String, String> = std::env::vars().collect();
        let selection = crate::cli::options::model_selection(
            args.get("model").and_then(Value::as_str),
            false,
            &vars,
        )?;
        let env = crate::model::Env::from_pairs(vars);
        let source: Box<dyn ActionSource> =
            Box::new(ModelChain::from_env(&env, &selection).map_err(|e| e.to_string())?);
        source.preflight().await?;
        ready(&opts.repo).await?;
        let (channels, commands, events) = RunChannels::pair();
        let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
        let watcher = tokio::spawn(watch(events, progress_tx));
        let mut run = tokio::spawn(runtime::run(opts, source, channels));
        // A cancelled call cancels the run, whatever happens to this future.
        let cancelled = context.ct.clone();
        let cancel_commands = commands.clone();
        let canceller = tokio::spawn(async move {
            cancelled.cancelled().await;
            let _ = cancel_commands.send(Command::Cancel);
        });
        let token = context.meta.get_progress_token();
        let mut step = 0u32;
        let result = loop {
            tokio::select! {
                done = &mut run => break done,
                Some(line) = progress_rx.recv() => {
                    step += 1;
                    if let Some(token) = &token {
                        let mut note = ProgressNotificationParam::new(token.clone(), f64::from(step));
                        note.message = Some(line);
                        let _ = context.peer.notify_progress(note).await;
                    }
                }
            }
        };
        canceller.abort();
        let _ = watcher.await;
        drop(commands);
        match result {
            Ok(Ok(report)) => serde_json::to_value(&report).map_err(|e| e.to_string()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the run stopped: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_file_is_one_hunk_of_added_lines() {
        assert_eq!(
            creation_patch("a/b.txt", "one\ntwo\n"),
            "--- /dev/null\n+++ b/a/b.txt\n@@ -0,0 +1,2 @@\n+one\n+two\n"
        );
        assert_eq!(
            creation_patch("x", "last"),
            "--- /dev/null\n+++ b/x\n@@ -0,0 +1,1 @@\n+last\n\\ No newline at end of file\n"
        );
    }

    #[test]
    fn write_file_needs_a_path_and_content() {
        assert!(write_file_args(&json!({"path": "a"})).is_err());
        let args = write_file_args(&json!({"path": "a", "content": "x\n"})).unwrap();
        assert_eq!(args["path"], "a");
        assert!(args["patch"].as_str().unwrap().starts_with("--- /dev/null"));
    }
}
