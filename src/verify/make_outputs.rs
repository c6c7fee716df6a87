//! The files a `make` check would write into the tree, read from the
//! Makefile without running it. A run removes what the repository's ignore
//! rules cover before each verification; an output they do not cover is a
//! change the check makes, and a check that changes the workspace fails.
//! `doctor` names such outputs so the person can ignore them first.
//!
//! The reading follows what is common: variables set with `=`, `:=`,
//! `::=`, `?=` or `+=` and expanded as `$(X)`/`${X}`, explicit rules,
//! `.PHONY`, and `%` pattern rules applied to prerequisites that have no
//! rule and are not in the tree. What it cannot follow (functions,
//! includes, recipes that write files of their own) it passes over.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;

/// At most this much of the Makefile is read.
const MAX_MAKEFILE_BYTES: u64 = 1 << 20;
/// At most this many targets are followed.
const MAX_TARGETS: usize = 2_000;

/// One rule: its prerequisites (normal and order-only), whether it has a
/// recipe, and whether that recipe names its target (`$@`). A target with
/// a recipe is taken to be a file the recipe writes unless it is
/// `.PHONY` or one of [`ACTION_NAMES`] whose recipe does not name it.
#[derive(Debug, Default, Clone)]
struct Rule {
    prereqs: Vec<String>,
    writes_target: bool,
    has_recipe: bool,
}

/// Targets that name an action, not a file, in most Makefiles that do not
/// declare them `.PHONY`.
const ACTION_NAMES: [&str; 16] = [
    "all", "test", "tests", "check", "clean", "install", "lint", "run", "build", "default", "help",
    "bench", "coverage", "format", "fmt", "dist",
];

#[derive(Debug, Default)]
struct Makefile {
    vars: HashMap<String, String>,
    /// Each explicit target's rule.
    rules: HashMap<String, Rule>,
    /// `%` pattern rules: target pattern → its rule.
    patterns: Vec<(String, Rule)>,
    phony: HashSet<String>,
    /// The first target that does not start with a dot.
    default: Option<String>,
}

impl Makefile {
    fn parse(text: &str) -> Self {
        let mut out = Self::default();
        // Continuation lines joined, as make does.
        let joined = text.replace("\\\n", " ");
        // The targets of the rule whose recipe lines follow.
        let mut current: Vec<String> = Vec::new();
        for line in joined.lines() {
            if let Some(recipe) = line.strip_prefix('\t') {
                for target in &current {
                    let writes = recipe.contains("$@") || recipe.contains("$(@");
                    if let Some(rule) = self_rule(&mut out, target) {
                        rule.writes_target |= writes;
                        rule.has_recipe = true;
                    }
                }
                continue;
            }
            let line = line.split('#').next().unwrap_or("");
            if line.trim().is_empty() {
                continue;
            }
            if let Some((name, op, value)) = assignment(line) {
                let value = out.expand(value.trim());
                let entry = out.vars.entry(name).or_default();
                if op == "+=" && !entry.is_empty() {
                    entry.push(' ');
                    entry.push_str(&value);
                } else if op != "?=" || entry.is_empty() {
                    *entry = value;
                }
                continue;
            }
            current.clear();
            let Some((targets, prereqs)) = line.split_once(':') else {
                continue;
            };
            let prereqs = prereqs.trim_start_matches(':');
            let prereqs = prereqs.split(';').next().unwrap_or("");
            let targets: Vec<String> = out
                .expand(targets)
                .split_whitespace()
                .map(str::to_string)
                .collect();
            let prereqs: Vec<String> = out
                .expand(prereqs)
                .split_whitespace()
                .filter(|p| *p != "|")
                .map(str::to_string)
                .collect();
            for target in targets {
                if target == ".PHONY" {
                    out.phony.extend(prereqs.iter().cloned());
                    continue;
                }
                if target.starts_with('.') {
                    continue;
                }
                current.push(target.clone());
                if target.contains('%') {
                    out.patterns.push((
                        target,
                        Rule {
                            prereqs: prereqs.clone(),
                            ..Rule::default()
                        },
                    ));
                    continue;
                }
                if out.default.is_none() {
                    out.default = Some(target.clone());
                }
                out.rules
                    .entry(target)
                    .or_default()
                    .prereqs
                    .extend(prereqs.iter().cloned());
            }
        }
        out
    }

