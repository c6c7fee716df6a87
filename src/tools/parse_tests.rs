use super::*;

#[test]
fn every_tool_name_round_trips() {
    for tool in ToolName::ALL {
        assert_eq!(ToolName::from_name(tool.as_str()), Some(tool));
    }
}

#[test]
fn unknown_tool_lists_the_available_ones() {
    let err = parse_call("write_file", "{}").err().map(|e| e.to_string());
    let message = err.unwrap_or_default();
    assert!(message.contains("unknown tool `write_file`"), "{message}");
    assert!(message.contains("list_tree") && message.contains("request_completion"));
}

#[test]
fn invalid_json_says_so_with_an_example() {
    let message = parse_call("read_file", "{path: x}")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(message.contains("not valid JSON"), "{message}");
    assert!(message.contains(r#"{"path": "src/main.rs""#), "{message}");
}

#[test]
fn non_object_arguments_are_refused() {
    let message = parse_call("read_file", "[1]")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        message.contains("must be a JSON object, not an array"),
        "{message}"
    );
}

#[test]
fn missing_and_mistyped_fields_are_named() {
    let missing = parse_call("read_file", "{}")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(missing.contains("missing field `path`"), "{missing}");
    let mistyped = parse_call("list_tree", r#"{"max_depth": "deep"}"#)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(mistyped.contains("invalid type"), "{mistyped}");
}

#[test]
fn defaults_apply() {
    let call = parse_call("list_tree", "").ok();
    assert_eq!(
        call,
        Some(ParsedCall::ListTree(ListTreeArgs {
            path: ".".into(),
            max_depth: 3
        }))
    );
    let Ok(ParsedCall::Ripgrep(args)) = parse_call("ripgrep", r#"{"pattern": "x"}"#) else {
        panic!("ripgrep did not parse");
    };
    assert_eq!(args.path, ".");
    assert!(!args.case_insensitive);
    let Ok(ParsedCall::RunShell(args)) = parse_call("run_shell", r#"{"command": "ls"}"#) else {
        panic!("run_shell did not parse");
    };
    assert_eq!((args.cwd.as_str(), args.timeout_ms), (".", None));
}

#[test]
fn bad_line_ranges_are_refused() {
    assert!(parse_call("read_file", r#"{"path": "a", "start_line": 0}"#).is_err());
    let message = parse_call(
        "read_file",
        r#"{"path": "a", "start_line": 9, "end_line": 3}"#,
    )
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(
        message.contains("end_line 3 is before start_line 9"),
        "{message}"
    );
}

#[test]
fn git_subcommands_are_checked() {
    let Ok(ParsedCall::Git(args)) =
        parse_call("git", r#"{"subcommand": "log", "args": ["-n", "2"]}"#)
    else {
        panic!("git log did not parse");
    };
    assert_eq!(args.subcommand, GitSubcommand::Log);
    assert_eq!(args.args, vec!["-n", "2"]);
    for (sub, expected) in [
        ("push", "remote operation"),
        ("fetch", "remote operation"),
        ("commit", "read-only"),
        ("frobnicate", "unknown git subcommand"),
    ] {
        let message = parse_call("git", &format!(r#"{{"subcommand": "{sub}"}}"#))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains(expected), "{sub}: {message}");
    }
}

#[test]
fn plan_and_completion_parse() {
    let call = parse_call(
        "update_plan",
        r#"{"items": [{"id": "1", "content": "fix", "status": "in_progress", "notes": "n"}]}"#,
    );
    let Ok(ParsedCall::UpdatePlan { items }) = call else {
        panic!("update_plan did not parse");
    };
    assert_eq!(items[0].status, crate::protocol::PlanStatus::InProgress);
    let bad = parse_call(
        "update_plan",
        r#"{"items": [{"id": "1", "content": "x", "status": "started"}]}"#,
    );
    assert!(bad.is_err());
    assert_eq!(
        parse_call("request_completion", r#"{"summary": "done"}"#).ok(),
        Some(ParsedCall::RequestCompletion {
            summary: "done".into()
        })
    );
}

#[test]
fn specs_cover_all_ten_tools_with_object_schemas() {
    let specs = crate::tools::specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ToolName::ALL.map(ToolName::as_str).to_vec());
    for spec in &specs {
        assert_eq!(spec.parameters["type"], "object", "{}", spec.name);
        assert!(spec.description.len() > 40, "{}", spec.name);
    }
    let git = specs
        .iter()
        .find(|s| s.name == "git")
        .map(|s| s.parameters.clone());
    assert_eq!(
        git.map(|p| p["properties"]["subcommand"]["enum"].clone()),
        Some(serde_json::json!(["status", "diff", "log", "show"]))
    );
    let edit = specs
        .iter()
        .find(|s| s.name == "edit_file")
        .map(|s| s.parameters.clone());
    assert_eq!(
        edit.map(|p| p["required"].clone()),
        Some(serde_json::json!(["path", "patch"]))
    );
}
