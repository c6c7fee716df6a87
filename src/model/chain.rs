//! The provider chain: retries with backoff on one model, then fallback to
//! the next available one, which stays selected for later turns.

use std::time::{Duration, Instant};

use super::env::Env;
use super::error::ModelError;
use super::openai::{AttemptError, OpenAiAdapter, http_client};
use super::provider::ProviderEndpoint;
use super::retry::RetryPolicy;
use super::selection::{ModelSelection, resolve_providers};
use super::types::{ModelId, ModelReply, ModelRequest};
use super::{ActionSource, CompletionFuture, ModelObservation};

/// How long the host name of an endpoint may take to resolve before a run.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether the host name of `endpoint`'s base URL resolves (an IP address
/// always does): a typo in the URL or a machine without DNS is found before
/// the run copies anything, not at its first model turn.
async fn resolves(endpoint: &ProviderEndpoint) -> Result<(), String> {
    let variable = endpoint.kind.base_url_var();
    let url = url::Url::parse(&endpoint.base_url).map_err(|e| {
        format!(
            "{variable}={:?} is not a valid URL ({e})",
            endpoint.base_url
        )
    })?;
    let Some(host) = url.host() else {
        return Err(format!("{variable}={:?} names no host", endpoint.base_url));
    };
    let name = match host {
        url::Host::Domain(name) => name.to_string(),
        url::Host::Ipv4(_) | url::Host::Ipv6(_) => return Ok(()),
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let failure = |why: String| {
        format!(
            "the model {}:{} cannot be reached: its host {name} (from {variable}) {why}; check \
             the URL and this machine's network and DNS",
            endpoint.id.provider, endpoint.id.model
        )
    };
    match tokio::time::timeout(
        RESOLVE_TIMEOUT,
        tokio::net::lookup_host((name.as_str(), port)),
    )
    .await
    {
        Ok(Ok(mut addresses)) => match addresses.next() {
            Some(_) => Ok(()),
            None => Err(failure("has no address".into())),
        },
        Ok(Err(e)) => Err(failure(format!("does not resolve ({e})"))),
        Err(_) => Err(failure(format!(
            "did not resolve within {} s",
            RESOLVE_TIMEOUT.as_secs()
        ))),
    }
}

/// Default per-request timeout (`MINICODER_MODEL_TIMEOUT_MS`). Replies are
/// streamed unless `MINICODER_MODEL_STREAMING=off`.
pub(crate) const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(120_000);

/// The models a run may use, in order, with retry and fallback rules.
#[derive(Debug, Clone)]
pub struct ModelChain {
    adapters: Vec<OpenAiAdapter>,
    active: usize,
    fallback: bool,
    retry: RetryPolicy,
    skipped: Vec<(ModelId, String)>,
}

impl ModelChain {
    /// Builds the chain the environment and the command line describe.
    pub fn from_env(env: &Env, selection: &ModelSelection) -> Result<Self, ModelError> {
        let resolved = resolve_providers(env, selection)?;
        let retry = RetryPolicy::from_env(env).map_err(ModelError::Config)?;
        let timeout_ms = env
            .u64_or(
                "MINICODER_MODEL_TIMEOUT_MS",
                DEFAULT_REQUEST_TIMEOUT.as_millis() as u64,
            )
            .map_err(ModelError::Config)?;
        if timeout_ms == 0 {
            return Err(ModelError::Config(
                "MINICODER_MODEL_TIMEOUT_MS must be a positive number of milliseconds".into(),
            ));
        }
        let streaming = match env.get("MINICODER_MODEL_STREAMING") {
            None => true,
            Some(v)
                if ["on", "true", "1", "yes"]
                    .iter()
                    .any(|t| v.eq_ignore_ascii_case(t)) =>
            {
                true
            }
            Some(v)
                if ["off", "false", "0", "no"]
                    .iter()
                    .any(|t| v.eq_ignore_ascii_case(t)) =>
            {
                false
            }
            Some(v) => {
                return Err(ModelError::Config(format!(
                    "MINICODER_MODEL_STREAMING={v:?} is not understood; set it to on or off"
                )));
            }
        };
        let mut chain = Self::from_endpoints(
            resolved.endpoints,
            resolved.fallback,
            retry,
            Duration::from_millis(timeout_ms),
        )?
        .with_streaming(streaming);
        chain.skipped = resolved.skipped;
        Ok(chain)
    }

    /// A chain over explicit endpoints (tests, embedders).
    pub(crate) fn from_endpoints(
        endpoints: Vec<ProviderEndpoint>,
        fallback: bool,
        retry: RetryPolicy,
        request_timeout: Duration,
    ) -> Result<Self, ModelError> {
        if endpoints.is_empty() {
            return Err(ModelError::Unavailable { tried: Vec::new() });
        }
        let http = http_client().map_err(ModelError::Config)?;
        Ok(Self {
            adapters: endpoints
                .into_iter()
                .map(|e| OpenAiAdapter::new(http.clone(), e, request_timeout))
                .collect(),
            active: 0,
            fallback,
            retry,
            skipped: Vec::new(),
        })
    }

    /// Streamed replies (the default) or plain JSON ones.
    pub fn with_streaming(mut self, streaming: bool) -> Self {
        self.adapters = self
            .adapters
            .into_iter()
            .map(|a| a.with_streaming(streaming))
            .collect();
        self
    }

    /// Every model of the chain, in order (for the run manifest).
    pub fn models(&self) -> Vec<ModelId> {
        self.adapters
            .iter()
            .map(|a| a.endpoint().id.clone())
            .collect()
    }

    pub fn fallback_enabled(&self) -> bool {
        self.fallback
    }

    /// Providers left out of the chain and why (a key or endpoint missing).
    pub fn skipped(&self) -> &[(ModelId, String)] {
        &self.skipped
    }

    async fn run(
        &mut self,
        req: &ModelRequest,
        deadline: Instant,
        observe: &mut (dyn FnMut(ModelObservation) + Send),
    ) -> Result<ModelReply, ModelError> {
        let mut tried = Vec::new();
        loop {
            let adapter = &self.adapters[self.active];
            let id = adapter.endpoint().id.clone();
            let reason = match self.with_retries(adapter, req, deadline, observe).await {
                Ok(reply) => return Ok(reply),
                Err(Failure::Fatal(error)) => return Err(error),
                Err(Failure::Exhausted(reason)) => reason,
            };
            if !self.can_fall_back() {
                tried.push((id, reason));
                return Err(ModelError::Unavailable { tried });
            }
            let next = self.active + 1;
            let to = self.adapters[next].endpoint().id.clone();
            observe(ModelObservation::Fallback {
                from: id.clone(),
                to,
                reason: reason.clone(),
            });
            tried.push((id, reason));
            self.active = next;
        }
    }

    fn can_fall_back(&self) -> bool {
        self.fallback && self.active + 1 < self.adapters.len()
    }

    async fn with_retries(
        &self,
        adapter: &OpenAiAdapter,
        req: &ModelRequest,
        deadline: Instant,
        observe: &mut (dyn FnMut(ModelObservation) + Send),
    ) -> Result<ModelReply, Failure> {
        let id = &adapter.endpoint().id;
        let mut retry = 0;
        loop {
            let (reason, retry_after) = match adapter.complete(req, deadline, observe).await {
                Ok(reply) => return Ok(reply),
                Err(AttemptError::Deadline) => {
                    return Err(Failure::Fatal(ModelError::DeadlineExceeded));
                }
                Err(AttemptError::Auth(detail)) => {
                    return Err(Failure::Fatal(ModelError::Auth {
                        model: id.clone(),
                        detail,
                    }));
                }
                Err(AttemptError::Rejected { status, detail }) => {
                    return Err(Failure::Fatal(ModelError::Rejected {
                        model: id.clone(),
                        status,
                        detail,
                    }));
                }
                Err(AttemptError::Unavailable(reason)) => {
                    return Err(Failure::Exhausted(reason));
                }
                Err(AttemptError::Transient {
                    reason,
                    retry_after,
                }) => (reason, retry_after),
            };
            if retry >= self.retry.retries {
                return Err(Failure::Exhausted(format!(
                    "{reason} (after {} attempts)",
                    retry + 1
                )));
            }
            retry += 1;
            let delay = self.retry.delay(retry, retry_after);
            if Instant::now() + delay >= deadline {
                // Waiting would outlive the run: another provider may still
                // answer in time, else the run's budget is spent.
                if self.can_fall_back() {
                    return Err(Failure::Exhausted(format!(
                        "{reason} (the {} ms wait before a retry would pass the run's deadline)",
                        delay.as_millis()
                    )));
                }
                return Err(Failure::Fatal(ModelError::DeadlineExceeded));
            }
            observe(ModelObservation::Retry {
                model: id.clone(),
                attempt: retry,
                reason,
                delay,
            });
            tokio::time::sleep(delay).await;
        }
    }
}

enum Failure {
    /// Stop the run's request here (auth, rejected request, deadline).
    Fatal(ModelError),
    /// Retries used up on a transient failure: the chain may fall back.
    Exhausted(String),
}

impl ActionSource for ModelChain {
    fn complete<'a>(
        &'a mut self,
        req: &'a ModelRequest,
        deadline: Instant,
        observe: &'a mut (dyn FnMut(ModelObservation) + Send),
    ) -> CompletionFuture<'a> {
        Box::pin(self.run(req, deadline, observe))
    }

    fn current(&self) -> ModelId {
        self.adapters[self.active].endpoint().id.clone()
    }

    fn preflight(&self) -> super::PreflightFuture<'_> {
        Box::pin(async move {
            let mut problems = Vec::new();
            for adapter in &self.adapters {
                match resolves(adapter.endpoint()).await {
                    Ok(()) => return Ok(()),
                    Err(e) => problems.push(e),
                }
            }
            Err(problems.join("; "))
        })
    }

    fn context_limit(&self) -> u64 {
        let active = self.adapters[self.active].endpoint().context_limit;
        if !self.fallback {
            return active;
        }
        // The whole chain, so the budget does not change when a fallback happens.
        self.adapters
            .iter()
            .map(|a| a.endpoint().context_limit)
            .min()
            .unwrap_or(active)
    }
}
