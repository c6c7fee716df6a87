//! Connecting to the Docker engine.

use std::time::Duration;

use bollard::Docker;

use super::SandboxError;

/// How long to wait for the engine to answer a ping before calling it absent.
const PING_TIMEOUT: Duration = Duration::from_secs(5);

/// Connects to the engine Docker's own client would (`DOCKER_HOST`, else
/// the default socket; over TLS with `DOCKER_TLS_VERIFY` set, the client's
/// `ca.pem`, `cert.pem` and `key.pem` read from `DOCKER_CERT_PATH`),
/// negotiates the API version, and proves it answers. An engine chosen
/// with `--engine` ([`super::engines`]) comes before all of that.
pub async fn connect() -> Result<Docker, SandboxError> {
    let unavailable = |detail: String| SandboxError::DockerUnavailable { detail };
    let docker = match super::engines::selected() {
        Some(engine) => client_of(engine),
        None => Docker::connect_with_defaults(),
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

/// A client of an engine of the configuration.
fn client_of(engine: &super::engines::Engine) -> Result<Docker, bollard::errors::Error> {
    const TIMEOUT_SECONDS: u64 = 120;
    let address = engine
        .host
        .trim_start_matches("tcp://")
        .trim_start_matches("https://");
    match (&engine.cert_path, engine.tls) {
        (Some(certs), true) => Docker::connect_with_ssl(
            &format!("https://{address}"),
            &certs.join("key.pem"),
            &certs.join("cert.pem"),
            &certs.join("ca.pem"),
            TIMEOUT_SECONDS,
            bollard::API_DEFAULT_VERSION,
        ),
        _ if engine.host.starts_with("unix://") => {
            Docker::connect_with_unix(&engine.host, TIMEOUT_SECONDS, bollard::API_DEFAULT_VERSION)
        }
        _ => Docker::connect_with_http(
            &format!("http://{address}"),
            TIMEOUT_SECONDS,
            bollard::API_DEFAULT_VERSION,
        ),
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
    let (host, tls) = match super::engines::selected() {
        Some(engine) => (format!("{}{}", named(), engine.host), engine.tls),
        None => (
            std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".into()),
            std::env::var_os("DOCKER_TLS_VERIFY").is_some(),
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
