//! The real binary in a real terminal (tmux), against the mock model and the
//! real sandbox: the screen is read with `capture-pane`, keys are typed with
//! `send-keys`. One edit is approved with `y`, one refused with `n` and a
//! reason that must reach the model, `?` opens the key help, `q` quits and the
//! terminal is restored.

use crate::support;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use support::mock_openai::{MockOpenAi, MockResponse};
use support::tmux::{Tmux, quote, tmux_available};

const API_KEY: &str = "sk-test-tmux-5a4b3c2d1e0f9a8b7c6d";
const FIX: &str = support::FIX_PAGINATION;
const UNWANTED: &str = "--- a/pagination.py\n+++ b/pagination.py\n@@ -1,3 +1,3 @@\n-\"\"\"Pagination helpers for a list view.\"\"\"\n+\"\"\"Pagination helpers (rewritten).\"\"\"\n \n \n";
const README_NOTE: &str = "--- a/README.md\n+++ b/README.md\n@@ -2,3 +2,5 @@\n \n The fixture `minicoder demo` fixes: `page_count` rounds down, so a partial last\n page is lost (`page_count(21, 10)` is 2, not 3).\n+\n+Fixed: `page_count` now rounds up.\n";
const REASON: &str = "leave the module docstring alone";

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "find the rounding bug", "status": statuses[0]},
        {"id": "2", "content": "fix page_count", "status": statuses[1]},
    ]})
}

/// What every test here needs: Docker and tmux, a fresh copy of the demo
/// fixture, a state directory and the mock model.
struct Scene {
    docker: bollard::Docker,
    source: tempfile::TempDir,
    digest: String,
    state: tempfile::TempDir,
    mock: MockOpenAi,
}

impl Scene {
    /// `None` (the test is skipped) only without Docker or tmux and without
    /// `MINICODER_REQUIRE_DOCKER`.
    async fn new() -> Option<Scene> {
        let docker = support::docker_or_skip().await?;
        if !tmux_available() {
            assert!(
                std::env::var_os("MINICODER_REQUIRE_DOCKER").is_none(),
                "tmux is required for this test (CI installs it)"
            );
            support::skipped("tmux is not installed");
            return None;
        }
        let source = tempfile::tempdir().expect("tempdir");
        minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
        let digest = minicoder::cli::demo::tree_digest(source.path()).expect("digest");
        Some(Scene {
            docker,
            source,
            digest,
            state: support::state_dir(),
            mock: MockOpenAi::start().await,
        })
    }

    fn artifacts(&self) -> PathBuf {
        self.state.path().join("artifacts")
    }

    /// The environment of the session: the mock model, a private state directory.
    fn env(&self) -> Vec<String> {
        vec![
            format!("MINICODER_STATE_DIR={}", self.state.path().display()),
            format!("OPENAI_BASE_URL={}", self.mock.base_url()),
            format!("OPENAI_API_KEY={API_KEY}"),
            "OPENAI_MODEL=mock-model".to_string(),
            "MINICODER_RETRY_BASE_MS=10".to_string(),
            "TERM=xterm-256color".to_string(),
        ]
    }

    /// `minicoder run` on the fixture with `flags`; the pane stays open afterwards
    /// and shows the exit code.
    fn run_command(&self, flags: &str) -> String {
        format!(
            "{} run {} 'Fix the pagination bug' --model openai --artifact-dir {} {flags}; echo MINICODER_EXIT=$?; sleep 600",
            quote(&support::bin()),
            quote(self.source.path()),
            quote(&self.artifacts()),
        )
    }

    /// The bare session in the fixture; the pane stays open afterwards.
    fn session_command(&self) -> String {
        format!(
            "cd {} && {} --model openai; echo MINICODER_EXIT=$?; sleep 600",
            quote(self.source.path()),
            quote(&support::bin()),
        )
    }

