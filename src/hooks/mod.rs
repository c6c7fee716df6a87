//! Hooks: the person's own programs, run at fixed points of a run and of
//! `apply`, that may veto, rewrite or add to what happens there.
//!
//! The contract is the one people already write hook scripts for (Claude
//! Code's, which Codex adopted): the hook reads one JSON object on its
//! standard input (`session_id`, `transcript_path`, `cwd`,
//! `hook_event_name`, and per event `tool_name`, `tool_input`,
//! `tool_response`, `prompt`, `stop_hook_active`); exit 0 goes on, and a
//! JSON object on its standard output is read (`decision`/`reason`,
//! `hookSpecificOutput.permissionDecision` allow|deny|ask, `updatedInput`,
//! `additionalContext`, `continue`, `stopReason`, `systemMessage`); exit 2
//! blocks, with its standard error as the reason; any other exit is an
//! error that blocks nothing.
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | the events, a hook's input, [`Hooks`] (what is configured, in-process handlers) and running every hook of an event |
//! | `config.rs` | `hooks.json` of the person's configuration directory: read, bounded, refused when others may write it |
//! | `command.rs` | one command hook as a host process: its input on stdin, a timeout, output caps, no provider key in its environment |
//! | `verdict.rs` | what a hook's exit and output mean, and how the verdicts of several hooks add up (pure) |
//!
//! Where hooks come from: only the person's configuration
//! (`$XDG_CONFIG_HOME/minicoder/hooks.json`) runs hooks on the host. A
//! repository's own files never name a host hook.

mod command;
pub mod config;
mod verdict;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

pub use command::Ran;
pub(crate) use command::is_secret_name;
pub use config::{ConfigError, HookSpec, HooksConfig};
pub use verdict::{Permission, Verdict};

/// The points a hook can be attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HookEvent {
    SessionStart,
    SessionEnd,
    UserPromptSubmit,
    PreToolUse,
    PostToolUse,
    PermissionRequest,
    Notification,
    Stop,
    PreCompact,
    PostCompact,
    PreApply,
    PostApply,
}

impl HookEvent {
    pub const ALL: [HookEvent; 12] = [
        HookEvent::SessionStart,
        HookEvent::SessionEnd,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PermissionRequest,
        HookEvent::Notification,
        HookEvent::Stop,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
        HookEvent::PreApply,
        HookEvent::PostApply,
    ];

    /// The name in `hooks.json` and in `hook_event_name`.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::PermissionRequest => "PermissionRequest",
            HookEvent::Notification => "Notification",
            HookEvent::Stop => "Stop",
            HookEvent::PreCompact => "PreCompact",
            HookEvent::PostCompact => "PostCompact",
            HookEvent::PreApply => "PreApply",
            HookEvent::PostApply => "PostApply",
        }
    }

    pub fn from_name(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.name() == name)
    }

    /// Whether a hook of the event stands between an action and its doing,
    /// so that one that gives no answer blocks it.
    pub fn vetoes(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PreApply | HookEvent::PermissionRequest
        )
    }

    /// Whether the event is about one tool, so that a matcher applies.
    pub fn has_tool(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PostToolUse | HookEvent::PermissionRequest
        )
    }
}

/// What a hook is told, as the JSON object on its standard input. Fields
/// an event has no value for are left out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HookInput {
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_path: Option<String>,
    pub cwd: String,
    pub hook_event_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_input: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_response: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_hook_active: Option<bool>,
    /// What the event adds (for `PreApply`: `run_id`, `repo`,
    /// `changed_files`, `patch`).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

impl HookInput {
    pub fn new(event: HookEvent, session_id: &str, cwd: &Path) -> Self {
        Self {
            session_id: session_id.to_string(),
            cwd: cwd.display().to_string(),
            hook_event_name: event.name().to_string(),
            ..Self::default()
        }
    }
}

/// An in-process hook, for programs that embed minicoder.
pub trait HookHandler: Send + Sync {
    /// A name for the records.
    fn name(&self) -> String;
    /// Whether this handler wants `event` (for `tool`, where the event is
    /// about one).
    fn wants(&self, event: HookEvent, tool: Option<&str>) -> bool;
    fn handle(&self, event: HookEvent, input: &HookInput) -> Verdict;
}

/// What one hook did, for the records (the event log, stderr).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookRecord {
    /// The command, or an in-process handler's name.
    pub hook: String,
    pub event: String,
    /// Its exit status (`None`: an in-process handler, or killed).
    pub exit: Option<i32>,
    /// What it decided, in a word: `continue`, `block`, `allow`, `deny`,
    /// `ask`, `rewrite`, `stop` or `error`.
    pub decision: String,
    pub duration_ms: u64,
}

