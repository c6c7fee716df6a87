//! The panes and modals, one module each.

pub mod approval;
pub mod chrome;
pub mod delivery;
pub mod matrix;
pub mod overlay;
pub mod plan;
pub mod review;
pub mod runs;
pub mod stream;
