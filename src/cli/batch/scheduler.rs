//! The batch's decisions, with no process, file or clock in them: which task
//! starts next (a run to resume before a new one), what a child's events and
//! exit make of its task, when the batch is over. The driver (`mod.rs`)
//! performs what this decides; every transition is unit-tested here.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::placement::{Placement, RunEnd};
use crate::agent::reducer::SANDBOX_FAILED;
use crate::protocol::TokenTotals;

/// What one task came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct TaskResult {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// success, failure, budget, cancelled, or error (no run came of it).
    pub outcome: String,
    /// The independent verifier passed the final state.
    pub verified: bool,
    pub reason: String,
    pub duration_ms: u64,
    pub turns: u32,
    pub tokens: TokenTotals,
    #[serde(default)]
    pub changed_files: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<String>,
    pub exit_code: i32,
    /// The run went on from an earlier go of the batch (`--resume`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resumed: bool,
    /// The model that answered last, PROVIDER:MODEL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The engine it ran on, when the batch spread its runs over several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

impl TaskResult {
    /// A task that never became a run.
    pub(crate) fn error(id: &str, reason: String, exit_code: i32) -> Self {
        Self {
            id: id.to_string(),
            run_id: None,
            outcome: "error".into(),
            verified: false,
            reason,
            duration_ms: 0,
            turns: 0,
            tokens: TokenTotals::default(),
            changed_files: Vec::new(),
            patch: None,
            artifacts: None,
            exit_code,
            resumed: false,
            model: None,
            engine: None,
        }
    }
}

/// One line of the batch's ledger (`ledger.jsonl`), appended as it happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
// A few entries a task: their size is of no matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Entry {
    /// A task's run began: from here on the task is resumed, never redone.
    Started {
        id: String,
        run_id: String,
        artifact_dir: String,
    },
    Finished(TaskResult),
}

/// A task running now.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Live {
    pub run_id: Option<String>,
    pub artifact_dir: Option<String>,
    pub turn: u32,
    pub tokens: u64,
    /// When it started, in the driver's milliseconds.
    pub started_ms: u64,
    /// It goes on from an earlier go of the batch.
    pub resuming: bool,
    /// The engine it runs on (placed by the batch).
    pub engine: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Slot {
    Queued,
    /// Began in an earlier go and did not finish: resumed, not redone.
    Interrupted {
        run_id: String,
        artifact_dir: String,
    },
    Running(Live),
    Done(TaskResult),
    /// Stopped in this go (Ctrl-C): `--resume` goes on with it.
    Stopped {
        run_id: Option<String>,
    },
}

/// What the driver starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Start {
    Fresh(usize),
    Resume { index: usize, run_id: String },
}

/// How a child ended, as the driver saw it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Exit {
    /// The run ended and wrote its report.
    Report(Box<TaskResult>),
    /// It ended without a report: no run began (a usage or setup error),
    /// or the child died.
    NoReport { reason: String, exit_code: i32 },
}

#[derive(Debug)]
pub(crate) struct Scheduler {
    pub ids: Vec<String>,
    pub slots: Vec<Slot>,
    pub parallel: usize,
    stopping: bool,
    /// Runs begun by an earlier go whose process is still going (a killed
    /// batch's child still cancelling): not resumed until it has ended,
    /// since the resume would be refused, or race it.
    held: BTreeSet<String>,
    /// The engines runs are spread over (none: the process's own).
    pub placement: Placement,
    /// Engines given up on since the driver last looked, with why.
    pub given_up: Vec<(String, String)>,
}

impl Scheduler {
    /// The tasks, with what an earlier go's ledger says of them.
    pub(crate) fn new(ids: Vec<String>, parallel: usize, ledger: &[Entry]) -> Self {
        let mut slots = vec![Slot::Queued; ids.len()];
        for entry in ledger {
            let id = match entry {
                Entry::Started { id, .. } => id,
                Entry::Finished(r) => &r.id,
            };
            let Some(i) = ids.iter().position(|x| x == id) else {
                continue;
            };
            slots[i] = match entry {
                Entry::Started {
                    run_id,
                    artifact_dir,
                    ..
                } => Slot::Interrupted {
                    run_id: run_id.clone(),
                    artifact_dir: artifact_dir.clone(),
                },
                // A task that never became a run (a setup error) is tried again.
                Entry::Finished(r) if r.outcome == "error" && r.run_id.is_none() => Slot::Queued,
                Entry::Finished(r) => Slot::Done(r.clone()),
            };
        }
        Self {
            ids,
            slots,
            parallel: parallel.max(1),
            stopping: false,
            held: BTreeSet::new(),
            placement: Placement::default(),
            given_up: Vec::new(),
        }
    }

