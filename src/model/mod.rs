//! Models: provider-neutral chat types, the OpenAI-compatible adapter, the
//! provider chain with retries and fallback, and the scripted action source.
//!
//! The runtime talks to any of them through [`ActionSource`].

mod assembly;
pub mod chain;
pub(crate) mod classify;
mod decode;
pub mod dialect;
pub mod env;
mod error;
pub mod external;
pub mod openai;
pub mod provider;
pub(crate) mod provider_kind;
pub(crate) mod provider_state;
pub mod retry;
pub mod scripted;
pub mod selection;
pub mod types;
mod wire;

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

pub use chain::ModelChain;
pub use env::Env;
pub use error::ModelError;
pub use scripted::{RequestLog, ScriptedSource};
pub use selection::ModelSelection;
use types::{ModelId, ModelReply, ModelRequest};

/// What happens while a request is in flight, for the event stream and the TUI.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelObservation {
    /// A piece of the reply's visible text as it streams in (never the
    /// provider's hidden reasoning).
    Delta(String),
    /// A transient failure; the same model is asked again after `delay`.
    Retry {
        model: ModelId,
        attempt: u32,
        reason: String,
        delay: Duration,
    },
    /// The model failed its retries; the chain moves on (and stays there).
    Fallback {
        from: ModelId,
        to: ModelId,
        reason: String,
    },
}

/// The boxed future an [`ActionSource`] returns.
pub(crate) type CompletionFuture<'a> =
    Pin<Box<dyn Future<Output = Result<ModelReply, ModelError>> + Send + 'a>>;

/// Where the agent's next action comes from: a real model chain or a script.
pub trait ActionSource: Send {
    /// Answers one request, reporting deltas, retries and fallbacks to `observe`.
    /// Never waits past `deadline`.
    fn complete<'a>(
        &'a mut self,
        req: &'a ModelRequest,
        deadline: Instant,
        observe: &'a mut (dyn FnMut(ModelObservation) + Send),
    ) -> CompletionFuture<'a>;

    /// The provider/model the next request goes to.
    fn current(&self) -> ModelId;

    /// The context ceiling in tokens; with fallback enabled, the smallest in the chain.
    fn context_limit(&self) -> u64;

    /// Checks, before a run spends anything on its workspace, that the model
    /// can be reached at all; `Err` says what is wrong and how to fix it.
    fn preflight(&self) -> PreflightFuture<'_> {
        Box::pin(async { Ok(()) })
    }
}

/// The result of [`ActionSource::preflight`].
pub(crate) type PreflightFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;
