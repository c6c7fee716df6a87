//! Ask mode: questions about a repository answered from a private copy with
//! read-only tools — no command container, no edits, no verifier. A pure
//! reducer like the agent's: the driver feeds it inputs and performs the
//! effects it returns.
//!
//! Decisions: only `list_tree`, `read_file`, `ripgrep`, `tree_sitter_symbols`
//! and `git` (log, show, diff, status) are offered, and a call to anything
//! else is answered "read-only" without ever being run; a reply without a
//! tool call is the answer; a question may take at most `max_turns`
//! replies; later questions continue the same conversation.

use serde::{Deserialize, Serialize};

use crate::model::types::{ChatMessage, ModelReply, ModelRequest, ToolCall, ToolSpec};
use crate::tools::ToolName;

/// The tools ask mode offers.
pub const READ_ONLY: [ToolName; 5] = [
    ToolName::ListTree,
    ToolName::ReadFile,
    ToolName::Ripgrep,
    ToolName::TreeSitterSymbols,
    ToolName::Git,
];

/// The most tool calls run from one reply; the rest are answered "not
/// run" (a hostile reply of thousands would otherwise be run one by one).
pub const MAX_CALLS_PER_REPLY: usize = 16;

/// The contract of ask mode, sent first.
pub(crate) const SYSTEM: &str = "You answer a person's questions about the Git repository in your workspace. \
You can only look: list_tree, read_file, ripgrep, tree_sitter_symbols and git (log, show, diff, status). \
You cannot run commands or change files, and you do not propose patches unless asked. \
Look before you answer; do not guess. When you have the answer, reply with text and no tool call. \
Cite the lines your answer rests on as path:line (for example src/main.rs:42), paths relative to the repository root. \
Be brief and concrete.";

/// What a question may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskConfig {
    /// Replies the model may send for one question.
    pub max_turns: u32,
    /// Tokens (input and output) the whole conversation may use.
    pub max_tokens: u64,
    /// What the whole conversation may cost, in millionths of a dollar
    /// (the person's `[limits] max_cost`), priced with `prices`.
    pub max_cost_micros: Option<u64>,
    pub prices: crate::protocol::PriceTable,
}

impl Default for AskConfig {
    fn default() -> Self {
        Self {
            max_turns: 25,
            max_tokens: 1_000_000,
            max_cost_micros: None,
            prices: crate::protocol::PriceTable::default(),
        }
    }
}

/// What happens next.
#[derive(Debug, Clone, PartialEq)]
pub enum AskEffect {
    CallModel(ModelRequest),
    /// A read-only tool to run on the private copy.
    RunTool(ToolCall),
    /// A call refused without running it: read-only mode.
    Refused {
        call: ToolCall,
        message: String,
    },
    /// The answer to the question.
    Answered {
        text: String,
    },
    /// The question ends without an answer.
    GaveUp {
        reason: String,
    },
}

/// What the driver reports.
#[derive(Debug, Clone, PartialEq)]
pub enum AskInput {
    Question(String),
    ModelReplied(ModelReply),
    ToolFinished { call_id: String, content: String },
    Failed { reason: String },
}

/// The conversation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AskAgent {
    config: AskConfig,
    history: Vec<ChatMessage>,
    /// Calls of the last reply still to run.
    pending: Vec<ToolCall>,
    turns_this_question: u32,
    pub tokens_used: u64,
    /// What the priced replies cost, in millionths of a dollar.
    pub cost_micros: u64,
    /// The first model that answered without a price.
    pub unpriced: Option<String>,
    /// What the current question's replies reported (and cost, when
    /// priced).
    pub question_tokens: crate::protocol::TokenTotals,
    /// The questions asked and the answers given, in order.
    pub exchanges: Vec<(String, Option<String>)>,
    /// Files the model read, in order, each once.
    pub files_read: Vec<String>,
}

impl AskAgent {
    pub fn new(config: AskConfig) -> Self {
        Self {
            config,
            history: vec![ChatMessage::system(SYSTEM)],
            pending: Vec::new(),
            turns_this_question: 0,
            tokens_used: 0,
            cost_micros: 0,
            unpriced: None,
            question_tokens: crate::protocol::TokenTotals::default(),
            exchanges: Vec::new(),
            files_read: Vec::new(),
        }
    }

    /// The tool specs offered.
    pub fn tools() -> Vec<ToolSpec> {
        crate::tools::specs()
            .into_iter()
            .filter(|s| READ_ONLY.iter().any(|t| t.as_str() == s.name))
            .collect()
    }

