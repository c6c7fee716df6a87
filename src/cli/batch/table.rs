//! The batch's table: live on a terminal (redrawn in place, as many rows as
//! the screen holds), and whole at the end. Plain text lines; the printer
//! escapes each.

use super::scheduler::{Scheduler, Slot, TaskResult};
use crate::protocol::format_tokens;

const HEADER: [&str; 6] = ["ID", "STATE", "TURN", "VERDICT", "TIME", "TOKENS"];

fn clock(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

fn verdict(r: &TaskResult) -> String {
    match (r.outcome.as_str(), r.verified) {
        ("success", true) => "verified".into(),
        (outcome, _) => outcome.to_string(),
    }
}

fn done_row(id: &str, r: &TaskResult) -> [String; 6] {
    [
        id.to_string(),
        "done".into(),
        r.turns.to_string(),
        verdict(r),
        clock(r.duration_ms),
        format_tokens(r.tokens.input.saturating_add(r.tokens.output)),
    ]
}

fn row(id: &str, slot: &Slot, now_ms: u64) -> [String; 6] {
    let dash = || "-".to_string();
    match slot {
        Slot::Queued => [id.into(), "queued".into(), dash(), dash(), dash(), dash()],
        Slot::Interrupted { .. } => [
            id.into(),
            "to resume".into(),
            dash(),
            dash(),
            dash(),
            dash(),
        ],
        Slot::Stopped { .. } => [id.into(), "stopped".into(), dash(), dash(), dash(), dash()],
        Slot::Running(live) => [
            id.into(),
            if live.resuming { "resuming" } else { "running" }.into(),
            live.turn.to_string(),
            dash(),
            clock(now_ms.saturating_sub(live.started_ms)),
            format_tokens(live.tokens),
        ],
        Slot::Done(r) => done_row(id, r),
    }
}

fn lay_out(rows: &[[String; 6]]) -> Vec<String> {
    let mut widths = HEADER.map(str::len);
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 6]| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            // Numbers right-aligned, words left.
            let right = matches!(i, 2 | 4 | 5);
            let text = if right {
                format!("{cell:>w$}")
            } else {
                format!("{cell:<w$}")
            };
            out.push_str(&text);
            if i < 5 {
                out.push_str("  ");
            }
        }
        out.trim_end().to_string()
    };
    let mut lines = vec![line(HEADER)];
    for r in rows {
        lines.push(line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5]]));
    }
    lines
}

/// The counts line: how far the batch is.
pub(crate) fn status(s: &Scheduler, elapsed_ms: u64) -> String {
    let over = s.is_over();
    let mut done = 0;
    let mut verified = 0;
    let mut running = 0;
    let mut waiting = 0;
    for slot in &s.slots {
        match slot {
            Slot::Done(r) => {
                done += 1;
                verified += usize::from(r.verified);
            }
            Slot::Running(_) => running += 1,
            _ => waiting += 1,
        }
    }
    let stopping = match (s.stopping(), over) {
        (false, _) => "",
        (true, false) => " · stopping (Ctrl-C again kills)",
        (true, true) => " · stopped",
    };
    let engines = if s.placement.is_empty() {
        String::new()
    } else {
        format!(" · engines {}", s.placement.describe())
    };
    format!(
        "batch: {done}/{} done ({verified} verified) · {running} running · {waiting} waiting · parallel {} · {}{engines}{stopping}",
        s.slots.len(),
        s.parallel,
        clock(elapsed_ms)
    )
}

/// The live table in at most `height` lines: the counts, the header, the
/// running tasks, then the latest finished ones and the next queued ones
/// as room allows.
pub(crate) fn live(s: &Scheduler, now_ms: u64, height: usize) -> Vec<String> {
    let room = height.saturating_sub(2).max(1);
    let mut chosen: Vec<usize> = (0..s.slots.len())
        .filter(|&i| matches!(s.slots[i], Slot::Running(_)))
        .collect();
    let finished: Vec<usize> = (0..s.slots.len())
        .filter(|&i| matches!(s.slots[i], Slot::Done(_)))
        .collect();
    let waiting: Vec<usize> = (0..s.slots.len())
        .filter(|&i| !matches!(s.slots[i], Slot::Done(_) | Slot::Running(_)))
        .collect();
    let left = room.saturating_sub(chosen.len());
    let from_finished = finished
        .len()
        .min(left.div_ceil(2).max(left.saturating_sub(waiting.len())));
    chosen.extend(&finished[finished.len() - from_finished..]);
    let left = room.saturating_sub(chosen.len());
    chosen.extend(waiting.iter().take(left));
    chosen.truncate(room);
    chosen.sort_unstable();
    let rows: Vec<[String; 6]> = chosen
        .iter()
        .map(|&i| row(&s.ids[i], &s.slots[i], now_ms))
        .collect();
    let mut lines = vec![status(s, now_ms)];
    lines.extend(lay_out(&rows));
    lines
}

