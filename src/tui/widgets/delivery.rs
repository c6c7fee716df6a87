//! The apply and undo screens: what is going on, what was written (or why
//! nothing was), and the choices that follow; and the questions asked before
//! an unverified apply or an undo.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use crate::tui::app::{
    App, ApplyFailure, CheckLine, Delivery, DeliveryState, Overlay, RunRef, Verified,
};
use crate::tui::draw::centered;
use crate::tui::text::clean;
use crate::tui::theme::{Meaning, Theme};

pub fn draw(app: &App, frame: &mut Frame, area: Rect) {
    match &app.overlay {
        Some(Overlay::Delivery) => {
            if let Some(delivery) = &app.delivery {
                result(app, frame, area, delivery);
            }
        }
        Some(Overlay::ConfirmUnverified) => {
            let subset = app
                .delivery
                .as_ref()
                .and_then(|d| d.request.as_ref())
                .is_some_and(|r| r.subset.is_some());
            let what = if subset {
                "The chosen hunks did not pass verification."
            } else {
                "This run's patch did not pass verification."
            };
            confirm(
                app,
                frame,
                area,
                " Apply unverified? ",
                vec![
                    what.to_string(),
                    "It is written to the source as it is; the journal records it as unverified."
                        .into(),
                ],
                &[("y", "apply unverified"), ("n", "back")],
            );
        }
        Some(Overlay::ConfirmUndo(run)) => confirm(
            app,
            frame,
            area,
            " Undo the apply? ",
            vec![
                format!("Put back the files run {} changed.", clean(&run.id)),
                "A file changed since the apply is left as it is.".into(),
            ],
            &[("y", "undo"), ("n", "keep the change")],
        ),
        Some(Overlay::ConfirmForceUndo(run)) => confirm(
            app,
            frame,
            area,
            " Restore the changed files too? ",
            vec![
                format!(
                    "The files changed since run {} was applied get their old content back.",
                    clean(&run.id)
                ),
                "What was edited in them since is lost.".into(),
            ],
            &[("y", "restore them"), ("n", "leave them")],
        ),
        _ => {}
    }
}

fn modal(theme: &Theme, frame: &mut Frame, rect: Rect, title: String, lines: Vec<Line>) {
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(theme.get(Meaning::BorderFocused))
        .title(Line::from(Span::styled(title, theme.get(Meaning::Title))));
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        rect,
    );
}

fn key_line<'a>(theme: &Theme, pairs: &[(&'a str, &'a str)]) -> Line<'a> {
    let mut spans = vec![Span::raw(" ")];
    for (key, what) in pairs {
        spans.push(Span::styled(*key, theme.get(Meaning::HelpKey)));
        spans.push(Span::styled(
            format!(" {what}   "),
            theme.get(Meaning::Text),
        ));
    }
    Line::from(spans)
}

fn confirm(
    app: &App,
    frame: &mut Frame,
    area: Rect,
    title: &str,
    text: Vec<String>,
    keys: &[(&str, &str)],
) {
    let theme = &app.theme;
    let mut lines: Vec<Line> = text
        .into_iter()
        .map(|t| Line::from(Span::styled(format!(" {t}"), theme.get(Meaning::Text))))
        .collect();
    lines.push(Line::from(""));
    lines.push(key_line(theme, keys));
    let width = area.width.saturating_sub(4).min(84);
    let height = lines.len() as u16 + 2 + wrapped_extra(&lines, width);
    modal(
        theme,
        frame,
        centered(area, width, height),
        title.into(),
        lines,
    );
}

/// Rows that lines wider than the modal take when wrapped.
fn wrapped_extra(lines: &[Line], width: u16) -> u16 {
    let inner = usize::from(width.saturating_sub(2)).max(1);
    lines
        .iter()
        .map(|l| (l.width().max(1) - 1) / inner)
        .sum::<usize>() as u16
}

/// A list of paths or checks, at most `max` of them, then how many more.
fn listed<'a>(items: &[String], max: usize, style: Style) -> Vec<Line<'a>> {
    let mut lines: Vec<Line> = items
        .iter()
        .take(max)
        .map(|i| Line::from(Span::styled(format!("   {}", clean(i)), style)))
        .collect();
    if items.len() > max {
        lines.push(Line::from(Span::styled(
            format!("   … and {} more", items.len() - max),
            style,
        )));
    }
    lines
}

fn check_lines<'a>(theme: &Theme, checks: &[CheckLine], max: usize) -> Vec<Line<'a>> {
    let mut lines: Vec<Line> = checks
        .iter()
        .take(max)
        .map(|c| {
            let (mark, style) = if c.passed {
                ("✓", theme.get(Meaning::CheckPass))
            } else {
                ("✗", theme.get(Meaning::CheckFail))
            };
            let detail = if c.detail.is_empty() {
                String::new()
            } else {
                format!(" — {}", clean(&c.detail).replace('\n', " "))
            };
            Line::from(vec![
                Span::styled(format!("   {mark} "), style),
                Span::styled(
                    format!("{}{detail}", clean(&c.name)),
                    theme.get(Meaning::Text),
                ),
            ])
        })
        .collect();
    if checks.len() > max {
        lines.push(Line::from(Span::styled(
            format!("   … and {} more checks", checks.len() - max),
            theme.get(Meaning::Text),
        )));
    }
    lines
}