    /// `$(X)` and `${X}` replaced by the variable's value (unknown ones and
    /// functions by nothing); automatic variables left as they are.
    fn expand(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        let mut rounds = 0;
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let close = match after.chars().next() {
                Some('(') => ')',
                Some('{') => '}',
                _ => {
                    out.push('$');
                    rest = after;
                    continue;
                }
            };
            let Some(end) = after.find(close) else {
                rest = "";
                break;
            };
            let name = &after[1..end];
            rounds += 1;
            if !name.contains(char::is_whitespace) && rounds < 1_000 {
                out.push_str(self.vars.get(name).map(String::as_str).unwrap_or(""));
            }
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        out
    }
}

/// The rule a recipe line belongs to: the explicit one, else the last
/// pattern rule of that pattern.
fn self_rule<'a>(make: &'a mut Makefile, target: &str) -> Option<&'a mut Rule> {
    if target.contains('%') {
        return make
            .patterns
            .iter_mut()
            .rev()
            .find(|(t, _)| t == target)
            .map(|(_, r)| r);
    }
    make.rules.get_mut(target)
}

/// `NAME op value` where op is one of make's assignments.
fn assignment(line: &str) -> Option<(String, &'static str, &str)> {
    for op in ["::=", ":=", "?=", "+=", "="] {
        if let Some(at) = line.find(op) {
            let name = line[..at].trim();
            // `a: b=c` is a target-specific variable, not a plain one.
            if name.is_empty() || name.contains([':', ' ', '\t']) {
                return None;
            }
            let name = name.strip_prefix("override ").unwrap_or(name);
            return Some((name.to_string(), op, &line[at + op.len()..]));
        }
    }
    None
}

