//! Check names: `[a-z][a-z0-9_-]{0,31}`, explicit or derived from a command.

use std::collections::BTreeSet;

/// The longest check name.
const MAX_NAME_LEN: usize = 32;

/// Tools whose first argument is a subcommand worth keeping in a derived name.
const SUBCOMMAND_TOOLS: [&str; 12] = [
    "cargo", "go", "npm", "pnpm", "yarn", "bun", "deno", "make", "just", "uv", "poetry", "dotnet",
];

/// Whether `name` matches `[a-z][a-z0-9_-]{0,31}`.
pub fn valid_check_name(name: &str) -> bool {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    name.len() <= MAX_NAME_LEN
        && first.is_ascii_lowercase()
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
}

/// A name for the unnamed check at 1-based `position`, not in `taken`:
/// `pytest`, `cargo-test`, `go-test`, `lint` (for `npm run lint`), or
/// `check-<position>` when the command gives nothing usable.
pub(crate) fn derive_check_name(
    command: &str,
    position: usize,
    taken: &BTreeSet<String>,
) -> String {
    let base = name_from_command(command)
        .filter(|n| valid_check_name(n))
        .unwrap_or_else(|| format!("check-{position}"));
    if !taken.contains(&base) {
        return base;
    }
    (2..)
        .map(|i| {
            let suffix = format!("-{i}");
            let keep = MAX_NAME_LEN.saturating_sub(suffix.len()).min(base.len());
            format!("{}{suffix}", &base[..keep])
        })
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or_else(|| format!("check-{position}"))
}

fn name_from_command(command: &str) -> Option<String> {
    let words: Vec<&str> = command
        .split_whitespace()
        .skip_while(|w| is_env_assignment(w) || *w == "env" || *w == "exec")
        .collect();
    let mut words = words.as_slice();
    let mut program = basename(words.first()?);
    // `python3 -m pytest` → `pytest`; `npx tsc` → `tsc`.
    if program.starts_with("python") && words.get(1) == Some(&"-m") {
        program = basename(words.get(2)?);
        words = &words[2..];
    } else if program == "npx" {
        program = basename(words.get(1)?);
        words = &words[1..];
    }
    let name = if SUBCOMMAND_TOOLS.contains(&program) {
        match words.get(1).filter(|w| !w.starts_with('-')) {
            Some(&"run") => match words.get(2).filter(|w| !w.starts_with('-')) {
                Some(script) => (*script).to_string(),
                None => format!("{program}-run"),
            },
            Some(sub) => format!("{program}-{sub}"),
            None => program.to_string(),
        }
    } else {
        program.to_string()
    };
    Some(sanitize(&name))
}

fn is_env_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(key, _)| {
        !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Lowercases and replaces what a name may not hold with `-`.
fn sanitize(raw: &str) -> String {
    let mut out = String::new();
    for c in raw.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let trimmed = out.trim_matches('-');
    trimmed
        .chars()
        .take(MAX_NAME_LEN)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn derive(command: &str) -> String {
        derive_check_name(command, 2, &BTreeSet::new())
    }

    #[test]
    fn names_follow_the_pattern() {
        assert!(valid_check_name("lint"));
        assert!(valid_check_name("cargo-test_2"));
        assert!(valid_check_name(&"a".repeat(32)));
        assert!(!valid_check_name(&"a".repeat(33)));
        assert!(!valid_check_name(""));
        assert!(!valid_check_name("2lint"));
        assert!(!valid_check_name("Lint"));
        assert!(!valid_check_name("-lint"));
        assert!(!valid_check_name("lint check"));
        assert!(!valid_check_name("lint.py"));
    }

    #[test]
    fn derived_names_come_from_the_command() {
        assert_eq!(derive("pytest -q"), "pytest");
        assert_eq!(derive("python3 -m pytest -q tests/"), "pytest");
        assert_eq!(derive("cargo test --locked"), "cargo-test");
        assert_eq!(derive("go test ./..."), "go-test");
        assert_eq!(derive("npm run lint"), "lint");
        assert_eq!(derive("npm test"), "npm-test");
        assert_eq!(
            derive("CI=1 RUST_LOG=debug cargo clippy -- -D warnings"),
            "cargo-clippy"
        );
        assert_eq!(derive("./scripts/check.sh --fast"), "check-sh");
        assert_eq!(derive("npx tsc --noEmit"), "tsc");
        assert_eq!(derive("make"), "make");
    }

    #[test]
    fn unusable_commands_get_a_positional_name() {
        assert_eq!(derive("[ -f x ]"), "check-2");
        assert_eq!(derive("   "), "check-2");
        assert_eq!(derive("0check"), "check-2");
    }

    #[test]
    fn derived_names_avoid_taken_ones() {
        let taken: BTreeSet<String> = ["pytest".to_string(), "pytest-2".to_string()].into();
        assert_eq!(derive_check_name("pytest -x", 3, &taken), "pytest-3");
        let long = "a".repeat(40);
        let taken: BTreeSet<String> = ["a".repeat(32)].into();
        let name = derive_check_name(&long, 1, &taken);
        assert!(valid_check_name(&name), "{name}");
        assert!(name.ends_with("-2"));
    }
}
