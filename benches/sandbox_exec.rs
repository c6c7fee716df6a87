//! Overhead of one sandboxed command, side by side with the Docker baselines,
//! in one run on one machine:
//!
//! - minicoder: `true` through the run's command container (supervisor)
//! - the same in a 50,000-entry workspace, without and with the workspace
//!   limits held (what the limits add to a command that writes nothing)
//! - `docker exec` into a running container, through the API and the CLI
//! - a fresh container per command: API create+start+wait+remove, and
//!   `docker run --rm IMAGE true`
//!
//! Prints medians, p90s and the ratio of each baseline to minicoder.
//! Run: `cargo bench --bench sandbox_exec` (needs Docker and the image).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::{Duration, Instant};

use bollard::exec::{CreateExecOptions, StartExecResults};
use bollard::query_parameters::RemoveContainerOptions;
use futures_util::StreamExt;
use minicoder::sandbox::{self, CommandContainer, CommandRequest, ContainerSpec};

struct Sample {
    name: &'static str,
    times: Vec<Duration>,
}

impl Sample {
    fn quantile(&self, q: f64) -> Duration {
        let mut t = self.times.clone();
        t.sort();
        t[((t.len() - 1) as f64 * q).round() as usize]
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn time_n<F, Fut>(n: usize, mut f: F) -> Vec<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..3 {
        f().await; // warm-up
    }
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        f().await;
        times.push(t.elapsed());
    }
    times
}

fn main() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(bench());
}

