//! One check of the verification matrix: a name and a shell command.

use serde::{Deserialize, Serialize};

/// One check of the verification matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckSpec {
    pub name: String,
    /// Run with `/bin/sh -c` in `/workspace`.
    pub command: String,
}

impl CheckSpec {
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: command.into(),
        }
    }
}
