//! Performing one tool call: parse, execute, write the full redacted output
//! to `outputs/`, and report a changed workspace with its live diff. An
//! `edit_file` is performed in two steps — checked (reporting the
//! credentials its patch would add), then applied — because the agent
//! decides in between whether it may be applied.

use std::time::{Duration, Instant};

use super::bus::EventBus;
use super::parts::{RunCounters, RunWorkspace};
use crate::agent::effects::Input;
use crate::agent::run_state::FileChange;
use crate::model::types::ToolCall;
use crate::protocol::RunEvent;
use crate::sandbox::{CommandContainer, SandboxError};
use crate::tools::{self, ParsedCall, ToolContext, ToolName, ToolOutput};
use crate::trace::ArtifactDir;
use crate::workspace::{EntryDigest, human_bytes, quote_path};
use std::os::unix::ffi::OsStrExt;

/// The parts of a run a tool call touches.
pub(crate) struct Parts<'a> {
    pub ws: &'a mut RunWorkspace,
    pub container: &'a mut CommandContainer,
    pub artifacts: &'a ArtifactDir,
    pub bus: &'a mut EventBus,
    pub counters: &'a mut RunCounters,
    pub command_timeout: Duration,
    /// The run may change the repository's own configuration.
    pub allow_config_edits: bool,
}

/// Calls a tool of one of the person's MCP servers (outside the sandbox):
/// its answer is bounded, redacted and recorded like any tool's.
pub(crate) async fn run_external(
    mut p: Parts<'_>,
    servers: &crate::mcp_client::McpServers,
    call: &ToolCall,
) -> Input {
    let started = Instant::now();
    let stem = p.call_stem(call);
    let answer = servers.call(&call.name, &call.arguments).await;
    let text = p.artifacts.redactor().redact(&answer.text).into_owned();
    let output = if answer.ok {
        let summary = format!("{} bytes from the MCP server", text.len());
        ToolOutput::success(text, summary)
    } else {
        ToolOutput::failure(text)
    };
    p.finished(call, &stem, output, started)
}

/// Runs one call; for `edit_file`, only checks its patch. `Err` only when
/// the sandbox itself broke.
pub(crate) async fn run_tool(mut p: Parts<'_>, call: &ToolCall) -> Result<Input, SandboxError> {
    let started = Instant::now();
    let stem = p.call_stem(call);
    let output = match tools::parse_call(&call.name, &call.arguments) {
        Err(e) => ToolOutput::failure(e.to_string()),
        Ok(ParsedCall::EditFile(args))
            if !p.allow_config_edits
                && crate::workspace::protected::is_protected(args.path.as_bytes()) =>
        {
            failed(
                "refused: the project's configuration",
                format!(
                    "Refused: `{}` is the repository's own minicoder configuration (.minicoder.json, .minicoder/), which this run may not change: the next run would read it. Leave it as it is; if it must change, say so in your summary and the person can run again with --allow-config-edits.",
                    args.path
                ),
            )
        }
        Ok(ParsedCall::EditFile(args))
            if p.ws
                .checkpoints
                .excludes()
                .ignores(args.path.trim_start_matches("./").as_bytes(), false) =>
        {
            failed(
                "refused: a path the repository ignores",
                format!(
                    "Refused: `{}` is ignored by the repository's ignore rules (.gitignore and the like, as at the start of the run): it would not be part of the patch, and ignored files are removed before every verification. Put the change in a file the repository keeps.",
                    args.path
                ),
            )
        }
        Ok(ParsedCall::EditFile(args)) => match tools::prepare_edit(&args, &p.ws.root) {
            Ok(prepared) => {
                let credentials = p.artifacts.redactor().added_credentials(&prepared.patch);
                let credential_file =
                    p.ws.checkpoints
                        .secret_paths()
                        .matches(prepared.path.as_bytes(), false);
                let input = Input::EditPrepared {
                    call_id: call.id.clone(),
                    path: prepared.path.clone(),
                    patch: prepared.patch.clone(),
                    credentials,
                    credential_file,
                };
                p.counters.prepared_edit = Some((call.id.clone(), prepared));
                return Ok(input);
            }
            Err(e) => failed("patch did not apply", e.to_string()),
        },
        Ok(parsed) => {
            let outputs_dir = p.artifacts.path().join("outputs");
            let mut ctx = ToolContext {
                root: &p.ws.root,
                container: p.container,
                outputs_dir: &outputs_dir,
                redactor: p.artifacts.redactor(),
                call_id: &stem,
                default_timeout: p.command_timeout,
            };
            tools::execute_checked(&parsed, &mut ctx).await?
        }
    };
    Ok(p.finished(call, &stem, output, started))
}

