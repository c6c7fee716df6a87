//! Compaction: when a request grows past 75 % of the context budget, older
//! actions become [`Discovery`] lines that keep their identifiers, in stages,
//! each only while the request is still over the room it may take:
//!
//! 1. every tool result older than the last [`KEEP_RECENT`] messages is
//!    summarised (its message stays, with a short stub, so every assistant
//!    tool call keeps a tool message with its id);
//! 2. whole old turns — an assistant message, its tool results and the
//!    messages up to the next assistant message — are dropped, oldest first;
//! 3. results inside the recent window are summarised, oldest first;
//! 4. turns inside the recent window are dropped.
//!
//! The latest turn (from the last assistant message on) is never touched:
//! the model must see what its last calls returned. The discoveries
//! themselves are bounded: the oldest are merged into one line of counts
//! and identifiers.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::context::{Compaction, Context, KEEP_RECENT, MESSAGE_OVERHEAD};
use super::discovery::{self, Discovery};
use super::evidence::clip;
use crate::model::types::{Role, ToolCall};

/// What a summarised tool result says in place of its content.
const STUB: &str = "[compacted: see #";
/// Identifiers kept in the merged line.
const MERGED_IDENTIFIERS: usize = 40;
/// The least room the discoveries get.
const MIN_DISCOVERY_CHARS: usize = 2_000;
/// The most room they get, however large the context.
const MAX_DISCOVERY_CHARS: usize = 64 * 1024;
const HEADER: &str = "Summary of earlier actions (compacted to save context: their identifiers are kept, \
                      their details are not — re-read a file or re-run a command if you need them):";

/// The compacted actions of a run, oldest first.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Discoveries {
    items: Vec<Discovery>,
    /// The oldest discoveries, merged to keep the summary bounded.
    merged: Option<Merged>,
    /// Numbers handed out so far.
    seq: u32,
    /// The summary as rendered, kept until the next change: every request
    /// carries it, and it only changes when the context is compacted.
    #[serde(skip)]
    summary: OnceLock<Option<String>>,
}

impl PartialEq for Discoveries {
    fn eq(&self, other: &Self) -> bool {
        (&self.items, &self.merged, self.seq) == (&other.items, &other.merged, other.seq)
    }
}

impl Eq for Discoveries {}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Merged {
    first: u32,
    last: u32,
    tools: BTreeMap<String, usize>,
    identifiers: Vec<String>,
    /// Identifiers beyond those kept.
    more: usize,
}

impl Discoveries {
    pub fn len(&self) -> usize {
        self.items.len()
            + self
                .merged
                .as_ref()
                .map_or(0, |m| (m.last - m.first + 1) as usize)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The discoveries kept whole, oldest first.
    pub fn items(&self) -> &[Discovery] {
        &self.items
    }

    /// Characters the summary message adds to a request.
    pub fn chars(&self) -> usize {
        self.render().map_or(0, |r| r.len() + MESSAGE_OVERHEAD)
    }

    /// The summary message, if anything was compacted.
    pub fn render(&self) -> Option<&str> {
        self.summary
            .get_or_init(|| {
                if self.is_empty() {
                    return None;
                }
                let mut out = String::from(HEADER);
                out.push_str(&self.merged_line());
                for d in &self.items {
                    out.push_str("\n- ");
                    out.push_str(&d.render());
                }
                Some(out)
            })
            .as_deref()
    }

    fn merged_line(&self) -> String {
        let Some(m) = &self.merged else {
            return String::new();
        };
        let tools: Vec<String> = m.tools.iter().map(|(t, n)| format!("{t} ×{n}")).collect();
        let mut out = format!(
            "\n- #{}–#{} (merged): {}",
            m.first,
            m.last,
            tools.join(", ")
        );
        if !m.identifiers.is_empty() {
            out.push_str(&format!("\n    identifiers: {}", m.identifiers.join(", ")));
            if m.more > 0 {
                out.push_str(&format!(" (+{} more)", m.more));
            }
        }
        out
    }

    fn add(&mut self, call: &ToolCall, result: &str) -> u32 {
        self.seq += 1;
        self.items
            .push(discovery::summarise(self.seq, call, result));
        self.summary = OnceLock::new();
        self.seq
    }

    /// Merges the oldest discoveries until the summary fits in `max` characters.
    fn bound(&mut self, max: usize) -> usize {
        if self.chars() <= max {
            return 0;
        }
        let mut lens: std::collections::VecDeque<usize> =
            self.items.iter().map(|d| d.render().len() + 3).collect();
        let mut rest: usize = lens.iter().sum();
        let fixed = HEADER.len() + MESSAGE_OVERHEAD;
        self.summary = OnceLock::new();
        let mut merged = 0;
        while fixed + self.merged_line().len() + rest > max && !self.items.is_empty() {
            rest -= lens.pop_front().unwrap_or(0);
            let d = self.items.remove(0);
            let m = self.merged.get_or_insert_with(|| Merged {
                first: d.seq,
                ..Merged::default()
            });
            m.last = d.seq;
            *m.tools.entry(d.tool.clone()).or_insert(0) += 1;
            let mut ids = vec![clip(&d.target, 80)];
            ids.extend(
                d.facts
                    .iter()
                    .filter_map(|f| f.strip_prefix("failing tests: "))
                    .flat_map(|t| t.split(", "))
                    .map(str::to_string),
            );
            for id in ids {
                if id.is_empty() || m.identifiers.contains(&id) {
                    continue;
                }
                if m.identifiers.len() < MERGED_IDENTIFIERS {
                    m.identifiers.push(id);
                } else {
                    m.more += 1;
                }
            }
            merged += 1;
        }
        merged
    }
}

impl Context {
    /// Compacts until the history and discoveries fit in `room` characters
    /// (or nothing more may be compacted). `fixed_chars` is the rest of the
    /// request, for the token counts reported.
    pub(crate) fn compact(&mut self, fixed_chars: usize, room: usize) -> Option<Compaction> {
        let before = self.estimate(fixed_chars);
        let cap = (room / 3).max(MIN_DISCOVERY_CHARS);
        let window = self
            .history
            .len()
            .saturating_sub(KEEP_RECENT)
            .min(self.latest_turn());
        let mut compacted = self.summarise_results(window, None);
        let cap = cap.min(MAX_DISCOVERY_CHARS);
        self.discoveries.bound(cap);
        for stage in 0..3 {
            if self.chars() <= room {
                break;
            }
            let latest = self.latest_turn();
            compacted += match stage {
                0 => self.drop_turns(window.min(latest), room),
                1 => self.summarise_results(latest, Some(room)),
                _ => self.drop_turns(latest, room),
            };
            self.discoveries.bound(cap);
        }
        (compacted > 0).then(|| Compaction {
            before_tokens: before,
            after_tokens: self.estimate(fixed_chars),
            messages_compacted: compacted,
        })
    }

