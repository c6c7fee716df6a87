//! Turning a sandbox [`CommandOutcome`] into what reports show.

use std::path::Path;
use std::time::Duration;

use crate::sandbox::CommandOutcome;

/// The path of a command's spooled output relative to the artifact directory
/// (`outputs/<stem>.stdout`, or `.stderr` when only stderr had bytes); the
/// other stream, if any, is the sibling with the other extension.
pub(crate) fn output_file(outcome: &CommandOutcome, outputs_dir: &Path) -> Option<String> {
    let spool = outcome
        .stdout
        .spool
        .as_ref()
        .or(outcome.stderr.spool.as_ref())?;
    let file = spool.file_name()?.to_string_lossy();
    Some(match outputs_dir.file_name() {
        Some(dir) => format!("{}/{file}", dir.to_string_lossy()),
        None => file.into_owned(),
    })
}

/// "timed out after 60 s" (or "after 250 ms" below a second).
pub(crate) fn timed_out_after(timeout: Duration) -> String {
    if timeout.as_millis().is_multiple_of(1000) {
        format!("timed out after {} s", timeout.as_secs())
    } else {
        format!("timed out after {} ms", timeout.as_millis())
    }
}

/// Why the command ended abnormally (a workspace limit, a timeout or a
/// signal), if it did.
pub(crate) fn abnormal_end(outcome: &CommandOutcome, timeout: Duration) -> Option<String> {
    if let Some(stopped) = &outcome.stopped {
        return Some(format!("was stopped: {stopped}"));
    }
    if let Some(crossed) = &outcome.limit_after {
        return Some(format!("crossed a workspace limit: {crossed}"));
    }
    if outcome.timed_out {
        return Some(timed_out_after(timeout));
    }
    outcome.signal.map(|signal| match signal {
        9 => "killed by signal 9 (out of memory, or killed by the sandbox)".to_string(),
        n => format!("killed by signal {n}"),
    })
}

pub(crate) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_read_naturally() {
        assert_eq!(
            timed_out_after(Duration::from_secs(60)),
            "timed out after 60 s"
        );
        assert_eq!(
            timed_out_after(Duration::from_millis(1500)),
            "timed out after 1500 ms"
        );
    }
}
