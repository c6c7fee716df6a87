//! `minicoder batch`: many runs, up to N at once, each a child `minicoder`
//! process (the same run as by hand: its own sandbox, verifier, artifacts).
//!
//! | file           | what it holds                                             |
//! |----------------|-----------------------------------------------------------|
//! | `plan.rs`      | the tasks file and SWE-bench instances, read and checked  |
//! | `scheduler.rs` | every decision: what starts, what an exit means, the end  |
//! | `child.rs`     | one child process: spawned, heard, its report read        |
//! | `table.rs`     | the live table and the summary                            |
//! | `swebench.rs`  | checkouts at `base_commit`, `predictions.jsonl`           |
//!
//! The batch folder holds `tasks.jsonl` (the tasks with absolute paths),
//! `ledger.jsonl` (a line when a task's run begins and when it finishes,
//! appended as it happens), `logs/ID.log` (each child's progress),
//! `batch.json` at the end, and `predictions.jsonl` for SWE-bench. A batch
//! that stopped — Ctrl-C, a kill, a crash — goes on with `--resume DIR`:
//! finished tasks are kept, begun runs are resumed (`minicoder resume`),
//! the rest start. Nothing runs twice.

mod child;
mod placement;
mod plan;
mod scheduler;
mod swebench;
mod table;

use std::collections::{BTreeSet, HashMap};
use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use child::Heard;
use placement::Placement;
use plan::TaskSpec;
use scheduler::{Entry, Scheduler, Slot, Start};

use crate::sandbox::engines::Engine;

use crate::state::StateDir;

/// `minicoder batch`.
#[derive(Debug, Args)]
pub struct BatchArgs {
    /// The tasks: one JSON object per line with id, repo and task, and
    /// optionally checks [{name, command}], model, script, max_turns,
    /// timeout, max_tokens, max_cost, network, allow_zero_tests
    #[arg(required_unless_present_any = ["resume", "swebench"], conflicts_with = "swebench")]
    pub tasks: Option<PathBuf>,
    /// Runs at once (default 4; at most two per core, and 3 GiB of available
    /// memory each, for runs on this machine's engine)
    #[arg(long, value_name = "N")]
    pub parallel: Option<usize>,
    /// Spread the runs over these engines of config.toml (`[engines.NAME]`),
    /// each taking as many at once as its `capacity`; one that stops
    /// answering takes no more, and the batch goes on with the others
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    pub engines: Vec<String>,
    /// The batch folder (default: a new one under the state directory's batches/)
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub out: Option<PathBuf>,
    /// Go on with the batch in DIR: finished tasks kept, begun runs resumed
    #[arg(long, value_name = "DIR", conflicts_with_all = ["tasks", "swebench"])]
    pub resume: Option<PathBuf>,
    /// SWE-bench instances (JSONL: instance_id, repo, base_commit,
    /// problem_statement, FAIL_TO_PASS, PASS_TO_PASS); writes predictions.jsonl
    #[arg(long, value_name = "FILE", requires = "repos")]
    pub swebench: Option<PathBuf>,
    /// Local clones of the instances' repositories: DIR/OWNER__NAME,
    /// DIR/OWNER/NAME or DIR/NAME (never changed: each instance gets a checkout)
    #[arg(long, value_name = "DIR")]
    pub repos: Option<PathBuf>,
    /// Scripted replies for the SWE-bench instances, DIR/INSTANCE_ID.json
    #[arg(long, value_name = "DIR", requires = "swebench")]
    pub scripts: Option<PathBuf>,
    /// The model of every task that names none (PROVIDER or PROVIDER:MODEL)
    #[arg(long)]
    pub model: Option<String>,
    /// JSON lines on stdout, even on a terminal
    #[arg(long)]
    pub json: bool,
}

