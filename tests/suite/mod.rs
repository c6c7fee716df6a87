//! The integration tests, one module a file: the real binary, Docker,
//! tmux and a scripted model, end to end.

mod apply;
mod apply_subset;
mod checkpoint_export;
mod cli;
mod context_run;
mod detect_ecosystems;
mod dialects;
mod dialects_run;
mod ecosystems;
mod evidence;
mod git_paths;
mod hooks;
mod host_bounds;
mod hostile_repo;
mod model;
mod model_chain;
mod model_errors;
mod prepared_copy;
mod printers;
mod project_setup;
mod project_trust;
mod resume;
mod run;
mod runs_show;
mod sandbox;
mod tools;
mod trace;
mod tui;
mod tui_delivery;
mod tui_hostile_text;
mod tui_session;
mod tui_tmux;
mod verify;
mod verify_config;
mod workspace;
