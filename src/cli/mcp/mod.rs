//! `minicoder mcp`: minicoder's sandbox, tools and verifier as an MCP server
//! (stdio, or Streamable HTTP on loopback), for editors and other agents.
//!
//! | file | what it holds |
//! |---|---|
//! | `mod.rs` | the command: picks the transport, closes every workspace at the end |
//! | `catalog.rs` | the tools: input and output schemas, annotations |
//! | `server.rs` | the MCP handler: each call performed |
//! | `workspace.rs` | an open workspace: a run driven by the client's calls |
//! | `http.rs` | the HTTP endpoint: path, bearer capability, Origin refusal |
//!
//! A workspace is a minicoder run whose actions come from the client instead
//! of a model, so every guarantee of a run holds for it: the repository is
//! never changed, commands run in the sandbox with its limits, results are
//! bounded and redacted, every call is an event in the hash chain, the
//! verifier is the run's own, and the patch leaves with a signed receipt.
//! When the server stops (end of input, Ctrl-C, SIGTERM) every workspace is
//! closed: no command, container or workspace is left behind.

mod catalog;
mod http;
mod server;
mod workspace;

use std::process::ExitCode;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use server::Server;

/// Serves until the client goes away or a signal arrives.
pub async fn run(http: bool, port: u16) -> anyhow::Result<ExitCode> {
    let server = Server::default();
    let outcome = if http {
        let stop = CancellationToken::new();
        let on_signal = stop.clone();
        tokio::spawn(async move {
            super::shutdown_signal().await;
            on_signal.cancel();
        });
        http::serve(server.clone(), port, stop).await
    } else {
        serve_stdio(server.clone()).await
    };
    server.workspaces.close_all().await;
    outcome.map(|()| ExitCode::SUCCESS)
}

async fn serve_stdio(server: Server) -> anyhow::Result<()> {
    let running = server.serve(rmcp::transport::stdio()).await?;
    let stop = running.cancellation_token();
    tokio::select! {
        ended = running.waiting() => { ended?; }
        () = super::shutdown_signal() => { stop.cancel(); }
    }
    Ok(())
}
