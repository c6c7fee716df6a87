//! minicoder: a terminal-native autonomous coding agent for local Git repositories.
//!
//! The library holds every module so that integration tests reach them; `main.rs`
//! only parses the command line and dispatches to [`cli`].
//!
//! # Module map
//!
//! ```text
//! front ends   cli/ (one file per command)   tui/ (full-screen session)   headless.rs (JSON)
//!                  │ Command (approve, refuse, follow up, cancel)     ▲ RunEvent
//!                  ▼                                                  │
//! runtime/     the driver: sets a run up, performs effects, races cancel and deadline
//!                  │ Input ▲ Effect
//! agent/       the reducer over explicit phases: every decision, no IO
//! delivery/    apply and undo: receipt checks, conflicts, atomic writes, journal
//! tools/       the ten tools, their schemas and result caps
//! runs.rs      finding runs: every run, one by id, prefix or `last`
//! trace/       artifacts: manifest, state, hash-chained events, report, receipt, redaction
//! verify/      frozen checks, the verification matrix, zero-test detection, bootstrap
//! sandbox/     Docker (bollard): image, command containers, limits, probe, gc
//! workspace/   private copy, path confinement, fingerprints, checkpoints (git2)
//! model/       OpenAI-compatible adapter, provider chain, retries, scripted source
//! hooks/       the person's programs at fixed points of a run and of apply
//! mcp_client/  the person's MCP servers, their tools offered to the model
//! state.rs     the state directory      owner.rs  which process owns what      ids.rs  names
//! protocol/    RunEvent · Command · RunReport — depends on nothing else in the crate
//! ```
//!
//! # Layers
//!
//! Top first. A module uses only modules on the lines below its own; modules
//! on one line do not use each other. `protocol` uses nothing of the crate.
//! A test (`layering_tests`) holds every file of `src/` to this list, and
//! finds any files that use each other in a circle.
//!
//! ```text
//! cli  fuzz_targets
//! tui
//! runtime  headless
//! agent  delivery
//! tools  runs
//! trace
//! verify
//! sandbox
//! workspace  mcp_client
//! model  state  hooks
//! terminal_text  ids  owner
//! protocol
//! ```

// Tests may unwrap and expect: a panic there is a failed test, not a crash.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
pub mod cli;
pub mod delivery;
#[doc(hidden)]
pub mod fuzz_targets;
pub mod headless;
pub mod hooks;
pub mod ids;
pub mod mcp_client;
pub mod model;
pub mod owner;
pub mod protocol;
pub mod runs;
pub mod runtime;
pub mod sandbox;
pub mod state;
pub mod terminal_text;
pub mod tools;
pub mod trace;
pub mod tui;
pub mod verify;
pub mod workspace;

#[cfg(test)]
mod layering_tests;
