//! `minicoder trust [REPO] [--network]` and `minicoder untrust [REPO]`: the
//! person's say over what a repository's own configuration may do (see
//! [`crate::verify::project`]).

use std::path::Path;
use std::process::ExitCode;

use super::{EXIT_FAILURE, EXIT_USAGE};
use crate::state::StateDir;
use crate::verify::{self, Trust, TrustStore};

/// The repository named, or the one around the current directory.
fn repo_of(repo: Option<&Path>) -> Result<std::path::PathBuf, String> {
    let path = match repo {
        Some(path) => path.to_path_buf(),
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    super::options::repository(&path)
}

fn open_store() -> Result<TrustStore, String> {
    let state = StateDir::from_env().map_err(|e| e.to_string())?;
    state
        .ensure()
        .map_err(|e| format!("cannot use {}: {e}", state.root().display()))?;
    TrustStore::load(&state)
}

/// Trusts the configuration of `repo` as it is now, after saying what it does.
pub fn trust(repo: Option<&Path>, network: bool) -> anyhow::Result<ExitCode> {
    let repo = match repo_of(repo) {
        Ok(repo) => repo,
        Err(e) => {
            err!("minicoder trust: {e}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let files = match verify::load_project(&repo) {
        Ok(files) => files,
        Err(e) => {
            err!("minicoder trust: {e}");
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
    };
    let Some(hash) = files.hash.clone() else {
        out!(
            "{} has no minicoder configuration (.minicoder.json, .minicoder/): nothing to trust",
            repo.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    let mut store = match open_store() {
        Ok(store) => store,
        Err(e) => {
            err!("minicoder trust: {e}");
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
    };
    store.trust(&repo, &hash, Trust { network });
    if let Err(e) = store.save() {
        err!("minicoder trust: {e}");
        return Ok(ExitCode::from(EXIT_FAILURE));
    }
    let net = if network {
        "with network for its bootstrap and recipe"
    } else {
        "without network (`--network` gives its bootstrap and recipe the network)"
    };
    out!(
        "trusted {} at configuration {} {net}",
        repo.display(),
        crate::runtime::short_hash(&hash)
    );
    let needs = files.needs_trust();
    if needs.is_empty() {
        out!("  (it asks for nothing beyond the sandbox's defaults)");
    }
    for line in needs {
        out!("  it {line}");
    }
    out!("a change to .minicoder.json or .minicoder/ needs trusting again");
    Ok(ExitCode::SUCCESS)
}

/// Stops trusting `repo`'s configuration.
pub fn untrust(repo: Option<&Path>) -> anyhow::Result<ExitCode> {
    let repo = match repo_of(repo) {
        Ok(repo) => repo,
        Err(e) => {
            err!("minicoder untrust: {e}");
            return Ok(ExitCode::from(EXIT_USAGE));
        }
    };
    let mut store = match open_store() {
        Ok(store) => store,
        Err(e) => {
            err!("minicoder untrust: {e}");
            return Ok(ExitCode::from(EXIT_FAILURE));
        }
    };
    if !store.untrust(&repo) {
        out!("{} was not trusted", repo.display());
        return Ok(ExitCode::SUCCESS);
    }
    if let Err(e) = store.save() {
        err!("minicoder untrust: {e}");
        return Ok(ExitCode::from(EXIT_FAILURE));
    }
    out!(
        "{} is no longer trusted: its runs use the default image and no bootstrap",
        repo.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Before the session takes the screen: when the repository's configuration
/// asks for something that needs trust and is not trusted at its hash, says
/// what it does and asks once ([`answer`]); a trust is recorded as
/// `minicoder trust` does. `false`: quit.
pub(crate) fn ask_before_session(repo: &Path, granted: bool) -> Result<bool, String> {
    use std::io::{BufRead, Read};
    if granted {
        return Ok(true);
    }
    let files = verify::load_project(repo).map_err(|e| e.to_string())?;
    let (Some(hash), needs) = (files.hash.clone(), files.needs_trust()) else {
        return Ok(true);
    };
    if needs.is_empty() {
        return Ok(true);
    }
    let mut store = open_store()?;
    if store.lookup(repo, &hash).is_some() {
        return Ok(true);
    }
    let changed = store.entry(repo).is_some();
    err!(
        "{} has its own minicoder configuration (.minicoder.json, .minicoder/; {} {}). It:",
        repo.display(),
        if changed {
            "changed since you trusted it, now"
        } else {
            "hash"
        },
        crate::runtime::short_hash(&hash)
    );
    for line in &needs {
        err!("  - {line}");
    }
    err!(
        "Trust it? [y] trust  [w] trust, with network  [N] run without it (default image, no bootstrap)  [q] quit"
    );
    let mut text = String::new();
    std::io::stdin()
        .lock()
        .take(64)
        .read_line(&mut text)
        .map_err(|e| format!("reading the answer: {e}"))?;
    let network = match answer(&text) {
        Answer::Trust { network } => network,
        Answer::Quit => return Ok(false),
        Answer::Without => {
            err!("minicoder: going on without the repository's configuration");
            return Ok(true);
        }
    };
    store.trust(repo, &hash, Trust { network });
    store.save()?;
    err!(
        "minicoder: trusted at {}; `minicoder untrust` takes it back",
        crate::runtime::short_hash(&hash)
    );
    Ok(true)
}

/// What the person answered to the trust question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Trust { network: bool },
    Without,
    Quit,
}

/// `y` trusts, `w` trusts with network, `q` quits; anything else — Enter,
/// `n`, end of input, a typo — goes on without the configuration, the
/// choice that grants nothing.
fn answer(text: &str) -> Answer {
    match text.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "t" | "trust" => Answer::Trust { network: false },
        "w" | "network" => Answer::Trust { network: true },
        "q" | "quit" => Answer::Quit,
        _ => Answer::Without,
    }
}

#[cfg(test)]
mod tests {
    use super::{Answer, answer};

    #[test]
    fn only_a_clear_yes_grants_and_network_needs_its_own_answer() {
        assert_eq!(answer("y\n"), Answer::Trust { network: false });
        assert_eq!(answer(" YES "), Answer::Trust { network: false });
        assert_eq!(answer("w\n"), Answer::Trust { network: true });
        assert_eq!(answer("q"), Answer::Quit);
        for nothing in [
            "",
            "\n",
            "n",
            "no",
            "yy",
            "y es",
            "\u{1b}[A",
            "network please",
        ] {
            assert_eq!(answer(nothing), Answer::Without, "{nothing:?}");
        }
    }
}
