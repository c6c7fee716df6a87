//! Connecting to the Docker engine.

use std::path::Path;
use std::time::Duration;

use bollard::Docker;

use super::SandboxError;
use super::engines::Engine;

/// How long to wait for the engine to answer a ping before calling it absent.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to the engine Docker's own client would (`DOCKER_HOST`, else
/// the default socket; over TLS with `DOCKER_TLS_VERIFY` set, the client's
/// `ca.pem`, `cert.pem` and `key.pem` read from `DOCKER_CERT_PATH`),
/// negotiates the API version, and proves it answers. An engine chosen
/// with `--engine` ([`super::engines`]) comes before all of that.
pub async fn connect() -> Result<Docker, SandboxError> {
    let unavailable = |detail: String| SandboxError::DockerUnavailable { detail };
    let docker = match engine_in_use() {
        Some(engine) => client_of(&engine),
        None => Docker::connect_with_defaults().map_err(|e| e.to_string()),
    }
    .map_err(|e| unavailable(format!("{}cannot set up a client: {e}", named())))?;
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

/// Whether the engine this process uses keeps each workspace on its own
/// side ([`super::remote_files`]) rather than bind-mounting this machine's.
/// `MINICODER_ENGINE_FILES` (`shared` or `remote`) overrides the engine's
/// own setting: an engine on this machine reached over TCP sees its files;
/// one on this machine whose paths are not this machine's (in a VM) does not.
pub(crate) fn files_are_remote() -> bool {
    match std::env::var("MINICODER_ENGINE_FILES").as_deref() {
        Ok("remote") => true,
        Ok("shared") => false,
        _ => engine_in_use().is_some_and(|e| e.files == super::engines::Files::Remote),
    }
}

/// How long a request may take before the client gives up on it.
const REQUEST_TIMEOUT_SECONDS: u64 = 120;

/// The engine over the network this process uses: the one `--engine`
/// chose, else the one `DOCKER_HOST` names when it is `tcp://` or
/// `https://` (`None`: the local socket, left to bollard's defaults).
fn engine_in_use() -> Option<Engine> {
    if let Some(engine) = super::engines::selected() {
        return Some(engine.clone());
    }
    engine_from_env()
}

/// `DOCKER_HOST` over the network as Docker's own client reads it: TLS when
/// `DOCKER_TLS_VERIFY` is set and not empty (or for `https://`), with
/// `DOCKER_CERT_PATH`'s (else `~/.docker`'s) certificates.
fn engine_from_env() -> Option<Engine> {
    let host = std::env::var("DOCKER_HOST").ok()?;
    if !(host.starts_with("tcp://") || host.starts_with("https://")) {
        return None;
    }
    let tls = std::env::var_os("DOCKER_TLS_VERIFY").is_some_and(|v| !v.is_empty())
        || host.starts_with("https://");
    let cert_path = std::env::var_os("DOCKER_CERT_PATH")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".docker")))
        .filter(|_| tls);
    let files = super::engines::Files::for_host(&host);
    Some(Engine {
        name: String::new(),
        host,
        tls,
        cert_path,
        capacity: super::engines::DEFAULT_CAPACITY,
        files,
    })
}

/// A client of `engine`: over TLS trusting its `ca.pem` alone, else plain.
fn client_of(engine: &Engine) -> Result<Docker, String> {
    let address = engine
        .host
        .trim_start_matches("tcp://")
        .trim_start_matches("https://")
        .trim_end_matches('/');
    match (&engine.cert_path, engine.tls) {
        (Some(certs), true) => super::engine_tls::client(address, certs, REQUEST_TIMEOUT_SECONDS),
        (None, true) => Err(
            "TLS needs the client's certificates: DOCKER_CERT_PATH is not set and there is no HOME"
                .into(),
        ),
        _ if engine.host.starts_with("unix://") => Docker::connect_with_unix(
            &engine.host,
            REQUEST_TIMEOUT_SECONDS,
            bollard::API_DEFAULT_VERSION,
        )
        .map_err(|e| e.to_string()),
        _ => Docker::connect_with_http(
            &format!("http://{address}"),
            REQUEST_TIMEOUT_SECONDS,
            bollard::API_DEFAULT_VERSION,
        )
        .map_err(|e| e.to_string()),
    }
}

/// A client of the engine `engine` of the configuration, once it has
/// answered a ping (within the ping's timeout): for a process that uses
/// several engines (a batch placing its runs), beside the one it selected.
pub(crate) async fn connect_to(engine: &Engine) -> Result<Docker, String> {
    let docker = client_of(engine)?;
    match tokio::time::timeout(PING_TIMEOUT, docker.ping()).await {
        Ok(Ok(_)) => Ok(docker),
        Ok(Err(e)) => Err(with_causes(&e)),
        Err(_) => Err(format!("no answer within {}s", PING_TIMEOUT.as_secs())),
    }
}

/// The engine this process uses, as a person would name it.
pub(crate) fn which() -> String {
    match super::engines::selected() {
        Some(engine) => format!("engine {} ({})", engine.name, engine.host),
        None => std::env::var("DOCKER_HOST")
            .map(|host| format!("the engine at {host}"))
            .unwrap_or_else(|_| "the local engine".into()),
    }
}

/// `engine NAME: ` when one of the configuration is in use.
fn named() -> String {
    super::engines::selected()
        .map(|e| format!("engine {}: ", e.name))
        .unwrap_or_default()
}

/// The engine asked and why it did not answer: the error with its causes
/// (a refused TLS handshake is three causes below "client error").
fn describe(e: &bollard::errors::Error) -> String {
    let (host, tls) = match engine_in_use() {
        Some(engine) => (format!("{}{}", named(), engine.host), engine.tls),
        None => (
            std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into()),
            false,
        ),
    };
    let tls = if tls { " over TLS" } else { "" };
    format!("{host}{tls}: {}", with_causes(e))
}

/// `e`, then each cause not already said by the one before, joined by `: `.
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut said = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !said.contains(&text) {
            said.push_str(": ");
            said.push_str(&text);
        }
        cause = c.source();
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl std::error::Error for Layer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            self.1.as_deref().map(|l| l as _)
        }
    }

    #[test]
    fn an_error_is_told_with_every_cause_once() {
        let e = Layer(
            "client error (SendRequest)",
            Some(Box::new(Layer(
                "SendRequest",
                Some(Box::new(Layer(
                    "received fatal alert: CertificateUnknown",
                    None,
                ))),
            ))),
        );
        assert_eq!(
            with_causes(&e),
            "client error (SendRequest): received fatal alert: CertificateUnknown"
        );
    }
}
