//! The private copy a run works on: made from the source, bounded, prepared
//! ahead of the next run, rebuilt for `resume`, owned by the sandbox user and
//! removed without waiting.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `copy.rs` | the private copy of a source repository (credential files left out) |
//! | `pack.rs` | git packs of many objects written in one pass, stored uncompressed |
//! | `prepared.rs` | a copy of a repository prepared ahead of its next run |
//! | `recycle.rs` | an ended run's workspace made into its repository's next prepared copy |
//! | `limits.rs` | what a workspace may grow to, and how big it is now |
//! | `rebuild.rs` | a workspace rebuilt from a run's checkpoint store, for `resume` |
//! | `source_state.rs` | the source repository at the start of a run: HEAD and what differs |
//! | `sandbox_user.rs` | the unprivileged user that owns the workspace |
//! | `remove.rs` | removing a directory tree without waiting for it |

pub(super) mod copy;
pub mod limits;
pub(super) mod pack;
pub(crate) mod prepared;
pub(super) mod rebuild;
pub(crate) mod recycle;
pub(super) mod remove;
pub(super) mod sandbox_user;
pub(super) mod source_state;
