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
//! protocol/    RunEvent · Command · RunReport — depends on nothing else in the crate
//!                  │                                                  │
//! runtime/     the driver: sets a run up, performs effects, races cancel and deadline
//!                  │ Input ▲ Effect
//! agent/       the reducer over explicit phases: every decision, no IO
//!                  │
//! model/       OpenAI-compatible adapter, provider chain, retries, scripted source
//! tools/       the ten tools, their schemas and result caps
//! sandbox/     Docker (bollard): image, command containers, limits, probe, gc
//! delivery/    apply and undo: receipt checks, conflicts, atomic writes, journal
//! workspace/   private copy, path confinement, fingerprints, checkpoints (git2)
//! verify/      frozen checks, the verification matrix, zero-test detection, bootstrap
//! trace/       artifacts: manifest, state, hash-chained events, report, receipt, redaction
//! state.rs     the state directory      owner.rs  which process owns what      ids.rs  names
//! runs.rs      finding runs: every run, one by id, prefix or `last`
//! ```
//!
//! Arrows point from a module to what it uses: nothing below `runtime` knows about
//! the runtime, and nothing at all is used by `protocol`.

// Tests may unwrap and expect: a panic there is a failed test, not a crash.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod agent;
pub mod cli;
pub mod delivery;
pub mod headless;
pub mod ids;
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
