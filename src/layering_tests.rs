//! The layering written in the crate docs, held against the code.
//!
//! Every file of `src/` is read as text: its `use` trees (`crate::`, `super::`,
//! `self::` and child modules) and the `crate::`/`super::` paths in its code are
//! resolved to the file that defines what they name, following `pub use`
//! re-exports. Three rules then hold:
//!
//! - a file never uses a module that stands higher in the layer list of
//!   `src/lib.rs` (modules on one line do not use each other);
//! - `protocol/` uses nothing of the crate outside itself;
//! - no files use each other in a circle.
//!
//! Comments, string literals and `#[cfg(test)]` items are not read: tests may
//! reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Import circles inside `src/tui/` that stand today and are being taken apart.
/// A circle found in `src/tui/` passes when all its files are in one of these;
/// any other circle fails. Empty it when the session rewrite lands.
const TEMPORARY_TUI_CIRCLES_TO_REMOVE: &[&[&str]] = &[];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// One module backed by a file.
struct Module {
    /// The module's path below the crate root (`["workspace", "copy"]`).
    path: Vec<String>,
    /// The file, relative to `src/`, with `/` separators.
    file: String,
    /// The file's code without comments, string contents and test items.
    code: String,
    children: BTreeMap<String, usize>,
}

struct Crate {
    modules: Vec<Module>,
}

impl Crate {
    fn read() -> Crate {
        let mut krate = Crate {
            modules: Vec::new(),
        };
        krate.add(Vec::new(), "lib.rs".to_string());
        krate
    }

    /// Adds the module at `file` and, recursively, the modules it declares.
    fn add(&mut self, path: Vec<String>, file: String) -> usize {
        let text = fs::read_to_string(src_dir().join(&file))
            .unwrap_or_else(|e| panic!("cannot read src/{file}: {e}"));
        let code = strip_test_items(&strip_comments_and_strings(&text));
        let index = self.modules.len();
        self.modules.push(Module {
            path: path.clone(),
            file: file.clone(),
            code: code.clone(),
            children: BTreeMap::new(),
        });
        for (name, attribute_path) in declared_modules(&text) {
            let child_file = child_file(&file, &name, attribute_path.as_deref());
            let mut child_path = path.clone();
            child_path.push(name.clone());
            let child = self.add(child_path, child_file);
            self.modules[index].children.insert(name, child);
        }
        index
    }

    /// The deepest module along `path` and what of `path` remains below it.
    fn deepest<'a>(&self, path: &'a [String]) -> (usize, &'a [String]) {
        let mut at = 0;
        let mut rest = path;
        while let Some((first, tail)) = rest.split_first() {
            match self.modules[at].children.get(first) {
                Some(&child) => {
                    at = child;
                    rest = tail;
                }
                None => break,
            }
        }
        (at, rest)
    }

    /// The file that defines what the absolute `path` names, through re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> usize {
        let (at, rest) = self.deepest(path);
        if depth < 8
            && let Some(first) = rest.first()
            && let Some(target) = self.reexports(at).get(first)
        {
            let mut next = target.clone();
            next.extend_from_slice(&rest[1..]);
            return self.resolve(&next, depth + 1);
        }
        at
    }

    /// What module `at` hands on with `pub use`: name → absolute path.
    fn reexports(&self, at: usize) -> BTreeMap<String, Vec<String>> {
        let mut names = BTreeMap::new();
        for statement in use_statements(&self.modules[at].code) {
            if !statement.public {
                continue;
            }
            for (path, alias) in expand_use_tree(&statement.tree) {
                let Some(absolute) = self.absolute(at, &path) else {
                    continue;
                };
                let name = alias.or_else(|| path.last().cloned());
                if let Some(name) = name.filter(|n| n != "*" && n != "self") {
                    names.insert(name, absolute);
                }
            }
        }
        names
    }

    /// `path` as written in module `at`, made absolute; `None` when it leaves
    /// the crate (std, a dependency, a local item).
    fn absolute(&self, at: usize, path: &[String]) -> Option<Vec<String>> {
        let module = &self.modules[at];
        let first = path.first()?;
        match first.as_str() {
            "crate" => Some(path[1..].to_vec()),
            "self" => Some([&module.path[..], &path[1..]].concat()),
            "super" => {
                let mut base = module.path.clone();
                let mut rest = path;
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
                Some([&base[..], rest].concat())
            }
            name if module.children.contains_key(name) => Some([&module.path[..], path].concat()),
            _ => None,
        }
    }

    /// Every file each file uses: index → indices. With `reexports` false, the
    /// arrows that make no circle by themselves are left out: a `pub use` only
    /// hands a name on (the files that use it point at its definition), and a
    /// file may use what the file of its own enclosing module defines (a
    /// folder's `mod.rs` is the folder's shared vocabulary).
    fn arrows(&self, reexports: bool) -> BTreeMap<usize, BTreeSet<usize>> {
        let mut arrows = BTreeMap::new();
        for at in 0..self.modules.len() {
            let code = &self.modules[at].code;
            let statements = use_statements(code);
            let mut imported: BTreeMap<String, Vec<String>> = BTreeMap::new();
            let mut paths = Vec::new();
            for statement in &statements {
                for (path, alias) in expand_use_tree(&statement.tree) {
                    let Some(absolute) = self.absolute(at, &path) else {
                        continue;
                    };
                    if let Some(name) = alias.or_else(|| path.last().cloned()) {
                        imported.insert(name, absolute.clone());
                    }
                    if reexports || !statement.public {
                        paths.push(absolute);
                    }
                }
            }
            for path in code_paths(code) {
                if let Some(absolute) = self.absolute(at, &path) {
                    paths.push(absolute);
                } else if let Some(base) = imported.get(&path[0]) {
                    paths.push([&base[..], &path[1..]].concat());
                }
            }
            let mut targets = BTreeSet::new();
            for path in paths {
                let path: Vec<String> = path.into_iter().filter(|s| s != "*").collect();
                let target = self.resolve(&path, 0);
                let enclosing = self.modules[at]
                    .path
                    .starts_with(&self.modules[target].path);
                if target != at && (reexports || !enclosing) {
                    targets.insert(target);
                }
            }
            arrows.insert(at, targets);
        }
        arrows
    }
}

