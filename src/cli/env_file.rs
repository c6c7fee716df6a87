//! The person's private file of provider keys, `env` in the configuration
//! directory: `NAME=value` lines written by `minicoder init`, mode 0600.
//!
//! It is read once, at the start of every command, before any thread
//! exists: each variable the environment does not already set is set from
//! it (the environment wins), and where each key came from is remembered
//! for `doctor`. A file that others could read, or that is not the running
//! user's, is refused rather than used — and never written to.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The file's name in the configuration directory.
pub(crate) const ENV_FILE: &str = "env";
/// The most of it that is read.
const MAX_BYTES: u64 = 64 << 10;
/// The longest value kept.
const MAX_VALUE: usize = 8 << 10;

/// The variables set from the file at start, by name.
static FROM_FILE: OnceLock<(PathBuf, Vec<String>)> = OnceLock::new();

/// The file in `config_dir`.
pub(crate) fn path_in(config_dir: &Path) -> PathBuf {
    config_dir.join(ENV_FILE)
}

/// The file's variables (`Ok(None)` when there is none). Refused when it is
/// not a regular file of the running user, when its group or others may
/// read or write it, or when others may write the directory holding it
/// (they could swap it). The file is opened without following a link and
/// checked as opened, so what is checked is what is read.
pub(crate) fn read(path: &Path) -> Result<Option<BTreeMap<String, String>>, String> {
    use std::io::Read as _;
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        // A link in the file's place: opening it without following fails.
        Err(_) if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) => {
            return Err(format!(
                "{} is a link; keys are read only from a plain file: remove it and run `minicoder init`",
                path.display()
            ));
        }
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    check_private(path, &meta)?;
    if let Some(dir) = path.parent() {
        let dir_meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if dir_meta.mode() & 0o022 != 0 {
            return Err(format!(
                "{} can be written by others (mode {:o}), so the key file in it could be swapped: `chmod go-w {}` first",
                dir.display(),
                dir_meta.mode() & 0o7777,
                dir.display()
            ));
        }
    }
    let mut bytes = Vec::new();
    file.take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!(
            "{} is over {MAX_BYTES} bytes: it is not a file of keys minicoder wrote",
            path.display()
        ));
    }
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))?;
    parse(&text)
        .map(Some)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Refuses a file others may read or write, or that is not the running
/// user's regular file; says how to fix it.
fn check_private(path: &Path, meta: &std::fs::Metadata) -> Result<(), String> {
    if !meta.file_type().is_file() {
        return Err(format!(
            "{} is not a regular file (a link or a directory); keys are read only from a plain file: remove it and run `minicoder init`",
            path.display()
        ));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "{} belongs to another user (uid {}); keys are read only from your own file",
            path.display(),
            meta.uid()
        ));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "{} can be read or written by others (mode {:o}): it holds API keys, so `chmod 600 {}` first",
            path.display(),
            meta.mode() & 0o7777,
            path.display()
        ));
    }
    Ok(())
}

/// `NAME=value` lines; blank lines and `#` comments skipped; `export `
/// before a name and quotes around a value allowed.
pub(crate) fn parse(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut vars = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        // (What a bad line holds is never quoted: it may be a key.)
        let Some((name, value)) = line.split_once('=') else {
            return Err(format!("line {}: not NAME=value", n + 1));
        };
        let name = name.trim();
        if !valid_name(name) {
            return Err(format!(
                "line {}: the name before `=` is not a variable name (A-Z, 0-9, _)",
                n + 1
            ));
        }
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!(
                "line {}: the value of {name} holds a control character",
                n + 1
            ));
        }
        let value = value.trim();
        let value = ['"', '\'']
            .iter()
            .find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q)))
            .unwrap_or(value);
        if value.len() > MAX_VALUE {
            return Err(format!("line {}: the value of {name} is too long", n + 1));
        }
        vars.insert(name.to_string(), value.to_string());
    }
    Ok(vars)
}

