//! The tests that build images: a project's `"packages"` and recipe, and a
//! recipe's trust. A build commits its steps slowly on some storage
//! drivers (tens of seconds a step on fuse-overlayfs), so these minutes-long
//! tests live in a module whose name sorts near the front: the test runner
//! starts them first and the quick ones fill the other threads around them,
//! instead of the suite ending on them alone.

use crate::support;

use serde_json::json;
use support::mock_openai::MockResponse;
use support::project_run::Project;
use support::repo_run::{Listener, Repo};

use super::project_trust::{host_from_containers, phone_home, recipe_images_with, remove_images};

#[tokio::test]
async fn packages_build_a_derived_image_once_and_its_program_verifies() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let config = r#"{"packages": ["jq"], "verification": [{"name": "status", "command": "jq -e '.ok == true' status.json"}]}"#;
    let p = Project::new(
        "",
        &[
            (".minicoder.json", config),
            ("status.json", "{\n  \"ok\": false\n}\n"),
        ],
    )
    .await;
    // Start from no derived image, so the first run must build it.
    let (base, base_id) = sandbox_image(&docker).await;
    let tag = minicoder::sandbox::derived::packages_tag(&base_id, &["jq".to_string()]);
    let _ = docker
        .remove_image(
            &tag,
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await;

    let fix = p.patch("status.json", "  \"ok\": false", "  \"ok\": true");
    p.script_fix("jq . status.json", "status.json", &fix);
    let first = p.run("jq-first", &[]).await;
    first.assert_success();
    assert!(
        first.stderr().contains(&format!("building {tag}")),
        "the first run builds {tag}:\n{}",
        first.stderr()
    );
    let built = docker
        .inspect_image(&tag)
        .await
        .expect("the derived image exists");
    // It runs as the sandbox user with the base's command, labelled as
    // minicoder's, and keeps nothing of the container that installed it.
    let config = built.config.clone().expect("a config");
    let base_config = docker
        .inspect_image(&base)
        .await
        .expect("base")
        .config
        .expect("a config");
    assert_eq!(config.user.as_deref(), Some("10001:10001"));
    assert_eq!(config.cmd, base_config.cmd);
    assert_eq!(config.env, base_config.env);
    assert_eq!(config.working_dir, base_config.working_dir);
    let labels = config.labels.unwrap_or_default();
    assert_eq!(labels.get("org.minicoder.derived"), Some(&tag));
    assert_eq!(
        labels.get("org.minicoder.managed").map(String::as_str),
        Some("image")
    );
    for key in [
        "org.minicoder.owner",
        "org.minicoder.role",
        "org.minicoder.run",
    ] {
        assert!(
            labels.get(key).is_none_or(String::is_empty),
            "{key} of the install container: {labels:?}"
        );
    }
    assert_eq!(
        install_containers(&docker, &tag).await,
        0,
        "the install container is gone"
    );

    p.script_fix("jq . status.json", "status.json", &fix);
    let second = p.run("jq-second", &[]).await;
    second.assert_success();
    assert!(
        !second.stderr().contains("building"),
        "the second run builds nothing:\n{}",
        second.stderr()
    );
    let again = docker.inspect_image(&tag).await.expect("still there");
    assert_eq!(built.id, again.id, "the same image, not a rebuild");
    let checks = &second.result["verification"]["checks"];
    assert_eq!(checks[0]["name"], "status");
    assert_eq!(checks[0]["passed"], true);
    let _ = docker
        .remove_image(
            &tag,
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await;
}

#[tokio::test]
async fn a_recipe_of_the_repositorys_own_is_built_on_the_sandbox_image() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    // One step: each step commits the whole image again.
    let recipe = "ARG MINICODER_SANDBOX_IMAGE\nFROM $MINICODER_SANDBOX_IMAGE\nCOPY files/marker.txt /etc/minicoder-marker\n";
    let marker = format!("recipe-{}\n", std::process::id());
    let config = r#"{"verification": [{"name": "marker", "command": "grep -q recipe- /etc/minicoder-marker && test -f ready"}]}"#;
    let p = Project::new(
        "",
        &[
            (".minicoder.json", config),
            (".minicoder/Dockerfile", recipe),
            (".minicoder/files/marker.txt", &marker),
            ("ready.txt", "not yet\n"),
        ],
    )
    .await;
    p.mock.push(MockResponse::tool_calls(&[
        (
            "update_plan",
            json!({"items": [{"id": "1", "content": "mark ready", "status": "in_progress"}]}),
        ),
        (
            "run_shell",
            json!({"command": "cat /etc/minicoder-marker && mv ready.txt ready"}),
        ),
    ]));
    p.mock.push(MockResponse::tool_calls(&[
        (
            "update_plan",
            json!({"items": [{"id": "1", "content": "mark ready", "status": "done"}]}),
        ),
        ("request_completion", json!({"summary": "ready"})),
    ]));
    let run = p.run("recipe", &[]).await;
    run.assert_success();
    assert!(
        run.stderr().contains("from .minicoder/Dockerfile"),
        "{}",
        run.stderr()
    );
    assert!(
        p.tool_results().iter().any(|r| r.contains(marker.trim())),
        "the command container runs the recipe's image"
    );
    let tag = run
        .stderr()
        .split_whitespace()
        .find(|w| w.starts_with("minicoder-project:"))
        .map(|w| w.trim_end_matches(':').to_string())
        .expect("the built tag is named");
    let _ = docker
        .remove_image(
            &tag,
            None::<bollard::query_parameters::RemoveImageOptions>,
            None,
        )
        .await;
}

