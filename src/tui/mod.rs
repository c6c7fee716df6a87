//! The interactive full-screen session: an [`app::App`] fed by one
//! event channel, drawn on request, with themes and keys as data.
//!
//! | module      | what it is                                                          |
//! |-------------|---------------------------------------------------------------------|
//! | `run_view`  | what the run said, folded from its `RunEvent`s                      |
//! | `screen`    | what the session shows: the `Screen`, the popup stack, each pane's own state |
//! | `app`       | the transitions: an event or key changes the screen and leaves `Op`s |
//! | `widgets`   | one drawing per pane and modal, from the run's view and its own state |
//! | `draw`      | the frame: the layout, and each component drawn where it goes       |
//! | `session`   | the loop: events in, ops performed, frames drawn when something changed |
//! | `delivery`  | the applies, undos and run reads the session performs off the UI thread |
//! | `diff`      | the diff model, its pane and the review's choice of hunks           |
//! | `keymap`, `theme`, `text`, `terminal` | keys and colours as data, safe text, the terminal |

pub mod app;
pub mod delivery;
pub mod diff;
pub mod draw;
pub mod keymap;
pub mod run_view;
pub mod screen;
pub mod session;
pub mod terminal;
pub mod text;
pub mod theme;
pub mod widgets;
