//! `minicoder smoke [PROVIDER|fallback]` (and `doctor --live`): one small
//! conversation with each configured provider that goes the whole dialect
//! round trip — the model calls a tool, gets its result back (with whatever
//! the provider asked to have returned: Gemini's thought signatures,
//! DeepSeek's reasoning) and answers. No repository, no container.
//! `fallback` makes the chain's first provider fail (a model that does not
//! exist) and shows the chain moving on.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::model::types::{ChatMessage, ModelReply, ModelRequest, ToolSpec};
use crate::model::{ActionSource, Env, ModelChain, ModelObservation, ModelSelection};
use crate::protocol::{ModelId, TokenTotals};

/// The longest a smoke test waits for one reply.
const REQUEST_BUDGET: Duration = Duration::from_secs(90);
/// The model name that makes a provider answer "not found".
const MISSING_MODEL: &str = "minicoder-smoke-no-such-model";

/// What one smoke test found.
#[derive(Debug, Clone)]
pub(crate) struct Finding {
    pub target: String,
    pub result: Result<Passed, String>,
}

#[derive(Debug, Clone)]
pub(crate) struct Passed {
    pub model: ModelId,
    pub call_ms: u64,
    pub answer_ms: u64,
    pub tokens: TokenTotals,
    /// Providers the chain moved past (with `fallback`).
    pub fell_back: Vec<String>,
}

impl Finding {
    /// One line for the person, unescaped (the printer escapes it).
    pub fn line(&self) -> String {
        match &self.result {
            Ok(p) => {
                let moved = if p.fell_back.is_empty() {
                    String::new()
                } else {
                    format!(" after falling back from {}", p.fell_back.join(", "))
                };
                format!(
                    "smoke {}: ok — {}:{} answered{moved}: tool call in {} ms, answer in {} ms; tokens {}; {}",
                    self.target,
                    p.model.provider,
                    p.model.model,
                    p.call_ms,
                    p.answer_ms,
                    p.tokens.describe(),
                    if p.tokens.cached > 0 {
                        "the provider's prompt cache served part of the input"
                    } else {
                        "no input served from the provider's prompt cache"
                    }
                )
            }
            Err(e) => format!("smoke {}: FAILED — {e}", self.target),
        }
    }
}

/// The providers with a key in the environment (or the saved file).
pub(crate) fn configured(env: &HashMap<String, String>) -> Vec<&'static str> {
    crate::model::provider::ProviderKind::ALL
        .into_iter()
        .filter(|k| env.get(k.key_var()).is_some_and(|v| !v.trim().is_empty()))
        .map(|k| k.name())
        .collect()
}

/// `minicoder smoke [TARGET]`.
pub(crate) async fn run(target: Option<String>) -> std::process::ExitCode {
    let env: HashMap<String, String> = std::env::vars().collect();
    let targets: Vec<String> = match target {
        Some(t) => vec![t.to_ascii_lowercase()],
        None => configured(&env).into_iter().map(str::to_string).collect(),
    };
    if targets.is_empty() {
        err!(
            "minicoder smoke: no provider is configured (GEMINI_API_KEY, FREELLMAPI_API_KEY, OPENAI_API_KEY); `minicoder init` saves keys"
        );
        return std::process::ExitCode::from(super::EXIT_FAILURE);
    }
    for t in &targets {
        if t != "fallback" && crate::model::provider::ProviderKind::parse(t).is_none() {
            err!(
                "minicoder smoke: unknown provider {t:?}; use gemini, qwen, deepseek, openai or fallback"
            );
            return std::process::ExitCode::from(super::EXIT_USAGE);
        }
    }
    let findings = check_all(&targets, &env).await;
    for f in &findings {
        match f.result {
            Ok(_) => out!("{}", f.line()),
            Err(_) => err!("{}", f.line()),
        }
    }
    if findings.iter().all(|f| f.result.is_ok()) {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(super::EXIT_FAILURE)
    }
}

/// Each target in turn.
pub(crate) async fn check_all(targets: &[String], env: &HashMap<String, String>) -> Vec<Finding> {
    let mut findings = Vec::new();
    for target in targets {
        findings.push(Finding {
            target: target.clone(),
            result: check(target, env).await,
        });
    }
    findings
}

