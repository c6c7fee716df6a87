//! The final review (`--approval final`): the verified patch per file and per
//! hunk; the chosen hunks are applied to the source (verified again when they
//! are not the whole patch), or saved as a patch.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::screen::Review;
use crate::tui::theme::{Meaning, Theme};

pub fn draw(frame: &mut Frame, area: Rect, theme: &Theme, review: &mut Review) {
    let [body, footer] = Layout::vertical([Constraint::Fill(1), Constraint::Length(2)]).areas(area);
    crate::tui::diff::render_diff(
        body,
        frame.buffer_mut(),
        &review.model,
        &mut review.state,
        theme,
        true,
        Some(&review.selection),
    );
    let key = theme.get(Meaning::HelpKey);
    let text = theme.get(Meaning::Text);
    let (chosen, total) = review.selection.chosen();
    let mut first = Line::from(vec![Span::styled(
        " Review the verified patch: ",
        theme.get(Meaning::Title),
    )]);
    if review.model.files.iter().any(|f| f.touches_config()) {
        first.spans.push(Span::styled(
            "config! it changes the repository's minicoder configuration",
            theme.get(Meaning::CheckFail),
        ));
        first.spans.push(Span::styled(" · ", text));
    }
    first.spans.extend([
        Span::styled(format!("{chosen} of {total} hunks chosen"), text),
        Span::styled(" · ", text),
        Span::styled(
            crate::tui::text::clean(&review.run.task).replace('\n', " "),
            text,
        ),
    ]);
    let second = match &review.saved {
        Some(Ok(path)) => Line::from(vec![
            Span::styled(" saved ", theme.get(Meaning::CheckPass)),
            Span::styled(path.clone(), text),
            Span::styled(" — apply it with ", text),
            Span::styled(format!("git apply {path}"), key),
        ]),
        Some(Err(e)) => Line::from(Span::styled(
            format!(" could not save the patch: {e}"),
            theme.get(Meaning::CheckFail),
        )),
        None => Line::from(vec![
            Span::styled(" space", key),
            Span::styled(" hunk  ", text),
            Span::styled("A", key),
            Span::styled(" all  ", text),
            Span::styled("] [", key),
            Span::styled(" hunks  ", text),
            Span::styled("} {", key),
            Span::styled(" files  ", text),
            Span::styled("Enter", key),
            Span::styled(" apply  ", text),
            Span::styled("s", key),
            Span::styled(" save  ", text),
            Span::styled("Esc", key),
            Span::styled(" close", text),
        ]),
    };
    frame.render_widget(Paragraph::new(vec![first, second]), footer);
}