    fn assert_source_unchanged(&self) {
        let now = minicoder::cli::demo::tree_digest(self.source.path()).expect("digest");
        assert_eq!(now, self.digest, "the source repository changed");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_and_refusing_edits_in_a_real_terminal() {
    let Some(scene) = Scene::new().await else {
        return;
    };
    let mock = &scene.mock;
    mock.push_all([
        MockResponse::sse_tool_calls(&[
            ("update_plan", plan(["in_progress", "pending"])),
            ("read_file", json!({"path": "pagination.py"})),
        ])
        .with_content("Reading the pagination module first."),
        MockResponse::sse_tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
        ]),
        MockResponse::tool_calls(&[(
            "edit_file",
            json!({"path": "pagination.py", "patch": UNWANTED}),
        )]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            (
                "request_completion",
                json!({"summary": "page_count rounds up"}),
            ),
        ]),
    ]);

    let tmux = Tmux::new("approve");
    let command = scene.run_command("--approval each");
    let env = scene.env();
    // MINICODER_CAPTURE=FILE saves the main screen (for the README), at
    // MINICODER_CAPTURE_SIZE=COLSxROWS if given.
    let capture = std::env::var_os("MINICODER_CAPTURE");
    let size = std::env::var("MINICODER_CAPTURE_SIZE").unwrap_or_else(|_| "160x48".into());
    let (cols, rows) = size
        .split_once('x')
        .expect("MINICODER_CAPTURE_SIZE is COLSxROWS");
    tmux.start(cols, rows, &env, &command);
    tokio::task::block_in_place(|| {
        let long = Duration::from_secs(180);

        // The first edit waits for approval; `y` applies it.
        tmux.wait_for_all(
            &[
                "Apply this edit to pagination.py",
                "-(-total_items // page_size)",
            ],
            long,
        );
        assert!(tmux.alternate_screen());
        tmux.keys(&["y"]);

        // The second one: look around first (Esc), then refuse it with a reason.
        let screen = tmux.wait_for("Pagination helpers (rewritten)", long);
        assert!(screen.contains("Apply this edit"), "{screen}");
        tmux.keys(&["Escape"]);
        tmux.wait_for("an edit waits for approval", long);
        // The plan, a tool call, the live diff of the approved edit and the matrix.
        tmux.wait_for_all(
            &[
                "find the rounding bug",
                "read_file pagination.py",
                "-(-total_items // page_size)",
                "Verification",
                "baseline",
            ],
            long,
        );
        if let Some(path) = &capture {
            std::fs::write(path, tmux.screen()).expect("capture");
        }
        tmux.keys(&["p"]);
        tmux.wait_for("Apply this edit", long);
        tmux.keys(&["n"]);
        tmux.wait_for("Why refuse?", long);
        tmux.type_text(REASON);
        tmux.keys(&["Enter"]);

        // The run ends verified; `?` shows the keys, Esc closes them, `q` quits.
        let screen = tmux.wait_for("✓ verified", long);
        assert!(screen.contains("edit refused"), "{screen}");
        assert!(
            screen.contains("✓ 0"),
            "a passing check in the matrix:\n{screen}"
        );
        // The finished run leaves the task box focused and empty: `?` opens the help there.
        tmux.wait_for("describe the task", long);
        tmux.keys(&["?"]);
        let screen = tmux.wait_for("Keys —", long);
        assert!(screen.contains("send the task or follow-up"), "{screen}");
        // Keys are sent apart: an Escape directly followed by a key reads as Alt+key.
        for key in ["Escape", "Escape", "q"] {
            std::thread::sleep(Duration::from_millis(300));
            tmux.keys(&[key]);
        }
        let screen = tmux.wait_for("MINICODER_EXIT=", long);
        assert!(screen.contains("MINICODER_EXIT=0"), "{screen}");
        assert!(
            screen.contains("patch: "),
            "the summary is printed after the session:\n{screen}"
        );
        assert!(
            screen.contains("next: minicoder apply "),
            "the summary ends with the next step:\n{screen}"
        );
        assert!(!tmux.alternate_screen(), "the alternate screen was left");
    });

    // The refusal's reason reached the model, with the tool result of the refused edit.
    let sent: String = mock
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert!(sent.contains(REASON), "the reason never reached the model");
    let patch =
        std::fs::read_to_string(scene.artifacts().join("final.patch")).expect("final.patch");
    assert!(patch.contains("-(-total_items // page_size)"), "{patch}");
    assert!(
        !patch.contains("rewritten"),
        "the refused edit is in the patch:\n{patch}"
    );
    scene.assert_source_unchanged();
}

