//! The Docker sandbox: every command of the agent, the bootstrap and the
//! verifier runs here, never on the host.
//!
//! - [`docker`]: connecting to the engine, with one clear error when it is not there.
//! - [`engines`]: the engines named in `config.toml`, one chosen with `--engine`.
//! - [`image`]: building the sandbox image (Dockerfile, or debootstrap offline).
//! - [`spec`]: the isolation limits every command container gets.
//! - [`container`]: [`CommandContainer`], one long-lived container per run whose
//!   PID 1 is a supervisor that runs commands and leaves nothing behind.
//! - [`output`]: capped capture of a command's streams with the full output spooled.
//! - [`probe`]: `minicoder sandbox probe`, proving the boundaries.
//! - [`gc`]: removing what dead runs left.
//! - [`caches`]: per-project dependency-cache volumes.
//! - [`derived`]: project images (`"packages"`, `.minicoder/Dockerfile`).

mod build;
pub mod caches;
pub mod container;
pub mod derived;
pub mod docker;
mod engine_tls;
pub mod engines;
pub mod error;
pub mod gc;
pub mod image;
pub mod output;
pub mod probe;
pub(crate) mod remote_files;
pub mod spec;

pub use container::{CommandContainer, CommandOutcome, CommandRequest};
pub use docker::connect;
pub use error::SandboxError;
pub use output::{CapturedStream, StreamCapture, StreamView};
pub use spec::ContainerSpec;

pub use crate::workspace::{SANDBOX_GID, SANDBOX_UID};

/// Label keys carried by every container and volume minicoder creates.
pub mod labels {
    /// Present on everything minicoder owns.
    pub const MANAGED: &str = "org.minicoder.managed";
    /// The run the resource belongs to.
    pub const RUN: &str = "org.minicoder.run";
    /// `pid:start_ticks` of the owning process (see [`crate::owner`]).
    pub const OWNER: &str = "org.minicoder.owner";
    /// What the container is for: `command`, `verify`, `bootstrap`, `probe`.
    pub(crate) const ROLE: &str = "org.minicoder.role";
    /// On the image: hash of the sandbox definition it was built from.
    pub(crate) const DEFINITION: &str = "org.minicoder.definition";
    /// On a project image: hash of what it was derived from.
    pub(crate) const DERIVED: &str = "org.minicoder.derived";
    /// On a cache volume: the repository it caches for. (Cache volumes carry
    /// no [`MANAGED`] label: they outlive runs.)
    pub(crate) const CACHE: &str = "org.minicoder.cache";
    /// The state directory a resource belongs to (`gc` of another state
    /// directory leaves it alone).
    pub(crate) const STATE: &str = "org.minicoder.state";
}
