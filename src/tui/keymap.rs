//! Keys as data: context → key → named [`Action`], with user overrides from TOML.
//!
//! A keymap file has one table per context, e.g.
//!
//! ```toml
//! [global]
//! "ctrl-q" = "quit"
//! [review]
//! "x" = "toggle-hunk"
//! "space" = "none"    # unbind
//! ```
//!
//! Lookup tries the focused context first, then `global` — except in text-entry contexts
//! (`input`), where a plain character is text and only keys with Ctrl or Alt, and keys
//! that are not characters, fall through to `global`.
//!
//! Conflicts are rejected, naming both bindings:
//! - one file binding the same key (`"A"` and `"shift-a"`) to two actions in one context;
//! - a context binding that would hide a `global` binding of the same key to a different
//!   action, unless the defaults already do so (the help overlay's `q` and `?` close it).
//!   To use a globally bound key in a context, unbind (`"none"`) or move the global one in
//!   the same file. A user binding replaces a default binding of the same key in the same
//!   context; that is an override, not a conflict.

mod action;
mod defaults;
mod key;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

pub use action::{Action, Context};
pub use key::{Key, KeyParseError, parse_key_event};

/// The action name that removes a binding in a keymap file.
pub(crate) const UNBIND: &str = "none";

#[derive(Debug, thiserror::Error)]
pub enum KeymapError {
    #[error("could not read keymap file {path}: {source}; check that it exists and is readable")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("keymap file is not valid TOML: {0}")]
    Toml(#[from] Box<toml::de::Error>),
    #[error("keymap file has unknown context `[{name}]`; contexts are: {known}")]
    UnknownContext { name: String, known: String },
    #[error("keymap [{context}] must be a table of \"key\" = \"action\" lines")]
    NotATable { context: String },
    #[error("keymap [{context}]: {source}")]
    Key {
        context: String,
        source: KeyParseError,
    },
    #[error(
        "keymap [{context}] \"{key}\": `{value}` is not an action; use \"none\" to unbind or one of: {known}"
    )]
    UnknownAction {
        context: String,
        key: String,
        value: String,
        known: String,
    },
    #[error("keymap [{context}] binds one key twice: {first} and {second}; keep one of them")]
    ConflictInContext {
        context: String,
        first: String,
        second: String,
    },
    #[error(
        "keymap [{context}] {binding} would hide [global] {global}; pick another key, or unbind or move the global one"
    )]
    ShadowsGlobal {
        context: String,
        binding: String,
        global: String,
    },
}

/// Every context's bindings, in the order the help overlay shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    bindings: BTreeMap<Context, Vec<(Key, Action)>>,
}

impl Default for Keymap {
    fn default() -> Keymap {
        Keymap::defaults()
    }
}

impl Keymap {
    /// The built-in bindings.
    pub fn defaults() -> Keymap {
        let mut bindings: BTreeMap<Context, Vec<(Key, Action)>> = BTreeMap::new();
        for (context, key, action) in defaults::default_bindings() {
            bindings.entry(context).or_default().push((key, action));
        }
        Keymap { bindings }
    }

