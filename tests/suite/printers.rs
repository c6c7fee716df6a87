//! Every line minicoder prints outside the full-screen session goes through
//! the one escaping function (`terminal_text`): this reads the sources and
//! fails on a printer that does not.

use std::path::{Path, PathBuf};

/// The files that may hold stdout or stderr, each writing only escaped text.
const SINKS: [&str; 4] = [
    "src/terminal_text.rs",
    "src/cli/mod.rs",
    "src/headless.rs",
    "src/cli/progress.rs",
];

/// Writes that carry no outside text: the status line's own controls and
/// the empty line of `out!()`.
const LITERAL_WRITES: [&str; 3] = [
    r#"let _ = write!(err, "\r\x1b[2K");"#,
    r#"let _ = write!(out, "\x1b[{previous}F\x1b[J");"#,
    "let _ = writeln!(std::io::stdout());",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Source lines outside comments, with their numbers.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim().to_string()))
        .filter(|(_, l)| !l.starts_with("//"))
        .collect()
}

#[test]
fn every_printer_escapes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    sources(&root.join("src"), &mut files);
    let mut problems = Vec::new();
    let mut sinks_seen = 0;
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .expect("under the crate")
            .to_string_lossy()
            .replace('\\', "/");
        // The session draws through ratatui, which gets text cleaned by the
        // same module; test code prints what it likes.
        if rel.starts_with("src/tui/") || rel.ends_with("_tests.rs") || rel.contains("/tests/") {
            continue;
        }
        let text = std::fs::read_to_string(file).expect("read source");
        let lines = code_lines(&text);
        let sink = SINKS.contains(&rel.as_str());
        sinks_seen += usize::from(sink);
        for (i, (number, line)) in lines.iter().enumerate() {
            for raw in ["println!(", "eprintln!(", "print!(", "eprint!(", "dbg!("] {
                if line.contains(raw) {
                    problems.push(format!(
                        "{rel}:{number}: `{raw}` prints unescaped text; use out!/err!"
                    ));
                }
            }
            let handle = line.contains("stdout()") || line.contains("stderr()");
            if handle && !sink && !line.contains(".is_terminal()") {
                problems.push(format!(
                    "{rel}:{number}: writes to a standard stream; print with out!/err!"
                ));
            }
            if sink && (line.contains("write!(") || line.contains("writeln!(")) {
                let statement: String = lines[i..]
                    .iter()
                    .map(|(_, l)| l.as_str())
                    .scan(false, |done, l| {
                        if *done {
                            return None;
                        }
                        *done = l.ends_with(';');
                        Some(l)
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                if !statement.contains("escape_") && !LITERAL_WRITES.contains(&statement.as_str()) {
                    problems.push(format!(
                        "{rel}:{number}: `{statement}` writes text that is not escaped"
                    ));
                }
            }
        }
    }
    assert_eq!(sinks_seen, SINKS.len(), "a sink file moved; update SINKS");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
