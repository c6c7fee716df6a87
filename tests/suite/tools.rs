//! Integration tests of the agent's tools on real workspaces: confinement
//! against planted symlinks, every tool's happy path and errors, git on a
//! workspace made by `PrivateWorkspace::create`, and run_shell in Docker.

use crate::support;

use support::{git, write};

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use minicoder::sandbox::CommandContainer;
use minicoder::tools::{
    ParsedCall, ToolContext, ToolOutput, execute, execute_without_container, parse_call,
};
use minicoder::workspace::{PrivateWorkspace, WorkspaceRoot};

const LIB_RS: &str = "pub struct Counter {\n    n: u32,\n}\n\nimpl Counter {\n    pub fn bump(&mut self) {\n        self.n += 1;\n    }\n}\n\npub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n";

/// A workspace made from a small source repository.
struct Fixture {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    root: WorkspaceRoot,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().expect("tempdir");
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).expect("mkdir");
    git(&src, &["init", "-q"]);
    write(&src.join(".gitignore"), b"*.log\n");
    write(&src.join("src/lib.rs"), LIB_RS.as_bytes());
    write(
        &src.join("app.py"),
        b"import os\n\nclass App:\n    def run(self):\n        return os.getcwd()\n",
    );
    write(&src.join("docs/guide.md"), b"# Guide\nUse Counter.\n");
    git(&src, &["add", "-A"]);
    git(&src, &["commit", "-q", "-m", "init"]);
    let ws = tmp.path().join("ws");
    PrivateWorkspace::create(&src, &ws, None).expect("workspace");
    // Things the walkers must skip, and a binary file.
    write(&ws.join("debug.log"), b"Counter in a log\n");
    write(&ws.join("node_modules/dep/index.js"), b"Counter\n");
    write(&ws.join("data.bin"), b"Counter\0\x01\x02");
    let root = WorkspaceRoot::open(&ws).expect("root");
    Fixture {
        _tmp: tmp,
        ws,
        root,
    }
}

fn run(root: &WorkspaceRoot, name: &str, args: &str) -> ToolOutput {
    let call = match parse_call(name, args) {
        Ok(call) => call,
        Err(e) => return ToolOutput::failure(e.to_string()),
    };
    execute_without_container(&call, root).expect("a container-free tool")
}

fn ok(output: ToolOutput) -> ToolOutput {
    assert!(output.ok, "expected success: {}", output.content);
    assert!(output.content.chars().count() <= 16_000);
    output
}

fn failed(output: ToolOutput, needle: &str) -> ToolOutput {
    assert!(!output.ok, "expected a failure, got: {}", output.content);
    assert!(
        output.content.contains(needle),
        "`{needle}` not in: {}",
        output.content
    );
    output
}

