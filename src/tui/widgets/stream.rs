//! The tool-call stream: one line per call, model text and notes, live.
//!
//! Only the visible entries are laid out, so a run with tens of thousands of
//! events draws as fast as a short one.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use std::collections::HashSet;

use super::chrome::pane_block;
use crate::tui::run_view::duration;
use crate::tui::run_view::{NoteKind, RunView, StreamEntry, ToolState};
use crate::tui::screen::panes::StreamState;
use crate::tui::theme::{Meaning, Theme};

/// Lines of a tool's result shown when it is expanded.
const EXPANDED_RESULT_LINES: usize = 12;
/// Lines of streaming model text shown while it arrives.
const STREAMING_LINES: usize = 3;

/// Draws the activity; the selection follows the newest entry, or is kept in view.
pub fn draw(
    frame: &mut Frame,
    area: Rect,
    view: &RunView,
    theme: &Theme,
    state: &mut StreamState,
    focused: bool,
) {
    let count = view.stream.len();
    let title = if state.follow || count == 0 {
        format!(" Activity ({count}) ")
    } else {
        format!(" Activity ({}/{count}) ", state.selected + 1)
    };
    let block = pane_block(theme, title, focused);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if count == 0 {
        let hint = match &view.phase {
            crate::tui::run_view::Phase::Idle => "type a task below and press Enter",
            _ => "waiting for the agent…",
        };
        let style = theme.get(Meaning::Text).add_modifier(Modifier::DIM);
        frame.render_widget(Paragraph::new(Span::styled(hint, style)), inner);
        return;
    }
    let width = inner.width as usize;
    let rows = inner.height as usize;
    let entries = &view.stream;
    state.selected = if state.follow {
        count - 1
    } else {
        state.selected.min(count - 1)
    };
    // Keep the selection visible: scroll up to it, or down until it fits.
    if state.offset > state.selected {
        state.offset = state.selected;
    }
    let expanded = &state.expanded;
    let height = |i: usize| entry_lines(theme, &entries[i], expanded, i, width, false).len();
    let mut first = state.selected;
    let mut used = height(first);
    while first > state.offset {
        let above = height(first - 1);
        if used + above > rows {
            break;
        }
        used += above;
        first -= 1;
    }
    let offset = first;
    state.offset = offset;
    let mut lines: Vec<Line> = Vec::with_capacity(rows);
    for (i, entry) in entries.iter().enumerate().skip(state.offset) {
        if lines.len() >= rows {
            break;
        }
        let selected = focused && i == state.selected;
        lines.extend(entry_lines(
            theme,
            entry,
            &state.expanded,
            i,
            width,
            selected,
        ));
    }
    lines.truncate(rows);
    frame.render_widget(Paragraph::new(lines), inner);
}

/// How an entry is drawn: the theme, the width it has, whether it is expanded.
struct Look<'t> {
    theme: &'t Theme,
    width: usize,
    expanded: bool,
    dim: Style,
}

/// The lines one entry takes at `width`.
fn entry_lines(
    theme: &Theme,
    entry: &StreamEntry,
    expanded: &HashSet<usize>,
    index: usize,
    width: usize,
    selected: bool,
) -> Vec<Line<'static>> {
    let look = Look {
        theme,
        width,
        expanded: expanded.contains(&index),
        dim: theme.get(Meaning::Text).add_modifier(Modifier::DIM),
    };
    let mut lines = match entry {
        StreamEntry::Tool {
            name,
            arguments,
            state,
            summary,
            result,
            ..
        } => tool_lines(&look, name, arguments, state, summary, result),
        StreamEntry::Model {
            turn,
            text,
            streaming,
        } => model_lines(&look, *turn, text, *streaming),
        StreamEntry::Note { kind, text } => note_lines(&look, *kind, text),
        StreamEntry::Answer { text } => answer_lines(&look, text),
    };
    if selected {
        let highlight = theme.get(Meaning::Selection);
        for line in &mut lines {
            line.style = highlight;
        }
        if let Some(first) = lines.first_mut() {
            pad_to(first, width, highlight);
        }
    }
    lines
}

fn tool_lines(
    look: &Look,
    name: &str,
    arguments: &str,
    tool_state: &ToolState,
    summary: &str,
    result: &str,
) -> Vec<Line<'static>> {
    let (mark, style) = match tool_state {
        ToolState::Running => ("…", look.theme.get(Meaning::ToolRunning)),
        ToolState::Finished { ok: true, .. } => ("✓", look.theme.get(Meaning::ToolOk)),
        ToolState::Finished { ok: false, .. } => ("✗", look.theme.get(Meaning::ToolError)),
        ToolState::Refused => ("⊘", look.theme.get(Meaning::ToolError)),
    };
    let tail = match tool_state {
        ToolState::Running => "running".to_string(),
        ToolState::Finished { duration_ms, .. } if summary.is_empty() => duration(*duration_ms),
        ToolState::Finished { .. } => summary.to_string(),
        ToolState::Refused => format!("refused: {summary}"),
    };
    let brief = arguments_brief(arguments);
    let mut head = vec![
        Span::styled(format!("{mark} "), style),
        Span::styled(name.to_string(), style.add_modifier(Modifier::BOLD)),
    ];
    if !brief.is_empty() {
        head.push(Span::styled(
            format!(" {brief}"),
            look.theme.get(Meaning::Text),
        ));
    }
    head.push(Span::styled(format!("  {tail}"), look.dim));
    let mut lines = vec![fit(head, look.width)];
    if look.expanded && !result.is_empty() {
        let all: Vec<&str> = result.lines().collect();
        for line in all.iter().take(EXPANDED_RESULT_LINES) {
            lines.push(fit(
                vec![Span::styled(format!("  │ {line}"), look.dim)],
                look.width,
            ));
        }
        if all.len() > EXPANDED_RESULT_LINES {
            let more = all.len() - EXPANDED_RESULT_LINES;
            lines.push(Line::from(Span::styled(
                format!("  │ … {more} more lines (o: full output)"),
                look.dim,
            )));
        }
    }
    lines
}

