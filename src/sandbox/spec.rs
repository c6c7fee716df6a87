//! The isolation every command container gets.

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, ResourcesUlimits};

use super::{SANDBOX_GID, SANDBOX_UID, labels};
use crate::owner::ProcessIdentity;

/// Where the private workspace appears inside the container.
pub(crate) const WORKSPACE_MOUNT: &str = "/workspace";
/// The sandbox user's home: a private tmpfs, emptied after every command.
pub(crate) const HOME_DIR: &str = "/home/sandbox";
/// The default image, overridable with `MINICODER_SANDBOX_IMAGE`.
pub(crate) const DEFAULT_IMAGE: &str = "minicoder-sandbox:v1";
/// Where a project's download cache appears, in bootstrap containers only
/// (see [`ContainerSpec::downloads`]).
pub(crate) const CACHE_DIR: &str = "/cache";
/// Where a run's installed dependencies appear (see [`ContainerSpec::deps`]).
pub(crate) const DEPS_DIR: &str = "/deps";
/// Where the host's certificate authorities appear in containers with network.
pub(crate) const CA_BUNDLE_MOUNT: &str = "/etc/ssl/minicoder-host-ca.pem";
/// The host's CA bundle, in the order distributions keep it.
const HOST_CA_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
];

/// The image to use: `MINICODER_SANDBOX_IMAGE` or [`DEFAULT_IMAGE`].
pub fn image_from_env() -> String {
    std::env::var("MINICODER_SANDBOX_IMAGE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_string())
}

/// Resource limits of one container; the defaults are the contract every run gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub nano_cpus: i64,
    pub memory_bytes: i64,
    pub pids: i64,
    pub tmp_bytes: i64,
    pub home_bytes: i64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            nano_cpus: 2_000_000_000,
            memory_bytes: 1 << 30,
            pids: 128,
            tmp_bytes: 256 << 20,
            home_bytes: 64 << 20,
        }
    }
}

/// What a command container is for; recorded as a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Command,
    Verify,
    Bootstrap,
    Probe,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Command => "command",
            Role::Verify => "verify",
            Role::Bootstrap => "bootstrap",
            Role::Probe => "probe",
        }
    }
}

/// Everything needed to create one command container.
#[derive(Debug, Clone)]
pub struct ContainerSpec {
    pub image: String,
    /// Host path of the private workspace: the only writable host path.
    pub workspace: PathBuf,
    pub run_id: String,
    pub role: Role,
    pub network: bool,
    pub limits: Limits,
    pub owner: ProcessIdentity,
    /// The project's download cache volume (registry archives and indexes,
    /// never code or tool configuration: see [`super::caches`]), mounted
    /// writable at [`CACHE_DIR`] in the bootstrap container and nowhere else.
    pub downloads: Option<String>,
    /// The run's dependency directory on the host (what the bootstrap
    /// installs outside the workspace: the cargo registry, Go modules),
    /// mounted at [`DEPS_DIR`]: writable for the bootstrap, read-only for
    /// every other container of the run, verification included.
    pub deps: Option<PathBuf>,
    /// The limits every command in this container is held to (the
    /// workspace and the dependency directory counted together).
    pub workspace_limits: Option<crate::workspace::WorkspaceLimits>,
    /// The host's CA bundle, mounted read-only when the container has network
    /// (a TLS-intercepting proxy then still works). Not a credential.
    pub ca_bundle: Option<PathBuf>,
    /// Work nobody waits for (the baseline verification): the lowest CPU
    /// weight, so it takes only what the run's own work leaves idle.
    pub background: bool,
    /// The engine does not see this machine's files: the workspace is a
    /// volume on it, kept in step around every command
    /// ([`super::remote_files`]).
    pub remote_files: bool,
}

/// The host's CA bundle: the file `SSL_CERT_FILE` names, else the system's.
pub(crate) fn host_ca_bundle() -> Option<PathBuf> {
    let named = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    named
        .into_iter()
        .chain(HOST_CA_BUNDLES.iter().map(PathBuf::from))
        .filter_map(|p| p.canonicalize().ok())
        .find(|p| p.is_file())
}

