//! End to end, real Docker and a scripted model: what a hostile or careless
//! repository and model put in does not come out. Credential files never
//! reach the workspace, the model or an artifact; names git refuses never
//! reach the patch, awkward names reach it and `changed_files` intact; and
//! escape sequences in tool arguments never reach the terminal raw.

use crate::support;

use std::collections::BTreeSet;

use serde_json::{Value, json};
use support::mock_openai::MockResponse;
use support::run_harness::{RunHarness, contains, git_apply, git_apply_check_on_fixture};

const FIX: &str = support::FIX_PAGINATION;

fn plan(statuses: [&str; 2]) -> Value {
    json!({"items": [
        {"id": "1", "content": "look around", "status": statuses[0]},
        {"id": "2", "content": "fix it", "status": statuses[1]},
    ]})
}

fn fix_and_complete() -> Vec<MockResponse> {
    vec![
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "in_progress"])),
            ("edit_file", json!({"path": "pagination.py", "patch": FIX})),
        ]),
        MockResponse::tool_calls(&[
            ("update_plan", plan(["done", "done"])),
            ("request_completion", json!({"summary": "rounded up"})),
        ]),
    ]
}

fn fixture() -> tempfile::TempDir {
    let source = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(source.path()).expect("fixture");
    source
}

const PROD_SECRET: &str = "PROD_SECRET=prod-s3cr3t-4d9c2e71";
const NPM_TOKEN: &str = "npm_Q7x2Lk9Pz4Rt6Wv8Yb1Nc3Md5Fg0Hj2Ks4Lq";
const AWS_SECRET: &str = "tR7nU0pQ3sV6xZ9aC2eF5hJ8kM1oP4rS7uW0yB3d";
const KEY_BODY: &str = "b3BlbnNzaC1rZXktdjEAAAAACmFlczI1Ni1jdHIAAAAGYmNyeXB0AAAAGAAAABDx";

