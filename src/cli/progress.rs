//! Progress of long steps (the image build) on stderr: one live status line
//! on a terminal; on a pipe, the steps plus a heartbeat every 15 s.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::sandbox::image::BuildProgress;

pub struct BuildDisplay {
    tty: bool,
    started: Instant,
    last_print: Instant,
    step: String,
    last_line: String,
}

impl BuildDisplay {
    pub fn new() -> Self {
        let now = Instant::now();
        Self {
            tty: std::io::stderr().is_terminal(),
            started: now,
            last_print: now,
            step: String::new(),
            last_line: String::new(),
        }
    }

    pub fn update(&mut self, event: BuildProgress) {
        let mut err = std::io::stderr().lock();
        match event {
            BuildProgress::Step { step, total, what } => {
                self.step = format!("[{step}/{total}]");
                if self.tty {
                    let _ = write!(err, "\r\x1b[2K");
                }
                let _ = writeln!(err, "sandbox {} {what}", self.step);
                self.last_print = Instant::now();
            }
            BuildProgress::Line(line) => {
                self.last_line = line;
                let elapsed = self.started.elapsed().as_secs();
                if self.tty {
                    let mut shown: String = self.last_line.chars().take(70).collect();
                    shown = shown.replace(['\r', '\n'], " ");
                    let _ = write!(
                        err,
                        "\r\x1b[2K  {} {}m{:02}s {shown}",
                        self.step,
                        elapsed / 60,
                        elapsed % 60
                    );
                    let _ = err.flush();
                } else if self.last_print.elapsed() >= Duration::from_secs(15) {
                    let _ = writeln!(err, "  {} {elapsed}s: {}", self.step, self.last_line);
                    self.last_print = Instant::now();
                }
            }
        }
    }

    pub fn finish(&mut self, message: &str) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K");
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        let _ = writeln!(err, "sandbox: {message} ({elapsed:.0}s)");
    }
}
