//! The ten tools as offered to the model: names, descriptions and JSON
//! Schemas of their arguments.

use serde_json::json;

use super::ToolName;
use crate::model::types::ToolSpec;

/// All ten tools, in a stable order.
pub fn specs() -> Vec<ToolSpec> {
    ToolName::ALL.into_iter().map(spec).collect()
}

fn spec(tool: ToolName) -> ToolSpec {
    let (description, parameters) = match tool {
        ToolName::ListTree => (
            "List files and directories under a workspace path as an indented tree (directories end in `/`, symlinks show their target and are not followed). Honours .gitignore and skips .git, node_modules, target, __pycache__, .pytest_cache, .venv, dist and build. At most 400 entries.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory relative to the workspace root.", "default": "."},
                    "max_depth": {"type": "integer", "minimum": 1, "maximum": 12, "description": "How many directory levels to show.", "default": 3}
                },
                "additionalProperties": false
            }),
        ),
        ToolName::ReadFile => (
            "Read a text file of the workspace with numbered lines (`  12| text`). Give start_line/end_line (1-based, inclusive) to read part of a long file. Binary files and files over 2 MiB are refused.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the workspace root."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to show (1-based)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to show (inclusive)."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        ToolName::Ripgrep => (
            "Search file contents with a regular expression (Rust regex syntax, as ripgrep). Returns `path:line:text` lines, at most 200 matches. Honours .gitignore; skips binary files and generated folders.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "Regular expression to search for."},
                    "path": {"type": "string", "description": "File or directory to search, relative to the workspace root.", "default": "."},
                    "glob": {"type": "string", "description": "Only search files matching this glob, e.g. `*.py` or `src/**/*.rs`; prefix with `!` to exclude."},
                    "case_insensitive": {"type": "boolean", "default": false}
                },
                "required": ["pattern"],
                "additionalProperties": false
            }),
        ),
        ToolName::TreeSitterSymbols => (
            "List the symbols of a source file (functions, methods, classes, structs, enums, traits, interfaces, impls, constants) with their line ranges. Supports Rust, Python, JavaScript, TypeScript, TSX and Go.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Source file relative to the workspace root."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        ),
        ToolName::EditFile => (
            "Change one file with a unified diff. Headers `--- a/PATH` and `+++ b/PATH` must name the same file as `path`; `--- /dev/null` creates the file and `+++ /dev/null` deletes it. Each hunk needs a few unchanged context lines copied exactly from the file. All hunks apply or none; on a mismatch the result shows the lines actually in the file. Read the file first.",
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to change, relative to the workspace root."},
                    "patch": {"type": "string", "description": "Unified diff of that one file, with @@ -old,count +new,count @@ hunks."}
                },
                "required": ["path", "patch"],
                "additionalProperties": false
            }),
        ),
        ToolName::RunShell => (
            "Run a command with /bin/sh -c in the sandbox container (workspace at /workspace, no network unless enabled, non-root). Returns the exit code, duration and bounded stdout/stderr. No process survives the command; files outside the workspace do not persist.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "Shell command line."},
                    "cwd": {"type": "string", "description": "Working directory relative to the workspace root.", "default": "."},
                    "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "Timeout in milliseconds (default 60000, at most 600000)."}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
        ),
        ToolName::Git => (
            "Read-only git on the workspace repository, whose HEAD is the run's baseline. status: changed files. diff: changes against HEAD, including new files (args: `--stat`, `--name-only`, paths). log: commits (args: `-n N`). show: a commit, or a file at a revision as `REV:PATH`.",
            json!({
                "type": "object",
                "properties": {
                    "subcommand": {"type": "string", "enum": ["status", "diff", "log", "show"]},
                    "args": {"type": "array", "items": {"type": "string"}, "description": "Extra arguments, e.g. [\"--stat\"], [\"-n\", \"5\"], [\"HEAD:src/main.rs\"]."}
                },
                "required": ["subcommand"],
                "additionalProperties": false
            }),
        ),
        ToolName::ReadOutput => (
            "Read part of the full output of an earlier command of this run (run_shell, a verification check) that a result showed only by its beginning and end. Give the output id the result named (e.g. `0004-call_2.stdout`) and either a byte range (offset, length) or a line range (start_line, end_line). At most 12000 bytes a call; the result says where the next part starts.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "Output id from an earlier result, e.g. `0004-call_2.stdout` (not a path)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "First byte to read (0-based).", "default": 0},
                    "length": {"type": "integer", "minimum": 1, "maximum": 12000, "description": "Bytes to read (at most 12000).", "default": 12000},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to read (1-based), instead of offset."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to read (inclusive)."}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
        ),
        ToolName::UpdatePlan => (
            "Replace the whole plan. Required before edit_file or run_shell. Ids must be unique and at most one item may be in_progress; every item must be done before request_completion.",
            json!({
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "minItems": 1,
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string"},
                                "content": {"type": "string", "description": "What this step does."},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "done"]},
                                "notes": {"type": "string", "description": "Findings or evidence for this step."}
                            },
                            "required": ["id", "content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["items"],
                "additionalProperties": false
            }),
        ),
        ToolName::RequestCompletion => (
            "Ask the independent verifier to check the work. It runs the project's checks; you cannot declare success yourself. Every plan item must be done first.",
            json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "description": "What was changed and why."}
                },
                "required": ["summary"],
                "additionalProperties": false
            }),
        ),
    };
    ToolSpec {
        name: tool.as_str().to_string(),
        description: description.to_string(),
        parameters,
    }
}
