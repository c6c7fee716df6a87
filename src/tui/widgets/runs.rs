//! The runs browser: this repository's runs, newest first, and one run opened
//! (what `minicoder show` prints): its diff, verification matrix and events.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::chrome::pane_block;
use crate::protocol::CheckReport;
use crate::terminal_text::cut_to as cut;
use crate::tui::run_view::RunView;
use crate::tui::screen::runs::{Browser, OpenRun, RunEntry, Section};
use crate::tui::text::clean;
use crate::tui::theme::{Meaning, Theme};

/// Columns at least this wide show every column of the list with its full header.
const WIDE: u16 = 110;

/// The list of runs, or the run opened from it; `view` is this session's run.
pub fn draw(frame: &mut Frame, area: Rect, view: &RunView, theme: &Theme, browser: &mut Browser) {
    if browser.open.is_some() {
        if let Some(open) = browser.open.as_mut() {
            show(theme, frame, area, open);
        }
    } else {
        list(view, theme, frame, area, browser);
    }
}

fn keys<'a>(theme: &Theme, pairs: &[(&'a str, &'a str)]) -> Line<'a> {
    let mut spans = vec![Span::raw(" ")];
    for (key, what) in pairs {
        spans.push(Span::styled(*key, theme.get(Meaning::HelpKey)));
        spans.push(Span::styled(
            format!(" {what} "),
            theme.get(Meaning::Border),
        ));
    }
    Line::from(spans)
}

/// What this session is about: the task of the run on the main screen.
fn current_task(view: &RunView, theme: &Theme) -> Line<'static> {
    let task = clean(&view.task).replace('\n', " ");
    let task = if task.is_empty() {
        "(no task yet)".to_string()
    } else {
        task
    };
    Line::from(vec![
        Span::styled(" This session: ", theme.get(Meaning::Title)),
        Span::styled(task, theme.get(Meaning::Text)),
    ])
}

fn list(view: &RunView, theme: &Theme, frame: &mut Frame, area: Rect, browser: &Browser) {
    let title = format!(
        " Runs of {} ({}) ",
        clean(&repo_name(&view.repo)),
        browser.runs.len()
    );
    let block = pane_block(theme, title, true).title_bottom(keys(
        theme,
        &[
            ("Enter", "open"),
            ("a", "apply"),
            ("u", "undo"),
            ("Esc", "back"),
            ("?", "keys"),
        ],
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [task, header, rows, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(inner);
    frame.render_widget(Paragraph::new(current_task(view, theme)), task);
    let wide = inner.width >= WIDE;
    let task_width = usize::from(inner.width).saturating_sub(fixed_width(wide));
    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(
            row_text(&header_cells(wide), task_width, "  "),
            theme.get(Meaning::Title),
        ))),
        header,
    );
    let height = usize::from(rows.height);
    if browser.runs.is_empty() {
        let note = match (&browser.error, browser.loading) {
            (Some(e), _) => format!(" could not list the runs: {}", clean(e)),
            (None, true) => " reading the runs…".to_string(),
            (None, false) => " no run of this repository yet: type a task and press Enter".into(),
        };
        frame.render_widget(
            Paragraph::new(Span::styled(note, theme.get(Meaning::Text))),
            rows,
        );
        return;
    }
    let top = browser
        .selected
        .saturating_sub(height.saturating_sub(1))
        .min(browser.runs.len().saturating_sub(height));
    let lines: Vec<Line> = browser
        .runs
        .iter()
        .enumerate()
        .skip(top)
        .take(height)
        .map(|(i, run)| {
            let selected = i == browser.selected;
            let marker = if selected { "▶ " } else { "  " };
            let text = row_text(&cells(run, wide), task_width, marker);
            let style = if selected {
                theme.get(Meaning::Selection)
            } else {
                outcome_style(theme, run)
            };
            Line::from(Span::styled(text, style))
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), rows);
    let status = match (&browser.error, browser.runs.get(browser.selected)) {
        (Some(e), _) => Span::styled(format!(" {}", clean(e)), theme.get(Meaning::CheckFail)),
        (None, Some(run)) => {
            Span::styled(format!(" files: {}", files(run)), theme.get(Meaning::Text))
        }
        (None, None) => Span::raw(""),
    };
    frame.render_widget(Paragraph::new(status), footer);
}

