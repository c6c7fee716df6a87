//! Discoveries: what compaction keeps of an action whose result leaves the
//! context. Not the first characters of the result but its identifiers —
//! the tool and its target (path, command, pattern), the outcome (exit code,
//! error), failing test names, assertions and errors, the paths and symbols
//! it mentions — so the model can still name what it found, and re-read it.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::evidence::{self, clip};
use crate::model::types::ToolCall;

/// Facts kept of one action.
const MAX_FACTS: usize = 6;
/// Characters of one fact.
const MAX_FACT_CHARS: usize = 240;
/// Items listed in one fact (paths, symbols, tests).
const MAX_ITEMS: usize = 10;

/// One compacted action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    /// The action's number in the run (1 for the first compacted result).
    pub seq: u32,
    pub tool: String,
    /// What it acted on: a path, a command, a pattern.
    pub target: String,
    /// The first line of its result: an exit code, an error, a summary.
    pub outcome: String,
    /// Identifiers and telling lines from the result.
    pub facts: Vec<String>,
    /// Characters of the result that was compacted.
    pub chars: usize,
}

impl Discovery {
    pub fn render(&self) -> String {
        let mut out = format!("#{} {}", self.seq, self.tool);
        if !self.target.is_empty() {
            out.push(' ');
            out.push_str(&self.target);
        }
        if !self.outcome.is_empty() {
            out.push_str(" → ");
            out.push_str(&self.outcome);
        }
        for fact in &self.facts {
            out.push_str("\n    ");
            out.push_str(fact);
        }
        out
    }
}

/// Summarises `call` and its `result` as discovery number `seq`.
pub(crate) fn summarise(seq: u32, call: &ToolCall, result: &str) -> Discovery {
    let args: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&call.arguments).unwrap_or_default();
    let text = |key: &str| args.get(key).and_then(|v| v.as_str()).unwrap_or_default();
    let target = match call.name.as_str() {
        "run_shell" => {
            let cwd = text("cwd");
            let cwd = if cwd.is_empty() || cwd == "." {
                String::new()
            } else {
                format!(" (in {cwd})")
            };
            format!("`{}`{cwd}", clip(text("command"), 160))
        }
        "ripgrep" => format!(
            "/{}/ in {}",
            clip(text("pattern"), 80),
            non_empty(text("path"), ".")
        ),
        "git" => {
            let rest: Vec<&str> = args
                .get("args")
                .and_then(|v| v.as_array())
                .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
                .unwrap_or_default();
            clip(&format!("{} {}", text("subcommand"), rest.join(" ")), 120)
                .trim()
                .to_string()
        }
        "edit_file" => {
            let (added, removed) = patch_stat(text("patch"));
            format!("{} (+{added} −{removed})", clip(text("path"), 160))
        }
        "update_plan" => {
            let items = args
                .get("items")
                .and_then(|v| v.as_array())
                .map_or(0, Vec::len);
            format!("({items} items)")
        }
        "request_completion" => clip(text("summary"), 120),
        _ if !text("path").is_empty() => clip(text("path"), 160),
        _ => clip(&call.arguments, 120),
    };
    let outcome = result
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| clip(l, 160))
        .unwrap_or_default();
    let mut facts = Vec::new();
    let found = evidence::extract(result, 4);
    push_list(
        &mut facts,
        "failing tests",
        found.failing_tests,
        found.more_tests,
    );
    facts.extend(found.lines);
    match call.name.as_str() {
        "read_file" => push_list(&mut facts, "defines", definitions(result), 0),
        "tree_sitter_symbols" => push_list(&mut facts, "symbols", symbols(result), 0),
        "ripgrep" => push_list(&mut facts, "matches", match_counts(result), 0),
        _ => {}
    }
    push_list(&mut facts, "paths", paths(result, &target), 0);
    let mut facts: Vec<String> = facts
        .into_iter()
        .map(|f| clip(&f, MAX_FACT_CHARS))
        .collect();
    facts.dedup();
    facts.truncate(MAX_FACTS);
    Discovery {
        seq,
        tool: call.name.clone(),
        target,
        outcome,
        facts,
        chars: result.len(),
    }
}

