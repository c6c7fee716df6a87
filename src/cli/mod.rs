//! The command line.
use std::process::ExitCode;

pub fn main() -> ExitCode {
    ExitCode::from(2)
}