/// Whether the file may set `name`: provider settings only (`*_API_KEY`,
/// `*_BASE_URL`, `*_MODEL`, `*_REASONING`) and the free-tier confirmation
/// — never a variable that changes how programs run (`PATH`,
/// `LD_PRELOAD`, `DOCKER_HOST`, minicoder's directories).
pub(crate) fn settable(name: &str) -> bool {
    ["_API_KEY", "_BASE_URL", "_MODEL", "_REASONING"]
        .iter()
        .any(|end| name.ends_with(end) && name.len() > end.len())
        || name == "MINICODER_FREE_TIER_CONFIRMED"
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// Sets every variable of the file the environment does not set.
///
/// # Safety
///
/// Called from `main` before any thread is started: nothing else reads or
/// writes the environment meanwhile.
pub(crate) fn load_at_start() -> Result<(), String> {
    let Some(dir) = crate::state::config_dir_from_env() else {
        return Ok(());
    };
    let path = path_in(&dir);
    let Some(vars) = read(&path)? else {
        return Ok(());
    };
    let mut set = Vec::new();
    for (name, value) in vars {
        if !settable(&name) || value.is_empty() || std::env::var_os(&name).is_some() {
            continue;
        }
        // SAFETY: the process has one thread at this point (see above).
        unsafe { std::env::set_var(&name, &value) };
        set.push(name);
    }
    let _ = FROM_FILE.set((path, set));
    Ok(())
}

/// Where a variable's value came from: the file (its path), the
/// environment, or nowhere.
pub(crate) fn origin(name: &str) -> Option<String> {
    std::env::var_os(name).filter(|v| !v.is_empty())?;
    match FROM_FILE.get() {
        Some((path, names)) if names.iter().any(|n| n == name) => {
            Some(format!("from {}", path.display()))
        }
        _ => Some("from the environment".to_string()),
    }
}

/// Writes `vars` over the file's current content (its other variables
/// kept): a private directory, a new file of mode 0600 renamed into place.
/// Refuses to touch a file or directory others could read.
pub(crate) fn write(config_dir: &Path, vars: &BTreeMap<String, String>) -> Result<PathBuf, String> {
    private_dir(config_dir)?;
    let path = path_in(config_dir);
    let mut all = read(&path)?.unwrap_or_default();
    for (name, value) in vars {
        if value.chars().any(|c| c.is_control() && c != '\t') {
            return Err(format!(
                "the value of {name} holds a line break or a control character"
            ));
        }
        all.insert(name.clone(), value.clone());
    }
    let mut text = String::from(
        "# minicoder's provider keys (written by `minicoder init`). Keep it private (mode 0600);\n\
         # a variable set in the environment wins over this file.\n",
    );
    for (name, value) in &all {
        // A value that starts and ends with a quote keeps it when read back.
        let quoted = ['"', '\'']
            .iter()
            .any(|q| value.starts_with(*q) && value.ends_with(*q));
        if quoted && !value.contains('\'') {
            text.push_str(&format!("{name}='{value}'\n"));
        } else if quoted {
            text.push_str(&format!("{name}=\"{value}\"\n"));
        } else {
            text.push_str(&format!("{name}={value}\n"));
        }
    }
    let tmp = config_dir.join(format!(".{ENV_FILE}.{}.tmp", crate::ids::random_hex(4)));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}", path.display()));
    }
    Ok(path)
}

