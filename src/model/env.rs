//! The environment the model layer is configured from, as a plain map, so
//! tests can describe one without touching the process environment.

use std::collections::BTreeMap;

/// A snapshot of environment variables. Empty values count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Env {
    vars: BTreeMap<String, String>,
}

impl Env {
    /// An environment made of exactly these pairs.
    pub fn from_pairs<K, V>(pairs: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// Sets (or replaces) one variable.
    pub fn set(&mut self, name: impl Into<String>, value: impl Into<String>) {
        self.vars.insert(name.into(), value.into());
    }

    /// Builder form of [`Env::set`].
    pub fn with(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.set(name, value);
        self
    }

    /// The value of `name`, trimmed; `None` when unset or blank.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Whether `name` holds a truthy value (`true`, `1`, `yes`, case-insensitive).
    pub(crate) fn flag(&self, name: &str) -> bool {
        self.get(name).is_some_and(|v| {
            v.eq_ignore_ascii_case("true") || v == "1" || v.eq_ignore_ascii_case("yes")
        })
    }

    /// A non-negative integer variable, `default` when unset; an error message
    /// naming the variable when it is not a number.
    pub(crate) fn u64_or(&self, name: &str, default: u64) -> Result<u64, String> {
        match self.get(name) {
            None => Ok(default),
            Some(text) => text.parse::<u64>().map_err(|_| {
                format!(
                    "{name}={text:?} is not a whole number; set it to a value such as {default}"
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_values_count_as_unset_and_numbers_are_checked() {
        let env = Env::from_pairs([("A", "  "), ("B", " 42 "), ("C", "x"), ("D", "TRUE")]);
        assert_eq!(env.get("A"), None);
        assert_eq!(env.u64_or("B", 7), Ok(42));
        assert_eq!(env.u64_or("A", 7), Ok(7));
        assert!(env.u64_or("C", 7).is_err_and(|e| e.contains("C=")));
        assert!(env.flag("D"));
        assert!(!env.flag("B"));
    }
}