/// Every task, for the end of the batch.
pub(crate) fn summary(s: &Scheduler, now_ms: u64) -> Vec<String> {
    let rows: Vec<[String; 6]> = s
        .ids
        .iter()
        .zip(&s.slots)
        .map(|(id, slot)| row(id, slot, now_ms))
        .collect();
    lay_out(&rows)
}

#[cfg(test)]
mod tests {
    use super::super::scheduler::{Entry, Exit};
    use super::*;

    fn snapshot(name: &str, text: &str) {
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path("../../../snapshots");
        settings.set_prepend_module_to_snapshot(false);
        settings.bind(|| insta::assert_snapshot!(name, text));
    }

    fn scheduler() -> Scheduler {
        let ids = (1..=9).map(|i| format!("fix-{i}")).collect();
        let mut s = Scheduler::new(ids, 3, &[]);
        s.next_starts(0);
        for (i, outcome, verified) in [(0, "success", true), (1, "failure", false)] {
            s.started(i, &format!("r{i}"), "/a");
            let mut r = TaskResult::error(&s.ids[i], String::new(), 0);
            r.outcome = outcome.into();
            r.verified = verified;
            r.turns = 4 + i as u32;
            r.duration_ms = 61_000 + i as u64 * 1000;
            r.tokens.input = 12_000;
            r.tokens.output = 800;
            s.exited(i, Exit::Report(Box::new(r)));
        }
        s.next_starts(5_000);
        s.started(2, "r2", "/a");
        s.turn(2, 7);
        s.tokens(2, 45_300);
        s
    }

    #[test]
    fn the_live_table_fits_its_height_and_keeps_every_running_task() {
        let s = scheduler();
        snapshot("batch_live_table", &live(&s, 95_000, 8).join("\n"));
        let short = live(&s, 95_000, 4);
        assert_eq!(short.len(), 4);
        let running_rows = short
            .iter()
            .filter(|l| l.starts_with("fix-") && l.contains("running"))
            .count();
        assert_eq!(
            running_rows, 2,
            "the rows there is room for go to running tasks first"
        );
    }

    #[test]
    fn runs_spread_over_engines_show_where_each_engine_stands() {
        use super::super::placement::Placement;
        let engines = Placement::new(vec![("farm".into(), 2), ("here".into(), 1)]);
        let ids = (1..=5).map(|i| format!("fix-{i}")).collect();
        let mut s = Scheduler::new(ids, 4, &[]).spread_over(engines);
        s.placement.start_asking();
        s.placement.answered("farm", Ok(()));
        s.placement.answered("here", Ok(()));
        s.next_starts(0);
        s.started(0, "r0", "/a");
        let mut failed = TaskResult::error("fix-1", String::new(), 1);
        failed.outcome = "failure".into();
        s.exited(0, Exit::Report(Box::new(failed)));
        s.placement.start_asking();
        s.placement
            .answered("farm", Err("connection refused".into()));
        let text = live(&s, 12_000, 8).join("\n");
        snapshot("batch_live_table_engines", &text);
        assert!(text.contains("engines farm gone, here 1/1"), "{text}");
    }

    #[test]
    fn the_summary_lists_every_task() {
        let mut s = scheduler();
        s.stop();
        let text = summary(&s, 95_000).join("\n");
        snapshot("batch_summary_table", &text);
        assert_eq!(summary(&s, 0).len(), 10);
        let _ = Entry::Finished(TaskResult::error("x", String::new(), 1));
    }
}