/// `minicoder` with no arguments, in the repository: the task is typed in the
/// input box, and the verified patch is reviewed hunk by hunk at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_session_types_the_task_and_reviews_the_verified_patch() {
    let Some(scene) = Scene::new().await else {
        return;
    };
    let mock = &scene.mock;
    mock.push_all([
        MockResponse::sse_tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
            (
                "edit_file",
                json!({"path": "README.md", "patch": README_NOTE}),
            ),
        ]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            (
                "request_completion",
                json!({"summary": "page_count rounds up"}),
            ),
        ]),
    ]);
    let tmux = Tmux::new("review");
    let command = scene.session_command();
    let env = scene.env();
    let long = Duration::from_secs(180);
    let reviewed = tokio::task::block_in_place(|| {
        tmux.start("120", "36", &env, &command);
        tmux.wait_for("describe the task, then press Enter", long);
        tmux.type_text("Fix the pagination bug");
        tmux.keys(&["Enter"]);
        // The run verifies and the review opens with both files chosen.
        let screen = tmux.wait_for("Review the verified patch", long);
        assert!(screen.contains("2 of 2 hunks chosen"), "{screen}");
        // Files are listed README.md, pagination.py: go to the fix and back, then leave
        // the README change out and save (s; Enter would apply).
        tmux.keys(&["}"]);
        tmux.keys(&["{"]);
        tmux.keys(&["Space"]);
        tmux.wait_for("1 of 2 hunks chosen", long);
        tmux.keys(&["s"]);
        let screen = tmux.wait_for("reviewed.patch", long);
        let path = screen
            .split_whitespace()
            .find(|w| w.ends_with("reviewed.patch"))
            .expect("the saved path is shown")
            .to_string();
        tmux.keys(&["Escape"]);
        std::thread::sleep(Duration::from_millis(300));
        tmux.keys(&["Escape"]);
        std::thread::sleep(Duration::from_millis(300));
        tmux.keys(&["q"]);
        let screen = tmux.wait_for("MINICODER_EXIT=", long);
        assert!(screen.contains("MINICODER_EXIT=0"), "{screen}");
        assert!(screen.contains("reviewed patch: "), "{screen}");
        assert!(!tmux.alternate_screen());
        path
    });
    let patch = std::fs::read_to_string(&reviewed).expect("reviewed.patch");
    assert!(patch.contains("-(-total_items // page_size)"), "{patch}");
    assert!(
        !patch.contains("README"),
        "the excluded file is in the patch:\n{patch}"
    );
    // It applies to the untouched source.
    let check = std::process::Command::new("git")
        .args(["apply", "--check", &reviewed])
        .current_dir(scene.source.path())
        .output()
        .expect("git apply");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    scene.assert_source_unchanged();
}

/// Ctrl-C twice in the middle of a command, and SIGTERM: the run is cancelled
/// (exit 130), its containers are removed, and the terminal is restored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_twice_and_sigterm_cancel_and_restore_the_terminal() {
    for how in ["ctrl-c", "sigterm"] {
        let Some(scene) = Scene::new().await else {
            return;
        };
        scene.mock.push(MockResponse::tool_calls(&[
            ("update_plan", plan(["in_progress", "pending"])),
            ("run_shell", json!({"command": "sleep 120"})),
        ]));
        let tmux = Tmux::new(how);
        let command = scene.run_command("");
        let env = scene.env();
        let long = Duration::from_secs(180);
        tokio::task::block_in_place(|| {
            tmux.start("100", "30", &env, &command);
            tmux.wait_for("run_shell sleep 120  running", long);
            if how == "ctrl-c" {
                tmux.keys(&["C-c"]);
                tmux.wait_for("Cancel the run?", long);
                tmux.keys(&["C-c"]);
            } else {
                let shell = tmux.run(&["display", "-p", "-t", "mc", "#{pane_pid}"]);
                let child = std::process::Command::new("pgrep")
                    .args(["-P", shell.trim()])
                    .output()
                    .expect("pgrep");
                let pid = String::from_utf8_lossy(&child.stdout).trim().to_string();
                assert!(
                    !pid.is_empty(),
                    "no minicoder process under the pane's shell"
                );
                let kill = std::process::Command::new("kill")
                    .args(["-TERM", &pid])
                    .status()
                    .expect("kill");
                assert!(kill.success());
            }
            let screen = tmux.wait_for("MINICODER_EXIT=", long);
            assert!(screen.contains("MINICODER_EXIT=130"), "{how}:\n{screen}");
            assert!(screen.contains(": cancelled"), "{how}:\n{screen}");
            assert!(
                !tmux.alternate_screen(),
                "{how}: the alternate screen was left"
            );
        });
        let report: Value = serde_json::from_str(
            &std::fs::read_to_string(scene.artifacts().join("report.json")).expect("report.json"),
        )
        .expect("report");
        assert_eq!(report["outcome"], "cancelled", "{how}");
        let run_id = report["run_id"].as_str().expect("run id");
        assert!(
            support::containers_of_run(&scene.docker, run_id)
                .await
                .is_empty(),
            "{how}: containers of the run are left"
        );
    }
}

