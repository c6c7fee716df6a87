//! Streamable HTTP on loopback. Three gates before a request reaches the
//! MCP service: the path (`/mcp`), a bearer capability (32 random bytes,
//! compared in constant time, written to a file only the owner can read),
//! and the `Origin` header (any present is refused: a browser page cannot
//! drive the sandbox). The `Host` header must name loopback too (rmcp's own
//! check), which stops DNS rebinding.

use std::convert::Infallible;
use std::io::Read;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::server::Server;

/// The endpoint's path.
pub(super) const PATH: &str = "/mcp";
/// Largest request body accepted.
const MAX_BODY: usize = 4 * 1024 * 1024;

/// A fresh capability: 32 bytes from the kernel, as hex. No fallback: a
/// guessable token would be worse than none.
fn capability() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Where the endpoint's address and token are written: `mcp-http.json` in
/// the state directory (mode 0700), the file itself 0600.
pub(super) fn token_file() -> anyhow::Result<PathBuf> {
    let state = crate::state::StateDir::from_env()?;
    state.ensure()?;
    Ok(state.root().join("mcp-http.json"))
}

/// Whether `header` is `Bearer TOKEN` with our token, in constant time.
pub(super) fn authorized(header: Option<&[u8]>, token: &str) -> bool {
    let Some(value) = header else { return false };
    let Some(given) = value.strip_prefix(b"Bearer ") else {
        return false;
    };
    let want = token.as_bytes();
    if given.len() != want.len() {
        return false;
    }
    given
        .iter()
        .zip(want)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b))
        == 0
}

fn refusal(status: StatusCode, why: &'static str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from_static(why.as_bytes())).boxed());
    *response.status_mut() = status;
    if status == StatusCode::UNAUTHORIZED
        && let Ok(value) = hyper::header::HeaderValue::from_str("Bearer")
    {
        response
            .headers_mut()
            .insert(hyper::header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Serves until `stop` is cancelled. Prints the address, and where the
/// token is, on stderr.
pub(super) async fn serve(
    server: Server,
    port: u16,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let token = capability()?;
    let url = format!("http://{addr}{PATH}");
    let file = token_file()?;
    write_token(&file, &url, &token)?;
    err!(
        "minicoder mcp: listening on {url}; send `Authorization: Bearer TOKEN` with the token in {}",
        file.display()
    );
    let config = StreamableHttpServerConfig::default()
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY)
        .with_cancellation_token(stop.child_token());
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        config,
    );
    let token = std::sync::Arc::new(token);
    loop {
        let (stream, _) = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(_) => continue,
            },
        };
        let service = service.clone();
        let token = token.clone();
        let gate = hyper::service::service_fn(move |req: Request<Incoming>| {
            let service = service.clone();
            let token = token.clone();
            async move {
                if req.uri().path() != PATH {
                    return Ok::<_, Infallible>(refusal(StatusCode::NOT_FOUND, "not found"));
                }
                let header = req
                    .headers()
                    .get(hyper::header::AUTHORIZATION)
                    .map(|v| v.as_bytes());
                if !authorized(header, &token) {
                    return Ok(refusal(
                        StatusCode::UNAUTHORIZED,
                        "a valid bearer token is required",
                    ));
                }
                Ok(service.handle(req).await)
            }
        });
        let stop = stop.clone();
        tokio::spawn(async move {
            let connection = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), gate)
                .into_owned();
            tokio::select! {
                _ = connection => {}
                () = stop.cancelled() => {}
            }
        });
    }
    let _ = std::fs::remove_file(&file);
    Ok(())
}

fn write_token(file: &Path, url: &str, token: &str) -> std::io::Result<()> {
    let body = serde_json::json!({ "url": url, "token": token, "pid": std::process::id() });
    crate::state::write_private_file(file, body.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_passes() {
        let token = "ab".repeat(32);
        let good = format!("Bearer {token}");
        assert!(authorized(Some(good.as_bytes()), &token));
        assert!(!authorized(None, &token));
        assert!(!authorized(Some(token.as_bytes()), &token));
        assert!(!authorized(
            Some(format!("Bearer {token}x").as_bytes()),
            &token
        ));
        let mut wrong = good.into_bytes();
        let last = wrong.len() - 1;
        wrong[last] = b'c';
        assert!(!authorized(Some(&wrong), &token));
        assert!(!authorized(Some(b"Bearer "), &token));
    }

    #[test]
    fn tokens_are_long_and_fresh() {
        let a = capability().unwrap();
        let b = capability().unwrap();
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
