//! `read_output`: a byte or line range of the full output of an earlier
//! command of the run. The output is named by the id a result gave it (its
//! file name), and resolved only inside the run's `outputs/` directory:
//! paths, `..`, hidden names and symlinks are refused. The file is read in
//! bounded pieces, never whole, and what is returned is redacted.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use super::cap::group_thousands;
use super::{ReadOutputArgs, ToolError, ToolOutput};
use crate::trace::Redactor;

/// The most bytes one call returns.
pub const MAX_READ_BYTES: u64 = 12_000;
/// Bytes read on each side of a byte range so that a credential cut by the
/// range is still recognised.
const REDACTION_MARGIN: u64 = 512;
const MAX_ID_LEN: usize = 200;
/// How much of the file a line search reads at a time.
const CHUNK: usize = 64 << 10;
/// How many ids an "unknown id" message lists.
const LISTED_IDS: usize = 20;

pub fn read_output(
    args: &ReadOutputArgs,
    outputs_dir: &Path,
    redactor: &Redactor,
) -> Result<ToolOutput, ToolError> {
    let id = args.id.trim();
    check_id(id)?;
    let mut file = open(outputs_dir, id)?;
    let size = file.metadata().map_err(|e| io_error(id, &e))?.len();
    let mut part = if args.start_line.is_some() || args.end_line.is_some() {
        lines(&mut file, id, size, args)?
    } else {
        bytes(&mut file, id, size, args)?
    };
    let text = if redactor.finds_credentials(&part.context) {
        part.redacted_context(redactor)
    } else {
        part.text()
    };
    let mut out = format!(
        "{id}: {} of {} bytes:\n{text}",
        part.describe(),
        group_thousands(usize_of(size))
    );
    if !text.ends_with('\n') && !text.is_empty() {
        out.push('\n');
    }
    if part.end < size {
        out.push_str(&format!(
            "[… {} bytes follow; read_output id={id} offset={} reads on …]\n",
            group_thousands(usize_of(size - part.end)),
            part.end
        ));
    } else {
        out.push_str("[end of output]\n");
    }
    let summary = format!(
        "{} bytes of {id}",
        group_thousands(usize_of(part.end - part.start))
    );
    Ok(ToolOutput::success(out, summary))
}

/// An id is a plain file name: `[A-Za-z0-9._-]`, not hidden, no `..`.
fn check_id(id: &str) -> Result<(), ToolError> {
    let plain = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('.')
        && !id.contains("..")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if plain {
        Ok(())
    } else {
        Err(ToolError::refused(format!(
            "`{}` is not an output id: an id is the name a result gave an output, such as \
             `0004-call_2.stdout`; paths, `/`, `..` and hidden names are refused",
            crate::terminal_text::escape_line(&id.chars().take(120).collect::<String>())
        )))
    }
}

/// Opens `<outputs>/<id>`: a regular file, not through a symlink.
fn open(outputs_dir: &Path, id: &str) -> Result<File, ToolError> {
    let path = outputs_dir.join(id);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ToolError::refused(format!(
                "there is no output `{id}` in this run{}",
                known_ids(outputs_dir)
            )));
        }
        Err(e) => return Err(io_error(id, &e)),
    };
    if !meta.file_type().is_file() {
        return Err(ToolError::refused(format!(
            "`{id}` is not an output of this run (not a regular file){}",
            known_ids(outputs_dir)
        )));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| io_error(id, &e))?;
    match file.metadata() {
        Ok(m) if m.file_type().is_file() => Ok(file),
        Ok(_) => Err(ToolError::refused(format!(
            "`{id}` is not an output of this run (not a regular file)"
        ))),
        Err(e) => Err(io_error(id, &e)),
    }
}

