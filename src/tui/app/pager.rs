//! The full output of a tool call or a check, read from the run's artifacts
//! (bounded, from the end) into the pager.

use super::{App, Overlay, Pager};
use crate::protocol::CheckReport;
use crate::runs::read_tail;
use crate::tui::run_view::{CellState, StreamEntry};

/// How much of an output file the pager reads at most (the end is kept).
const PAGER_BYTES: u64 = 4 * 1024 * 1024;

/// How many lines of a file the pager shows at most (the tail is kept).
const PAGER_LINES: usize = 20_000;

impl App {
    pub(super) fn show_tool_output(&mut self) {
        let Some(StreamEntry::Tool {
            name,
            arguments,
            result,
            output_file,
            ..
        }) = self.view.stream.get(self.panes.stream.selected)
        else {
            self.flash = Some("select a tool call to see its output".into());
            return;
        };
        let title = format!("{name} {}", one_line(arguments, 60));
        let text = self.read_artifact(output_file.as_deref(), result);
        self.popups.raise(Overlay::Pager(Pager {
            title,
            lines: tail_lines(&text),
            scroll: 0,
        }));
    }

    pub(super) fn show_check_output(&mut self) {
        let row = self.panes.matrix_row;
        let Some(name) = self.view.matrix.checks.get(row).cloned() else {
            return;
        };
        // The latest result of the row, preferring the latest failure.
        let results: Vec<(u32, &CheckReport)> = self
            .view
            .matrix
            .attempts
            .iter()
            .rev()
            .filter_map(|a| match a.cells.get(row) {
                Some(CellState::Done(report)) => Some((a.number, report)),
                _ => None,
            })
            .collect();
        let chosen = results
            .iter()
            .find(|(_, r)| !r.passed)
            .or(results.first())
            .map(|(attempt, report)| (*attempt, (*report).clone()));
        let Some((attempt, report)) = chosen else {
            self.flash = Some(format!("{name} has no result yet"));
            return;
        };
        let exit = report
            .exit_code
            .map_or_else(|| "no exit code".to_string(), |c| format!("exit {c}"));
        let fallback = format!(
            "{}\n{exit}{}",
            report.command,
            report
                .failure
                .as_ref()
                .map(|f| format!("\n{f}"))
                .unwrap_or_default()
        );
        let text = self.read_artifact(report.output_file.as_deref(), &fallback);
        self.popups.raise(Overlay::Pager(Pager {
            title: format!("{name}, attempt {attempt}: {}", report.command),
            lines: tail_lines(&text),
            scroll: 0,
        }));
    }

    /// A file of the run's artifact directory, or `fallback` when there is none.
    fn read_artifact(&self, relative: Option<&str>, fallback: &str) -> String {
        let path = match (relative, self.view.artifact_dir.as_deref()) {
            (Some(rel), Some(dir)) => std::path::Path::new(dir).join(rel),
            _ => return fallback.to_string(),
        };
        match read_tail(&path, PAGER_BYTES) {
            Ok((text, 0)) => text,
            Ok((text, skipped)) => format!(
                "({skipped} earlier bytes not shown; the whole output is in {})\n{text}",
                path.display()
            ),
            Err(e) => format!("{fallback}\n\n(could not read {}: {e})", path.display()),
        }
    }
}

fn tail_lines(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(PAGER_LINES);
    lines[start..]
        .iter()
        .map(|l| crate::tui::text::clean(l))
        .collect()
}

/// The first line of `text`, cut to `max` characters.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() <= max && !text.contains('\n') {
        return line.to_string();
    }
    let cut: String = line.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}
