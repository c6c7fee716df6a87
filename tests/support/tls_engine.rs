//! A second Docker engine for the tests, reached over TCP with TLS
//! certificates the test makes, as a remote engine would be.
//!
//! It runs in a network namespace of its own (a veth pair joins it to the
//! host), so nothing it does to networks — it would otherwise take down
//! the machine's `docker0` bridge — touches the machine's engine; its data
//! and state live in a temporary folder, and it is stopped and its
//! namespace deleted when the value is dropped. It uses the `vfs` storage
//! driver: it needs no FUSE, and the tests create no container on it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use bollard::Docker;

const PORT: u16 = 2376;
const PROGRAMS: [&str; 6] = ["docker", "dockerd", "ip", "nsenter", "openssl", "pkill"];

pub struct TlsEngine {
    /// `tcp://ADDRESS:2376`, for `DOCKER_HOST`.
    pub host: String,
    /// `ca.pem`, `cert.pem` and `key.pem` of a client the engine trusts,
    /// for `DOCKER_CERT_PATH`.
    pub cert_dir: PathBuf,
    /// The same names, of a client signed by another authority.
    pub stranger_cert_dir: PathBuf,
    storage: String,
    netns: String,
    daemon: Option<Child>,
    /// Killed by the test: started again on the way out, so that it ends
    /// its containers and its mounts itself.
    killed: bool,
    dir: tempfile::TempDir,
}

impl TlsEngine {
    /// Starts one for connections only (no container will run on it).
    pub async fn start_or_skip() -> Option<Self> {
        Self::start_or_skip_with("vfs").await
    }

    /// Starts one that runs containers, with the storage driver of this
    /// machine's engine (`vfs` would copy the whole image per container).
    pub async fn for_runs_or_skip(local: &Docker) -> Option<Self> {
        let driver = local
            .info()
            .await
            .ok()
            .and_then(|i| i.driver)
            .unwrap_or_else(|| "overlay2".into());
        Self::start_or_skip_with(&driver).await
    }

    /// Where this machine cannot start one (not root, a program missing),
    /// the test is skipped visibly, or fails under `MINICODER_REQUIRE_DOCKER`.
    async fn start_or_skip_with(storage: &str) -> Option<Self> {
        let missing: Vec<&str> = PROGRAMS.into_iter().filter(|p| !on_path(p)).collect();
        let root = rustix::process::geteuid().is_root();
        if !missing.is_empty() || !root {
            let why = format!(
                "a second Docker engine needs root and {} (missing: {missing:?}, root: {root})",
                PROGRAMS.join(", ")
            );
            if std::env::var_os("MINICODER_REQUIRE_DOCKER").is_some() {
                panic!("MINICODER_REQUIRE_DOCKER is set but {why}");
            }
            super::skipped(&why);
            return None;
        }
        Some(Self::start(storage).await)
    }

    async fn start(storage: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = std::process::id() % 4096 * 4 + NEXT.fetch_add(1, Ordering::Relaxed) % 4;
        // A /30 of its own in 10.232.0.0/16: .1 the host's end, .2 the engine's.
        let base = n * 4 % 65536;
        let (host_ip, engine_ip) = (address(base + 1), address(base + 2));
        let netns = format!("mc-engine-{n}");
        let (outer, inner) = (format!("mce{n}h"), format!("mce{n}n"));
        let dir = tempfile::Builder::new()
            .prefix("mc-engine")
            .tempdir()
            .expect("tempdir");
        let certs = make_certificates(dir.path(), &engine_ip);
        // Whatever an earlier, killed test left under these names goes first.
        for args in [["netns", "del", &netns], ["link", "del", &outer]] {
            let _ = Command::new("ip").args(args).stderr(Stdio::null()).status();
        }
        for args in [
            vec!["netns", "add", &netns],
            vec![
                "link", "add", &outer, "type", "veth", "peer", "name", &inner,
            ],
            vec!["link", "set", &inner, "netns", &netns],
            vec!["addr", "add", &format!("{host_ip}/30"), "dev", &outer],
            vec!["link", "set", &outer, "up"],
        ] {
            run("ip", &args);
        }
        for args in [
            vec!["addr", "add", &format!("{engine_ip}/30"), "dev", &inner],
            vec!["link", "set", &inner, "up"],
            vec!["link", "set", "lo", "up"],
        ] {
            run(
                "ip",
                &[&["netns", "exec", &netns, "ip"][..], &args].concat(),
            );
        }
        std::fs::write(dir.path().join("daemon.json"), "{}").expect("write daemon.json");
        let mut engine = Self {
            host: format!("tcp://{engine_ip}:{PORT}"),
            cert_dir: certs,
            stranger_cert_dir: dir.path().join("stranger"),
            storage: storage.to_string(),
            netns,
            daemon: None,
            killed: false,
            dir,
        };
        engine.spawn_daemon();
        engine.wait_until_it_answers().await;
        engine
    }

