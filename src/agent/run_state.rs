//! The run state: what every request carries after the conversation, built
//! afresh each turn and never compacted — the budget, the plan with its
//! statuses and notes, the files read and changed (with the diff stat
//! against the baseline), the latest verification with each failing check's
//! telling lines, the recovery so far, and what the person typed.
//!
//! Every part is capped, with a count of what is beyond, so the whole stays
//! within a few thousand tokens whatever the run did.

use serde::{Deserialize, Serialize};

use super::evidence::{self, Evidence, clip};
use super::plan::Plan;
use crate::protocol::{PlanStatus, VerificationReason};

/// Files read kept in the state (the most recent).
const KEEP_READ: usize = 100;
/// Changed files kept in the state.
const KEEP_CHANGES: usize = 200;
/// Recovery notes and follow-ups kept.
const KEEP_NOTES: usize = 5;
/// Characters of each part as shown.
const PLAN_CHARS: usize = 4000;
const FILES_CHARS: usize = 1200;
const VERIFICATION_CHARS: usize = 3000;
const NOTES_CHARS: usize = 3000;
/// Failing checks shown with their lines; the others are named.
const DETAILED_CHECKS: usize = 4;
/// Telling lines kept of each failing check.
pub(crate) const CHECK_LINES: usize = 6;

/// One file of the workspace diff against the baseline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub added: u32,
    pub removed: u32,
}

/// One check of the latest verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CheckDigest {
    pub name: String,
    pub exit_code: Option<i32>,
    pub passed: bool,
    /// Why it failed beyond its exit code (zero tests, a timeout).
    pub failure: Option<String>,
    pub evidence: Evidence,
}

/// The latest verification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct VerificationDigest {
    pub attempt: u32,
    pub reason: VerificationReason,
    pub passed: bool,
    pub checks: Vec<CheckDigest>,
}

/// The budget as the request shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetView {
    pub turn: u32,
    pub max_turns: u32,
    pub tokens_used: u64,
    pub max_tokens: u64,
    /// What was spent and the cost budget, in millionths of a dollar.
    pub cost: Option<(u64, u64)>,
    /// Estimated tokens of this request.
    pub context_tokens: u64,
    pub context_limit: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RunState {
    /// Most recent last.
    files_read: Vec<String>,
    files_read_dropped: usize,
    changes: Vec<FileChange>,
    /// Changed files beyond those kept: (files, added, removed).
    changes_beyond: (usize, u64, u64),
    verification: Option<VerificationDigest>,
    recovery: Vec<String>,
    recovery_dropped: usize,
    follow_ups: Vec<String>,
    follow_ups_dropped: usize,
}

impl RunState {
    pub(crate) fn file_read(&mut self, path: &str) {
        let path = clip(path.trim_start_matches("./"), 200);
        self.files_read.retain(|p| *p != path);
        self.files_read.push(path);
        if self.files_read.len() > KEEP_READ {
            self.files_read.remove(0);
            self.files_read_dropped += 1;
        }
    }

    /// The workspace's whole diff stat against the baseline, replacing the last.
    pub(crate) fn set_changes(&mut self, mut files: Vec<FileChange>) {
        self.changes_beyond = (0, 0, 0);
        if files.len() > KEEP_CHANGES {
            for f in files.drain(KEEP_CHANGES..) {
                self.changes_beyond.0 += 1;
                self.changes_beyond.1 += u64::from(f.added);
                self.changes_beyond.2 += u64::from(f.removed);
            }
        }
        for f in &mut files {
            f.path = clip(&f.path, 200);
        }
        self.changes = files;
    }

    pub(crate) fn set_verification(&mut self, digest: VerificationDigest) {
        self.verification = Some(digest);
    }

    pub fn verification(&self) -> Option<&VerificationDigest> {
        self.verification.as_ref()
    }

    pub(crate) fn recovered(&mut self, note: String) {
        push_bounded(
            &mut self.recovery,
            &mut self.recovery_dropped,
            clip(&note, 600),
        );
    }

    pub fn follow_up(&mut self, text: &str) {
        push_bounded(
            &mut self.follow_ups,
            &mut self.follow_ups_dropped,
            clip(text, 1000),
        );
    }

