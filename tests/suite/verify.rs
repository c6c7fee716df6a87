//! The verifier and the bootstrap phase against the real Docker engine.

use crate::support;

use std::path::Path;
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::ListContainersOptions;
use minicoder::protocol::CheckReport;
use minicoder::sandbox::{self, labels};
use minicoder::verify::{
    BootstrapSettings, CheckSpec, VerificationResult, Verifier, VerifierSettings, run_bootstrap,
};

const PASSING_TEST: &str = "def test_adds():\n    assert 1 + 1 == 2\n";
const FAILING_TEST: &str = "def test_adds():\n    assert 1 + 1 == 3, 'arithmetic is broken'\n";

/// A workspace owned by the sandbox user holding `files`, plus a directory
/// outside it standing for the artifact directory.
struct Fixture {
    workspace: tempfile::TempDir,
    artifacts: tempfile::TempDir,
}

impl Fixture {
    fn new(files: &[(&str, &str)]) -> Self {
        let workspace = support::workspace();
        for (rel, content) in files {
            let path = workspace.path().join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
                support::chown_for_sandbox(parent);
            }
            std::fs::write(&path, content).expect("write fixture file");
            support::chown_for_sandbox(&path);
        }
        let artifacts = tempfile::tempdir().expect("artifact dir");
        Self {
            workspace,
            artifacts,
        }
    }

    fn settings(&self, run_id: &str, checks: &[(&str, &str)]) -> VerifierSettings {
        VerifierSettings::new(
            sandbox::spec::image_from_env(),
            self.workspace.path(),
            format!("test-verify-{run_id}"),
            checks
                .iter()
                .map(|(name, command)| CheckSpec::new(*name, *command))
                .collect(),
            self.artifacts.path().join("outputs"),
            self.artifacts.path().join("fingerprint-cache"),
        )
    }
}

async fn verify_once(
    docker: Docker,
    settings: VerifierSettings,
) -> (VerificationResult, Vec<CheckReport>) {
    let run_id = settings.run_id.clone();
    let mut verifier = Verifier::new(docker.clone(), settings).expect("verifier");
    let mut observed = Vec::new();
    let result = verifier
        .verify(1, &mut |report: &CheckReport| observed.push(report.clone()))
        .await
        .expect("verification runs");
    verifier.shutdown().await;
    assert_no_containers_left(&docker, &run_id).await;
    (result, observed)
}

async fn assert_no_containers_left(docker: &Docker, run_id: &str) {
    let filters = std::collections::HashMap::from([(
        "label".to_string(),
        vec![format!("{}={run_id}", labels::RUN)],
    )]);
    let left = docker
        .list_containers(Some(ListContainersOptions {
            all: true,
            filters: Some(filters),
            ..Default::default()
        }))
        .await
        .expect("list containers");
    assert!(
        left.is_empty(),
        "containers of {run_id} left behind: {left:?}"
    );
}

fn read_output(artifacts: &Path, report: &CheckReport) -> String {
    let rel = report.output_file.as_ref().expect("output_file is set");
    std::fs::read_to_string(artifacts.join(rel)).expect("the output file exists")
}

#[tokio::test]
async fn a_passing_pytest_check_passes_and_is_bound_to_the_fingerprint() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[("test_math.py", PASSING_TEST)]);
    let settings = fx.settings("pass", &[("pytest", "python3 -m pytest -q")]);
    let (result, observed) = verify_once(docker, settings).await;
    assert!(result.passed, "{result:?}");
    assert_eq!(observed, result.checks, "observe sees every report");
    let check = &result.checks[0];
    assert_eq!(check.exit_code, Some(0));
    assert_eq!(check.failure, None);
    assert_eq!(
        check.output_file.as_deref(),
        Some("outputs/verify-1-pytest.stdout")
    );
    assert!(read_output(fx.artifacts.path(), check).contains("1 passed"));
    let expected = minicoder::workspace::fingerprint(fx.workspace.path(), &Default::default())
        .expect("fingerprint");
    assert_eq!(result.fingerprint, expected.fingerprint);
}

#[tokio::test]
async fn a_failing_check_reports_its_exit_code_and_output() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[("test_math.py", FAILING_TEST)]);
    let settings = fx.settings("fail", &[("pytest", "python3 -m pytest -q")]);
    let (result, _) = verify_once(docker, settings).await;
    assert!(!result.passed);
    let check = &result.checks[0];
    assert!(!check.passed);
    assert_eq!(check.exit_code, Some(1));
    assert_eq!(check.failure, None, "an exit code says enough");
    assert!(read_output(fx.artifacts.path(), check).contains("arithmetic is broken"));
}

