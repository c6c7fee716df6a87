//! The checkpoint store: commits of the workspace in a private bare
//! repository outside it, the trees they are built from, the journal of what
//! changed since the last one, and the patch a run exports.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `checkpoint.rs` | checkpoints: taking, restoring and diffing commits of the workspace |
//! | `checkpoint_export.rs` | the exported patch and its list of changed files, from one tree diff |
//! | `checkpoint_budget.rs` | what the checkpoints after the baseline may hold on disk |
//! | `tree.rs` | git tree objects built from a sorted entry list; the commit signature |
//! | `change_journal.rs` | which workspace paths may have changed since the last checkpoint |

pub(super) mod change_journal;
pub(super) mod checkpoint;
pub(super) mod tree;
