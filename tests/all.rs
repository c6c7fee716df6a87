//! The one integration-test binary: it links the crate once and runs every
//! test of `suite/` under one harness (`cargo test --test all NAME` picks
//! some). Shared helpers are in `support/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
mod support;
