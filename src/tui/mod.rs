//! The interactive session's groundwork: colour themes and the keymap, both as data.

pub mod diff;
pub mod keymap;
pub mod theme;
