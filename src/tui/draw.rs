//! The screen: a status line, the panes, the input box, and whatever is over them.
//!
//! Layout adapts from 80×24 up: the left column holds the plan over the tool
//! stream, the right one the diff over the verification matrix; a zoomed pane
//! takes the whole body.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::app::App;
use super::run_view::{Phase, tokens};
use super::screen::Screen;
use super::screen::panes::Pane;
use super::theme::Meaning;
use super::widgets;
use super::widgets::chrome::pane_block;
use super::widgets::overlay::Scene;
use crate::protocol::Outcome;

/// Where each pane goes this frame.
#[derive(Debug, Clone, Copy, Default)]
pub struct Areas {
    pub status: Rect,
    pub plan: Rect,
    pub stream: Rect,
    pub diff: Rect,
    pub matrix: Rect,
    pub input: Rect,
}

pub fn layout(app: &App, area: Rect) -> Areas {
    let panes = &app.panes;
    let input_height = (app.composer.input.lines().len() as u16).clamp(1, 4) + 2;
    let [status, body, input] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(3),
        Constraint::Length(input_height),
    ])
    .areas(area);
    let mut areas = Areas {
        status,
        input,
        ..Areas::default()
    };
    if panes.zoomed {
        match panes.focus {
            Pane::Plan => areas.plan = body,
            Pane::Stream => areas.stream = body,
            Pane::Diff => areas.diff = body,
            Pane::Matrix => areas.matrix = body,
            Pane::Input => {}
        }
        if panes.focus != Pane::Input {
            return areas;
        }
    }
    let left_share = if body.width >= 140 { 38 } else { 42 };
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(left_share), Constraint::Fill(1)]).areas(body);
    let plan_rows = (app.view.plan.len().max(1) as u16 + 2).min((left.height / 3).max(3));
    [areas.plan, areas.stream] =
        Layout::vertical([Constraint::Length(plan_rows), Constraint::Fill(1)]).areas(left);
    let matrix_rows =
        (app.view.matrix.checks.len().max(1) as u16 + 3).min((right.height / 3).max(4));
    [areas.diff, areas.matrix] =
        Layout::vertical([Constraint::Fill(1), Constraint::Length(matrix_rows)]).areas(right);
    areas
}

impl App {
    /// One frame: each component draws its own state with the run's view;
    /// the screen first, then the approval modal, then the popups, bottom first.
    pub fn draw(&mut self, frame: &mut Frame) {
        let area = frame.area();
        let areas = layout(self, area);
        status_line(self, frame, areas.status);
        let theme = &self.settings.theme;
        match &mut self.screen {
            Screen::Runs { browser, .. } => {
                widgets::runs::draw(frame, body_of(&areas, area), &self.view, theme, browser);
            }
            Screen::Review(review) => {
                widgets::review::draw(frame, body_of(&areas, area), theme, review);
            }
            Screen::Panes => panes(self, frame, &areas),
        }
        input_box(self, frame, areas.input);
        let theme = &self.settings.theme;
        if self.approvals.is_visible() {
            widgets::approval::draw(frame, area, theme, &mut self.approvals);
        }
        let scene = Scene {
            theme,
            keymap: &self.settings.keymap,
            review: self.screen.review(),
        };
        let delivery = self.deliveries.shown.as_ref();
        for popup in self.popups.iter_mut() {
            widgets::overlay::draw(&scene, frame, area, popup);
            widgets::delivery::draw(theme, frame, area, popup, delivery);
        }
    }
}

/// The four panes of the run, where the layout put them.
fn panes(app: &mut App, frame: &mut Frame, areas: &Areas) {
    let (view, theme, panes) = (&app.view, &app.settings.theme, &mut app.panes);
    let focus = panes.focus;
    if !areas.plan.is_empty() {
        let plan = areas.plan;
        widgets::plan::draw(
            frame,
            plan,
            view,
            theme,
            panes.plan_scroll,
            focus == Pane::Plan,
        );
    }
    if !areas.stream.is_empty() {
        let focused = focus == Pane::Stream;
        widgets::stream::draw(frame, areas.stream, view, theme, &mut panes.stream, focused);
    }
    if !areas.diff.is_empty() {
        super::diff::render_diff(
            areas.diff,
            frame.buffer_mut(),
            &panes.diff,
            &mut panes.diff_state,
            theme,
            focus == Pane::Diff,
            None,
        );
    }
    if !areas.matrix.is_empty() {
        let (matrix, row) = (&view.matrix, panes.matrix_row);
        let focused = focus == Pane::Matrix;
        widgets::matrix::draw(frame, areas.matrix, matrix, theme, row, focused);
    }
}

