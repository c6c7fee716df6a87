//! A private tmux server for driving the real binary in a real terminal.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A private tmux server, killed when the test ends however it ends.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn command(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.args(["-L", &self.socket]);
        cmd
    }

    pub fn run(&self, args: &[&str]) -> String {
        let out = self.command().args(args).output().expect("tmux runs");
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "mc"])
    }

    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "mc"];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    pub fn type_text(&self, text: &str) {
        self.run(&["send-keys", "-t", "mc", "-l", text]);
    }

    /// Waits until the screen shows `text`; panics with the screen if it never does.
    pub fn wait_for(&self, text: &str, timeout: Duration) -> String {
        self.wait_for_all(&[text], timeout)
    }

    /// Waits until the screen shows every one of `texts` at once, and returns
    /// a screen captured after the one that first showed them: tmux can be
    /// caught half-way through drawing a frame (an overlay's title drawn, its
    /// body not yet), and a test that asserts on more than it waited for must
    /// see the whole frame.
    pub fn wait_for_all(&self, texts: &[&str], timeout: Duration) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            let missing: Vec<&&str> = texts.iter().filter(|t| !screen.contains(**t)).collect();
            if missing.is_empty() {
                std::thread::sleep(Duration::from_millis(100));
                let settled = self.screen();
                if texts.iter().all(|t| settled.contains(*t)) {
                    return settled;
                }
                continue;
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

pub fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

impl Tmux {
    /// A server of its own, named after this process and `name`.
    pub fn new(name: &str) -> Tmux {
        Tmux {
            socket: format!("minicoder-test-{}-{name}", std::process::id()),
        }
    }

    /// Starts `command` in a `cols`×`rows` session named `mc` with `env` set.
    pub fn start(&self, cols: &str, rows: &str, env: &[String], command: &str) {
        let mut args = vec!["new-session", "-d", "-s", "mc", "-x", cols, "-y", rows];
        for e in env {
            args.extend(["-e", e.as_str()]);
        }
        args.push(command);
        self.run(&args);
    }

    /// Whether the program in the pane is using the alternate screen.
    pub fn alternate_screen(&self) -> bool {
        self.run(&["display", "-p", "-t", "mc", "#{alternate_on}"])
            .trim()
            == "1"
    }
}

/// `path` quoted for `sh`.
pub fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', r"'\''"))
}
