//! Redaction of credentials from every artifact, and detection of credentials
//! that a patch would add to the workspace.
//!
//! The patterns only ever match characters that JSON never escapes (or whole
//! escape sequences), so redacting a serialized JSON line keeps it valid JSON:
//! the event log redacts each line as text, before hashing it.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use regex::{Captures, Regex, RegexSet};

/// What replaces a credential.
pub const REDACTED: &str = "[REDACTED]";

/// The most passes of one pattern over a text (two suffice for assignments
/// that follow each other; each pass redacts at least every other one).
const MAX_PASSES: usize = 8;

/// Environment values shorter than this are not treated as secrets (they would
/// redact ordinary words).
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// Names of variables whose values are always secrets (when long enough).
const ALWAYS_SECRET: &[&str] = &["GEMINI_API_KEY", "OPENAI_API_KEY", "FREELLMAPI_API_KEY"];

/// Suffixes of variable names whose values are secrets.
const SECRET_SUFFIXES: &[&str] = &["_API_KEY", "_TOKEN", "_SECRET", "PASSWORD"];

#[path = "redact_patterns.rs"]
mod patterns;
use patterns::{Accept, FIXED_PATTERNS, WORD_START};

struct CompiledPattern {
    kind: String,
    regex: Regex,
    keep_prefix: usize,
    keep_suffix: usize,
    secret_group: usize,
    word_start: bool,
    accept: Accept,
}

struct Inner {
    patterns: Vec<CompiledPattern>,
    /// Prefilter: which patterns match at all.
    any: RegexSet,
    /// Matched environment text -> the variable it came from.
    env_names: HashMap<String, String>,
}

/// Replaces credentials with `[REDACTED]`. Cheap to clone (shared).
#[derive(Clone)]
pub struct Redactor {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secrets themselves.
        f.debug_struct("Redactor")
            .field("patterns", &self.inner.patterns.len())
            .field("environment_secrets", &self.inner.env_names.len())
            .finish()
    }
}

impl Default for Redactor {
    /// The fixed patterns only, without environment values.
    fn default() -> Self {
        Self::from_vars(std::iter::empty::<(String, String)>())
    }
}

/// What may be shown or printed of `text`: redacted with the process's
/// redactor (fixed patterns and the secret values of the environment it
/// started with), so a provider's error that echoes the key never reaches
/// a terminal, a log line or a JSON result.
pub fn shown(text: &str) -> Cow<'_, str> {
    // Every line a screen draws comes here: no look at the environment each time.
    static PROCESS: std::sync::OnceLock<Redactor> = std::sync::OnceLock::new();
    PROCESS.get_or_init(Redactor::from_env).redact(text)
}

/// The secret variables of the environment a redactor was built from, and
/// the redactor: compiling its patterns takes milliseconds, and a run asks
/// for one several times on its way to the first model request.
type Built = (Vec<(String, String)>, Redactor);

static FROM_ENV: std::sync::Mutex<Option<Built>> = std::sync::Mutex::new(None);

impl Redactor {
    /// Fixed patterns plus the secret values of this process's environment.
    /// Built once for a given set of secret variables and shared after that
    /// (a redactor is a handle); a changed environment gets a new one.
    pub fn from_env() -> Self {
        let mut secrets: Vec<(String, String)> = std::env::vars_os()
            .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
            .filter(|(name, value)| {
                is_secret_variable(name) && value.chars().count() >= MIN_SECRET_LEN
            })
            .collect();
        secrets.sort();
        // Held while building, so that a caller arriving meanwhile (the
        // warm-up's) waits for this build instead of making its own.
        let mut built = FROM_ENV.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((vars, redactor)) = built.as_ref()
            && *vars == secrets
        {
            return redactor.clone();
        }
        let redactor = Self::from_vars(secrets.iter().map(|(n, v)| (n.as_str(), v.as_str())));
        *built = Some((secrets, redactor.clone()));
        redactor
    }

    /// Builds the environment's redactor on a thread of its own, so that
    /// the first caller finds it ready. Call once the environment is final.
    pub fn warm_up() {
        let _ = std::thread::Builder::new()
            .name("redactor".into())
            .spawn(|| drop(Self::from_env()));
    }