impl ContainerSpec {
    pub fn new(
        image: impl Into<String>,
        workspace: impl Into<PathBuf>,
        run_id: impl Into<String>,
    ) -> Self {
        Self {
            image: image.into(),
            workspace: workspace.into(),
            run_id: run_id.into(),
            role: Role::Command,
            network: false,
            limits: Limits::default(),
            owner: ProcessIdentity::current(),
            downloads: None,
            deps: None,
            workspace_limits: None,
            ca_bundle: host_ca_bundle(),
            background: false,
            remote_files: super::docker::files_are_remote(),
        }
    }

    /// The CA bundle to mount: only with network, and only where the engine
    /// sees this machine's files (elsewhere the image's own bundle holds).
    fn mounted_ca_bundle(&self) -> Option<&PathBuf> {
        self.ca_bundle
            .as_ref()
            .filter(|_| self.network && !self.remote_files)
    }

    /// The CA bundle to send with the workspace to an engine that does not
    /// see this machine's files: only with network.
    pub(crate) fn shipped_ca_bundle(&self) -> Option<&PathBuf> {
        self.ca_bundle
            .as_ref()
            .filter(|_| self.network && self.remote_files)
    }

    /// The volume that stands for the dependency folder on an engine that
    /// does not see this machine's files: one per folder (so per run).
    pub(crate) fn deps_volume(&self) -> Option<String> {
        use sha2::Digest;
        let deps = self.deps.as_ref().filter(|_| self.remote_files)?;
        let digest = sha2::Sha256::digest(deps.as_os_str().as_encoded_bytes());
        Some(format!("minicoder-deps-{}", &hex::encode(digest)[..24]))
    }

    pub fn labels(&self) -> HashMap<String, String> {
        HashMap::from([
            (labels::MANAGED.to_string(), "true".to_string()),
            (labels::RUN.to_string(), self.run_id.clone()),
            (labels::OWNER.to_string(), self.owner.to_label()),
            (labels::ROLE.to_string(), self.role.as_str().to_string()),
        ])
    }