/// `mod name;` declarations outside `#[cfg(test)]`, with their `#[path]`.
fn declared_modules(text: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let mut attributes: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("#[") {
            attributes.push(line.to_string());
            continue;
        }
        let declaration = line
            .strip_prefix("pub(crate) ")
            .or_else(|| line.strip_prefix("pub(super) "))
            .or_else(|| line.strip_prefix("pub "))
            .unwrap_or(line);
        if let Some(name) = declaration
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
        {
            let is_test = attributes.iter().any(|a| a.contains("cfg(test)"));
            let path = attributes.iter().find_map(|a| {
                let value = a.strip_prefix("#[path = \"")?.strip_suffix("\"]")?;
                Some(value.to_string())
            });
            if !is_test {
                found.push((name.trim().to_string(), path));
            }
        }
        if !line.is_empty() && !line.starts_with("//") {
            attributes.clear();
        }
    }
    found
}

/// The file of module `name` declared in `parent` (both relative to `src/`).
fn child_file(parent: &str, name: &str, attribute_path: Option<&str>) -> String {
    let parent = Path::new(parent);
    let dir = parent.parent().unwrap_or(Path::new(""));
    let joined = |p: PathBuf| p.to_string_lossy().replace('\\', "/");
    if let Some(path) = attribute_path {
        return joined(dir.join(path));
    }
    let stem = parent.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let base = if matches!(stem, "mod" | "lib" | "main") {
        dir.to_path_buf()
    } else {
        dir.join(stem)
    };
    let flat = base.join(format!("{name}.rs"));
    if src_dir().join(&flat).exists() {
        joined(flat)
    } else {
        joined(base.join(name).join("mod.rs"))
    }
}

/// The code with comments removed and string and char literals emptied.
fn strip_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"') | Some('#'))
            && !chars
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            'raw: while j < chars.len() {
                if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break 'raw;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            out.push_str("\"\"");
            i += 1;
        } else if c == '\'' {
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                out.push_str("' '");
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                out.push_str("' '");
                i += 3;
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The code without the items that `#[cfg(test)]` marks.
fn strip_test_items(code: &str) -> String {
    let marker = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(start) = rest.find(marker) {
        out.push_str(&rest[..start]);
        let item = &rest[start + marker.len()..];
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, c) in item.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

struct UseStatement {
    public: bool,
    tree: String,
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every `use …;` of the code, its tree compacted.
fn use_statements(code: &str) -> Vec<UseStatement> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(offset) = code[from..].find("use ") {
        let start = from + offset;
        from = start + 4;
        let before = code[..start].chars().next_back();
        if before.is_some_and(is_ident_char) {
            continue;
        }
        let Some(length) = code[from..].find(';') else {
            break;
        };
        let tree = compact(&code[from..from + length]);
        let head = code[..start].trim_end();
        let public = head.ends_with("pub") || head.ends_with(')') && head.contains("pub(");
        found.push(UseStatement { public, tree });
        from += length;
    }
    found
}

/// A use tree (`a::{b,c::d as e}`) as paths with their aliases.
fn expand_use_tree(tree: &str) -> Vec<(Vec<String>, Option<String>)> {
    let tree = tree.strip_prefix("::").unwrap_or(tree);
    let mut result = Vec::new();
    match tree.find('{') {
        None => {
            let (path, alias) = match tree.split_once(" as ") {
                Some((path, alias)) => (path, Some(alias.to_string())),
                None => (tree, None),
            };
            let segments: Vec<String> = path
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if !segments.is_empty() {
                result.push((segments, alias));
            }
        }
        Some(open) => {
            let prefix: Vec<String> = tree[..open]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            let inner = tree[open + 1..]
                .strip_suffix('}')
                .unwrap_or(&tree[open + 1..]);
            for part in split_top_level(inner) {
                for (path, alias) in expand_use_tree(&part) {
                    let mut full = prefix.clone();
                    if path != ["self"] {
                        full.extend(path);
                    }
                    result.push((full, alias));
                }
            }
        }
    }
    result
}

/// A use tree with single spaces, and none beside `::`, braces and commas.
fn compact(tree: &str) -> String {
    let single = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(single.len());
    let chars: Vec<char> = single.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let tight = |c: Option<&char>| matches!(c, Some(':' | '{' | '}' | ','));
        if c == ' ' && (tight(chars.get(i.wrapping_sub(1))) || tight(chars.get(i + 1))) {
            continue;
        }
        out.push(c);
    }
    out
}

/// The parts of a brace group split at its top-level commas.
fn split_top_level(inner: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut depth = 0;
    let mut current = String::new();
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                if !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        parts.push(current);
    }
    parts
}