/// The verdict of every hook of one event, and what each did.
#[derive(Debug, Clone, Default)]
pub struct HookRun {
    pub verdict: Verdict,
    pub records: Vec<HookRecord>,
}

/// The hooks in force: the person's configured commands and any in-process
/// handlers.
#[derive(Clone, Default)]
pub struct Hooks {
    config: HooksConfig,
    handlers: Vec<Arc<dyn HookHandler>>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("config", &self.config)
            .field("handlers", &self.handlers.len())
            .finish()
    }
}

impl Hooks {
    /// The hooks of the person's configuration directory (none when it has
    /// no `hooks.json`).
    pub fn load(config_dir: Option<&Path>) -> Result<Hooks, ConfigError> {
        let config = match config_dir {
            Some(dir) => HooksConfig::load(&dir.join(config::FILE))?,
            None => HooksConfig::default(),
        };
        Ok(Hooks {
            config,
            handlers: Vec::new(),
        })
    }

    pub fn from_config(config: HooksConfig) -> Hooks {
        Hooks {
            config,
            handlers: Vec::new(),
        }
    }

    /// Adds an in-process handler.
    pub fn with_handler(mut self, handler: Arc<dyn HookHandler>) -> Hooks {
        self.handlers.push(handler);
        self
    }

    pub fn is_empty(&self) -> bool {
        self.config.is_empty() && self.handlers.is_empty()
    }

    /// Whether no hook at all may run for `event` (whatever the tool).
    pub fn is_empty_for(&self, event: HookEvent) -> bool {
        !self.config.has(event)
            && !self
                .handlers
                .iter()
                .any(|h| h.wants(event, None) || event.has_tool())
    }

    /// Every configured command hook, for `doctor`.
    pub fn listed(&self) -> Vec<(HookEvent, Option<String>, &HookSpec)> {
        self.config.listed()
    }

    /// Runs every hook of `event` that matches `input`'s tool, one after
    /// another (in-process handlers first), and adds their verdicts up.
    pub async fn run(&self, event: HookEvent, input: &HookInput) -> HookRun {
        let tool = input.tool_name.as_deref();
        let mut run = HookRun::default();
        for handler in self.handlers.iter().filter(|h| h.wants(event, tool)) {
            let started = Instant::now();
            let verdict = handler.handle(event, input);
            run.records.push(HookRecord {
                hook: handler.name(),
                event: event.name().to_string(),
                exit: None,
                decision: verdict.word().to_string(),
                duration_ms: started.elapsed().as_millis() as u64,
            });
            run.verdict.add(verdict);
        }
        let json = match serde_json::to_vec(input) {
            Ok(json) => json,
            Err(e) => {
                run.verdict.errors.push(format!("the hook input: {e}"));
                return run;
            }
        };
        for spec in self.config.matching(event, tool) {
            let started = Instant::now();
            let ran = command::run(spec, &json, Path::new(&input.cwd)).await;
            let verdict = Verdict::of(event, &ran);
            run.records.push(HookRecord {
                hook: spec.command.clone(),
                event: event.name().to_string(),
                exit: ran.exit,
                decision: verdict.word().to_string(),
                duration_ms: started.elapsed().as_millis() as u64,
            });
            run.verdict.add(verdict);
        }
        run
    }
}

impl Hooks {
    /// [`Hooks::run`] from code that is not async (or must not await):
    /// on a thread of its own, with a runtime of its own.
    pub fn run_blocking(&self, event: HookEvent, input: &HookInput) -> HookRun {
        let (hooks, input) = (self.clone(), input.clone());
        let worker =
            std::thread::spawn(move || {
                match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime.block_on(hooks.run(event, &input)),
                    Err(e) => HookRun {
                        verdict: Verdict {
                            errors: vec![format!("cannot start the hooks' runtime: {e}")],
                            ..Verdict::default()
                        },
                        records: Vec::new(),
                    },
                }
            });
        worker.join().unwrap_or_else(|_| HookRun {
            verdict: Verdict {
                errors: vec!["the hooks' thread failed".into()],
                ..Verdict::default()
            },
            records: Vec::new(),
        })
    }
}

impl HookRecord {
    /// One line for a person: `hook PreApply \`cmd\`: exit 2, block, 12 ms`.
    pub fn line(&self) -> String {
        let exit = match self.exit {
            Some(code) => format!("exit {code}"),
            None => "no exit status".to_string(),
        };
        format!(
            "hook {} `{}`: {exit}, {}, {} ms",
            self.event,
            crate::terminal_text::cut_to(&self.hook, 80),
            self.decision,
            self.duration_ms
        )
    }
}

/// The default time a command hook may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

#[cfg(test)]
mod tests;