    /// The environment of commands: fixed, nothing from the host.
    pub(crate) fn command_env() -> HashMap<String, String> {
        [
            // The venv a Python project's install makes in the run's
            // dependency folder comes first: checks run with its packages, as
            // they would activated. Commands and checks can only read it (and
            // nothing under /workspace is ever on PATH).
            (
                "PATH",
                "/deps/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            ),
            ("HOME", HOME_DIR),
            ("USER", "sandbox"),
            ("LOGNAME", "sandbox"),
            ("LANG", "C.UTF-8"),
            ("TMPDIR", "/tmp"),
            ("TERM", "dumb"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    /// The environment of this container's commands: [`Self::command_env`]
    /// plus what the toolchains need here (a per-project cache, offline mode
    /// without network, the host's CA bundle with it). Nothing from the host.
    pub fn env(&self) -> HashMap<String, String> {
        let mut env = Self::command_env();
        let mut set = |k: &str, v: &str| {
            env.insert(k.to_string(), v.to_string());
        };
        // Toolchains stay the image's, and nothing phones home.
        set("GOTOOLCHAIN", "local");
        set("NPM_CONFIG_UPDATE_NOTIFIER", "false");
        set("NPM_CONFIG_FUND", "false");
        set("NPM_CONFIG_AUDIT", "false");
        set("NPM_CONFIG_LOGS_DIR", "/tmp/npm-logs");
        set("PIP_DISABLE_PIP_VERSION_CHECK", "1");
        set("YARN_ENABLE_TELEMETRY", "0");
        if self.deps.is_some() {
            set("CARGO_HOME", "/deps/cargo");
            set("GOMODCACHE", "/deps/go/mod");
        }
        if self.role == Role::Bootstrap {
            // (What it compiles stays in its container's /tmp: the image's
            // `go` wrapper gives every container a writable build cache over
            // the warm one, and no build output is kept for another.)
            // Removable by the host and the next bootstrap.
            set("GOFLAGS", "-modcacherw");
            if self.downloads.is_some() {
                set("NPM_CONFIG_CACHE", "/cache/npm");
                set("NPM_CONFIG_STORE_DIR", "/cache/pnpm");
                set("YARN_CACHE_FOLDER", "/cache/yarn");
                set("PIP_CACHE_DIR", "/cache/pip");
            }
        }
        if !self.network {
            // Fail at once with a clear message instead of retrying a network
            // that is not there; what the cache holds is used.
            set("CARGO_NET_OFFLINE", "true");
            set("GOPROXY", "off");
            set("NPM_CONFIG_OFFLINE", "true");
        }
        let bundle = match (self.mounted_ca_bundle(), self.shipped_ca_bundle()) {
            (Some(_), _) => Some(CA_BUNDLE_MOUNT),
            (None, Some(_)) => Some(super::remote_files::SHIPPED_CA_BUNDLE),
            (None, None) => None,
        };
        if let Some(bundle) = bundle {
            for var in [
                "SSL_CERT_FILE",
                "REQUESTS_CA_BUNDLE",
                "PIP_CERT",
                "CARGO_HTTP_CAINFO",
                "GIT_SSL_CAINFO",
                "CURL_CA_BUNDLE",
                "NODE_EXTRA_CA_CERTS",
                "NPM_CONFIG_CAFILE",
            ] {
                set(var, bundle);
            }
        }
        env
    }

    /// What the container mounts: the workspace (this machine's folder, or
    /// the `volumes` on the engine), the download cache for the bootstrap,
    /// the dependency folder, the CA bundle.
    fn mounts(&self, volumes: Option<&super::remote_files::Volumes>) -> Vec<Mount> {
        let mut mounts = match volumes {
            None => vec![Mount {
                target: Some(WORKSPACE_MOUNT.to_string()),
                source: Some(self.workspace.to_string_lossy().into_owned()),
                typ: Some(MountType::BIND),
                read_only: Some(false),
                ..Default::default()
            }],
            Some(v) => [
                (WORKSPACE_MOUNT, &v.workspace),
                (super::remote_files::SYNC_MOUNT, &v.sync),
            ]
            .into_iter()
            .map(|(target, name)| Mount {
                target: Some(target.to_string()),
                source: Some(name.clone()),
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                ..Default::default()
            })
            .collect(),
        };
        let bootstrap = self.role == Role::Bootstrap;
        if let Some(volume) = self.downloads.as_ref().filter(|_| bootstrap) {
            mounts.push(Mount {
                target: Some(CACHE_DIR.to_string()),
                source: Some(volume.clone()),
                typ: Some(MountType::VOLUME),
                read_only: Some(false),
                // Nothing of the image's `/cache` (its warm Go build cache)
                // is copied into the volume.
                volume_options: Some(bollard::models::MountVolumeOptions {
                    no_copy: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
        if let Some(deps) = &self.deps {
            let (source, typ) = match self.deps_volume() {
                Some(volume) => (volume, MountType::VOLUME),
                None => (deps.to_string_lossy().into_owned(), MountType::BIND),
            };
            mounts.push(Mount {
                target: Some(DEPS_DIR.to_string()),
                source: Some(source),
                typ: Some(typ),
                read_only: Some(!bootstrap),
                ..Default::default()
            });
        }
        if let Some(bundle) = self.mounted_ca_bundle() {
            mounts.push(Mount {
                target: Some(CA_BUNDLE_MOUNT.to_string()),
                source: Some(bundle.to_string_lossy().into_owned()),
                typ: Some(MountType::BIND),
                read_only: Some(true),
                ..Default::default()
            });
        }
        mounts
    }

    /// The container definition: PID 1 is the supervisor given in `cmd`.
    pub fn create_body(&self, cmd: Vec<String>) -> ContainerCreateBody {
        self.create_body_with(cmd, None)
    }

    /// [`Self::create_body`]; with `volumes`, the workspace is the volume
    /// of that name and not this machine's folder.
    pub(crate) fn create_body_with(
        &self,
        cmd: Vec<String>,
        volumes: Option<&super::remote_files::Volumes>,
    ) -> ContainerCreateBody {
        let l = &self.limits;
        // Executable (Docker's default is noexec): `go test`, build scripts and
        // lifecycle scripts run what they build there. The supervisor empties
        // both after every command: nothing survives, whatever ran.
        let tmpfs = HashMap::from([
            (
                "/tmp".to_string(),
                format!("rw,exec,nosuid,nodev,size={},mode=1777", l.tmp_bytes),
            ),
            (
                HOME_DIR.to_string(),
                format!(
                    "rw,exec,nosuid,nodev,size={},uid={SANDBOX_UID},gid={SANDBOX_GID},mode=0700",
                    l.home_bytes
                ),
            ),
        ]);
        let mounts = self.mounts(volumes);
        let host_config = HostConfig {
            mounts: Some(mounts),
            tmpfs: Some(tmpfs),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".to_string()]),
            security_opt: Some(vec!["no-new-privileges".to_string()]),
            nano_cpus: Some(l.nano_cpus),
            // Docker's smallest share (cgroup v2 weight 1) against the default 1024.
            cpu_shares: self.background.then_some(2),
            memory: Some(l.memory_bytes),
            memory_swap: Some(l.memory_bytes),
            pids_limit: Some(l.pids),
            network_mode: Some(if self.network { "bridge" } else { "none" }.to_string()),
            ipc_mode: Some("private".to_string()),
            ulimits: Some(vec![ResourcesUlimits {
                name: Some("core".to_string()),
                soft: Some(0),
                hard: Some(0),
            }]),
            init: Some(false),
            auto_remove: Some(false),
            ..Default::default()
        };
        ContainerCreateBody {
            image: Some(self.image.clone()),
            user: Some(format!("{SANDBOX_UID}:{SANDBOX_GID}")),
            cmd: Some(cmd),
            entrypoint: Some(vec![]),
            env: Some(vec![
                "PATH=/usr/local/bin:/usr/bin:/bin".to_string(),
                format!("HOME={HOME_DIR}"),
            ]),
            working_dir: Some(WORKSPACE_MOUNT.to_string()),
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            open_stdin: Some(true),
            // Docker closes the supervisor's stdin when this process detaches,
            // even killed: the supervisor then ends everything (no orphans).
            stdin_once: Some(true),
            tty: Some(false),
            network_disabled: Some(!self.network),
            labels: Some(self.labels()),
            host_config: Some(host_config),
            healthcheck: Some(no_health_check()),
            ..Default::default()
        }
    }
}

/// Switches off any `HEALTHCHECK` the image declares: Docker would run it
/// every interval inside the container, outside any command, where nothing
/// bounds, records or verifies what it does.
pub(crate) fn no_health_check() -> bollard::models::HealthConfig {
    bollard::models::HealthConfig {
        test: Some(vec!["NONE".to_string()]),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_work_gets_the_lowest_cpu_weight_and_the_same_limits() {
        let mut spec = ContainerSpec::new("img", "/ws", "run1");
        let normal = spec.create_body(vec!["true".into()]).host_config;
        assert_eq!(normal.expect("host config").cpu_shares, None);
        spec.background = true;
        let hc = spec.create_body(vec!["true".into()]).host_config;
        let hc = hc.expect("host config");
        assert_eq!(hc.cpu_shares, Some(2));
        assert_eq!(
            hc.nano_cpus,
            Some(2_000_000_000),
            "the ceiling is unchanged"
        );
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
    }

    #[test]
    fn defaults_are_the_spec_limits_and_no_network() {
        let spec = ContainerSpec::new("img", "/ws", "run1");
        let body = spec.create_body(vec!["python3".into()]);
        let hc = body.host_config.expect("host config");
        assert_eq!(hc.nano_cpus, Some(2_000_000_000));
        assert_eq!(hc.memory, Some(1 << 30));
        assert_eq!(hc.memory_swap, Some(1 << 30));
        assert_eq!(hc.pids_limit, Some(128));
        assert_eq!(hc.readonly_rootfs, Some(true));
        assert_eq!(hc.cap_drop, Some(vec!["ALL".to_string()]));
        assert_eq!(hc.network_mode.as_deref(), Some("none"));
        assert_eq!(body.user.as_deref(), Some("10001:10001"));
        let mounts = hc.mounts.expect("mounts");
        assert_eq!(mounts.len(), 1, "the workspace is the only host path");
        assert_eq!(mounts[0].source.as_deref(), Some("/ws"));
        assert!(hc.binds.is_none());
        let health = body.healthcheck.as_ref().and_then(|h| h.test.clone());
        assert_eq!(
            health,
            Some(vec!["NONE".to_string()]),
            "no health check runs"
        );
        let labels = body.labels.expect("labels");
        assert_eq!(labels.get(labels::RUN).map(String::as_str), Some("run1"));
        assert!(labels.contains_key(labels::OWNER));
    }

    #[test]
    fn scratch_space_executes_and_only_the_bootstrap_sees_the_download_cache() {
        let mut spec = ContainerSpec::new("img", "/ws", "run1");
        spec.downloads = Some("minicoder-cache-0123".into());
        spec.deps = Some("/state/workspaces/run1-deps".into());
        let mount = |spec: &ContainerSpec, target: &str| {
            spec.create_body(vec!["python3".into()])
                .host_config
                .and_then(|h| h.mounts)
                .unwrap_or_default()
                .into_iter()
                .find(|m| m.target.as_deref() == Some(target))
        };
        let hc = spec
            .create_body(vec!["python3".into()])
            .host_config
            .expect("host config");
        let tmpfs = hc.tmpfs.expect("tmpfs");
        assert!(tmpfs["/tmp"].split(',').any(|o| o == "exec"), "{tmpfs:?}");
        assert!(!tmpfs["/tmp"].contains("noexec"));
        for role in [Role::Command, Role::Verify, Role::Probe] {
            spec.role = role;
            assert!(mount(&spec, CACHE_DIR).is_none(), "{role:?} has no cache");
            let deps = mount(&spec, DEPS_DIR).expect("the deps are mounted");
            assert_eq!(deps.read_only, Some(true), "{role:?}");
            let env = spec.env();
            assert_eq!(env["CARGO_HOME"], "/deps/cargo");
            assert!(!env.contains_key("NPM_CONFIG_CACHE"));
            assert!(!env.contains_key("GOCACHE"), "the image's warm cache");
        }
        spec.role = Role::Bootstrap;
        let cache = mount(&spec, CACHE_DIR).expect("the bootstrap has the cache");
        assert_eq!(cache.typ, Some(MountType::VOLUME));
        assert_eq!(cache.read_only, Some(false));
        assert_eq!(
            mount(&spec, DEPS_DIR).and_then(|m| m.read_only),
            Some(false)
        );
        let env = spec.env();
        assert_eq!(env["CARGO_NET_OFFLINE"], "true");
        assert_eq!(env["GOPROXY"], "off");
        assert_eq!(env["NPM_CONFIG_CACHE"], "/cache/npm");
        assert!(!env.contains_key("GOCACHE"), "the wrapper's writable cache");
        assert!(
            !env.contains_key("SSL_CERT_FILE"),
            "no network, no CA bundle"
        );
    }

    #[test]
    fn with_network_the_host_ca_bundle_is_mounted_read_only() {
        let bundle = tempfile::NamedTempFile::new().expect("bundle");
        let mut spec = ContainerSpec::new("img", "/ws", "run1");
        spec.network = true;
        spec.ca_bundle = Some(bundle.path().to_path_buf());
        let env = spec.env();
        for var in [
            "SSL_CERT_FILE",
            "PIP_CERT",
            "CARGO_HTTP_CAINFO",
            "GIT_SSL_CAINFO",
            "NODE_EXTRA_CA_CERTS",
        ] {
            assert_eq!(env[var], CA_BUNDLE_MOUNT, "{var}");
        }
        assert!(!env.contains_key("CARGO_NET_OFFLINE"));
        let mounts = spec
            .create_body(vec![])
            .host_config
            .and_then(|h| h.mounts)
            .expect("mounts");
        let ca = mounts
            .iter()
            .find(|m| m.target.as_deref() == Some(CA_BUNDLE_MOUNT))
            .expect("the bundle is mounted");
        assert_eq!(ca.read_only, Some(true));
        assert_eq!(ca.source.as_deref(), bundle.path().to_str());
    }

    #[test]
    fn command_env_holds_nothing_from_the_host() {
        // SAFETY: tests in this module do not read this variable concurrently.
        unsafe { std::env::set_var("MINICODER_TEST_SECRET", "leak") };
        let env = ContainerSpec::command_env();
        assert!(!env.contains_key("MINICODER_TEST_SECRET"));
        assert!(env.values().all(|v| v != "leak"));
        assert_eq!(env.get("HOME").map(String::as_str), Some(HOME_DIR));
    }
}