pub async fn run(args: BatchArgs) -> anyhow::Result<ExitCode> {
    let state = StateDir::from_env()?;
    // The engines first: a wrong one leaves no batch folder behind.
    let opened = capacity(&args).and_then(|found| {
        let (dir, tasks, ledger) = open(&args, &state)?;
        let held = lock(&dir)?;
        Ok((found, dir, tasks, ledger, held))
    });
    let ((parallel, engines), dir, tasks, ledger, _held) = match opened {
        Ok(opened) => opened,
        Err(e) => {
            err!("minicoder batch: {e}");
            return Ok(ExitCode::from(super::EXIT_USAGE));
        }
    };
    let ids = tasks.iter().map(|t| t.id.clone()).collect();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let (answers_tx, answers_rx) = tokio::sync::mpsc::unbounded_channel();
    let placement = Placement::new(
        engines
            .iter()
            .map(|e| (e.name.clone(), e.capacity))
            .collect(),
    );
    let mut driver = Driver {
        tx,
        rx: Some(rx),
        answers_tx,
        answers_rx: Some(answers_rx),
        engines,
        sched: Scheduler::new(ids, parallel, &ledger).spread_over(placement),
        tasks,
        dir: dir.clone(),
        started: Instant::now(),
        pids: HashMap::new(),
        launched: HashMap::new(),
        run_ids: BTreeSet::new(),
        live: std::io::stdout().is_terminal() && !args.json,
        drawn: 0,
        state: state.clone(),
    };
    let stopped = driver.drive().await;
    driver.finish(&state, stopped).await
}

/// How many runs at once, and the engines they are spread over (`--engines`,
/// each with its capacity; none: the process's own engine). Runs on this
/// machine's engine are held to what the machine can take.
fn capacity(args: &BatchArgs) -> Result<(usize, Vec<Engine>), String> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let here = |asked: usize| {
        let parallel = scheduler::capped_parallel(asked, cores, mem_available());
        if parallel < asked {
            err!(
                "minicoder batch: {parallel} at once on this machine's engine, not {asked}: it has {cores} cores and {} available",
                mem_available().map_or("unknown memory".into(), |b| format!("{} GiB", b >> 30))
            );
        }
        parallel
    };
    if args.engines.is_empty() {
        return Ok((here(args.parallel.unwrap_or(4)), Vec::new()));
    }
    if crate::sandbox::engines::selected().is_some() {
        return Err(
            "--engine picks one engine for every run; --engines spreads them: give one of the two"
                .into(),
        );
    }
    let mut engines: Vec<Engine> = Vec::new();
    for name in &args.engines {
        if engines.iter().any(|e| &e.name == name) {
            return Err(format!("--engines names {name} twice"));
        }
        let mut engine = crate::sandbox::engines::named(name)?;
        if engine.host.starts_with("unix://") {
            engine.capacity = here(engine.capacity);
        }
        engines.push(engine);
    }
    let total: usize = engines.iter().map(|e| e.capacity).sum();
    // Wherever its containers run, each run is a process here, with its
    // copy of the repository and its checkpoints.
    let processes = scheduler::capped_processes(total, cores, mem_available());
    if processes < total {
        err!(
            "minicoder batch: {processes} at once, not the engines' {total}: each run is a process on this machine, which has {cores} cores"
        );
    }
    Ok((
        args.parallel.unwrap_or(processes).clamp(1, processes),
        engines,
    ))
}