async fn bench() {
    let quick = std::env::var_os("MINICODER_BENCH_QUICK").is_some();
    let (n_ours, n_exec, n_run) = if quick { (50, 10, 3) } else { (300, 40, 12) };
    let docker = sandbox::connect().await.expect("Docker");
    let image = sandbox::spec::image_from_env();
    sandbox::image::ensure_image(&docker, &image, &mut |_| {})
        .await
        .expect("sandbox image");
    let ws = tempfile::tempdir().expect("tempdir");
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(
            ws.path(),
            Some(sandbox::SANDBOX_UID),
            Some(sandbox::SANDBOX_GID),
        )
        .expect("chown");
    }
    let spec = ContainerSpec::new(&image, ws.path(), "bench");
    let mut ours = CommandContainer::start(docker.clone(), spec.clone())
        .await
        .expect("command container");
    let mut ours_times = Vec::with_capacity(n_ours);
    for i in 0..n_ours + 3 {
        let t = Instant::now();
        let out = ours.run(CommandRequest::new("true")).await.expect("run");
        let elapsed = t.elapsed();
        assert!(out.success());
        if i >= 3 {
            ours_times.push(elapsed); // the first three are warm-up
        }
    }

    // The same command with the workspace limits held, in a workspace of
    // 50,000 entries: what the limits add to a command that writes nothing.
    let big = tempfile::tempdir().expect("tempdir");
    for d in 0..500 {
        let dir = big.path().join(format!("d{d}"));
        std::fs::create_dir(&dir).expect("mkdir");
        for f in 0..99 {
            std::fs::write(dir.join(format!("f{f}")), b"x").expect("write");
        }
    }
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(
            big.path(),
            Some(sandbox::SANDBOX_UID),
            Some(sandbox::SANDBOX_GID),
        )
        .expect("chown");
    }
    let mut limited = CommandContainer::start(
        docker.clone(),
        ContainerSpec::new(&image, big.path(), "bench-limits"),
    )
    .await
    .expect("command container");
    let mut plain_times = Vec::with_capacity(n_ours);
    let mut limited_times = Vec::with_capacity(n_ours);
    for watched in [false, true] {
        if watched {
            limited.set_limits(Some(minicoder::workspace::WorkspaceLimits::default()));
        }
        for i in 0..n_ours + 3 {
            let t = Instant::now();
            let out = limited.run(CommandRequest::new("true")).await.expect("run");
            let elapsed = t.elapsed();
            assert!(out.success());
            if i >= 3 {
                if watched {
                    limited_times.push(elapsed);
                } else {
                    plain_times.push(elapsed);
                }
            }
        }
    }
    limited.shutdown().await;
    let plain = Sample {
        name: "",
        times: plain_times,
    };
    let watched = Sample {
        name: "",
        times: limited_times,
    };
    println!(
        "50,000-entry workspace: `true` {:.2} ms without the limits, {:.2} ms with them (median; p90 {:.2} / {:.2}): the limits add {:.2} ms",
        ms(plain.quantile(0.5)),
        ms(watched.quantile(0.5)),
        ms(plain.quantile(0.9)),
        ms(watched.quantile(0.9)),
        ms(watched.quantile(0.5)) - ms(plain.quantile(0.5)),
    );

    // docker exec into the (running) command container.
    let id = ours.container_id().expect("running").to_string();
    let exec_api = time_n(n_exec, || {
        let docker = docker.clone();
        let id = id.clone();
        async move {
            let exec = docker
                .create_exec(
                    &id,
                    CreateExecOptions {
                        cmd: Some(vec!["true".to_string()]),
                        attach_stdout: Some(true),
                        attach_stderr: Some(true),
                        ..Default::default()
                    },
                )
                .await
                .expect("create exec");
            if let StartExecResults::Attached { mut output, .. } =
                docker.start_exec(&exec.id, None).await.expect("start exec")
            {
                while output.next().await.is_some() {}
            }
            let inspected = docker.inspect_exec(&exec.id).await.expect("inspect exec");
            assert_eq!(inspected.exit_code, Some(0));
        }
    })
    .await;
    let exec_cli = time_n(n_exec, || {
        let id = id.clone();
        async move {
            let st = Command::new("docker")
                .args(["exec", &id, "true"])
                .status()
                .expect("docker exec");
            assert!(st.success());
        }
    })
    .await;
    ours.shutdown().await;

    // A fresh container per command, through the API, with the same limits.
    let api_run = time_n(n_run, || {
        let docker = docker.clone();
        let spec = spec.clone();
        async move {
            let mut body = spec.create_body(vec!["true".into()]);
            body.open_stdin = Some(false);
            body.attach_stdin = Some(false);
            let c = docker.create_container(None, body).await.expect("create");
            docker.start_container(&c.id, None).await.expect("start");
            let mut wait = docker.wait_container(&c.id, None);
            while wait.next().await.is_some() {}
            docker
                .remove_container(
                    &c.id,
                    Some(RemoveContainerOptions {
                        force: true,
                        ..Default::default()
                    }),
                )
                .await
                .expect("remove");
        }
    })
    .await;
    let run_rm = time_n(n_run, || {
        let image = image.clone();
        async move {
            let st = Command::new("docker")
                .args(["run", "--rm", "--network", "none", &image, "true"])
                .status()
                .expect("docker run");
            assert!(st.success());
        }
    })
    .await;

    let samples = [
        Sample {
            name: "minicoder run_shell \"true\"",
            times: ours_times,
        },
        Sample {
            name: "docker exec (API)",
            times: exec_api,
        },
        Sample {
            name: "docker exec (CLI)",
            times: exec_cli,
        },
        Sample {
            name: "create+start+wait+remove (API)",
            times: api_run,
        },
        Sample {
            name: "docker run --rm IMAGE true",
            times: run_rm,
        },
    ];
    let base = samples[0].quantile(0.5);
    println!(
        "\nsandboxed command overhead (image {image}; {} samples of ours)",
        samples[0].times.len()
    );
    println!(
        "{:<34} {:>10} {:>10} {:>14}",
        "what", "median ms", "p90 ms", "× minicoder"
    );
    for s in &samples {
        let med = s.quantile(0.5);
        println!(
            "{:<34} {:>10.2} {:>10.2} {:>14.1}",
            s.name,
            ms(med),
            ms(s.quantile(0.9)),
            med.as_secs_f64() / base.as_secs_f64()
        );
    }
    let run_med = samples[4].quantile(0.5);
    println!(
        "\nbudget: median ≤ 25 ms and ≤ 0.07 × docker run --rm: {:.2} ms = {:.3} × docker run --rm → {}",
        ms(base),
        base.as_secs_f64() / run_med.as_secs_f64(),
        if ms(base) <= 25.0 && base.as_secs_f64() <= 0.07 * run_med.as_secs_f64() {
            "within budget"
        } else {
            "OVER BUDGET"
        }
    );
}
