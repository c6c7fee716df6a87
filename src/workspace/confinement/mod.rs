//! What may be touched, and how: host-side access confined to the workspace
//! by the kernel, paths as git accepts them, the configuration a run must
//! not change unseen, and the credential files never copied.
//!
//! | file | what it holds |
//! | --- | --- |
//! | `confine.rs` | host-side file access confined to the workspace by the kernel |
//! | `git_path.rs` | which paths git accepts, and how git quotes and unquotes a path |
//! | `protected.rs` | the repository's own minicoder configuration inside a workspace |
//! | `secrets.rs` | credential files kept out of the workspace |

pub(super) mod confine;
pub(super) mod git_path;
pub(crate) mod protected;
pub(super) mod secrets;
