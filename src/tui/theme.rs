//! Colour themes as data (helix-style TOML files) resolved to ratatui styles by [`Meaning`].
//!
//! A theme file has an optional `inherits = "name"`, a `[palette]` mapping names to ANSI
//! colour names, and semantic keys (quoted, like `"ui.border.focused"`, or as nested
//! tables) whose values are a colour or `{ fg, bg, modifiers }`. Only the 16 ANSI colours
//! are accepted, so every terminal shows a theme. A child's palette applies to the styles it
//! inherits. A meaning with no key of its own takes the style of its dotted parent
//! (`ui.border.focused` falls back to `ui.border`), and else the terminal's default style.

mod meaning;
mod style_value;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use ratatui::style::{Color, Style};

pub use meaning::Meaning;
use style_value::Location;
pub use style_value::{ANSI_COLOUR_NAMES, MODIFIER_NAMES};

/// The themes compiled into the binary, by name.
const BUILT_IN_THEMES: [(&str, &str); 3] = [
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// The name of the theme used when none is chosen.
pub(crate) const DEFAULT_THEME: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum ThemeError {
    #[error("no theme named `{name}`; available themes: {available}")]
    UnknownTheme { name: String, available: String },
    #[error("themes inherit from each other in a cycle ({chain}); remove one `inherits` line")]
    InheritanceCycle { chain: String },
    #[error("could not read theme file {path}: {source}; check that it exists and is readable")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("theme `{theme}` is not valid TOML: {source}")]
    Toml {
        theme: String,
        source: Box<toml::de::Error>,
    },
    #[error(
        "theme `{theme}`, key `{key}`: `{value}` is neither a palette name nor one of the 16 ANSI colours ({allowed}); RGB and indexed colours are not supported so that every terminal can show the theme"
    )]
    UnsupportedColour {
        theme: String,
        key: String,
        value: String,
        allowed: String,
    },
    #[error("theme `{theme}`, key `{key}`: {reason}")]
    InvalidValue {
        theme: String,
        key: String,
        reason: String,
    },
    #[error("theme `{theme}` has unknown key `{key}`; known keys: {known}")]
    UnknownKey {
        theme: String,
        key: String,
        known: String,
    },
}

/// A resolved theme: one style per [`Meaning`].
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    name: String,
    styles: Vec<Style>,
}

/// Where a theme's text came from; a user theme may inherit the built-in of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    User,
    BuiltIn,
}

/// One theme file, parsed but not yet resolved.
struct ThemeFile {
    name: String,
    inherits: Option<String>,
    palette: toml::Table,
    styles: BTreeMap<String, toml::Value>,
}

impl Theme {
    /// Loads the theme `name`, looking in `user_dir` (files `<name>.toml`) before the
    /// built-in themes. When `NO_COLOR` is set and non-empty, colours are removed.
    pub(crate) fn load(name: &str, user_dir: Option<&Path>) -> Result<Theme, ThemeError> {
        let theme = Theme::load_coloured(name, user_dir)?;
        let no_color = std::env::var("NO_COLOR").ok();
        if colour_disabled(no_color.as_deref()) {
            Ok(theme.without_colours())
        } else {
            Ok(theme)
        }
    }

    /// Loads the theme `name` as [`Theme::load`] does, ignoring `NO_COLOR`.
    pub fn load_coloured(name: &str, user_dir: Option<&Path>) -> Result<Theme, ThemeError> {
        let mut chain: Vec<ThemeFile> = Vec::new();
        let mut seen: Vec<(String, Source)> = Vec::new();
        let mut next = Some((name.to_string(), None::<Source>));
        while let Some((wanted, below)) = next.take() {
            let (text, source) = find_theme_text(&wanted, user_dir, below)?;
            if seen.contains(&(wanted.clone(), source)) {
                let mut names: Vec<&str> = seen
                    .iter()
                    .map(|(seen_name, _)| seen_name.as_str())
                    .collect();
                names.push(&wanted);
                return Err(ThemeError::InheritanceCycle {
                    chain: names.join(" -> "),
                });
            }
            let file = parse_theme_file(&wanted, &text)?;
            // A user theme inheriting its own name means the built-in one of that name.
            next = file.inherits.clone().map(|parent| {
                let below = (parent == wanted && source == Source::User).then_some(Source::BuiltIn);
                (parent, below)
            });
            seen.push((wanted, source));
            chain.push(file);
        }
        resolve(name, chain)
    }

    /// The names of every theme available: built-in ones and `*.toml` files in `user_dir`.
    pub fn available(user_dir: Option<&Path>) -> Vec<String> {
        let mut names: BTreeSet<String> = BUILT_IN_THEMES
            .iter()
            .map(|(name, _)| (*name).to_string())
            .collect();
        if let Some(entries) = user_dir.and_then(|dir| std::fs::read_dir(dir).ok()) {
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().is_some_and(|ext| ext == "toml")
                    && let Some(stem) = path.file_stem().and_then(|stem| stem.to_str())
                {
                    names.insert(stem.to_string());
                }
            }
        }
        names.into_iter().collect()
    }

    /// The same theme with every colour removed and modifiers kept (for `NO_COLOR`).
    pub fn without_colours(mut self) -> Theme {
        for style in &mut self.styles {
            style.fg = None;
            style.bg = None;
            style.underline_color = None;
        }
        self
    }

    /// The style for a meaning.
    pub fn get(&self, meaning: Meaning) -> Style {
        self.styles
            .get(meaning.index())
            .copied()
            .unwrap_or_default()
    }

    /// The theme's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Whether a `NO_COLOR` value asks for no colours (any non-empty value does).
