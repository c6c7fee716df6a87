//! The real binary in a real terminal (tmux), against the mock model and the
//! real sandbox: the screen is read with `capture-pane`, keys are typed with
//! `send-keys`. One edit is approved with `y`, one refused with `n` and a
//! reason that must reach the model, `?` opens the key help, `q` quits and the
//! terminal is restored.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::mock_openai::{MockOpenAi, MockResponse};

const API_KEY: &str = "sk-test-tmux-5a4b3c2d1e0f9a8b7c6d";
const FIX: &str = "--- a/pagination.py\n+++ b/pagination.py\n@@ -5,7 +5,7 @@\n     \"\"\"Number of pages needed to show `total_items`, `page_size` per page.\"\"\"\n     if page_size <= 0:\n         raise ValueError(\"page_size must be positive\")\n-    return total_items // page_size\n+    return -(-total_items // page_size)\n \n \n def page_slice(items: list, page: int, page_size: int) -> list:\n";
const UNWANTED: &str = "--- a/pagination.py\n+++ b/pagination.py\n@@ -1,3 +1,3 @@\n-\"\"\"Pagination helpers for a list view.\"\"\"\n+\"\"\"Pagination helpers (rewritten).\"\"\"\n \n \n";
const REASON: &str = "leave the module docstring alone";

/// A private tmux server, killed when the test ends however it ends.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.socket]);
        cmd
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "mc"])
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "mc"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "mc", "-l", text]);
    }

    /// Waits until the screen shows `text`; panics with the screen if it never does.
    fn wait_for(&self, text: &str, timeout: Duration) -> String {
        self.wait_for_all(&[text], timeout)
    }

    /// Waits until the screen shows every one of `texts` at once.
    fn wait_for_all(&self, texts: &[&str], timeout: Duration) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            let missing: Vec<&&str> = texts.iter().filter(|t| !screen.contains(**t)).collect();
            if missing.is_empty() {
                return screen;
            }
            if start.elapsed() > timeout {
                panic!("waited {timeout:?} for {missing:?}; the screen is:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(150));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}

fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "find the rounding bug", "status": statuses[0]},
        {"id": "2", "content": "fix page_count", "status": statuses[1]},
    ]})
}

fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_in_a_real_terminal() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    if !tmux_available() {
        assert!(
            std::env::var_os("MINICODER_REQUIRE_DOCKER").is_none(),
            "tmux is required for this test (CI installs it)"
        );
        eprintln!("skipping: tmux is not installed");
        return;
    }
    let source = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
    let digest = minicoder::cli::demo::tree_digest(source.path()).expect("digest");
    let state = tempfile::tempdir().expect("tempdir");
    let artifacts = state.path().join("artifacts");
    let mock = MockOpenAi::start().await;
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

    let tmux = Tmux {
        socket: format!("minicoder-test-{}", std::process::id()),
    };
    let command = format!(
        "{} run {} 'Fix the pagination bug' --model openai --approval each --artifact-dir {}; echo MINICODER_EXIT=$?; sleep 600",
        quote(&support::bin()),
        quote(source.path()),
        quote(&artifacts),
    );
    let env = [
        format!("MINICODER_STATE_DIR={}", state.path().display()),
        format!("OPENAI_BASE_URL={}", mock.base_url()),
        format!("OPENAI_API_KEY={API_KEY}"),
        "OPENAI_MODEL=mock-model".to_string(),
        "MINICODER_RETRY_BASE_MS=10".to_string(),
        "TERM=xterm-256color".to_string(),
    ];
    // MINICODER_CAPTURE=FILE saves the main screen (for the README), at
    // MINICODER_CAPTURE_SIZE=COLSxROWS if given.
    let capture = std::env::var_os("MINICODER_CAPTURE");
    let size = std::env::var("MINICODER_CAPTURE_SIZE").unwrap_or_else(|_| "160x48".into());
    let (cols, rows) = size
        .split_once('x')
        .expect("MINICODER_CAPTURE_SIZE is COLSxROWS");
    let mut args = vec!["new-session", "-d", "-s", "mc", "-x", cols, "-y", rows];
    for e in &env {
        args.extend(["-e", e.as_str()]);
    }
    args.push(&command);
    tokio::task::block_in_place(|| {
        tmux.run(&args);
        let long = Duration::from_secs(180);

        // The first edit waits for approval; `y` applies it.
        let screen = tmux.wait_for("Apply this edit to pagination.py", long);
        assert!(screen.contains("-(-total_items // page_size)"), "{screen}");
        assert_eq!(
            tmux.run(&["display", "-p", "-t", "mc", "#{alternate_on}"])
                .trim(),
            "1"
        );
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
        assert_eq!(
            tmux.run(&["display", "-p", "-t", "mc", "#{alternate_on}"])
                .trim(),
            "0",
            "the alternate screen was left"
        );
    });

    // The refusal's reason reached the model, with the tool result of the refused edit.
    let sent: String = mock
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert!(sent.contains(REASON), "the reason never reached the model");
    let patch = std::fs::read_to_string(artifacts.join("final.patch")).expect("final.patch");
    assert!(patch.contains("-(-total_items // page_size)"), "{patch}");
    assert!(
        !patch.contains("rewritten"),
        "the refused edit is in the patch:\n{patch}"
    );
    let now = minicoder::cli::demo::tree_digest(source.path()).expect("digest");
    assert_eq!(now, digest, "the source repository changed");
}