// Image builds are slow on some storage drivers (a step commits in tens of
// seconds on fuse-overlayfs), so one recipe serves both the network and the
// health-check attacks: one step that phones home, one health check.
#[tokio::test]
async fn a_recipe_is_built_only_when_trusted_reaches_the_host_only_with_network_trust_and_its_health_check_never_runs()
 {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let host = host_from_containers(&docker).await;
    let listener = Listener::start().await;
    let recipe = format!(
        "ARG MINICODER_SANDBOX_IMAGE\nFROM ${{MINICODER_SANDBOX_IMAGE}}\nRUN {} || true\nHEALTHCHECK --interval=1s CMD touch /workspace/health-was-here\n",
        phone_home(&host, listener.port, "recipe")
    );
    let repo = Repo::new(&[(".minicoder/Dockerfile", &recipe)]).await;
    // Other tests build project images meanwhile: this recipe's is the one
    // whose history holds its health check.
    let mine = || recipe_images_with(&docker, "health-was-here");
    let before = mine().await;

    // Untrusted: nothing is built, the run goes on and says why.
    repo.fix();
    let untrusted = repo.run("untrusted", &[]).await;
    assert_eq!(
        untrusted.result["outcome"],
        "success",
        "{}",
        untrusted.stderr()
    );
    let project = untrusted.event("project.config").expect("project.config");
    assert_eq!(project["trusted"], false);
    assert!(
        project["ignored"]
            .to_string()
            .contains(".minicoder/Dockerfile"),
        "{project}"
    );
    assert!(
        untrusted.stderr().contains("not trusted"),
        "{}",
        untrusted.stderr()
    );
    assert_eq!(mine().await, before, "nothing was built");
    assert_eq!(listener.connections(), 0);

    // Trusted without network: built, but its step reaches nothing; and
    // its health check, every second, never runs: three seconds in the
    // command container leave the workspace as the agent made it.
    repo.script("sleep 3; ls -a");
    let trusted = repo.run("trusted", &["--trust-project"]).await;
    assert_eq!(
        trusted.result["outcome"],
        "success",
        "{}\n{}",
        trusted.result,
        trusted.stderr()
    );
    let built: Vec<String> = mine()
        .await
        .into_iter()
        .filter(|t| !before.contains(t))
        .collect();
    assert_eq!(built.len(), 1, "one recipe image: {built:?}");
    assert_eq!(listener.connections(), 0, "no build step reached the host");
    assert_eq!(trusted.result["changed_files"], json!(["pagination.py"]));
    assert!(
        !trusted.patch().contains("health-was-here"),
        "{}",
        trusted.patch()
    );
    let seen = repo.mock.requests()[3].json().to_string();
    assert!(
        seen.contains("pagination.py") && !seen.contains("health-was-here"),
        "{seen}"
    );

    // The same image on the bridge network reaches the listener, so the
    // zero above is the build's missing network, not a listener nobody can
    // reach. (Builds with network trust differ only in the build option,
    // which a unit test holds; a second build here would cost minutes.)
    let control = tokio::process::Command::new("docker")
        .args(["run", "--rm", "--network", "bridge", &built[0], "sh", "-c"])
        .arg(phone_home(&host, listener.port, "control"))
        .output()
        .await
        .expect("docker run");
    for _ in 0..100 {
        if listener.received().contains("control") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        control.status.success(),
        "{}",
        String::from_utf8_lossy(&control.stderr)
    );
    assert_eq!(listener.connections(), 1);
    assert!(listener.received().contains("control"));
    eprintln!("reached the host: untrusted 0, trusted 0; the image on the bridge: 1 connection");
    let all = built;
    remove_images(&docker, &all).await;
}

#[tokio::test]
async fn a_package_debian_does_not_have_fails_the_run_clearly_and_leaves_nothing() {
    let Some(docker) = support::docker_or_skip().await else {
        return;
    };
    let name = format!("minicoder-no-such-package-{}", std::process::id());
    let config = format!(r#"{{"packages": ["{name}"]}}"#);
    let p = Project::new("", &[(".minicoder.json", &config)]).await;
    let (_, base_id) = sandbox_image(&docker).await;
    let tag = minicoder::sandbox::derived::packages_tag(&base_id, std::slice::from_ref(&name));
    let images_before = docker
        .list_images(None::<bollard::query_parameters::ListImagesOptions>)
        .await
        .expect("list images")
        .len();
    let run = p.run("no-such-package", &[]).await;
    assert_ne!(run.result["outcome"], "success", "{}", run.result);
    let said = format!("{}{}", run.result, run.stderr());
    assert!(said.contains(&name), "the name is reported: {said}");
    assert!(
        said.contains("Unable to locate package"),
        "apt-get said why: {said}"
    );
    assert!(
        said.contains("Debian package names"),
        "with what to check: {said}"
    );
    let images_after = docker
        .list_images(None::<bollard::query_parameters::ListImagesOptions>)
        .await
        .expect("list images")
        .len();
    assert_eq!(images_after, images_before, "no image was made");
    assert_eq!(
        install_containers(&docker, &tag).await,
        0,
        "the install container is gone"
    );
}

/// The containers that install the packages of the image `tag`, left or
/// running (other tests' installs may be running beside).
async fn install_containers(docker: &bollard::Docker, tag: &str) -> usize {
    docker
        .list_containers(Some(bollard::query_parameters::ListContainersOptions {
            all: true,
            filters: Some(std::collections::HashMap::from([(
                "label".to_string(),
                vec![format!("org.minicoder.run=build-{tag}")],
            )])),
            ..Default::default()
        }))
        .await
        .expect("list containers")
        .len()
}

/// The sandbox image runs use, and its id.
async fn sandbox_image(docker: &bollard::Docker) -> (String, String) {
    let base = minicoder::sandbox::spec::image_from_env();
    let id = docker
        .inspect_image(&base)
        .await
        .expect("the sandbox image")
        .id
        .expect("an id");
    (base, id)
}
