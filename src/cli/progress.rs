//! Progress of long steps (the image build) on stderr: one live status line
//! on a terminal; on a pipe, the steps plus a heartbeat every 15 s. The
//! build's own output is escaped before it is shown.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use crate::sandbox::image::BuildProgress;
use crate::terminal_text::{escape_line, write_line};

pub(crate) struct BuildDisplay {
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
                write_line(&mut err, &format!("sandbox {} {what}", self.step));
                self.last_print = Instant::now();
            }
            BuildProgress::Line(line) => {
                self.last_line = line;
                let elapsed = self.started.elapsed().as_secs();
                if self.tty {
                    let shown: String = self.last_line.chars().take(70).collect();
                    // The status line's own controls, then the build's text escaped.
                    let _ = write!(
                        err,
                        "\r\x1b[2K  {} {}m{:02}s {}",
                        self.step,
                        elapsed / 60,
                        elapsed % 60,
                        escape_line(&shown.replace(['\r', '\n'], " "))
                    );
                    let _ = err.flush();
                } else if self.last_print.elapsed() >= Duration::from_secs(15) {
                    write_line(
                        &mut err,
                        &format!("  {} {elapsed}s: {}", self.step, self.last_line),
                    );
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
        write_line(&mut err, &format!("sandbox: {message} ({elapsed:.0}s)"));
    }
}