/// The body: everything between the status line and the input box.
fn body_of(areas: &Areas, full: Rect) -> Rect {
    Rect {
        x: full.x,
        y: areas.status.bottom(),
        width: full.width,
        height: areas.input.y.saturating_sub(areas.status.bottom()),
    }
}

fn status_line(app: &App, frame: &mut Frame, area: Rect) {
    let view = &app.view;
    let theme = &app.settings.theme;
    let base = theme.get(Meaning::Status);
    let asking = app.composer.mode == crate::tui::screen::panes::InputMode::Ask;
    let (state, state_style) = match &view.phase {
        _ if app.composer.asking => ("ask mode · answering".to_string(), base),
        phase if asking && !matches!(phase, Phase::Running | Phase::Starting) => {
            ("ask mode · read-only".to_string(), base)
        }
        Phase::Idle => ("waiting for a task".to_string(), base),
        Phase::Starting => ("starting".to_string(), base),
        Phase::Running => ("working".to_string(), base),
        Phase::Finished { outcome, .. } => match outcome {
            Outcome::Success => ("✓ verified".to_string(), base.add_modifier(Modifier::BOLD)),
            Outcome::Failure => ("✗ failed".to_string(), base.add_modifier(Modifier::BOLD)),
            Outcome::Cancelled => ("cancelled".to_string(), base),
            Outcome::Budget => (
                "budget used up".to_string(),
                base.add_modifier(Modifier::BOLD),
            ),
        },
        Phase::Failed(_) => ("could not start".to_string(), base),
    };
    // (priority, text): the most useful parts stay when the line is short of room,
    // and the ones kept are shown in their usual order.
    let mut parts: Vec<(u8, String)> = vec![(0, repo_name(&view.repo))];
    if let Some(model) = &view.model {
        // Narrow screens keep the model's name and drop its provider.
        let name = if area.width >= 120 {
            format!("{}/{}", model.provider, model.model)
        } else {
            model.model.clone()
        };
        parts.push((2, name));
    }
    if view.max_turns > 0 {
        parts.push((1, format!("turn {}/{}", view.turn, view.max_turns)));
    }
    parts.extend(spend_parts(&view.spend));
    if let Some(elapsed) = app.elapsed() {
        let budget = if view.timeout_ms > 0 {
            format!("/{}", clock(view.timeout_ms))
        } else {
            String::new()
        };
        parts.push((1, format!("{}{budget}", clock(elapsed.as_millis() as u64))));
    }
    parts.push(match &view.preparing {
        // While the run is set up, its phase is what matters most.
        Some(what) if area.width >= 120 => (0, format!("preparing: {what}")),
        Some(what) => (0, what.clone()),
        None => (3, format!("sandbox {}", view.sandbox.label())),
    });
    let right = match &app.flash {
        Some(flash) => flash.clone(),
        None => state,
    };
    let width = area.width as usize;
    let right_width = right.chars().count() + 2;
    let mut room = width.saturating_sub(right_width + " minicoder".len());
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| parts[i].0);
    let mut keep = vec![false; parts.len()];
    for i in order {
        let cost = parts[i].1.chars().count() + 3;
        if cost <= room {
            room -= cost;
            keep[i] = true;
        }
    }
    let mut left = String::from(" minicoder");
    for (part, _) in parts.iter().zip(&keep).filter(|(_, kept)| **kept) {
        left.push_str(" │ ");
        left.push_str(&part.1);
    }
    let pad = width.saturating_sub(left.chars().count() + right_width);
    let line = Line::from(vec![
        Span::styled(left, base),
        Span::styled(" ".repeat(pad + 1), base),
        Span::styled(format!("{right} "), state_style),
    ]);
    frame.render_widget(Paragraph::new(line).style(base), area);
}

