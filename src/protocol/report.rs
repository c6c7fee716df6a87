//! The report of a run (`report.json`): a superset of the headless result
//! object, with the same field names, plus phase durations.

use serde::{Deserialize, Serialize};

use super::event::{CheckReport, Outcome};
use super::model::ModelId;
use super::source::SourceState;

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
    /// The source repository as the run found it: its HEAD commit and the
    /// changes of its working tree that the baseline includes.
    #[serde(default)]
    pub source: SourceState,
    /// What the agent said it did when it asked for completion (its last
    /// request), if it asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// The source repository at the start of a run. The baseline is the working
/// tree as it was (tracked files as modified, untracked files not ignored),
/// which can differ from HEAD: `modified` and `untracked` count the files
/// where it does.
/// The repository's own configuration (`.minicoder.json`, `.minicoder/`)
/// and how far a run honoured it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectTrust {
    /// The configuration's hash (trust is given at it).
    pub hash: String,
    /// Whether the person trusts the repository at that hash.
    pub trusted: bool,
    /// Trusted with network for the bootstrap and the recipe.
    #[serde(default)]
    pub network: bool,
    /// What needed trust and was not honoured, one line each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
    /// Input tokens the providers served from their prompt caches.
    #[serde(default)]
    pub cached: u64,
    /// What the run cost, in millionths of a dollar, when every reply's
    /// model has a price in `config.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<u64>,
    /// Some reply's counts were estimated (its provider reported none).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
}

impl TokenTotals {
    /// Adds one reply's counts and, when priced, its cost (`None` once any
    /// reply had no price); counts saturate rather than overflow.
    pub fn add(&mut self, usage: &super::model::Usage, cost_micros: Option<u64>, first: bool) {
        self.input = self.input.saturating_add(usage.input);
        self.output = self.output.saturating_add(usage.output);
        self.cached = self.cached.saturating_add(usage.cached.min(usage.input));
        self.estimated |= usage.estimated;
        self.cost_micros = match (first, self.cost_micros, cost_micros) {
            (true, _, cost) => cost,
            (false, Some(sum), Some(cost)) => Some(sum.saturating_add(cost)),
            _ => None,
        };
    }

    /// `12.3k in (8.0k cached), 1.2k out, $0.04` — `≈` first when some
    /// counts were estimated.
    pub fn describe(&self) -> String {
        use super::model::{format_tokens, format_usd};
        let approx = if self.estimated { "≈" } else { "" };
        let cached = if self.cached > 0 {
            format!(" ({} cached)", format_tokens(self.cached))
        } else {
            String::new()
        };
        let cost = self
            .cost_micros
            .map_or(String::new(), |c| format!(", {}", format_usd(c)));
        format!(
            "{approx}{} in{cached}, {} out{cost}",
            format_tokens(self.input),
            format_tokens(self.output)
        )
    }
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
    /// Setting the run up, from its start to its first event; split in `prepare`.
    #[serde(default)]
    pub prepare_ms: u64,
    #[serde(default)]
    pub prepare: PreparePhases,
    pub bootstrap_ms: u64,
    pub model_ms: u64,
    pub tools_ms: u64,
    pub verification_ms: u64,
    pub teardown_ms: u64,
}

/// Where the setting up of a run went. The containers start while the
/// workspace is copied: `sandbox_ms` is only the time the run waited for them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PreparePhases {
    /// Checking the inputs and the model, freezing the checks.
    pub inputs_ms: u64,
    /// Finding (or building) the project's image and its cache.
    pub image_ms: u64,
    /// Copying the source into the private workspace.
    pub copy_ms: u64,
    /// Taking the baseline checkpoint.
    pub checkpoint_ms: u64,
    /// Waiting for the verifier and the command container.
    pub sandbox_ms: u64,
    /// Checking that the image has every program the checks need.
    pub preflight_ms: u64,
    /// Set when the workspace came from a copy prepared after an earlier
    /// run (`copy_ms` is then the time refreshing it took).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prepared_copy: Option<PreparedCopy>,
}

/// What refreshing a prepared copy found changed in the source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PreparedCopy {
    /// Source paths copied again (changed or new since it was made).
    pub copied: u64,
    /// Paths it held that the source no longer gives.
    pub removed: u64,
    /// Waiting for it while it was still being prepared.
    pub waited_ms: u64,
    /// Listing the source and comparing every path with the copy's record.
    pub compare_ms: u64,
    /// Copying what changed and writing the baseline commit again.
    pub recopy_ms: u64,
}

/// The process exit code of an outcome: 0 success, 1 failure, 130 cancelled.
pub fn exit_code_for(outcome: Outcome) -> i32 {
    match outcome {
        Outcome::Success => 0,
        Outcome::Failure | Outcome::Budget => 1,
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
                ..Default::default()
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
            source: SourceState {
                head: Some("ab12".into()),
                dirty: true,
                modified: 1,
                untracked: 1,
            },
            summary: Some("fixed the off-by-one".into()),
        }
    }

    #[test]
    fn a_report_written_before_source_and_summary_still_parses() {
        let mut json = serde_json::to_value(sample()).expect("json");
        let object = json.as_object_mut().expect("object");
        object.remove("source");
        object.remove("summary");
        let old: RunReport = serde_json::from_value(json).expect("old report parses");
        assert_eq!(old.source, SourceState::default());
        assert_eq!(old.summary, None);
    }

    #[test]
    fn a_dirty_source_is_described_and_a_clean_one_is_not() {
        let mut s = sample().source;
        assert_eq!(
            s.dirty_notice().as_deref(),
            Some("baseline includes 1 modified and 1 untracked file not in HEAD")
        );
        s.modified = 3;
        s.untracked = 0;
        assert_eq!(
            s.dirty_notice().as_deref(),
            Some("baseline includes 3 modified files not in HEAD")
        );
        s.dirty = false;
        assert_eq!(s.dirty_notice(), None);
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
            "prepare_ms",
            "bootstrap_ms",
            "model_ms",
            "tools_ms",
            "verification_ms",
            "teardown_ms",
        ] {
            assert!(json["durations"].get(field).is_some(), "lacks {field}");
        }
        for field in [
            "inputs_ms",
            "image_ms",
            "copy_ms",
            "checkpoint_ms",
            "sandbox_ms",
            "preflight_ms",
        ] {
            assert!(
                json["durations"]["prepare"].get(field).is_some(),
                "lacks {field}"
            );
        }
        let back: RunReport = serde_json::from_value(json).expect("parse");
        assert_eq!(back, sample());
    }

    #[test]
    fn a_report_without_the_prepare_durations_still_reads() {
        let mut json = serde_json::to_value(sample()).expect("json");
        let durations = json["durations"].as_object_mut().expect("object");
        durations.remove("prepare_ms");
        durations.remove("prepare");
        let back: RunReport = serde_json::from_value(json).expect("parse");
        assert_eq!(back.durations.prepare, PreparePhases::default());
    }

    #[test]
    fn exit_codes_follow_the_spec() {
        assert_eq!(exit_code_for(Outcome::Success), 0);
        assert_eq!(exit_code_for(Outcome::Failure), 1);
        assert_eq!(exit_code_for(Outcome::Cancelled), 130);
    }
}