/// Paths of two segments or more in code, outside `use`.
fn code_paths(code: &str) -> Vec<Vec<String>> {
    let mut without_uses = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(start) = rest.find("use ") {
        let is_word = rest[..start]
            .chars()
            .next_back()
            .is_none_or(|c| !is_ident_char(c));
        let end = if is_word {
            rest[start..]
                .find(';')
                .map_or(rest.len(), |e| start + e + 1)
        } else {
            start + 4
        };
        if is_word {
            without_uses.push_str(&rest[..start]);
        } else {
            without_uses.push_str(&rest[..end]);
        }
        rest = &rest[end..];
    }
    without_uses.push_str(rest);

    let chars: Vec<char> = without_uses.chars().collect();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !is_ident_char(chars[i - 1]);
        if !starts_word || !is_ident_char(chars[i]) {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let begin = j;
            while j < chars.len() && is_ident_char(chars[j]) {
                j += 1;
            }
            segments.push(chars[begin..j].iter().collect::<String>());
            if chars.get(j) == Some(&':')
                && chars.get(j + 1) == Some(&':')
                && chars.get(j + 2).is_some_and(|c| is_ident_char(*c))
            {
                j += 2;
            } else {
                break;
            }
        }
        if segments.len() > 1 {
            paths.push(segments);
        }
        i = j.max(i + 1);
    }
    paths
}