fn input_box(app: &mut App, frame: &mut Frame, area: Rect) {
    let focused = app.panes.focus == Pane::Input && matches!(app.screen, Screen::Panes);
    // The run's task stays in sight above the box, cut to the room there is.
    let task = super::text::clean(&app.view.task).replace('\n', " ");
    let room = usize::from(area.width).saturating_sub(24);
    let task = if task.chars().count() > room {
        let mut cut: String = task.chars().take(room.saturating_sub(1)).collect();
        cut.push('…');
        cut
    } else {
        task
    };
    let asking = app.composer.mode == crate::tui::screen::panes::InputMode::Ask;
    let title = match (app.view.is_running(), task.is_empty()) {
        (true, true) => " Follow-up ".to_string(),
        (true, false) => format!(" Follow-up — the task: {task} "),
        (false, _) if asking => " Ask — read-only: no commands, no edits ".to_string(),
        (false, true) => " Task ".to_string(),
        (false, false) => format!(" Task — the last one: {task} "),
    };
    let hints = key_hints(app);
    let block = pane_block(&app.settings.theme, title, focused).title_bottom(
        Line::from(Span::styled(hints, app.settings.theme.get(Meaning::Border))).right_aligned(),
    );
    let text_style = app.settings.theme.get(Meaning::Text);
    app.composer.input.set_block(block);
    app.composer.input.set_style(text_style);
    app.composer
        .input
        .set_placeholder_style(text_style.add_modifier(Modifier::DIM));
    app.composer.input.set_cursor_style(if focused {
        Style::default().add_modifier(Modifier::REVERSED)
    } else {
        Style::default()
    });
    frame.render_widget(&app.composer.input, area);
}

/// The few keys that matter right now, under the input box.
fn key_hints(app: &App) -> String {
    let running = app.view.is_running();
    let hints = match (app.panes.focus, running) {
        (Pane::Input, true) => " Enter send · Esc/Tab panes · ? keys · Ctrl-C cancel ",
        (Pane::Input, false) if app.composer.mode == crate::tui::screen::panes::InputMode::Ask => {
            " Enter ask · /code TASK run · Esc/Tab panes · ? keys · Ctrl-C quit "
        }
        (Pane::Input, false) => {
            " Enter start · Ctrl-R runs · Esc/Tab panes · ? keys · Ctrl-C quit "
        }
        (_, true) => " Tab next pane · z zoom · i type · ? keys · Ctrl-C cancel ",
        (_, false) => " Tab next pane · i type · Ctrl-R runs · ? keys · q quit ",
    };
    match (&app.deliveries.applied_run, app.panes.focus) {
        (Some(_), focus) if focus != Pane::Input => format!(" u undo the apply ·{hints}"),
        _ => hints.to_string(),
    }
}

/// The status line's figures of what the run spent: the totals (with the
/// cached part of the input), the cost against its budget, the latest
/// reply's counts (dropped first when room is short).
fn spend_parts(spend: &crate::tui::run_view::Spend) -> Vec<(u8, String)> {
    let mut parts = Vec::new();
    let t = &spend.totals;
    if t.input + t.output == 0 {
        return parts;
    }
    let approx = if t.estimated { "≈" } else { "" };
    let cached = if t.cached > 0 {
        format!(" ({} cached)", tokens(t.cached))
    } else {
        String::new()
    };
    parts.push((
        5,
        format!(
            "{approx}{} in{cached} {} out",
            tokens(t.input),
            tokens(t.output)
        ),
    ));
    match (spend.cost(), spend.max_cost_micros) {
        (Some(cost), Some(max)) => parts.push((
            4,
            format!(
                "{} of {}",
                crate::protocol::format_usd(cost),
                crate::protocol::format_usd(max)
            ),
        )),
        (Some(cost), None) => parts.push((6, crate::protocol::format_usd(cost))),
        (None, _) => {}
    }
    if let Some(last) = spend.last.filter(|_| spend.replies > 1) {
        parts.push((
            7,
            format!("last {}/{}", tokens(last.input), tokens(last.output)),
        ));
    }
    parts
}

/// The last path component of the repository, or the whole path.
fn repo_name(repo: &str) -> String {
    std::path::Path::new(repo)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| repo.to_string())
}

/// `mm:ss`, or `h:mm:ss` past an hour.
pub fn clock(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}
