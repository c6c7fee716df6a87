//! Retry timing: exponential backoff and the server's `Retry-After`.

use std::time::{Duration, SystemTime};

use super::env::Env;

/// The longest `Retry-After` that is honoured; longer requests are cut to this.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How transient failures are retried on one model before the chain moves on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// The first backoff; each further retry doubles it.
    pub base: Duration,
    /// Retries after the first attempt (so `retries + 1` attempts in all).
    pub retries: u32,
    /// The cap on a server's `Retry-After`.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(1000),
            retries: 2,
            max_retry_after: MAX_RETRY_AFTER,
        }
    }
}

impl RetryPolicy {
    /// Reads `MINICODER_RETRY_BASE_MS` (default 1000).
    pub fn from_env(env: &Env) -> Result<Self, String> {
        let base_ms = env.u64_or("MINICODER_RETRY_BASE_MS", 1000)?;
        Ok(Self {
            base: Duration::from_millis(base_ms),
            ..Self::default()
        })
    }

    /// The wait before retry number `retry` (1 for the first retry): the
    /// server's `Retry-After` when it gave one (capped), else `base * 2^(retry-1)`.
    pub fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(wait) => wait.min(self.max_retry_after),
            None => {
                let factor = 1u32 << retry.saturating_sub(1).min(16);
                self.base.saturating_mul(factor)
            }
        }
    }
}

/// Parses a `Retry-After` value: delay-seconds or an HTTP date (a date in the
/// past means "now").
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    if let Ok(seconds) = value.parse::<f64>()
        && seconds.is_finite()
        && seconds >= 0.0
    {
        return Some(Duration::from_secs_f64(seconds.min(86_400.0)));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_retry_after_is_capped() {
        let policy = RetryPolicy {
            base: Duration::from_millis(10),
            ..RetryPolicy::default()
        };
        assert_eq!(policy.delay(1, None), Duration::from_millis(10));
        assert_eq!(policy.delay(2, None), Duration::from_millis(20));
        assert_eq!(policy.delay(3, None), Duration::from_millis(40));
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(600))),
            MAX_RETRY_AFTER
        );
    }

    #[test]
    fn retry_after_in_seconds_or_as_an_http_date() {
        let now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").expect("date");
        assert_eq!(parse_retry_after("7", now), Some(Duration::from_secs(7)));
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon", now), None);
    }

    #[test]
    fn base_comes_from_the_environment() {
        let env = Env::from_pairs([("MINICODER_RETRY_BASE_MS", "10")]);
        let policy = RetryPolicy::from_env(&env).expect("policy");
        assert_eq!(policy.base, Duration::from_millis(10));
        assert_eq!(policy.retries, 2);
        assert!(
            RetryPolicy::from_env(&Env::from_pairs([("MINICODER_RETRY_BASE_MS", "fast")])).is_err()
        );
    }
}
