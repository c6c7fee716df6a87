//! Docker engines named in `config.toml`, chosen with `--engine NAME`:
//!
//! ```toml
//! [engines.farm]
//! host = "tcp://10.0.0.5:2376"   # unix://, tcp:// or https://
//! tls = true                      # the default for tcp:// and https://
//! cert_path = "/home/me/.docker/farm"   # its ca.pem, cert.pem, key.pem
//! files = "remote"                # the default for tcp:// and https://
//! ```
//!
//! `files` says where a run's workspace lives. `"shared"`: the engine sees
//! this machine's files (its own socket, or an engine on this machine), and
//! the workspace is bind-mounted as it is locally. `"remote"`: the engine is
//! elsewhere; each container's workspace is a volume on the engine, filled
//! from this machine's copy and kept in step with it around every command
//! (see [`super::remote_files`]).
//!
//! Without `--engine`, the engine is the one Docker's own client would use
//! (`DOCKER_HOST`, `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH`). The choice is
//! made once, at the start of the process, and holds for every connection
//! it makes; a batch hands it to its runs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// One engine of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Engine {
    pub name: String,
    pub host: String,
    /// Verify the engine, and show it this client's certificate.
    pub tls: bool,
    /// Where `ca.pem`, `cert.pem` and `key.pem` are (with `tls`).
    pub cert_path: Option<PathBuf>,
    /// Runs at once a batch places on it (`batch --engines`).
    pub capacity: usize,
    /// Where the workspace lives for containers on this engine.
    pub files: Files,
}

/// Where a run's workspace lives for an engine's containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Files {
    /// Bind-mounted from this machine: the engine sees its files.
    Shared,
    /// A volume on the engine, kept in step with this machine's copy.
    Remote,
}

impl Files {
    /// The default for an engine at `host`: remote over the network.
    pub fn for_host(host: &str) -> Self {
        if host.starts_with("tcp://") || host.starts_with("https://") {
            Self::Remote
        } else {
            Self::Shared
        }
    }
}

/// Runs at once on an engine whose entry gives no `capacity`.
pub const DEFAULT_CAPACITY: usize = 4;

static SELECTED: OnceLock<Engine> = OnceLock::new();

/// Makes `engine` the one every connection of this process goes to.
/// Only the first choice counts.
pub fn select(engine: Engine) {
    let _ = SELECTED.set(engine);
}

/// The engine chosen with `--engine`, if one was.
pub fn selected() -> Option<&'static Engine> {
    SELECTED.get()
}

