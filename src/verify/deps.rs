//! What a repository declares it depends on, and the bootstrap that would
//! install it. Checks run without network, so a project whose dependencies
//! no bootstrap installs fails its checks for want of them — which looks,
//! to the agent, like a bug to fix. `doctor` says so before a run does.

use std::path::Path;

/// At most this much of a manifest is read.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// One declaration of dependencies that nothing installs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// The file that declares them (`Cargo.lock`, `requirements.txt`).
    pub file: String,
    /// The bootstrap command that installs them.
    pub install: String,
}

/// The dependencies the repository at `repo` declares that `bootstrap`
/// does not install: none when there is a bootstrap (it is taken to be the
/// project's own way), else one entry per ecosystem that declares some.
pub fn uninstalled(repo: &Path, bootstrap: &[String]) -> Vec<Declared> {
    if !bootstrap.is_empty() {
        return Vec::new();
    }
    let read = |name: &str| crate::workspace::read_bounded(&repo.join(name), MAX_MANIFEST_BYTES);
    let mut found = Vec::new();
    let mut add = |file: &str, install: &str| {
        found.push(Declared {
            file: file.to_string(),
            install: install.to_string(),
        });
    };
    if let Some(manifest) = read("Cargo.toml")
        && declares_cargo_dependencies(&manifest)
    {
        let locked = repo.join("Cargo.lock").is_file();
        add(
            if locked { "Cargo.lock" } else { "Cargo.toml" },
            if locked {
                "cargo fetch --locked"
            } else {
                "cargo fetch"
            },
        );
    }
    if read("go.sum").is_some_and(|t| !t.trim().is_empty()) {
        add("go.sum", "go mod download");
    }
    if let Some(package) = read("package.json")
        && declares_node_dependencies(&package)
    {
        if repo.join("yarn.lock").is_file() {
            add("yarn.lock", "yarn install --immutable --mode=skip-build");
        } else if repo.join("package-lock.json").is_file() {
            add("package-lock.json", "npm ci --ignore-scripts");
        } else {
            add("package.json", "npm install --ignore-scripts");
        }
    }
    // In the run's dependency folder, which commands and checks can only
    // read: nothing the agent runs can put a program there.
    let venv = "python3 -m venv --system-site-packages /deps/venv";
    let requirements = [
        "requirements.txt",
        "requirements-dev.txt",
        "requirements/dev.txt",
    ]
    .into_iter()
    .find(|name| read(name).is_some_and(|t| has_requirement_lines(&t)));
    let project = read("pyproject.toml").is_some_and(|t| declares_python_project(&t))
        || repo.join("setup.py").is_file();
    match (requirements, project) {
        (Some(file), _) => add(
            file,
            &format!("{venv} && /deps/venv/bin/pip install -r {file}"),
        ),
        (None, true) => add(
            if repo.join("pyproject.toml").is_file() {
                "pyproject.toml"
            } else {
                "setup.py"
            },
            &format!("{venv} && /deps/venv/bin/pip install -e ."),
        ),
        (None, false) => {}
    }
    found
}

/// Whether a `[dependencies]`-like table of `Cargo.toml` has an entry.
fn declares_cargo_dependencies(manifest: &str) -> bool {
    let Ok(value) = manifest.parse::<toml::Table>() else {
        return false;
    };
    let tables = ["dependencies", "dev-dependencies", "build-dependencies"];
    let has = |t: &toml::Table| {
        tables.iter().any(|k| {
            t.get(*k)
                .and_then(|d| d.as_table())
                .is_some_and(|d| !d.is_empty())
        })
    };
    let workspace = value
        .get("workspace")
        .and_then(|w| w.as_table())
        .is_some_and(has);
    has(&value) || workspace
}

fn declares_node_dependencies(package: &str) -> bool {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(package) else {
        return false;
    };
    ["dependencies", "devDependencies", "optionalDependencies"]
        .iter()
        .any(|k| value[k].as_object().is_some_and(|d| !d.is_empty()))
}

fn has_requirement_lines(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim();
        !l.is_empty() && !l.starts_with('#')
    })
}

/// A `[project]` table with dependencies, or a build system that installs
/// the project itself (setuptools, hatchling, poetry, flit).
fn declares_python_project(pyproject: &str) -> bool {
    let Ok(value) = pyproject.parse::<toml::Table>() else {
        return false;
    };
    let deps = value
        .get("project")
        .and_then(|p| p.get("dependencies"))
        .and_then(|d| d.as_array())
        .is_some_and(|d| !d.is_empty());
    let optional = value
        .get("project")
        .and_then(|p| p.get("optional-dependencies"))
        .and_then(|d| d.as_table())
        .is_some_and(|d| !d.is_empty());
    let poetry = value
        .get("tool")
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.get("dependencies"))
        .and_then(|d| d.as_table())
        .is_some_and(|d| d.keys().any(|k| k != "python"));
    deps || optional || poetry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, text).expect("write");
        }
        dir
    }

    fn installs(files: &[(&str, &str)]) -> Vec<(String, String)> {
        let dir = repo(files);
        uninstalled(dir.path(), &[])
            .into_iter()
            .map(|d| (d.file, d.install))
            .collect()
    }

    #[test]
    fn each_ecosystem_names_its_install() {
        assert_eq!(
            installs(&[
                (
                    "Cargo.toml",
                    "[package]\nname = \"w\"\n\n[dev-dependencies]\ndoc-comment = \"0.3\"\n"
                ),
                ("Cargo.lock", "version = 4\n"),
            ]),
            [("Cargo.lock".into(), "cargo fetch --locked".into())]
        );
        assert_eq!(
            installs(&[
                ("go.mod", "module m\n"),
                ("go.sum", "example.com/x v1 h1:abc=\n")
            ]),
            [("go.sum".into(), "go mod download".into())]
        );
        assert_eq!(
            installs(&[
                ("package.json", r#"{"devDependencies": {"mocha": "^10"}}"#),
                ("package-lock.json", "{}"),
            ]),
            [("package-lock.json".into(), "npm ci --ignore-scripts".into())]
        );
        let python = installs(&[(
            "pyproject.toml",
            "[project]\nname = \"slugify\"\ndependencies = [\"text-unidecode>=1.3\"]\n",
        )]);
        assert_eq!(python.len(), 1);
        assert!(
            python[0].1.ends_with("/deps/venv/bin/pip install -e ."),
            "{python:?}"
        );
        let req = installs(&[("requirements.txt", "# pinned\nrequests==2.32.3\n")]);
        assert!(
            req[0].1.ends_with("pip install -r requirements.txt"),
            "{req:?}"
        );
    }

    #[test]
    fn nothing_is_declared_without_dependencies_or_with_a_bootstrap() {
        assert!(installs(&[("Cargo.toml", "[package]\nname = \"w\"\n")]).is_empty());
        assert!(installs(&[("go.mod", "module m\n"), ("go.sum", "\n")]).is_empty());
        assert!(
            installs(&[("package.json", r#"{"scripts": {"test": "node --test"}}"#)]).is_empty()
        );
        assert!(installs(&[("pyproject.toml", "[tool.pytest.ini_options]\n")]).is_empty());
        assert!(installs(&[("requirements.txt", "# nothing\n\n")]).is_empty());
        let dir = repo(&[("requirements.txt", "requests\n")]);
        assert!(uninstalled(dir.path(), &["make deps".into()]).is_empty());
        // Garbage is no declaration, and no panic.
        assert!(installs(&[("Cargo.toml", "[[[\n"), ("package.json", "{")]).is_empty());
    }
}