    fn spawn_daemon(&mut self) {
        let dir = self.dir.path();
        let arg = |p: &Path| p.to_str().expect("utf-8 path").to_string();
        let server = dir.join("server");
        let address = self.host.trim_start_matches("tcp://").to_string();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("dockerd.log"))
            .expect("log file");
        // `nsenter`, not `ip netns exec`: that one mounts a fresh /sys, which
        // hides the cgroup hierarchy the engine needs.
        let mut daemon = Command::new("nsenter");
        daemon
            .arg(format!("--net=/var/run/netns/{}", self.netns))
            .arg("dockerd")
            .args(["--config-file", &arg(&dir.join("daemon.json"))])
            .args(["--data-root", &arg(&dir.join("data"))])
            .args(["--exec-root", &arg(&dir.join("exec"))])
            .args(["--pidfile", &arg(&dir.join("dockerd.pid"))])
            .args(["-H", &format!("tcp://{address}")])
            .arg("--tlsverify")
            .args(["--tlscacert", &arg(&server.join("ca.pem"))])
            .args(["--tlscert", &arg(&server.join("cert.pem"))])
            .args(["--tlskey", &arg(&server.join("key.pem"))])
            .args(["--storage-driver", &self.storage, "--bridge", "none"])
            .args(["--iptables=false", "--ip-masq=false", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        // SAFETY: between fork and exec only prctl, which is async-signal-safe.
        // The engine ends with the test process, even one killed outright.
        unsafe {
            use std::os::unix::process::CommandExt;
            daemon.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let daemon = daemon.spawn().expect("start dockerd");
        self.daemon = Some(daemon);
    }

    /// Starts a killed engine again, on the same data (its images kept).
    pub async fn restart(&mut self) {
        assert!(self.daemon.is_none(), "the engine is running");
        self.spawn_daemon();
        self.killed = false;
        self.wait_until_it_answers().await;
    }

    async fn wait_until_it_answers(&self) {
        assert!(
            self.answers_within(Duration::from_secs(60)).await,
            "the second engine did not answer within 60 s: {}",
            std::fs::read_to_string(self.dir.path().join("dockerd.log")).unwrap_or_default()
        );
    }

    async fn answers_within(&self, patience: Duration) -> bool {
        let started = Instant::now();
        while started.elapsed() < patience {
            if let Ok(docker) = self.try_client()
                && docker.ping().await.is_ok()
            {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// The test's own client of the engine (it trusts the engine's authority).
    pub fn client(&self) -> Docker {
        self.try_client()
            .expect("a TLS client of the second engine")
    }

    fn try_client(&self) -> Result<Docker, bollard::errors::Error> {
        let address = self.host.trim_start_matches("tcp://");
        Docker::connect_with_ssl(
            &format!("https://{address}"),
            &self.cert_dir.join("key.pem"),
            &self.cert_dir.join("cert.pem"),
            &self.cert_dir.join("ca.pem"),
            10,
            bollard::API_DEFAULT_VERSION,
        )
    }

    /// The variables that point Docker's own client at this engine.
    pub fn docker_env(&self) -> [(&'static str, std::ffi::OsString); 3] {
        [
            ("DOCKER_HOST", self.host.clone().into()),
            ("DOCKER_TLS_VERIFY", "1".into()),
            ("DOCKER_CERT_PATH", self.cert_dir.clone().into()),
        ]
    }

    /// Copies `image` from this machine's engine into this one.
    pub fn load_image(&self, image: &str) {
        let mut save = Command::new("docker")
            .args(["save", image])
            .env_remove("DOCKER_HOST")
            .stdout(Stdio::piped())
            .spawn()
            .expect("docker save");
        let load = Command::new("docker")
            .arg("load")
            .envs(self.docker_env())
            .stdin(save.stdout.take().expect("piped"))
            .output()
            .expect("docker load");
        assert!(
            save.wait().expect("docker save").success(),
            "docker save {image}"
        );
        assert!(
            load.status.success(),
            "docker load: {}",
            String::from_utf8_lossy(&load.stderr)
        );
    }

    /// Never panics (it runs in `drop`): what fails is left to the kill below.
    async fn remove_every_container(&self) {
        if !self.answers_within(Duration::from_secs(60)).await {
            return;
        }
        let Ok(docker) = self.try_client() else {
            return;
        };
        let all = bollard::query_parameters::ListContainersOptions {
            all: true,
            ..Default::default()
        };
        for c in docker.list_containers(Some(all)).await.unwrap_or_default() {
            if let Some(id) = c.id {
                let force = bollard::query_parameters::RemoveContainerOptions {
                    force: true,
                    ..Default::default()
                };
                let _ = docker.remove_container(&id, Some(force)).await;
            }
        }
    }

    /// Kills the engine's daemon with SIGKILL, as a crash or a lost host
    /// would end it (its containers are left to its next start).
    pub fn kill(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            let _ = daemon.kill();
            let _ = daemon.wait();
            self.killed = true;
        }
    }
}

impl Drop for TlsEngine {
    fn drop(&mut self) {
        if self.killed {
            // A killed engine's containers and mounts are still there: a
            // start ends them (no live restore), then it stops as usual.
            self.spawn_daemon();
            // On a thread of its own: the test's runtime may be this one's caller.
            let this = &*self;
            std::thread::scope(|scope| {
                let _ = scope.spawn(|| {
                    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    else {
                        return;
                    };
                    runtime.block_on(this.remove_every_container());
                });
            });
        }
        if let Some(mut daemon) = self.daemon.take() {
            let pid = daemon.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let until = Instant::now() + Duration::from_secs(15);
            while Instant::now() < until {
                if let Ok(Some(_)) = daemon.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
        // What outlived a killed engine (a container's shim whose containerd
        // died with it) names the engine's folder on its command line.
        let _ = Command::new("pkill")
            .args(["-KILL", "-f"])
            .arg(self.dir.path())
            .status();
        // The engine leaves its data root mounted over itself after a crash.
        let _ = Command::new("umount")
            .arg("-R")
            .arg("-l")
            .arg(self.dir.path().join("data"))
            .stderr(Stdio::null())
            .status();
        // Deleting the namespace deletes the veth pair with it.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .status();
    }
}

fn address(n: u32) -> String {
    format!("10.232.{}.{}", n / 256, n % 256)
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .chain(["/usr/sbin".into(), "/sbin".into()])
            .any(|d| d.join(program).is_file())
    })
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An authority, a server certificate for `engine_ip` and a client
/// certificate it signs (in `<dir>/server` and `<dir>/client`, Docker's
/// file names), and a client of another authority (`<dir>/stranger`).
fn make_certificates(dir: &Path, engine_ip: &str) -> PathBuf {
    let (server, client, stranger) = (dir.join("server"), dir.join("client"), dir.join("stranger"));
    for d in [&server, &client, &stranger] {
        std::fs::create_dir_all(d).expect("certificate folder");
    }
    let ssl = |args: &[&str], cwd: &Path| {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(cwd)
            .output()
            .expect("openssl");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let authority = |d: &Path, name: &str| {
        ssl(
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                &format!("/CN={name}"),
                "-keyout",
                "ca-key.pem",
                "-out",
                "ca.pem",
            ],
            d,
        );
    };
    let signed = |d: &Path, ca: &Path, name: &str, ext: &str| {
        std::fs::write(d.join("ext.cnf"), ext).expect("ext.cnf");
        ssl(
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &format!("/CN={name}"),
                "-keyout",
                "key.pem",
                "-out",
                "req.csr",
            ],
            d,
        );
        let (ca_cert, ca_key) = (ca.join("ca.pem"), ca.join("ca-key.pem"));
        ssl(
            &[
                "x509",
                "-req",
                "-in",
                "req.csr",
                "-CA",
                ca_cert.to_str().expect("utf-8"),
                "-CAkey",
                ca_key.to_str().expect("utf-8"),
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "ext.cnf",
                "-out",
                "cert.pem",
            ],
            d,
        );
    };
    authority(&server, "minicoder test engine authority");
    signed(
        &server,
        &server,
        "engine",
        &format!("subjectAltName=IP:{engine_ip}\nextendedKeyUsage=serverAuth\n"),
    );
    signed(&client, &server, "client", "extendedKeyUsage=clientAuth\n");
    std::fs::copy(server.join("ca.pem"), client.join("ca.pem")).expect("copy ca.pem");
    // Another authority's client: the engine must refuse it.
    authority(&stranger, "another authority");
    signed(
        &stranger,
        &stranger,
        "stranger",
        "extendedKeyUsage=clientAuth\n",
    );
    // The client must trust the engine's authority to get as far as being refused.
    std::fs::copy(server.join("ca.pem"), stranger.join("ca.pem")).expect("copy ca.pem");
    client
}
