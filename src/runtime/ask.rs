//! Ask mode's driver: a private copy of the repository (credential paths
//! left out, as for a run), the [`AskAgent`]'s effects performed — model
//! requests, and the read-only tools run in-process on the copy. No Docker:
//! nothing of ask mode needs or starts a container. The copy is removed
//! when the conversation ends.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::agent::ask::{AskAgent, AskConfig, AskEffect, AskInput};
use crate::model::{ActionSource, ModelObservation};
use crate::protocol::{ModelId, TokenTotals};
use crate::state::StateDir;
use crate::workspace::{PrivateWorkspace, SecretPaths, WorkspaceRoot};

/// The longest one model request of ask mode may take.
const REQUEST_BUDGET: Duration = Duration::from_secs(180);

/// What ask mode tells its front end as it goes.
#[derive(Debug, Clone, PartialEq)]
pub enum AskUpdate {
    /// A tool ran: its name and one line of what it found.
    Tool { name: String, summary: String },
    /// A call was refused: ask mode is read-only.
    Refused { name: String },
    /// The model's text beside its tool calls.
    Said(String),
}

impl AskUpdate {
    /// One progress line, unescaped (its printer escapes it).
    pub fn line(&self) -> String {
        match self {
            AskUpdate::Tool { name, summary } => format!("{name}: {summary}"),
            AskUpdate::Refused { name } => format!("refused {name}: ask mode is read-only"),
            AskUpdate::Said(text) => format!("model: {}", crate::terminal_text::cut_to(text, 200)),
        }
    }
}

/// An answer and what backs it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Answer {
    pub answer: String,
    /// The `path:line` citations of the answer, and whether each names a
    /// line of a file of the copy.
    pub citations: Vec<Citation>,
    pub model: Option<ModelId>,
    pub tokens: TokenTotals,
    pub tool_calls: u32,
    pub refused_calls: u32,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Citation {
    pub path: String,
    pub line: u32,
    pub found: bool,
}

/// A conversation about one repository.
pub struct AskSession {
    agent: AskAgent,
    source: Box<dyn ActionSource>,
    root: WorkspaceRoot,
    claim: Option<super::setup::WorkspaceClaim>,
}

impl AskSession {
    /// Copies `repo` privately for the conversation.
    pub async fn open(
        repo: &Path,
        source: Box<dyn ActionSource>,
        config: AskConfig,
    ) -> Result<Self, String> {
        source.preflight().await?;
        let state = StateDir::from_env().map_err(|e| e.to_string())?;
        let id = format!("ask-{}", crate::ids::random_hex(6));
        let claim =
            super::setup::WorkspaceClaim::take(&state, &id, false).map_err(|e| e.to_string())?;
        let (from, to) = (repo.to_path_buf(), claim.dir.clone());
        let copied = tokio::task::spawn_blocking(move || {
            PrivateWorkspace::create_with(&from, &to, None, &SecretPaths::default())
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        let root = copied.and_then(|()| WorkspaceRoot::open(&claim.dir).map_err(|e| e.to_string()));
        let root = match root {
            Ok(root) => root,
            Err(e) => {
                claim.release();
                return Err(format!("copying {}: {e}", repo.display()));
            }
        };
        Ok(Self {
            agent: AskAgent::new(config),
            source,
            root,
            claim: Some(claim),
        })
    }

    /// What the conversation learnt so far, for a run to go on from.
    pub fn learnt(&self) -> String {
        self.agent.learnt()
    }

    /// Answers one question (later ones continue the conversation).
    pub async fn ask(
        &mut self,
        question: &str,
        updates: &mut (dyn FnMut(AskUpdate) + Send),
    ) -> Result<Answer, String> {
        let mut answer = Answer {
            answer: String::new(),
            citations: Vec::new(),
            model: None,
            tokens: TokenTotals::default(),
            tool_calls: 0,
            refused_calls: 0,
        };
        let mut queue: std::collections::VecDeque<AskEffect> = self
            .agent
            .handle(AskInput::Question(question.to_string()))
            .into();
        while let Some(effect) = queue.pop_front() {
            let input = match effect {
                AskEffect::CallModel(req) => {
                    let mut observe = |_: ModelObservation| {};
                    let result = self
                        .source
                        .complete(&req, Instant::now() + REQUEST_BUDGET, &mut observe)
                        .await;
                    match result {
                        Ok(reply) => {
                            answer.model = Some(reply.model.clone());
                            if !reply.tool_calls.is_empty()
                                && let Some(text) =
                                    reply.content.as_deref().filter(|t| !t.trim().is_empty())
                            {
                                updates(AskUpdate::Said(text.trim().to_string()));
                            }
                            AskInput::ModelReplied(reply)
                        }
                        Err(e) => AskInput::Failed {
                            reason: e.to_string(),
                        },
                    }
                }
                AskEffect::RunTool(call) => {
                    answer.tool_calls += 1;
                    let output = match crate::tools::parse_call(&call.name, &call.arguments) {
                        Ok(parsed) => crate::tools::execute_without_container(&parsed, &self.root)
                            .map_or_else(
                                || {
                                    (
                                        "this tool is not available in ask mode".to_string(),
                                        String::new(),
                                    )
                                },
                                |o| (o.content, o.summary),
                            ),
                        Err(e) => (e.to_string(), "refused".to_string()),
                    };
                    updates(AskUpdate::Tool {
                        name: call.name.clone(),
                        summary: output.1,
                    });
                    AskInput::ToolFinished {
                        call_id: call.id,
                        content: output.0,
                    }
                }
                AskEffect::Refused { call, .. } => {
                    answer.refused_calls += 1;
                    updates(AskUpdate::Refused { name: call.name });
                    continue;
                }
                AskEffect::Answered { text } => {
                    answer.citations = crate::agent::ask::citations(&text)
                        .into_iter()
                        .map(|(path, line)| Citation {
                            found: self.has_line(&path, line),
                            path,
                            line,
                        })
                        .collect();
                    answer.answer = text;
                    answer.tokens = self.agent.question_tokens;
                    return Ok(answer);
                }
                AskEffect::GaveUp { reason } => return Err(reason),
            };
            queue.extend(self.agent.handle(input));
        }
        Err("the conversation stopped without an answer".into())
    }

    /// Whether the copy has a file `path` of at least `line` lines.
    fn has_line(&self, path: &str, line: u32) -> bool {
        let line = line as usize;
        let call = crate::tools::ParsedCall::ReadFile(crate::tools::ReadFileArgs {
            path: path.to_string(),
            start_line: Some(line),
            end_line: Some(line),
        });
        crate::tools::execute_without_container(&call, &self.root)
            .is_some_and(|o| o.ok && !o.content.contains("past the end"))
    }

    /// Removes the copy.
    pub fn close(mut self) {
        if let Some(claim) = self.claim.take() {
            claim.release();
        }
    }
}

impl Drop for AskSession {
    fn drop(&mut self) {
        if let Some(claim) = self.claim.take() {
            claim.release();
        }
    }
}