    pub fn handle(&mut self, input: AskInput) -> Vec<AskEffect> {
        match input {
            AskInput::Question(text) => {
                self.turns_this_question = 0;
                self.question_tokens = crate::protocol::TokenTotals::default();
                self.pending.clear();
                self.exchanges.push((text.clone(), None));
                self.history.push(ChatMessage::user(text));
                vec![self.request()]
            }
            AskInput::ModelReplied(reply) => self.on_reply(reply),
            AskInput::ToolFinished { call_id, content } => {
                self.history
                    .push(ChatMessage::tool_result(call_id.clone(), content));
                self.pending.retain(|c| c.id != call_id);
                self.next()
            }
            AskInput::Failed { reason } => vec![AskEffect::GaveUp { reason }],
        }
    }

    fn on_reply(&mut self, reply: ModelReply) -> Vec<AskEffect> {
        self.turns_this_question += 1;
        self.tokens_used = self
            .tokens_used
            .saturating_add(reply.usage.input)
            .saturating_add(reply.usage.output);
        let cost = self
            .config
            .prices
            .get(&reply.model)
            .map(|price| price.cost_micros(&reply.usage));
        self.question_tokens
            .add(&reply.usage, cost, self.turns_this_question == 1);
        match cost {
            Some(cost) => self.cost_micros = self.cost_micros.saturating_add(cost),
            None if self.unpriced.is_none() => {
                self.unpriced = Some(format!("{}:{}", reply.model.provider, reply.model.model));
            }
            None => {}
        }
        self.history.push(ChatMessage::from_reply(&reply));
        if reply.tool_calls.is_empty() {
            let text = reply.content.unwrap_or_default().trim().to_string();
            if text.is_empty() {
                return self.correct("Your reply was empty: answer the question with text, or look further with a tool.");
            }
            if let Some(last) = self.exchanges.last_mut() {
                last.1 = Some(text.clone());
            }
            return vec![AskEffect::Answered { text }];
        }
        let mut fx = Vec::new();
        for (i, call) in reply.tool_calls.into_iter().enumerate() {
            if i >= MAX_CALLS_PER_REPLY {
                let message = format!(
                    "not run: at most {MAX_CALLS_PER_REPLY} tool calls are run from one reply"
                );
                self.history
                    .push(ChatMessage::tool_result(call.id.clone(), message.clone()));
                fx.push(AskEffect::Refused { call, message });
                continue;
            }
            let read_only =
                ToolName::from_name(call.name.trim()).is_some_and(|name| READ_ONLY.contains(&name));
            if read_only {
                if call.name.trim() == ToolName::ReadFile.as_str()
                    && let Some(path) = serde_json::from_str::<serde_json::Value>(&call.arguments)
                        .ok()
                        .and_then(|v| v["path"].as_str().map(str::to_string))
                    && !self.files_read.contains(&path)
                    && self.files_read.len() < 200
                {
                    self.files_read.push(path);
                }
                self.pending.push(call);
            } else {
                let message = format!(
                    "{} is not available: ask mode is read-only (list_tree, read_file, ripgrep, tree_sitter_symbols, git). Answer from what you can read.",
                    crate::terminal_text::cut_to(call.name.trim(), 64)
                );
                self.history
                    .push(ChatMessage::tool_result(call.id.clone(), message.clone()));
                fx.push(AskEffect::Refused { call, message });
            }
        }
        fx.extend(self.next());
        fx
    }

    /// The next pending call, else the next request.
    fn next(&mut self) -> Vec<AskEffect> {
        match self.pending.first() {
            Some(call) => vec![AskEffect::RunTool(call.clone())],
            None => vec![self.request()],
        }
    }

    fn correct(&mut self, text: &str) -> Vec<AskEffect> {
        self.history.push(ChatMessage::user(text));
        vec![self.request()]
    }

    fn request(&mut self) -> AskEffect {
        if self.turns_this_question >= self.config.max_turns {
            return AskEffect::GaveUp {
                reason: format!(
                    "no answer after {} replies (ask a narrower question)",
                    self.config.max_turns
                ),
            };
        }
        if let Some(max) = self.config.max_cost_micros {
            if let Some(model) = &self.unpriced {
                return AskEffect::GaveUp {
                    reason: format!(
                        "{model} has no price in config.toml's [prices], so the cost budget ({}) cannot be kept",
                        crate::protocol::format_usd(max)
                    ),
                };
            }
            if self.cost_micros >= max {
                return AskEffect::GaveUp {
                    reason: format!(
                        "the cost budget is used up: {} of {}",
                        crate::protocol::format_usd(self.cost_micros),
                        crate::protocol::format_usd(max)
                    ),
                };
            }
        }
        if self.tokens_used >= self.config.max_tokens {
            return AskEffect::GaveUp {
                reason: format!(
                    "the conversation used its {} tokens",
                    self.config.max_tokens
                ),
            };
        }
        AskEffect::CallModel(ModelRequest {
            messages: self.history.clone(),
            tools: Self::tools(),
        })
    }