pub(crate) fn colour_disabled(no_color: Option<&str>) -> bool {
    no_color.is_some_and(|value| !value.is_empty())
}

fn find_theme_text(
    name: &str,
    user_dir: Option<&Path>,
    only: Option<Source>,
) -> Result<(String, Source), ThemeError> {
    if only != Some(Source::BuiltIn)
        && let Some(dir) = user_dir
    {
        let path = dir.join(format!("{name}.toml"));
        if path.is_file() {
            let text = std::fs::read_to_string(&path)
                .map_err(|source| ThemeError::Read { path, source })?;
            return Ok((text, Source::User));
        }
    }
    BUILT_IN_THEMES
        .iter()
        .find(|(built_in, _)| *built_in == name)
        .map(|(_, text)| ((*text).to_string(), Source::BuiltIn))
        .ok_or_else(|| ThemeError::UnknownTheme {
            name: name.to_string(),
            available: Theme::available(user_dir).join(", "),
        })
}

fn parse_theme_file(name: &str, text: &str) -> Result<ThemeFile, ThemeError> {
    let table: toml::Table = toml::from_str(text).map_err(|source| ThemeError::Toml {
        theme: name.to_string(),
        source: Box::new(source),
    })?;
    let mut file = ThemeFile {
        name: name.to_string(),
        inherits: None,
        palette: toml::Table::new(),
        styles: BTreeMap::new(),
    };
    for (key, value) in table {
        match (key.as_str(), value) {
            ("inherits", toml::Value::String(parent)) => file.inherits = Some(parent),
            ("palette", toml::Value::Table(palette)) => file.palette = palette,
            ("inherits" | "palette", _) => {
                return Err(ThemeError::InvalidValue {
                    theme: name.to_string(),
                    key,
                    reason: "`inherits` must be a theme name and `palette` a table".to_string(),
                });
            }
            (_, value) => flatten_style_key(name, key, value, &mut file.styles)?,
        }
    }
    Ok(file)
}

/// Collects `ui = { border = { focused = .. } }` and `"ui.border.focused" = ..` alike.
fn flatten_style_key(
    theme: &str,
    key: String,
    value: toml::Value,
    styles: &mut BTreeMap<String, toml::Value>,
) -> Result<(), ThemeError> {
    match value {
        toml::Value::Table(table) if !style_value::is_style_table(&table) => {
            for (child, child_value) in table {
                flatten_style_key(theme, format!("{key}.{child}"), child_value, styles)?;
            }
            Ok(())
        }
        value => {
            if Meaning::from_key(&key).is_none() {
                let known: Vec<&str> = Meaning::ALL.iter().map(|meaning| meaning.key()).collect();
                return Err(ThemeError::UnknownKey {
                    theme: theme.to_string(),
                    key,
                    known: known.join(", "),
                });
            }
            styles.insert(key, value);
            Ok(())
        }
    }
}

/// Merges a chain (child first) from the root ancestor down and resolves every meaning.
fn resolve(name: &str, chain: Vec<ThemeFile>) -> Result<Theme, ThemeError> {
    let mut palette_values: BTreeMap<String, (String, toml::Value)> = BTreeMap::new();
    let mut style_values: BTreeMap<String, (String, toml::Value)> = BTreeMap::new();
    for file in chain.into_iter().rev() {
        for (key, value) in file.palette {
            palette_values.insert(key, (file.name.clone(), value));
        }
        for (key, value) in file.styles {
            style_values.insert(key, (file.name.clone(), value));
        }
    }
    let mut palette: BTreeMap<String, Color> = BTreeMap::new();
    for (key, (theme, value)) in &palette_values {
        let location_key = format!("palette.{key}");
        let at = Location {
            theme,
            key: &location_key,
        };
        palette.insert(key.clone(), style_value::palette_colour(value, &at)?);
    }
    let mut resolved: BTreeMap<&str, Style> = BTreeMap::new();
    for (key, (theme, value)) in &style_values {
        let at = Location { theme, key };
        resolved.insert(key.as_str(), style_value::style(value, &palette, &at)?);
    }
    let styles = Meaning::ALL
        .iter()
        .map(|meaning| style_with_fallback(meaning.key(), &resolved))
        .collect();
    Ok(Theme {
        name: name.to_string(),
        styles,
    })
}

fn style_with_fallback(key: &str, resolved: &BTreeMap<&str, Style>) -> Style {
    let mut current = key;
    loop {
        if let Some(style) = resolved.get(current) {
            return *style;
        }
        match current.rsplit_once('.') {
            Some((parent, _)) => current = parent,
            None => return Style::default(),
        }
    }
}

#[cfg(test)]
#[path = "theme/tests.rs"]
mod tests;