    /// Fixed patterns plus the secret values among `vars` (name, value): those
    /// named in [`is_secret_variable`] with at least [`MIN_SECRET_LEN`] characters.
    pub fn from_vars<N, V>(vars: impl IntoIterator<Item = (N, V)>) -> Self
    where
        N: AsRef<str>,
        V: AsRef<str>,
    {
        let mut env_names = HashMap::new();
        for (name, value) in vars {
            let (name, value) = (name.as_ref(), value.as_ref());
            if !is_secret_variable(name) || value.chars().count() < MIN_SECRET_LEN {
                continue;
            }
            env_names.insert(value.to_string(), name.to_string());
            // The same value as it appears inside a JSON string.
            if let Ok(quoted) = serde_json::to_string(value) {
                let escaped = &quoted[1..quoted.len() - 1];
                if escaped != value {
                    env_names.insert(escaped.to_string(), name.to_string());
                }
            }
        }
        let mut patterns: Vec<CompiledPattern> = Vec::new();
        if !env_names.is_empty() {
            let mut literals: Vec<&String> = env_names.keys().collect();
            // Longest first, so a value containing another is replaced whole.
            literals.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
            let alternation = literals
                .iter()
                .map(|l| regex::escape(l))
                .collect::<Vec<_>>()
                .join("|");
            if let Ok(regex) = Regex::new(&alternation) {
                patterns.push(CompiledPattern {
                    kind: String::from("environment secret"),
                    regex,
                    keep_prefix: 0,
                    keep_suffix: 0,
                    secret_group: 0,
                    word_start: false,
                    accept: Accept::Always,
                });
            }
        }
        patterns.extend(compile_fixed_patterns());
        let any = RegexSet::new(patterns.iter().map(|p| p.regex.as_str()))
            .unwrap_or_else(|_| RegexSet::empty());
        Self {
            inner: Arc::new(Inner {
                patterns,
                any,
                env_names,
            }),
        }
    }

    /// `text` with every credential replaced by `[REDACTED]`; borrowed when
    /// nothing had to change.
    pub(crate) fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let hits = self.inner.any.matches(text);
        if !hits.matched_any() && !self.inner.any.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut current = Cow::Borrowed(text);
        for (index, pattern) in self.inner.patterns.iter().enumerate() {
            if !self.inner.any.is_empty() && !hits.matched(index) {
                continue;
            }
            // A match takes the delimiter after it, so an assignment right
            // after another is only found by a second pass: passes go on
            // until one changes nothing.
            for _ in 0..MAX_PASSES {
                let next = match pattern
                    .regex
                    .replace_all(&current, |caps: &Captures<'_>| pattern.replacement(caps))
                {
                    Cow::Owned(changed) if changed != *current => changed,
                    _ => break,
                };
                current = Cow::Owned(next);
            }
        }
        if current == text {
            Cow::Borrowed(text)
        } else {
            current
        }
    }

    /// Bytes that may not be UTF-8: redacted as text (invalid sequences become
    /// U+FFFD, since an artifact is for reading).
    pub(crate) fn redact_bytes(&self, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(bytes);
        self.redact(&text).into_owned()
    }

    /// Whether `text` holds anything this redactor would hide.
    pub(crate) fn finds_credentials(&self, text: &str) -> bool {
        matches!(self.redact(text), Cow::Owned(_))
    }

    /// The kinds of credential found in the *added* lines of a unified diff
    /// (context and removed lines do not count), each once, in order of first
    /// appearance. Environment secrets are named by their variable, never by
    /// their value. A patch with any is to be refused.
    pub(crate) fn added_credentials(&self, patch: &str) -> Vec<String> {
        let mut kinds: Vec<String> = Vec::new();
        for line in added_lines(patch) {
            for pattern in &self.inner.patterns {
                for caps in pattern.regex.captures_iter(line) {
                    if !pattern.accepts(&caps) {
                        continue;
                    }
                    let kind = match pattern.matched(&caps) {
                        Some(found) if pattern.kind == "environment secret" => {
                            match self.inner.env_names.get(found) {
                                Some(name) => format!("value of ${name}"),
                                None => pattern.kind.clone(),
                            }
                        }
                        _ => pattern.kind.clone(),
                    };
                    if !kinds.contains(&kind) {
                        kinds.push(kind);
                    }
                }
            }
        }
        kinds
    }
}

impl CompiledPattern {
    /// Whether a match is a credential (and not, say, a kebab-case name).
    fn accepts(&self, caps: &Captures<'_>) -> bool {
        let Some(secret) = caps.get(self.group(self.secret_group)).map(|m| m.as_str()) else {
            return false;
        };
        let digit = secret.bytes().any(|b| b.is_ascii_digit());
        match self.accept {
            Accept::Always => true,
            Accept::Digit => digit,
            Accept::SecretValue => {
                let symbol = secret.bytes().any(|b| b"!@#%^*+/=~-:_".contains(&b));
                let mixed_case = secret.bytes().any(|b| b.is_ascii_uppercase())
                    && secret.bytes().any(|b| b.is_ascii_lowercase());
                let number = secret.bytes().all(|b| b.is_ascii_digit() || b == b'.');
                !number && (digit || symbol || mixed_case || secret.len() >= 12)
            }
            Accept::HighEntropy => {
                let mixed_case = secret.bytes().any(|b| b.is_ascii_uppercase())
                    && secret.bytes().any(|b| b.is_ascii_lowercase());
                (digit || mixed_case) && shannon_entropy(secret) >= 3.5
            }
        }
    }

