//! The verification matrix: rows are checks, columns are attempts.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph};

use super::chrome::pane_block;
use crate::protocol::VerificationReason;
use crate::terminal_text::cut_to as clip;
use crate::tui::run_view::duration;
use crate::tui::run_view::{Attempt, CellState, Matrix};
use crate::tui::theme::{Meaning, Theme};

const CELL: usize = 16;

/// `selected` is the check the person moved to, shown while the pane is `focused`.
pub fn draw(
    frame: &mut Frame,
    area: Rect,
    matrix: &Matrix,
    theme: &Theme,
    selected: usize,
    focused: bool,
) {
    let block = frame_of(matrix, theme, area, focused);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let dim = theme.get(Meaning::Text).add_modifier(Modifier::DIM);
    if matrix.checks.is_empty() {
        frame.render_widget(Paragraph::new(Span::styled("no checks yet", dim)), inner);
        return;
    }
    let name_width = matrix
        .checks
        .iter()
        .map(|c| c.chars().count())
        .max()
        .unwrap_or(5)
        .clamp(5, 18);
    let room = (inner.width as usize).saturating_sub(name_width + 1);
    let columns = (room / CELL).max(1);
    // The newest attempts that fit.
    let shown: Vec<&Attempt> = {
        let skip = matrix.attempts.len().saturating_sub(columns);
        matrix.attempts.iter().skip(skip).collect()
    };
    let mut lines = Vec::with_capacity(matrix.checks.len() + 1);
    let mut header = vec![Span::styled(format!("{:<name_width$} ", "check"), dim)];
    for attempt in &shown {
        let label = attempt_label(matrix, attempt);
        header.push(Span::styled(
            format!("{:<CELL$}", clip(&label, CELL - 1)),
            dim,
        ));
    }
    if shown.is_empty() {
        header.push(Span::styled("not verified yet", dim));
    }
    lines.push(Line::from(header));
    for (row, name) in matrix.checks.iter().enumerate() {
        let mut name_style = theme.get(Meaning::Text);
        if focused && row == selected {
            name_style = name_style.patch(theme.get(Meaning::Selection));
        }
        let mut spans = vec![Span::styled(
            format!("{:<name_width$}", clip(name, name_width)),
            name_style,
        )];
        spans.push(Span::raw(" "));
        for attempt in &shown {
            let (text, style) = cell(theme, attempt.cells.get(row));
            spans.push(Span::styled(
                format!("{:<CELL$}", clip(&text, CELL - 1)),
                style,
            ));
        }
        lines.push(Line::from(spans));
    }
    let rows = inner.height as usize;
    if rows == 0 {
        return;
    }
    let start = if lines.len() > rows {
        (selected + 2).saturating_sub(rows).min(lines.len() - rows)
    } else {
        0
    };
    let mut visible: Vec<Line> = Vec::with_capacity(rows);
    if start > 0 {
        visible.push(lines[0].clone());
        visible.extend(lines.into_iter().skip(start + 1).take(rows - 1));
    } else {
        visible.extend(lines.into_iter().take(rows));
    }
    frame.render_widget(Paragraph::new(visible), inner);
}

/// The pane's frame: the verdict in the title, and why the newest
/// verification failed on the bottom border.
fn frame_of(matrix: &Matrix, theme: &Theme, area: Rect, focused: bool) -> Block<'static> {
    let verdict = match matrix
        .attempts
        .iter()
        .rev()
        .find(|a| a.reason != VerificationReason::Baseline)
    {
        Some(Attempt {
            passed: Some(true), ..
        }) => " — passed",
        Some(Attempt {
            passed: Some(false),
            ..
        }) => " — failed",
        Some(_) => " — running",
        None => "",
    };
    let mut block = pane_block(theme, format!(" Verification{verdict} "), focused);
    // Why the newest verification's first failing check failed, in the words
    // of its output, on the bottom border: visible however small the pane.
    let why = matrix.attempts.last().and_then(|latest| {
        matrix
            .checks
            .iter()
            .zip(&latest.cells)
            .find_map(|(name, cell)| match cell {
                // Its output's telling line, else why it failed beyond its
                // exit (it changed the workspace, it hit a limit).
                CellState::Done(report) if !report.passed => report
                    .first_error
                    .as_ref()
                    .or(report.failure.as_ref())
                    .map(|why| format!(" ✗ {name}: {why} ")),
                _ => None,
            })
    });
    if let Some(why) = why {
        let room = (area.width as usize).saturating_sub(4);
        block = block.title_bottom(Line::from(Span::styled(
            clip(&why, room),
            theme.get(Meaning::CheckFail),
        )));
    }
    block
}

fn cell(theme: &Theme, state: Option<&CellState>) -> (String, Style) {
    match state {
        None | Some(CellState::Pending) => (
            "·".into(),
            theme.get(Meaning::Text).add_modifier(Modifier::DIM),
        ),
        Some(CellState::Running) => ("… running".into(), theme.get(Meaning::CheckRunning)),
        Some(CellState::Stopped) => (
            "– stopped".into(),
            theme.get(Meaning::Text).add_modifier(Modifier::DIM),
        ),
        Some(CellState::Done(report)) => {
            let exit = report
                .exit_code
                .map_or_else(|| "—".to_string(), |c| c.to_string());
            let time = duration(report.duration_ms);
            if report.passed {
                (format!("✓ {exit} {time}"), theme.get(Meaning::CheckPass))
            } else {
                (format!("✗ {exit} {time}"), theme.get(Meaning::CheckFail))
            }
        }
    }
}

/// What an attempt was, as its column says: "baseline", "completion 2",
/// "restored 1" — counted per kind, so the person reads which completion
/// the column judged.
fn attempt_label(matrix: &Matrix, attempt: &Attempt) -> String {
    let nth = matrix
        .attempts
        .iter()
        .filter(|a| a.number < attempt.number && a.reason == attempt.reason)
        .count()
        + 1;
    match attempt.reason {
        VerificationReason::Baseline if nth == 1 => "baseline".to_string(),
        VerificationReason::Baseline => format!("baseline {nth}"),
        VerificationReason::Completion => format!("completion {nth}"),
        VerificationReason::AfterRestore => format!("restored {nth}"),
    }
}