fn non_empty<'a>(s: &'a str, default: &'a str) -> &'a str {
    if s.is_empty() { default } else { s }
}

/// `label: a, b, c (+N more)`, as many items as fit in one fact; `more`
/// counts items known beyond `items`.
pub(crate) fn push_list(facts: &mut Vec<String>, label: &str, items: Vec<String>, more: usize) {
    if items.is_empty() {
        return;
    }
    let total = items.len() + more;
    let mut fact = format!("{label}: ");
    let mut shown = 0;
    for item in items.iter().take(MAX_ITEMS) {
        let item = clip(item, MAX_FACT_CHARS / 2);
        if shown > 0 && fact.len() + item.len() + 2 > MAX_FACT_CHARS - 16 {
            break;
        }
        if shown > 0 {
            fact.push_str(", ");
        }
        fact.push_str(&item);
        shown += 1;
    }
    if total > shown {
        fact.push_str(&format!(" (+{} more)", total - shown));
    }
    facts.push(fact);
}

/// Lines added and removed by a unified diff.
pub(crate) fn patch_stat(patch: &str) -> (usize, usize) {
    let mut added = 0;
    let mut removed = 0;
    for line in patch.lines() {
        if line.starts_with("+++") || line.starts_with("---") {
            continue;
        }
        if line.starts_with('+') {
            added += 1;
        } else if line.starts_with('-') {
            removed += 1;
        }
    }
    (added, removed)
}

static PATH: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"(?:^|[\s'`(:=])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:py|rs|go|js|jsx|mjs|cjs|ts|tsx|c|h|cc|cpp|hpp|java|kt|rb|php|cs|swift|toml|json|yaml|yml|md|txt|cfg|ini|sh|lock|sql|html|css))(?::(\d+))?",
    )
    .ok()
});

static DEFINITION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"^\s*\d+\|\s*(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:def|class|fn|func|function|struct|enum|trait|impl|interface|type|const)\s+([A-Za-z_]\w*)",
    )
    .ok()
});

/// Source paths a result mentions (not the action's own target), first seen first.
fn paths(result: &str, target: &str) -> Vec<String> {
    let Some(re) = PATH.as_ref() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for cap in re.captures_iter(result) {
        let Some(path) = cap.get(1).map(|m| m.as_str()) else {
            continue;
        };
        if target.starts_with(path) || out.iter().any(|p| p == path) {
            continue;
        }
        out.push(path.to_string());
        if out.len() > 4 * MAX_ITEMS {
            break;
        }
    }
    out
}

/// Names defined in a `read_file` result (its numbered lines).
fn definitions(result: &str) -> Vec<String> {
    let Some(re) = DEFINITION.as_ref() else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for line in result.lines() {
        if let Some(name) = re.captures(line).and_then(|c| c.get(1)) {
            let name = name.as_str().to_string();
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// `kind name  L1-9` lines of a `tree_sitter_symbols` result.
fn symbols(result: &str) -> Vec<String> {
    result
        .lines()
        .skip(1)
        .filter_map(|line| {
            let (_kind, rest) = line.trim_start().split_once(' ')?;
            let (name, range) = rest.rsplit_once("  ")?;
            range
                .starts_with('L')
                .then(|| format!("{} {range}", name.trim()))
        })
        .collect()
}

/// Matches per file of a `ripgrep` result (`path:line:text` lines).
fn match_counts(result: &str) -> Vec<String> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    for line in result.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(path), Some(number)) = (parts.next(), parts.next()) else {
            continue;
        };
        if path.is_empty() || number.parse::<u64>().is_err() {
            continue;
        }
        let count = counts.entry(path).or_insert(0);
        if *count == 0 {
            order.push(path);
        }
        *count += 1;
    }
    order
        .into_iter()
        .map(|p| format!("{p} ×{}", counts.get(p).copied().unwrap_or(0)))
        .collect()
}

#[cfg(test)]
#[path = "discovery_tests.rs"]
mod tests;