fn outcome_style(theme: &Theme, run: &RunEntry) -> Style {
    match run.outcome.as_str() {
        "success" => theme.get(Meaning::Text),
        "running" => theme.get(Meaning::CheckRunning),
        _ => theme.get(Meaning::CheckFail),
    }
}

fn files(run: &RunEntry) -> String {
    if run.changed_files.is_empty() {
        return "none".into();
    }
    clean(&run.changed_files.join(", ")).replace('\n', " ")
}

fn yes_no(value: Option<bool>) -> &'static str {
    match value {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// ID, AGE, OUTCOME, VERIFIED, APPLIED, (FILES), then TASK.
fn widths(wide: bool) -> &'static [usize] {
    if wide {
        &[24, 4, 11, 8, 7, 5]
    } else {
        &[24, 4, 11, 3, 3]
    }
}

fn fixed_width(wide: bool) -> usize {
    2 + widths(wide).iter().map(|w| w + 1).sum::<usize>()
}

fn header_cells(wide: bool) -> Vec<String> {
    let names: &[&str] = if wide {
        &[
            "ID", "AGE", "OUTCOME", "VERIFIED", "APPLIED", "FILES", "TASK",
        ]
    } else {
        &["ID", "AGE", "OUTCOME", "VER", "APP", "TASK"]
    };
    names.iter().map(|n| n.to_string()).collect()
}

fn cells(run: &RunEntry, wide: bool) -> Vec<String> {
    let mut cells = vec![
        clean(&run.id),
        run.age.clone(),
        run.outcome.clone(),
        yes_no(run.verified).to_string(),
        if run.applied { "yes" } else { "no" }.to_string(),
    ];
    if wide {
        cells.push(run.changed_files.len().to_string());
    }
    cells.push(clean(&run.task).replace('\n', " "));
    cells
}

/// One row: the fixed columns padded, the task cut to what is left.
fn row_text(cells: &[String], task_width: usize, marker: &str) -> String {
    let Some((task, fixed)) = cells.split_last() else {
        return String::new();
    };
    let wide = fixed.len() == widths(true).len();
    let mut out = marker.to_string();
    for (cell, width) in fixed.iter().zip(widths(wide)) {
        out.push_str(&pad(&cut(cell, *width), *width));
        out.push(' ');
    }
    out.push_str(&cut(task, task_width));
    out
}

fn pad(text: &str, width: usize) -> String {
    let len = text.chars().count();
    format!("{text}{}", " ".repeat(width.saturating_sub(len)))
}

fn repo_name(repo: &str) -> String {
    std::path::Path::new(repo)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| repo.to_string())
}

