//! minicoder: a terminal-native autonomous coding agent for local Git repositories.
//!
//! The library holds every module so that integration tests reach them; `main.rs`
//! only parses the command line and dispatches to [`cli`].

pub mod agent;
pub mod cli;
pub mod headless;
pub mod ids;
pub mod model;
pub mod owner;
pub mod runtime;
pub mod sandbox;
pub mod state;
pub mod terminal_text;
pub mod tools;
pub mod trace;
pub mod tui;
pub mod verify;
pub mod workspace;
