use super::*;

fn fixed() -> Redactor {
    Redactor::default()
}

fn openai_key() -> String {
    format!("sk-proj-{}", "Ab3dE5fG7hJ9kL1mN3pQ5rS7".repeat(2))
}

fn google_key() -> String {
    format!("AIza{}", "Sy1234567890abcdefghijklmnopqrstu_-")
}

fn github_token() -> String {
    format!("ghp_{}", "a1B2c3D4e5".repeat(4))
}

fn aws_key() -> String {
    format!("AKIA{}", "IOSFODNN7EXAMPLE")
}

fn slack_token() -> String {
    format!("xoxb-{}", "123456789012-1234567890123-AbCdEfGhIjKlMnOp")
}

#[test]
fn every_fixed_pattern_compiles() {
    assert_eq!(compile_fixed_patterns().count(), FIXED_PATTERNS.len());
    assert!(!fixed().inner.any.is_empty());
}

#[test]
fn each_key_pattern_is_redacted() {
    let r = fixed();
    for key in [
        openai_key(),
        format!("sk-{}", "1234567890abcdefghijKLMNOP"),
        google_key(),
        github_token(),
        format!("github_pat_{}", "11ABCDEFG0123456789_abcdefghijklmnop"),
        aws_key(),
        slack_token(),
    ] {
        let text = format!("config: use {key} here");
        let out = r.redact(&text);
        assert_eq!(out, "config: use [REDACTED] here", "key {key}");
    }
}

#[test]
fn bearer_tokens_keep_the_scheme() {
    let out = fixed().redact("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def-ghi");
    assert_eq!(out, "Authorization: Bearer [REDACTED]");
}

#[test]
fn private_key_blocks_are_redacted_whole() {
    let text = "before\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\naIA8Yt9TR4Q0vqK1a3M=\n-----END RSA PRIVATE KEY-----\nafter";
    assert_eq!(fixed().redact(text), "before\n[REDACTED]\nafter");
    let openssh = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----";
    assert_eq!(fixed().redact(openssh), "[REDACTED]");
}

#[test]
fn private_key_inside_a_json_string_keeps_the_json_valid() {
    let body = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n";
    let line = serde_json::json!({"result": body, "next": "x"}).to_string();
    let out = fixed().redact(&line);
    let parsed: serde_json::Value = serde_json::from_str(&out).expect("still JSON");
    assert_eq!(parsed["result"], "[REDACTED]\n");
    assert_eq!(parsed["next"], "x");
}