#[test]
fn list_tree_shows_the_tree_and_skips_ignored_and_generated() {
    let f = fixture();
    let out = ok(run(&f.root, "list_tree", "{}"));
    assert!(out.content.contains("src/\n  lib.rs\n"), "{}", out.content);
    assert!(out.content.contains("app.py"));
    assert!(!out.content.contains("node_modules"));
    assert!(!out.content.contains("debug.log"));
    assert!(!out.content.contains(".git/"));
    let shallow = ok(run(&f.root, "list_tree", r#"{"max_depth": 1}"#));
    assert!(shallow.content.contains("src/") && !shallow.content.contains("lib.rs"));
    failed(
        run(&f.root, "list_tree", r#"{"path": "app.py"}"#),
        "read_file",
    );
    failed(
        run(&f.root, "list_tree", r#"{"path": "nope"}"#),
        "does not exist",
    );
}

#[test]
fn list_tree_is_bounded() {
    let f = fixture();
    for i in 0..450 {
        write(&f.ws.join(format!("many/f{i:03}.txt")), b"x\n");
    }
    let out = ok(run(&f.root, "list_tree", r#"{"path": "many"}"#));
    assert!(
        out.content.contains("stopped at 400 entries"),
        "{}",
        out.summary
    );
    assert_eq!(
        out.content.lines().filter(|l| l.contains(".txt")).count(),
        400
    );
}

#[test]
fn read_file_numbers_lines_and_ranges() {
    let f = fixture();
    let out = ok(run(&f.root, "read_file", r#"{"path": "src/lib.rs"}"#));
    assert!(
        out.content.contains("   1| pub struct Counter {"),
        "{}",
        out.content
    );
    assert!(out.content.contains("  13| }"), "{}", out.content);
    let part = ok(run(
        &f.root,
        "read_file",
        r#"{"path": "./src/lib.rs", "start_line": 6, "end_line": 7}"#,
    ));
    assert!(part.content.contains("lines 6-7 of 13"));
    assert!(part.content.contains("   6|     pub fn bump"));
    assert!(!part.content.contains("   8|"));
    failed(
        run(
            &f.root,
            "read_file",
            r#"{"path": "src/lib.rs", "start_line": 99}"#,
        ),
        "has 13 lines",
    );
    failed(run(&f.root, "read_file", r#"{"path": "src"}"#), "directory");
    failed(
        run(&f.root, "read_file", r#"{"path": "data.bin"}"#),
        "binary",
    );
    failed(
        run(&f.root, "read_file", r#"{"path": "missing.txt"}"#),
        "does not exist",
    );
}

#[test]
fn read_file_refuses_huge_files_and_caps_long_ones() {
    let f = fixture();
    write(&f.ws.join("huge.txt"), "line\n".repeat(600_000).as_bytes());
    let out = failed(
        run(&f.root, "read_file", r#"{"path": "huge.txt"}"#),
        "2 MiB",
    );
    assert!(out.content.contains("do not help"), "{}", out.content);
    let long: String = (1..=3000).map(|i| format!("line number {i}\n")).collect();
    write(&f.ws.join("long.txt"), long.as_bytes());
    let out = ok(run(&f.root, "read_file", r#"{"path": "long.txt"}"#));
    assert!(
        out.content.contains("start_line="),
        "{}",
        &out.content[out.content.len() - 300..]
    );
    assert!(out.full.contains("3000| line number 3000"));
}

#[test]
fn ripgrep_finds_matches_with_globs_and_case() {
    let f = fixture();
    let out = ok(run(&f.root, "ripgrep", r#"{"pattern": "Counter"}"#));
    assert!(
        out.content.contains("src/lib.rs:1:pub struct Counter {"),
        "{}",
        out.content
    );
    assert!(out.content.contains("docs/guide.md:2:Use Counter."));
    assert!(!out.content.contains("node_modules") && !out.content.contains("debug.log"));
    assert!(
        out.content.contains("1 binary files skipped"),
        "{}",
        out.content
    );
    assert_eq!(out.summary, "3 matches in 2 files");
    let globbed = ok(run(
        &f.root,
        "ripgrep",
        r#"{"pattern": "Counter", "glob": "*.rs"}"#,
    ));
    assert!(!globbed.content.contains("guide.md"));
    let ci = ok(run(
        &f.root,
        "ripgrep",
        r#"{"pattern": "counter", "case_insensitive": true, "path": "docs"}"#,
    ));
    assert!(ci.content.contains("docs/guide.md:2:"));
    let none = ok(run(&f.root, "ripgrep", r#"{"pattern": "counter"}"#));
    assert!(none.content.contains("no matches"));
    failed(
        run(&f.root, "ripgrep", r#"{"pattern": "fn (unclosed"}"#),
        "invalid regular expression",
    );
}

#[test]
fn ripgrep_bounds_its_matches() {
    let f = fixture();
    write(&f.ws.join("many.txt"), "hit\n".repeat(250).as_bytes());
    let out = ok(run(
        &f.root,
        "ripgrep",
        r#"{"pattern": "hit", "path": "many.txt"}"#,
    ));
    assert_eq!(
        out.content
            .lines()
            .filter(|l| l.starts_with("many.txt:"))
            .count(),
        200
    );
    assert!(
        out.content.contains("50 more matches omitted"),
        "{}",
        out.content
    );
}

#[test]
fn tree_sitter_symbols_lists_definitions() {
    let f = fixture();
    let out = ok(run(
        &f.root,
        "tree_sitter_symbols",
        r#"{"path": "src/lib.rs"}"#,
    ));
    assert!(
        out.content.contains("struct Counter  L1-3"),
        "{}",
        out.content
    );
    assert!(out.content.contains("impl Counter  L5-9"));
    assert!(out.content.contains("  method bump  L6-8"));
    assert!(out.content.contains("function add  L11-13"));
    let py = ok(run(&f.root, "tree_sitter_symbols", r#"{"path": "app.py"}"#));
    assert!(py.content.contains("class App") && py.content.contains("method run"));
    failed(
        run(
            &f.root,
            "tree_sitter_symbols",
            r#"{"path": "docs/guide.md"}"#,
        ),
        "supported extension",
    );
}

#[test]
fn a_planted_root_symlink_leads_nowhere() {
    let f = fixture();
    symlink("/", f.ws.join("root")).expect("plant");
    symlink("/etc/passwd", f.ws.join("passwd")).expect("plant");
    let tree = ok(run(&f.root, "list_tree", r#"{"max_depth": 4}"#));
    assert!(
        tree.content.contains("root -> /  (symlink, not followed)"),
        "{}",
        tree.content
    );
    assert!(
        !tree.content.contains("  etc/") && !tree.content.contains("  bin"),
        "{}",
        tree.content
    );
    failed(run(&f.root, "list_tree", r#"{"path": "root"}"#), "symlink");
    failed(
        run(&f.root, "list_tree", r#"{"path": "root/etc"}"#),
        "outside the workspace",
    );
    failed(
        run(&f.root, "read_file", r#"{"path": "root/etc/passwd"}"#),
        "outside the workspace",
    );
    failed(
        run(&f.root, "read_file", r#"{"path": "passwd"}"#),
        "outside the workspace",
    );
    failed(
        run(&f.root, "read_file", r#"{"path": "../ws/app.py"}"#),
        "outside the workspace",
    );
    failed(
        run(&f.root, "read_file", r#"{"path": "/etc/passwd"}"#),
        "absolute",
    );
    let search = ok(run(&f.root, "ripgrep", r#"{"pattern": "root:"}"#));
    assert!(search.content.contains("no matches"), "{}", search.content);
    failed(
        run(
            &f.root,
            "ripgrep",
            r#"{"pattern": "root:", "path": "root/etc"}"#,
        ),
        "outside the workspace",
    );
    failed(
        run(&f.root, "ripgrep", r#"{"pattern": "x", "path": "root"}"#),
        "symlink",
    );
    failed(
        run(
            &f.root,
            "tree_sitter_symbols",
            r#"{"path": "root/usr/lib/x.py"}"#,
        ),
        "outside the workspace",
    );
    let patch = "--- a/root/tmp/x.py\n+++ b/root/tmp/x.py\n@@ -1 +1 @@\n-a\n+b\n";
    let args = serde_json::json!({"path": "root/tmp/x.py", "patch": patch}).to_string();
    failed(run(&f.root, "edit_file", &args), "outside the workspace");
    let create = serde_json::json!({"path": "root/tmp/planted.txt", "patch": "--- /dev/null\n+++ b/root/tmp/planted.txt\n@@ -0,0 +1 @@\n+x\n"}).to_string();
    failed(run(&f.root, "edit_file", &create), "outside the workspace");
    assert!(!Path::new("/tmp/planted.txt").exists());
}

#[test]
fn a_gitignore_symlinked_outside_is_not_read() {
    let f = fixture();
    std::fs::remove_file(f.ws.join(".gitignore")).expect("rm");
    let outside = f._tmp.path().join("outside-ignore");
    write(&outside, b"app.py\n");
    symlink(&outside, f.ws.join(".gitignore")).expect("plant");
    let tree = ok(run(&f.root, "list_tree", "{}"));
    assert!(tree.content.contains("app.py"), "{}", tree.content);
}

#[test]
fn edit_file_through_the_tool_applies_all_or_none() {
    let f = fixture();
    let patch = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -6,3 +6,3 @@\n     pub fn bump(&mut self) {\n-        self.n += 1;\n+        self.n += 2;\n     }\n@@ -11,3 +11,3 @@\n pub fn add(a: u32, b: u32) -> u32 {\n-    a + b\n+    a.wrapping_add(b)\n }\n";
    let out = ok(run(
        &f.root,
        "edit_file",
        &serde_json::json!({"path": "src/lib.rs", "patch": patch}).to_string(),
    ));
    assert_eq!(out.changed_files, vec!["src/lib.rs"]);
    let text = std::fs::read_to_string(f.ws.join("src/lib.rs")).expect("read");
    assert!(text.contains("self.n += 2;") && text.contains("a.wrapping_add(b)"));
    let bad = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n pub struct Counter {\n-    n: u32,\n+    n: u64,\n@@ -11,3 +11,3 @@\n pub fn add(a: u32, b: u32) -> u32 {\n-    a - b\n+    a * b\n }\n";
    let out = failed(
        run(
            &f.root,
            "edit_file",
            &serde_json::json!({"path": "src/lib.rs", "patch": bad}).to_string(),
        ),
        "hunk 2 of 2",
    );
    assert!(
        out.content.contains("    12|     a.wrapping_add(b)"),
        "{}",
        out.content
    );
    assert_eq!(
        std::fs::read_to_string(f.ws.join("src/lib.rs")).expect("read"),
        text
    );
}

fn git_tool(root: &WorkspaceRoot, subcommand: &str, args: &[&str]) -> ToolOutput {
    run(
        root,
        "git",
        &serde_json::json!({"subcommand": subcommand, "args": args}).to_string(),
    )
}

#[test]
fn git_status_diff_log_show_on_the_workspace() {
    let f = fixture();
    std::fs::write(f.ws.join("src/lib.rs"), LIB_RS.replace("a + b", "b + a")).expect("write");
    write(&f.ws.join("new.txt"), b"fresh\n");
    let status = ok(git_tool(&f.root, "status", &[]));
    assert!(
        status.content.contains(" M src/lib.rs"),
        "{}",
        status.content
    );
    assert!(status.content.contains("?? new.txt"));
    assert!(!status.content.contains("debug.log"));
    let diff = ok(git_tool(&f.root, "diff", &[]));
    assert!(
        diff.content.contains("-    a + b\n+    b + a\n"),
        "{}",
        diff.content
    );
    assert!(diff.content.contains("+fresh"));
    let only = ok(git_tool(&f.root, "diff", &["src/lib.rs"]));
    assert!(!only.content.contains("fresh"));
    let stat = ok(git_tool(&f.root, "diff", &["--stat"]));
    assert!(
        stat.content.contains("src/lib.rs") && stat.content.contains("files changed"),
        "{}",
        stat.content
    );
    let log = ok(git_tool(&f.root, "log", &["-n", "5"]));
    assert!(log.content.starts_with("commit "), "{}", log.content);
    assert_eq!(log.summary, "1 commits");
    let show = ok(git_tool(&f.root, "show", &["HEAD:src/lib.rs"]));
    assert_eq!(show.content, LIB_RS);
    let commit = ok(git_tool(&f.root, "show", &[]));
    assert!(
        commit.content.contains("+pub struct Counter {"),
        "{}",
        commit.content
    );
}

#[test]
fn host_git_configuration_never_applies() {
    let f = fixture();
    ok(git_tool(&f.root, "status", &[]));
    // The system, global and XDG config search paths point at an empty
    // private directory, whatever HOME or /etc hold.
    for level in [
        git2::ConfigLevel::System,
        git2::ConfigLevel::Global,
        git2::ConfigLevel::XDG,
    ] {
        // SAFETY: reads a libgit2 option; no test changes it concurrently
        // except the tools' own one-time isolation, which has run above.
        let path = unsafe { git2::opts::get_search_path(level) }.expect("search path");
        let path = PathBuf::from(path.to_str().expect("utf-8"));
        // `<state>/git-config-empty`, or a private temporary directory
        // when there is no state directory to hold it.
        let named = path.to_string_lossy();
        assert!(
            named.ends_with("/git-config-empty") || named.contains("minicoder-no-git-config-"),
            "{level:?}: {path:?}"
        );
        assert_eq!(std::fs::read_dir(&path).expect("dir").count(), 0);
    }
    assert!(git2::Config::find_global().is_err());
}

#[test]
fn git_refuses_writes_remotes_and_unknown_flags() {
    let f = fixture();
    failed(git_tool(&f.root, "push", &[]), "remote operation");
    failed(git_tool(&f.root, "fetch", &["origin"]), "remote operation");
    failed(git_tool(&f.root, "commit", &["-m", "x"]), "read-only");
    failed(git_tool(&f.root, "blame", &[]), "unknown git subcommand");
    failed(
        git_tool(&f.root, "diff", &["--output=/tmp/x"]),
        "not supported",
    );
    failed(git_tool(&f.root, "log", &["--exec=sh"]), "not supported");
    failed(
        git_tool(&f.root, "show", &["HEAD:../x"]),
        "outside the workspace",
    );
    failed(
        git_tool(&f.root, "show", &["no-such-rev"]),
        "unknown revision",
    );
}

#[test]
fn git_refuses_a_tampered_repository() {
    let f = fixture();
    let alternates = f.ws.join(".git/objects/info/alternates");
    write(&alternates, b"/somewhere/else/objects\n");
    failed(git_tool(&f.root, "status", &[]), "alternates");
    std::fs::remove_file(&alternates).expect("rm");
    ok(git_tool(&f.root, "status", &[]));

    write(&f.ws.join(".git/commondir"), b"/elsewhere\n");
    failed(git_tool(&f.root, "log", &[]), "commondir");
    std::fs::remove_file(f.ws.join(".git/commondir")).expect("rm");

    let config = f.ws.join(".git/config");
    let original = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        format!("{original}[include]\n\tpath = /etc/gitconfig\n"),
    )
    .expect("write");
    failed(git_tool(&f.root, "status", &[]), "include");
    std::fs::write(&config, &original).expect("restore");

    symlink("/etc", f.ws.join(".git/refs/planted")).expect("plant");
    failed(git_tool(&f.root, "status", &[]), "symlink");
    std::fs::remove_file(f.ws.join(".git/refs/planted")).expect("rm");

    std::fs::rename(f.ws.join(".git"), f.ws.join("real-git")).expect("mv");
    symlink(f.ws.join("real-git"), f.ws.join(".git")).expect("plant");
    failed(git_tool(&f.root, "status", &[]), ".git is a symlink");
}

#[test]
fn git_ignores_a_planted_worktree_setting() {
    let f = fixture();
    let config = f.ws.join(".git/config");
    let original = std::fs::read_to_string(&config).expect("config");
    std::fs::write(&config, format!("{original}[core]\n\tworktree = /\n")).expect("write");
    let status = ok(git_tool(&f.root, "status", &[]));
    assert!(!status.content.contains("etc/"), "{}", status.content);
}

#[test]
fn agent_tools_are_not_executed_here() {
    let f = fixture();
    let call = parse_call("request_completion", r#"{"summary": "x"}"#).expect("parse");
    assert!(matches!(call, ParsedCall::RequestCompletion { .. }));
    assert!(execute_without_container(&call, &f.root).is_none());
}

async fn container_for(ws: &Path, name: &str) -> Option<CommandContainer> {
    let docker = support::docker_or_skip().await?;
    Some(
        CommandContainer::start(docker, support::spec(ws, name))
            .await
            .expect("start container"),
    )
}

async fn shell(
    root: &WorkspaceRoot,
    container: &mut CommandContainer,
    outputs: &Path,
    id: &str,
    args: serde_json::Value,
) -> ToolOutput {
    let call = parse_call("run_shell", &args.to_string()).expect("parse");
    let mut ctx = ToolContext {
        root,
        container,
        outputs_dir: outputs,
        redactor: &minicoder::trace::Redactor::default(),
        call_id: id,
        default_timeout: Duration::from_secs(60),
    };
    execute(&call, &mut ctx).await
}

#[tokio::test]
async fn run_shell_runs_in_the_sandbox_and_reports() {
    let ws = support::workspace();
    std::fs::create_dir(ws.path().join("sub")).expect("mkdir");
    support::chown_for_sandbox(&ws.path().join("sub"));
    symlink("/", ws.path().join("root")).expect("plant");
    let Some(mut container) = container_for(ws.path(), "tools-run-shell").await else {
        return;
    };
    let outputs = tempfile::tempdir().expect("outputs");
    let root = WorkspaceRoot::open(ws.path()).expect("root");

    let out = shell(
        &root,
        &mut container,
        outputs.path(),
        "call_1",
        serde_json::json!({"command": "echo hello; echo oops >&2; id -u"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    assert_eq!(out.exit_code, Some(0));
    assert!(out.content.starts_with("exit code 0"), "{}", out.content);
    assert!(
        out.content.contains("hello")
            && out.content.contains("oops")
            && out.content.contains("10001")
    );
    assert!(out.summary.starts_with("exit 0 in "), "{}", out.summary);
    assert!(outputs.path().join("call_1.stdout").exists());

    let cwd = shell(
        &root,
        &mut container,
        outputs.path(),
        "call_2",
        serde_json::json!({"command": "pwd; exit 3", "cwd": "sub"}),
    )
    .await;
    assert!(!cwd.ok);
    assert_eq!(cwd.exit_code, Some(3));
    assert!(cwd.content.contains("/workspace/sub"), "{}", cwd.content);

    let slow = shell(
        &root,
        &mut container,
        outputs.path(),
        "call_3",
        serde_json::json!({"command": "sleep 5", "timeout_ms": 500}),
    )
    .await;
    assert!(!slow.ok);
    assert!(slow.content.contains("timed out"), "{}", slow.content);

    let noisy = shell(
        &root,
        &mut container,
        outputs.path(),
        "call_4",
        serde_json::json!({"command": "seq 1 100000"}),
    )
    .await;
    assert!(noisy.ok);
    assert!(noisy.content.chars().count() <= 16_000);
    assert!(noisy.content.contains("\n1\n2\n") && noisy.content.contains("100000"));
    assert!(
        noisy
            .content
            .contains("bytes omitted; read them with read_output id=call_4.stdout offset=3700 …]"),
        "{}",
        noisy.content
    );

    let capped = shell(
        &root,
        &mut container,
        outputs.path(),
        "call_8",
        serde_json::json!({"command": "true", "timeout_ms": 99_999_999}),
    )
    .await;
    assert!(
        capped.ok && capped.content.contains("capped at 600000 ms"),
        "{}",
        capped.content
    );

    // A working directory outside the workspace, behind a planted link, or missing.
    for (call, cwd, refusal) in [
        ("call_5", "../", "outside the workspace"),
        ("call_6", "root", "not a directory inside"),
        ("call_7", "nope", "does not exist"),
    ] {
        let out = shell(
            &root,
            &mut container,
            outputs.path(),
            call,
            serde_json::json!({"command": "pwd", "cwd": cwd}),
        )
        .await;
        assert!(!out.ok && out.content.contains(refusal), "{}", out.content);
    }

    container.shutdown().await;
}

#[tokio::test]
async fn a_symlink_made_by_a_command_is_refused_by_the_host_tools() {
    let ws = support::workspace();
    let Some(mut container) = container_for(ws.path(), "tools-planted-link").await else {
        return;
    };
    let outputs = tempfile::tempdir().expect("outputs");
    let root = WorkspaceRoot::open(ws.path()).expect("root");
    let out = shell(
        &root,
        &mut container,
        outputs.path(),
        "plant",
        serde_json::json!({"command": "ln -s / root && ln -s /etc/passwd pw"}),
    )
    .await;
    assert!(out.ok, "{}", out.content);
    container.shutdown().await;
    failed(
        run(&root, "read_file", r#"{"path": "root/etc/passwd"}"#),
        "outside the workspace",
    );
    failed(
        run(&root, "read_file", r#"{"path": "pw"}"#),
        "outside the workspace",
    );
    let search = ok(run(&root, "ripgrep", r#"{"pattern": "root:"}"#));
    assert!(search.content.contains("no matches"), "{}", search.content);
}
