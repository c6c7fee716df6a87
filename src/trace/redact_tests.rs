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