/// Applies the edit checked for `call` (and approved, where that was needed).
pub(crate) fn apply_edit(mut p: Parts<'_>, call: &ToolCall) -> Input {
    let started = Instant::now();
    let stem = p.call_stem(call);
    let output = match p.counters.prepared_edit.take() {
        Some((id, prepared)) if id == call.id => match tools::apply_edit(&prepared, &p.ws.root) {
            Ok(()) => {
                p.counters.edit_seq += 1;
                let _ =
                    p.artifacts
                        .write_patch(p.counters.edit_seq, &prepared.path, &prepared.patch);
                tools::edit_output(&prepared)
            }
            Err(e) => failed("edit failed", e.to_string()),
        },
        _ => failed(
            "edit failed",
            "the edit was not checked before it was applied; send it again".into(),
        ),
    };
    p.finished(call, &stem, output, started)
}

fn failed(summary: &str, content: String) -> ToolOutput {
    ToolOutput {
        ok: false,
        full: content.clone(),
        content,
        summary: summary.to_string(),
        changed_files: Vec::new(),
        exit_code: None,
    }
}

impl Parts<'_> {
    /// The file-name stem of a call's outputs.
    fn call_stem(&mut self, call: &ToolCall) -> String {
        self.counters.call_seq += 1;
        format!(
            "{:04}-{}",
            self.counters.call_seq,
            crate::ids::file_safe(&call.id, 48)
        )
    }

    /// Writes the output, reports the call and the workspace, and returns
    /// what goes back to the agent.
    fn finished(
        mut self,
        call: &ToolCall,
        stem: &str,
        mut output: ToolOutput,
        started: Instant,
    ) -> Input {
        let mutates = ToolName::from_name(&call.name).is_some_and(ToolName::mutates_workspace);
        if mutates && let Some(note) = self.protect_config(call) {
            output.content.push_str(&note);
            output.full.push_str(&note);
        }
        if mutates && let Some(note) = self.oversize_note() {
            output.content.push_str(&note);
            output.full.push_str(&note);
        }
        let output_file = self
            .artifacts
            .write_output(&format!("{stem}-{}.txt", call.name), output.full.as_bytes())
            .ok();
        self.bus.emit(RunEvent::ToolFinished {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok: output.ok,
            summary: output.summary.clone(),
            result: output.content.clone(),
            output_file,
            duration_ms: super::parts::elapsed_ms(started),
            changed_files: output.changed_files.clone(),
        });
        if mutates {
            self.report_changes();
        }
        Input::ToolFinished {
            call_id: call.id.clone(),
            ok: output.ok,
            content: output.content,
        }
    }

    /// Puts the repository's own configuration back as the baseline had it
    /// when a command changed it and the run may not; says so.
    fn protect_config(&mut self, call: &ToolCall) -> Option<String> {
        if self.allow_config_edits {
            return None;
        }
        let store = &self.ws.checkpoints;
        match store.protected_changed(self.ws.baseline, &self.ws.root) {
            Ok(false) => return None,
            Ok(true) => {}
            Err(e) => tracing::warn!("comparing the project's configuration: {e}"),
        }
        let restored = store.restore_protected(self.ws.baseline, &self.ws.root);
        let what = match &restored {
            Ok(paths) => paths.join(", "),
            Err(e) => format!("(putting it back failed: {e})"),
        };
        self.bus.emit(RunEvent::PolicyRefused {
            call_id: call.id.clone(),
            name: call.name.clone(),
            reason: format!(
                "the command changed the project's configuration ({what}); it was put back"
            ),
        });
        Some(format!(
            "note: this command changed the repository's own minicoder configuration ({what}), which this run may not change; it was put back as it was. Leave .minicoder.json and .minicoder/ alone.\n"
        ))
    }

    /// Tells the model about files over the per-file limit that are new
    /// since it was last told: the host never reads them, so no checkpoint
    /// or patch holds them.
    fn oversize_note(&mut self) -> Option<String> {
        let snapshot = match self.ws.checkpoints.scan_shared() {
            Ok(snapshot) => snapshot,
            Err(e) => {
                tracing::warn!("fingerprinting the workspace: {e}");
                return None;
            }
        };
        let limit = human_bytes(self.ws.checkpoints.max_file_bytes());
        let mut now = std::collections::BTreeMap::new();
        for e in &snapshot.entries {
            if let EntryDigest::Oversize { size, mtime_ns } = e.digest {
                now.insert(e.path.clone(), (size, mtime_ns));
            }
        }
        let mut note = String::new();
        let mut listed = 0;
        for (path, facts) in &now {
            if self.counters.known_oversize.get(path) == Some(facts) {
                continue;
            }
            listed += 1;
            if listed <= 20 {
                note.push_str(&format!(
                    "note: {} is {}, over the per-file limit of {limit}: it is not read, checkpointed or exported (final.patch cannot carry it); delete it or keep it out of the result\n",
                    quote_path(path.as_os_str().as_bytes()),
                    human_bytes(facts.0),
                ));
            }
        }
        if listed > 20 {
            note.push_str(&format!(
                "note: {} more files over the per-file limit\n",
                listed - 20
            ));
        }
        self.counters.known_oversize = now;
        (!note.is_empty()).then_some(note)
    }

    /// Emits `workspace.changed` (with the whole diff against the baseline)
    /// when the workspace fingerprint moved, and keeps its stat for the agent.
    pub(crate) fn report_changes(&mut self) {
        let fingerprint = match self.ws.checkpoints.scan_shared() {
            Ok(snapshot) => snapshot.fingerprint.to_string(),
            Err(e) => {
                tracing::warn!("fingerprinting the workspace: {e}");
                return;
            }
        };
        if fingerprint == self.counters.last_fingerprint {
            return;
        }
        self.counters.last_fingerprint = fingerprint.clone();
        match self.ws.checkpoints.export_patch(self.ws.baseline) {
            Ok(export) => {
                let (diff, diff_total_bytes) = bounded_diff(&export.patch, export.patch_bytes);
                let total = export.changed_files.len();
                let mut changed_files = export.changed_files;
                changed_files.truncate(MAX_LISTED_PATHS);
                self.counters.diff_stat = Some(diff_stat(diff));
                self.bus.emit(RunEvent::WorkspaceChanged {
                    fingerprint,
                    changed_files,
                    changed_total: (total > MAX_LISTED_PATHS).then_some(total as u64),
                    diff: diff.to_string(),
                    diff_total_bytes,
                })
            }
            Err(e) => tracing::warn!("diffing the workspace: {e}"),
        }
    }
}

