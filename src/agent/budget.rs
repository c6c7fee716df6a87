//! How many tokens a request takes: four characters a token, calibrated
//! against what the provider reports. When a provider counts more tokens
//! for a request than the estimate did (code and non-English text often
//! take fewer characters a token), every later estimate is scaled up by the
//! same ratio; a provider that counts fewer never scales it down, so the
//! estimate stays an upper bound and no request exceeds the budget.

use serde::{Deserialize, Serialize};

use crate::model::types::estimate_tokens;

/// The largest factor a report can scale estimates by: a gateway that
/// reports nonsense must not stop the run.
const MAX_SCALE: u64 = 3;

/// The latest comparison of an estimate with a provider's count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Calibration {
    /// Prompt tokens the provider reported for the request.
    reported: u64,
    /// Tokens the plain estimate gave for it.
    estimated: u64,
}

impl Calibration {
    /// Records the provider's count for a request estimated at `estimated`.
    pub fn observe(&mut self, estimated: u64, reported: u64) {
        if estimated > 0 && reported > 0 {
            self.reported = reported.min(estimated.saturating_mul(MAX_SCALE));
            self.estimated = estimated;
        }
    }

    /// Tokens of `chars` characters of request.
    pub fn tokens(&self, chars: usize) -> u64 {
        self.scale(estimate_tokens(chars))
    }

    /// A plain estimate, scaled.
    pub(crate) fn scale(&self, tokens: u64) -> u64 {
        if self.reported <= self.estimated {
            return tokens;
        }
        let scaled = u128::from(tokens) * u128::from(self.reported);
        u64::try_from(scaled.div_ceil(u128::from(self.estimated))).unwrap_or(u64::MAX)
    }

    /// The most characters that stay within `tokens`.
    pub(crate) fn chars_within(&self, tokens: u64) -> usize {
        let plain = if self.reported <= self.estimated {
            tokens
        } else {
            u64::try_from(
                u128::from(tokens) * u128::from(self.estimated) / u128::from(self.reported),
            )
            .unwrap_or(0)
        };
        usize::try_from(plain.saturating_mul(4)).unwrap_or(usize::MAX)
    }

    /// The factor applied, in percent (100 when none).
    #[cfg(test)]
    pub(crate) fn percent(&self) -> u64 {
        if self.reported <= self.estimated {
            100
        } else {
            self.reported * 100 / self.estimated
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_higher_count_scales_estimates_up_and_a_lower_one_never_down() {
        let mut c = Calibration::default();
        assert_eq!(c.tokens(4000), 1000);
        c.observe(1000, 1500);
        assert_eq!(c.tokens(4000), 1500);
        assert_eq!(c.percent(), 150);
        assert!(c.tokens(c.chars_within(900)) <= 900);
        c.observe(1000, 400);
        assert_eq!(c.tokens(4000), 1000, "never below the plain estimate");
        c.observe(1000, 1_000_000);
        assert_eq!(c.tokens(4000), 3000, "at most three times");
        c.observe(0, 10);
        assert_eq!(c.tokens(4000), 3000, "an empty estimate teaches nothing");
    }
}