    /// The index of the last assistant message: where the latest turn starts.
    fn latest_turn(&self) -> usize {
        self.history
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .unwrap_or(0)
    }

    /// The unsummarised tool result at `i`, with the call it answers: the
    /// call of that id in the nearest assistant message before it (ids may
    /// repeat across turns).
    fn result_at(&self, i: usize) -> Option<(ToolCall, String)> {
        let m = self.history.get(i)?;
        if m.role != Role::Tool {
            return None;
        }
        let content = m.content.as_deref()?;
        if content.starts_with(STUB) {
            return None;
        }
        let call = self.history[..i]
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .and_then(|a| {
                a.tool_calls
                    .iter()
                    .find(|c| Some(&c.id) == m.tool_call_id.as_ref())
            })
            .cloned()
            .unwrap_or_else(|| ToolCall {
                name: "tool".into(),
                ..ToolCall::default()
            });
        Some((call, content.to_string()))
    }

    /// Summarises the tool results before `end`, oldest first (while over
    /// `room`, when given). A result is summarised only when its discovery
    /// is shorter than it is.
    fn summarise_results(&mut self, end: usize, room: Option<usize>) -> usize {
        let mut done = 0;
        for i in 0..end.min(self.history.len()) {
            if room.is_some_and(|room| self.chars() <= room) {
                break;
            }
            let Some((call, content)) = self.result_at(i) else {
                continue;
            };
            let preview = discovery::summarise(0, &call, &content).render();
            if preview.len() + STUB.len() + 16 >= content.len() {
                continue;
            }
            let seq = self.discoveries.add(&call, &content);
            self.history[i].content = Some(stub(seq));
            done += 1;
        }
        done
    }

    /// Drops whole turns from the start while over `room`, none reaching past `end`.
    fn drop_turns(&mut self, mut end: usize, room: usize) -> usize {
        let mut dropped = 0;
        while self.chars() > room {
            let next = self.history[1.min(self.history.len())..]
                .iter()
                .position(|m| m.role == Role::Assistant)
                .map_or(self.history.len(), |p| p + 1);
            if next > end || next == 0 {
                break;
            }
            for i in 0..next {
                if let Some((call, content)) = self.result_at(i) {
                    self.discoveries.add(&call, &content);
                }
            }
            self.history.drain(..next);
            dropped += next;
            end -= next;
        }
        dropped
    }
}

fn stub(seq: u32) -> String {
    format!("{STUB}{seq} in the summary of earlier actions]")
}

/// Characters of `history` as the estimate counts them (for tests).
#[cfg(test)]
pub(crate) fn history_chars(history: &[crate::model::types::ChatMessage]) -> usize {
    history.iter().map(super::context::message_chars).sum()
}

#[cfg(test)]
#[path = "compaction_tests.rs"]
mod tests;
