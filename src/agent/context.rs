//! What the model sees, in order: the runtime contract, the task, the
//! project instructions, the discoveries compaction made of older actions,
//! the recent conversation, and the run state (see `run_state`). Only the
//! conversation is ever compacted (see `compaction`), at 75 % of the
//! context budget.

pub use super::compaction::Discoveries;
use crate::model::types::{ChatMessage, estimate_tokens};

/// Share of the context budget at which older actions are compacted.
pub(crate) const COMPACT_AT: f64 = 0.75;
/// Share at which the run stops if compaction cannot bring it below.
pub(crate) const STOP_AT: f64 = 0.90;
/// Share compaction brings the request down to when it can, so that it
/// does not run again at the next turn.
pub(crate) const COMPACT_TO: f64 = 0.50;
/// Messages at the end of the history that compaction leaves whole while
/// summarising older results is enough.
pub(crate) const KEEP_RECENT: usize = 8;

pub(crate) fn system_prompt(checks: &[String]) -> String {
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

pub(crate) fn task_message(task: &str) -> String {
    format!("Task:\n{task}")
}

/// Characters a message adds beyond its text (role, ids, separators), so the
/// estimate stays above what the wire carries.
pub(crate) const MESSAGE_OVERHEAD: usize = 16;

/// The conversation after the fixed prefix (system prompt, task and project
/// instructions), and the discoveries compaction made of its older part.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Context {
    pub history: Vec<ChatMessage>,
    /// Compacted actions, oldest first.
    #[serde(default)]
    pub discoveries: Discoveries,
}

impl Context {
    /// Answers every tool call of the history that has no result yet with
    /// `text`, so that the conversation is whole again (a provider refuses
    /// a call without its result).
    pub(crate) fn close_open_calls(&mut self, text: &str) {
        let answered: std::collections::HashSet<String> = self
            .history
            .iter()
            .filter_map(|m| m.tool_call_id.clone())
            .collect();
        let mut i = 0;
        while i < self.history.len() {
            let open: Vec<String> = self.history[i]
                .tool_calls
                .iter()
                .filter(|c| !answered.contains(&c.id))
                .map(|c| c.id.clone())
                .collect();
            i += 1;
            // Results follow their call, before anything else.
            let mut at = i;
            while at < self.history.len() && self.history[at].tool_call_id.is_some() {
                at += 1;
            }
            for id in open {
                self.history
                    .insert(at, crate::model::types::ChatMessage::tool_result(id, text));
                at += 1;
            }
        }
    }
}

/// What one compaction did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Compaction {
    pub before_tokens: u64,
    pub after_tokens: u64,
    pub messages_compacted: usize,
}

impl Context {
    /// Characters of the history and the discoveries, as the estimate counts them.
    pub fn chars(&self) -> usize {
        self.history.iter().map(message_chars).sum::<usize>() + self.discoveries.chars()
    }

    /// Estimated tokens of the whole request with `fixed_chars` of prefix and tools.
    pub fn estimate(&self, fixed_chars: usize) -> u64 {
        estimate_tokens(self.chars() + fixed_chars)
    }

    /// The messages of a request: the prefix (system prompt, task and any
    /// further fixed messages), the discoveries, the history, and `last`
    /// (the run state) at the end.
    pub fn messages(
        &self,
        prefix: impl IntoIterator<Item = ChatMessage>,
        last: Option<ChatMessage>,
    ) -> Vec<ChatMessage> {
        let mut out = Vec::with_capacity(self.history.len() + 5);
        out.extend(prefix);
        if let Some(summary) = self.discoveries.render() {
            out.push(ChatMessage::user(summary));
        }
        out.extend(self.history.iter().cloned());
        out.extend(last);
        out
    }
}

/// Characters one message adds to a request.
pub(crate) fn message_chars(m: &ChatMessage) -> usize {
    m.char_len() + MESSAGE_OVERHEAD * (1 + m.tool_calls.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_names_the_checks() {
        let p = system_prompt(&["tests: python3 -m pytest -q".into()]);
        assert!(p.contains("python3 -m pytest -q"));
        assert!(p.contains("request_completion"));
    }

    #[test]
    fn a_request_is_prefix_discoveries_history_then_the_last_message() {
        let mut ctx = Context::default();
        ctx.history.push(ChatMessage::user("h"));
        let msgs = ctx.messages(
            [ChatMessage::system("sys"), ChatMessage::user("task")],
            Some(ChatMessage::user("state")),
        );
        let texts: Vec<_> = msgs.iter().filter_map(|m| m.content.as_deref()).collect();
        assert_eq!(texts, ["sys", "task", "h", "state"]);
        assert_eq!(
            ctx.chars(),
            1 + MESSAGE_OVERHEAD,
            "each message counts its overhead"
        );
    }
}
