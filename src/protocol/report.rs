//! The report of a run (`report.json`): a superset of the headless result
//! object, with the same field names, plus phase durations.

use serde::{Deserialize, Serialize};

use super::event::{CheckReport, Outcome};
use super::model::ModelId;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    pub run_id: String,
    pub outcome: Outcome,
    pub reason: String,
    pub exit_code: i32,
    pub repo: String,
    pub task: String,
    pub model: ModelId,
    pub turns: u32,
    pub tokens: TokenTotals,
    pub tool_calls: u32,
    pub verification: VerificationSummary,
    pub recovery: RecoverySummary,
    /// The changed paths, or the first of them when there are many.
    pub changed_files: Vec<String>,
    /// How many paths changed, when `changed_files` lists only the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_total: Option<u64>,
    pub artifact_dir: String,
    /// Path of `final.patch`.
    pub patch: String,
    pub duration_ms: u64,
    pub durations: PhaseDurations,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
}

/// The latest verification matrix. Each check serializes `name, command,
/// exit_code, passed, duration_ms` (and, when set, `failure`, `output_file`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerificationSummary {
    pub passed: bool,
    pub checks: Vec<CheckReport>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoverySummary {
    pub repair_cycles: u32,
    pub rollbacks: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseDurations {
    pub bootstrap_ms: u64,
    pub model_ms: u64,
    pub tools_ms: u64,
    pub verification_ms: u64,
    pub teardown_ms: u64,
}

/// The process exit code of an outcome: 0 success, 1 failure, 130 cancelled.
pub fn exit_code_for(outcome: Outcome) -> i32 {
    match outcome {
        Outcome::Success => 0,
        Outcome::Failure => 1,
        Outcome::Cancelled => 130,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RunReport {
        RunReport {
            run_id: "r1".into(),
            outcome: Outcome::Success,
            reason: "verified".into(),
            exit_code: exit_code_for(Outcome::Success),
            repo: "/src/repo".into(),
            task: "fix it".into(),
            model: ModelId {
                provider: "gemini".into(),
                model: "gemini-3.8-flash".into(),
            },
            turns: 3,
            tokens: TokenTotals {
                input: 100,
                output: 20,
            },
            tool_calls: 4,
            verification: VerificationSummary {
                passed: true,
                checks: vec![CheckReport {
                    name: "test".into(),
                    command: "pytest -q".into(),
                    exit_code: Some(0),
                    passed: true,
                    duration_ms: 812,
                    failure: None,
                    first_error: None,
                    output_file: Some("outputs/verify-1-test.txt".into()),
                }],
            },
            recovery: RecoverySummary::default(),
            changed_files: vec!["src/a.py".into()],
            changed_total: None,
            artifact_dir: "/state/runs/r1".into(),
            patch: "/state/runs/r1/final.patch".into(),
            duration_ms: 4000,
            durations: PhaseDurations::default(),
        }
    }

    #[test]
    fn report_has_every_headless_field_with_its_spec_name() {
        let json = serde_json::to_value(sample()).expect("json");
        for field in [
            "run_id",
            "outcome",
            "reason",
            "exit_code",
            "repo",
            "task",
            "model",
            "turns",
            "tokens",
            "tool_calls",
            "verification",
            "recovery",
            "changed_files",
            "artifact_dir",
            "patch",
            "duration_ms",
            "durations",
        ] {
            assert!(json.get(field).is_some(), "missing {field}");
        }
        assert_eq!(json["outcome"], "success");
        assert_eq!(json["model"]["provider"], "gemini");
        assert_eq!(json["model"]["model"], "gemini-3.8-flash");
        assert_eq!(json["tokens"]["input"], 100);
        assert_eq!(json["recovery"]["repair_cycles"], 0);
        assert_eq!(json["recovery"]["rollbacks"], 0);
        let check = &json["verification"]["checks"][0];
        for field in ["name", "command", "exit_code", "passed", "duration_ms"] {
            assert!(check.get(field).is_some(), "check lacks {field}");
        }
        for field in [
            "bootstrap_ms",
            "model_ms",
            "tools_ms",
            "verification_ms",
            "teardown_ms",
        ] {
            assert!(json["durations"].get(field).is_some(), "lacks {field}");
        }
        let back: RunReport = serde_json::from_value(json).expect("parse");
        assert_eq!(back, sample());
    }

    #[test]
    fn exit_codes_follow_the_spec() {
        assert_eq!(exit_code_for(Outcome::Success), 0);
        assert_eq!(exit_code_for(Outcome::Failure), 1);
        assert_eq!(exit_code_for(Outcome::Cancelled), 130);
    }
}