    /// The defaults with the overrides in `path` merged over them; no path, the defaults.
    pub(crate) fn load(path: Option<&Path>) -> Result<Keymap, KeymapError> {
        let Some(path) = path else {
            return Ok(Keymap::defaults());
        };
        let text = std::fs::read_to_string(path).map_err(|source| KeymapError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Keymap::defaults().with_overrides(&text)
    }

    /// Merges a keymap file's text over this keymap, rejecting conflicts (see module docs).
    pub fn with_overrides(mut self, text: &str) -> Result<Keymap, KeymapError> {
        let table: toml::Table = toml::from_str(text).map_err(Box::new)?;
        for (context_name, entries) in table {
            let context =
                Context::from_name(&context_name).ok_or_else(|| KeymapError::UnknownContext {
                    known: Context::ALL.map(Context::name).join(", "),
                    name: context_name.clone(),
                })?;
            let toml::Value::Table(entries) = entries else {
                return Err(KeymapError::NotATable {
                    context: context_name,
                });
            };
            let overrides = parse_context_entries(context, &entries)?;
            let list = self.bindings.entry(context).or_default();
            for (key, action) in overrides {
                let existing = list.iter().position(|(bound, _)| *bound == key);
                match (existing, action) {
                    (Some(index), Some(action)) => list[index].1 = action,
                    (Some(index), None) => {
                        list.remove(index);
                    }
                    (None, Some(action)) => list.push((key, action)),
                    (None, None) => {}
                }
            }
        }
        self.check_shadows()?;
        Ok(self)
    }

    /// The action a key press means in `context`: the context's binding, else the global one.
    /// Key releases mean nothing.
    pub(crate) fn lookup(&self, context: Context, event: &KeyEvent) -> Option<Action> {
        if event.kind == KeyEventKind::Release {
            return None;
        }
        let key = Key::from_event(event);
        self.bound(context, key).or_else(|| {
            global_applies(context, key)
                .then(|| self.bound(Context::Global, key))
                .flatten()
        })
    }

    /// A context's own bindings as (key text, action, description), for the help overlay;
    /// [`Context::Global`] gives the keys that work everywhere.
    pub(crate) fn bindings(&self, context: Context) -> Vec<(String, Action, &'static str)> {
        self.bindings
            .get(&context)
            .map(|list| {
                list.iter()
                    .map(|(key, action)| (key.to_string(), *action, action.description()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn bound(&self, context: Context, key: Key) -> Option<Action> {
        self.bindings
            .get(&context)?
            .iter()
            .find(|(bound, _)| *bound == key)
            .map(|(_, action)| *action)
    }

    /// Every place a context binding hides a different global one, as (context, key,
    /// context action, global action).
    fn shadows(&self) -> HashSet<(Context, Key, Action, Action)> {
        let mut shadows = HashSet::new();
        for (context, list) in &self.bindings {
            if *context == Context::Global {
                continue;
            }
            for (key, action) in list {
                if let Some(global) = self.bound(Context::Global, *key)
                    && global != *action
                    && global_applies(*context, *key)
                {
                    shadows.insert((*context, *key, *action, global));
                }
            }
        }
        shadows
    }

    fn check_shadows(&self) -> Result<(), KeymapError> {
        let allowed = Keymap::defaults().shadows();
        let mut found: Vec<_> = self.shadows().difference(&allowed).copied().collect();
        found.sort_by_key(|(context, key, _, _)| (*context, key.to_string()));
        match found.first() {
            None => Ok(()),
            Some((context, key, action, global)) => Err(KeymapError::ShadowsGlobal {
                context: context.name().to_string(),
                binding: describe(&key.to_string(), *action),
                global: describe(&key.to_string(), *global),
            }),
        }
    }
}

/// Whether the global binding of `key` is consulted in `context` (see module docs).
fn global_applies(context: Context, key: Key) -> bool {
    if !context.is_text_entry() {
        return true;
    }
    let event = key.to_key_event();
    let is_plain_character = matches!(event.code, KeyCode::Char(_))
        && !event
            .modifiers
            .intersects(KeyModifiers::CONTROL | KeyModifiers::ALT);
    !is_plain_character
}

fn describe(key_text: &str, action: Action) -> String {
    format!("\"{key_text}\" = \"{}\"", action.name())
}

/// One context table of a keymap file: key → action, or `None` to unbind.
fn parse_context_entries(
    context: Context,
    entries: &toml::Table,
) -> Result<Vec<(Key, Option<Action>)>, KeymapError> {
    let mut parsed: Vec<(Key, Option<Action>)> = Vec::new();
    let mut first_text: HashMap<Key, (String, Option<Action>)> = HashMap::new();
    for (key_text, value) in entries {
        let key = Key::parse(key_text).map_err(|source| KeymapError::Key {
            context: context.name().to_string(),
            source,
        })?;
        let unknown_action = || KeymapError::UnknownAction {
            context: context.name().to_string(),
            key: key_text.clone(),
            value: value.to_string(),
            known: Action::names().join(", "),
        };
        let name = value.as_str().ok_or_else(unknown_action)?;
        let action = if name == UNBIND {
            None
        } else {
            Some(Action::from_name(name).ok_or_else(unknown_action)?)
        };
        if let Some((earlier_text, earlier_action)) = first_text.get(&key) {
            if *earlier_action != action {
                let show = |text: &str, action: Option<Action>| match action {
                    Some(action) => describe(text, action),
                    None => format!("\"{text}\" = \"{UNBIND}\""),
                };
                return Err(KeymapError::ConflictInContext {
                    context: context.name().to_string(),
                    first: show(earlier_text, *earlier_action),
                    second: show(key_text, action),
                });
            }
            continue;
        }
        first_text.insert(key, (key_text.clone(), action));
        parsed.push((key, action));
    }
    Ok(parsed)
}

#[cfg(test)]
#[path = "keymap/tests.rs"]
mod tests;