fn result(app: &App, frame: &mut Frame, area: Rect, delivery: &Delivery) {
    let theme = &app.theme;
    let text = theme.get(Meaning::Text);
    let pass = theme.get(Meaning::CheckPass);
    let fail = theme.get(Meaning::CheckFail);
    let width = area.width.saturating_sub(4).min(100);
    // Room for the list inside the modal, whatever else it says.
    let room = usize::from(area.height.saturating_sub(12)).max(1);
    let say = |style: Style, t: String| Line::from(Span::styled(format!(" {t}"), style));
    let RunRef { id, task, .. } = &delivery.run;
    let mut lines = vec![say(
        text,
        format!("Task: {}", clean(task).replace('\n', " ")),
    )];
    let keys: Vec<(&str, &str)>;
    let title;
    match &delivery.state {
        DeliveryState::Applying { progress } => {
            title = format!(" Applying run {} ", clean(id));
            let subset = delivery
                .request
                .as_ref()
                .is_some_and(|r| r.subset.is_some());
            lines.push(say(
                text,
                if subset {
                    "The chosen hunks are verified again before anything is written…".into()
                } else {
                    "Checking the run's receipt, then writing every file or none…".into()
                },
            ));
            if let Some(progress) = progress {
                lines.push(say(
                    theme.get(Meaning::CheckRunning),
                    clean(progress).replace('\n', " "),
                ));
            }
            keys = Vec::new();
        }
        DeliveryState::Applied(applied) => {
            title = format!(" Applied run {} ", clean(id));
            lines.push(say(
                pass,
                format!(
                    "✓ {} file(s) written to the source, left uncommitted.",
                    applied.changes.len()
                ),
            ));
            match &applied.verified {
                Verified::Run => lines.push(say(text, "The run's verified patch, whole.".into())),
                Verified::Subset(checks) => {
                    lines.push(say(
                        text,
                        "The chosen hunks passed the run's checks again:".into(),
                    ));
                    lines.extend(check_lines(theme, checks, 4));
                }
                Verified::Unverified(checks) => {
                    lines.push(say(
                        fail,
                        "UNVERIFIED: applied on your explicit choice, recorded so.".into(),
                    ));
                    lines.extend(check_lines(theme, checks, 4));
                }
            }
            let changes: Vec<String> = applied
                .changes
                .iter()
                .map(|(letter, path)| {
                    let merged = if applied.merged.iter().any(|m| path.ends_with(m.as_str())) {
                        "  (merged with your edit)"
                    } else {
                        ""
                    };
                    format!("{letter} {path}{merged}")
                })
                .collect();
            lines.extend(listed(&changes, room, text));
            keys = vec![("u", "undo it"), ("Esc", "close")];
        }
        DeliveryState::ApplyFailed(failure) => {
            title = format!(" Run {} not applied ", clean(id));
            match failure {
                ApplyFailure::SubsetFailed { why, checks } => {
                    lines.push(say(
                        fail,
                        "✗ The chosen hunks are not verified: nothing was written.".into(),
                    ));
                    lines.push(say(text, clean(why).replace('\n', " ")));
                    lines.extend(check_lines(theme, checks, room));
                    keys = vec![("!", "apply them unverified…"), ("Esc", "back")];
                }
                ApplyFailure::Unverified(why) => {
                    lines.push(say(fail, "✗ Nothing was written:".into()));
                    lines.push(say(text, clean(why).replace('\n', " ")));
                    keys = vec![("!", "apply it unverified…"), ("Esc", "close")];
                }
                ApplyFailure::Overlap(paths) => {
                    lines.push(say(
                        fail,
                        "✗ The source changed since the run where the patch changes it; nothing was written:"
                            .into(),
                    ));
                    lines.extend(listed(paths, room, text));
                    keys = vec![("m", "try a three-way merge"), ("Esc", "close")];
                }
                ApplyFailure::Unmerged(paths) => {
                    lines.push(say(
                        fail,
                        "✗ These files do not merge cleanly; nothing was written:".into(),
                    ));
                    lines.extend(listed(paths, room, text));
                    keys = vec![("Esc", "close")];
                }
                ApplyFailure::Other(why) => {
                    lines.push(say(fail, "✗ Nothing was written:".into()));
                    lines.push(say(text, clean(why).replace('\n', " ")));
                    keys = vec![("Esc", "close")];
                }
            }
        }
        DeliveryState::Undoing { force } => {
            title = format!(" Undoing run {} ", clean(id));
            lines.push(say(
                text,
                if *force {
                    "Restoring every file as it was before the apply…".into()
                } else {
                    "Restoring the files as they were before the apply…".into()
                },
            ));
            keys = Vec::new();
        }
        DeliveryState::Undone(undone) => {
            title = format!(" Undid run {} ", clean(id));
            lines.push(say(
                pass,
                format!(
                    "✓ {} file(s) put back as they were before the apply.",
                    undone.restored.len()
                ),
            ));
            let half = (room / 2).max(1);
            lines.extend(listed(&undone.restored, half, text));
            if undone.skipped.is_empty() {
                keys = vec![("Esc", "close")];
            } else {
                lines.push(say(
                    fail,
                    format!(
                        "{} file(s) changed since the apply, left as they are:",
                        undone.skipped.len()
                    ),
                ));
                lines.extend(listed(&undone.skipped, half, text));
                keys = vec![("F", "restore them too…"), ("Esc", "close")];
            }
        }
        DeliveryState::UndoFailed(why) => {
            title = format!(" Run {} not undone ", clean(id));
            lines.push(say(fail, "✗ Nothing was restored:".into()));
            lines.push(say(text, clean(why).replace('\n', " ")));
            keys = vec![("Esc", "close")];
        }
    }
    lines.push(Line::from(""));
    if !keys.is_empty() {
        lines.push(key_line(theme, &keys));
    }
    let height = lines.len() as u16 + 2 + wrapped_extra(&lines, width);
    modal(theme, frame, centered(area, width, height), title, lines);
}
