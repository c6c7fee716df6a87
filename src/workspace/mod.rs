//! The private workspace: copy, path confinement, fingerprint, checkpoints.