/// The whole loop in the session: a run, the review, apply from the session
/// (the source changes as the patch says), then undo from the runs browser
/// (the source is back, byte for byte).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_from_the_review_then_undo_from_the_runs_browser() {
    let Some(scene) = Scene::new().await else {
        return;
    };
    scene.mock.push_all([
        MockResponse::sse_tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
            (
                "edit_file",
                json!({"path": "README.md", "patch": README_NOTE}),
            ),
        ]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            (
                "request_completion",
                json!({"summary": "page_count rounds up"}),
            ),
        ]),
    ]);
    let tmux = Tmux::new("deliver");
    let command = scene.session_command();
    let env = scene.env();
    let long = Duration::from_secs(180);
    let module = scene.source.path().join("pagination.py");
    let before = std::fs::read(&module).expect("pagination.py");
    tokio::task::block_in_place(|| {
        tmux.start("120", "36", &env, &command);
        tmux.wait_for("describe the task, then press Enter", long);
        tmux.type_text("Fix the pagination bug");
        tmux.keys(&["Enter"]);
        let screen = tmux.wait_for("Review the verified patch", long);
        assert!(screen.contains("2 of 2 hunks chosen"), "{screen}");
        // Every hunk chosen: Enter applies the verified patch.
        tmux.keys(&["Enter"]);
        let screen = tmux.wait_for("Applied run", long);
        assert!(
            screen.contains("The run's verified patch, whole"),
            "{screen}"
        );
        assert!(screen.contains("M pagination.py"), "{screen}");
        let applied = std::fs::read_to_string(&module).expect("pagination.py");
        assert!(
            applied.contains("return -(-total_items // page_size)"),
            "{applied}"
        );
        assert!(!applied.contains("return total_items // page_size"));
        tmux.keys(&["Escape"]);
        std::thread::sleep(Duration::from_millis(300));
        // The runs browser: this run, applied.
        tmux.keys(&["C-r"]);
        tmux.wait_for("Runs of", long);
        // The run's row, once the list is read: verified and applied.
        let screen = tmux.wait_for("success", long);
        assert!(screen.contains("Runs of"), "{screen}");
        assert!(
            screen.contains("success     yes      yes"),
            "verified and applied are shown:\n{screen}"
        );
        tmux.keys(&["u"]);
        tmux.wait_for("Undo the apply?", long);
        tmux.keys(&["y"]);
        let screen = tmux.wait_for("Undid run", long);
        assert!(screen.contains("2 file(s) put back"), "{screen}");
        for key in ["Escape", "Escape", "q"] {
            std::thread::sleep(Duration::from_millis(300));
            tmux.keys(&[key]);
        }
        let screen = tmux.wait_for("MINICODER_EXIT=", long);
        assert!(screen.contains("MINICODER_EXIT=0"), "{screen}");
        assert!(!tmux.alternate_screen());
    });
    assert_eq!(
        std::fs::read(&module).expect("pagination.py"),
        before,
        "undo restores the file byte for byte"
    );
    scene.assert_source_unchanged();
}