    /// The message every request ends with.
    pub fn render(&self, plan: &Plan, budget: BudgetView) -> String {
        let mut out = String::from(
            "Run state (refreshed for every request; it is never compacted, unlike the conversation above):\n",
        );
        out.push_str(&budget_line(budget));
        out.push_str(&plan_part(plan));
        out.push_str(&self.files_part());
        out.push_str(&self.verification_part());
        if !self.recovery.is_empty() {
            let mut part = Part::new("Recovery so far:", NOTES_CHARS);
            part.earlier(self.recovery_dropped);
            for note in &self.recovery {
                part.line(&format!("- {note}"));
            }
            out.push_str(&part.finish());
        }
        if !self.follow_ups.is_empty() {
            let mut part = Part::new(
                "Messages from the person running you (oldest first):",
                NOTES_CHARS,
            );
            part.earlier(self.follow_ups_dropped);
            for text in &self.follow_ups {
                part.line(&format!("- {}", text.replace('\n', "\n  ")));
            }
            out.push_str(&part.finish());
        }
        out
    }

    fn files_part(&self) -> String {
        let mut out = String::new();
        if !self.files_read.is_empty() {
            // The most recent that fit, in the order they were read.
            let mut shown: Vec<&str> = Vec::new();
            let mut len = 0;
            for path in self.files_read.iter().rev() {
                if len + path.len() + 2 > FILES_CHARS {
                    break;
                }
                len += path.len() + 2;
                shown.push(path);
            }
            shown.reverse();
            let earlier = self.files_read_dropped + self.files_read.len() - shown.len();
            out.push_str("Files read (most recent last): ");
            if earlier > 0 {
                out.push_str(&format!("({earlier} earlier ones not shown) "));
            }
            out.push_str(&shown.join(", "));
            out.push('\n');
        }
        if self.changes.is_empty() {
            out.push_str("Files changed against the baseline: none yet.\n");
            return out;
        }
        let files = self.changes.len() + self.changes_beyond.0;
        let added: u64 =
            self.changes.iter().map(|c| u64::from(c.added)).sum::<u64>() + self.changes_beyond.1;
        let removed: u64 = self
            .changes
            .iter()
            .map(|c| u64::from(c.removed))
            .sum::<u64>()
            + self.changes_beyond.2;
        let mut part = Part::new(
            &format!(
                "Files changed against the baseline ({files} file{}, +{added} −{removed}):",
                if files == 1 { "" } else { "s" }
            ),
            FILES_CHARS,
        );
        for c in &self.changes {
            part.line(&format!("- {} +{} −{}", c.path, c.added, c.removed));
        }
        part.beyond(self.changes_beyond.0);
        out.push_str(&part.finish());
        out
    }

    fn verification_part(&self) -> String {
        let Some(v) = &self.verification else {
            return "Latest verification: none yet.\n".to_string();
        };
        let reason = match v.reason {
            VerificationReason::Baseline => "of the baseline, before your changes",
            VerificationReason::Completion => "of your completion request",
            VerificationReason::AfterRestore => "after restoring the validated checkpoint",
        };
        let verdict = if v.passed { "passed" } else { "FAILED" };
        let mut part = Part::new(
            &format!(
                "Latest verification (attempt {}, {reason}): {verdict}",
                v.attempt
            ),
            VERIFICATION_CHARS,
        );
        let passing: Vec<&str> = v
            .checks
            .iter()
            .filter(|c| c.passed)
            .map(|c| c.name.as_str())
            .collect();
        let failing: Vec<&CheckDigest> = v.checks.iter().filter(|c| !c.passed).collect();
        if !passing.is_empty() {
            part.line(&format!("- passed: {}", passing.join(", ")));
        }
        if failing.len() > DETAILED_CHECKS {
            let names: Vec<&str> = failing[DETAILED_CHECKS..]
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            part.line(&format!(
                "- also FAILED (not detailed here): {}",
                names.join(", ")
            ));
        }
        // Each detailed check gets its share, so one cannot crowd out the others.
        let detailed = failing.len().min(DETAILED_CHECKS);
        let share = VERIFICATION_CHARS.saturating_sub(part.text.len()) / detailed.max(1);
        for c in failing.iter().take(DETAILED_CHECKS) {
            let exit = c.exit_code.map_or("none".to_string(), |e| e.to_string());
            let why = c
                .failure
                .as_deref()
                .map(|f| format!(" — {}", clip(f, 200)))
                .unwrap_or_default();
            let mut check = Part::new(&format!("- {} FAILED, exit {exit}{why}", c.name), share);
            let e = &c.evidence;
            let mut facts = Vec::new();
            super::discovery::push_list(
                &mut facts,
                "failing tests",
                e.failing_tests.clone(),
                e.more_tests,
            );
            for f in facts {
                check.line(&format!("    {f}"));
            }
            for line in &e.lines {
                check.line(&format!("    {line}"));
            }
            check.beyond(e.more_lines);
            part.text.push_str(&check.finish());
        }
        part.finish()
    }
}

