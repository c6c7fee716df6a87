//! The isolation every command container gets (SPEC §3).

use std::collections::HashMap;
use std::path::PathBuf;

use bollard::models::{ContainerCreateBody, HostConfig, Mount, MountType, ResourcesUlimits};

use super::{SANDBOX_GID, SANDBOX_UID, labels};
use crate::owner::ProcessIdentity;

/// Where the private workspace appears inside the container.
pub const WORKSPACE_MOUNT: &str = "/workspace";
/// The sandbox user's home: a private tmpfs, emptied after every command.
pub const HOME_DIR: &str = "/home/sandbox";
/// The default image, overridable with `MINICODER_SANDBOX_IMAGE`.
pub const DEFAULT_IMAGE: &str = "minicoder-sandbox:v1";

/// The image to use: `MINICODER_SANDBOX_IMAGE` or [`DEFAULT_IMAGE`].
pub fn image_from_env() -> String {
    std::env::var("MINICODER_SANDBOX_IMAGE")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_string())
}

/// Resource limits of one container. The defaults are SPEC §3's.
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
        }
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
    pub fn command_env() -> HashMap<String, String> {
        [
            (
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
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

    /// The container definition: PID 1 is the supervisor given in `cmd`.
    pub fn create_body(&self, cmd: Vec<String>) -> ContainerCreateBody {
        let l = &self.limits;
        let tmpfs = HashMap::from([
            (
                "/tmp".to_string(),
                format!("rw,nosuid,nodev,size={},mode=1777", l.tmp_bytes),
            ),
            (
                HOME_DIR.to_string(),
                format!(
                    "rw,nosuid,nodev,size={},uid={SANDBOX_UID},gid={SANDBOX_GID},mode=0700",
                    l.home_bytes
                ),
            ),
        ]);
        let host_config = HostConfig {
            mounts: Some(vec![Mount {
                target: Some(WORKSPACE_MOUNT.to_string()),
                source: Some(self.workspace.to_string_lossy().into_owned()),
                typ: Some(MountType::BIND),
                read_only: Some(false),
                ..Default::default()
            }]),
            tmpfs: Some(tmpfs),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".to_string()]),
            security_opt: Some(vec!["no-new-privileges".to_string()]),
            nano_cpus: Some(l.nano_cpus),
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
            stdin_once: Some(false),
            tty: Some(false),
            network_disabled: Some(!self.network),
            labels: Some(self.labels()),
            host_config: Some(host_config),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let labels = body.labels.expect("labels");
        assert_eq!(labels.get(labels::RUN).map(String::as_str), Some("run1"));
        assert!(labels.contains_key(labels::OWNER));
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