/// Paths an event or a report lists before it only counts them.
pub(crate) const MAX_LISTED_PATHS: usize = 200;
/// The most diff a `workspace.changed` event carries.
pub(crate) const MAX_EVENT_DIFF_BYTES: usize = 1 << 20;

/// The leading files of `patch` that fit in [`MAX_EVENT_DIFF_BYTES`], and
/// the whole patch's length when that is not all of it.
pub(crate) fn bounded_diff(patch: &str, total: u64) -> (&str, Option<u64>) {
    if patch.len() <= MAX_EVENT_DIFF_BYTES && patch.len() as u64 == total {
        return (patch, None);
    }
    let mut cut = 0;
    let mut at = 0;
    for line in patch.split_inclusive('\n') {
        if line.starts_with("diff --git ") {
            cut = at;
        }
        at += line.len();
        if at > MAX_EVENT_DIFF_BYTES {
            break;
        }
        if at == patch.len() {
            cut = at;
        }
    }
    (&patch[..cut], Some(total))
}

/// Lines added and removed per file of a unified diff (`git diff` form):
/// `+`/`-` lines count only inside hunks, so a removed line that starts
/// with `--` is not taken for a header.
pub(crate) fn diff_stat(diff: &str) -> Vec<FileChange> {
    let mut out: Vec<FileChange> = Vec::new();
    let mut in_hunk = false;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git a/") {
            in_hunk = false;
            out.push(FileChange {
                path: rest.split(" b/").next().unwrap_or(rest).to_string(),
                added: 0,
                removed: 0,
            });
            continue;
        }
        let Some(file) = out.last_mut() else { continue };
        if line.starts_with("@@") {
            in_hunk = true;
        } else if in_hunk && line.starts_with('+') {
            file.added = file.added.saturating_add(1);
        } else if in_hunk && line.starts_with('-') {
            file.removed = file.removed.saturating_add(1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_event_diff_is_cut_at_a_file_boundary() {
        let file = |name: &str, lines: usize| {
            format!(
                "diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n{}",
                "+x\n".repeat(lines)
            )
        };
        let small = file("a", 3);
        assert_eq!(
            super::bounded_diff(&small, small.len() as u64),
            (small.as_str(), None)
        );
        let big = format!("{}{}", file("a", 3), file("b", super::MAX_EVENT_DIFF_BYTES));
        let (cut, total) = super::bounded_diff(&big, big.len() as u64);
        assert_eq!(cut, file("a", 3));
        assert_eq!(total, Some(big.len() as u64));
        // Cut by the export already: the total says so.
        assert_eq!(
            super::bounded_diff(&small, 999),
            (small.as_str(), Some(999))
        );
    }

    #[test]
    fn the_diff_stat_counts_hunk_lines_per_file() {
        let diff = "diff --git a/src/a.py b/src/a.py\nindex 1..2 100644\n--- a/src/a.py\n+++ b/src/a.py\n\
                    @@ -1,3 +1,3 @@\n-x\n--- not a header\n+y\n ctx\n\
                    diff --git a/img.png b/img.png\nBinary files a/img.png and b/img.png differ\n\
                    diff --git a/new.txt b/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n";
        let stat = super::diff_stat(diff);
        let got: Vec<(&str, u32, u32)> = stat
            .iter()
            .map(|f| (f.path.as_str(), f.added, f.removed))
            .collect();
        assert_eq!(
            got,
            [("src/a.py", 1, 2), ("img.png", 0, 0), ("new.txt", 2, 0)]
        );
    }
}