    /// Runs go to these engines, as many at once as they take together
    /// (within the parallelism); none: the process's own engine.
    pub(crate) fn spread_over(mut self, placement: Placement) -> Self {
        if !placement.is_empty() {
            self.parallel = self.parallel.min(placement.capacity()).max(1);
        }
        self.placement = placement;
        self
    }

    /// The interrupted runs whose earlier process still goes on (see
    /// `held`), as the driver finds them now.
    pub(crate) fn hold(&mut self, still_going: BTreeSet<String>) {
        self.held = still_going;
    }

    /// The interrupted runs not yet resumed, by run id.
    pub(crate) fn interrupted(&self) -> Vec<&str> {
        self.slots
            .iter()
            .filter_map(|s| match s {
                Slot::Interrupted { run_id, .. } => Some(run_id.as_str()),
                _ => None,
            })
            .collect()
    }

    fn running(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Running(_)))
            .count()
    }

    /// What to start now (marked running): interrupted runs first, then
    /// tasks in file order, up to the parallelism; nothing once stopping.
    pub(crate) fn next_starts(&mut self, now_ms: u64) -> Vec<Start> {
        let mut starts = Vec::new();
        if self.stopping {
            return starts;
        }
        let mut free = self.parallel.saturating_sub(self.running());
        for pass in [true, false] {
            for i in 0..self.slots.len() {
                if free == 0 {
                    return starts;
                }
                let resume = match (&self.slots[i], pass) {
                    (Slot::Interrupted { run_id, .. }, true) if !self.held.contains(run_id) => true,
                    (Slot::Queued, false) => false,
                    _ => continue,
                };
                // An engine with room, or nothing starts now.
                let Some(engine) = self.placement.take() else {
                    return starts;
                };
                let mut live = Live {
                    started_ms: now_ms,
                    engine,
                    ..Live::default()
                };
                let start = match (resume, &self.slots[i]) {
                    (
                        true,
                        Slot::Interrupted {
                            run_id,
                            artifact_dir,
                        },
                    ) => {
                        live.run_id = Some(run_id.clone());
                        live.artifact_dir = Some(artifact_dir.clone());
                        live.resuming = true;
                        Start::Resume {
                            index: i,
                            run_id: run_id.clone(),
                        }
                    }
                    _ => Start::Fresh(i),
                };
                self.slots[i] = Slot::Running(live);
                starts.push(start);
                free -= 1;
            }
        }
        starts
    }

    /// An interrupted run found finished after all (its report was written
    /// before the batch stopped): taken as it is, not run again.
    pub(crate) fn adopt(&mut self, index: usize, result: TaskResult) {
        self.slots[index] = Slot::Done(result);
    }

    /// The child's run began; returns the ledger entry to append, the first
    /// time only (a resumed run began in an earlier go).
    pub(crate) fn started(
        &mut self,
        index: usize,
        run_id: &str,
        artifact_dir: &str,
    ) -> Option<Entry> {
        let Slot::Running(live) = &mut self.slots[index] else {
            return None;
        };
        let first = live.run_id.is_none();
        live.run_id = Some(run_id.to_string());
        live.artifact_dir = Some(artifact_dir.to_string());
        first.then(|| Entry::Started {
            id: self.ids[index].clone(),
            run_id: run_id.to_string(),
            artifact_dir: artifact_dir.to_string(),
        })
    }

    pub(crate) fn turn(&mut self, index: usize, turn: u32) {
        if let Slot::Running(live) = &mut self.slots[index] {
            live.turn = live.turn.max(turn);
        }
    }

    pub(crate) fn tokens(&mut self, index: usize, more: u64) {
        if let Slot::Running(live) = &mut self.slots[index] {
            live.tokens = live.tokens.saturating_add(more);
        }
    }

    /// A child ended. Returns the ledger entry to append, if the task is
    /// finished. A run cancelled because the batch is stopping stays
    /// resumable; a resume that could not begin is run afresh.
    pub(crate) fn exited(&mut self, index: usize, exit: Exit) -> Option<Entry> {
        let Slot::Running(live) = std::mem::replace(&mut self.slots[index], Slot::Queued) else {
            return None;
        };
        if let Some(engine) = &live.engine {
            let end = match &exit {
                Exit::Report(r) if r.outcome == "success" => RunEnd::Succeeded,
                Exit::Report(r) if r.reason.starts_with(SANDBOX_FAILED) => {
                    RunEnd::SandboxFailed(r.reason.clone())
                }
                _ => RunEnd::Failed,
            };
            if let Some(why) = self.placement.release(engine, end) {
                self.given_up.push((engine.clone(), why));
            }
        }
        match exit {
            Exit::Report(result) => {
                let mut result = *result;
                result.engine = live.engine.clone();
                if self.stopping && result.outcome == "cancelled" {
                    self.slots[index] = Slot::Stopped {
                        run_id: live.run_id,
                    };
                    return None;
                }
                result.resumed = live.resuming;
                self.slots[index] = Slot::Done(result.clone());
                Some(Entry::Finished(result))
            }
            Exit::NoReport { reason, exit_code } => {
                if self.stopping {
                    self.slots[index] = match live.run_id {
                        Some(run_id) => Slot::Stopped {
                            run_id: Some(run_id),
                        },
                        None => Slot::Queued,
                    };
                    return None;
                }
                if live.resuming {
                    // `resume` refused (no resume point, say): a new run.
                    self.slots[index] = Slot::Queued;
                    return None;
                }
                if let Some(run_id) = live.run_id {
                    // The child died mid-run: its run is resumed, once.
                    self.slots[index] = Slot::Interrupted {
                        run_id,
                        artifact_dir: live.artifact_dir.unwrap_or_default(),
                    };
                    return None;
                }
                let mut result = TaskResult::error(&self.ids[index], reason, exit_code);
                result.engine = live.engine;
                self.slots[index] = Slot::Done(result.clone());
                Some(Entry::Finished(result))
            }
        }
    }

    /// Ctrl-C: nothing new starts; what runs is told to stop by the driver.
    pub(crate) fn stop(&mut self) {
        self.stopping = true;
    }

    pub(crate) fn stopping(&self) -> bool {
        self.stopping
    }

    pub(crate) fn is_over(&self) -> bool {
        let running = self.running() > 0;
        let waiting = self
            .slots
            .iter()
            .any(|s| matches!(s, Slot::Queued | Slot::Interrupted { .. }));
        !running && (self.stopping || !waiting || self.placement.all_gone())
    }

    /// Every task has a result.
    pub(crate) fn all_done(&self) -> bool {
        self.slots.iter().all(|s| matches!(s, Slot::Done(_)))
    }

    pub(crate) fn results(&self) -> Vec<&TaskResult> {
        self.slots
            .iter()
            .filter_map(|s| match s {
                Slot::Done(r) => Some(r),
                _ => None,
            })
            .collect()
    }
}

