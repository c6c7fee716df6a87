//! `read_file`: numbered lines of a text file, or a range of them.

use std::fmt::Write as _;

use super::cap::MODEL_CHAR_LIMIT;
use super::paths::{self, display};
use super::{ReadFileArgs, ToolError, ToolOutput};
use crate::workspace::{EntryKind, WorkspaceRoot};

/// Files larger than this are refused.
pub(crate) const MAX_READ_BYTES: u64 = 2 << 20;
/// A NUL byte within this prefix marks a file binary.
pub(crate) const BINARY_PROBE_BYTES: usize = 8 << 10;
/// Longer lines are cut (with a marker) so one line cannot fill the result.
const MAX_LINE_CHARS: usize = 2_000;
/// Room left for the header and the continuation notice.
const BODY_BUDGET: usize = MODEL_CHAR_LIMIT - 600;

pub fn read_file(args: &ReadFileArgs, root: &WorkspaceRoot) -> Result<ToolOutput, ToolError> {
    let rel = paths::relative(&args.path)?;
    let shown = display(&rel);
    let bytes = read_text_bytes(root, &rel)?;
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    if total == 0 {
        return Ok(ToolOutput::success(
            format!("{shown} is empty (0 lines)\n"),
            "0 lines",
        ));
    }
    let start = args.start_line.unwrap_or(1);
    if start > total {
        return Err(ToolError::BadPath {
            path: shown,
            problem: format!(
                "start_line {start} is past the end of the file, which has {total} lines"
            ),
        });
    }
    let end = args.end_line.unwrap_or(total).min(total);
    let width = total.to_string().len().max(4);
    let mut body = String::new();
    let mut last_shown = start - 1;
    let mut full_body = String::new();
    for (index, line) in lines.iter().enumerate().take(end).skip(start - 1) {
        let number = index + 1;
        let mut formatted = String::new();
        let _ = write!(formatted, "{number:>width$}| ");
        if line.chars().count() > MAX_LINE_CHARS {
            let cut: String = line.chars().take(MAX_LINE_CHARS).collect();
            let _ = writeln!(
                formatted,
                "{cut} [… line cut at {MAX_LINE_CHARS} characters]"
            );
        } else {
            let _ = writeln!(formatted, "{line}");
        }
        full_body.push_str(&formatted);
        if last_shown + 1 == number && body.len() + formatted.len() <= BODY_BUDGET {
            body.push_str(&formatted);
            last_shown = number;
        }
    }
    let header = format!("{shown} (lines {start}-{end} of {total})\n");
    let mut content = format!("{header}{body}");
    if last_shown < end {
        let _ = writeln!(
            content,
            "[output stopped at line {last_shown} to stay within {MODEL_CHAR_LIMIT} characters; call read_file again with start_line={}]",
            last_shown + 1
        );
    }
    let summary = format!("lines {start}-{last_shown} of {total}");
    Ok(ToolOutput {
        ok: true,
        content,
        full: format!("{header}{full_body}"),
        summary,
        changed_files: Vec::new(),
        exit_code: None,
    })
}

/// The bytes of a workspace text file: refuses directories, special files,
/// files over [`MAX_READ_BYTES`] and binary files. A symlink is followed
/// only while it stays inside the workspace.
pub(crate) fn read_text_bytes(
    root: &WorkspaceRoot,
    rel: &std::path::Path,
) -> Result<Vec<u8>, ToolError> {
    let shown = display(rel);
    let kind = paths::resolved_kind(root, rel)?;
    match kind {
        EntryKind::Dir => {
            return Err(ToolError::BadPath {
                path: shown,
                problem: "is a directory; use list_tree to see what it holds".into(),
            });
        }
        EntryKind::Special => {
            return Err(ToolError::BadPath {
                path: shown,
                problem: "is a special file (fifo, socket or device) and cannot be read".into(),
            });
        }
        EntryKind::File | EntryKind::Symlink => {}
    }
    let meta = paths::metadata(root, rel)?;
    if meta.kind == EntryKind::File && meta.len > MAX_READ_BYTES {
        return Err(too_large(&shown, meta.len));
    }
    let bytes = root
        .read(rel, MAX_READ_BYTES)
        .map_err(|e| ToolError::from_workspace(&shown, e))?;
    if bytes.len() as u64 > MAX_READ_BYTES {
        return Err(too_large(&shown, bytes.len() as u64));
    }
    if is_binary(&bytes) {
        return Err(ToolError::BadPath {
            path: shown,
            problem: "is a binary file (it has NUL bytes) and is not shown; inspect it with run_shell (e.g. `file`, `xxd | head`) if you must".into(),
        });
    }
    Ok(bytes)
}

pub(crate) fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_PROBE_BYTES)].contains(&0)
}

fn too_large(shown: &str, len: u64) -> ToolError {
    ToolError::BadPath {
        path: shown.to_string(),
        problem: format!(
            "is {len} bytes, over the 2 MiB limit of read_file; start_line/end_line do not help for such files — search it with ripgrep, or look at parts with run_shell (e.g. `sed -n 1,80p`)"
        ),
    }
}