/// The layer list of the crate docs, top first: each line's module names.
fn layers() -> Vec<Vec<String>> {
    let lib = fs::read_to_string(src_dir().join("lib.rs")).unwrap();
    let start = lib
        .find("//! # Layers")
        .expect("src/lib.rs has a `# Layers` section");
    let section = &lib[start..];
    let open = section.find("//! ```text").expect("a text block") + "//! ```text".len();
    let close = section[open..].find("//! ```").expect("the block ends") + open;
    section[open..close]
        .lines()
        .map(|l| l.trim_start_matches("//!").trim())
        .filter(|l| !l.is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The top-level module a file belongs to (`lib` for the crate root).
fn top_module(module: &Module) -> String {
    module.path.first().cloned().unwrap_or_else(|| "lib".into())
}

#[test]
fn the_layer_list_names_every_module_once() {
    let krate = Crate::read();
    let listed: Vec<String> = layers().into_iter().flatten().collect();
    let unique: BTreeSet<&String> = listed.iter().collect();
    assert_eq!(
        unique.len(),
        listed.len(),
        "a module is listed twice: {listed:?}"
    );
    let declared: BTreeSet<String> = krate.modules[0].children.keys().cloned().collect();
    let listed: BTreeSet<String> = listed.into_iter().collect();
    assert_eq!(
        declared, listed,
        "the layer list in src/lib.rs and the modules it declares differ"
    );
}

#[test]
fn no_file_uses_a_module_of_its_own_layer_or_above() {
    let krate = Crate::read();
    let rank: BTreeMap<String, usize> = layers()
        .into_iter()
        .enumerate()
        .flat_map(|(i, line)| line.into_iter().map(move |m| (m, i)))
        .collect();
    let mut wrong = Vec::new();
    for (from, targets) in krate.arrows(true) {
        let source = &krate.modules[from];
        let from_top = top_module(source);
        for to in targets {
            let target = &krate.modules[to];
            let to_top = top_module(target);
            if from_top == to_top || from_top == "lib" {
                continue;
            }
            let (Some(a), Some(b)) = (rank.get(&from_top), rank.get(&to_top)) else {
                continue;
            };
            if a >= b {
                wrong.push(format!("src/{} -> src/{}", source.file, target.file));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "these files use a module of their own layer or a higher one in src/lib.rs:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn protocol_uses_nothing_of_the_crate() {
    let krate = Crate::read();
    let mut wrong = Vec::new();
    for (from, targets) in krate.arrows(true) {
        let source = &krate.modules[from];
        if top_module(source) != "protocol" {
            continue;
        }
        for to in targets {
            let target = &krate.modules[to];
            if top_module(target) != "protocol" {
                wrong.push(format!("src/{} -> src/{}", source.file, target.file));
            }
        }
    }
    assert!(wrong.is_empty(), "protocol/ uses:\n{}", wrong.join("\n"));
}

#[test]
fn no_files_use_each_other_in_a_circle() {
    let krate = Crate::read();
    let arrows = krate.arrows(false);
    let mut wrong = Vec::new();
    for circle in circles(krate.modules.len(), &arrows) {
        let files: Vec<&str> = circle
            .iter()
            .map(|&i| krate.modules[i].file.as_str())
            .collect();
        let allowed = TEMPORARY_TUI_CIRCLES_TO_REMOVE
            .iter()
            .any(|known| files.iter().all(|f| known.contains(f)));
        if !allowed {
            let ties: Vec<String> = circle
                .iter()
                .flat_map(|&from| {
                    arrows[&from]
                        .iter()
                        .filter(|to| circle.contains(to))
                        .map(move |&to| (from, to))
                })
                .map(|(from, to)| {
                    format!(
                        "  src/{} -> src/{}",
                        krate.modules[from].file, krate.modules[to].file
                    )
                })
                .collect();
            wrong.push(format!("{}:\n{}", files.join(", "), ties.join("\n")));
        }
    }
    assert!(wrong.is_empty(), "import circles:\n{}", wrong.join("\n"));
}

/// The strongly connected groups of more than one file (Tarjan).
fn circles(count: usize, arrows: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<Vec<usize>> {
    struct Walk<'a> {
        arrows: &'a BTreeMap<usize, BTreeSet<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(w: &mut Walk, v: usize) {
        w.index[v] = Some(w.next);
        w.low[v] = w.next;
        w.next += 1;
        w.stack.push(v);
        w.on_stack[v] = true;
        let targets: Vec<usize> = w.arrows.get(&v).into_iter().flatten().copied().collect();
        for t in targets {
            match w.index[t] {
                None => {
                    visit(w, t);
                    w.low[v] = w.low[v].min(w.low[t]);
                }
                Some(i) if w.on_stack[t] => w.low[v] = w.low[v].min(i),
                Some(_) => {}
            }
        }
        if Some(w.low[v]) == w.index[v] {
            let mut group = Vec::new();
            while let Some(t) = w.stack.pop() {
                w.on_stack[t] = false;
                group.push(t);
                if t == v {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort_unstable();
                w.found.push(group);
            }
        }
    }
    let mut walk = Walk {
        arrows,
        index: vec![None; count],
        low: vec![0; count],
        on_stack: vec![false; count],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..count {
        if walk.index[v].is_none() {
            visit(&mut walk, v);
        }
    }
    walk.found
}

/// Functions longer than this are split (tests and schema data aside).
const MAX_FUNCTION_LINES: usize = 120;

/// Long on purpose: the tool schemas, one literal.
const LONG_BY_NATURE: &[(&str, &str)] = &[("tools/specs.rs", "spec")];

#[test]
fn no_function_outside_tests_is_over_120_lines() {
    let header = regex::Regex::new(
        r"^(\s*)(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:const\s+)?(?:unsafe\s+)?fn\s+(\w+)",
    )
    .expect("the pattern compiles");
    let krate = Crate::read();
    let mut long = Vec::new();
    for module in &krate.modules {
        if module.file.ends_with("_tests.rs") {
            continue;
        }
        let text = fs::read_to_string(src_dir().join(&module.file)).expect("read");
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            // A test module closes the file's code.
            if line.trim() == "#[cfg(test)]"
                && lines
                    .get(i + 1)
                    .is_some_and(|l| l.trim_start().starts_with("mod tests"))
            {
                break;
            }
            let Some(caps) = header.captures(line) else {
                continue;
            };
            if line.trim_end().ends_with(';') {
                continue;
            }
            let close = format!("{}}}", &caps[1]);
            let Some(end) = lines[i + 1..].iter().position(|l| *l == close) else {
                continue;
            };
            let length = end + 2;
            let name = &caps[2];
            if length > MAX_FUNCTION_LINES
                && !LONG_BY_NATURE.contains(&(module.file.as_str(), name))
            {
                long.push(format!("src/{}: {name} ({length} lines)", module.file));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FUNCTION_LINES} lines:\n{}",
        long.join("\n")
    );
}
