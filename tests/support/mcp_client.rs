//! The official Python MCP SDK as a client of `minicoder mcp`: a private
//! virtual environment made on first use (PyPI, a pinned version) under
//! the target directory, shared by the tests under a file lock.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The SDK version the tests speak with.
const SDK: &str = "mcp==2.3.0";

/// The client script.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/client.py")
}

/// A Python with the SDK: `MINICODER_TEST_PYTHON`, else a virtual
/// environment made here. `None` (the test skipped, visibly) when neither
/// can be had, unless `MINICODER_REQUIRE_DOCKER` says every test must run.
pub fn python() -> Option<PathBuf> {
    if let Some(python) = std::env::var_os("MINICODER_TEST_PYTHON") {
        return Some(PathBuf::from(python));
    }
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-client");
    let python = venv.join("bin/python");
    let made = prepare(&venv, &python);
    match made {
        Ok(()) => Some(python),
        Err(why) if std::env::var_os("MINICODER_REQUIRE_DOCKER").is_none() => {
            super::skipped(&format!("no Python MCP client: {why}"));
            None
        }
        Err(why) => panic!("no Python MCP client ({why}), and every test must run"),
    }
}

fn prepare(venv: &Path, python: &Path) -> Result<(), String> {
    std::fs::create_dir_all(venv.parent().unwrap_or(venv)).map_err(|e| e.to_string())?;
    let lock = std::fs::File::create(venv.with_extension("lock")).map_err(|e| e.to_string())?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| e.to_string())?;
    let ready = || {
        Command::new(python)
            .args(["-c", "import mcp, httpx2"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if ready() {
        return Ok(());
    }
    let step = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    step(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    step(Command::new(venv.join("bin/pip")).args([
        "install",
        "-q",
        "--disable-pip-version-check",
        SDK,
    ]))?;
    if ready() {
        Ok(())
    } else {
        Err(format!("{SDK} installed but does not import"))
    }
}

/// Runs the client with `config` and returns what it printed.
pub async fn run(python: &Path, config: &Value) -> Value {
    let mut cmd = Command::new(python);
    cmd.arg(script()).arg(config.to_string());
    let out = tokio::task::spawn_blocking(move || cmd.output().expect("the client runs"))
        .await
        .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "the client printed no JSON ({e}):\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}
