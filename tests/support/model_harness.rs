//! Helpers of the model tests: a request offering the ten tools, an
//! environment pointing providers at mock servers, and a way to ask a source
//! while recording what it reports.

use std::time::{Duration, Instant};

use minicoder::model::types::{ChatMessage, ModelId, ModelReply, ModelRequest, ToolSpec};
use minicoder::model::{
    ActionSource, Env, ModelChain, ModelError, ModelObservation, ModelSelection,
};
use serde_json::json;

use super::mock_openai::MockOpenAi;

pub const TOOL_NAMES: [&str; 10] = [
    "list_tree",
    "read_file",
    "ripgrep",
    "tree_sitter_symbols",
    "edit_file",
    "run_shell",
    "git",
    "read_output",
    "update_plan",
    "request_completion",
];

pub fn request() -> ModelRequest {
    ModelRequest {
        messages: vec![
            ChatMessage::system("You are a coding agent."),
            ChatMessage::user("Fix the failing test."),
        ],
        tools: TOOL_NAMES
            .iter()
            .map(|name| ToolSpec {
                name: name.to_string(),
                description: format!("the {name} tool"),
                parameters: json!({"type": "object", "properties": {}}),
            })
            .collect(),
    }
}

/// An environment with gemini on `primary` and qwen/deepseek on `secondary`.
pub fn env(primary: &MockOpenAi, secondary: Option<&MockOpenAi>) -> Env {
    let mut env = Env::from_pairs([
        ("MINICODER_FREE_TIER_CONFIRMED", "true"),
        ("MINICODER_RETRY_BASE_MS", "10"),
        ("GEMINI_API_KEY", "gemini-test-key"),
        ("GEMINI_MODEL", "gemini-test"),
    ]);
    env.set("GEMINI_BASE_URL", primary.base_url());
    if let Some(secondary) = secondary {
        env.set("FREELLMAPI_BASE_URL", secondary.base_url());
        env.set("FREELLMAPI_API_KEY", "free-test-key");
    }
    env
}

pub fn chain(env: &Env) -> ModelChain {
    ModelChain::from_env(env, &ModelSelection::default()).expect("chain")
}

pub struct Asked {
    pub result: Result<ModelReply, ModelError>,
    pub observations: Vec<ModelObservation>,
    pub elapsed: Duration,
}

impl Asked {
    pub fn reply(&self) -> &ModelReply {
        match &self.result {
            Ok(reply) => reply,
            Err(e) => panic!("expected a reply, got: {e}"),
        }
    }

    pub fn retries(&self) -> Vec<(u32, Duration, String)> {
        self.observations
            .iter()
            .filter_map(|o| match o {
                ModelObservation::Retry {
                    attempt,
                    delay,
                    reason,
                    ..
                } => Some((*attempt, *delay, reason.clone())),
                _ => None,
            })
            .collect()
    }

    pub fn fallbacks(&self) -> Vec<(ModelId, ModelId)> {
        self.observations
            .iter()
            .filter_map(|o| match o {
                ModelObservation::Fallback { from, to, .. } => Some((from.clone(), to.clone())),
                _ => None,
            })
            .collect()
    }

    pub fn streamed_text(&self) -> String {
        self.observations
            .iter()
            .filter_map(|o| match o {
                ModelObservation::Delta(text) => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

pub async fn ask_within(
    source: &mut dyn ActionSource,
    req: &ModelRequest,
    budget: Duration,
) -> Asked {
    let start = Instant::now();
    let mut observations = Vec::new();
    let mut observe = |o: ModelObservation| observations.push(o);
    let result = source.complete(req, start + budget, &mut observe).await;
    Asked {
        result,
        observations,
        elapsed: start.elapsed(),
    }
}

pub async fn ask(source: &mut dyn ActionSource) -> Asked {
    ask_within(source, &request(), Duration::from_secs(30)).await
}

pub fn id(provider: &str, model: &str) -> ModelId {
    ModelId {
        provider: provider.into(),
        model: model.into(),
    }
}
