//! What a hook's exit and output mean, and how several hooks' verdicts add
//! up: a block or a stop from any hook holds; among permission decisions
//! deny beats ask beats allow; the last rewritten input wins; context and
//! messages are all kept, in order.

use serde_json::Value;

use super::HookEvent;
use super::command::Ran;

/// The most characters of a reason, context or message kept from one hook.
const MAX_TEXT: usize = 8 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Permission {
    Allow,
    Ask,
    Deny,
}

/// What the hooks of one event decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Verdict {
    /// Blocked, with the reason the model (or the person) is told.
    pub block: Option<String>,
    /// A permission decision, with its reason.
    pub permission: Option<(Permission, String)>,
    /// The input the tool runs with instead.
    pub updated_input: Option<Value>,
    /// Added to what the model sees.
    pub context: Vec<String>,
    /// Shown to the person.
    pub messages: Vec<String>,
    /// The run is to stop (`continue: false`), with its reason.
    pub stop: Option<String>,
    /// Hooks that failed without blocking.
    pub errors: Vec<String>,
}

impl Verdict {
    /// The verdict of one hook that ran for `event`. A hook that vetoes
    /// (`PreToolUse`, `PreApply`, `PermissionRequest`) and gives no answer —
    /// it could not start, did not end in time, was killed, or its JSON
    /// answer was cut or broken — blocks: a policy that cannot answer does
    /// not let the action through.
    pub fn of(event: HookEvent, ran: &Ran) -> Verdict {
        let mut v = Verdict::default();
        let unanswered = if let Some(why) = &ran.failed {
            Some(why.clone())
        } else if ran.timed_out {
            Some("timed out and was killed".to_string())
        } else {
            match ran.exit {
                Some(0) => {
                    let text = ran.stdout.trim_start();
                    if text.starts_with('{') && ran.truncated {
                        Some(format!(
                            "its answer was longer than {} bytes",
                            super::command::MAX_OUTPUT
                        ))
                    } else if text.starts_with('{')
                        && !matches!(serde_json::from_str(text), Ok(Value::Object(_)))
                    {
                        Some("its answer is not a valid JSON object".to_string())
                    } else {
                        v.read_stdout(event, &ran.stdout);
                        None
                    }
                }
                Some(2) => {
                    let reason = cut(ran.stderr.trim());
                    v.block = Some(if reason.is_empty() {
                        "blocked by a hook (exit 2)".into()
                    } else {
                        reason
                    });
                    None
                }
                Some(code) => {
                    v.errors.push(format!(
                        "exit {code}{}",
                        first_line(&ran.stderr).map_or(String::new(), |l| format!(": {l}"))
                    ));
                    None
                }
                None => Some("killed by a signal".to_string()),
            }
        };
        if let Some(why) = unanswered {
            if event.vetoes() {
                v.block = Some(format!("the hook gave no answer ({why})"));
            } else {
                v.errors.push(why);
            }
        }
        v
    }

    /// Reads the standard output of a hook that exited 0: a JSON object is
    /// its decision; other text is context for the events whose plain
    /// output Claude Code gives the model (a prompt's and a session's start).
    fn read_stdout(&mut self, event: HookEvent, stdout: &str) {
        let text = stdout.trim();
        let Ok(Value::Object(out)) = serde_json::from_str::<Value>(text) else {
            if !text.is_empty()
                && matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart)
            {
                self.context.push(cut(text));
            }
            return;
        };
        let string = |v: Option<&Value>| v.and_then(Value::as_str).map(|s| cut(s.trim()));
        let reason = string(out.get("reason"));
        match out.get("decision").and_then(Value::as_str) {
            Some("block") => {
                self.block = Some(reason.clone().unwrap_or_else(|| "blocked by a hook".into()))
            }
            Some("approve") => {
                self.permission = Some((Permission::Allow, reason.clone().unwrap_or_default()))
            }
            _ => {}
        }
        if out.get("continue").and_then(Value::as_bool) == Some(false) {
            self.stop =
                Some(string(out.get("stopReason")).unwrap_or_else(|| "stopped by a hook".into()));
        }
        if let Some(m) = string(out.get("systemMessage")) {
            self.messages.push(m);
        }
        if let Some(c) = string(out.get("additionalContext")) {
            self.context.push(c);
        }
        if let Some(specific) = out.get("hookSpecificOutput").and_then(Value::as_object) {
            let decision = specific.get("permissionDecision").and_then(Value::as_str);
            let why = string(specific.get("permissionDecisionReason"))
                .or(reason)
                .unwrap_or_default();
            let permission = match decision {
                Some("allow") => Some(Permission::Allow),
                Some("ask") => Some(Permission::Ask),
                Some("deny") => Some(Permission::Deny),
                _ => None,
            };
            if let Some(p) = permission {
                self.permission = Some((p, why));
            }
            if let Some(input) = specific.get("updatedInput").filter(|v| v.is_object()) {
                self.updated_input = Some(input.clone());
            }
            if let Some(c) = string(specific.get("additionalContext")) {
                self.context.push(c);
            }
        }
        if let Some(input) = out.get("updatedInput").filter(|v| v.is_object()) {
            self.updated_input = Some(input.clone());
        }
    }

    /// Adds a later hook's verdict to this one.
    pub fn add(&mut self, other: Verdict) {
        if self.block.is_none() {
            self.block = other.block;
        }
        if self.stop.is_none() {
            self.stop = other.stop;
        }
        self.permission = match (self.permission.take(), other.permission) {
            (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
            (a, b) => a.or(b),
        };
        if other.updated_input.is_some() {
            self.updated_input = other.updated_input;
        }
        self.context.extend(other.context);
        self.messages.extend(other.messages);
        self.errors.extend(other.errors);
    }

    /// Whether the action the hooks were asked about is refused: blocked,
    /// denied or stopped.
    pub fn refuses(&self) -> Option<String> {
        if let Some(why) = &self.block {
            return Some(why.clone());
        }
        if let Some((Permission::Deny, why)) = &self.permission {
            return Some(if why.is_empty() {
                "denied by a hook".into()
            } else {
                why.clone()
            });
        }
        self.stop.clone()
    }

    /// The decision in a word, for the records.
    pub fn word(&self) -> &'static str {
        if self.block.is_some() {
            "block"
        } else if self.stop.is_some() {
            "stop"
        } else if let Some((p, _)) = &self.permission {
            match p {
                Permission::Deny => "deny",
                Permission::Ask => "ask",
                Permission::Allow => "allow",
            }
        } else if self.updated_input.is_some() {
            "rewrite"
        } else if !self.errors.is_empty() {
            "error"
        } else {
            "continue"
        }
    }
}

fn first_line(text: &str) -> Option<String> {
    text.lines().map(str::trim).find(|l| !l.is_empty()).map(cut)
}

fn cut(text: &str) -> String {
    crate::terminal_text::cut_to(text, MAX_TEXT)
}