#[test]
fn assignments_of_credentials_are_redacted() {
    let r = fixed();
    assert_eq!(
        r.redact(r#"password = "hunter22""#),
        r#"password = "[REDACTED]""#
    );
    assert_eq!(
        r.redact(r#"DB_PASSWORD: 'pa55word!'"#),
        r#"DB_PASSWORD: '[REDACTED]'"#
    );
    assert_eq!(
        r.redact(r#"{"api_key": "abc123def456"}"#),
        r#"{"api_key": "[REDACTED]"}"#
    );
    assert_eq!(
        r.redact(r#"client_secret="s3cr3t-value""#),
        r#"client_secret="[REDACTED]""#
    );
    assert_eq!(
        r.redact(r#"apikey = "zz9plural""#),
        r#"apikey = "[REDACTED]""#
    );
}

#[test]
fn assignments_inside_json_strings_stay_valid_json() {
    let r = fixed();
    let args = serde_json::json!({"patch": "+token = \"tok_12345678\"\n"}).to_string();
    let line = serde_json::json!({"arguments": args}).to_string();
    let out = r.redact(&line);
    assert_ne!(out, line);
    let outer: serde_json::Value = serde_json::from_str(&out).expect("outer JSON");
    let inner: serde_json::Value =
        serde_json::from_str(outer["arguments"].as_str().expect("string")).expect("inner JSON");
    assert_eq!(inner["patch"], "+token = \"[REDACTED]\"\n");
}

#[test]
fn ordinary_code_is_left_alone() {
    let r = fixed();
    for text in [
        "tokens = tokenize(source)",
        "let password_field = form.field(\"password\");",
        "password_field = \"user-pass-123\"",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b",
        "max_tokens: 4096, estimated_input_tokens: 12",
        "token = \"identifier\"",
        "task-runner sk-learn disk-usage",
        "The Bearer scheme is described in RFC 6750.",
        "AKIA is the prefix of an AWS key id",
    ] {
        assert_eq!(r.redact(text), text, "changed: {text}");
        assert!(matches!(r.redact(text), Cow::Borrowed(_)));
    }
}

#[test]
fn environment_secret_values_are_redacted() {
    let vars = [
        ("GEMINI_API_KEY", "gem-value-0123456789"),
        ("MY_SERVICE_TOKEN", "tokvalue77"),
        ("DATABASE_PASSWORD", "correct horse"),
        ("GITHUB_SECRET", "short"),
        ("HOME", "/home/someone-long"),
    ];
    let r = Redactor::from_vars(vars);
    assert_eq!(
        r.redact("a gem-value-0123456789 b tokvalue77 c correct horse d"),
        "a [REDACTED] b [REDACTED] c [REDACTED] d"
    );
    // Short values and other variables are not secrets.
    assert_eq!(
        r.redact("short /home/someone-long"),
        "short /home/someone-long"
    );
}

#[test]
fn environment_secrets_are_found_in_their_json_escaped_form() {
    let r = Redactor::from_vars([("X_API_KEY", "quo\"ted\\value")]);
    let line = serde_json::json!({"v": "see quo\"ted\\value"}).to_string();
    let out = r.redact(&line);
    let parsed: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(parsed["v"], "see [REDACTED]");
}

#[test]
fn secret_variable_names() {
    for name in [
        "OPENAI_API_KEY",
        "FREELLMAPI_API_KEY",
        "GH_TOKEN",
        "AWS_SECRET",
        "PASSWORD",
        "PGPASSWORD",
    ] {
        assert!(is_secret_variable(name), "{name}");
    }
    for name in ["PATH", "HOME", "TOKENIZER", "SECRETS_DIR"] {
        assert!(!is_secret_variable(name), "{name}");
    }
}

#[test]
fn debug_never_prints_secrets() {
    let r = Redactor::from_vars([("A_TOKEN", "visible-secret-1")]);
    assert!(!format!("{r:?}").contains("visible-secret-1"));
}

#[test]
fn added_credentials_counts_only_added_lines() {
    let key = openai_key();
    let patch = format!(
        "--- a/config.py\n+++ b/config.py\n@@ -1,3 +1,3 @@\n import os\n-KEY = \"{key}\"\n+KEY = os.environ[\"OPENAI_API_KEY\"]\n # {aws}\n",
        aws = aws_key()
    );
    assert!(fixed().added_credentials(&patch).is_empty());

    let adding = format!(
        "--- a/config.py\n+++ b/config.py\n@@ -1,2 +1,3 @@\n import os\n+KEY = \"{key}\"\n+GH = \"{gh}\"\n x = 1\n",
        gh = github_token()
    );
    assert_eq!(
        fixed().added_credentials(&adding),
        vec![
            "OpenAI-style API key (sk-)".to_string(),
            "GitHub token".to_string()
        ]
    );
}

#[test]
fn added_line_starting_with_plus_plus_plus_inside_a_hunk_counts() {
    let patch = format!(
        "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1,1 @@\n+++ {}\n",
        google_key()
    );
    assert_eq!(
        fixed().added_credentials(&patch),
        vec!["Google API key (AIza)".to_string()]
    );
}

#[test]
fn added_environment_secret_is_named_by_its_variable() {
    let r = Redactor::from_vars([("OPENAI_API_KEY", "plain-but-long-value")]);
    let patch = "--- a/a\n+++ b/a\n@@ -1 +1 @@\n-x\n+key = plain-but-long-value\n";
    let kinds = r.added_credentials(patch);
    assert_eq!(kinds, vec!["value of $OPENAI_API_KEY".to_string()]);
    assert!(!kinds.iter().any(|k| k.contains("plain-but-long-value")));
}

#[test]
fn hunk_headers_parse_with_and_without_counts() {
    assert_eq!(parse_hunk_header("@@ -1,3 +1,4 @@ fn x"), Some((3, 4)));
    assert_eq!(parse_hunk_header("@@ -1 +1 @@"), Some((1, 1)));
    assert_eq!(parse_hunk_header("@@ -0,0 +1,2 @@"), Some((0, 2)));
    assert_eq!(parse_hunk_header("+++ b/x"), None);
}

fn npm_token() -> String {
    format!("npm_{}", &"a1B2c3D4e5F6g7H8i9J0".repeat(2)[..36])
}

fn aws_secret() -> String {
    format!("wJalrXUtnFEMI/K7MDENG/bPxRfiCY{}", "EXAMPLEKEY")
}

fn jwt() -> String {
    format!(
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{}.{}",
        "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ",
        "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    )
}

/// `text` redacted, and the same text inside a JSON line, which must stay
/// JSON holding the redacted text.
fn redacted_both_ways(r: &Redactor, text: &str) -> String {
    let out = r.redact(text).into_owned();
    let line = serde_json::json!({"result": text, "next": 1}).to_string();
    let redacted_line = r.redact(&line);
    let parsed: serde_json::Value =
        serde_json::from_str(&redacted_line).unwrap_or_else(|e| panic!("{e}: {redacted_line}"));
    assert_eq!(parsed["result"], out.as_str(), "inside JSON: {text}");
    assert_eq!(parsed["next"], 1);
    out
}

#[test]
fn npm_tokens_are_redacted() {
    let r = fixed();
    let token = npm_token();
    for text in [
        format!("//registry.npmjs.org/:_authToken={token}"),
        format!("token {token} end"),
    ] {
        let out = redacted_both_ways(&r, &text);
        assert!(!out.contains(&token), "{out}");
        assert!(out.contains(REDACTED), "{out}");
    }
}

#[test]
fn aws_secret_access_keys_are_redacted_with_their_name_kept() {
    let r = fixed();
    let secret = aws_secret();
    for (text, kept) in [
        (
            format!("[default]\naws_secret_access_key = {secret}\n"),
            "aws_secret_access_key = ",
        ),
        (
            format!("export AWS_SECRET_ACCESS_KEY={secret}"),
            "AWS_SECRET_ACCESS_KEY=",
        ),
        (
            format!(r#"{{"SecretAccessKey": "{secret}"}}"#),
            r#""SecretAccessKey": ""#,
        ),
    ] {
        let out = redacted_both_ways(&r, &text);
        assert!(!out.contains(&secret), "{out}");
        assert!(out.contains(&format!("{kept}{REDACTED}")), "{out}");
    }
}

#[test]
fn private_key_bodies_are_redacted_as_read_file_shows_them() {
    let r = fixed();
    let body = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW";
    let shown = format!(
        "id_rsa (lines 1-4 of 4)\n     1| -----BEGIN OPENSSH PRIVATE KEY-----\n     2| {body}\n     3| QyNTUxOQAAACBzZWNyZXQ=\n     4| -----END OPENSSH PRIVATE KEY-----\n"
    );
    let out = redacted_both_ways(&r, &shown);
    assert!(!out.contains(body), "{out}");
    assert!(!out.contains("QyNTUxOQ"), "{out}");
    assert!(
        out.starts_with("id_rsa (lines 1-4 of 4)\n     1| [REDACTED]"),
        "{out}"
    );
    // Cut short (an output cap): the rest of the body still goes.
    let cut = format!("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n{body}\n{body}");
    assert_eq!(redacted_both_ways(&r, &cut), REDACTED);
}

#[test]
fn secret_environment_assignments_are_redacted() {
    let r = fixed();
    for (text, want) in [
        ("PROD_SECRET=s3cr3t-prod-value", "PROD_SECRET=[REDACTED]"),
        (
            "export GH_TOKEN=gho_abcdefABCDEF123\nNEXT=1",
            "export GH_TOKEN=[REDACTED]\nNEXT=1",
        ),
        (
            "DB_PASSWORD=correcthorsebattery; run",
            "DB_PASSWORD=[REDACTED]; run",
        ),
        ("PGPASSWORD='Pa55word' psql", "PGPASSWORD='[REDACTED]' psql"),
        (
            "DJANGO_SECRET_KEY=django-insecure-x",
            "DJANGO_SECRET_KEY=[REDACTED]",
        ),
        ("STRIPE_API_KEY=rk_live_abc", "STRIPE_API_KEY=[REDACTED]"),
        ("SESSION_SECRET=NotSoRandom", "SESSION_SECRET=[REDACTED]"),
    ] {
        assert_eq!(redacted_both_ways(&r, text), want, "{text}");
    }
}

#[test]
fn json_web_tokens_are_redacted() {
    let r = fixed();
    let token = jwt();
    let out = redacted_both_ways(&r, &format!("cookie: session={token}; Path=/"));
    assert_eq!(out, "cookie: session=[REDACTED]; Path=/");
}

#[test]
fn high_entropy_values_in_credential_slots_are_redacted() {
    let r = fixed();
    for (text, want) in [
        (
            "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==",
            "Authorization: Basic [REDACTED]",
        ),
        (
            "authorization: token 9f8e7d6c5b4a39281706f5e4",
            "authorization: token [REDACTED]",
        ),
        (
            "-H 'X-Api-Key: Zx81LmQ0pR7vT2wY9sK4' https://api",
            "-H 'X-Api-Key: [REDACTED]' https://api",
        ),
        (
            "PRIVATE-TOKEN: glpat-Xy12Ab34Cd56Ef78Gh90",
            "PRIVATE-TOKEN: [REDACTED]",
        ),
        (
            "GET /v1/x?user=me&access_token=Q2h5bGVyIEJhbmsgNzc4&page=2",
            "GET /v1/x?user=me&access_token=[REDACTED]&page=2",
        ),
    ] {
        assert_eq!(redacted_both_ways(&r, text), want, "{text}");
    }
}

#[test]
fn each_new_kind_is_named_when_a_patch_adds_it() {
    let added = |line: &str| {
        let patch = format!("--- /dev/null\n+++ b/x\n@@ -0,0 +1 @@\n+{line}\n");
        fixed().added_credentials(&patch)
    };
    assert_eq!(added(&format!("t = {}", npm_token())), ["npm token"]);
    assert_eq!(
        added(&format!("aws_secret_access_key={}", aws_secret())),
        ["AWS secret access key"]
    );
    assert_eq!(added(&jwt()), ["JSON web token"]);
    assert_eq!(
        added("PROD_SECRET=s3cr3t-prod-value"),
        ["secret environment assignment"]
    );
    assert_eq!(
        added("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw=="),
        ["authorization header"]
    );
    assert_eq!(added("x-api-key: Zx81LmQ0pR7vT2wY9sK4"), ["API key header"]);
    assert_eq!(
        added("url = base + '?token=Q2h5bGVyIEJhbmsgNzc4'"),
        ["token in a URL"]
    );
}

#[test]
fn ordinary_code_and_configuration_are_not_mangled() {
    let r = fixed();
    for text in [
        "MAX_TOKEN=100000",
        "PROD_SECRET=changeme",
        "DB_PASSWORD=postgres",
        "API_TOKEN=os.environ.get(\"API_TOKEN\")",
        "GH_TOKEN=$(gh auth token)",
        "export GH_TOKEN=$GITHUB_TOKEN",
        "if [ \"$PROD_SECRET\" == \"\" ]; then",
        "TOKEN_URL=https://example.com/oauth/token",
        "SORT_KEY=created_at",
        "f(api_token=token, password=password)",
        "password_hash = hashlib.sha256(data).hexdigest()",
        "headers = {\"Authorization\": f\"Bearer {token}\"}",
        "Authorization: Basic <credentials>",
        "authorization: required-for-every-request",
        "x-api-key: ${API_KEY}",
        "GET /search?q=hello+world&page=2&sort=relevance",
        "?key=value&token=short",
        "[![badge](https://codecov.io/gh/o/r/graph/badge.svg?token=3KA3R2D9fV)](https://codecov.io/gh/o/r)",
        "npm_config_cache=/tmp/npm",
        "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "eyJ is how a base64 JSON object starts",
        "-----BEGIN CERTIFICATE-----",
        "aws_secret_access_key = os.environ['AWS_SECRET_ACCESS_KEY']",
    ] {
        assert_eq!(r.redact(text), text, "changed: {text}");
    }
}

#[test]
fn keys_at_the_start_of_a_line_are_found_inside_json_too() {
    let r = fixed();
    for key in [aws_key(), github_token(), npm_token(), openai_key()] {
        let text = format!("first line\n{key}\nPROD_SECRET=s3cr3t-prod-value");
        assert_eq!(
            redacted_both_ways(&r, &text),
            "first line\n[REDACTED]\nPROD_SECRET=[REDACTED]",
            "{key}"
        );
    }
}

#[test]
fn this_crates_own_sources_come_out_unchanged() {
    // A real corpus of ordinary code: every source file but the tests,
    // which hold made-up keys on purpose.
    let r = fixed();
    let mut stack = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    let mut lines = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src").flatten() {
            let path = entry.path();
            let name = path.to_string_lossy().into_owned();
            if path.is_dir() {
                stack.push(path);
            } else if name.ends_with(".rs")
                && !name.ends_with("_tests.rs")
                && !name.ends_with("tests.rs")
            {
                let text = std::fs::read_to_string(&path).expect("read source");
                for line in text.lines() {
                    lines += 1;
                    assert_eq!(r.redact(line), line, "{name}");
                }
            }
        }
    }
    assert!(lines > 10_000, "only {lines} lines read");
}

#[test]
fn assignments_that_follow_each_other_are_all_redacted_and_redacting_again_changes_nothing() {
    let r = Redactor::default();
    let value = "q8Fz2LwX0pRt7Ym4";
    let text = format!("OPENAI_API_KEY={value} DEEPSEEK_API_KEY={value} GH_TOKEN={value}\n");
    let once = r.redact(&text).into_owned();
    assert!(!once.contains(value), "{once}");
    assert_eq!(
        once,
        "OPENAI_API_KEY=[REDACTED] DEEPSEEK_API_KEY=[REDACTED] GH_TOKEN=[REDACTED]\n"
    );
    assert_eq!(r.redact(&once), once.as_str());
}

#[test]
fn no_pattern_has_a_unicode_word_boundary() {
    // A Unicode `\b` sends every search over non-ASCII text to the slow
    // engine; `(?-u:\b)` keeps the fast one.
    for p in FIXED_PATTERNS {
        let without_ascii = p.regex.replace(r"(?-u:\b)", "");
        assert!(
            !without_ascii.contains(r"\b"),
            "{}: {} has a Unicode word boundary",
            p.kind,
            p.regex
        );
    }
}

#[test]
fn keys_are_redacted_in_non_ascii_text_and_before_a_non_ascii_letter() {
    let r = fixed();
    for key in [aws_key(), npm_token()] {
        for text in [
            format!("clé — {key} — fin"),
            format!("«{key}é»"),
            format!("✓ {key}\n"),
        ] {
            let out = redacted_both_ways(&r, &text);
            assert!(!out.contains(&key), "{out}");
            assert!(out.contains(REDACTED), "{out}");
        }
    }
}

#[test]
fn the_environments_redactor_is_built_once_for_the_same_secrets() {
    let (a, b) = (Redactor::from_env(), Redactor::from_env());
    assert!(Arc::ptr_eq(&a.inner, &b.inner));
    // It is the one `from_vars` builds of the same environment.
    let text = format!("use {} now", openai_key());
    let built = Redactor::from_vars(std::env::vars());
    assert_eq!(a.redact(&text), built.redact(&text));
}