/// Makes `dir` (0700 when new) and refuses one that others may write or
/// read, or that is not the running user's.
pub(crate) fn private_dir(dir: &Path) -> Result<(), String> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(format!(
            "{} belongs to another user (uid {}); minicoder writes keys only into your own directory",
            dir.display(),
            meta.uid()
        ));
    }
    if meta.permissions().mode() & 0o022 != 0 {
        return Err(format!(
            "{} can be written by others (mode {:o}): `chmod go-w {}` first",
            dir.display(),
            meta.permissions().mode() & 0o7777,
            dir.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_comments_exports_and_quotes_are_read() {
        let vars = parse(
            "# keys\n\nGEMINI_API_KEY=abc\nexport OPENAI_MODEL_B=\"two words\"\nOPENAI_MODEL='m'\nEMPTY=\n",
        )
        .unwrap();
        assert_eq!(vars["GEMINI_API_KEY"], "abc");
        assert_eq!(vars["OPENAI_MODEL_B"], "two words");
        assert_eq!(vars["OPENAI_MODEL"], "m");
        assert_eq!(vars["EMPTY"], "");
        assert!(parse("lower=1\n").is_err());
        let e = parse("OPENAI_API_KEY: sk-secret-1=\n").unwrap_err();
        assert!(!e.contains("sk-secret"), "the line is not quoted: {e}");
        let e = parse("OPENAI_API_KEY=a\0b\n").unwrap_err();
        assert!(
            e.contains("control character") && !e.contains("a\0b"),
            "{e}"
        );
        assert!(parse("1ABC=1\n").is_err());
        assert!(parse("no equals sign\n").is_err());
    }

    #[test]
    fn the_file_is_written_0600_keeps_other_keys_and_is_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("minicoder");
        let one = BTreeMap::from([("GEMINI_API_KEY".to_string(), "g-1".to_string())]);
        let path = write(&config, &one).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
        assert_eq!(dir_mode, 0o700);
        let two = BTreeMap::from([("OPENAI_API_KEY".to_string(), "o-2".to_string())]);
        write(&config, &two).unwrap();
        let vars = read(&path).unwrap().unwrap();
        assert_eq!(vars["GEMINI_API_KEY"], "g-1");
        assert_eq!(vars["OPENAI_API_KEY"], "o-2");
        let bad = BTreeMap::from([("X".to_string(), "a\nB=c".to_string())]);
        assert!(
            write(&config, &bad).is_err(),
            "no line break smuggles a variable"
        );
        let quoted = BTreeMap::from([("OPENAI_MODEL".to_string(), "\"m\"".to_string())]);
        write(&config, &quoted).unwrap();
        assert_eq!(read(&path).unwrap().unwrap()["OPENAI_MODEL"], "\"m\"");
    }

    #[test]
    fn a_file_in_a_directory_others_can_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ENV_FILE);
        std::fs::write(&path, "GEMINI_API_KEY=g\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.contains("chmod go-w"), "{e}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(read(&path).unwrap().is_some());
    }

    #[test]
    fn a_file_others_can_read_is_refused_with_the_fix_and_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(ENV_FILE);
        std::fs::write(&path, "GEMINI_API_KEY=g\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.contains("chmod 600"), "{e}");
        assert!(!e.contains("GEMINI_API_KEY=g"));
        let more = BTreeMap::from([("OPENAI_API_KEY".to_string(), "o".to_string())]);
        assert!(write(dir.path(), &more).is_err());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "GEMINI_API_KEY=g\n",
            "left as it was"
        );
    }

    #[test]
    fn only_provider_settings_may_be_set_from_the_file() {
        for name in [
            "GEMINI_API_KEY",
            "FREELLMAPI_BASE_URL",
            "OPENAI_MODEL",
            "DEEPSEEK_REASONING",
            "MINICODER_FREE_TIER_CONFIRMED",
        ] {
            assert!(settable(name), "{name}");
        }
        for name in [
            "PATH",
            "LD_PRELOAD",
            "DOCKER_HOST",
            "MINICODER_STATE_DIR",
            "HOME",
            "_API_KEY",
        ] {
            assert!(!settable(name), "{name}");
        }
    }

    #[test]
    fn a_link_in_place_of_the_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, "A=1\n").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join(ENV_FILE)).unwrap();
        assert!(read(&dir.path().join(ENV_FILE)).is_err());
    }
}
