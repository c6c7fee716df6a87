//! The interactive full-screen session: an [`app::App`] fed by one
//! event channel, drawn on request, with themes and keys as data.

pub mod app;
pub mod delivery;
pub mod diff;
pub mod draw;
pub mod keymap;
pub mod run_view;
pub mod session;
pub mod terminal;
pub mod text;
pub mod theme;
pub mod widgets;
