//! Policy gates: what the agent may do when. A refusal is a tool
//! result that says what was wrong and how to proceed; it never ends the run.

use super::plan::Plan;
use crate::tools::ToolName;

/// The names of the ten tools, for messages.
fn tool_names() -> String {
    ToolName::ALL.map(ToolName::as_str).join(", ")
}

/// Tools that change the workspace or run code: a plan is required first,
/// and a checkpoint is taken before each.
fn needs_plan(tool: &str) -> bool {
    ToolName::from_name(tool).is_some_and(ToolName::mutates_workspace)
}

/// Why a call is refused before it runs, if it is. `external` says the
/// name is an offered tool of one of the person's MCP servers.
pub fn refusal(tool: &str, arguments: &str, plan: &Plan, external: bool) -> Option<String> {
    if ToolName::from_name(tool).is_none() && !external {
        return Some(format!(
            "unknown tool {tool:?}. The tools are: {}. Call one of them.",
            tool_names()
        ));
    }
    if let Err(e) = serde_json::from_str::<serde_json::Value>(arguments)
        .map_err(|e| e.to_string())
        .and_then(|v| {
            if v.is_object() {
                Ok(())
            } else {
                Err("they are not a JSON object".to_string())
            }
        })
    {
        return Some(format!(
            "the arguments of {tool} are not valid JSON ({e}). Send a JSON object, for example {}.",
            example_arguments(tool)
        ));
    }
    if needs_plan(tool) && plan.is_empty() {
        return Some(format!(
            "a plan is required before {tool}. Call update_plan first with the steps you will take \
             (one item in_progress), then retry."
        ));
    }
    if tool == "request_completion" {
        if plan.is_empty() {
            return Some(
                "there is no plan. Call update_plan with your steps, mark each done as you finish it, \
                 then call request_completion."
                    .to_string(),
            );
        }
        let open: Vec<String> = plan
            .unfinished()
            .iter()
            .map(|i| format!("{} ({:?})", i.id, i.status))
            .collect();
        if !open.is_empty() {
            return Some(format!(
                "every plan item must be done before request_completion; these are not: {}. \
                 Finish them (or update the plan), then call request_completion again.",
                open.join(", ")
            ));
        }
    }
    None
}

fn example_arguments(tool: &str) -> &'static str {
    match tool {
        "list_tree" => r#"{"path": ".", "max_depth": 3}"#,
        "read_file" => r#"{"path": "src/main.py", "start_line": 1, "end_line": 80}"#,
        "ripgrep" => r#"{"pattern": "def main", "path": "."}"#,
        "tree_sitter_symbols" => r#"{"path": "src/main.rs"}"#,
        "edit_file" => {
            r#"{"path": "a.py", "patch": "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-old\n+new\n"}"#
        }
        "run_shell" => r#"{"command": "python3 -m pytest -q"}"#,
        "git" => r#"{"subcommand": "diff"}"#,
        "read_output" => r#"{"id": "0004-call_2.stdout", "offset": 524288}"#,
        "update_plan" => {
            r#"{"items": [{"id": "1", "content": "reproduce the bug", "status": "in_progress"}]}"#
        }
        t if t.starts_with("mcp__") => {
            r#"{"name": "value"} with the parameters the tool's schema names"#
        }
        _ => r#"{"summary": "what was done and how it was checked"}"#,
    }
}

/// The correction sent when a reply calls no tool.
pub(crate) const NO_TOOL_CORRECTION: &str = "Your reply called no tool. Every turn must call at least one \
tool: explore with list_tree/read_file/ripgrep, keep the plan current with update_plan, change files with \
edit_file, run commands with run_shell, and call request_completion when every plan item is done. \
Only the verifier can decide success.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{PlanItem, PlanStatus};

    fn plan(statuses: &[PlanStatus]) -> Plan {
        Plan {
            items: statuses
                .iter()
                .enumerate()
                .map(|(i, s)| PlanItem {
                    id: i.to_string(),
                    content: "x".into(),
                    status: *s,
                    notes: None,
                })
                .collect(),
        }
    }

    #[test]
    fn edits_and_commands_need_a_plan() {
        let empty = Plan::default();
        let r = refusal("edit_file", "{}", &empty, false).expect("refused");
        assert!(r.contains("plan is required"), "{r}");
        assert!(refusal("run_shell", "{}", &empty, false).is_some());
        assert!(refusal("read_file", r#"{"path":"a"}"#, &empty, false).is_none());
        assert!(refusal("edit_file", "{}", &plan(&[PlanStatus::InProgress]), false).is_none());
    }

    #[test]
    fn completion_needs_every_item_done() {
        let r = refusal(
            "request_completion",
            "{}",
            &plan(&[PlanStatus::Done, PlanStatus::Pending]),
            false,
        )
        .expect("refused");
        assert!(r.contains("1 (Pending)"), "{r}");
        assert!(
            refusal(
                "request_completion",
                "{}",
                &plan(&[PlanStatus::Done]),
                false
            )
            .is_none()
        );
        assert!(refusal("request_completion", "{}", &Plan::default(), false).is_some());
    }

    #[test]
    fn unknown_tools_and_broken_json_are_refused_with_guidance() {
        let r = refusal("delete_everything", "{}", &Plan::default(), false).expect("refused");
        assert!(r.contains("unknown tool") && r.contains("read_file"), "{r}");
        let r = refusal("read_file", r#"{"path": "a"#, &Plan::default(), false).expect("refused");
        assert!(
            r.contains("not valid JSON") && r.contains("start_line"),
            "{r}"
        );
        assert!(refusal("read_file", "[1]", &Plan::default(), false).is_some());
    }

    #[test]
    fn an_offered_mcp_tool_is_known_and_still_needs_a_json_object() {
        let name = "mcp__notes__lookup";
        assert!(refusal(name, "{}", &Plan::default(), false).is_some());
        assert!(refusal(name, r#"{"topic": "x"}"#, &Plan::default(), true).is_none());
        assert!(refusal(name, "[]", &Plan::default(), true).is_some());
    }
}