/// An answer of ask mode: every line, wrapped, under its label.
fn answer_lines(look: &Look, text: &str) -> Vec<Line<'static>> {
    let style = look.theme.get(Meaning::Text);
    let mut lines = vec![Line::from(Span::styled(
        "◆ answer",
        look.theme.get(Meaning::Title),
    ))];
    for line in wrap(text.trim(), look.width.saturating_sub(4).max(10)) {
        lines.push(Line::from(Span::styled(format!("  {line}"), style)));
    }
    lines
}

fn model_lines(look: &Look, turn: u32, text: &str, streaming: bool) -> Vec<Line<'static>> {
    let style = look.theme.get(Meaning::Text);
    let label = Span::styled(format!("◆ {turn} "), look.theme.get(Meaning::Title));
    let body: Vec<String> = wrap(text.trim(), look.width.saturating_sub(4).max(10));
    let shown: Vec<String> = if look.expanded {
        body
    } else if streaming {
        let start = body.len().saturating_sub(STREAMING_LINES);
        body[start..].to_vec()
    } else {
        let more = body.len() > 1;
        let mut first = body.into_iter().next().unwrap_or_default();
        if more {
            first.push_str(" …");
        }
        vec![first]
    };
    let cursor = if streaming { "▌" } else { "" };
    let last = shown.len().saturating_sub(1);
    shown
        .into_iter()
        .enumerate()
        .map(|(n, text)| {
            let lead = if n == 0 {
                label.clone()
            } else {
                Span::raw("    ")
            };
            let mut spans = vec![lead, Span::styled(text, style)];
            if n == last {
                spans.push(Span::styled(cursor, look.theme.get(Meaning::ToolRunning)));
            }
            fit(spans, look.width)
        })
        .collect()
}

fn note_lines(look: &Look, kind: NoteKind, text: &str) -> Vec<Line<'static>> {
    let (mark, style) = match kind {
        NoteKind::Info => ("·", look.dim),
        NoteKind::Warning => ("!", look.theme.get(Meaning::ToolRunning)),
        NoteKind::Error => ("✗", look.theme.get(Meaning::ToolError)),
        NoteKind::User => ("›", look.theme.get(Meaning::Title)),
    };
    let body = if look.expanded {
        wrap(text, look.width.saturating_sub(2).max(10))
    } else {
        vec![text.lines().next().unwrap_or("").to_string()]
    };
    body.into_iter()
        .enumerate()
        .map(|(n, t)| {
            let lead = if n == 0 {
                format!("{mark} ")
            } else {
                "  ".into()
            };
            fit(
                vec![Span::styled(lead, style), Span::styled(t, style)],
                look.width,
            )
        })
        .collect()
}

/// The interesting part of a call's JSON arguments: its string values, in order.
fn arguments_brief(arguments: &str) -> String {
    let parsed: Option<serde_json::Map<String, serde_json::Value>> =
        serde_json::from_str(arguments).ok();
    let Some(map) = parsed else {
        return arguments.replace('\n', " ");
    };
    let parts: Vec<String> = map
        .iter()
        .filter(|(key, _)| key.as_str() != "patch" && key.as_str() != "items")
        .map(|(_, value)| match value {
            // Decoding the JSON brings back any control it escaped.
            serde_json::Value::String(s) => crate::tui::text::clean(s).replace('\n', " "),
            other => other.to_string(),
        })
        .collect();
    parts.join(" ")
}

/// Cuts a line of spans to `width` characters, ending with `…` when cut.
fn fit(spans: Vec<Span<'static>>, width: usize) -> Line<'static> {
    let mut out = Vec::with_capacity(spans.len());
    let mut used = 0;
    for span in spans {
        let len = span.content.chars().count();
        if used + len <= width {
            used += len;
            out.push(span);
            continue;
        }
        let room = width.saturating_sub(used);
        if room > 0 {
            let cut: String = span.content.chars().take(room - 1).collect();
            out.push(Span::styled(format!("{cut}…"), span.style));
        }
        break;
    }
    Line::from(out)
}

fn pad_to(line: &mut Line<'static>, width: usize, style: Style) {
    let used: usize = line.spans.iter().map(|s| s.content.chars().count()).sum();
    if used < width {
        line.spans
            .push(Span::styled(" ".repeat(width - used), style));
    }
}

/// Wraps text at `width` characters, breaking at spaces where it can.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.lines() {
        let raw = raw.replace('\t', "    ");
        let mut line = String::new();
        let mut len = 0;
        for word in raw.split(' ') {
            let wlen = word.chars().count();
            if len > 0 && len + 1 + wlen > width {
                out.push(std::mem::take(&mut line));
                len = 0;
            }
            if len > 0 {
                line.push(' ');
                len += 1;
            }
            let mut rest: String = word.to_string();
            while rest.chars().count() > width {
                let head: String = rest.chars().take(width).collect();
                rest = rest.chars().skip(width).collect();
                out.push(head);
            }
            len += rest.chars().count();
            line.push_str(&rest);
        }
        out.push(line);
    }
    if out.is_empty() {
        out.push(String::new());
    }
    out
}
