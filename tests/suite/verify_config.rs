//! `.minicoder.json`, `--check` overrides and check detection (no Docker).

use std::path::Path;

use minicoder::verify::{CheckSpec, VerifyError, detect_checks, load_config, resolve_checks};

fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (rel, content) in files {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, content).expect("write");
    }
    dir
}

fn config_error(json: &str) -> VerifyError {
    let dir = repo(&[(".minicoder.json", json)]);
    load_config(dir.path()).expect_err("the config is refused")
}

fn checks(list: &[(&str, &str)]) -> Vec<CheckSpec> {
    list.iter().map(|(n, c)| CheckSpec::new(*n, *c)).collect()
}

#[test]
fn no_config_file_is_none() {
    let dir = repo(&[]);
    assert_eq!(load_config(dir.path()).expect("ok"), None);
}

#[test]
fn string_and_object_checks_are_named() {
    let dir = repo(&[(
        ".minicoder.json",
        r#"{
  "bootstrap": ["pip install -e ."],
  "verification": [
    "python3 -m pytest -q",
    {"name": "lint", "command": "ruff check ."},
    "cargo test --locked",
    "[ -f README.md ]",
    "python3 -m pytest tests/slow",
    {"name": "pytest-2", "command": "true"}
  ]
}"#,
    )]);
    let config = load_config(dir.path()).expect("valid").expect("present");
    assert_eq!(config.bootstrap, vec!["pip install -e .".to_string()]);
    assert_eq!(
        config.verification,
        checks(&[
            ("pytest", "python3 -m pytest -q"),
            ("lint", "ruff check ."),
            ("cargo-test", "cargo test --locked"),
            ("check-4", "[ -f README.md ]"),
            ("pytest-3", "python3 -m pytest tests/slow"),
            ("pytest-2", "true"),
        ])
    );
    // Configured checks are what a run uses when there is no override.
    let resolved = resolve_checks(dir.path(), Some(&config), &[]).expect("resolved");
    assert_eq!(resolved, config.verification);
}

