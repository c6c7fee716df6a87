//! `minicoder gc`: what dead runs left (containers, volumes, workspaces),
//! checkpoint stores and caches no run can use any more (see the retention
//! rules in [`crate::runs`]), and with `--older-than` every ended run older
//! than that.

use std::process::ExitCode;
use std::time::Duration;

use crate::sandbox::{self, gc::GcReport};
use crate::state::StateDir;

pub async fn run(caches: bool, older_than: Option<String>) -> anyhow::Result<ExitCode> {
    let older_than = match older_than.as_deref().map(parse_age) {
        None => None,
        Some(Ok(age)) => Some(age),
        Some(Err(e)) => {
            err!("minicoder: --older-than: {e}");
            return Ok(ExitCode::from(super::EXIT_USAGE));
        }
    };
    let state = StateDir::from_env()?;
    let mut report = GcReport::default();
    let mut removed_runs = Vec::new();
    if let Some(age) = older_than {
        let cutoff =
            chrono::Utc::now() - chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX);
        for run in crate::runs::older_than(&state, cutoff) {
            let bytes: u64 = [
                run.dir.clone(),
                state.checkpoint_store_dir(&run.id),
                state.workspace_dir(&run.id),
            ]
            .iter()
            .map(|p| crate::runs::disk_usage(p))
            .sum();
            if !crate::runs::remove_run(&state, &run).is_empty() {
                removed_runs.push((run.id, bytes));
            }
        }
    }
    // Copies prepared for a next run: those of sources that are gone, and
    // with --older-than those made before the cutoff.
    let cutoff = older_than.map(|age| std::time::SystemTime::now() - age);
    let prepared = crate::workspace::prepared::prune(&state.prepared_dir(), cutoff);
    // Workspaces and stores can be collected without Docker; containers cannot.
    let unmade = crate::runs::collect_unmade(&state);
    sandbox::gc::collect_workspaces(&state, &mut report);
    let stores = crate::runs::collect_stores(&state);
    let docker = sandbox::connect().await;
    if let Ok(docker) = &docker {
        sandbox::gc::collect_docker(docker, &mut report).await?;
        if caches {
            report
                .volumes
                .extend(sandbox::caches::collect(docker, state.root(), true).await?);
        }
    }
    for (id, bytes) in &removed_runs {
        out!("removed run {id} ({} KiB)", bytes.div_ceil(1024));
    }
    for dir in &unmade {
        out!(
            "removed {} (a run directory without a manifest)",
            dir.display()
        );
    }
    for c in &report.containers {
        out!("removed container {c}");
    }
    for v in &report.volumes {
        out!("removed volume {v}");
    }
    for w in &report.workspaces {
        out!("removed workspace {}", w.display());
    }
    for s in &stores {
        out!("removed {}", s.display());
    }
    if prepared > 0 {
        out!(
            "removed {prepared} prepared cop{}",
            if prepared == 1 { "y" } else { "ies" }
        );
    }
    if report.is_empty()
        && stores.is_empty()
        && removed_runs.is_empty()
        && unmade.is_empty()
        && prepared == 0
    {
        out!("nothing to remove");
    }
    match docker {
        Ok(_) => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
    }
}

/// `7d`, `12h`, `30m`, `90s`, `2w`, or a sum of them (`1d12h`).
pub(crate) fn parse_age(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{text:?} is not a duration; write it as a number and a unit: 7d, 12h, 30m, 90s, 2w, or 1d12h"
        )
    };
    let text = text.trim();
    if text.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit: u64 = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 7 * 86_400,
            _ => return Err(bad()),
        };
        let n: u64 = number.parse().map_err(|_| bad())?;
        total = total.saturating_add(n.saturating_mul(unit));
        number.clear();
    }
    if !number.is_empty() {
        return Err(bad());
    }
    Ok(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_as_people_write_them() {
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_age("12h"), Ok(Duration::from_secs(12 * 3600)));
        assert_eq!(parse_age("1d12h"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_age("0s"), Ok(Duration::ZERO));
        for bad in ["", "7", "d", "7x", "-1d", "1.5h"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}
