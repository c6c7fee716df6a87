//! The verifier and the bootstrap phase.
//!
//! - [`config`]: the source repository's `.minicoder.json` and `--check` overrides.
//! - [`project`]: that configuration and `.minicoder/` as a whole: read safely,
//!   hashed, honoured as far as the person trusts it.
//! - [`trust`]: the repositories the person trusts, at which hash.
//! - [`detect`]: checks inferred from the project files when none are configured.
//! - [`zero_tests`]: recognising a test run that ran no test.
//! - [`matrix`]: [`Verifier`], which runs every check in a fresh container and
//!   binds the verdict to the workspace fingerprint.
//! - [`bootstrap`]: the commands that prepare the workspace before the agent starts.
//! - [`preflight`]: every check's program must be in the image before any model turn.

pub mod bootstrap;
pub mod check_spec;
pub mod config;
pub(crate) mod dependencies;
pub mod deps;
pub(crate) mod detect;
mod detect_python;
mod error;
pub mod first_error;
pub mod go_imports;
pub mod make_outputs;
pub mod matrix;
mod names;
mod outcome;
pub(crate) mod preflight;
pub mod project;
mod shell_words;
pub mod trust;
pub mod zero_tests;

pub use bootstrap::{
    BOOTSTRAP_NETWORK_ENV, BootstrapOutput, BootstrapResult, BootstrapSettings,
    DEFAULT_BOOTSTRAP_TIMEOUT, bootstrap_network, run_bootstrap,
};
pub use config::{
    CONFIG_FILE, CheckSpec, MAX_CHECKS, ProjectConfig, load_config, resolve_checks, secret_paths,
};
pub use detect::detect_checks;
pub use error::VerifyError;
pub use matrix::{
    DEFAULT_CHECK_TIMEOUT, VerificationResult, Verifier, VerifierSettings, environment_error,
};
pub use names::valid_check_name;
pub use project::{Honoured, ProjectFiles, Trust, load_project};
pub use trust::{TrustEntry, TrustStore};
pub use zero_tests::zero_tests;