#[tokio::test]
async fn credential_files_stay_out_of_the_workspace_and_every_artifact() {
    let source = fixture();
    let dir = source.path();
    support::write(
        &dir.join(".env.production"),
        format!("{PROD_SECRET}\n").as_bytes(),
    );
    support::git_commit_all(dir); // tracked
    support::write(
        &dir.join(".npmrc"),
        format!("//registry.npmjs.org/:_authToken={NPM_TOKEN}\n").as_bytes(),
    );
    support::write(
        &dir.join(".aws/credentials"),
        format!("[default]\naws_secret_access_key = {AWS_SECRET}\n").as_bytes(),
    );
    support::write(
        &dir.join("id_rsa"),
        format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{KEY_BODY}\n-----END OPENSSH PRIVATE KEY-----\n"
        )
        .as_bytes(),
    );
    support::write(&dir.join("certs/server.pem"), KEY_BODY.as_bytes());
    support::write(&dir.join(".env.example"), b"PROD_SECRET=\n");
    let Some(h) = RunHarness::new(source).await else {
        return;
    };
    let probe = "for f in .env.production .npmrc .aws/credentials id_rsa certs/server.pem .env.example; do \
                 if [ -e \"$f\" ]; then echo \"PRESENT $f\"; else echo \"ABSENT $f\"; fi; done; \
                 grep -rs -e s3cr3t -e npm_ -e BEGIN . ; true";
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        ("run_shell", json!({"command": probe})),
        ("read_file", json!({"path": ".env.production"})),
    ]));
    h.mock.push(MockResponse::tool_calls(&[
        (
            "edit_file",
            json!({"path": ".env", "patch": "--- /dev/null\n+++ b/.env\n@@ -0,0 +1 @@\n+DEBUG=1\n"}),
        ),
        (
            "edit_file",
            json!({"path": ".aws/config", "patch": "--- /dev/null\n+++ b/.aws/config\n@@ -0,0 +1 @@\n+[default]\n"}),
        ),
    ]));
    h.mock.push_all(fix_and_complete());
    let done = h.run(&[]).await;
    assert_eq!(
        done.result["outcome"],
        "success",
        "{:#}\n{}",
        done.result,
        done.stderr()
    );
    assert_eq!(done.result["changed_files"], json!(["pagination.py"]));

    let results = h.tool_results();
    let shell = &results[1];
    for absent in [
        ".env.production",
        ".npmrc",
        ".aws/credentials",
        "id_rsa",
        "certs/server.pem",
    ] {
        assert!(
            shell.contains(&format!("ABSENT {absent}")),
            "{absent} reached the workspace:\n{shell}"
        );
    }
    assert!(shell.contains("PRESENT .env.example"), "{shell}");
    assert!(results[2].contains("does not exist"), "{}", results[2]);
    assert!(results[3].contains("credential file"), "{}", results[3]);
    assert!(results[4].contains("credential file"), "{}", results[4]);

    let left: Vec<(String, String)> = h.manifest()["left_out"]
        .as_array()
        .expect("left_out")
        .iter()
        .map(|l| {
            (
                l["path"].as_str().unwrap_or_default().into(),
                l["reason"].as_str().unwrap_or_default().into(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ".aws/credentials",
        ".env.production",
        ".npmrc",
        "certs/server.pem",
        "id_rsa",
    ]
    .iter()
    .map(|p| (p.to_string(), "credential file".to_string()))
    .collect();
    assert_eq!(left, expected);

    let secrets = ["prod-s3cr3t-4d9c2e71", NPM_TOKEN, AWS_SECRET, KEY_BODY];
    let sent = h.all_request_bytes();
    for secret in secrets {
        assert!(
            !contains(&sent, secret.as_bytes()),
            "{secret} reached the model"
        );
        for (file, bytes) in h.artifact_files() {
            assert!(
                !contains(&bytes, secret.as_bytes()),
                "{secret} is in {}",
                file.display()
            );
        }
    }
    let patch = h.artifacts.join("final.patch");
    git_apply_check_on_fixture(&patch).expect("git apply --check accepts final.patch");
    h.assert_guarantees();
}

/// Thirteen names that break naive parsers and terminals.
const AWKWARD: [&[u8]; 13] = [
    b"new\nline.txt",
    b"esc\x1b[2J.txt",
    "rlo\u{202e}txt.py".as_bytes(),
    b"tab\there.txt",
    b"dq\"uote.txt",
    b"sq'uote.txt",
    b"bad\xff\xfeutf8.txt",
    b"back\\slash.txt",
    b"sp ace b/x y.txt",
    "caf\u{e9}.txt".as_bytes(),
    b"-dash.txt",
    b"del\x7f.txt",
    b"cr\rname.txt",
];

/// A Python bytes literal of `name`.
fn py_bytes(name: &[u8]) -> String {
    let body: String = name
        .iter()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (*b as char).to_string()
            } else {
                format!("\\x{b:02x}")
            }
        })
        .collect();
    format!("b'{body}'")
}

/// The paths of a git patch, from its `+++`/`---` lines, unquoted.
fn patch_paths(patch: &[u8]) -> BTreeSet<Vec<u8>> {
    let mut out = BTreeSet::new();
    for line in patch.split(|&b| b == b'\n') {
        let Some(rest) = line
            .strip_prefix(b"+++ ")
            .or_else(|| line.strip_prefix(b"--- "))
        else {
            continue;
        };
        if rest == b"/dev/null" {
            continue;
        }
        let text = std::str::from_utf8(rest).expect("quoted names are ASCII");
        let bytes = minicoder::workspace::unquote_path(text).expect("well quoted");
        let path = bytes
            .strip_prefix(b"a/")
            .or_else(|| bytes.strip_prefix(b"b/"))
            .expect("a/ or b/ prefix");
        out.insert(path.to_vec());
    }
    out
}

