//! A case's verdict from what its run left (report and events) against what
//! the case expects: every miss said in words, unrelated changes counted.
//! No process or file here.

use serde_json::Value;

use super::case::{Expect, Seen};

/// What a run showed, read from its report and its events.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Observed {
    pub outcome: String,
    pub verified: bool,
    pub changed: Vec<String>,
    /// (tool, ok, result) of every call that ran or was answered.
    pub tools: Vec<(String, bool, String)>,
    /// (tool, reason) of every call refused unrun.
    pub refused: Vec<(String, String)>,
    /// Whether each completion verification passed, in order.
    pub completions: Vec<bool>,
    /// What failed checks said (their failure and first error).
    pub check_text: String,
    /// Ask mode.
    pub answer: Option<String>,
    pub citations_found: usize,
}

impl Observed {
    /// Reads the events (one JSON object a line) into `self`.
    pub(crate) fn read_events(&mut self, events: &str) {
        for line in events.lines() {
            let Ok(e) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            match e.get("type").and_then(Value::as_str) {
                Some("tool.finished") => self.tools.push((
                    s("name"),
                    e.get("ok").and_then(Value::as_bool).unwrap_or(false),
                    s("result"),
                )),
                Some("policy.refused") => self.refused.push((s("name"), s("reason"))),
                Some("verification.finished") if e["reason"] == "completion" => self
                    .completions
                    .push(e.get("passed").and_then(Value::as_bool).unwrap_or(false)),
                Some("verification.check") if e["check"]["passed"] == false => {
                    for k in ["failure", "first_error"] {
                        if let Some(t) = e["check"][k].as_str() {
                            self.check_text.push_str(t);
                            self.check_text.push('\n');
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// The verdict of one case.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verdict {
    pub misses: Vec<String>,
    /// Changed files the case did not expect.
    pub unrelated: Vec<String>,
    /// Refusals and failed calls the case expected, and how many were seen.
    pub expected_refusals: usize,
    pub refusals_seen: usize,
}

fn matches(seen: &Seen, tool: &str, text: &str) -> bool {
    seen.tool == tool && seen.contains.as_deref().is_none_or(|c| text.contains(c))
}

fn describe(seen: &Seen) -> String {
    match &seen.contains {
        Some(c) => format!("{} with {c:?}", seen.tool),
        None => seen.tool.clone(),
    }
}

pub(crate) fn judge(expect: &Expect, o: &Observed) -> Verdict {
    let mut v = Verdict::default();
    let mut miss = |m: String| v.misses.push(m);
    if let Some(outcome) = &expect.outcome
        && *outcome != o.outcome
    {
        miss(format!("outcome {:?}, expected {outcome:?}", o.outcome));
    }
    if let Some(verified) = expect.verified
        && verified != o.verified
    {
        miss(format!("verified {}, expected {verified}", o.verified));
    }
    for s in &expect.refused {
        if !o.refused.iter().any(|(t, r)| matches(s, t, r)) {
            miss(format!("no refusal of {}", describe(s)));
        }
    }
    for s in &expect.failed {
        if !o.tools.iter().any(|(t, ok, r)| !ok && matches(s, t, r)) {
            miss(format!("no failed call of {}", describe(s)));
        }
    }
    for s in &expect.results {
        if !o.tools.iter().any(|(t, _, r)| matches(s, t, r)) {
            miss(format!("no result of {}", describe(s)));
        }
    }
    for s in &expect.results_not {
        if o.tools.iter().any(|(t, _, r)| matches(s, t, r)) {
            miss(format!("the model was shown {}", describe(s)));
        }
    }
    if let Some(n) = expect.completions
        && n != o.completions.len()
    {
        miss(format!(
            "{} completion verifications, expected {n}",
            o.completions.len()
        ));
    }
    if let Some(n) = expect.completions_failed {
        let failed = o.completions.iter().filter(|p| !**p).count();
        if n != failed {
            miss(format!(
                "{failed} failed completion verifications, expected {n}"
            ));
        }
    }
    if let Some(text) = &expect.verification_contains
        && !o.check_text.contains(text.as_str())
    {
        miss(format!("no failed check says {text:?}"));
    }
    if let Some(max) = expect.max_result_bytes
        && let Some((t, _, r)) = o.tools.iter().find(|(_, _, r)| r.len() > max)
    {
        miss(format!(
            "a {t} result of {} bytes reached the model (at most {max})",
            r.len()
        ));
    }
    if let Some(text) = &expect.answer_contains
        && !o
            .answer
            .as_deref()
            .unwrap_or_default()
            .contains(text.as_str())
    {
        miss(format!("the answer does not say {text:?}"));
    }
    if let Some(n) = expect.citations
        && n != o.citations_found
    {
        miss(format!(
            "{} citations checked out, expected {n}",
            o.citations_found
        ));
    }
    if let Some(changed) = &expect.changed {
        v.unrelated = o
            .changed
            .iter()
            .filter(|f| !changed.contains(f))
            .cloned()
            .collect();
        for f in changed {
            if !o.changed.contains(f) {
                v.misses.push(format!("{f} did not change"));
            }
        }
        if !v.unrelated.is_empty() {
            v.misses
                .push(format!("unrelated changes: {}", v.unrelated.join(", ")));
        }
    }
    v.expected_refusals = expect.refused.len() + expect.failed.len();
    v.refusals_seen = expect
        .refused
        .iter()
        .filter(|s| o.refused.iter().any(|(t, r)| matches(s, t, r)))
        .count()
        + expect
            .failed
            .iter()
            .filter(|s| o.tools.iter().any(|(t, ok, r)| !ok && matches(s, t, r)))
            .count();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expect(json: &str) -> Expect {
        serde_json::from_str(json).expect("expect")
    }

    #[test]
    fn events_are_read_into_what_a_case_can_expect() {
        let events = r#"{"type":"tool.finished","name":"run_shell","ok":true,"result":"6 passed"}
{"type":"policy.refused","name":"run_shell","reason":"a plan is required"}
{"type":"verification.check","check":{"name":"t","passed":false,"failure":"no tests ran"}}
{"type":"verification.finished","reason":"completion","passed":false}
{"type":"verification.finished","reason":"baseline","passed":false}
{"type":"verification.finished","reason":"completion","passed":true}
not json"#;
        let mut o = Observed::default();
        o.read_events(events);
        assert_eq!(o.tools, [("run_shell".into(), true, "6 passed".into())]);
        assert_eq!(
            o.refused,
            [("run_shell".into(), "a plan is required".into())]
        );
        assert_eq!(
            o.completions,
            [false, true],
            "the baseline is not a completion"
        );
        assert!(o.check_text.contains("no tests ran"));
    }

    #[test]
    fn every_miss_is_said_and_unrelated_changes_are_counted() {
        let e = expect(
            r#"{"outcome": "success", "verified": true, "changed": ["a.py"],
                "refused": [{"tool": "run_shell", "contains": "plan"}],
                "failed": [{"tool": "edit_file"}],
                "results": [{"tool": "run_shell", "contains": "NO-NETWORK"}],
                "results_not": [{"tool": "read_file", "contains": "root:"}],
                "completions": 1, "completions_failed": 0, "max_result_bytes": 10}"#,
        );
        let good = Observed {
            outcome: "success".into(),
            verified: true,
            changed: vec!["a.py".into()],
            tools: vec![
                ("run_shell".into(), true, "NO-NETWORK".into()),
                ("edit_file".into(), false, "outside".into()),
            ],
            refused: vec![("run_shell".into(), "a plan first".into())],
            completions: vec![true],
            ..Observed::default()
        };
        let v = judge(&e, &good);
        assert!(v.misses.is_empty(), "{:?}", v.misses);
        assert_eq!((v.expected_refusals, v.refusals_seen), (2, 2));

        let bad = Observed {
            outcome: "failure".into(),
            changed: vec!["a.py".into(), "b.py".into()],
            tools: vec![("read_file".into(), true, "root:x:0:0 and much more".into())],
            completions: vec![false],
            ..Observed::default()
        };
        let v = judge(&e, &bad);
        let text = v.misses.join("\n");
        for said in [
            "outcome \"failure\"",
            "verified false",
            "no refusal of run_shell with \"plan\"",
            "no failed call of edit_file",
            "no result of run_shell",
            "the model was shown read_file",
            "1 failed completion",
            "bytes reached the model",
            "unrelated changes: b.py",
        ] {
            assert!(text.contains(said), "{said}: {text}");
        }
        assert_eq!(v.unrelated, ["b.py"]);
        assert_eq!(v.refusals_seen, 0);
        let untouched = Observed {
            changed: Vec::new(),
            ..good.clone()
        };
        assert!(
            judge(&e, &untouched)
                .misses
                .iter()
                .any(|m| m == "a.py did not change")
        );
    }

    #[test]
    fn ask_answers_are_judged_by_their_text_and_checked_citations() {
        let e = expect(r#"{"answer_contains": "floors", "citations": 1, "changed": []}"#);
        let o = Observed {
            answer: Some("It floors the division (pagination.py:8).".into()),
            citations_found: 1,
            ..Observed::default()
        };
        assert!(judge(&e, &o).misses.is_empty());
        let wrong = Observed {
            answer: Some("No idea.".into()),
            ..Observed::default()
        };
        assert_eq!(judge(&e, &wrong).misses.len(), 2);
    }
}
