//! The first hour with a key: `init` saves it privately (asked without echo,
//! or from the environment), commands read it with the environment empty,
//! a file others can read is refused; `smoke` does one tool round trip in
//! each provider's dialect, fails with the provider's own words, and shows
//! the chain falling back. The real binary against the mock provider.

use crate::support;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use support::mock_openai::{Dialect, MockOpenAi, MockResponse};
use support::tmux::{Tmux, quote, tmux_available};

const KEY: &str = "sk-firsthour-9f8e7d6c5b4a3f2e1d0c";

/// The binary with an environment of only `env` (and `PATH`), a private
/// state directory and the configuration directory `config`.
fn minicoder(
    args: &[&str],
    config: &Path,
    state: &Path,
    env: &[(&str, &str)],
) -> std::process::Output {
    let mut cmd = std::process::Command::new(support::bin());
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", state)
        .env("MINICODER_STATE_DIR", state)
        .env("MINICODER_CONFIG_DIR", config)
        .env("MINICODER_RETRY_BASE_MS", "10")
        .stdin(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("minicoder runs")
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `init --from-env` with an OpenAI key for the mock at `url`; it succeeds.
fn init_from_env(config: &Path, state: &Path, url: &str) -> std::process::Output {
    let out = minicoder(
        &["init", "--from-env"],
        config,
        state,
        &[
            ("OPENAI_API_KEY", KEY),
            ("OPENAI_BASE_URL", url),
            ("OPENAI_MODEL", "mock-model"),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    out
}

/// The two replies of a smoke test: the tool call, then the answer.
fn round_trip(cached: u32) -> [MockResponse; 2] {
    [
        MockResponse::as_asked(&[("echo", json!({"word": "minicoder"}))])
            .with_usage(120, cached, 9),
        MockResponse::sse_text("minicoder-token").with_usage(140, cached, 4),
    ]
}

#[tokio::test]
async fn init_from_the_environment_saves_a_private_file_that_commands_then_read() {
    let home = tempfile::tempdir().expect("tempdir");
    let config = home.path().join("config/minicoder");
    let state = support::state_dir();
    let mock = MockOpenAi::start().await;
    let url = mock.base_url();
    let out = init_from_env(&config, state.path(), &url);
    assert!(!text(&out).contains(KEY), "a key is never printed");
    assert!(text(&out).contains("OPENAI_API_KEY"), "{}", text(&out));
    let file = config.join("env");
    let mode = std::fs::metadata(&file).expect("env").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(std::fs::read_to_string(&file).unwrap().contains(KEY));
    let toml = std::fs::read_to_string(config.join("config.toml")).expect("config.toml");
    assert!(toml.contains("# model = "), "commented defaults: {toml}");

    // With the environment empty, the key comes from the file.
    let spawn = {
        let (config, state) = (config.clone(), state.path().to_path_buf());
        move |args: &'static [&'static str]| {
            let (config, state) = (config.clone(), state.clone());
            tokio::task::spawn_blocking(move || minicoder(args, &config, &state, &[]))
        }
    };
    let out = spawn(&["doctor"]).await.unwrap();
    let said = text(&out);
    assert!(
        said.contains(&format!("OPENAI_API_KEY is set (from {})", file.display())),
        "{said}"
    );
    assert!(!said.contains(KEY));
    mock.push_all(round_trip(0));
    let out = spawn(&["smoke", "openai"]).await.unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let auth = mock.requests()[0]
        .headers
        .iter()
        .find(|(k, _)| k == "authorization")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    assert_eq!(auth, format!("Bearer {KEY}"), "the saved key was sent");
    assert!(!text(&out).contains(KEY));

    // The environment wins over the file.
    mock.push_all(round_trip(0));
    let (c, s) = (config.clone(), state.path().to_path_buf());
    tokio::task::spawn_blocking(move || {
        minicoder(
            &["smoke", "openai"],
            &c,
            &s,
            &[("OPENAI_API_KEY", "sk-from-env")],
        )
    })
    .await
    .unwrap();
    let auth = &mock.requests()[2].headers;
    assert!(
        auth.iter()
            .any(|(k, v)| k == "authorization" && v == "Bearer sk-from-env"),
        "{auth:?}"
    );
}

#[test]
fn a_key_file_others_can_read_is_refused_with_the_fix_and_left_alone() {
    let home = tempfile::tempdir().expect("tempdir");
    let config = home.path().join("minicoder");
    std::fs::create_dir_all(&config).unwrap();
    let file = config.join("env");
    std::fs::write(&file, format!("OPENAI_API_KEY={KEY}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let state = support::state_dir();
    for args in [&["runs"][..], &["init", "--from-env"][..]] {
        let out = minicoder(
            args,
            &config,
            state.path(),
            &[("OPENAI_API_KEY", "sk-other")],
        );
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
        let said = text(&out);
        assert!(
            said.contains(&format!("chmod 600 {}", file.display())),
            "{said}"
        );
        assert!(!said.contains(KEY));
    }
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("OPENAI_API_KEY={KEY}\n"),
        "never written"
    );
    let out = minicoder(&["doctor"], &config, state.path(), &[]);
    assert!(
        text(&out).contains("[FAIL] saved keys"),
        "doctor reports it: {}",
        text(&out)
    );
}

#[test]
fn init_asks_for_keys_without_showing_them() {
    if !tmux_available() {
        assert!(
            std::env::var_os("MINICODER_REQUIRE_DOCKER").is_none(),
            "tmux is required for this test (CI installs it)"
        );
        support::skipped("tmux is not installed");
        return;
    }
    let home = tempfile::tempdir().expect("tempdir");
    let config = home.path().join("minicoder");
    let state = support::state_dir();
    let tmux = Tmux::new("init");
    tmux.start(
        "160",
        "30",
        &[
            format!("MINICODER_CONFIG_DIR={}", config.display()),
            format!("MINICODER_STATE_DIR={}", state.path().display()),
        ],
        &format!(
            "env -u GEMINI_API_KEY -u OPENAI_API_KEY -u FREELLMAPI_API_KEY {} init; sleep 30",
            quote(&support::bin())
        ),
    );
    tmux.wait_for("GEMINI_API_KEY (not set", Duration::from_secs(20));
    tmux.type_text("gm-hidden-1234x");
    tmux.keys(&["BSpace", "Enter"]);
    tmux.wait_for("FREELLMAPI_BASE_URL", Duration::from_secs(10));
    tmux.keys(&["Enter"]);
    tmux.wait_for("FREELLMAPI_API_KEY (not", Duration::from_secs(10));
    tmux.keys(&["Enter"]);
    tmux.wait_for("OPENAI_API_KEY (not", Duration::from_secs(10));
    tmux.type_text(KEY);
    tmux.keys(&["Enter"]);
    tmux.wait_for("OPENAI_BASE_URL", Duration::from_secs(10));
    tmux.keys(&["Enter"]);
    tmux.wait_for("OPENAI_MODEL (not", Duration::from_secs(10));
    tmux.type_text("gpt-5-mini");
    tmux.keys(&["Enter"]);
    let screen = tmux.wait_for("next: minicoder doctor", Duration::from_secs(10));
    assert!(!screen.contains("gm-hidden"), "{screen}");
    assert!(!screen.contains(KEY), "{screen}");
    assert!(
        screen.contains("gpt-5-mini"),
        "what is not secret is echoed"
    );
    let saved = std::fs::read_to_string(config.join("env")).expect("env");
    assert!(saved.contains("GEMINI_API_KEY=gm-hidden-1234\n"), "{saved}");
    assert!(saved.contains(&format!("OPENAI_API_KEY={KEY}\n")));
    assert!(saved.contains("OPENAI_MODEL=gpt-5-mini\n"));
    assert!(!saved.contains("FREELLMAPI"), "skipped items stay unset");
}

/// `smoke PROVIDER` against the mock speaking `dialect`.
async fn smoke(
    dialect: Dialect,
    provider: &'static str,
    replies: Vec<MockResponse>,
) -> (std::process::Output, MockOpenAi) {
    let mock = MockOpenAi::speaking(dialect).await;
    mock.push_all(replies);
    let home = tempfile::tempdir().expect("tempdir");
    let state = support::state_dir();
    let url = mock.base_url();
    let (url_var, key_var) = match provider {
        "gemini" => ("GEMINI_BASE_URL", "GEMINI_API_KEY"),
        "openai" => ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
        _ => ("FREELLMAPI_BASE_URL", "FREELLMAPI_API_KEY"),
    };
    let config = home.path().join("none");
    let out = tokio::task::spawn_blocking(move || {
        let env: HashMap<&str, &str> = HashMap::from([
            (url_var, url.as_str()),
            (key_var, KEY),
            ("OPENAI_MODEL", "mock-model"),
            ("MINICODER_FREE_TIER_CONFIRMED", "true"),
            ("DEEPSEEK_REASONING", "on"),
        ]);
        let env: Vec<(&str, &str)> = env.into_iter().collect();
        minicoder(&["smoke", provider], &config, state.path(), &env)
    })
    .await
    .unwrap();
    (out, mock)
}

#[tokio::test]
async fn smoke_goes_the_whole_round_trip_in_each_dialect_with_cached_tokens() {
    for (dialect, provider) in [
        (Dialect::OpenAi, "openai"),
        (Dialect::Gemini, "gemini"),
        (Dialect::DeepSeek, "deepseek"),
    ] {
        let (out, mock) = smoke(dialect, provider, round_trip(64).to_vec()).await;
        let said = text(&out);
        assert!(out.status.success(), "{provider}: {said}");
        assert!(
            said.contains(&format!("smoke {provider}: ok")),
            "{provider}: {said}"
        );
        assert!(
            said.contains("tokens 260 in (128 cached), 13 out"),
            "{said}"
        );
        assert!(said.contains("tool call in"), "latency: {said}");
        assert!(!said.contains(KEY));
        // The mock refuses a second request without the signature or the
        // reasoning it handed out, so two answers mean the round trip held.
        assert_eq!(mock.requests().len(), 2, "{provider}");
        let second = String::from_utf8_lossy(&mock.requests()[1].body).into_owned();
        assert!(second.contains("minicoder-"), "the tool's result went back");
    }
}

#[tokio::test]
async fn smoke_fails_with_the_providers_own_words_on_401() {
    let (out, _mock) = smoke(Dialect::OpenAi, "openai", vec![MockResponse::status(401)]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let said = text(&out);
    assert!(said.contains("smoke openai: FAILED"), "{said}");
    assert!(said.contains("scripted status 401"), "quoted: {said}");
    assert!(!said.contains(KEY));
}

#[tokio::test]
async fn smoke_fallback_shows_the_chain_moving_on() {
    // Gemini is asked for a model that does not exist and says so; the
    // chain moves on to qwen (the FreeLLMAPI endpoint), which answers.
    let gemini = MockOpenAi::speaking(Dialect::Gemini).await;
    gemini.push(MockResponse::status(404));
    let next = MockOpenAi::start().await;
    next.push_all(round_trip(0));
    let home = tempfile::tempdir().expect("tempdir");
    let state = support::state_dir();
    let (g, n) = (gemini.base_url(), next.base_url());
    let out = tokio::task::spawn_blocking(move || {
        minicoder(
            &["smoke", "fallback"],
            &home.path().join("none"),
            state.path(),
            &[
                ("GEMINI_BASE_URL", &g),
                ("GEMINI_API_KEY", KEY),
                ("FREELLMAPI_BASE_URL", &n),
                ("FREELLMAPI_API_KEY", KEY),
                ("MINICODER_FREE_TIER_CONFIRMED", "true"),
            ],
        )
    })
    .await
    .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("smoke fallback: ok"), "{said}");
    assert!(
        said.contains("after falling back from gemini:minicoder-smoke-no-such-model"),
        "{said}"
    );
    assert!(said.contains("qwen:"), "{said}");
    let asked = String::from_utf8_lossy(&gemini.requests()[0].body).into_owned();
    assert!(asked.contains("minicoder-smoke-no-such-model"), "{asked}");
}

#[tokio::test]
async fn ask_answers_from_a_read_only_look_and_never_reaches_a_container() {
    let mock = MockOpenAi::start().await;
    mock.push_all([
        // A command and an edit first: refused, never run.
        MockResponse::tool_calls(&[
            ("run_shell", json!({"command": "touch /tmp/owned"})),
            (
                "edit_file",
                json!({"path": "pagination.py", "patch": support::FIX_PAGINATION}),
            ),
        ]),
        MockResponse::tool_calls(&[("read_file", json!({"path": "pagination.py"}))]),
        MockResponse::text(
            "page_count floors the division (pagination.py:3), so 21 items at 10 a page give 2; see also nowhere.py:9.",
        )
        .with_usage(300, 100, 30),
    ]);
    let source = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
    let digest = minicoder::cli::demo::tree_digest(source.path()).expect("digest");
    let home = tempfile::tempdir().expect("tempdir");
    let state = support::state_dir();
    let url = mock.base_url();
    let repo = source.path().display().to_string();
    let (config, st) = (home.path().join("none"), state.path().to_path_buf());
    let out = tokio::task::spawn_blocking(move || {
        minicoder(
            &[
                "ask",
                &repo,
                "Why does page_count(21, 10) return 2?",
                "--non-interactive",
                "--model",
                "openai",
            ],
            &config,
            &st,
            &[
                ("OPENAI_BASE_URL", &url),
                ("OPENAI_API_KEY", KEY),
                ("OPENAI_MODEL", "mock-model"),
                // No Docker is reachable: ask mode must not need it.
                ("DOCKER_HOST", "unix:///nonexistent/docker.sock"),
            ],
        )
    })
    .await
    .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(result["outcome"], "answered", "{result}");
    assert!(
        result["answer"]
            .as_str()
            .unwrap()
            .contains("floors the division")
    );
    assert_eq!(result["refused_calls"], 2, "{result}");
    assert_eq!(result["tool_calls"], 1, "{result}");
    assert_eq!(
        result["citations"],
        json!([
            {"path": "pagination.py", "line": 3, "found": true},
            {"path": "nowhere.py", "line": 9, "found": false}
        ])
    );
    assert_eq!(result["tokens"]["cached"], 100, "{result}");
    assert!(
        said.contains("refused run_shell: ask mode is read-only"),
        "{said}"
    );
    assert!(!std::path::Path::new("/tmp/owned").exists());
    // The model heard why, and read the file from the copy.
    let bodies: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| String::from_utf8_lossy(&r.body).into_owned())
        .collect();
    assert!(bodies[1].contains("ask mode is read-only"));
    assert!(
        bodies[2].contains("def page_count"),
        "the file's text went back"
    );
    assert_eq!(
        minicoder::cli::demo::tree_digest(source.path()).expect("digest"),
        digest,
        "the repository is untouched"
    );
    let workspaces = state.path().join("workspaces");
    let left: Vec<_> = std::fs::read_dir(&workspaces)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "the private copy is gone: {left:?}");
}

#[tokio::test]
async fn after_init_a_run_works_with_the_environment_empty() {
    if support::docker_or_skip().await.is_none() {
        return;
    }
    let home = tempfile::tempdir().expect("tempdir");
    let config = home.path().join("minicoder");
    let state = support::state_dir();
    let mock = MockOpenAi::start().await;
    let url = mock.base_url();
    init_from_env(&config, state.path(), &url);
    // `model = "openai"` chosen once in config.toml: no flag, no variable.
    let toml = std::fs::read_to_string(config.join("config.toml")).unwrap();
    std::fs::write(
        config.join("config.toml"),
        toml.replace("# model = \"openai\"", "model = \"openai\""),
    )
    .unwrap();
    let plan = |a: &str, b: &str| {
        json!({"items": [
            {"id": "1", "content": "look", "status": a},
            {"id": "2", "content": "fix", "status": b},
        ]})
    };
    mock.push_all([
        MockResponse::tool_calls(&[
            ("update_plan", plan("done", "in_progress")),
            (
                "edit_file",
                json!({"path": "pagination.py", "patch": support::FIX_PAGINATION}),
            ),
        ]),
        MockResponse::tool_calls(&[
            ("update_plan", plan("done", "done")),
            ("request_completion", json!({"summary": "rounds up"})),
        ]),
    ]);
    let source = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
    let repo = source.path().display().to_string();
    let st = state.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let mut cmd = std::process::Command::new(support::bin());
        cmd.args(["run", &repo, "Fix the pagination bug", "--non-interactive"])
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &st)
            .env("MINICODER_STATE_DIR", &st)
            .env("MINICODER_CONFIG_DIR", &config);
        // The Docker daemon's address, when the machine sets one.
        if let Ok(host) = std::env::var("DOCKER_HOST") {
            cmd.env("DOCKER_HOST", host);
        }
        cmd.output().expect("runs")
    })
    .await
    .unwrap();
    let result: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    assert_eq!(result["outcome"], "success", "{result}\n{}", text(&out));
    assert_eq!(result["model"]["provider"], "openai");
    assert!(!text(&out).contains(KEY));
}

#[tokio::test]
async fn smoke_fails_when_the_model_calls_a_tool_again_instead_of_answering() {
    let replies = vec![
        MockResponse::as_asked(&[("echo", json!({"word": "minicoder"}))]),
        MockResponse::as_asked(&[("echo", json!({"word": "again"}))]),
    ];
    let (out, _mock) = smoke(Dialect::OpenAi, "openai", replies).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("called a tool again"), "{}", text(&out));
}
