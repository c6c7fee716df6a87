//! Numbers as the status line and panes show them.

/// `412 ms`, `3.2 s`, `2 m 05 s`.
pub fn duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} m {:02} s", ms / 60_000, (ms / 1000) % 60)
    }
}

pub use crate::protocol::format_tokens as tokens;

/// `312 B`, `4.0 KiB`, `1.0 MiB`.
pub fn bytes(n: u64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1024 * 1024 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0))
    }
}

/// A path of a run's artifact as the session shows it: from the run's own
/// folder (`20261201-101500-a1b2c3/final.patch`) when it lies in the state
/// directory's runs, else with the home directory as `~`. Long absolute
/// paths do not fit an 80-column pane.
pub fn artifact_path(path: &str) -> String {
    if let Some((_, rest)) = path.rsplit_once("/.agent/runs/") {
        return rest.to_string();
    }
    match std::env::var("HOME") {
        Ok(home) if !home.is_empty() && home != "/" => match path.strip_prefix(home.as_str()) {
            Some(rest) if rest.starts_with('/') => format!("~{rest}"),
            _ => path.to_string(),
        },
        _ => path.to_string(),
    }
}

/// The first 8 characters of an id or hash.
pub fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

#[cfg(test)]
mod tests {
    #[test]
    fn artifact_paths_start_at_the_run_folder() {
        assert_eq!(
            super::artifact_path(
                "/root/.local/state/minicoder/.agent/runs/20261201-101500-a1b2c3/final.patch"
            ),
            "20261201-101500-a1b2c3/final.patch"
        );
        assert_eq!(
            super::artifact_path("/elsewhere/x.patch"),
            "/elsewhere/x.patch"
        );
    }
}
