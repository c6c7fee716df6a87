//! Connecting to the Docker engine.

use std::time::Duration;

use bollard::Docker;

use super::SandboxError;

/// How long to wait for the engine to answer a ping before calling it absent.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to the local engine (`DOCKER_HOST` or the default socket),
/// negotiates the API version, and proves it answers.
pub async fn connect() -> Result<Docker, SandboxError> {
    let unavailable = |detail: String| SandboxError::DockerUnavailable { detail };
    let docker = Docker::connect_with_defaults()
        .map_err(|e| unavailable(format!("cannot set up a client: {e}")))?;
    let docker = tokio::time::timeout(PING_TIMEOUT, docker.negotiate_version())
        .await
        .map_err(|_| unavailable(format!("no answer within {}s", PING_TIMEOUT.as_secs())))?
        .map_err(|e| unavailable(describe(&e)))?;
    tokio::time::timeout(PING_TIMEOUT, docker.ping())
        .await
        .map_err(|_| unavailable(format!("no answer within {}s", PING_TIMEOUT.as_secs())))?
        .map_err(|e| unavailable(describe(&e)))?;
    Ok(docker)
}

fn describe(e: &bollard::errors::Error) -> String {
    let host =
        std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into());
    format!("{host}: {e}")
}
