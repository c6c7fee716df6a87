use serde_json::json;

use super::*;
use crate::model::decode::decode;

fn chunk(choices: Value, usage: Value) -> WireReply {
    let body = json!({
        "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
        "choices": choices, "usage": usage
    });
    decode(body.to_string().as_bytes()).expect("chunk")
}

fn calls(pieces: Value) -> WireReply {
    chunk(
        json!([{"index": 0, "delta": {"tool_calls": pieces}}]),
        json!(null),
    )
}

fn assemble(chunks: Vec<WireReply>) -> ReplyParts {
    let mut asm = StreamAssembler::default();
    for c in chunks {
        asm.push(c).expect("within bounds");
    }
    asm.mark_done();
    asm.finish().expect("complete")
}

fn summary(parts: &ReplyParts) -> Vec<(String, String, String)> {
    parts
        .tool_calls
        .iter()
        .map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone()))
        .collect()
}

fn triple(id: &str, name: &str, args: &str) -> (String, String, String) {
    (id.into(), name.into(), args.into())
}

#[test]
fn stream_assembles_split_tool_calls_by_index() {
    let mut asm = StreamAssembler::default();
    let text = asm
        .push(chunk(
            json!([{"index": 0, "delta": {"role": "assistant", "content": "Let me "}}]),
            json!(null),
        ))
        .expect("ok");
    assert_eq!(text.as_deref(), Some("Let me "));
    for c in [
        chunk(
            json!([{"index": 0, "delta": {"content": "look."}}]),
            json!(null),
        ),
        calls(
            json!([{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": ""}}]),
        ),
        calls(json!([
            {"index": 0, "function": {"arguments": "{\"pa"}},
            {"index": 1, "id": "call_b", "type": "function", "function": {"name": "ripgrep", "arguments": "{\"pattern\""}}])),
        calls(json!([
            {"index": 1, "function": {"arguments": ": \"x\"}"}},
            {"index": 0, "function": {"arguments": "th\": \"a.py\"}"}}])),
        chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
            json!(null),
        ),
        chunk(
            json!([]),
            json!({"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}),
        ),
    ] {
        asm.push(c).expect("ok");
    }
    let parts = asm.finish().expect("complete");
    assert_eq!(parts.content.as_deref(), Some("Let me look."));
    assert_eq!(
        summary(&parts),
        [
            triple("call_a", "read_file", r#"{"path": "a.py"}"#),
            triple("call_b", "ripgrep", r#"{"pattern": "x"}"#)
        ]
    );
    assert_eq!(parts.usage.and_then(|u| u.prompt_tokens), Some(11));
    assert!(parts.provider.is_empty());
}

#[test]
fn complete_calls_under_one_index_stay_separate() {
    let parts = assemble(
        [("x1", "list_tree"), ("x2", "read_file")]
            .into_iter()
            .map(|(id, name)| {
                calls(json!([{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}]))
            })
            .collect(),
    );
    let names: Vec<&str> = parts.tool_calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["list_tree", "read_file"]);
    assert!(parts.usage.is_none());
}

#[test]
fn index_less_calls_split_arguments_and_a_late_signature() {
    let signature = json!({"google": {"thought_signature": "CiQB+/=="}});
    let parts = assemble(vec![
        calls(
            json!([{"id": "g1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":"}}]),
        ),
        calls(json!([{"function": {"arguments": "\"a.py\"}"}}])),
        calls(json!([{"extra_content": signature}])),
        calls(
            json!([{"id": "g2", "type": "function", "function": {"name": "git", "arguments": "{}"}}]),
        ),
        chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
            json!(null),
        ),
    ]);
    assert_eq!(
        summary(&parts),
        [
            triple("g1", "read_file", r#"{"path":"a.py"}"#),
            triple("g2", "git", "{}")
        ]
    );
    assert_eq!(
        parts.tool_calls[0].provider.fields["extra_content"],
        signature
    );
    assert!(parts.tool_calls[1].provider.is_empty());
}

#[test]
fn a_signature_before_its_call_waits_for_it() {
    let signature = json!({"google": {"thought_signature": "early"}});
    let parts = assemble(vec![
        calls(json!([{"extra_content": signature}])),
        calls(json!([{"id": "g1", "function": {"name": "git", "arguments": "{}"}}])),
    ]);
    assert_eq!(
        parts.tool_calls[0].provider.fields["extra_content"],
        signature
    );
}

#[test]
fn id_less_whole_calls_are_told_apart_by_their_names() {
    let parts = assemble(vec![calls(json!([
        {"function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}},
        {"function": {"name": "read_file", "arguments": "{\"path\":\"b\"}"}},
        {"function": {"name": "git", "arguments": "{}"}}
    ]))]);
    assert_eq!(
        summary(&parts),
        [
            triple("call_1", "read_file", r#"{"path":"a"}"#),
            triple("call_2", "read_file", r#"{"path":"b"}"#),
            triple("call_3", "git", "{}")
        ]
    );
}

#[test]
fn a_name_repeated_on_every_piece_does_not_split_the_call() {
    let parts = assemble(vec![
        calls(json!([{"index": 0, "function": {"name": "ripgrep", "arguments": "{\"pat"}}])),
        calls(json!([{"index": 0, "function": {"name": "ripgrep", "arguments": "tern\":\"x\"}"}}])),
    ]);
    assert_eq!(
        summary(&parts),
        [triple("call_1", "ripgrep", r#"{"pattern":"x"}"#)]
    );
}

#[test]
fn a_second_calls_arguments_on_the_first_index_are_given_back() {
    // The header of the second call never came (dyedd/lens#49).
    let parts = assemble(vec![
        calls(
            json!([{"index": 0, "id": "t1", "type": "function", "function": {"name": "glob", "arguments": ""}}]),
        ),
        calls(
            json!([{"index": 0, "function": {"name": "", "arguments": "{\"path\":\"\",\"pattern\":\"**/*\"}"}}]),
        ),
        calls(
            json!([{"index": 0, "function": {"name": "", "arguments": "{\"path\":\"content/wiki\",\"pattern\":\"\"}"}}]),
        ),
    ]);
    assert_eq!(
        summary(&parts),
        [
            triple("t1", "glob", r#"{"path":"","pattern":"**/*"}"#),
            triple("t1-2", "glob", r#"{"path":"content/wiki","pattern":""}"#)
        ]
    );
    // The header came on its own index, its arguments on the first one.
    let parts = assemble(vec![
        calls(
            json!([{"index": 0, "id": "a", "function": {"name": "read_file", "arguments": "{\"path\":\"x\"}"}}]),
        ),
        calls(json!([{"index": 1, "id": "b", "function": {"name": "git", "arguments": ""}}])),
        calls(json!([{"index": 0, "function": {"arguments": "{\"op\":\"status\"}"}}])),
    ]);
    assert_eq!(
        summary(&parts),
        [
            triple("a", "read_file", r#"{"path":"x"}"#),
            triple("b", "git", r#"{"op":"status"}"#)
        ]
    );
}

#[test]
fn invalid_arguments_are_left_for_the_agent_to_refuse() {
    let parts = assemble(vec![calls(
        json!([{"index": 0, "id": "a", "function": {"name": "read_file", "arguments": "{\"path\": \"x\"}}"}}]),
    )]);
    assert_eq!(parts.tool_calls[0].arguments, r#"{"path": "x"}}"#);
}

#[test]
fn reasoning_is_kept_apart_from_the_visible_text() {
    let mut asm = StreamAssembler::default();
    let mut visible = String::new();
    for delta in [
        json!({"role": "assistant", "content": null, "reasoning_content": ""}),
        json!({"content": null, "reasoning_content": "The bug is "}),
        json!({"content": null, "reasoning_content": "in page_count."}),
        json!({"content": "Reading.", "reasoning_content": null}),
    ] {
        if let Some(text) = asm
            .push(chunk(json!([{"index": 0, "delta": delta}]), json!(null)))
            .expect("ok")
        {
            visible.push_str(&text);
        }
    }
    asm.mark_done();
    let parts = asm.finish().expect("complete");
    assert_eq!(visible, "Reading.");
    assert_eq!(parts.content.as_deref(), Some("Reading."));
    assert_eq!(
        parts.provider["reasoning_content"],
        "The bug is in page_count."
    );
}

#[test]
fn a_stream_without_an_end_is_incomplete_and_a_huge_one_is_refused() {
    let mut asm = StreamAssembler::default();
    asm.push(chunk(
        json!([{"index": 0, "delta": {"content": "half"}}]),
        json!(null),
    ))
    .expect("ok");
    assert!(asm.finish().is_err_and(|e| e.contains("ended before")));

    let mut asm = StreamAssembler::default();
    let big = "x".repeat(MAX_REPLY_CHARS / 2 + 1);
    asm.push(chunk(
        json!([{"index": 0, "delta": {"reasoning_content": big}}]),
        json!(null),
    ))
    .expect("half fits");
    let refused = asm.push(chunk(
        json!([{"index": 0, "delta": {"content": big}}]),
        json!(null),
    ));
    assert!(refused.is_err_and(|e| e.contains("larger than")));
}

#[test]
fn a_call_without_a_name_is_an_error() {
    let mut asm = StreamAssembler::default();
    asm.push(calls(
        json!([{"index": 0, "id": "a", "function": {"arguments": "{}"}}]),
    ))
    .expect("ok");
    asm.mark_done();
    assert!(asm.finish().is_err_and(|e| e.contains("no function name")));
}
