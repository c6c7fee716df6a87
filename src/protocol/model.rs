//! Which model answered and what it cost, as events and reports carry them.

use serde::{Deserialize, Serialize};

/// Token counts of one reply; `estimated` when the provider gave none.
/// `cached` is the part of `input` the provider served from its prompt
/// cache (0 when it reported none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached: u64,
    #[serde(default)]
    pub estimated: bool,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What a model's tokens cost, in US dollars a million tokens (the unit
/// providers publish). Cached input defaults to the input price.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input: Option<f64>,
}

impl Price {
    /// What `usage` costs, in millionths of a dollar (a dollar a million
    /// tokens is a millionth of a dollar a token).
    pub fn cost_micros(&self, usage: &Usage) -> u64 {
        let cached = usage.cached.min(usage.input);
        let fresh = usage.input - cached;
        let micros = fresh as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + usage.output as f64 * self.output;
        // A price is checked finite and non-negative where it is read.
        micros.round().clamp(0.0, u64::MAX as f64) as u64
    }
}

/// Prices by `PROVIDER:MODEL` or by model name alone.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceTable(pub std::collections::BTreeMap<String, Price>);

impl PriceTable {
    /// The price of `model`: its `PROVIDER:MODEL` entry, else its name's.
    pub fn get(&self, model: &ModelId) -> Option<&Price> {
        self.0
            .get(&format!("{}:{}", model.provider, model.model))
            .or_else(|| self.0.get(&model.model))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A budget of `dollars`, in millionths of a dollar: more than 0, at
/// least a millionth, at most a million dollars.
pub fn budget_micros(dollars: f64) -> Result<u64, String> {
    if !dollars.is_finite() || dollars <= 0.0 || dollars > 1_000_000.0 {
        return Err("must be more than 0 and at most 1000000 dollars".into());
    }
    let micros = (dollars * 1_000_000.0).round() as u64;
    if micros == 0 {
        return Err("must be at least a millionth of a dollar".into());
    }
    Ok(micros)
}

/// `950`, `12.3k`, `1.2M`.
pub fn format_tokens(n: u64) -> String {
    if n < 1000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{:.1}k", n as f64 / 1000.0)
    } else {
        format!("{:.1}M", n as f64 / 1_000_000.0)
    }
}

/// Millionths of a dollar as the person reads them: `$0.0123`, `$4.56`.
pub fn format_usd(micros: u64) -> String {
    let dollars = micros as f64 / 1_000_000.0;
    if micros == 0 {
        "$0".to_string()
    } else if dollars < 0.01 {
        format!("${dollars:.4}")
    } else if dollars < 100.0 {
        format!("${dollars:.2}")
    } else {
        format!("${dollars:.0}")
    }
}

/// Which provider and model answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelId {
    pub provider: String,
    pub model: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(provider: &str, model: &str) -> ModelId {
        ModelId {
            provider: provider.into(),
            model: model.into(),
        }
    }

    #[test]
    fn cached_input_is_priced_apart_and_never_more_than_the_input() {
        let price = Price {
            input: 2.0,
            output: 8.0,
            cached_input: Some(0.5),
        };
        let usage = Usage {
            input: 1_000,
            output: 100,
            cached: 600,
            estimated: false,
        };
        // 400 × 2 + 600 × 0.5 + 100 × 8 millionths.
        assert_eq!(price.cost_micros(&usage), 800 + 300 + 800);
        let odd = Usage {
            cached: 5_000,
            ..usage
        };
        assert_eq!(price.cost_micros(&odd), 500 + 800);
        let no_cache_price = Price {
            cached_input: None,
            ..price
        };
        assert_eq!(no_cache_price.cost_micros(&usage), 2_000 + 800);
    }

    #[test]
    fn a_price_is_found_by_provider_and_model_before_the_model_alone() {
        let mut table = PriceTable::default();
        let p = |input| Price {
            input,
            output: 1.0,
            cached_input: None,
        };
        table.0.insert("gpt-x".into(), p(1.0));
        table.0.insert("openai:gpt-x".into(), p(2.0));
        assert_eq!(
            table.get(&id("openai", "gpt-x")).map(|p| p.input),
            Some(2.0)
        );
        assert_eq!(
            table.get(&id("gateway", "gpt-x")).map(|p| p.input),
            Some(1.0)
        );
        assert!(table.get(&id("openai", "other")).is_none());
    }

    #[test]
    fn money_reads_at_a_sensible_precision() {
        assert_eq!(format_usd(0), "$0");
        assert_eq!(format_usd(1_234), "$0.0012");
        assert_eq!(format_usd(45_600), "$0.05");
        assert_eq!(format_usd(4_560_000), "$4.56");
        assert_eq!(format_usd(456_000_000), "$456");
    }

    #[test]
    fn a_usage_without_cached_tokens_reads_and_writes_as_before() {
        let old: Usage =
            serde_json::from_str(r#"{"input":3,"output":2,"estimated":false}"#).unwrap();
        assert_eq!(old.cached, 0);
        assert!(!serde_json::to_string(&old).unwrap().contains("cached"));
    }
}