    /// What the conversation learnt, for a run that goes on from it: each
    /// question and its answer, and the files read — bounded.
    pub fn learnt(&self) -> String {
        let mut out =
            String::from("What was learnt about the repository before this task, in ask mode:\n");
        for (question, answer) in &self.exchanges {
            out.push_str(&format!(
                "- Q: {}\n  A: {}\n",
                crate::terminal_text::cut_to(question, 500),
                crate::terminal_text::cut_to(answer.as_deref().unwrap_or("(no answer)"), 2_000)
            ));
        }
        if !self.files_read.is_empty() {
            let files: Vec<&str> = self
                .files_read
                .iter()
                .take(50)
                .map(String::as_str)
                .collect();
            out.push_str(&format!("Files read: {}\n", files.join(", ")));
        }
        crate::terminal_text::cut_to(&out, 16_000)
    }
}

/// The `path:line` citations of an answer, in order, each once.
pub fn citations(answer: &str) -> Vec<(String, u32)> {
    let mut found: Vec<(String, u32)> = Vec::new();
    for word in answer.split(|c: char| c.is_whitespace() || "()[]`'\",;".contains(c)) {
        let word = word.trim_end_matches(['.', ':']);
        // `path:12`, `path:12-20` or `path:12:4`: the first number after
        // the path is the line.
        let parts: Vec<&str> = word.split(':').collect();
        let Some(at) = (1..parts.len()).find(|&i| {
            parts[i]
                .split('-')
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n > 0))
        }) else {
            continue;
        };
        let line = parts[at]
            .split('-')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0);
        let path = parts[..at].join(":");
        let path = path.trim_start_matches("./");
        let plausible = !path.is_empty()
            && !path.contains("://")
            && path.len() <= 300
            && path.chars().any(|c| c == '.' || c == '/');
        if plausible && !found.iter().any(|(p, l)| p == path && *l == line) && found.len() < 100 {
            found.push((path.to_string(), line));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::types::{ModelId, Usage};

    fn reply(content: Option<&str>, calls: &[(&str, &str, &str)]) -> AskInput {
        AskInput::ModelReplied(ModelReply {
            content: content.map(str::to_string),
            tool_calls: calls
                .iter()
                .map(|(id, name, args)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: (*args).into(),
                    ..ToolCall::default()
                })
                .collect(),
            usage: Usage {
                input: 100,
                output: 10,
                cached: 0,
                estimated: false,
            },
            model: ModelId {
                provider: "test".into(),
                model: "m".into(),
            },
            provider: Default::default(),
        })
    }

    /// A read-only call `id` finished with "x".
    fn finished(a: &mut AskAgent, id: &str) -> Vec<AskEffect> {
        a.handle(AskInput::ToolFinished {
            call_id: id.into(),
            content: "x".into(),
        })
    }

    #[test]
    fn only_read_only_tools_are_offered() {
        let names: Vec<String> = AskAgent::tools().into_iter().map(|t| t.name).collect();
        assert_eq!(
            names,
            [
                "list_tree",
                "read_file",
                "ripgrep",
                "tree_sitter_symbols",
                "git"
            ]
        );
    }

    #[test]
    fn a_command_or_an_edit_is_refused_without_running_and_the_model_hears_why() {
        let mut a = AskAgent::new(AskConfig::default());
        let fx = a.handle(AskInput::Question("what does page_count do?".into()));
        assert!(matches!(&fx[..], [AskEffect::CallModel(r)] if r.tools.len() == 5));
        let fx = a.handle(reply(
            None,
            &[
                ("c1", "run_shell", r#"{"command":"rm -rf /"}"#),
                ("c2", "edit_file", r#"{"path":"a.py","patch":""}"#),
                ("c3", "read_file", r#"{"path":"pagination.py"}"#),
            ],
        ));
        assert!(matches!(&fx[0], AskEffect::Refused { call, .. } if call.name == "run_shell"));
        assert!(matches!(&fx[1], AskEffect::Refused { call, .. } if call.name == "edit_file"));
        assert!(matches!(&fx[2], AskEffect::RunTool(c) if c.name == "read_file"));
        assert_eq!(fx.len(), 3, "nothing else runs: {fx:?}");
        let fx = a.handle(AskInput::ToolFinished {
            call_id: "c3".into(),
            content: "def page_count".into(),
        });
        let [AskEffect::CallModel(req)] = &fx[..] else {
            panic!("{fx:?}")
        };
        let said: String = req
            .messages
            .iter()
            .filter_map(|m| m.content.clone())
            .collect();
        assert!(said.contains("run_shell is not available: ask mode is read-only"));
        assert_eq!(a.files_read, ["pagination.py"]);
    }

    #[test]
    fn a_reply_without_a_call_is_the_answer_and_a_next_question_goes_on() {
        let mut a = AskAgent::new(AskConfig::default());
        a.handle(AskInput::Question("q1".into()));
        let fx = a.handle(reply(Some("It rounds down (pagination.py:3)."), &[]));
        assert_eq!(
            fx,
            [AskEffect::Answered {
                text: "It rounds down (pagination.py:3).".into()
            }]
        );
        let fx = a.handle(AskInput::Question("q2".into()));
        let [AskEffect::CallModel(req)] = &fx[..] else {
            panic!("{fx:?}")
        };
        let said: String = req
            .messages
            .iter()
            .filter_map(|m| m.content.clone())
            .collect();
        assert!(said.contains("q1") && said.contains("rounds down") && said.contains("q2"));
        let learnt = a.learnt();
        assert!(learnt.contains("Q: q1") && learnt.contains("A: It rounds down"));
    }

    #[test]
    fn a_reply_of_many_calls_runs_only_the_first_ones_and_absurd_counts_do_not_overflow() {
        let mut a = AskAgent::new(AskConfig::default());
        a.handle(AskInput::Question("q".into()));
        let calls: Vec<(String, &str, &str)> = (0..40)
            .map(|i| (format!("c{i}"), "list_tree", "{}"))
            .collect();
        let calls: Vec<(&str, &str, &str)> = calls
            .iter()
            .map(|(id, n, a)| (id.as_str(), *n, *a))
            .collect();
        let fx = a.handle(reply(None, &calls));
        let refused = fx
            .iter()
            .filter(|e| matches!(e, AskEffect::Refused { .. }))
            .count();
        assert_eq!(refused, 40 - MAX_CALLS_PER_REPLY);
        assert_eq!(a.pending.len(), MAX_CALLS_PER_REPLY);
        let mut huge = reply(Some("done"), &[]);
        if let AskInput::ModelReplied(r) = &mut huge {
            r.usage.input = u64::MAX;
            r.usage.output = u64::MAX;
        }
        a.pending.clear();
        a.handle(huge);
        assert_eq!(a.tokens_used, u64::MAX);
    }

    #[test]
    fn a_question_gives_up_after_its_turns() {
        let mut a = AskAgent::new(AskConfig {
            max_turns: 2,
            ..AskConfig::default()
        });
        a.handle(AskInput::Question("q".into()));
        a.handle(reply(None, &[("c1", "list_tree", "{}")]));
        let fx = finished(&mut a, "c1");
        assert!(matches!(&fx[..], [AskEffect::CallModel(_)]));
        a.handle(reply(None, &[("c2", "list_tree", "{}")]));
        let fx = finished(&mut a, "c2");
        assert!(matches!(&fx[..], [AskEffect::GaveUp { reason }] if reason.contains("2 replies")));
    }

    #[test]
    fn the_conversation_keeps_to_its_cost_budget_and_stops_on_a_model_without_a_price() {
        let mut prices = crate::protocol::PriceTable::default();
        // 100 in and 10 out at $10 and $100 a million: 2,000 millionths.
        prices.0.insert(
            "test:m".into(),
            crate::protocol::Price {
                input: 10.0,
                output: 100.0,
                cached_input: None,
            },
        );
        let config = AskConfig {
            max_cost_micros: Some(3_000),
            prices: prices.clone(),
            ..AskConfig::default()
        };
        let mut a = AskAgent::new(config.clone());
        a.handle(AskInput::Question("q".into()));
        a.handle(reply(None, &[("c1", "list_tree", "{}")]));
        let fx = finished(&mut a, "c1");
        assert!(
            matches!(&fx[..], [AskEffect::CallModel(_)]),
            "2,000 of 3,000"
        );
        a.handle(reply(None, &[("c2", "list_tree", "{}")]));
        let fx = finished(&mut a, "c2");
        assert!(
            matches!(&fx[..], [AskEffect::GaveUp { reason }] if reason.contains("$0.0040 of $0.0030")),
            "{fx:?}"
        );
        let mut b = AskAgent::new(AskConfig {
            prices: crate::protocol::PriceTable::default(),
            ..config
        });
        b.handle(AskInput::Question("q".into()));
        b.handle(reply(None, &[("c1", "list_tree", "{}")]));
        let fx = finished(&mut b, "c1");
        assert!(
            matches!(&fx[..], [AskEffect::GaveUp { reason }] if reason.contains("test:m has no price")),
            "{fx:?}"
        );
    }

    #[test]
    fn citations_are_found_in_their_usual_spellings() {
        let found = citations(
            "See src/lib.rs:42 and (pagination.py:3-5), `tests/test_x.py:10:4`; not http://x.io:80 or 12:30.",
        );
        assert_eq!(
            found,
            [
                ("src/lib.rs".to_string(), 42),
                ("pagination.py".to_string(), 3),
                ("tests/test_x.py".to_string(), 10)
            ]
        );
    }
}