/// A digest of one check's output.
pub(crate) fn digest_check(
    name: &str,
    exit_code: Option<i32>,
    passed: bool,
    failure: Option<&str>,
    output: &str,
) -> CheckDigest {
    CheckDigest {
        name: clip(name, 64),
        exit_code,
        passed,
        failure: failure.map(|f| clip(f, 300)),
        evidence: if passed {
            Evidence::default()
        } else {
            evidence::extract(output, CHECK_LINES)
        },
    }
}

fn push_bounded(list: &mut Vec<String>, dropped: &mut usize, item: String) {
    list.push(item);
    if list.len() > KEEP_NOTES {
        list.remove(0);
        *dropped += 1;
    }
}

fn budget_line(b: BudgetView) -> String {
    let turns_left = b.max_turns.saturating_sub(b.turn);
    let tokens_left = b.max_tokens.saturating_sub(b.tokens_used);
    let cost = b.cost.map_or(String::new(), |(used, max)| {
        format!(
            "cost {} of {}; ",
            crate::protocol::format_usd(used),
            crate::protocol::format_usd(max)
        )
    });
    format!(
        "Budget: turn {} of {} ({turns_left} left after this one); tokens used {} of {} ({} left); {cost}\
         this request ≈ {} of the {}-token context (older actions are compacted at 75 %, the run stops at 90 %).\n",
        b.turn,
        b.max_turns,
        b.tokens_used,
        b.max_tokens,
        tokens_left,
        b.context_tokens,
        b.context_limit
    )
}

fn plan_part(plan: &Plan) -> String {
    if plan.is_empty() {
        return "Plan: none yet (update_plan is required before edit_file or run_shell).\n"
            .to_string();
    }
    let done = plan.items.len() - plan.unfinished().len();
    let mut part = Part::new(
        &format!("Plan ({done} of {} done):", plan.items.len()),
        PLAN_CHARS,
    );
    for item in &plan.items {
        let status = match item.status {
            PlanStatus::Pending => "pending",
            PlanStatus::InProgress => "in_progress",
            PlanStatus::Done => "done",
        };
        let notes = item
            .notes
            .as_deref()
            .filter(|n| !n.trim().is_empty())
            .map(|n| format!(" — notes: {}", clip(n, 300)))
            .unwrap_or_default();
        part.line(&format!(
            "- [{status}] {}: {}{notes}",
            clip(&item.id, 40),
            clip(&item.content, 200)
        ));
    }
    part.finish()
}

/// One capped part: a heading, lines while they fit, then a count of the rest.
struct Part {
    text: String,
    cap: usize,
    omitted: usize,
}

impl Part {
    fn new(heading: &str, cap: usize) -> Self {
        Self {
            text: format!("{heading}\n"),
            cap,
            omitted: 0,
        }
    }

    fn earlier(&mut self, n: usize) {
        if n > 0 {
            self.line(&format!("(+{n} earlier ones not kept)"));
        }
    }

    fn beyond(&mut self, n: usize) {
        self.omitted += n;
    }

    fn line(&mut self, line: &str) {
        if self.omitted > 0 || self.text.len() + line.len() + 1 > self.cap {
            self.omitted += 1;
            return;
        }
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn finish(mut self) -> String {
        if self.omitted > 0 {
            self.text
                .push_str(&format!("    (+{} more not shown)\n", self.omitted));
        }
        self.text
    }
}

#[cfg(test)]
#[path = "run_state_tests.rs"]
mod tests;