    fn replacement(&self, caps: &Captures<'_>) -> String {
        let whole = caps.get(0).map_or("", |m| m.as_str());
        if !self.accepts(caps) {
            return whole.to_string();
        }
        let group = |i: usize| {
            if i == 0 {
                ""
            } else {
                caps.get(self.group(i)).map_or("", |m| m.as_str())
            }
        };
        let lead = if self.word_start {
            caps.get(1).map_or("", |m| m.as_str())
        } else {
            ""
        };
        format!(
            "{lead}{}{REDACTED}{}",
            group(self.keep_prefix),
            group(self.keep_suffix)
        )
    }

    /// The capture index of the pattern's own group `i` (0: its whole match),
    /// past the word-start groups.
    fn group(&self, i: usize) -> usize {
        match (self.word_start, i) {
            (false, i) => i,
            (true, 0) => 2,
            (true, i) => i + 2,
        }
    }

    /// The text the pattern itself matched (without what precedes a word).
    fn matched<'t>(&self, caps: &Captures<'t>) -> Option<&'t str> {
        caps.get(self.group(0)).map(|m| m.as_str())
    }
}

/// Whether a variable of this name holds a secret.
pub(crate) fn is_secret_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ALWAYS_SECRET.contains(&upper.as_str())
        || SECRET_SUFFIXES.iter().any(|suffix| upper.ends_with(suffix))
}

fn compile_fixed_patterns() -> impl Iterator<Item = CompiledPattern> {
    // The patterns are constants covered by a test that compiles every one.
    FIXED_PATTERNS.iter().filter_map(|p| {
        let source = if p.word_start {
            format!("{WORD_START}({})", p.regex)
        } else {
            p.regex.to_string()
        };
        Regex::new(&source).ok().map(|regex| CompiledPattern {
            kind: p.kind.to_string(),
            regex,
            keep_prefix: p.keep_prefix,
            keep_suffix: p.keep_suffix,
            secret_group: p.secret_group,
            word_start: p.word_start,
            accept: p.accept,
        })
    })
}

/// Bits per character of `text`'s character distribution: random keys are
/// near 4 and more, words and identifiers well below.
fn shannon_entropy(text: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in text.bytes() {
        counts[usize::from(b)] += 1;
    }
    let len = text.len() as f64;
    counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = f64::from(n) / len;
            -p * p.log2()
        })
        .sum()
}

/// The added lines of a unified diff, without their `+`. Hunk line counts
/// decide where a hunk ends, so a `+++` inside a hunk is an added line and a
/// `+++ b/file` header is not. Text without any hunk header is read as bare
/// `+` lines (so a malformed patch cannot hide a credential).
fn added_lines(patch: &str) -> Vec<&str> {
    let mut added = Vec::new();
    let mut old_left: u64 = 0;
    let mut new_left: u64 = 0;
    let mut saw_hunk = false;
    for line in patch.lines() {
        if old_left == 0 && new_left == 0 {
            if let Some((old, new)) = parse_hunk_header(line) {
                saw_hunk = true;
                old_left = old;
                new_left = new;
            }
            continue;
        }
        match line.as_bytes().first() {
            Some(b'+') => {
                added.push(&line[1..]);
                new_left = new_left.saturating_sub(1);
            }
            Some(b'-') => old_left = old_left.saturating_sub(1),
            Some(b'\\') => {}
            _ => {
                old_left = old_left.saturating_sub(1);
                new_left = new_left.saturating_sub(1);
            }
        }
    }
    if !saw_hunk {
        return patch
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++ "))
            .map(|l| &l[1..])
            .collect();
    }
    added
}

/// `@@ -12,3 +12,4 @@ ...` -> (old lines, new lines); a missing count is 1.
fn parse_hunk_header(line: &str) -> Option<(u64, u64)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let count = |range: &str| -> Option<u64> {
        match range.split_once(',') {
            Some((_, n)) => n.parse().ok(),
            None => range.parse::<u64>().ok().map(|_| 1),
        }
    };
    Some((count(old)?, count(new)?))
}

#[cfg(test)]
#[path = "redact_tests.rs"]
mod tests;