async fn check(target: &str, env: &HashMap<String, String>) -> Result<Passed, String> {
    let mut env = env.clone();
    let selection = if target == "fallback" {
        // The chain as runs use it, its first provider asked for a model
        // that does not exist.
        let first = crate::model::provider::ProviderKind::ALL
            .into_iter()
            .find(|k| {
                k.is_free_tier() && env.get(k.key_var()).is_some_and(|v| !v.trim().is_empty())
            })
            .ok_or("the fallback chain needs a free-tier provider's key")?;
        env.insert(first.model_var().to_string(), MISSING_MODEL.to_string());
        ModelSelection::default()
    } else {
        ModelSelection {
            pinned: Some(target.to_string()),
            benchmark: false,
        }
    };
    let mut chain =
        ModelChain::from_env(&Env::from_pairs(env), &selection).map_err(|e| e.to_string())?;
    if target == "fallback" && !chain.fallback_enabled() {
        return Err("the chain has one provider: there is nothing to fall back to".into());
    }
    round_trip(&mut chain).await
}

/// The conversation: a tool call, its result, an answer.
pub(crate) async fn round_trip(source: &mut dyn ActionSource) -> Result<Passed, String> {
    let token = format!("minicoder-{}", crate::ids::random_hex(3));
    let tools = vec![ToolSpec {
        name: "echo".into(),
        description: "Returns the smoke test's token for a word.".into(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"]
        }),
    }];
    let mut messages = vec![
        ChatMessage::system(
            "You are checking that tool calls work. Do exactly what the user asks, briefly.",
        ),
        ChatMessage::user(
            "Call the tool `echo` with the word \"minicoder\". When its result comes back, reply with that result and nothing else.",
        ),
    ];
    let mut fell_back = Vec::new();
    let (first, call_ms) = ask(source, &messages, &tools, &mut fell_back).await?;
    let Some(call) = first.tool_calls.first() else {
        return Err(format!(
            "{}:{} answered without calling the tool{}",
            first.model.provider,
            first.model.model,
            first
                .content
                .as_deref()
                .map(|c| format!(": {:?}", crate::terminal_text::cut_to(c, 200)))
                .unwrap_or_default()
        ));
    };
    if call.name != "echo" {
        return Err(format!("the model called {:?}, not echo", call.name));
    }
    messages.push(ChatMessage::from_reply(&first));
    messages.push(ChatMessage::tool_result(call.id.clone(), token.clone()));
    let (second, answer_ms) = ask(source, &messages, &tools, &mut fell_back).await?;
    if !second.tool_calls.is_empty() {
        return Err(format!(
            "{}:{} called a tool again instead of answering from the tool's result",
            second.model.provider, second.model.model
        ));
    }
    if second
        .content
        .as_deref()
        .is_none_or(|c| c.trim().is_empty())
    {
        return Err(format!(
            "{}:{} sent an empty answer after the tool's result",
            second.model.provider, second.model.model
        ));
    }
    let mut tokens = TokenTotals::default();
    for (i, reply) in [&first, &second].into_iter().enumerate() {
        tokens.add(&reply.usage, None, i == 0);
    }
    Ok(Passed {
        model: second.model.clone(),
        call_ms,
        answer_ms,
        tokens,
        fell_back,
    })
}

async fn ask(
    source: &mut dyn ActionSource,
    messages: &[ChatMessage],
    tools: &[ToolSpec],
    fell_back: &mut Vec<String>,
) -> Result<(ModelReply, u64), String> {
    let req = ModelRequest {
        messages: messages.to_vec(),
        tools: tools.to_vec(),
    };
    let started = Instant::now();
    let mut observe = |o: ModelObservation| {
        if let ModelObservation::Fallback { from, reason, .. } = o {
            fell_back.push(format!("{}:{} ({reason})", from.provider, from.model));
        }
    };
    let reply = source
        .complete(&req, Instant::now() + REQUEST_BUDGET, &mut observe)
        .await
        .map_err(|e| match e {
            crate::model::ModelError::DeadlineExceeded => {
                format!("no answer within {} s", REQUEST_BUDGET.as_secs())
            }
            e => e.to_string(),
        })?;
    Ok((reply, started.elapsed().as_millis() as u64))
}
