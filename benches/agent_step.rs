//! Agent overhead per step, excluding model and tool time: one step is the
//! reducer taking a model reply with a tool call, the events it emits being
//! written to the hash-chained, redacted `events.jsonl`, the tool result
//! going back in, the next request being built (with a history of 30 earlier
//! steps), and `state.json` being replaced atomically — everything the
//! runtime does between the model answering and the next request, except
//! the tool itself. Reference: mini-swe-agent ≈ 10 ms per step; budget ≤ 1 ms.
//!
//! Run: `cargo bench --bench agent_step`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use minicoder::agent::reducer::{Agent, AgentConfig, Effect, Input};
use minicoder::model::types::{ModelId, ModelReply, ToolCall, Usage};
use minicoder::protocol::{RunEvent, VerificationReason};
use minicoder::runtime::EventBus;
use minicoder::trace::ArtifactDir;

fn reply(i: u64) -> Input {
    Input::ModelReplied(ModelReply {
        content: Some("Reading the next file to find where the page count is computed.".into()),
        tool_calls: vec![ToolCall {
            id: format!("call_{i}"),
            name: "read_file".into(),
            arguments: format!(
                r#"{{"path": "src/module_{i}.py", "start_line": 1, "end_line": 80}}"#
            ),
            ..ToolCall::default()
        }],
        usage: Usage {
            input: 4000,
            output: 60,
            cached: 0,
            estimated: false,
        },
        model: ModelId {
            provider: "openai".into(),
            model: "m".into(),
        },
        provider: Default::default(),
    })
}

fn result_text() -> String {
    (1..=80)
        .map(|n| format!("{n:>5}| def function_{n}(x):  # some realistic source line\n"))
        .collect()
}

/// One step: a reply with a tool call, its result, the next request built,
/// the events written, the state replaced. Returns the next request's size.
fn step(
    bus: &mut EventBus,
    artifacts: &ArtifactDir,
    agent: &mut Agent,
    i: u64,
    content: &str,
) -> usize {
    let mut effects = agent.handle(reply(i));
    effects.extend(agent.handle(Input::ToolFinished {
        call_id: format!("call_{i}"),
        ok: true,
        content: content.to_string(),
    }));
    bus.emit(RunEvent::ToolFinished {
        call_id: format!("call_{i}"),
        name: "read_file".into(),
        ok: true,
        summary: "lines 1-80".into(),
        result: content.to_string(),
        output_file: None,
        duration_ms: 1,
        changed_files: vec![],
    });
    let mut messages = 0;
    for e in effects {
        match e {
            Effect::Emit(ev) => bus.emit(ev),
            Effect::CallModel(req) => messages += req.messages.len(),
            _ => {}
        }
    }
    let state = serde_json::json!({"turns": agent.stats().turns, "plan": agent.plan().items});
    artifacts.write_state(&state).expect("state");
    messages
}

/// The reducer's part of a step: the reply, the result, the next request.
fn reducer_step(agent: &mut Agent, i: u64, content: &str) -> usize {
    let mut effects = agent.handle(reply(i));
    effects.extend(agent.handle(Input::ToolFinished {
        call_id: format!("call_{i}"),
        ok: true,
        content: content.to_string(),
    }));
    effects
        .iter()
        .map(|e| match e {
            Effect::CallModel(req) => req.messages.len(),
            _ => 0,
        })
        .sum()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = tempfile::tempdir().expect("tempdir");
    let artifacts = ArtifactDir::create(dir.path().join("run"), repo.path()).expect("artifacts");
    let mut bus = EventBus::new(artifacts.create_event_log().expect("log"), Vec::new());
    let content = result_text();
    let mut group = c.benchmark_group("agent overhead per step");
    group.sample_size(200);
    for history in [10u64, 30, 50] {
        let mut template = Agent::new(AgentConfig {
            max_turns: u32::MAX,
            max_tokens: u64::MAX,
            context_limit: 1_000_000,
            ..AgentConfig::new(
                "Fix the pagination bug",
                vec!["tests: python3 -m pytest -q".into()],
                minicoder::tools::specs(),
            )
        });
        template.handle(Input::Start {
            baseline_checkpoint: "base".into(),
        });
        template.handle(Input::Verified {
            reason: VerificationReason::Baseline,
            passed: false,
            fingerprint: String::new(),
            feedback: String::new(),
            checks: Vec::new(),
        });
        for i in 0..history {
            step(&mut bus, &artifacts, &mut template, i, &content);
        }
        group.bench_function(format!("after {history} steps"), |b| {
            b.iter_batched(
                || template.clone(),
                |mut agent| step(&mut bus, &artifacts, &mut agent, 1000, &content),
                BatchSize::SmallInput,
            )
        });
        // The decisions and the request alone, without the event log and
        // the state file: what the reducer itself costs per step.
        group.bench_function(format!("reducer only, after {history} steps"), |b| {
            b.iter_batched(
                || template.clone(),
                |mut agent| reducer_step(&mut agent, 1000, &content),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