/// The batch folder, its tasks and what an earlier go recorded.
fn open(
    args: &BatchArgs,
    state: &StateDir,
) -> Result<(PathBuf, Vec<TaskSpec>, Vec<Entry>), String> {
    if let Some(dir) = &args.resume {
        private(dir)?;
        let text = plan::read_bounded(&dir.join("tasks.jsonl"))
            .map_err(|e| format!("{e} (is {} a batch folder?)", dir.display()))?;
        let tasks: Vec<TaskSpec> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("{}: {e}", dir.join("tasks.jsonl").display()))?;
        plan::check_tasks(&tasks)
            .map_err(|e| format!("{}: {e}", dir.join("tasks.jsonl").display()))?;
        // A line cut short by a kill is the only kind that fails to parse.
        let ledger = plan::read_bounded(&dir.join("ledger.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        return Ok((dir.clone(), tasks, ledger));
    }
    let dir = match &args.out {
        Some(dir) => dir.clone(),
        None => state
            .root()
            .join("batches")
            .join(crate::runtime::new_run_id()),
    };
    if dir.join("tasks.jsonl").exists() {
        return Err(format!(
            "{} already holds a batch: `minicoder batch --resume {0}` goes on with it",
            dir.display()
        ));
    }
    // The batch writes, and removes, only in a folder of its own.
    if std::fs::read_dir(&dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!(
            "{} is not empty: name a new folder (or an empty one) for the batch",
            dir.display()
        ));
    }
    crate::state::private_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    private(&dir)?;
    // Absolute, so that `--resume` works from anywhere.
    let dir = dir
        .canonicalize()
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    let tasks = match (&args.tasks, &args.swebench) {
        (Some(file), _) => {
            let text = plan::read_bounded(file)?;
            let base = file
                .canonicalize()
                .map_err(|e| format!("{}: {e}", file.display()))?;
            let base = base.parent().unwrap_or(Path::new("/"));
            plan::parse_tasks(&text, base, args.model.as_deref())
                .map_err(|e| format!("{}: {e}", file.display()))?
        }
        (None, Some(file)) => {
            let text = plan::read_bounded(file)?;
            let instances =
                plan::parse_instances(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            let absolute = |p: &Path| {
                p.canonicalize()
                    .map_err(|e| format!("{}: {e}", p.display()))
            };
            let repos = absolute(args.repos.as_deref().unwrap_or(Path::new(".")))?;
            let scripts = args.scripts.as_deref().map(absolute).transpose()?;
            swebench::tasks(
                &instances,
                &repos,
                &dir,
                args.model.as_deref(),
                scripts.as_deref(),
            )?
        }
        (None, None) => return Err("name a tasks file, --swebench FILE or --resume DIR".into()),
    };
    if tasks.len() > plan::MAX_TASKS {
        return Err(format!("a batch holds at most {} tasks", plan::MAX_TASKS));
    }
    crate::state::private_dir(&dir.join("logs")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let lines: String = tasks
        .iter()
        .map(|t| serde_json::to_string(t).map(|l| l + "\n"))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    crate::state::write_private_file(&dir.join("tasks.jsonl"), lines.as_bytes())
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok((dir, tasks, Vec::new()))
}

/// Refuses a batch folder that is not its owner's alone: others could
/// plant links where the batch writes, or change its tasks before a resume.
fn private(dir: &Path) -> Result<(), String> {
    crate::state::check_private(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Holds the batch folder for this process: two batches on one folder
/// would run its tasks twice. Released when the process ends.
fn lock(dir: &Path) -> Result<std::fs::File, String> {
    use std::os::fd::AsRawFd as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join("lock"))
        .map_err(|e| format!("{}: {e}", dir.join("lock").display()))?;
    // SAFETY: flock(2) on a descriptor this function owns.
    let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if taken {
        Ok(file)
    } else {
        Err(format!("another batch is running in {}", dir.display()))
    }
}

/// Opens a file of the batch folder to append to: created private, never
/// through a link.
pub(crate) fn append_private(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// MemAvailable of /proc/meminfo, in bytes.
fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib.saturating_mul(1024))
}

struct Driver {
    sched: Scheduler,
    tasks: Vec<TaskSpec>,
    dir: PathBuf,
    started: Instant,
    pids: HashMap<usize, u32>,
    /// Every run this go began or resumed: their containers are checked at the end.
    run_ids: BTreeSet<String>,
    /// A live table on the terminal, rather than JSON lines.
    live: bool,
    /// Lines of the live table on screen.
    drawn: usize,
    /// When each running task's child started: a report older than that
    /// is an earlier go's.
    launched: HashMap<usize, std::time::SystemTime>,
    /// Where the runs live: whether an earlier go's run still goes on.
    state: StateDir,
    /// What the children say, tagged with their task's index.
    tx: UnboundedSender<(usize, Heard)>,
    rx: Option<UnboundedReceiver<(usize, Heard)>>,
    /// Whether each engine answered, as the pings come back.
    answers_tx: UnboundedSender<(String, Result<(), String>)>,
    answers_rx: Option<UnboundedReceiver<(String, Result<(), String>)>>,
    /// The engines of `--engines`, by the order given.
    engines: Vec<Engine>,
}

impl Driver {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn log_path(&self, index: usize) -> PathBuf {
        self.dir
            .join("logs")
            .join(format!("{}.log", self.tasks[index].id))
    }

    /// Appends a line to the ledger; a batch that cannot record what it
    /// does says so (it would redo work on `--resume`).
    fn record(&self, entry: &Entry) {
        let line = match serde_json::to_string(entry) {
            Ok(l) => l + "\n",
            Err(e) => {
                err!("minicoder batch: recording a task: {e}");
                return;
            }
        };
        let written = append_private(&self.dir.join("ledger.jsonl"))
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            err!("minicoder batch: writing the ledger: {e}");
        }
    }

    fn json(&self, value: serde_json::Value) {
        if !self.live {
            super::out_json_line(&value.to_string());
        }
    }

    /// Runs begun in an earlier go: those whose process still goes on (a
    /// killed batch's child still cancelling) are held back until it ends —
    /// never resumed beside it, nor begun again; those that finished after
    /// all (their report was written before the batch stopped, or since)
    /// are taken as they are; the others are resumed.
    fn settle_earlier_runs(&mut self) {
        let interrupted = self.sched.interrupted();
        if interrupted.is_empty() {
            return;
        }
        let still_going: BTreeSet<String> = interrupted
            .into_iter()
            .filter(|id| crate::runs::is_live(&self.state, id))
            .map(str::to_string)
            .collect();
        self.adopt_finished(&still_going);
        self.sched.hold(still_going);
    }

    fn adopt_finished(&mut self, still_going: &BTreeSet<String>) {
        for i in 0..self.sched.slots.len() {
            let Slot::Interrupted {
                artifact_dir,
                run_id,
            } = &self.sched.slots[i]
            else {
                continue;
            };
            if still_going.contains(run_id) {
                continue;
            }
            let Some(report) = child::read_report(Path::new(artifact_dir)) else {
                continue;
            };
            if report.outcome == crate::protocol::Outcome::Cancelled || report.run_id != *run_id {
                continue;
            }
            let result = child::result_of(&self.tasks[i].id, &report);
            self.record(&Entry::Finished(result.clone()));
            self.sched.adopt(i, result);
        }
    }

    fn launch(&mut self, start: Start) {
        let (index, resume) = match &start {
            Start::Fresh(i) => (*i, None),
            Start::Resume { index, run_id } => (*index, Some(run_id.as_str())),
        };
        if let Some(run_id) = resume {
            self.run_ids.insert(run_id.to_string());
        }
        let task_file = match self.task_file(index, resume) {
            Ok(file) => file,
            Err((reason, exit_code)) => {
                self.ended(index, scheduler::Exit::NoReport { reason, exit_code });
                return;
            }
        };
        let args = self.tasks[index].child_args(resume, task_file.as_deref());
        self.launched.insert(index, std::time::SystemTime::now());
        let engine = match &self.sched.slots[index] {
            Slot::Running(live) => live.engine.clone(),
            _ => None,
        };
        let spawned = child::spawn(
            index,
            (args, engine.as_deref()),
            &self.log_path(index),
            self.tx.clone(),
        );
        match spawned {
            Ok(pid) => {
                self.pids.insert(index, pid);
                let mut event = serde_json::json!({
                    "event": "task.started",
                    "id": self.tasks[index].id,
                });
                if let Some(run_id) = resume {
                    event["resuming"] = run_id.into();
                }
                if let Some(engine) = engine {
                    event["engine"] = engine.into();
                }
                self.json(event);
            }
            Err(e) => {
                let exit = scheduler::Exit::NoReport {
                    reason: format!("starting minicoder: {e}"),
                    exit_code: -1,
                };
                self.ended(index, exit);
            }
        }
    }

    /// The file a fresh run reads a long task from (written now), or why
    /// the task cannot become a run, with its exit code.
    fn task_file(
        &self,
        index: usize,
        resume: Option<&str>,
    ) -> Result<Option<PathBuf>, (String, i32)> {
        let task = &self.tasks[index];
        if let Some(reason) = &task.unavailable {
            return Err((reason.clone(), 1));
        }
        if resume.is_some() || !task.needs_task_file() {
            return Ok(None);
        }
        let file = self.dir.join("logs").join(format!("{}.task", task.id));
        crate::state::write_private_file(&file, task.task.as_bytes())
            .map_err(|e| (format!("writing the task to {}: {e}", file.display()), -1))?;
        Ok(Some(file))
    }

    fn ended(&mut self, index: usize, exit: scheduler::Exit) {
        let entry = self.sched.exited(index, exit);
        for (name, why) in std::mem::take(&mut self.sched.given_up) {
            self.say_gone(&name, &why);
        }
        if let Some(entry) = entry {
            self.record(&entry);
            if let Entry::Finished(r) = &entry {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["event"] = "task.finished".into();
                self.json(v);
            }
        }
    }

    fn heard(&mut self, index: usize, heard: Heard) {
        match heard {
            Heard::Started {
                run_id,
                artifact_dir,
            } => {
                self.run_ids.insert(run_id.clone());
                if let Some(entry) = self.sched.started(index, &run_id, &artifact_dir) {
                    self.record(&entry);
                }
            }
            Heard::Turn(n) => self.sched.turn(index, n),
            Heard::Tokens(n) => self.sched.tokens(index, n),
            Heard::Ended { status, signal } => {
                self.pids.remove(&index);
                let dir = match &self.sched.slots[index] {
                    Slot::Running(live) => live.artifact_dir.clone(),
                    _ => None,
                };
                let since = self
                    .launched
                    .remove(&index)
                    .unwrap_or(std::time::UNIX_EPOCH);
                let exit = child::exit_of(
                    &self.tasks[index].id,
                    dir.as_deref(),
                    since,
                    (status, signal),
                    &self.log_path(index),
                );
                self.ended(index, exit);
            }
        }
    }

    /// Pings the engines the placement wants to hear from, each on a task
    /// of its own; the answers come back to the loop.
    fn ask_engines(&mut self) {
        for name in self.sched.placement.start_asking() {
            let Some(engine) = self.engines.iter().find(|e| e.name == name).cloned() else {
                continue;
            };
            let tx = self.answers_tx.clone();
            tokio::spawn(async move {
                let answer = crate::sandbox::docker::connect_to(&engine).await.map(drop);
                let _ = tx.send((engine.name, answer));
            });
        }
    }

    fn engine_answered(&mut self, name: &str, answer: Result<(), String>) {
        if let Some(why) = self.sched.placement.answered(name, answer) {
            self.say_gone(name, &why);
        }
    }

    /// An engine takes no more runs: said once (on a terminal the table's
    /// counts line says it, and the end why).
    fn say_gone(&self, name: &str, why: &str) {
        if self.live {
            return;
        }
        self.json(serde_json::json!({
            "event": "engine.gone",
            "engine": name,
            "reason": why,
        }));
        if self.sched.placement.all_gone() {
            err!(
                "minicoder batch: no engine of the batch answers; what is left goes on with `minicoder batch --resume {}`",
                self.dir.display()
            );
        }
    }

    fn redraw(&mut self) {
        if !self.live {
            return;
        }
        let (width, height) =
            crossterm::terminal::size().map_or((80, 24), |(w, h)| (usize::from(w), usize::from(h)));
        // Each line within the width: a wrapped line would throw the
        // redraw off by one.
        let lines: Vec<String> =
            table::live(&self.sched, self.now_ms(), height.saturating_sub(1).min(40))
                .iter()
                .map(|l| crate::terminal_text::cut_to(l, width.saturating_sub(1).max(10)))
                .collect();
        crate::terminal_text::redraw(self.drawn, &lines);
        self.drawn = lines.len();
    }

    /// Runs the batch until every task has ended, or until a signal stops
    /// it (then the running children are told to stop and awaited). Returns
    /// whether it was stopped.
    async fn drive(&mut self) -> bool {
        let (Some(mut rx), Some(mut answers)) = (self.rx.take(), self.answers_rx.take()) else {
            return self.sched.stopping();
        };
        let mut interrupt = signal(SignalKind::interrupt()).ok();
        let mut terminate = signal(SignalKind::terminate()).ok();
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
        let mut signals = 0u32;
        loop {
            self.settle_earlier_runs();
            self.ask_engines();
            for start in self.sched.next_starts(self.now_ms()) {
                self.launch(start);
            }
            if self.sched.is_over() {
                break;
            }
            tokio::select! {
                Some((index, heard)) = rx.recv() => self.heard(index, heard),
                Some((name, answer)) = answers.recv() => self.engine_answered(&name, answer),
                Some(()) = recv(&mut interrupt) => signals += 1,
                Some(()) = recv(&mut terminate) => signals += 1,
                _ = tick.tick() => self.redraw(),
            }
            if signals > 0 && !self.sched.stopping() {
                self.sched.stop();
                if !self.live {
                    err!(
                        "minicoder batch: stopping: each running run cancels (partial patch kept, containers removed); again to kill them"
                    );
                }
                for pid in self.pids.values() {
                    child::signal(*pid, libc::SIGINT);
                }
            } else if signals > 1 {
                for pid in self.pids.values() {
                    child::signal(*pid, libc::SIGKILL);
                }
                signals = 1;
            }
        }
        self.redraw();
        self.sched.stopping()
    }

    async fn finish(mut self, state: &StateDir, stopped: bool) -> anyhow::Result<ExitCode> {
        let left = self.clean_up(state).await;
        let results: Vec<scheduler::TaskResult> =
            self.sched.results().into_iter().cloned().collect();
        let refs: Vec<&scheduler::TaskResult> = results.iter().collect();
        if self.tasks.iter().any(|t| t.instance_id.is_some()) {
            let text = swebench::predictions(&self.tasks, &refs);
            if let Err(e) = crate::state::write_private_file(
                &self.dir.join("predictions.jsonl"),
                text.as_bytes(),
            ) {
                err!("minicoder batch: writing predictions.jsonl: {e}");
            }
            if self.sched.all_done() {
                let _ = std::fs::remove_dir_all(self.dir.join("checkouts"));
            }
        }
        let count = |o: &str| results.iter().filter(|r| r.outcome == o).count();
        let verified = results.iter().filter(|r| r.verified).count();
        let summary = serde_json::json!({
            "batch_dir": self.dir.display().to_string(),
            "tasks": self.tasks.len(),
            "parallel": self.sched.parallel,
            "duration_ms": self.now_ms(),
            "stopped": stopped,
            "totals": {
                "verified": verified,
                "success": count("success"),
                "failure": count("failure"),
                "budget": count("budget"),
                "cancelled": count("cancelled"),
                "error": count("error"),
                "not_finished": self.tasks.len() - results.len(),
            },
            "tokens": {
                "input": results.iter().map(|r| r.tokens.input).fold(0u64, u64::saturating_add),
                "output": results.iter().map(|r| r.tokens.output).fold(0u64, u64::saturating_add),
            },
            "left_behind": { "containers": left },
            "engines": self.sched.placement.to_json(),
            "results": results,
        });
        let text = serde_json::to_string_pretty(&summary)? + "\n";
        crate::state::write_private_file(&self.dir.join("batch.json"), text.as_bytes())?;
        if self.live {
            crate::terminal_text::redraw(self.drawn, &table::summary(&self.sched, self.now_ms()));
            out!("{}", table::status(&self.sched, self.now_ms()));
            for (name, why) in self.sched.placement.gone() {
                out!("engine {name} stopped answering: {why}");
            }
            out!("batch: {}", self.dir.join("batch.json").display());
            if stopped || self.sched.placement.all_gone() {
                out!("next: minicoder batch --resume {}", self.dir.display());
            }
        } else {
            let mut end = summary;
            end["event"] = "batch.finished".into();
            if let Some(o) = end.as_object_mut() {
                o.remove("results");
            }
            super::out_json_line(&end.to_string());
        }
        let code = if stopped {
            super::EXIT_CANCELLED
        } else if self.sched.all_done() && verified == self.tasks.len() {
            0
        } else {
            super::EXIT_FAILURE
        };
        Ok(ExitCode::from(code))
    }

    /// Whatever a run left — a child killed before it could clean up — is
    /// removed: the containers of every run of this go, and workspaces whose
    /// process is gone. Returns how many containers had to go.
    async fn clean_up(&mut self, state: &StateDir) -> usize {
        let mut gone = crate::sandbox::gc::GcReport::default();
        crate::sandbox::gc::collect_workspaces(state, &mut gone);
        let mut clients = Vec::new();
        if self.engines.is_empty() {
            clients.extend(crate::sandbox::connect().await.ok());
        }
        for engine in &self.engines {
            // An engine gone is asked once more: it may be back.
            clients.extend(crate::sandbox::docker::connect_to(engine).await.ok());
        }
        let mut left = 0;
        for docker in &clients {
            for run_id in &self.run_ids {
                left += crate::sandbox::gc::remove_run(docker, run_id)
                    .await
                    .unwrap_or(0);
            }
        }
        left
    }
}

async fn recv(s: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
    match s {
        Some(s) => s.recv().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(tasks: &Path, out: &Path) -> BatchArgs {
        BatchArgs {
            tasks: Some(tasks.to_path_buf()),
            parallel: Some(1),
            engines: Vec::new(),
            out: Some(out.to_path_buf()),
            resume: None,
            swebench: None,
            repos: None,
            scripts: None,
            model: None,
            json: true,
        }
    }

    #[test]
    fn a_batch_folder_is_new_or_empty_private_and_held_by_one_batch() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(root.path().join("state"));
        let tasks = root.path().join("tasks.jsonl");
        std::fs::write(&tasks, r#"{"id": "a", "repo": "r", "task": "t"}"#).expect("tasks");

        let busy = root.path().join("busy");
        std::fs::create_dir(&busy).expect("mkdir");
        std::fs::write(busy.join("precious"), "x").expect("file");
        let e = open(&args(&tasks, &busy), &state).expect_err("not empty");
        assert!(e.contains("is not empty"), "{e}");
        assert!(busy.join("precious").exists());

        let shared = root.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        assert!(
            open(&args(&tasks, &shared), &state).is_err(),
            "others may write there"
        );

        let fresh = root.path().join("fresh");
        let (dir, opened, _) = open(&args(&tasks, &fresh), &state).expect("opened");
        assert_eq!(opened.len(), 1);
        assert!(dir.is_absolute());
        let mode = std::fs::metadata(&dir).expect("meta").permissions().mode();
        assert_eq!(mode & 0o077, 0, "private");
        let e = open(&args(&tasks, &fresh), &state).expect_err("a batch already");
        assert!(e.contains("--resume"), "{e}");

        let held = lock(&dir).expect("first");
        let e = lock(&dir).expect_err("second");
        assert!(e.contains("another batch"), "{e}");
        drop(held);
        lock(&dir).expect("free again");

        // Appending never goes through a link someone planted.
        std::os::unix::fs::symlink(root.path().join("victim"), dir.join("ledger.jsonl"))
            .expect("link");
        assert!(append_private(&dir.join("ledger.jsonl")).is_err());
        assert!(!root.path().join("victim").exists());
    }
}