#[tokio::test]
async fn zero_tests_fail_unless_allowed() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[("calc.py", "def add(a, b):\n    return a + b\n")]);
    let settings = fx.settings("zero", &[("pytest", "python3 -m pytest -q")]);
    let (refused, _) = verify_once(docker.clone(), settings.clone()).await;
    assert!(!refused.passed);
    let check = &refused.checks[0];
    assert_eq!(check.exit_code, Some(5));
    let failure = check.failure.as_deref().expect("a zero-test failure");
    assert!(failure.contains("no tests"), "{failure}");

    let mut allowed = settings;
    allowed.allow_zero_tests = true;
    let (allowed, _) = verify_once(docker, allowed).await;
    assert!(allowed.passed, "{allowed:?}");
    assert_eq!(allowed.checks[0].failure, None);
}

#[tokio::test]
async fn a_check_that_changes_the_workspace_fails_the_matrix_and_stops_it() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[("test_math.py", PASSING_TEST)]);
    let settings = fx.settings(
        "writes",
        &[
            (
                "sneaky",
                "echo generated > generated.txt && echo '# x' >> test_math.py",
            ),
            ("pytest", "python3 -m pytest -q"),
        ],
    );
    let (result, _) = verify_once(docker, settings).await;
    assert!(!result.passed);
    assert_eq!(result.checks.len(), 1, "the matrix stops: {result:?}");
    let check = &result.checks[0];
    assert_eq!(check.exit_code, Some(0));
    assert!(!check.passed);
    assert_eq!(
        check.failure.as_deref(),
        Some("the check changed the workspace: generated.txt, test_math.py")
    );
}

#[tokio::test]
async fn a_check_past_its_timeout_fails() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[]);
    let mut settings = fx.settings("timeout", &[("slow", "sleep 30")]);
    settings.check_timeout = Duration::from_secs(1);
    let started = std::time::Instant::now();
    let (result, _) = verify_once(docker, settings).await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(!result.passed);
    assert_eq!(
        result.checks[0].failure.as_deref(),
        Some("timed out after 1 s")
    );
}

#[tokio::test]
async fn every_check_is_reported_even_after_a_failure() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[("test_math.py", PASSING_TEST)]);
    let settings = fx.settings(
        "two",
        &[
            ("lint", "echo 'style error' >&2; exit 3"),
            ("pytest", "python3 -m pytest -q"),
        ],
    );
    let (result, observed) = verify_once(docker, settings).await;
    assert!(!result.passed);
    let names: Vec<&str> = observed.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["lint", "pytest"]);
    assert_eq!(result.checks[0].exit_code, Some(3));
    assert!(!result.checks[0].passed);
    assert_eq!(
        result.checks[0].output_file.as_deref(),
        Some("outputs/verify-1-lint.stderr"),
        "only stderr had bytes"
    );
    assert!(result.checks[1].passed);
}

#[tokio::test]
async fn each_check_gets_a_fresh_container_without_network() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[]);
    let udp = "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('192.0.2.1', 9))\"";
    let settings = fx.settings(
        "fresh",
        &[
            // Leaves a file in /tmp and a process behind; the next check must see neither.
            (
                "leave",
                "echo left > /tmp/left-behind; (sleep 300 &) ; true",
            ),
            ("tmp", "test ! -e /tmp/left-behind"),
            ("procs", "! pgrep -x sleep"),
            ("network", udp),
            ("host-a", "hostname"),
            ("host-b", "hostname"),
        ],
    );
    let run_id = settings.run_id.clone();
    let mut verifier = Verifier::new(docker.clone(), settings).expect("verifier");
    verifier.prewarm().await;
    let first = verifier.verify(1, &mut |_| {}).await.expect("verify");
    let by_name = |r: &VerificationResult, n: &str| {
        r.checks
            .iter()
            .find(|c| c.name == n)
            .cloned()
            .expect("check")
    };
    assert!(by_name(&first, "leave").passed);
    assert!(by_name(&first, "tmp").passed, "{first:?}");
    assert!(by_name(&first, "procs").passed, "{first:?}");
    assert!(!by_name(&first, "network").passed, "the network is off");
    let host = |n: &str| read_output(fx.artifacts.path(), &by_name(&first, n));
    assert_ne!(
        host("host-a"),
        host("host-b"),
        "each check has its own container"
    );
    // A second attempt on the same verifier uses the prewarmed spare.
    let second = verifier.verify(2, &mut |_| {}).await.expect("verify again");
    assert_eq!(second.fingerprint, first.fingerprint);
    assert_eq!(
        by_name(&second, "leave").output_file,
        None,
        "nothing was printed"
    );
    verifier.shutdown().await;
    assert_no_containers_left(&docker, &run_id).await;
}

#[test]
fn verification_can_run_on_a_spawned_task() {
    fn assert_send<T: Send>(_: &T) {}
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let _guard = runtime.enter();
    let docker = Docker::connect_with_local_defaults().expect("docker client");
    let fx = Fixture::new(&[]);
    let mut verifier =
        Verifier::new(docker, fx.settings("send", &[("t", "true")])).expect("verifier");
    let mut observe = |_: &CheckReport| {};
    assert_send(&verifier.verify(1, &mut observe));
}