#[tokio::test]
async fn awkward_names_reach_the_patch_and_changed_files_and_git_dirs_do_not() {
    let Some(h) = RunHarness::new(fixture()).await else {
        return;
    };
    let names: Vec<String> = AWKWARD.iter().map(|n| py_bytes(n)).collect();
    let script = format!(
        "python3 - <<'EOF'\nimport os\nfor n in [{}]:\n    d = os.path.dirname(n)\n    if d: os.makedirs(d, exist_ok=True)\n    open(n, 'wb').write(b'x\\n')\n\
         for d in [b'.GIT/hooks', b'sub/.git', b'.git.', b'git~1']:\n    os.makedirs(d, exist_ok=True)\n    open(d + b'/planted', 'wb').write(b'x\\n')\nEOF",
        names.join(", ")
    );
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        ("run_shell", json!({"command": script})),
    ]));
    let create = |p: &str| json!({"path": p, "patch": format!("--- /dev/null\n+++ b/{p}\n@@ -0,0 +1 @@\n+#!/bin/sh\n")});
    h.mock.push(MockResponse::tool_calls(&[
        ("edit_file", create(".GIT/hooks/pre-commit")),
        ("edit_file", create("sub/.git/config")),
        ("edit_file", create(".git./config")),
    ]));
    h.mock.push_all(fix_and_complete());
    let done = h.run(&[]).await;
    assert_eq!(
        done.result["outcome"],
        "success",
        "{:#}\n{}",
        done.result,
        done.stderr()
    );
    let results = h.tool_results();
    assert!(!results[1].contains("Traceback"), "{}", results[1]);
    for refused in &results[2..5] {
        assert!(refused.contains("a path git refuses"), "{refused}");
    }

    let mut want: BTreeSet<Vec<u8>> = AWKWARD.iter().map(|n| n.to_vec()).collect();
    want.insert(b"pagination.py".to_vec());
    let listed: BTreeSet<Vec<u8>> = done.result["changed_files"]
        .as_array()
        .expect("changed_files")
        .iter()
        .map(|v| {
            minicoder::workspace::unquote_path(v.as_str().expect("string")).expect("well quoted")
        })
        .collect();
    assert_eq!(listed, want, "changed_files");
    let patch = h.final_patch();
    assert_eq!(patch_paths(&patch), want, "final.patch");
    for planted in [&b".GIT/"[..], b"sub/.git", b".git./", b"git~1"] {
        assert!(
            !contains(&patch, planted),
            "{} is in the patch",
            String::from_utf8_lossy(planted)
        );
    }

    let patch_file = h.artifacts.join("final.patch");
    git_apply_check_on_fixture(&patch_file).expect("git apply --check accepts final.patch");
    let copy = tempfile::tempdir().expect("tempdir");
    minicoder::cli::demo::write_fixture(copy.path()).expect("fixture");
    git_apply(copy.path(), &patch_file, false).expect("git apply");
    for name in AWKWARD {
        use std::os::unix::ffi::OsStrExt;
        let path = copy.path().join(std::ffi::OsStr::from_bytes(name));
        assert_eq!(
            std::fs::read(&path).ok().as_deref(),
            Some(&b"x\n"[..]),
            "{path:?}"
        );
    }
    h.assert_guarantees();
}

/// What a terminal must never receive raw, as bytes.
fn raw_controls(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    text.chars()
        .filter(|&c| c != '\n' && minicoder::terminal_text::is_unsafe(c))
        .map(|c| format!("U+{:04X}", c as u32))
        .collect()
}

#[tokio::test]
async fn escape_sequences_in_tool_arguments_never_reach_the_terminal_raw() {
    let Some(h) = RunHarness::new(fixture()).await else {
        return;
    };
    let hostile = "notes\u{1b}]52;c;aGVsbG8=\u{7}\u{1b}[2J\u{202e}txt.exe\u{9b}1m";
    h.mock.push(MockResponse::tool_calls(&[
        ("update_plan", plan(["in_progress", "pending"])),
        ("read_file", json!({"path": hostile})),
        ("list_tree", json!({"path": hostile})),
        (
            "run_shell",
            json!({"command": format!("printf '{hostile}\\n'; ls '{hostile}'")}),
        ),
    ]));
    h.mock.push(MockResponse::tool_calls(&[(
        hostile,
        json!({"x": hostile}),
    )]));
    h.mock.push_all(fix_and_complete());
    let done = h.run(&[]).await;
    let stderr = done.stderr();
    assert_eq!(
        done.result["outcome"], "success",
        "{:#}\n{stderr}",
        done.result
    );
    assert_eq!(
        raw_controls(&done.output.stderr),
        Vec::<String>::new(),
        "raw on stderr:\n{stderr}"
    );
    assert_eq!(
        raw_controls(&done.output.stdout),
        Vec::<String>::new(),
        "raw on stdout"
    );
    // The lines were printed, with the controls shown instead of obeyed.
    assert!(
        stderr.contains("notes\\x1b]52;c;aGVsbG8=\\x07\\x1b[2J\\u{202e}txt.exe\\u{9b}1m"),
        "{stderr}"
    );
    assert!(stderr.contains("✗ read_file"), "{stderr}");
    h.assert_guarantees();
}
