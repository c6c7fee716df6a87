//! What the model sees: the runtime contract, the task, and the history of
//! the run, compacted into a structured summary when it grows past 75 % of the
//! context budget.

use crate::model::types::{ChatMessage, Role, estimate_tokens};

/// Share of the context budget at which older actions are compacted.
pub const COMPACT_AT: f64 = 0.75;
/// Share at which the run stops if compaction cannot bring it below.
pub const STOP_AT: f64 = 0.90;
/// Messages at the end of the history that are never compacted.
pub const KEEP_RECENT: usize = 8;
/// Characters of a compacted tool result kept in its place.
const COMPACTED_KEEP: usize = 240;

pub fn system_prompt(checks: &[String]) -> String {
    let checks = if checks.is_empty() {
        "(none configured)".to_string()
    } else {
        checks.join("; ")
    };
    format!(
        "You are minicoder, an autonomous coding agent working in a private copy of a Git repository \
(at /workspace inside the sandbox). The source repository is never changed by you; your changes become a \
patch that a person applies.\n\
\n\
How to work: PLAN → ACT → OBSERVE → UPDATE the plan → repeat. Call tools in every turn.\n\
- update_plan replaces the whole plan: items {{id, content, status: pending|in_progress|done, notes?}}, unique \
ids, at most one in_progress. A plan is required before edit_file or run_shell.\n\
- Read before you edit: list_tree, read_file (numbered lines), ripgrep, tree_sitter_symbols, git \
(status/diff/log/show).\n\
- edit_file takes a unified diff of ONE file with correct context lines (`--- a/PATH`, `+++ b/PATH`, \
`@@ -l,n +l,n @@`); `--- /dev/null` creates a file. All hunks apply or none do.\n\
- run_shell runs `/bin/sh -c` in a container: no network, 60 s per command by default, nothing survives \
between commands except files in the workspace.\n\
- When every plan item is done, call request_completion with a summary. An independent verifier then runs \
the project's checks: {checks}. Only the verifier decides success; if it fails you get its output and can \
repair.\n\
Paths are relative to the workspace root; `..`, absolute paths and symlinks leading outside are refused."
    )
}

pub fn task_message(task: &str) -> String {
    format!("Task:\n{task}")
}

/// The conversation after the fixed prefix (system prompt and task).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Context {
    pub history: Vec<ChatMessage>,
    /// One line per compacted action, oldest first.
    pub discoveries: Vec<String>,
}

/// What one compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compaction {
    pub before_tokens: u64,
    pub after_tokens: u64,
    pub messages_compacted: usize,
}

impl Context {
    /// Estimated tokens of the whole request with `fixed_chars` of prefix and tools.
    pub fn estimate(&self, fixed_chars: usize) -> u64 {
        let chars: usize = self
            .history
            .iter()
            .map(ChatMessage::char_len)
            .sum::<usize>()
            + self.discoveries.iter().map(String::len).sum::<usize>()
            + fixed_chars;
        estimate_tokens(chars)
    }

    /// The messages of a request: prefix, a summary of compacted work, history.
    pub fn messages(&self, system: &str, task: &str) -> Vec<ChatMessage> {
        let mut out = Vec::with_capacity(self.history.len() + 3);
        out.push(ChatMessage::system(system));
        out.push(ChatMessage::user(task));
        if !self.discoveries.is_empty() {
            out.push(ChatMessage::user(format!(
                "Summary of earlier actions (compacted to save context; re-read files if you need details):\n- {}",
                self.discoveries.join("\n- ")
            )));
        }
        out.extend(self.history.iter().cloned());
        out
    }

    /// Shrinks the content of tool results older than the last
    /// [`KEEP_RECENT`] messages, recording each as a discovery line. The
    /// call/result structure stays intact, so the history remains valid.
    pub fn compact(&mut self, fixed_chars: usize) -> Option<Compaction> {
        let before = self.estimate(fixed_chars);
        let cut = self.history.len().saturating_sub(KEEP_RECENT);
        let mut names = std::collections::HashMap::new();
        let mut compacted = 0;
        for msg in &mut self.history[..cut] {
            for call in &msg.tool_calls {
                names.insert(call.id.clone(), (call.name.clone(), call.arguments.clone()));
            }
            let done = msg
                .content
                .as_deref()
                .is_some_and(|c| c.starts_with("[compacted]"));
            if msg.role != Role::Tool || done {
                continue;
            }
            let Some(content) = msg.content.take() else {
                continue;
            };
            let (name, args) = msg
                .tool_call_id
                .as_ref()
                .and_then(|id| names.get(id))
                .cloned()
                .unwrap_or_default();
            let head: String = content.chars().take(COMPACTED_KEEP).collect();
            let first_line = head.lines().next().unwrap_or("").to_string();
            self.discoveries.push(format!(
                "{name} {} → {} ({} chars)",
                shorten(&args, 120),
                shorten(&first_line, 160),
                content.len()
            ));
            msg.content = Some(format!("[compacted] {}", shorten(&head, COMPACTED_KEEP)));
            compacted += 1;
        }
        (compacted > 0).then(|| Compaction {
            before_tokens: before,
            after_tokens: self.estimate(fixed_chars),
            messages_compacted: compacted,
        })
    }
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::types::ToolCall;

    fn call(i: usize) -> [ChatMessage; 2] {
        let id = format!("call_{i}");
        [
            ChatMessage::assistant(
                None,
                vec![ToolCall {
                    id: id.clone(),
                    name: "read_file".into(),
                    arguments: format!(r#"{{"path":"f{i}.py"}}"#),
                    ..ToolCall::default()
                }],
            ),
            ChatMessage::tool_result(id, "x".repeat(4000)),
        ]
    }

    #[test]
    fn compaction_shrinks_old_results_and_keeps_the_structure() {
        let mut ctx = Context::default();
        for i in 0..10 {
            ctx.history.extend(call(i));
        }
        let before_len = ctx.history.len();
        let c = ctx.compact(1000).expect("compacted");
        assert_eq!(ctx.history.len(), before_len, "no message is dropped");
        assert!(c.after_tokens < c.before_tokens / 2, "{c:?}");
        assert_eq!(
            c.messages_compacted, 6,
            "the last 8 messages (4 calls) stay whole"
        );
        assert_eq!(ctx.discoveries.len(), 6);
        assert!(
            ctx.discoveries[0].starts_with("read_file {\"path\":\"f0.py\"}"),
            "{}",
            ctx.discoveries[0]
        );
        let last = ctx
            .history
            .last()
            .and_then(|m| m.content.clone())
            .unwrap_or_default();
        assert_eq!(last.len(), 4000, "recent results are intact");
        assert!(ctx.compact(1000).is_none(), "nothing left to compact");
        let msgs = ctx.messages("sys", "task");
        assert!(
            msgs[2]
                .content
                .as_deref()
                .unwrap_or("")
                .contains("Summary of earlier actions")
        );
    }

    #[test]
    fn the_contract_names_the_checks() {
        let p = system_prompt(&["tests: python3 -m pytest -q".into()]);
        assert!(p.contains("python3 -m pytest -q"));
        assert!(p.contains("request_completion"));
    }
}
