//! Credential files kept out of the workspace: whatever Git says
//! about them, tracked or not, they are not copied, so no command and no
//! model ever sees them, and a patch that would add or change one is
//! refused. The run's manifest lists what was left out, by path only.
//!
//! The list is gitignore patterns, matched case-insensitively against the
//! path and each of its parents; `.minicoder.json` appends its own under
//! `secret_paths` (later patterns win, so `!.env.test` keeps a file the
//! defaults leave out).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};

use super::git_path::quote;

/// The default credential paths.
pub const DEFAULT_SECRET_PATHS: &[&str] = &[
    ".env*",
    "!.env*.example",
    "!.env*.sample",
    "!.env*.template",
    "!.env*.dist",
    ".npmrc",
    ".pypirc",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".aws/",
    ".ssh/",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.pem",
    "*.key",
    "**/.docker/config.json",
    "**/.kube/config",
    "credentials.json",
];

/// Why a source path is not in the workspace.
pub const REASON_CREDENTIAL: &str = "credential file";
/// A path git refuses (see [`crate::workspace::verify_path`]) cannot be committed.
pub const REASON_GIT_REFUSES: &str = "a path git refuses";

/// One source path left out of the workspace, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// Quoted as git quotes it when it is not plain printable ASCII.
    pub path: String,
    pub reason: String,
}

impl LeftOut {
    pub(crate) fn new(path: &[u8], reason: &str) -> Self {
        Self {
            path: quote(path).into_owned(),
            reason: reason.to_string(),
        }
    }
}

/// The credential-path patterns of a run.
#[derive(Debug, Clone)]
pub struct SecretPaths {
    matcher: Gitignore,
    patterns: Vec<String>,
}

impl Default for SecretPaths {
    /// The default list only.
    fn default() -> Self {
        // The defaults are constants that a test builds; should that ever
        // fail, every path counts as a credential rather than none.
        Self::with_overrides(&[]).unwrap_or_else(|_| Self::everything())
    }
}

impl SecretPaths {
    /// The defaults followed by `overrides` (gitignore lines).
    pub fn with_overrides(overrides: &[String]) -> Result<Self, String> {
        let mut builder = GitignoreBuilder::new("");
        builder.case_insensitive(true).map_err(|e| e.to_string())?;
        let mut patterns = Vec::new();
        for line in DEFAULT_SECRET_PATHS
            .iter()
            .copied()
            .chain(overrides.iter().map(String::as_str))
        {
            let line = line.trim();
            if line.is_empty() || line == "!" || line.starts_with('#') {
                return Err(format!(
                    "`{line}` is not a path pattern; write one gitignore pattern per entry, `!PATTERN` to keep a path"
                ));
            }
            builder
                .add_line(None, line)
                .map_err(|e| format!("`{line}` is not a valid gitignore pattern: {e}"))?;
            patterns.push(line.to_string());
        }
        let matcher = builder.build().map_err(|e| e.to_string())?;
        Ok(Self { matcher, patterns })
    }

    fn everything() -> Self {
        let mut builder = GitignoreBuilder::new("");
        let _ = builder.add_line(None, "*");
        Self {
            matcher: builder.build().unwrap_or_else(|_| Gitignore::empty()),
            patterns: vec!["*".to_string()],
        }
    }

    /// Whether `rel` (workspace-relative, `/`-separated), or a directory it
    /// lies in, is a credential path.
    pub fn matches(&self, rel: &[u8], is_dir: bool) -> bool {
        let path = Path::new(OsStr::from_bytes(rel));
        if path.as_os_str().is_empty() || path.has_root() {
            return false;
        }
        self.matcher
            .matched_path_or_any_parents(path, is_dir)
            .is_ignore()
    }

    /// The patterns in effect, defaults first.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(paths: &SecretPaths, rel: &str) -> bool {
        paths.matches(rel.as_bytes(), false)
    }

    #[test]
    fn the_defaults_build() {
        let built = SecretPaths::with_overrides(&[]).expect("defaults build");
        assert_eq!(built.patterns().len(), DEFAULT_SECRET_PATHS.len());
    }

    #[test]
    fn every_default_credential_path_is_caught_at_any_depth() {
        let paths = SecretPaths::default();
        for rel in [
            ".env",
            ".env.production",
            ".env.local",
            "app/.env",
            ".envrc",
            ".npmrc",
            "web/.npmrc",
            ".pypirc",
            ".netrc",
            ".git-credentials",
            ".aws/credentials",
            ".aws/config",
            "home/.aws/credentials",
            ".ssh/id_ed25519",
            ".ssh/known_hosts",
            "id_rsa",
            "id_rsa.pub",
            "keys/id_ed25519",
            "deploy/id_ecdsa",
            "server.pem",
            "certs/tls.key",
            "TLS.KEY",
            ".docker/config.json",
            "ci/.docker/config.json",
            ".kube/config",
            "ops/.kube/config",
            "credentials.json",
            "gcp/credentials.json",
            ".ENV",
        ] {
            assert!(secret(&paths, rel), "not caught: {rel}");
        }
    }

    #[test]
    fn examples_and_ordinary_files_are_kept() {
        let paths = SecretPaths::default();
        for rel in [
            ".env.example",
            "app/.env.local.example",
            ".env.sample",
            ".env.template",
            ".env.dist",
            "environment.py",
            "src/env.rs",
            "keyboard.py",
            "monkey.rs",
            "docs/ssh.md",
            ".docker/other.json",
            "config.json",
            "kube/config",
            "credentials.py",
            ".gitignore",
            "README.md",
        ] {
            assert!(!secret(&paths, rel), "left out: {rel}");
        }
    }

    #[test]
    fn overrides_add_and_keep() {
        let paths = SecretPaths::with_overrides(&[
            "config/master.key.txt".to_string(),
            "*.p12".to_string(),
            "!.env.test".to_string(),
            "!tests/fixtures/*.pem".to_string(),
        ])
        .expect("overrides");
        assert!(secret(&paths, "config/master.key.txt"));
        assert!(secret(&paths, "a/b.p12"));
        assert!(!secret(&paths, ".env.test"));
        assert!(secret(&paths, ".env.production"));
        assert!(!secret(&paths, "tests/fixtures/server.pem"));
        assert!(secret(&paths, "deploy/server.pem"));
    }

    #[test]
    fn bad_patterns_are_refused_with_the_pattern() {
        for bad in ["", "  ", "!", "# comment", "a{b"] {
            let err = SecretPaths::with_overrides(&[bad.to_string()])
                .err()
                .unwrap_or_default();
            assert!(err.contains('`'), "{bad:?}: {err}");
        }
    }

    #[test]
    fn left_out_paths_are_quoted_losslessly() {
        let left = LeftOut::new(b".env\nx", REASON_CREDENTIAL);
        assert_eq!(left.path, r#"".env\nx""#);
    }
}
