//! The parsers that take hostile input, each as a function of bytes, for
//! the fuzzing bench (`benches/fuzz.rs`): beyond "no panic", each checks a
//! property that must hold for every input. A broken property panics, as a
//! crash does, and the bench keeps the input.

use std::path::Path;

/// The targets, by name.
pub const TARGETS: [&str; 5] = [
    "unified_diff",
    "sse",
    "project_config",
    "git_path",
    "redact",
];

/// Runs `target` on `data`; panics on a crash or a broken property.
pub fn run(target: &str, data: &[u8]) {
    match target {
        "unified_diff" => unified_diff(data),
        "sse" => sse(data),
        "project_config" => project_config(data),
        "git_path" => git_path(data),
        "redact" => redact(data),
        other => panic!("no fuzz target {other}"),
    }
}

/// A short description of what `target` made of `data` (Ok, or the kind of
/// error), so the fuzzer can tell inputs that take new paths.
pub fn outcome(target: &str, data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let kind = |r: Result<(), String>| match r {
        Ok(()) => "ok".to_string(),
        // The kind of error, not what it quotes.
        Err(e) => e
            .chars()
            .take_while(|c| !matches!(c, ':' | '(' | '"' | '`' | '\'' | '{'))
            .filter(|c| !c.is_ascii_digit())
            .take(32)
            .collect(),
    };
    match target {
        "unified_diff" => {
            let (file, patch) = split(&text);
            kind(
                crate::tools::unified_diff::parse_unified_diff(patch).and_then(|p| {
                    let lines = crate::tools::unified_diff::TextLines::parse(file);
                    crate::tools::unified_diff::apply_hunks(&lines, &p.hunks)
                        .map(|_| ())
                        .map_err(|e| format!("{e:?}"))
                }),
            )
        }
        "sse" => kind(
            crate::model::openai::decode_plain_body(data, &Default::default())
                .map(|_| ())
                .map_err(|e| format!("{e:?}")),
        ),
        "project_config" => kind(
            crate::verify::config::parse_config(Path::new(".minicoder.json"), &text)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        ),
        "git_path" => format!(
            "{}{}",
            crate::workspace::verify_path(data, false),
            crate::workspace::verify_path(data, true)
        ),
        "redact" => (crate::trace::redact::shown(&text) == text).to_string(),
        _ => String::new(),
    }
}

/// Input of two texts: before the first NUL, and after it.
fn split(text: &str) -> (&str, &str) {
    text.split_once('\0').unwrap_or(("", text))
}

/// Parse and apply never panic; an applied patch's result holds every
/// added line; and the diff of two texts, parsed and applied, gives the
/// second text back.
fn unified_diff(data: &[u8]) {
    use crate::tools::unified_diff::{TextLines, apply_hunks, parse_unified_diff};
    let text = String::from_utf8_lossy(data);
    let (file, patch) = split(&text);
    if let Ok(parsed) = parse_unified_diff(patch) {
        let lines = TextLines::parse(file);
        if let Ok(after) = apply_hunks(&lines, &parsed.hunks) {
            for hunk in &parsed.hunks {
                for line in hunk.new_lines() {
                    assert!(
                        after.lines.iter().any(|l| l.trim_end() == line.trim_end()),
                        "a line of the hunk's new side is missing from the result"
                    );
                }
            }
        }
    }
    // The round trip: `file` into `patch` (taken as a second text).
    if !file.contains('\r')
        && !patch.contains('\r')
        && file.ends_with('\n')
        && patch.ends_with('\n')
    {
        let diff = similar::TextDiff::from_lines(file, patch)
            .unified_diff()
            .context_radius(3)
            .header("a/f", "b/f")
            .to_string();
        if diff.is_empty() {
            return;
        }
        let parsed = parse_unified_diff(&diff);
        assert!(
            parsed.is_ok(),
            "a diff similar wrote does not parse: {parsed:?}"
        );
        let Ok(parsed) = parsed else { return };
        let after = apply_hunks(&TextLines::parse(file), &parsed.hunks);
        assert!(
            after.is_ok(),
            "a diff does not apply to the text it was made from"
        );
        let Ok(after) = after else { return };
        assert_eq!(
            after.render(),
            patch,
            "the round trip gives the second text back"
        );
    }
}

/// A reply body (JSON or SSE) never panics however it is cut or garbled,
/// and what it assembles is bounded.
fn sse(data: &[u8]) {
    if let Ok(parts) = crate::model::openai::decode_plain_body(data, &Default::default()) {
        let text = parts.content.as_deref().unwrap_or_default();
        assert!(
            text.len() <= data.len(),
            "the assembled text is longer than the body it came from"
        );
        assert!(
            parts.tool_calls.len() <= data.len(),
            "more tool calls than bytes"
        );
    }
}

/// `.minicoder.json` never panics; a configuration that parses names its
/// checks validly.
fn project_config(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(config) = crate::verify::config::parse_config(Path::new(".minicoder.json"), &text) {
        for check in &config.verification {
            assert!(
                crate::verify::valid_check_name(&check.name),
                "a check name that the flags would refuse: {:?}",
                check.name
            );
        }
    }
}

/// A path git accepts has no `.`, `..` or `.git` component (whatever its
/// case), is relative, and holds no NUL.
fn git_path(data: &[u8]) {
    for symlink in [false, true] {
        if !crate::workspace::verify_path(data, symlink) {
            continue;
        }
        assert!(!data.contains(&0), "a NUL accepted");
        assert!(!data.starts_with(b"/"), "an absolute path accepted");
        for part in data.split(|b| *b == b'/') {
            assert!(part != b"." && part != b"..", "a dot component accepted");
            assert!(!part.eq_ignore_ascii_case(b".git"), ".git accepted");
        }
    }
}

/// Redaction is idempotent, and a key planted in any text does not survive it.
fn redact(data: &[u8]) {
    use crate::trace::redact::shown;
    let text = String::from_utf8_lossy(data);
    let once = shown(&text).into_owned();
    assert_eq!(
        shown(&once),
        once.as_str(),
        "redacting twice changes the text"
    );
    // A key built here (never written in a source file) with a key's
    // randomness, placed mid-text.
    use sha2::Digest as _;
    let key = format!("sk-proj-{}", hex::encode(sha2::Sha256::digest(data)));
    let cut = text
        .char_indices()
        .nth(text.chars().count() / 2)
        .map_or(0, |(i, _)| i);
    let planted = format!("{} {key} {}", &text[..cut], &text[cut..]);
    assert!(
        !shown(&planted).contains(&key[8..]),
        "a planted key survived redaction"
    );
}

#[cfg(test)]
mod tests {
    /// Every input of the committed corpus (crashes once found, now fixed,
    /// among them) holds every property.
    #[test]
    fn the_committed_corpus_holds_every_property() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/corpus");
        let mut inputs = 0;
        for target in super::TARGETS {
            let Ok(dir) = std::fs::read_dir(root.join(target)) else {
                panic!("no corpus for {target}");
            };
            for entry in dir.flatten() {
                let data = std::fs::read(entry.path()).unwrap_or_default();
                super::run(target, &data);
                inputs += 1;
            }
        }
        assert!(inputs >= 20, "{inputs} inputs");
    }
}
