//! Reading the workspace: fingerprints, the walk behind them, the stat cache
//! that makes them incremental, and what the ignore rules leave out.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `fingerprint.rs` | workspace fingerprints and the entries they digest |
//! | `walk.rs` | the stat phase of a scan: a walk by directory descriptor, shared by workers |
//! | `stat_cache.rs` | the stat cache that makes fingerprints and checkpoints incremental |
//! | `ignored.rs` | what is left out: the default excludes and the repository's ignore rules |

pub(super) mod fingerprint;
pub(super) mod ignored;
pub(crate) mod stat_cache;
pub(super) mod walk;