/// "; outputs of this run: a, b, …" (command streams first), or nothing.
fn known_ids(outputs_dir: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(outputs_dir) else {
        return String::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|name| check_id(name).is_ok())
        .collect();
    ids.sort_by_key(|name| {
        (
            !(name.ends_with(".stdout") || name.ends_with(".stderr")),
            name.clone(),
        )
    });
    if ids.is_empty() {
        return String::new();
    }
    let more = ids.len().saturating_sub(LISTED_IDS);
    ids.truncate(LISTED_IDS);
    let mut text = format!("; outputs of this run: {}", ids.join(", "));
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

fn io_error(id: &str, e: &std::io::Error) -> ToolError {
    ToolError::Io {
        path: id.to_string(),
        reason: e.to_string(),
    }
}

fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// The range read, with bytes around it for redaction.
struct Part {
    /// Stream offsets of the range returned.
    start: u64,
    end: u64,
    /// The range's lines, when it was asked for by lines.
    lines: Option<(u64, u64)>,
    /// The bytes of the range and of its margins, and where the range lies
    /// in them.
    window: Vec<u8>,
    window_start: u64,
    /// `window` as text (for the credential check).
    context: String,
}

impl Part {
    fn text(&self) -> String {
        let from = usize_of(self.start - self.window_start);
        let to = usize_of(self.end - self.window_start);
        String::from_utf8_lossy(&self.window[from..to]).into_owned()
    }

    /// The whole window, redacted: a credential that crosses the range's
    /// edges is hidden whole rather than shown in part.
    fn redacted_context(&mut self, redactor: &Redactor) -> String {
        self.start = self.window_start;
        self.end = self.window_start + self.window.len() as u64;
        self.lines = None;
        redactor.redact(&self.context).into_owned()
    }

    fn describe(&self) -> String {
        let bytes = format!("bytes {} to {}", self.start, self.end);
        match self.lines {
            Some((first, last)) if last >= first => {
                format!("lines {first} to {last} ({bytes})")
            }
            Some((first, _)) => format!("no lines from line {first} ({bytes})"),
            None => bytes,
        }
    }
}

fn bytes(file: &mut File, id: &str, size: u64, args: &ReadOutputArgs) -> Result<Part, ToolError> {
    let offset = args.offset.unwrap_or(0);
    if offset > size {
        return Err(ToolError::refused(format!(
            "offset {offset} is past the end of `{id}`, which has {size} bytes"
        )));
    }
    let length = args.length.unwrap_or(MAX_READ_BYTES).min(MAX_READ_BYTES);
    let end = offset.saturating_add(length).min(size);
    let window_start = offset.saturating_sub(REDACTION_MARGIN);
    let window_end = end.saturating_add(REDACTION_MARGIN).min(size);
    let window = read_range(file, window_start, window_end).map_err(|e| io_error(id, &e))?;
    // Whole characters: the start moves back to the one it falls in, the
    // end forward past the one it cuts.
    let mut from = usize_of(offset - window_start);
    let mut to = usize_of(end - window_start);
    for _ in 0..3 {
        if from > 0 && from < window.len() && is_continuation(window[from]) {
            from -= 1;
        }
        if to < window.len() && is_continuation(window[to]) {
            to += 1;
        }
    }
    Ok(Part {
        start: window_start + from as u64,
        end: window_start + to as u64,
        lines: None,
        context: String::from_utf8_lossy(&window).into_owned(),
        window,
        window_start,
    })
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

fn read_range(file: &mut File, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.take(end - start).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Lines `start_line..=end_line`, at most [`MAX_READ_BYTES`] of them, found
/// by reading the file a chunk at a time.
fn lines(file: &mut File, id: &str, size: u64, args: &ReadOutputArgs) -> Result<Part, ToolError> {
    let first = args.start_line.unwrap_or(1);
    let last = args.end_line.unwrap_or(u64::MAX);
    let mut line = 1u64;
    let mut offset = 0u64;
    let mut start = None;
    let mut end = size;
    let mut buf = vec![0u8; CHUNK];
    file.seek(SeekFrom::Start(0))
        .map_err(|e| io_error(id, &e))?;
    'scan: loop {
        let n = file.read(&mut buf).map_err(|e| io_error(id, &e))?;
        if n == 0 {
            break;
        }
        for (i, b) in buf[..n].iter().enumerate() {
            let at = offset + i as u64;
            if start.is_none() && line >= first {
                start = Some(at);
            }
            if let Some(s) = start
                && at - s >= MAX_READ_BYTES
            {
                end = at;
                break 'scan;
            }
            if *b == b'\n' {
                if line >= last {
                    end = at + 1;
                    break 'scan;
                }
                line += 1;
            }
        }
        offset += n as u64;
    }
    let Some(start) = start else {
        let count = if size == 0 {
            0
        } else if ends_with_newline(file, size) {
            line - 1
        } else {
            line
        };
        return Err(ToolError::refused(format!(
            "`{id}` has {count} lines; start_line {first} is past its end"
        )));
    };
    let window = read_range(file, start, end).map_err(|e| io_error(id, &e))?;
    // The line `end` falls in when the byte cap stopped the range.
    let shown_last = if end < size && window.last() != Some(&b'\n') {
        line
    } else {
        line.min(last)
    };
    Ok(Part {
        start,
        end,
        lines: Some((first, shown_last)),
        context: String::from_utf8_lossy(&window).into_owned(),
        window,
        window_start: start,
    })
}

fn ends_with_newline(file: &mut File, size: u64) -> bool {
    read_range(file, size - 1, size).is_ok_and(|b| b == b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(json: serde_json::Value) -> ReadOutputArgs {
        match super::super::parse_call("read_output", &json.to_string()).unwrap() {
            super::super::ParsedCall::ReadOutput(a) => a,
            other => panic!("{other:?}"),
        }
    }

    fn outputs(content: &[u8]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("0002-call_1.stdout"), content).unwrap();
        dir
    }

    fn read(dir: &Path, json: serde_json::Value) -> Result<ToolOutput, ToolError> {
        read_output(&args(json), dir, &Redactor::default())
    }

    fn numbered(n: usize) -> Vec<u8> {
        (1..=n)
            .map(|i| format!("line {i}\n"))
            .collect::<String>()
            .into_bytes()
    }

    #[test]
    fn a_byte_range_is_returned_exactly_with_the_way_on() {
        let content: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
        let dir = outputs(&content);
        let out = read(
            dir.path(),
            serde_json::json!({"id": "0002-call_1.stdout", "offset": 50_000, "length": 100}),
        )
        .unwrap();
        let expected = std::str::from_utf8(&content[50_000..50_100]).unwrap();
        assert!(out.ok);
        assert!(
            out.content.starts_with(&format!(
                "0002-call_1.stdout: bytes 50000 to 50100 of 100,000 bytes:\n{expected}\n"
            )),
            "{}",
            out.content
        );
        assert!(
            out.content.ends_with(
                "[… 49,900 bytes follow; read_output id=0002-call_1.stdout offset=50100 reads on …]\n"
            ),
            "{}",
            out.content
        );
        // At most the cap, however much is asked.
        let out = read(
            dir.path(),
            serde_json::json!({"id": "0002-call_1.stdout", "length": 12_000}),
        )
        .unwrap();
        assert!(
            out.content.contains("bytes 0 to 12000 "),
            "{}",
            &out.content[..80]
        );
        let too_much =
            serde_json::json!({"id": "0002-call_1.stdout", "offset": 99_990, "length": 500});
        let out = read(dir.path(), too_much).unwrap();
        assert!(out.content.contains("bytes 99990 to 100000 "));
        assert!(out.content.ends_with("[end of output]\n"));
        assert!(
            read(
                dir.path(),
                serde_json::json!({"id": "0002-call_1.stdout", "offset": 100_001})
            )
            .is_err()
        );
    }

    #[test]
    fn a_line_range_is_found_by_streaming() {
        let dir = outputs(&numbered(50_000));
        let out = read(dir.path(), serde_json::json!({"id": "0002-call_1.stdout", "start_line": 40_000, "end_line": 40_002})).unwrap();
        assert!(
            out.content.contains("lines 40000 to 40002 (bytes "),
            "{}",
            out.content
        );
        assert!(
            out.content
                .contains(":\nline 40000\nline 40001\nline 40002\n[…"),
            "{}",
            out.content
        );
        // An open range stops at the byte cap, mid-line noted by its number.
        let out = read(
            dir.path(),
            serde_json::json!({"id": "0002-call_1.stdout", "start_line": 10}),
        )
        .unwrap();
        assert!(out.content.chars().count() < 12_300);
        assert!(out.content.contains(":\nline 10\nline 11\n"));
        let err = read(
            dir.path(),
            serde_json::json!({"id": "0002-call_1.stdout", "start_line": 50_001}),
        )
        .unwrap_err();
        assert!(err.to_string().contains("has 50000 lines"), "{err}");
    }

    #[test]
    fn ids_are_names_inside_the_outputs_directory_only() {
        let dir = outputs(b"x\n");
        std::fs::write(dir.path().join(".hidden"), "secret").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link.stdout")).unwrap();
        std::fs::create_dir(dir.path().join("sub.stdout")).unwrap();
        for id in [
            "../x",
            "/etc/passwd",
            "a/b",
            "..",
            ".hidden",
            "sub/../0002-call_1.stdout",
        ] {
            let err = read(dir.path(), serde_json::json!({"id": id})).unwrap_err();
            assert!(
                err.to_string().contains("is not an output id"),
                "{id}: {err}"
            );
        }
        for id in ["link.stdout", "sub.stdout"] {
            let err = read(dir.path(), serde_json::json!({"id": id})).unwrap_err();
            assert!(
                err.to_string().contains("not a regular file"),
                "{id}: {err}"
            );
        }
        let err = read(dir.path(), serde_json::json!({"id": "0009-x.stdout"})).unwrap_err();
        assert!(
            err.to_string().contains("there is no output `0009-x.stdout` in this run; outputs of this run: 0002-call_1.stdout"),
            "{err}"
        );
    }

    #[test]
    fn credentials_are_redacted_even_when_the_range_cuts_them() {
        let key = format!("sk-proj-{}", "Ab3dE5fG7hJ9kL1mN3pQ5rS7".repeat(2));
        let key = key.as_str();
        let mut content = "x".repeat(1000).into_bytes();
        content.extend_from_slice(format!("token {key} end\n").as_bytes());
        content.extend_from_slice(&"y".repeat(1000).into_bytes());
        let dir = outputs(&content);
        let redactor = Redactor::default();
        assert!(
            redactor.finds_credentials(key),
            "the fixture is a credential"
        );
        // A range that starts in the middle of the key.
        let cut = serde_json::json!({"id": "0002-call_1.stdout", "offset": 1020, "length": 40});
        let out = read(dir.path(), cut).unwrap();
        assert!(!out.content.contains(&key[14..30]), "{}", out.content);
        assert!(
            out.content.contains(crate::trace::REDACTED),
            "{}",
            out.content
        );
        let lines = serde_json::json!({"id": "0002-call_1.stdout", "start_line": 1});
        let out = read(dir.path(), lines).unwrap();
        assert!(!out.content.contains(&key[10..]));
    }

    #[test]
    fn both_ranges_at_once_are_refused_at_parse() {
        let err = super::super::parse_call(
            "read_output",
            r#"{"id": "a.stdout", "offset": 3, "start_line": 2}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("not both"), "{err}");
    }
}