/// A reviewed subset that does not pass (the README note without the fix:
/// the fixture's tests fail) is not applied, is not called verified, and
/// offers applying it unverified only behind a question.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reviewed_subset_that_fails_is_not_applied_without_the_override() {
    let Some(scene) = Scene::new().await else {
        return;
    };
    scene.mock.push_all([
        MockResponse::sse_tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
            (
                "edit_file",
                json!({"path": "README.md", "patch": README_NOTE}),
            ),
        ]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            (
                "request_completion",
                json!({"summary": "page_count rounds up"}),
            ),
        ]),
    ]);
    let tmux = Tmux::new("subset");
    let command = scene.session_command();
    let env = scene.env();
    let long = Duration::from_secs(300);
    tokio::task::block_in_place(|| {
        tmux.start("120", "36", &env, &command);
        tmux.wait_for("describe the task, then press Enter", long);
        tmux.type_text("Fix the pagination bug");
        tmux.keys(&["Enter"]);
        tmux.wait_for("Review the verified patch", long);
        // README.md, then pagination.py: leave the fix out.
        tmux.keys(&["}"]);
        tmux.keys(&["Space"]);
        tmux.wait_for("1 of 2 hunks chosen", long);
        tmux.keys(&["Enter"]);
        let screen = tmux.wait_for("not verified: nothing was written", long);
        assert!(screen.contains("apply them unverified"), "{screen}");
        assert!(!screen.contains("passed the run's checks"), "{screen}");
        scene.assert_source_unchanged();
        // The override asks first; n goes back and writes nothing.
        tmux.keys(&["!"]);
        tmux.wait_for("Apply unverified?", long);
        tmux.keys(&["n"]);
        tmux.wait_for("not verified: nothing was written", long);
        for key in ["Escape", "Escape", "Escape", "q"] {
            std::thread::sleep(Duration::from_millis(300));
            tmux.keys(&[key]);
        }
        let screen = tmux.wait_for("MINICODER_EXIT=", long);
        assert!(screen.contains("MINICODER_EXIT=0"), "{screen}");
    });
    scene.assert_source_unchanged();
}

/// `/ask` in a real terminal: the question is answered read-only (a command
/// the model tries is refused), the session says it is in ask mode, and
/// `/code` starts a run whose first request carries what was learnt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_then_code_in_a_real_terminal() {
    let Some(scene) = Scene::new().await else {
        return;
    };
    let mock = &scene.mock;
    mock.push_all([
        MockResponse::tool_calls(&[
            ("run_shell", json!({"command": "python3 -c 'print(1)'"})),
            ("read_file", json!({"path": "pagination.py"})),
        ]),
        MockResponse::text(
            "page_count floors the division at pagination.py:3, so a partial page is lost.",
        ),
        MockResponse::sse_tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
        ]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            (
                "request_completion",
                json!({"summary": "page_count rounds up"}),
            ),
        ]),
    ]);
    let tmux = Tmux::new("ask");
    let command = scene.session_command();
    let env = scene.env();
    let long = Duration::from_secs(180);
    tokio::task::block_in_place(|| {
        tmux.start("140", "40", &env, &command);
        tmux.wait_for("describe the task, then press Enter", long);
        tmux.type_text("/ask why is the last page lost?");
        tmux.keys(&["Enter"]);
        let screen = tmux.wait_for_all(
            &["◆ answer", "floors the division", "ask mode · read-only"],
            long,
        );
        assert!(
            screen.contains("refused run_shell: ask mode is read-only"),
            "{screen}"
        );
        assert!(screen.contains("Ask — read-only"), "{screen}");
        tmux.type_text("/code fix page_count so the partial page counts");
        tmux.keys(&["Enter"]);
        tmux.wait_for("Review the verified patch", long);
    });
    let first_of_run = String::from_utf8_lossy(&mock.requests()[2].body).into_owned();
    assert!(
        first_of_run.contains("What was learnt about the repository")
            && first_of_run.contains("why is the last page lost?")
            && first_of_run.contains("floors the division"),
        "{first_of_run}"
    );
    // No container ran for the question: the run's own came later.
    let asked = String::from_utf8_lossy(&mock.requests()[1].body).into_owned();
    assert!(asked.contains("ask mode is read-only"), "{asked}");
    scene.assert_source_unchanged();
}
