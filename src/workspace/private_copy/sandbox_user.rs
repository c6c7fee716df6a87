//! The unprivileged user that sandboxed commands run as and that owns the
//! private workspace.

/// The unprivileged uid and gid commands run as, and that owns the workspace.
pub const SANDBOX_UID: u32 = 10001;
pub const SANDBOX_GID: u32 = 10001;

/// The owner of the private workspace (the sandbox user) when we can give
/// files away, i.e. when running as root.
pub(crate) fn workspace_owner() -> Option<(u32, u32)> {
    rustix::process::geteuid()
        .is_root()
        .then_some((SANDBOX_UID, SANDBOX_GID))
}