/// The opened run: what it was, then one section at a time.
fn show(theme: &Theme, frame: &mut Frame, area: Rect, open: &mut OpenRun) {
    let entry = &open.detail.entry;
    let applied = if entry.applied {
        "applied"
    } else {
        "not applied"
    };
    let verified = match entry.verified {
        Some(true) => "verified",
        Some(false) => "not verified",
        None => "no verification",
    };
    let title = format!(
        " Run {} — {}, {verified}, {applied} ",
        clean(&entry.id),
        entry.outcome
    );
    let block = pane_block(theme, title, true).title_bottom(keys(
        theme,
        &[
            ("Tab", "section"),
            ("a", "apply"),
            ("u", "undo"),
            ("Esc", "runs"),
            ("?", "keys"),
        ],
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [head, tabs, body] = Layout::vertical([
        Constraint::Length(3),
        Constraint::Length(1),
        Constraint::Fill(1),
    ])
    .areas(inner);
    let text = theme.get(Meaning::Text);
    frame.render_widget(Paragraph::new(head_lines(theme, open)), head);
    let mut tab_spans = vec![Span::raw(" ")];
    for section in [Section::Diff, Section::Verification, Section::Events] {
        let style = if section == open.section {
            theme.get(Meaning::Selection)
        } else {
            theme.get(Meaning::Border)
        };
        tab_spans.push(Span::styled(format!(" {} ", section.title()), style));
        tab_spans.push(Span::raw(" "));
    }
    frame.render_widget(Paragraph::new(Line::from(tab_spans)), tabs);
    match open.section {
        Section::Diff => crate::tui::diff::render_diff(
            body,
            frame.buffer_mut(),
            &open.detail.patch,
            &mut open.diff_state,
            theme,
            true,
            None,
        ),
        Section::Verification => {
            let lines = check_lines(theme, &open.detail.checks, open.scroll);
            let block = pane_block(theme, " Verification ", false);
            frame.render_widget(Paragraph::new(lines).block(block), body);
        }
        Section::Events => {
            let skipped = if open.detail.events_skipped > 0 {
                " (the earliest not shown)"
            } else {
                ""
            };
            let title = format!(" Events: {}{skipped} ", open.detail.events.len());
            let lines: Vec<Line> = open
                .detail
                .events
                .iter()
                .skip(open.scroll)
                .take(usize::from(body.height))
                .map(|e| Line::from(Span::styled(e.clone(), text)))
                .collect();
            let block = pane_block(theme, title, false);
            frame.render_widget(Paragraph::new(lines).block(block), body);
        }
    }
}

/// The opened run's task, result and summary.
fn head_lines(theme: &Theme, open: &OpenRun) -> Vec<Line<'static>> {
    let entry = &open.detail.entry;
    let text = theme.get(Meaning::Text);
    let label = theme.get(Meaning::Title);
    let summary = open
        .detail
        .summary
        .as_deref()
        .map(|s| clean(s).replace('\n', " "))
        .unwrap_or_else(|| "-".into());
    vec![
        Line::from(vec![
            Span::styled(" Task: ", label),
            Span::styled(clean(&entry.task).replace('\n', " "), text),
        ]),
        Line::from(vec![
            Span::styled(" Result: ", label),
            Span::styled(clean(&open.detail.reason).replace('\n', " "), text),
            Span::styled(format!(" ({} ago)", entry.age), text),
        ]),
        Line::from(vec![
            Span::styled(" Summary: ", label),
            Span::styled(summary, text),
        ]),
    ]
}

/// The opened run's checks, from the `scroll`th.
fn check_lines(theme: &Theme, checks: &[CheckReport], scroll: usize) -> Vec<Line<'static>> {
    let text = theme.get(Meaning::Text);
    let label = theme.get(Meaning::Title);
    if checks.is_empty() {
        vec![Line::from(Span::styled(" no check ran", text))]
    } else {
        checks
            .iter()
            .skip(scroll)
            .map(|check| {
                let (mark, style) = if check.passed {
                    ("✓", theme.get(Meaning::CheckPass))
                } else {
                    ("✗", theme.get(Meaning::CheckFail))
                };
                let exit = check
                    .exit_code
                    .map_or_else(|| "no exit code".to_string(), |c| format!("exit {c}"));
                let why = check
                    .first_error
                    .as_deref()
                    .or(check.failure.as_deref())
                    .map(|w| format!(" — {}", clean(w).replace('\n', " ")))
                    .unwrap_or_default();
                Line::from(vec![
                    Span::styled(format!(" {mark} "), style),
                    Span::styled(format!("{:<12} ", clean(&check.name)), label),
                    Span::styled(
                        format!(
                            "{exit}, {}  {}{why}",
                            crate::tui::run_view::duration(check.duration_ms),
                            clean(&check.command).replace('\n', " ")
                        ),
                        text,
                    ),
                ])
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_fits_its_width_whatever_the_task() {
        let cells: Vec<String> = ["20261130-051500-3f9a1c2e", "2m", "success", "yes", "no"]
            .iter()
            .map(|s| s.to_string())
            .chain(["a very long task ".repeat(20)])
            .collect();
        let task_width = 80 - fixed_width(false);
        let row = row_text(&cells, task_width, "  ");
        assert_eq!(row.chars().count(), 80);
        assert!(row.ends_with('…'), "{row}");
    }
}