/// The files `make TARGETS` would create in `repo` (relative paths),
/// or `None` when there is no Makefile. An empty `targets` means the
/// default one.
pub fn outputs(repo: &Path, targets: &[String]) -> Option<BTreeSet<String>> {
    let text = ["GNUmakefile", "makefile", "Makefile"]
        .iter()
        .find_map(|name| crate::workspace::read_bounded(&repo.join(name), MAX_MAKEFILE_BYTES))?;
    let make = Makefile::parse(&text);
    let mut todo: Vec<String> = if targets.is_empty() {
        make.default.iter().cloned().collect()
    } else {
        targets.to_vec()
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut out = BTreeSet::new();
    let exists = |name: &str| std::fs::symlink_metadata(repo.join(name)).is_ok();
    while let Some(target) = todo.pop() {
        if seen.len() >= MAX_TARGETS || !seen.insert(target.clone()) {
            continue;
        }
        if target.starts_with('/') || target.split('/').any(|c| c == "..") {
            continue;
        }
        let explicit = make.rules.get(&target);
        let pattern = make
            .patterns
            .iter()
            .find_map(|(t, r)| stem(t, &target).map(|s| (s, r)));
        let writes = |rule: &Rule| {
            rule.writes_target || (rule.has_recipe && !ACTION_NAMES.contains(&target.as_str()))
        };
        let (prereqs, writes) = match (explicit, pattern) {
            (Some(rule), None) => (rule.prereqs.clone(), writes(rule)),
            (Some(rule), Some(_)) if rule.has_recipe => (rule.prereqs.clone(), writes(rule)),
            (explicit, Some((stem, rule))) if !exists(&target) => {
                let mut prereqs: Vec<String> =
                    rule.prereqs.iter().map(|p| p.replace('%', &stem)).collect();
                // A pattern applies only when its prerequisites can be had.
                if !prereqs
                    .iter()
                    .all(|p| exists(p) || make.rules.contains_key(p))
                {
                    continue;
                }
                prereqs.extend(explicit.map(|r| r.prereqs.clone()).unwrap_or_default());
                (prereqs, writes(rule))
            }
            (Some(rule), Some(_)) => (rule.prereqs.clone(), writes(rule)),
            (None, _) => continue,
        };
        if writes && !make.phony.contains(&target) && !exists(&target) {
            out.insert(target.clone());
        }
        let rule_prereqs = prereqs;
        todo.extend(rule_prereqs);
    }
    Some(out)
}

/// The part of `name` that `%` in `pattern` matches.
fn stem(pattern: &str, name: &str) -> Option<String> {
    let (before, after) = pattern.split_once('%')?;
    let middle = name.strip_prefix(before)?.strip_suffix(after)?;
    (!middle.is_empty()).then(|| middle.to_string())
}

/// The targets of a check command that runs `make` (`make test`,
/// `make -C . check`), or `None` when it does not run make in the
/// repository's root.
pub fn make_targets(command: &str) -> Option<Vec<String>> {
    let commands = super::shell_words::simple_commands(command);
    let (program, args) = commands
        .iter()
        .find_map(|words| super::shell_words::program_of(words))?;
    if program != "make" && program != "gmake" {
        return None;
    }
    let mut targets = Vec::new();
    let mut words = args.iter().map(String::as_str).peekable();
    while let Some(word) = words.next() {
        match word {
            "-C" | "-f" | "--directory" | "--file" => return None,
            "-j" | "-l" | "-o" | "-W" | "-I" => {
                words.next_if(|w| !w.starts_with('-'));
            }
            w if w.starts_with('-') || w.contains('=') => {}
            w => targets.push(w.to_string()),
        }
    }
    Some(targets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            std::fs::write(dir.path().join(path), text).unwrap();
        }
        dir
    }

    #[test]
    fn explicit_rules_give_their_file_targets() {
        let dir = tree(&[
            (
                "Makefile",
                "CFLAGS = -O1\nLIB := libclamp.a\n\ntest: test_clamp\n\t./test_clamp\n\ntest_clamp: test_clamp.c $(LIB)\n\t$(CC) -o $@ $^\n\n$(LIB): clamp.o\n\tar rcs $@ $^\n\nclamp.o: clamp.c clamp.h\n\t$(CC) -c clamp.c\n\ncheck: test\nlint:\n\techo lint\n",
            ),
            ("clamp.c", ""),
            ("clamp.h", ""),
            ("test_clamp.c", ""),
        ]);
        let found = outputs(dir.path(), &["check".into(), "lint".into()]).unwrap();
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            ["clamp.o", "libclamp.a", "test_clamp"]
        );
    }

    #[test]
    fn pattern_rules_apply_to_sources_that_exist() {
        let dir = tree(&[
            (
                "Makefile",
                "OBJS = a.o \\\n  b.o\nall: prog\nprog: $(OBJS) | outdir\n\tcc -o $@ $^\n%.o: %.c\n\tcc -c $< -o $@\noutdir:\n\tmkdir -p outdir\ncheck: all\n\t./prog\n.PHONY: all check\n",
            ),
            ("a.c", ""),
            ("b.c", ""),
        ]);
        let found = outputs(dir.path(), &["check".into()]).unwrap();
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            ["a.o", "b.o", "outdir", "prog"]
        );
        // The default target is the first one.
        assert_eq!(outputs(dir.path(), &[]).unwrap().len(), 4);
    }

    #[test]
    fn a_test_target_that_builds_nothing_writes_nothing() {
        let dir = tree(&[("Makefile", "test:\n\tpython3 -m pytest\n.PHONY: test\n")]);
        assert!(outputs(dir.path(), &["test".into()]).unwrap().is_empty());
        assert!(outputs(tree(&[]).path(), &[]).is_none());
    }

    #[test]
    fn hostile_makefiles_stay_inside_the_tree_and_end() {
        let dir = tree(&[(
            "Makefile",
            "test: a ../escape /abs\na: b\n\ttouch $@\nb: a\n\ttouch b\nX = $(X)$(X)\n$(X):\n",
        )]);
        let found = outputs(dir.path(), &["test".into()]).unwrap();
        assert_eq!(found.into_iter().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn make_commands_give_their_targets() {
        assert_eq!(make_targets("make test"), Some(vec!["test".into()]));
        assert_eq!(
            make_targets("make -j 4 CC=gcc check && echo ok"),
            Some(vec!["check".into()])
        );
        assert_eq!(make_targets("make"), Some(vec![]));
        assert_eq!(make_targets("make -C sub test"), None);
        assert_eq!(make_targets("cargo test"), None);
    }
}
