//! Where minicoder keeps its private state: run artifacts, private workspaces,
//! checkpoint stores and the receipt key. Never inside a source repository.

use std::path::{Path, PathBuf};

/// The root of minicoder's private state.
///
/// Resolved from `MINICODER_STATE_DIR`, else `$XDG_STATE_HOME/minicoder`, else
/// `~/.local/state/minicoder`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    root: PathBuf,
}

impl StateDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The state directory chosen by the environment.
    pub fn from_env() -> Result<Self, StateDirError> {
        if let Some(dir) = non_empty_env("MINICODER_STATE_DIR") {
            return Ok(Self::new(dir));
        }
        if let Some(dir) = non_empty_env("XDG_STATE_HOME") {
            return Ok(Self::new(PathBuf::from(dir).join("minicoder")));
        }
        match non_empty_env("HOME") {
            Some(home) => Ok(Self::new(
                PathBuf::from(home).join(".local/state/minicoder"),
            )),
            None => Err(StateDirError::NoHome),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/.agent/runs`: one folder of artifacts per run.
    pub fn runs_dir(&self) -> PathBuf {
        self.root.join(".agent").join("runs")
    }

    /// `<root>/workspaces`: one private copy of the source per run.
    pub(crate) fn workspaces_dir(&self) -> PathBuf {
        self.root.join("workspaces")
    }

    /// The private workspace of one run.
    pub fn workspace_dir(&self, run_id: &str) -> PathBuf {
        self.workspaces_dir().join(run_id)
    }

    /// `<root>/preflight`: the programs found in each image, by image id.
    pub(crate) fn preflight_dir(&self) -> PathBuf {
        self.root.join("preflight")
    }

    /// `<root>/prepared`: copies of repositories made ahead of their next
    /// run, never attached to a container before a run takes one.
    pub(crate) fn prepared_dir(&self) -> PathBuf {
        self.root.join("prepared")
    }

    /// `<root>/checkpoints`: one private Git object store per run, never
    /// attached to a container.
    pub(crate) fn checkpoints_dir(&self) -> PathBuf {
        self.root.join("checkpoints")
    }

    /// The checkpoint store of one run.
    pub fn checkpoint_store_dir(&self, run_id: &str) -> PathBuf {
        self.checkpoints_dir().join(format!("{run_id}.git"))
    }

    /// The fingerprint stat caches of one run's verifiers (pure caches,
    /// beside its checkpoint store).
    pub fn stat_cache_paths(&self, run_id: &str) -> [PathBuf; 2] {
        let store = self.checkpoint_store_dir(run_id);
        [
            store.with_extension("verify-cache"),
            store.with_extension("baseline-cache"),
        ]
    }

    /// `<root>/trust.json`: the repositories whose configuration the person
    /// trusts, at which hash.
    pub(crate) fn trust_file(&self) -> PathBuf {
        self.root.join("trust.json")
    }

    /// `<root>/logs`: the session's log.
    pub(crate) fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }

    /// Creates the root (mode 0700) if it is missing, and refuses one that
    /// another user owns or that others may read or enter: everything a run
    /// leaves (workspaces, checkpoints, outputs, the receipt key) is below it.
    pub fn ensure(&self) -> std::io::Result<()> {
        private_dir(&self.root)?;
        check_private(&self.root)
    }
}

/// Creates `dir` and any missing parent with mode 0700 (never the umask's).
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// Refuses `dir` unless it is a directory of this user's that nobody else
/// may read, write or enter, with the command that fixes it.
pub fn check_private(dir: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(dir)?;
    let me = rustix::process::geteuid().as_raw();
    let refuse = |why: String| {
        Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            why,
        ))
    };
    if meta.file_type().is_symlink() {
        // A link is fine when what it names is private (a state directory
        // moved to another disk), so look through it once.
        let target = std::fs::metadata(dir)?;
        if !target.is_dir() {
            return refuse(format!("{} is not a directory", dir.display()));
        }
        return check_meta(dir, &target, me).map_or_else(refuse, Ok);
    }
    if !meta.is_dir() {
        return refuse(format!("{} is not a directory", dir.display()));
    }
    check_meta(dir, &meta, me).map_or_else(refuse, Ok)
}

fn check_meta(dir: &Path, meta: &std::fs::Metadata, me: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    if meta.uid() != me {
        return Err(format!(
            "the state directory {} belongs to uid {}, not to this user (uid {me}): use a directory of your own (MINICODER_STATE_DIR)",
            dir.display(),
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(format!(
            "the state directory {} is open to other users (mode {mode:o}): it holds workspaces, checkpoints and the receipt key; run `chmod 700 {}` and try again",
            dir.display(),
            dir.display()
        ));
    }
    Ok(())
}

/// Writes `bytes` to `path` as a new 0600 file put in place by a rename, so
/// a reader sees the old content or the new, never a mix.
pub fn write_private_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", crate::ids::random_hex(4)));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()));
    let placed = written.and_then(|()| std::fs::rename(&tmp, path));
    if placed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    placed
}

#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    #[error(
        "cannot choose a state directory: none of MINICODER_STATE_DIR, XDG_STATE_HOME or HOME is set; set one of them"
    )]
    NoHome,
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The person's configuration directory, where themes, `keymap.toml`,
/// `config.toml` and `hooks.json` live: `$MINICODER_CONFIG_DIR`, else
/// `$XDG_CONFIG_HOME/minicoder`, else `~/.config/minicoder`. Only an absolute
/// path counts (as XDG asks): a relative or empty one would name a folder of
/// whatever directory minicoder runs in — a cloned repository's.
pub fn config_dir(env: &std::collections::HashMap<String, String>) -> Option<PathBuf> {
    let absolute = |name: &str| env.get(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if env.contains_key("MINICODER_CONFIG_DIR") {
        return absolute("MINICODER_CONFIG_DIR");
    }
    if let Some(dir) = absolute("XDG_CONFIG_HOME") {
        return Some(dir.join("minicoder"));
    }
    absolute("HOME").map(|home| home.join(".config/minicoder"))
}

/// [`config_dir`] of this process's environment.
pub fn config_dir_from_env() -> Option<PathBuf> {
    config_dir(&std::env::vars().collect())
}

/// The most of `config.toml` that is read.
const CONFIG_MAX_BYTES: u64 = 1 << 20;

/// A string setting of `config.toml` in the configuration directory
/// (`None`: no directory, no file, no such key). A file that cannot be
/// read or parsed is an error that names it.
pub(crate) fn config_value(config: Option<&Path>, key: &str) -> Result<Option<String>, String> {
    let Some((path, table)) = config_table(config)? else {
        return Ok(None);
    };
    match table.get(key) {
        None => Ok(None),
        Some(toml::Value::String(value)) => Ok(Some(value.clone())),
        Some(_) => Err(format!("{}: `{key}` must be a string", path.display())),
    }
}

/// `config.toml` of the configuration directory, parsed, and its path
/// (`None`: no directory or no file).
pub(crate) fn config_table(
    config: Option<&Path>,
) -> Result<Option<(PathBuf, toml::Table)>, String> {
    let Some(dir) = config else { return Ok(None) };
    let path = dir.join("config.toml");
    let text = match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
        Ok(meta) if meta.len() > CONFIG_MAX_BYTES => {
            return Err(format!("{}: over {CONFIG_MAX_BYTES} bytes", path.display()));
        }
        Ok(_) => std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?,
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Some((path, table)))
}

/// The `[limits]` of `config.toml`: the person's defaults for every run,
/// below the `MINICODER_*` variables and the flags.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ConfigLimits {
    pub max_turns: Option<u32>,
    pub timeout_seconds: Option<u64>,
    pub command_timeout_seconds: Option<u64>,
    pub max_tokens: Option<u64>,
    /// In millionths of a dollar.
    pub max_cost_micros: Option<u64>,
}

/// Reads `[limits]` of `config.toml`; an unknown key or a value that is not
/// a positive number is an error that names it.
pub(crate) fn config_limits(config: Option<&Path>) -> Result<ConfigLimits, String> {
    let mut limits = ConfigLimits::default();
    let Some((path, table)) = config_table(config)? else {
        return Ok(limits);
    };
    let Some(section) = table.get("limits") else {
        return Ok(limits);
    };
    let at = |what: String| format!("{}: {what}", path.display());
    let section = section
        .as_table()
        .ok_or_else(|| at("`limits` must be a table".into()))?;
    for (key, value) in section {
        let whole = || {
            value
                .as_integer()
                .filter(|n| *n > 0)
                .map(|n| n as u64)
                .ok_or_else(|| at(format!("limits.{key} must be a positive whole number")))
        };
        match key.as_str() {
            "max_turns" => {
                limits.max_turns = Some(
                    u32::try_from(whole()?)
                        .map_err(|_| at("limits.max_turns is too large".into()))?,
                )
            }
            "timeout_seconds" => limits.timeout_seconds = Some(whole()?),
            "command_timeout_seconds" => limits.command_timeout_seconds = Some(whole()?),
            "max_tokens" => limits.max_tokens = Some(whole()?),
            "max_cost" => {
                let micros = crate::protocol::budget_micros(toml_number(value))
                    .map_err(|e| at(format!("limits.max_cost, in dollars, {e}")))?;
                limits.max_cost_micros = Some(micros);
            }
            other => {
                return Err(at(format!(
                    "limits.{other} is not a limit (max_turns, timeout_seconds, command_timeout_seconds, max_tokens, max_cost)"
                )));
            }
        }
    }
    Ok(limits)
}

/// A TOML number as a float; NaN for anything else (which every range
/// check refuses).
fn toml_number(value: &toml::Value) -> f64 {
    match value {
        toml::Value::Float(f) => *f,
        toml::Value::Integer(i) => *i as f64,
        _ => f64::NAN,
    }
}

/// The most a price may say, in dollars a million tokens.
const MAX_PRICE: f64 = 10_000.0;

/// The price table of `config.toml`: `[prices."PROVIDER:MODEL"]` (or a
/// model name alone) with `input`, `output` and optionally `cached_input`,
/// in dollars a million tokens.
pub(crate) fn prices(config: Option<&Path>) -> Result<crate::protocol::PriceTable, String> {
    let mut table = crate::protocol::PriceTable::default();
    let Some((path, config)) = config_table(config)? else {
        return Ok(table);
    };
    let Some(prices) = config.get("prices") else {
        return Ok(table);
    };
    let at = |what: String| format!("{}: {what}", path.display());
    let prices = prices
        .as_table()
        .ok_or_else(|| at("`prices` must be a table of models".into()))?;
    for (model, entry) in prices {
        let entry = entry.as_table().ok_or_else(|| {
            at(format!(
                "prices.\"{model}\" must be a table: input = …, output = … (dollars a million tokens)"
            ))
        })?;
        let number = |key: &str| -> Result<Option<f64>, String> {
            let Some(value) = entry.get(key) else {
                return Ok(None);
            };
            let n = toml_number(value);
            if n.is_finite() && (0.0..=MAX_PRICE).contains(&n) {
                Ok(Some(n))
            } else {
                Err(at(format!(
                    "prices.\"{model}\".{key} must be a number of dollars a million tokens, from 0 to {MAX_PRICE}"
                )))
            }
        };
        let need = |key: &str| {
            number(key)?.ok_or_else(|| at(format!("prices.\"{model}\" has no {key} price")))
        };
        if let Some(unknown) = entry
            .keys()
            .find(|k| !["input", "output", "cached_input"].contains(&k.as_str()))
        {
            return Err(at(format!(
                "prices.\"{model}\".{unknown} is not a price (input, output, cached_input)"
            )));
        }
        table.0.insert(
            model.clone(),
            crate::protocol::Price {
                input: need("input")?,
                output: need("output")?,
                cached_input: number("cached_input")?,
            },
        );
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_configuration_directory_is_only_ever_an_absolute_path() {
        let env = |pairs: &[(&str, &str)]| -> std::collections::HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let at = |pairs: &[(&str, &str)]| config_dir(&env(pairs));
        assert_eq!(
            at(&[("MINICODER_CONFIG_DIR", "/c")]),
            Some(PathBuf::from("/c"))
        );
        // Relative or empty names a folder of the current directory: none.
        assert_eq!(
            at(&[("MINICODER_CONFIG_DIR", ".minicoder"), ("HOME", "/h")]),
            None
        );
        assert_eq!(at(&[("MINICODER_CONFIG_DIR", ""), ("HOME", "/h")]), None);
        assert_eq!(
            at(&[("XDG_CONFIG_HOME", "cfg"), ("HOME", "/h")]),
            Some(PathBuf::from("/h/.config/minicoder"))
        );
        assert_eq!(
            at(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")]),
            Some(PathBuf::from("/x/minicoder"))
        );
        assert_eq!(at(&[("HOME", "")]), None);
    }

    #[test]
    fn a_new_root_is_private_and_an_open_one_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateDir::new(dir.path().join("a/b/state"));
        state.ensure().expect("created");
        for path in [
            dir.path().join("a"),
            dir.path().join("a/b"),
            state.root().to_path_buf(),
        ] {
            let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", path.display());
        }
        std::fs::set_permissions(state.root(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let err = state.ensure().expect_err("too open");
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        let text = err.to_string();
        assert!(
            text.contains("mode 755") && text.contains("chmod 700"),
            "{text}"
        );
        let mode = std::fs::metadata(state.root())
            .expect("meta")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(
            mode, 0o755,
            "the person's directory is not changed behind their back"
        );
    }

    #[test]
    fn private_files_are_0600_and_replaced_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f.json");
        write_private_file(&path, b"one").expect("write");
        write_private_file(&path, b"two").expect("write");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1);
    }

    #[test]
    fn layout_is_under_the_root() {
        let s = StateDir::new("/s");
        assert_eq!(s.runs_dir(), PathBuf::from("/s/.agent/runs"));
        assert_eq!(s.workspace_dir("r1"), PathBuf::from("/s/workspaces/r1"));
        assert_eq!(
            s.checkpoint_store_dir("r1"),
            PathBuf::from("/s/checkpoints/r1.git")
        );
    }
}