/// How many runs at once whose containers run elsewhere: each is still a
/// process here (its model calls, file tools and checkpoints, a few hundred
/// MB with its copy): eight per core, and 512 MiB of available memory each.
pub(crate) fn capped_processes(asked: usize, cores: usize, available_bytes: Option<u64>) -> usize {
    const PER_RUN: u64 = 512 << 20;
    let by_memory = available_bytes
        .map(|b| usize::try_from(b / PER_RUN).unwrap_or(usize::MAX).max(1))
        .unwrap_or(usize::MAX);
    asked.max(1).min(cores.max(1) * 8).min(by_memory)
}

/// How many runs at once: what was asked, within the machine: two per core
/// (a run mostly waits on its model and Docker), and the memory three
/// containers of a run may hold (1 GiB each) from what is available.
pub(crate) fn capped_parallel(asked: usize, cores: usize, available_bytes: Option<u64>) -> usize {
    const PER_RUN: u64 = 3 << 30;
    let by_cpu = cores.max(1) * 2;
    let by_memory = available_bytes
        .map(|b| usize::try_from(b / PER_RUN).unwrap_or(usize::MAX).max(1))
        .unwrap_or(usize::MAX);
    asked.max(1).min(by_cpu).min(by_memory)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("t{i}")).collect()
    }

    fn result(id: &str, outcome: &str) -> TaskResult {
        TaskResult {
            outcome: outcome.into(),
            verified: outcome == "success",
            run_id: Some(format!("run-{id}")),
            ..TaskResult::error(id, String::new(), 0)
        }
    }

    #[test]
    fn starts_up_to_the_parallelism_in_order_and_refills_as_runs_end() {
        let mut s = Scheduler::new(ids(5), 2, &[]);
        assert_eq!(s.next_starts(0), [Start::Fresh(0), Start::Fresh(1)]);
        assert_eq!(s.next_starts(1), [], "both slots busy");
        let entry = s.started(0, "run-t0", "/a/run-t0");
        assert!(matches!(entry, Some(Entry::Started { .. })));
        s.turn(0, 3);
        s.turn(0, 2);
        s.tokens(0, 100);
        assert!(matches!(&s.slots[0], Slot::Running(l) if l.turn == 3 && l.tokens == 100));
        let entry = s.exited(0, Exit::Report(Box::new(result("t0", "success"))));
        assert!(matches!(entry, Some(Entry::Finished(r)) if r.id == "t0"));
        assert_eq!(s.next_starts(2), [Start::Fresh(2)]);
        assert!(!s.is_over());
    }

    #[test]
    fn a_ledger_from_an_earlier_go_resumes_begun_runs_first_and_redoes_no_finished_one() {
        let never_ran = TaskResult::error("t1", "no API key".into(), 1);
        let ledger = [
            Entry::Finished(never_ran),
            Entry::Finished(result("t0", "failure")),
            Entry::Started {
                id: "t2".into(),
                run_id: "run-t2".into(),
                artifact_dir: "/a/run-t2".into(),
            },
            Entry::Started {
                id: "gone".into(),
                run_id: "x".into(),
                artifact_dir: "/x".into(),
            },
        ];
        let mut s = Scheduler::new(ids(3), 2, &ledger);
        assert!(matches!(s.slots[0], Slot::Done(_)));
        assert_eq!(
            s.slots[1],
            Slot::Queued,
            "a task that never ran is tried again"
        );
        let starts = s.next_starts(0);
        assert_eq!(
            starts,
            [
                Start::Resume {
                    index: 2,
                    run_id: "run-t2".into()
                },
                Start::Fresh(1)
            ]
        );
        assert_eq!(
            s.started(2, "run-t2", "/a/run-t2"),
            None,
            "begun before: no second entry"
        );
        let entry = s.exited(2, Exit::Report(Box::new(result("t2", "success"))));
        assert!(matches!(entry, Some(Entry::Finished(r)) if r.resumed));
    }

    #[test]
    fn a_run_whose_earlier_process_still_goes_on_waits_while_the_others_start() {
        let ledger = [Entry::Started {
            id: "t0".into(),
            run_id: "r0".into(),
            artifact_dir: "/a".into(),
        }];
        let mut s = Scheduler::new(ids(2), 2, &ledger);
        assert_eq!(s.interrupted(), ["r0"]);
        s.hold(BTreeSet::from(["r0".to_string()]));
        assert_eq!(s.next_starts(0), [Start::Fresh(1)], "the held run waits");
        assert!(!s.is_over(), "a held run is still to be resumed");
        s.exited(1, Exit::Report(Box::new(result("t1", "success"))));
        assert_eq!(s.next_starts(1), [], "still held");
        assert!(!s.is_over());
        // Its process ended: resumed, not begun again.
        s.hold(BTreeSet::new());
        assert_eq!(
            s.next_starts(2),
            [Start::Resume {
                index: 0,
                run_id: "r0".into()
            }]
        );
        assert!(s.interrupted().is_empty());
    }

    #[test]
    fn a_resume_that_cannot_begin_runs_afresh_and_a_child_that_dies_mid_run_is_resumed() {
        let ledger = [Entry::Started {
            id: "t0".into(),
            run_id: "r0".into(),
            artifact_dir: "/a".into(),
        }];
        let mut s = Scheduler::new(ids(2), 1, &ledger);
        assert_eq!(
            s.next_starts(0),
            [Start::Resume {
                index: 0,
                run_id: "r0".into()
            }]
        );
        let no = Exit::NoReport {
            reason: "nothing to resume".into(),
            exit_code: 2,
        };
        assert_eq!(s.exited(0, no), None);
        assert_eq!(s.next_starts(1), [Start::Fresh(0)]);
        s.started(0, "r1", "/b");
        let died = Exit::NoReport {
            reason: "killed".into(),
            exit_code: -9,
        };
        assert_eq!(s.exited(0, died), None);
        assert_eq!(
            s.next_starts(2),
            [Start::Resume {
                index: 0,
                run_id: "r1".into()
            }]
        );
    }

    #[test]
    fn a_task_that_never_becomes_a_run_is_an_error_result() {
        let mut s = Scheduler::new(ids(1), 1, &[]);
        s.next_starts(0);
        let entry = s.exited(
            0,
            Exit::NoReport {
                reason: "the repository does not exist".into(),
                exit_code: 2,
            },
        );
        assert!(
            matches!(entry, Some(Entry::Finished(r)) if r.outcome == "error" && r.exit_code == 2)
        );
        assert!(s.is_over());
        assert!(s.all_done());
    }

    #[test]
    fn stopping_starts_nothing_and_keeps_cancelled_runs_resumable() {
        let mut s = Scheduler::new(ids(4), 2, &[]);
        s.next_starts(0);
        s.started(0, "r0", "/a");
        s.stop();
        assert_eq!(s.next_starts(1), []);
        assert!(!s.is_over(), "two still running");
        assert_eq!(
            s.exited(0, Exit::Report(Box::new(result("t0", "cancelled")))),
            None
        );
        assert!(matches!(&s.slots[0], Slot::Stopped { run_id: Some(r) } if r == "r0"));
        let no = Exit::NoReport {
            reason: "signal".into(),
            exit_code: 130,
        };
        assert_eq!(s.exited(1, no), None);
        assert_eq!(
            s.slots[1],
            Slot::Queued,
            "never began: starts afresh next time"
        );
        assert!(s.is_over());
        assert!(!s.all_done());
    }

    #[test]
    fn runs_go_to_engines_that_answer_and_a_gone_engine_takes_no_more() {
        let engines = Placement::new(vec![("farm".into(), 1), ("here".into(), 1)]);
        let mut s = Scheduler::new(ids(3), 4, &[]).spread_over(engines);
        assert_eq!(s.parallel, 2, "as many as the engines take");
        assert_eq!(s.next_starts(0), [], "no engine has answered");
        assert!(!s.is_over());
        assert_eq!(s.placement.start_asking(), ["farm", "here"]);
        s.placement.answered("farm", Ok(()));
        s.placement.answered("here", Ok(()));
        assert_eq!(s.next_starts(1), [Start::Fresh(0), Start::Fresh(1)]);
        let on = |s: &Scheduler, i: usize| match &s.slots[i] {
            Slot::Running(l) => l.engine.clone(),
            Slot::Done(r) => r.engine.clone(),
            _ => None,
        };
        assert_eq!(on(&s, 0).as_deref(), Some("farm"));
        assert_eq!(on(&s, 1).as_deref(), Some("here"));
        // farm's run fails: farm takes nothing until it answers again.
        let entry = s.exited(0, Exit::Report(Box::new(result("t0", "failure"))));
        assert!(matches!(entry, Some(Entry::Finished(r)) if r.engine.as_deref() == Some("farm")));
        assert_eq!(s.next_starts(2), []);
        assert_eq!(s.placement.start_asking(), ["farm"]);
        s.placement
            .answered("farm", Err("connection refused".into()));
        assert_eq!(s.next_starts(3), [], "farm is gone and here is busy");
        s.exited(1, Exit::Report(Box::new(result("t1", "success"))));
        assert_eq!(s.next_starts(4), [Start::Fresh(2)]);
        assert_eq!(
            on(&s, 2).as_deref(),
            Some("here"),
            "the batch goes on elsewhere"
        );
        s.exited(2, Exit::Report(Box::new(result("t2", "success"))));
        assert!(s.is_over() && s.all_done());
    }

    #[test]
    fn an_engine_whose_sandbox_keeps_failing_is_given_up_and_said_once() {
        let engines = Placement::new(vec![("farm".into(), 1), ("here".into(), 1)]);
        let mut s = Scheduler::new(ids(6), 4, &[]).spread_over(engines);
        s.placement.start_asking();
        s.placement.answered("farm", Ok(()));
        s.placement.answered("here", Ok(()));
        let broken = |id: &str| {
            let mut r = result(id, "failure");
            r.reason = format!("{SANDBOX_FAILED}: no such image");
            Exit::Report(Box::new(r))
        };
        let ask_all = |s: &mut Scheduler| {
            for name in s.placement.start_asking() {
                s.placement.answered(&name, Ok(()));
            }
        };
        assert_eq!(s.next_starts(0), [Start::Fresh(0), Start::Fresh(1)]);
        s.exited(1, Exit::Report(Box::new(result("t1", "failure"))));
        assert!(
            s.given_up.is_empty(),
            "a model's failure is not the engine's"
        );
        s.exited(0, broken("t0"));
        ask_all(&mut s);
        assert_eq!(s.next_starts(1), [Start::Fresh(2), Start::Fresh(3)]);
        s.exited(2, broken("t2"));
        assert!(s.given_up.is_empty(), "twice");
        ask_all(&mut s);
        assert_eq!(s.next_starts(2), [Start::Fresh(4)]);
        s.exited(4, broken("t4"));
        assert_eq!(s.given_up.len(), 1);
        assert_eq!(s.given_up[0].0, "farm");
        ask_all(&mut s);
        assert_eq!(s.next_starts(3), [], "farm is given up, here is busy");
        s.exited(3, Exit::Report(Box::new(result("t3", "success"))));
        assert_eq!(s.next_starts(4), [Start::Fresh(5)]);
        assert!(matches!(&s.slots[5], Slot::Running(l) if l.engine.as_deref() == Some("here")));
    }

    #[test]
    fn with_every_engine_gone_the_batch_is_over_and_what_is_left_waits_for_a_resume() {
        let engines = Placement::new(vec![("farm".into(), 2)]);
        let mut s = Scheduler::new(ids(3), 4, &[]).spread_over(engines);
        s.placement.start_asking();
        s.placement.answered("farm", Ok(()));
        assert_eq!(s.next_starts(0), [Start::Fresh(0), Start::Fresh(1)]);
        s.started(0, "r0", "/a");
        let died = Exit::NoReport {
            reason: "killed".into(),
            exit_code: -9,
        };
        assert_eq!(s.exited(0, died), None, "resumed later");
        s.placement.start_asking();
        s.placement.answered("farm", Err("no route to host".into()));
        assert_eq!(s.next_starts(1), []);
        assert!(!s.is_over(), "one still running");
        let failed = s.exited(1, Exit::Report(Box::new(result("t1", "failure"))));
        assert!(failed.is_some());
        assert!(s.is_over());
        assert!(!s.all_done());
        assert_eq!(s.interrupted(), ["r0"], "kept for `--resume`");
        assert_eq!(s.slots[2], Slot::Queued);
    }

    #[test]
    fn parallelism_is_capped_by_cores_and_memory() {
        assert_eq!(capped_parallel(4, 2, Some(24 << 30)), 4);
        assert_eq!(capped_parallel(16, 2, Some(24 << 30)), 4, "two per core");
        assert_eq!(capped_parallel(16, 8, Some(12 << 30)), 4, "3 GiB a run");
        assert_eq!(capped_parallel(4, 2, Some(1 << 30)), 1, "never below one");
        assert_eq!(capped_parallel(0, 2, None), 1);
        assert_eq!(
            capped_processes(1000, 2, Some(24 << 30)),
            16,
            "eight per core"
        );
        assert_eq!(capped_processes(40, 8, Some(4 << 30)), 8, "512 MiB a run");
        assert_eq!(capped_processes(3, 2, None), 3);
    }
}