#[test]
fn bad_names_are_refused() {
    for bad in ["Lint", "2lint", "lint check", "", &"x".repeat(33)] {
        let json = format!(r#"{{"verification": [{{"name": "{bad}", "command": "true"}}]}}"#);
        match config_error(&json) {
            VerifyError::InvalidCheckName { name, .. } => assert_eq!(name, bad),
            other => panic!("{bad:?}: unexpected {other}"),
        }
    }
}

#[test]
fn duplicate_names_empty_commands_and_unknown_keys_are_refused() {
    let dup = config_error(
        r#"{"verification": [{"name": "t", "command": "a"}, {"name": "t", "command": "b"}]}"#,
    );
    assert!(
        matches!(dup, VerifyError::DuplicateCheckName { ref name, .. } if name == "t"),
        "{dup}"
    );
    let empty = config_error(r#"{"verification": ["  "]}"#);
    assert!(matches!(empty, VerifyError::EmptyCommand { .. }), "{empty}");
    let unknown_top = config_error(r#"{"verify": ["true"]}"#);
    assert!(
        unknown_top.to_string().contains("unknown field `verify`"),
        "{unknown_top}"
    );
    let unknown_inner =
        config_error(r#"{"verification": [{"name": "a", "command": "b", "timeout": 5}]}"#);
    assert!(
        unknown_inner.to_string().contains("timeout"),
        "{unknown_inner}"
    );
    let wrong_type = config_error(r#"{"verification": [42]}"#);
    assert!(wrong_type.to_string().contains("entry 1"), "{wrong_type}");
}

#[test]
fn more_than_sixteen_checks_are_refused() {
    let list: Vec<String> = (0..17).map(|i| format!("\"echo {i}\"")).collect();
    let err = config_error(&format!(r#"{{"verification": [{}]}}"#, list.join(",")));
    assert!(
        matches!(
            err,
            VerifyError::TooManyChecks {
                count: 17,
                max: 16,
                ..
            }
        ),
        "{err}"
    );
    let sixteen: Vec<String> = (0..16).map(|i| format!("\"echo {i}\"")).collect();
    let dir = repo(&[(
        ".minicoder.json",
        &format!(r#"{{"verification": [{}]}}"#, sixteen.join(",")),
    )]);
    let config = load_config(dir.path())
        .expect("16 is fine")
        .expect("present");
    assert_eq!(config.verification.len(), 16);
    assert_eq!(config.verification[1].name, "echo-2");
}

#[test]
fn malformed_json_names_file_line_and_column() {
    let err = config_error("{\n  \"verification\": [\n    \"pytest\",\n  ]\n}\n");
    match &err {
        VerifyError::ConfigSyntax {
            path, line, column, ..
        } => {
            assert!(path.ends_with(".minicoder.json"));
            assert_eq!((*line, *column), (4, 3));
        }
        other => panic!("unexpected {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(".minicoder.json is not valid at line 4, column 3"),
        "{text}"
    );
}

#[test]
fn overrides_replace_configuration_and_are_validated() {
    let dir = repo(&[(".minicoder.json", r#"{"verification": ["true"]}"#)]);
    let config = load_config(dir.path()).expect("ok");
    let overrides = vec![("unit".to_string(), "pytest -q".to_string())];
    let resolved = resolve_checks(dir.path(), config.as_ref(), &overrides).expect("ok");
    assert_eq!(resolved, checks(&[("unit", "pytest -q")]));

    let bad = vec![("Unit".to_string(), "pytest".to_string())];
    let err = resolve_checks(dir.path(), None, &bad).expect_err("bad name");
    assert!(err.to_string().contains("--check"), "{err}");
    let dup = vec![
        ("a".to_string(), "x".to_string()),
        ("a".to_string(), "y".to_string()),
    ];
    assert!(matches!(
        resolve_checks(dir.path(), None, &dup),
        Err(VerifyError::DuplicateCheckName { .. })
    ));
    let many: Vec<(String, String)> = (0..17).map(|i| (format!("c{i}"), "true".into())).collect();
    assert!(matches!(
        resolve_checks(dir.path(), None, &many),
        Err(VerifyError::TooManyChecks { .. })
    ));
}

#[test]
fn an_empty_verification_list_falls_back_to_detection() {
    let dir = repo(&[
        (".minicoder.json", r#"{"bootstrap": ["make deps"]}"#),
        ("go.mod", "module example.com/demo\n"),
    ]);
    let config = load_config(dir.path()).expect("ok");
    assert_eq!(
        resolve_checks(dir.path(), config.as_ref(), &[]).expect("detected"),
        checks(&[("go-test", "go test ./...")])
    );
}

fn detected(files: &[(&str, &str)]) -> Result<Vec<CheckSpec>, VerifyError> {
    let dir = repo(files);
    detect_checks(dir.path())
}

#[test]
fn package_scripts_are_detected_without_placeholders_or_watchers() {
    let package = r#"{
  "name": "demo",
  "scripts": {
    "test": "vitest run",
    "build": "tsc -p .",
    "lint": "echo \"no linter yet\"",
    "typecheck": "tsc --noEmit --watch",
    "start": "node index.js"
  }
}"#;
    assert_eq!(
        detected(&[("package.json", package)]).expect("detected"),
        checks(&[("test", "npm test"), ("build", "npm run build")])
    );
    let placeholder = r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#;
    assert!(matches!(
        detected(&[("package.json", placeholder)]),
        Err(VerifyError::NoMeaningfulCheck)
    ));
}

#[test]
fn each_ecosystem_is_detected() {
    assert_eq!(
        detected(&[("Cargo.toml", "[package]\nname = \"demo\"\n")]).expect("cargo"),
        checks(&[("cargo-test", "cargo test --locked")])
    );
    assert_eq!(
        detected(&[("go.mod", "module example.com/demo\n\ngo 1.22\n")]).expect("go"),
        checks(&[("go-test", "go test ./...")])
    );
    assert_eq!(
        detected(&[(
            "pyproject.toml",
            "[project]\nname = \"demo\"\n\n[tool.pytest.ini_options]\ntestpaths = [\"tests\"]\n"
        )])
        .expect("pytest"),
        checks(&[("pytest", "python3 -m pytest -q")])
    );
}

#[test]
fn pyproject_without_pytest_and_empty_repos_have_no_meaningful_check() {
    let err = detected(&[("pyproject.toml", "[project]\nname = \"demo\"\n")]).expect_err("none");
    assert!(matches!(err, VerifyError::NoMeaningfulCheck));
    let err = detected(&[("README.md", "hello")]).expect_err("none");
    let text = err.to_string();
    assert!(text.contains("cannot succeed"), "{text}");
    assert!(text.contains("--check"), "{text}");
}

#[test]
fn several_ecosystems_are_ambiguous() {
    let err = detected(&[
        ("Cargo.toml", "[package]\nname = \"demo\"\n"),
        ("package.json", r#"{"scripts": {"test": "jest"}}"#),
    ])
    .expect_err("ambiguous");
    let VerifyError::AmbiguousProject { found } = &err else {
        panic!("unexpected {err}");
    };
    assert!(
        found.contains("Cargo.toml") && found.contains("package.json"),
        "{found}"
    );
    assert!(err.to_string().contains(".minicoder.json"));
    // Explicit checks settle it.
    let dir = repo(&[
        ("Cargo.toml", "[package]\nname = \"demo\"\n"),
        ("go.mod", "module example.com/demo\n"),
    ]);
    let explicit = vec![("test".to_string(), "cargo test".to_string())];
    assert!(resolve_checks(dir.path(), None, &explicit).is_ok());
    assert!(resolve_checks(Path::new(dir.path()), None, &[]).is_err());
}
