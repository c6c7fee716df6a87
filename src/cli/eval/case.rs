//! One conformance case (`assets/eval/cases/NAME.json`): a fixture, a task,
//! the scripted replies that stand in for a model, what must come of it, and
//! the commands that follow the run (resume, apply, undo …). Scripts are
//! written in a short form — `{"plan": "start"}`, `{"shell": CMD}`,
//! `{"replace": PATH, "old": TEXT, "new": TEXT}` — expanded here into the
//! tool calls a model sends (an edit becomes the unified diff it would write).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Mode {
    #[default]
    Run,
    Ask,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    pub name: String,
    pub about: String,
    /// `demo`, or a folder of `assets/eval/fixtures`.
    pub fixture: String,
    #[serde(default)]
    pub mode: Mode,
    pub task: String,
    /// More flags for `run`.
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub setup: Setup,
    /// Replies: each a list of calls, a string among them being its text.
    pub script: Vec<Vec<Step>>,
    pub expect: Expect,
    #[serde(default)]
    pub then: Vec<Then>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Setup {
    /// Links added to the fixture before its commit: path -> target.
    #[serde(default)]
    pub symlinks: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Step {
    Say(String),
    Plan {
        plan: String,
    },
    Shell {
        shell: String,
    },
    Read {
        read: String,
    },
    Complete {
        complete: String,
    },
    Replace {
        replace: String,
        old: String,
        new: String,
    },
    Call {
        name: String,
        arguments: Value,
    },
}

/// A tool call the run must show.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Seen {
    pub tool: String,
    #[serde(default)]
    pub contains: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Expect {
    pub outcome: Option<String>,
    pub verified: Option<bool>,
    /// Exactly the files that may change; any other is an unrelated change.
    pub changed: Option<Vec<String>>,
    /// Calls refused unrun (policy).
    #[serde(default)]
    pub refused: Vec<Seen>,
    /// Calls that ran and failed (tool errors).
    #[serde(default)]
    pub failed: Vec<Seen>,
    /// Results the model was shown.
    #[serde(default)]
    pub results: Vec<Seen>,
    /// Results it must not have been shown.
    #[serde(default)]
    pub results_not: Vec<Seen>,
    /// Completion verifications, and how many of them failed.
    pub completions: Option<usize>,
    pub completions_failed: Option<usize>,
    /// Text of some failed check's first error or output.
    pub verification_contains: Option<String>,
    /// The largest tool result the model may be shown.
    pub max_result_bytes: Option<usize>,
    /// Ask mode: the answer's text, and how many citations checked out.
    pub answer_contains: Option<String>,
    pub citations: Option<usize>,
    /// The run must refuse to start, saying this.
    pub start_refused: Option<String>,
}

impl Expect {
    /// Expectations that hold whatever model answers (for `--model`): the
    /// verdict and the changed files, nothing about particular calls.
    pub(crate) fn for_a_model(&self) -> Expect {
        Expect {
            outcome: self.outcome.clone(),
            verified: self.verified,
            changed: self.changed.clone(),
            ..Expect::default()
        }
    }

    /// Whether the case says anything about particular calls (then it is
    /// about minicoder, not about a model).
    pub(crate) fn about_calls(&self) -> bool {
        !(self.refused.is_empty()
            && self.failed.is_empty()
            && self.results.is_empty()
            && self.results_not.is_empty()
            && self.completions.is_none()
            && self.completions_failed.is_none()
            && self.max_result_bytes.is_none())
    }
}

/// What to check of the source after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum SourceState {
    /// As it was just before the step.
    Unchanged,
    /// Different from just before the step.
    Changed,
    /// As the fixture was committed.
    Original,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReportExpect {
    pub outcome: Option<String>,
    pub verified: Option<bool>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Edit {
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Tamper {
    /// A file of the run's artifacts.
    pub file: String,
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum Then {
    /// A `minicoder` command; `{run}` is the run id, `{script}` the script.
    Run {
        run: Vec<String>,
        exit: i32,
        #[serde(default)]
        source: Option<SourceState>,
        #[serde(default)]
        source_contains: BTreeMap<String, String>,
        #[serde(default)]
        output_contains: Option<String>,
        #[serde(default)]
        report: Option<ReportExpect>,
    },
    /// The person edits the source.
    Write { write: BTreeMap<String, Edit> },
    /// Someone edits the run's artifacts.
    Tamper { tamper: Tamper },
}

/// Parses a case, checking that its name is its file's.
pub(crate) fn parse(file_stem: &str, text: &str) -> Result<Case, String> {
    let case: Case = serde_json::from_str(text).map_err(|e| format!("{file_stem}: {e}"))?;
    if case.name != file_stem {
        return Err(format!("{file_stem}: its name says {:?}", case.name));
    }
    Ok(case)
}

fn plan(stage: &str) -> Result<Value, String> {
    let statuses = match stage {
        "start" => ["in_progress", "pending"],
        "work" => ["done", "in_progress"],
        "done" => ["done", "done"],
        other => return Err(format!("plan {other:?}: start, work or done")),
    };
    Ok(json!({"items": [
        {"id": "1", "content": "See the failure", "status": statuses[0]},
        {"id": "2", "content": "Fix it", "status": statuses[1]},
    ]}))
}

/// The unified diff a model would send to turn `old` into `new` in `path`.
pub(crate) fn diff(path: &str, before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

/// The case's script as `--script` takes it, edits made against `files`
/// (the fixture's text, kept up to date as the script edits it).
pub(crate) fn expand(case: &Case, mut files: BTreeMap<String, String>) -> Result<Value, String> {
    let mut turns = Vec::new();
    for reply in &case.script {
        let mut content: Option<String> = None;
        let mut calls = Vec::new();
        for step in reply {
            let (name, arguments) = match step {
                Step::Say(text) => {
                    content = Some(text.clone());
                    continue;
                }
                Step::Plan { plan: stage } => ("update_plan".to_string(), plan(stage)?),
                Step::Shell { shell } => ("run_shell".into(), json!({ "command": shell })),
                Step::Read { read } => ("read_file".into(), json!({ "path": read })),
                Step::Complete { complete } => {
                    ("request_completion".into(), json!({ "summary": complete }))
                }
                Step::Replace { replace, old, new } => {
                    let before = files
                        .get(replace)
                        .ok_or_else(|| format!("{}: no file {replace} to edit", case.name))?;
                    if !before.contains(old.as_str()) {
                        return Err(format!("{}: {replace} holds no {old:?}", case.name));
                    }
                    let after = before.replacen(old.as_str(), new, 1);
                    let patch = diff(replace, before, &after);
                    files.insert(replace.clone(), after);
                    (
                        "edit_file".into(),
                        json!({ "path": replace, "patch": patch }),
                    )
                }
                Step::Call { name, arguments } => (name.clone(), arguments.clone()),
            };
            calls.push(json!({ "name": name, "arguments": arguments }));
        }
        turns.push(json!({ "content": content, "tool_calls": calls }));
    }
    Ok(Value::Array(turns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_form_expands_into_the_calls_a_model_sends() {
        let case = parse(
            "c",
            r#"{"name": "c", "about": "a", "fixture": "demo", "task": "t",
                "script": [["Looking.", {"plan": "start"}, {"shell": "pytest"}],
                           [{"replace": "a.py", "old": "x = 1", "new": "x = 2"}, {"read": "a.py"}],
                           [{"name": "ripgrep", "arguments": "{bad"}, {"complete": "done"}]],
                "expect": {"outcome": "success"}}"#,
        )
        .expect("case");
        let files = BTreeMap::from([("a.py".to_string(), "a = 0\nx = 1\nb = 2\n".to_string())]);
        let script = expand(&case, files).expect("script");
        assert_eq!(script[0]["content"], "Looking.");
        assert_eq!(script[0]["tool_calls"][0]["name"], "update_plan");
        assert_eq!(
            script[0]["tool_calls"][0]["arguments"]["items"][0]["status"],
            "in_progress"
        );
        assert_eq!(script[0]["tool_calls"][1]["arguments"]["command"], "pytest");
        let patch = script[1]["tool_calls"][0]["arguments"]["patch"]
            .as_str()
            .expect("patch");
        assert!(
            patch.starts_with("--- a/a.py\n+++ b/a.py\n@@ -1,3 +1,3 @@"),
            "{patch}"
        );
        assert!(patch.contains("-x = 1\n+x = 2\n"), "{patch}");
        assert_eq!(
            script[2]["tool_calls"][0]["arguments"], "{bad",
            "raw arguments kept"
        );
        assert_eq!(script[2]["tool_calls"][1]["name"], "request_completion");
        // The scripted source reads what this writes.
        crate::model::ScriptedSource::from_json(&script.to_string()).expect("a valid script");
    }

    #[test]
    fn edits_follow_each_other_and_bad_cases_say_why() {
        let case = parse(
            "c",
            r#"{"name": "c", "about": "a", "fixture": "demo", "task": "t",
                "script": [[{"replace": "a.py", "old": "1", "new": "2"}], [{"replace": "a.py", "old": "2", "new": "3"}]],
                "expect": {}}"#,
        )
        .expect("case");
        let files = BTreeMap::from([("a.py".to_string(), "x = 1\n".to_string())]);
        let script = expand(&case, files.clone()).expect("script");
        assert!(
            script[1]["tool_calls"][0]["arguments"]["patch"]
                .as_str()
                .expect("patch")
                .contains("-x = 2\n+x = 3")
        );
        let mut missing = case.clone();
        missing.script[1] = vec![Step::Replace {
            replace: "a.py".into(),
            old: "nowhere".into(),
            new: "x".into(),
        }];
        assert!(
            expand(&missing, files.clone())
                .expect_err("no such text")
                .contains("holds no")
        );
        missing.script[0] = vec![Step::Plan {
            plan: "later".into(),
        }];
        assert!(
            expand(&missing, files)
                .expect_err("bad plan")
                .contains("start, work or done")
        );
        assert!(parse("other", r#"{"name": "c"}"#).is_err());
        let e = parse(
            "other",
            r#"{"name": "c", "about": "a", "fixture": "demo", "task": "t", "script": [], "expect": {}}"#,
        )
        .expect_err("name");
        assert!(e.contains("its name says"), "{e}");
    }
}
