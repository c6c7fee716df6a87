//! Shared helpers of the integration tests.
#![allow(dead_code)]

pub mod fake_run;
pub mod mcp_client;
pub mod mock_openai;
pub mod model_harness;
pub mod project_run;
pub mod repo_run;
pub mod run_events;
pub mod run_harness;
pub mod source_tree;
pub mod tls_engine;
pub mod tmux;

use std::path::{Path, PathBuf};
use std::process::Command;

use bollard::Docker;
use minicoder::sandbox::{self, ContainerSpec};

/// `git status --porcelain` of `dir` (empty when nothing changed).
pub fn git_status(dir: &Path) -> String {
    let out = Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(dir)
        .output()
        .expect("git status");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A state directory for a test: private (0700), as minicoder requires of
/// one that already exists.
pub fn state_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()
        .expect("a private tempdir")
}

/// Connects to Docker and makes sure the sandbox image exists.
///
/// Without Docker the test is skipped (with a message) unless
/// `MINICODER_REQUIRE_DOCKER` is set, as it is in CI: then it fails.
pub async fn docker_or_skip() -> Option<Docker> {
    match sandbox::connect().await {
        Ok(docker) => {
            let image = sandbox::spec::image_from_env();
            if let Err(e) = sandbox::image::ensure_image(&docker, &image, &mut |_| {}).await {
                panic!("the sandbox image {image} is not usable: {e}");
            }
            Some(docker)
        }
        Err(e) if std::env::var_os("MINICODER_REQUIRE_DOCKER").is_none() => {
            skipped(&format!(
                "Docker is absent ({e}); set MINICODER_REQUIRE_DOCKER=1 to fail instead"
            ));
            None
        }
        Err(e) => panic!("MINICODER_REQUIRE_DOCKER is set but Docker is unusable: {e}"),
    }
}

/// Says that the calling test is skipped, past the test harness's capture
/// of its output: a skipped test is seen in the run's output, not passed in
/// silence.
pub fn skipped(why: &str) {
    use std::io::Write;
    let name = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let _ = writeln!(std::io::stderr(), "SKIPPED {name}: {why}");
}

/// A temporary workspace directory owned by the sandbox user.
pub fn workspace() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("minicoder-test-ws-")
        .tempdir()
        .expect("tempdir");
    chown_for_sandbox(dir.path());
    dir
}

pub fn chown_for_sandbox(path: &Path) {
    // Only root can give files away; as another user the tests still run if
    // that user's uid can write (the directory is made world-writable).
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(path, Some(sandbox::SANDBOX_UID), Some(sandbox::SANDBOX_GID))
            .expect("chown");
    } else {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    }
}

pub fn spec(workspace: &Path, test_name: &str) -> ContainerSpec {
    ContainerSpec::new(
        sandbox::spec::image_from_env(),
        workspace,
        format!("test-{test_name}"),
    )
}

pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_minicoder"))
}

/// Commits everything in `dir` as a new one-commit Git repository.
pub fn git_commit_all(dir: &Path) {
    let repo = git2::Repository::init(dir).expect("git init");
    let mut index = repo.index().expect("index");
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .expect("add");
    index.write().expect("write index");
    let tree = repo
        .find_tree(index.write_tree().expect("tree"))
        .expect("tree");
    let sig = git2::Signature::now("test", "test@minicoder.invalid").expect("signature");
    let parents: Vec<git2::Commit> = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .into_iter()
        .collect();
    let parents: Vec<&git2::Commit> = parents.iter().collect();
    repo.commit(Some("HEAD"), &sig, &sig, "test", &tree, &parents)
        .expect("commit");
}

/// The bundled fixture's fix: `page_count` rounds up.
pub const FIX_PAGINATION: &str = "--- a/pagination.py\n+++ b/pagination.py\n@@ -5,7 +5,7 @@\n     \"\"\"Number of pages needed to show `total_items`, `page_size` per page.\"\"\"\n     if page_size <= 0:\n         raise ValueError(\"page_size must be positive\")\n-    return total_items // page_size\n+    return -(-total_items // page_size)\n \n \n def page_slice(items: list, page: int, page_size: int) -> list:\n";

/// Names of the volumes labelled with this run.
pub async fn volumes_of_run(docker: &Docker, run_id: &str) -> Vec<String> {
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec![format!("{}={run_id}", sandbox::labels::RUN)],
    )]);
    docker
        .list_volumes(Some(bollard::query_parameters::ListVolumesOptions {
            filters: Some(filters),
        }))
        .await
        .expect("list volumes")
        .volumes
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.name)
        .collect()
}

/// Names of the containers (running or not) labelled with this run.
pub async fn containers_of_run(docker: &Docker, run_id: &str) -> Vec<String> {
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec![format!("{}={run_id}", sandbox::labels::RUN)],
    )]);
    docker
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .expect("list containers")
        .into_iter()
        .flat_map(|c| c.names.unwrap_or_default())
        .collect()
}

/// Runs the `git` program in `dir` with a fixed identity; fails the test on error.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Writes `bytes` to `path`, creating its parent directories.
pub fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, bytes).expect("write");
}
