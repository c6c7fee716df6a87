//! The fixed credential patterns of the redactor: what each looks like,
//! which part is kept, and what the secret itself must look like to count.
//! Every pattern only matches characters JSON never escapes, or whole escape
//! sequences, so a redacted JSON line stays JSON.
//!
//! No pattern has a Unicode word boundary (`\b`; `(?-u:\b)` instead): on
//! text holding any non-ASCII character — every history does — a Unicode
//! boundary makes the set's lazy DFA give up and every search fall back to
//! the PikeVM, a hundred times slower, which a resume point's save paid on
//! every turn. The ASCII boundary also ends a key before a non-ASCII letter.

/// One recognisable kind of credential.
pub(super) struct FixedPattern {
    pub(super) kind: &'static str,
    pub(super) regex: &'static str,
    /// The capture group kept before `[REDACTED]` (a prefix such as `Bearer `
    /// or `password = "`); 0 means the whole match is replaced.
    pub(super) keep_prefix: usize,
    /// The capture group kept after `[REDACTED]` (a closing quote).
    pub(super) keep_suffix: usize,
    /// The capture group holding the secret itself (0: the whole match).
    pub(super) secret_group: usize,
    /// The match starts a word: after the start, a non-word character or a
    /// JSON escape such as `\n` (where `\b` would see no boundary).
    pub(super) word_start: bool,
    /// What the secret must look like for the match to count.
    pub(super) accept: Accept,
}

/// What may precede a credential that starts a word.
pub(super) const WORD_START: &str = r"(^|[^A-Za-z0-9_]|\\[nrt])";

/// The shape a matched secret must have: tells credentials from code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Accept {
    /// The pattern alone is specific enough.
    Always,
    /// Random keys contain digits; identifiers in code often do not.
    Digit,
    /// The value of an environment-style assignment: not a number, a
    /// placeholder or a short lower-case word.
    SecretValue,
    /// A value of a generic credential slot (an `Authorization` header, a
    /// token query parameter): long and random-looking.
    HighEntropy,
}

pub(super) const FIXED_PATTERNS: &[FixedPattern] = &[
    FixedPattern {
        kind: "private key block",
        // The body as it is, with read_file's line numbers (`  12| `), or
        // inside (nested) JSON strings, up to its end line if any.
        regex: r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[A-Za-z0-9+/=:,|. ]|\\{1,2}[nrt]|\s|-[A-Za-z0-9])*(?:-----END [A-Z0-9 ]*PRIVATE KEY-----)?",
        keep_prefix: 0,
        keep_suffix: 0,
        secret_group: 0,
        word_start: false,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "bearer token",
        regex: r"(?i)(bearer[ \t]+)[A-Za-z0-9\-._~+/]{16,}=*",
        keep_prefix: 1,
        keep_suffix: 0,
        secret_group: 0,
        word_start: true,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "OpenAI-style API key (sk-)",
        regex: r"sk-[A-Za-z0-9_\-]{20,}",
        keep_prefix: 0,
        keep_suffix: 0,
        secret_group: 0,
        word_start: true,
        accept: Accept::Digit,
    },
    FixedPattern {
        kind: "Google API key (AIza)",
        regex: r"AIza[0-9A-Za-z_\-]{35}",
        keep_prefix: 0,
        keep_suffix: 0,
        secret_group: 0,
        word_start: true,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "GitHub token",
        regex: r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        keep_prefix: 0,
        keep_suffix: 0,
        secret_group: 0,
        word_start: true,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "AWS access key id",
        regex: r"(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
        keep_prefix: 0,
        keep_suffix: 0,
        secret_group: 0,
        word_start: true,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "Slack token",
        regex: r"xox[baprs]-[A-Za-z0-9\-]{10,}",
        keep_prefix: 0,
        keep_suffix: 0,
        secret_group: 0,
        word_start: true,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "npm token",
        regex: r"npm_[A-Za-z0-9]{36}(?-u:\b)",
        keep_prefix: 0,
        keep_suffix: 0,
        secret_group: 0,
        word_start: true,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "AWS secret access key",
        regex: r#"(?i)((?:aws_?)?secret_?access_?key(?:\\*["'])?[ \t]*[=:][ \t]*(?:\\*["'])?)([A-Za-z0-9/+]{40})"#,
        keep_prefix: 1,
        keep_suffix: 0,
        secret_group: 2,
        word_start: true,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "JSON web token",
        regex: r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
        keep_prefix: 0,
        keep_suffix: 0,
        secret_group: 0,
        word_start: true,
        accept: Accept::Always,
    },
    FixedPattern {
        kind: "secret environment assignment",
        // NAME_SECRET=value, NAME_TOKEN=..., NAME_PASSWORD=... as in .env
        // files and shells: upper-case names, no space around `=`, a value
        // that ends the word (so `X_TOKEN=os.environ[...]` is code).
        regex: r#"(?m)((?:[A-Z][A-Z0-9_]*(?:SECRET|TOKEN|PASSWORD|PASSWD|_PWD|API_KEY|ACCESS_KEY|SECRET_KEY|PRIVATE_KEY|SIGNING_KEY|MASTER_KEY)|SECRET|TOKEN|PASSWORD)=(?:\\*["'])?)([^=\s"'\\;&|,()\[\]{}<>`$][^\s"'\\;&|,()\[\]{}<>`$]{3,})($|[\s"'\\;&|,)])"#,
        keep_prefix: 1,
        keep_suffix: 3,
        secret_group: 2,
        word_start: true,
        accept: Accept::SecretValue,
    },
    FixedPattern {
        kind: "authorization header",
        // Any scheme (Basic, Token, Bearer...) or none.
        regex: r#"(?i)((?:proxy-)?authorization(?:\\*["'])?[ \t]*[:=][ \t]*(?:\\*["'])?(?:[A-Za-z][A-Za-z0-9_-]*[ \t]+)?)([A-Za-z0-9\-._~+/]{16,}=*)"#,
        keep_prefix: 1,
        keep_suffix: 0,
        secret_group: 2,
        word_start: true,
        accept: Accept::HighEntropy,
    },
    FixedPattern {
        kind: "API key header",
        regex: r#"(?i)((?:x-)?(?:api-?key|auth-?token|access-?token|private-?token|session-?token)(?:\\*["'])?[ \t]*:[ \t]*(?:\\*["'])?)([A-Za-z0-9\-._~+/]{16,}=*)"#,
        keep_prefix: 1,
        keep_suffix: 0,
        secret_group: 2,
        word_start: true,
        accept: Accept::HighEntropy,
    },
    FixedPattern {
        kind: "token in a URL",
        regex: r#"(?i)([?&](?:access_token|refresh_token|id_token|token|api_key|apikey|key|auth|sig|signature|client_secret|password)=)([A-Za-z0-9\-._~%+/=]{16,})"#,
        keep_prefix: 1,
        keep_suffix: 0,
        secret_group: 2,
        word_start: false,
        accept: Accept::HighEntropy,
    },
    FixedPattern {
        kind: "credential assignment",
        // name = "value" / name: 'value' / "name": "value", also inside JSON
        // strings where the quotes appear escaped (\" or \\\").
        regex: r#"(?i)([A-Za-z0-9_]*(?:api_key|api-key|apikey|secret|token|password|passwd)(?:\\*["'])?[ \t]*[=:][ \t]*\\*["'])([^"'\\\s]{6,})(\\*["'])"#,
        keep_prefix: 1,
        keep_suffix: 3,
        secret_group: 2,
        word_start: true,
        accept: Accept::Digit,
    },
];
