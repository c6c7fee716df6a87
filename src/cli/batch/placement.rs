//! Where a batch's runs go, when it names several engines (`--engines`):
//! each engine of the configuration with its capacity (`capacity = N` in
//! `[engines.NAME]`). Decisions only; the driver asks the engines and
//! starts the runs.
//!
//! - Nothing starts before every engine has answered (or failed to) once;
//!   then an engine takes a run only while it answers and has room, and
//!   runs go to the first such engine in the order the batch named.
//! - A run that ends without success makes its engine suspect: it takes no
//!   new run until it has answered again. One that does not answer is gone
//!   for the rest of the batch: the runs it held end on their own (a run
//!   whose engine stops answering ends saying so), and the batch goes on
//!   with the others. So is one whose sandbox failed [`FAILURES_IN_A_ROW`]
//!   runs in a row (an engine that answers but cannot run anything: its
//!   image missing, its disk full) — it would otherwise take every task.
//! - With every engine gone, nothing more starts: what is left waits for
//!   `minicoder batch --resume`.

/// Runs in a row whose sandbox failed on an engine before it takes no more.
pub(crate) const FAILURES_IN_A_ROW: u32 = 3;

/// How a run placed on an engine ended, as far as the engine is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunEnd {
    Succeeded,
    /// It failed or ended otherwise, not for its sandbox.
    Failed,
    /// Its sandbox failed: why.
    SandboxFailed(String),
}

/// Whether an engine answers, as far as the batch knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Health {
    /// To be asked (at the start, and after a run on it failed).
    Unasked,
    /// Being asked now.
    Asking,
    Up,
    /// It did not answer: why. No run goes there any more.
    Gone(String),
}

/// One engine of the batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lane {
    pub name: String,
    pub capacity: usize,
    pub health: Health,
    /// Runs on it now.
    pub running: usize,
    /// Runs placed on it so far.
    pub placed: usize,
    /// It has answered, or failed to, at least once.
    pub heard: bool,
    /// Runs in a row whose sandbox failed on it.
    pub sandbox_failures: u32,
}

/// The engines a batch spreads its runs over (none: every run goes to the
/// engine of the batch's own process, and only the parallelism counts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    pub lanes: Vec<Lane>,
}

