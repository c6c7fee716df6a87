//! The apply and undo screens: what is going on, what was written (or why
//! nothing was), and the choices that follow; and the questions asked before
//! an unverified apply or an undo.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear, Paragraph, Wrap};

use super::chrome::centered;
use crate::tui::screen::delivery::{
    Applied, ApplyFailure, CheckLine, Delivery, DeliveryState, RunRef, Undone, Verified,
};
use crate::tui::screen::popups::Overlay;
use crate::tui::text::clean;
use crate::tui::theme::{Meaning, Theme};

/// Draws `popup` if it is one of the apply and undo popups; `delivery` is
/// the apply or undo on screen.
pub fn draw(
    theme: &Theme,
    frame: &mut Frame,
    area: Rect,
    popup: &Overlay,
    delivery: Option<&Delivery>,
) {
    match popup {
        Overlay::Delivery => {
            if let Some(delivery) = delivery {
                result(theme, frame, area, delivery);
            }
        }
        Overlay::ConfirmUnverified => {
            let subset = delivery
                .and_then(|d| d.request.as_ref())
                .is_some_and(|r| r.subset.is_some());
            let what = if subset {
                "The chosen hunks did not pass verification."
            } else {
                "This run's patch did not pass verification."
            };
            confirm(
                theme,
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
        Overlay::ConfirmUndo(run) => confirm(
            theme,
            frame,
            area,
            " Undo the apply? ",
            vec![
                format!("Put back the files run {} changed.", clean(&run.id)),
                "A file changed since the apply is left as it is.".into(),
            ],
            &[("y", "undo"), ("n", "keep the change")],
        ),
        Overlay::ConfirmForceUndo(run) => confirm(
            theme,
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
    theme: &Theme,
    frame: &mut Frame,
    area: Rect,
    title: &str,
    text: Vec<String>,
    keys: &[(&str, &str)],
) {
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

/// The lines of a result, with the room a list may take in them.
struct Body<'t> {
    theme: &'t Theme,
    room: usize,
    lines: Vec<Line<'static>>,
}

impl Body<'_> {
    fn say(&mut self, meaning: Meaning, text: impl Into<String>) {
        let style = self.theme.get(meaning);
        self.lines
            .push(Line::from(Span::styled(format!(" {}", text.into()), style)));
    }

    fn list(&mut self, items: &[String], max: usize) {
        let style = self.theme.get(Meaning::Text);
        self.lines.extend(listed(items, max, style));
    }

    fn checks(&mut self, checks: &[CheckLine], max: usize) {
        self.lines.extend(check_lines(self.theme, checks, max));
    }
}

type Keys = Vec<(&'static str, &'static str)>;

fn result(theme: &Theme, frame: &mut Frame, area: Rect, delivery: &Delivery) {
    let width = area.width.saturating_sub(4).min(100);
    let mut body = Body {
        theme,
        // Room for the list inside the modal, whatever else it says.
        room: usize::from(area.height.saturating_sub(12)).max(1),
        lines: Vec::new(),
    };
    let RunRef { id, task, .. } = &delivery.run;
    body.say(
        Meaning::Text,
        format!("Task: {}", clean(task).replace('\n', " ")),
    );
    let id = clean(id);
    let (title, keys) = match &delivery.state {
        DeliveryState::Applying { progress } => {
            let subset = delivery
                .request
                .as_ref()
                .is_some_and(|r| r.subset.is_some());
            body.say(
                Meaning::Text,
                if subset {
                    "The chosen hunks are verified again before anything is written…"
                } else {
                    "Checking the run's receipt, then writing every file or none…"
                },
            );
            if let Some(progress) = progress {
                body.say(Meaning::CheckRunning, clean(progress).replace('\n', " "));
            }
            (format!(" Applying run {id} "), Vec::new())
        }
        DeliveryState::Applied(applied) => (
            format!(" Applied run {id} "),
            applied_lines(&mut body, applied),
        ),
        DeliveryState::ApplyFailed(failure) => (
            format!(" Run {id} not applied "),
            failed_lines(&mut body, failure),
        ),
        DeliveryState::Undoing { force } => {
            body.say(
                Meaning::Text,
                if *force {
                    "Restoring every file as it was before the apply…"
                } else {
                    "Restoring the files as they were before the apply…"
                },
            );
            (format!(" Undoing run {id} "), Vec::new())
        }
        DeliveryState::Undone(undone) => {
            (format!(" Undid run {id} "), undone_lines(&mut body, undone))
        }
        DeliveryState::UndoFailed(why) => {
            body.say(Meaning::CheckFail, "✗ Nothing was restored:");
            body.say(Meaning::Text, clean(why).replace('\n', " "));
            (format!(" Run {id} not undone "), vec![("Esc", "close")])
        }
    };
    let mut lines = body.lines;
    lines.push(Line::from(""));
    if !keys.is_empty() {
        lines.push(key_line(theme, &keys));
    }
    let height = lines.len() as u16 + 2 + wrapped_extra(&lines, width);
    modal(theme, frame, centered(area, width, height), title, lines);
}

fn applied_lines(body: &mut Body, applied: &Applied) -> Keys {
    body.say(
        Meaning::CheckPass,
        format!(
            "✓ {} file(s) written to the source, left uncommitted.",
            applied.changes.len()
        ),
    );
    match &applied.verified {
        Verified::Run => body.say(Meaning::Text, "The run's verified patch, whole."),
        Verified::Subset(checks) => {
            body.say(
                Meaning::Text,
                "The chosen hunks passed the run's checks again:",
            );
            body.checks(checks, 4);
        }
        Verified::Unverified(checks) => {
            body.say(
                Meaning::CheckFail,
                "UNVERIFIED: applied on your explicit choice, recorded so.",
            );
            body.checks(checks, 4);
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
    body.list(&changes, body.room);
    vec![("u", "undo it"), ("Esc", "close")]
}

fn failed_lines(body: &mut Body, failure: &ApplyFailure) -> Keys {
    match failure {
        ApplyFailure::SubsetFailed { why, checks } => {
            body.say(
                Meaning::CheckFail,
                "✗ The chosen hunks are not verified: nothing was written.",
            );
            body.say(Meaning::Text, clean(why).replace('\n', " "));
            body.checks(checks, body.room);
            vec![("!", "apply them unverified…"), ("Esc", "back")]
        }
        ApplyFailure::Unverified(why) => {
            body.say(Meaning::CheckFail, "✗ Nothing was written:");
            body.say(Meaning::Text, clean(why).replace('\n', " "));
            vec![("!", "apply it unverified…"), ("Esc", "close")]
        }
        ApplyFailure::Overlap(paths) => {
            body.say(
                Meaning::CheckFail,
                "✗ The source changed since the run where the patch changes it; nothing was written:",
            );
            body.list(paths, body.room);
            vec![("m", "try a three-way merge"), ("Esc", "close")]
        }
        ApplyFailure::Unmerged(paths) => {
            body.say(
                Meaning::CheckFail,
                "✗ These files do not merge cleanly; nothing was written:",
            );
            body.list(paths, body.room);
            vec![("Esc", "close")]
        }
        ApplyFailure::Other(why) => {
            body.say(Meaning::CheckFail, "✗ Nothing was written:");
            body.say(Meaning::Text, clean(why).replace('\n', " "));
            vec![("Esc", "close")]
        }
    }
}

fn undone_lines(body: &mut Body, undone: &Undone) -> Keys {
    body.say(
        Meaning::CheckPass,
        format!(
            "✓ {} file(s) put back as they were before the apply.",
            undone.restored.len()
        ),
    );
    let half = (body.room / 2).max(1);
    body.list(&undone.restored, half);
    if undone.skipped.is_empty() {
        return vec![("Esc", "close")];
    }
    body.say(
        Meaning::CheckFail,
        format!(
            "{} file(s) changed since the apply, left as they are:",
            undone.skipped.len()
        ),
    );
    body.list(&undone.skipped, half);
    vec![("F", "restore them too…"), ("Esc", "close")]
}
