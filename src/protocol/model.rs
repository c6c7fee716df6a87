//! Which model answered and what it cost, as events and reports carry them.

use serde::{Deserialize, Serialize};

/// Token counts of one reply; `estimated` when the provider gave none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    #[serde(default)]
    pub estimated: bool,
}

/// Which provider and model answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelId {
    pub provider: String,
    pub model: String,
}