impl Placement {
    /// The engines in the order named, with their capacities (at least one).
    pub(crate) fn new(engines: Vec<(String, usize)>) -> Self {
        Self {
            lanes: engines
                .into_iter()
                .map(|(name, capacity)| Lane {
                    name,
                    capacity: capacity.max(1),
                    health: Health::Unasked,
                    running: 0,
                    placed: 0,
                    heard: false,
                    sandbox_failures: 0,
                })
                .collect(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// How many runs at once the engines take together.
    pub(crate) fn capacity(&self) -> usize {
        self.lanes.iter().map(|l| l.capacity).sum()
    }

    /// The engines to ask now whether they answer (marked as being asked).
    pub(crate) fn start_asking(&mut self) -> Vec<String> {
        self.lanes
            .iter_mut()
            .filter(|l| l.health == Health::Unasked)
            .map(|l| {
                l.health = Health::Asking;
                l.name.clone()
            })
            .collect()
    }

    /// An engine's answer. Returns the reason when it has just been found
    /// gone (for the driver to say so once).
    pub(crate) fn answered(&mut self, name: &str, answer: Result<(), String>) -> Option<String> {
        let lane = self.lanes.iter_mut().find(|l| l.name == name)?;
        if matches!(lane.health, Health::Gone(_)) {
            return None;
        }
        lane.heard = true;
        match answer {
            Ok(()) => {
                lane.health = Health::Up;
                None
            }
            Err(why) => {
                lane.health = Health::Gone(why.clone());
                Some(why)
            }
        }
    }

    /// The engine the next run goes to (counted as running there): the
    /// first that answered and has room. `None` without one; no engine
    /// at all is `Some(None)`: the process's own.
    pub(crate) fn take(&mut self) -> Option<Option<String>> {
        if self.lanes.is_empty() {
            return Some(None);
        }
        // Runs go in the order named, not in the order the engines answer.
        if self.lanes.iter().any(|l| !l.heard) {
            return None;
        }
        let lane = self
            .lanes
            .iter_mut()
            .find(|l| l.health == Health::Up && l.running < l.capacity)?;
        lane.running += 1;
        lane.placed += 1;
        Some(Some(lane.name.clone()))
    }

    /// A run on `name` ended; one that did not succeed has its engine asked
    /// again before it takes another. Returns the reason when the engine is
    /// given up on now (its sandbox failed too often in a row).
    pub(crate) fn release(&mut self, name: &str, end: RunEnd) -> Option<String> {
        let lane = self.lanes.iter_mut().find(|l| l.name == name)?;
        lane.running = lane.running.saturating_sub(1);
        if matches!(lane.health, Health::Gone(_)) {
            return None;
        }
        match end {
            RunEnd::Succeeded => {
                lane.sandbox_failures = 0;
                None
            }
            RunEnd::Failed => {
                if lane.health == Health::Up {
                    lane.health = Health::Unasked;
                }
                None
            }
            RunEnd::SandboxFailed(why) => {
                lane.sandbox_failures += 1;
                if lane.sandbox_failures < FAILURES_IN_A_ROW {
                    if lane.health == Health::Up {
                        lane.health = Health::Unasked;
                    }
                    return None;
                }
                let why = format!(
                    "{FAILURES_IN_A_ROW} runs in a row failed in its sandbox, the last: {why}"
                );
                lane.health = Health::Gone(why.clone());
                Some(why)
            }
        }
    }

    /// Every engine is gone: no run can start, now or later.
    pub(crate) fn all_gone(&self) -> bool {
        !self.lanes.is_empty()
            && self
                .lanes
                .iter()
                .all(|l| matches!(l.health, Health::Gone(_)))
    }

    /// The engines gone, with why.
    pub(crate) fn gone(&self) -> Vec<(&str, &str)> {
        self.lanes
            .iter()
            .filter_map(|l| match &l.health {
                Health::Gone(why) => Some((l.name.as_str(), why.as_str())),
                _ => None,
            })
            .collect()
    }

    /// One line: each engine with its runs and room, or why it is gone.
    pub(crate) fn describe(&self) -> String {
        self.lanes
            .iter()
            .map(|l| match &l.health {
                Health::Gone(_) => format!("{} gone", l.name),
                Health::Unasked | Health::Asking => {
                    format!("{} {}/{} asking", l.name, l.running, l.capacity)
                }
                Health::Up => format!("{} {}/{}", l.name, l.running, l.capacity),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Each engine for `batch.json`.
    pub(crate) fn to_json(&self) -> serde_json::Value {
        self.lanes
            .iter()
            .map(|l| {
                let mut v = serde_json::json!({
                    "name": l.name,
                    "capacity": l.capacity,
                    "runs": l.placed,
                    "answers": l.heard && !matches!(l.health, Health::Gone(_)),
                });
                if let Health::Gone(why) = &l.health {
                    v["gone"] = why.clone().into();
                }
                v
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two() -> Placement {
        Placement::new(vec![("farm".into(), 2), ("here".into(), 1)])
    }

    #[test]
    fn no_engine_is_the_process_own_and_never_runs_out() {
        let mut p = Placement::default();
        assert!(p.is_empty());
        assert_eq!(p.take(), Some(None));
        assert!(!p.all_gone());
        assert!(p.start_asking().is_empty());
    }

    #[test]
    fn runs_go_only_to_engines_that_answered_first_come_first_filled() {
        let mut p = two();
        assert_eq!(p.capacity(), 3);
        assert_eq!(p.take(), None, "nothing answered yet");
        assert_eq!(p.start_asking(), ["farm", "here"]);
        assert!(p.start_asking().is_empty(), "asked once");
        assert_eq!(p.answered("here", Ok(())), None);
        assert_eq!(p.take(), None, "farm, named first, has not answered yet");
        p.answered("farm", Ok(()));
        assert_eq!(p.take(), Some(Some("farm".into())));
        assert_eq!(p.take(), Some(Some("farm".into())));
        assert_eq!(p.take(), Some(Some("here".into())));
        assert_eq!(p.take(), None, "all full");
        p.release("here", RunEnd::Succeeded);
        assert_eq!(p.take(), Some(Some("here".into())));
        assert_eq!(p.describe(), "farm 2/2, here 1/1");
    }

    #[test]
    fn a_failed_run_has_its_engine_asked_again_and_one_that_is_gone_takes_nothing_more() {
        let mut p = two();
        p.start_asking();
        p.answered("farm", Ok(()));
        p.answered("here", Ok(()));
        assert_eq!(p.take(), Some(Some("farm".into())));
        assert_eq!(p.take(), Some(Some("farm".into())));
        p.release("farm", RunEnd::Failed);
        assert_eq!(p.take(), Some(Some("here".into())), "farm is suspect");
        assert_eq!(p.take(), None);
        assert_eq!(p.start_asking(), ["farm"]);
        assert_eq!(
            p.answered("farm", Err("connection refused".into())),
            Some("connection refused".into())
        );
        assert_eq!(p.answered("farm", Err("again".into())), None, "said once");
        p.release("farm", RunEnd::Failed);
        assert_eq!(p.take(), None, "farm is gone, here is full");
        assert!(!p.all_gone());
        p.release("here", RunEnd::Succeeded);
        assert_eq!(p.take(), Some(Some("here".into())));
        assert_eq!(p.describe(), "farm gone, here 1/1");
        let json = p.to_json();
        assert_eq!(json[0]["gone"], "connection refused");
        assert_eq!(json[0]["runs"], 2);
        assert_eq!(json[1]["runs"], 2);
        p.release("here", RunEnd::Failed);
        p.start_asking();
        p.answered("here", Err("no route to host".into()));
        assert!(p.all_gone());
        assert_eq!(p.take(), None);
    }

    #[test]
    fn an_engine_whose_sandbox_fails_run_after_run_takes_no_more() {
        let mut p = two();
        p.start_asking();
        p.answered("farm", Ok(()));
        p.answered("here", Ok(()));
        let broken = || RunEnd::SandboxFailed("no such image".into());
        for _ in 1..FAILURES_IN_A_ROW {
            assert_eq!(p.take(), Some(Some("farm".into())));
            assert_eq!(p.release("farm", broken()), None);
            assert_eq!(p.start_asking(), ["farm"], "asked again");
            p.answered("farm", Ok(()));
        }
        // A success in between starts the count again.
        assert_eq!(p.take(), Some(Some("farm".into())));
        p.release("farm", RunEnd::Succeeded);
        for _ in 1..FAILURES_IN_A_ROW {
            p.take();
            p.release("farm", broken());
            p.start_asking();
            p.answered("farm", Ok(()));
        }
        assert_eq!(p.take(), Some(Some("farm".into())));
        let gone = p.release("farm", broken()).expect("given up");
        assert!(
            gone.contains("3 runs in a row") && gone.contains("no such image"),
            "{gone}"
        );
        assert_eq!(p.take(), Some(Some("here".into())), "the others go on");
        assert_eq!(p.take(), None);
        assert_eq!(p.answered("farm", Ok(())), None, "gone stays gone");
    }

    #[test]
    fn a_success_keeps_its_engine_and_a_capacity_is_at_least_one() {
        let mut p = Placement::new(vec![("a".into(), 0)]);
        p.start_asking();
        p.answered("a", Ok(()));
        assert_eq!(p.take(), Some(Some("a".into())));
        p.release("a", RunEnd::Succeeded);
        assert!(p.start_asking().is_empty());
        assert_eq!(p.take(), Some(Some("a".into())));
        p.release("unknown", RunEnd::Failed);
        assert_eq!(p.answered("unknown", Ok(())), None);
    }
}