fn bootstrap_settings(fx: &Fixture, run_id: &str, network: bool) -> BootstrapSettings {
    BootstrapSettings {
        image: sandbox::spec::image_from_env(),
        workspace: fx.workspace.path().to_path_buf(),
        run_id: format!("test-bootstrap-{run_id}"),
        network,
        outputs_dir: fx.artifacts.path().join("outputs"),
        timeout: Duration::from_secs(30),
        downloads: None,
        deps: None,
        limits: None,
    }
}

#[tokio::test]
async fn bootstrap_runs_commands_in_order_in_one_container() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[]);
    let settings = bootstrap_settings(&fx, "ok", false);
    let commands = [
        "echo one > steps.txt".to_string(),
        "echo two >> steps.txt && echo state > /tmp/kept-between-commands".to_string(),
        "cat steps.txt".to_string(),
    ];
    let result = run_bootstrap(docker.clone(), &settings, &commands)
        .await
        .expect("bootstrap runs");
    assert!(result.passed, "{result:?}");
    assert_eq!(result.failure, None);
    assert_eq!(result.outputs.len(), 3);
    assert_eq!(
        std::fs::read_to_string(fx.workspace.path().join("steps.txt")).expect("steps"),
        "one\ntwo\n"
    );
    let last = result.outputs[2].output_file.as_deref().expect("output");
    assert_eq!(last, "outputs/bootstrap-3.stdout");
    assert_eq!(
        std::fs::read_to_string(fx.artifacts.path().join(last)).expect("spooled"),
        "one\ntwo\n"
    );
    assert_no_containers_left(&docker, &settings.run_id).await;
}

#[tokio::test]
async fn bootstrap_stops_at_the_first_failure() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[]);
    let settings = bootstrap_settings(&fx, "fail", false);
    let commands = [
        "true".to_string(),
        "echo broken >&2; exit 7".to_string(),
        "touch never.txt".to_string(),
    ];
    let result = run_bootstrap(docker.clone(), &settings, &commands)
        .await
        .expect("bootstrap runs");
    assert!(!result.passed);
    assert_eq!(result.outputs.len(), 2, "the third command never ran");
    assert_eq!(result.outputs[1].exit_code, Some(7));
    assert_eq!(
        result.failure.as_deref(),
        Some(
            "bootstrap command 2 `echo broken >&2; exit 7` exited with code 7: broken (all of it in outputs/bootstrap-2.stderr)"
        ),
        "why, and where the rest is"
    );
    assert!(!fx.workspace.path().join("never.txt").exists());
    assert_no_containers_left(&docker, &settings.run_id).await;
}

#[tokio::test]
async fn bootstrap_network_follows_the_setting() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[]);
    let udp = vec![
        "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.connect(('192.0.2.1', 9))\"".to_string(),
    ];
    let off = run_bootstrap(
        docker.clone(),
        &bootstrap_settings(&fx, "net-off", false),
        &udp,
    )
    .await
    .expect("bootstrap runs");
    assert!(
        !off.passed,
        "UDP connect must fail without network: {off:?}"
    );
    let on = run_bootstrap(docker, &bootstrap_settings(&fx, "net-on", true), &udp)
        .await
        .expect("bootstrap runs");
    assert!(on.passed, "UDP connect works on the bridge network: {on:?}");
}

#[tokio::test]
async fn an_empty_bootstrap_passes_without_a_container() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[]);
    let result = run_bootstrap(docker, &bootstrap_settings(&fx, "empty", false), &[])
        .await
        .expect("bootstrap");
    assert!(result.passed);
    assert!(result.outputs.is_empty());
}

/// A verification dropped at any moment (as a cancelled baseline's is),
/// while its spare starts, while its container starts or while a check
/// runs, leaves no container once the verifier is shut down.
#[tokio::test]
async fn a_verification_dropped_at_any_moment_leaves_nothing_after_shutdown() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let fx = Fixture::new(&[]);
    for (i, after_ms) in [0u64, 20, 80, 200, 400, 800].into_iter().enumerate() {
        let settings = fx.settings(
            &format!("dropped-{i}"),
            &[("first", "sleep 5"), ("second", "true")],
        );
        let run_id = settings.run_id.clone();
        let mut verifier = Verifier::new(docker.clone(), settings).expect("verifier");
        if i % 2 == 0 {
            verifier.prewarm().await;
        }
        let mut observe = |_: &CheckReport| {};
        let verify = verifier.verify(1, &mut observe);
        let ended = tokio::time::timeout(Duration::from_millis(after_ms), verify).await;
        assert!(
            ended.is_err(),
            "the 5 s check was still running at {after_ms} ms"
        );
        verifier.shutdown().await;
        assert_no_containers_left(&docker, &run_id).await;
    }
}
