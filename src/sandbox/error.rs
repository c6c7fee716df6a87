use std::path::PathBuf;

/// What can go wrong in the sandbox. Every message says what happened and
/// what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(
        "Docker is not reachable ({detail}). Start the Docker daemon (or point DOCKER_HOST, or --engine, at one that runs) and try again."
    )]
    DockerUnavailable { detail: String },

    #[error("Docker refused the request to {action}: {source}")]
    Docker {
        action: String,
        #[source]
        source: bollard::errors::Error,
    },

    #[error(
        "the sandbox image {image} is missing; run `minicoder sandbox build` (or unset MINICODER_SANDBOX_IMAGE to use the built-in image)"
    )]
    ImageMissing { image: String },

    #[error("building the sandbox image failed: {0}")]
    ImageBuild(String),

    #[error("the command container's supervisor did not start: {0}")]
    SupervisorStart(String),

    #[error("the command container broke the supervisor protocol: {0}")]
    Protocol(String),

    #[error("the command container stopped unexpectedly: {0}")]
    ContainerLost(String),

    #[error("working directory {cwd:?} is not a directory inside the workspace")]
    BadCwd { cwd: String },

    #[error("the workspace {path} cannot be used: {reason}")]
    Workspace { path: PathBuf, reason: String },

    #[error("writing command output to {path}: {source}")]
    Spool {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl SandboxError {
    pub(crate) fn docker(action: impl Into<String>, source: bollard::errors::Error) -> Self {
        // A refused or vanished socket mid-run is still "Docker is not there".
        if is_connection_error(&source) {
            return SandboxError::DockerUnavailable {
                detail: source.to_string(),
            };
        }
        SandboxError::Docker {
            action: action.into(),
            source,
        }
    }
}

pub(crate) fn is_connection_error(e: &bollard::errors::Error) -> bool {
    use bollard::errors::Error as E;
    match e {
        E::IOError { .. } | E::HyperResponseError { .. } | E::SocketNotFoundError(_) => true,
        E::RequestTimeoutError => true,
        other => {
            let s = other.to_string();
            s.contains("Connection refused") || s.contains("No such file or directory")
        }
    }
}