/// The engine called `name` in `config.toml` of the configuration
/// directory; an error names the file and the engines it has.
pub fn named(name: &str) -> Result<Engine, String> {
    let config = crate::state::config_dir_from_env();
    let Some((path, table)) = crate::state::config_table(config.as_deref())? else {
        return Err(format!(
            "no engine {name:?}: there is no config.toml (engines are `[engines.NAME]` tables in it)"
        ));
    };
    let engines = parse(&table, &path)?;
    engines
        .iter()
        .find(|e| e.name == name)
        .cloned()
        .ok_or_else(|| {
            let known: Vec<&str> = engines.iter().map(|e| e.name.as_str()).collect();
            format!(
                "no engine {name:?} in {} (it has: {})",
                path.display(),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        })
}

/// Every `[engines.NAME]` of a parsed `config.toml` at `path`, checked.
pub(crate) fn parse(table: &toml::Table, path: &Path) -> Result<Vec<Engine>, String> {
    let at = |what: String| format!("{}: {what}", path.display());
    let Some(section) = table.get("engines") else {
        return Ok(Vec::new());
    };
    let section = section
        .as_table()
        .ok_or_else(|| at("`engines` must be a table of `[engines.NAME]` tables".into()))?;
    let mut engines = Vec::new();
    for (name, value) in section {
        let fields = value
            .as_table()
            .ok_or_else(|| at(format!("engines.{name} must be a table")))?;
        let string = |key: &str| -> Result<Option<String>, String> {
            match fields.get(key) {
                None => Ok(None),
                Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(at(format!("engines.{name}.{key} must be a string"))),
            }
        };
        for key in fields.keys() {
            if !["host", "tls", "cert_path", "capacity", "files"].contains(&key.as_str()) {
                return Err(at(format!(
                    "engines.{name}.{key} is not a setting of an engine (host, tls, cert_path, capacity, files)"
                )));
            }
        }
        let host = string("host")?.ok_or_else(|| at(format!("engines.{name} has no host")))?;
        let network = host.starts_with("tcp://") || host.starts_with("https://");
        if !network && !host.starts_with("unix://") {
            return Err(at(format!(
                "engines.{name}.host {host:?} is not unix://, tcp:// or https://"
            )));
        }
        let tls = match fields.get("tls") {
            None => network,
            Some(toml::Value::Boolean(b)) => *b,
            Some(_) => return Err(at(format!("engines.{name}.tls must be true or false"))),
        };
        if tls && !network {
            return Err(at(format!(
                "engines.{name}: tls is for tcp:// and https:// engines, not {host:?}"
            )));
        }
        if !tls && host.starts_with("https://") {
            return Err(at(format!(
                "engines.{name}: an https:// engine speaks TLS; drop tls = false or write tcp://"
            )));
        }
        let cert_path = string("cert_path")?.map(PathBuf::from);
        if cert_path.is_some() && !tls {
            return Err(at(format!(
                "engines.{name}: cert_path is for TLS, which tls = false turns off"
            )));
        }
        if let Some(dir) = &cert_path
            && !dir.is_absolute()
        {
            return Err(at(format!(
                "engines.{name}.cert_path must be an absolute path"
            )));
        }
        if tls && cert_path.is_none() {
            return Err(at(format!(
                "engines.{name} speaks TLS and needs cert_path (a folder with ca.pem, cert.pem and key.pem), or tls = false"
            )));
        }
        let capacity = match fields.get("capacity") {
            None => DEFAULT_CAPACITY,
            Some(toml::Value::Integer(n)) if (1..=1000).contains(n) => *n as usize,
            Some(_) => {
                return Err(at(format!(
                    "engines.{name}.capacity must be a whole number from 1 to 1000"
                )));
            }
        };
        let files = match string("files")?.as_deref() {
            None => Files::for_host(&host),
            Some("shared") => Files::Shared,
            Some("remote") => Files::Remote,
            Some(other) => {
                return Err(at(format!(
                    "engines.{name}.files is {other:?}: \"shared\" (the engine sees this machine's files) or \"remote\""
                )));
            }
        };
        engines.push(Engine {
            name: name.clone(),
            host,
            tls,
            cert_path,
            capacity,
            files,
        });
    }
    Ok(engines)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engines(text: &str) -> Result<Vec<Engine>, String> {
        parse(&text.parse().expect("toml"), Path::new("/c/config.toml"))
    }

    #[test]
    fn an_engine_over_tcp_speaks_tls_unless_told_not_to() {
        let found = engines(
            "[engines.farm]\nhost = \"tcp://10.0.0.5:2376\"\ncert_path = \"/certs/farm\"\ncapacity = 16\n\
             [engines.here]\nhost = \"unix:///run/other.sock\"\n\
             [engines.lab]\nhost = \"tcp://127.0.0.1:2375\"\ntls = false\nfiles = \"shared\"\n",
        )
        .expect("valid");
        assert_eq!(
            found,
            vec![
                Engine {
                    name: "farm".into(),
                    host: "tcp://10.0.0.5:2376".into(),
                    tls: true,
                    cert_path: Some("/certs/farm".into()),
                    capacity: 16,
                    files: Files::Remote,
                },
                Engine {
                    name: "here".into(),
                    host: "unix:///run/other.sock".into(),
                    tls: false,
                    cert_path: None,
                    capacity: DEFAULT_CAPACITY,
                    files: Files::Shared,
                },
                Engine {
                    name: "lab".into(),
                    host: "tcp://127.0.0.1:2375".into(),
                    tls: false,
                    cert_path: None,
                    capacity: DEFAULT_CAPACITY,
                    files: Files::Shared,
                },
            ]
        );
        assert_eq!(engines("model = \"openai\"\n"), Ok(Vec::new()));
    }

    #[test]
    fn a_wrong_engine_is_named_with_what_is_wrong() {
        for (text, says) in [
            ("[engines.a]\ncert_path = \"/c\"\n", "engines.a has no host"),
            (
                "[engines.a]\nhost = \"tcp://h:2376\"\n",
                "engines.a speaks TLS and needs cert_path",
            ),
            (
                "[engines.a]\nhost = \"ssh://me@h\"\n",
                "is not unix://, tcp:// or https://",
            ),
            (
                "[engines.a]\nhost = \"unix:///s\"\ntls = true\ncert_path = \"/c\"\n",
                "tls is for tcp:// and https:// engines",
            ),
            (
                "[engines.a]\nhost = \"tcp://h:2376\"\ncert_path = \"certs\"\n",
                "cert_path must be an absolute path",
            ),
            (
                "[engines.a]\nhost = \"tcp://h:2376\"\ntls = \"yes\"\n",
                "tls must be true or false",
            ),
            (
                "[engines.a]\nhost = \"unix:///s\"\ncapacity = 0\n",
                "engines.a.capacity must be a whole number from 1 to 1000",
            ),
            (
                "[engines.a]\nhost = \"unix:///s\"\nslots = 4\n",
                "engines.a.slots is not a setting",
            ),
            ("engines = 3\n", "`engines` must be a table"),
            (
                "[engines.a]\nhost = \"unix:///s\"\nfiles = \"nfs\"\n",
                "engines.a.files is \"nfs\": \"shared\"",
            ),
            (
                "[engines.a]\nhost = \"https://h:2376\"\ntls = false\n",
                "an https:// engine speaks TLS",
            ),
            (
                "[engines.a]\nhost = \"tcp://h:2375\"\ntls = false\ncert_path = \"/c\"\n",
                "cert_path is for TLS",
            ),
        ] {
            let error = engines(text).expect_err(text);
            assert!(error.starts_with("/c/config.toml: "), "{error}");
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
