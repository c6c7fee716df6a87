//! Turning a theme file's values (colour names, style tables) into ratatui styles.

use std::collections::BTreeMap;

use ratatui::style::{Color, Modifier, Style};

use super::ThemeError;

/// The colour names a theme may use: ratatui's 16 named ANSI colours, plus `reset`
/// (the terminal's own default colour).
pub const ANSI_COLOUR_NAMES: [&str; 17] = [
    "black",
    "red",
    "green",
    "yellow",
    "blue",
    "magenta",
    "cyan",
    "gray",
    "dark-gray",
    "light-red",
    "light-green",
    "light-yellow",
    "light-blue",
    "light-magenta",
    "light-cyan",
    "white",
    "reset",
];

/// The modifier names a theme may use.
pub const MODIFIER_NAMES: [&str; 9] = [
    "bold",
    "dim",
    "italic",
    "underlined",
    "slow_blink",
    "rapid_blink",
    "reversed",
    "hidden",
    "crossed_out",
];

fn ansi_colour(name: &str) -> Option<Color> {
    let colour = match name {
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" => Color::Gray,
        "dark-gray" => Color::DarkGray,
        "light-red" => Color::LightRed,
        "light-green" => Color::LightGreen,
        "light-yellow" => Color::LightYellow,
        "light-blue" => Color::LightBlue,
        "light-magenta" => Color::LightMagenta,
        "light-cyan" => Color::LightCyan,
        "white" => Color::White,
        "reset" => Color::Reset,
        _ => return None,
    };
    Some(colour)
}

fn modifier(name: &str) -> Option<Modifier> {
    let modifier = match name {
        "bold" => Modifier::BOLD,
        "dim" => Modifier::DIM,
        "italic" => Modifier::ITALIC,
        "underlined" => Modifier::UNDERLINED,
        "slow_blink" => Modifier::SLOW_BLINK,
        "rapid_blink" => Modifier::RAPID_BLINK,
        "reversed" => Modifier::REVERSED,
        "hidden" => Modifier::HIDDEN,
        "crossed_out" => Modifier::CROSSED_OUT,
        _ => return None,
    };
    Some(modifier)
}

/// Where a value sits, for error messages: the theme's name and the key.
pub(crate) struct Location<'a> {
    pub theme: &'a str,
    pub key: &'a str,
}

impl Location<'_> {
    fn unsupported_colour(&self, value: &str) -> ThemeError {
        ThemeError::UnsupportedColour {
            theme: self.theme.to_string(),
            key: self.key.to_string(),
            value: value.to_string(),
            allowed: ANSI_COLOUR_NAMES.join(", "),
        }
    }

    fn invalid(&self, reason: impl Into<String>) -> ThemeError {
        ThemeError::InvalidValue {
            theme: self.theme.to_string(),
            key: self.key.to_string(),
            reason: reason.into(),
        }
    }
}

/// A palette entry must be one of the ANSI colour names.
pub(crate) fn palette_colour(value: &toml::Value, at: &Location<'_>) -> Result<Color, ThemeError> {
    let name = value
        .as_str()
        .ok_or_else(|| at.invalid("a palette entry must be a colour name string"))?;
    ansi_colour(name).ok_or_else(|| at.unsupported_colour(name))
}

/// A colour in a style: a palette name first, else an ANSI colour name.
fn style_colour(
    name: &str,
    palette: &BTreeMap<String, Color>,
    at: &Location<'_>,
) -> Result<Color, ThemeError> {
    palette
        .get(name)
        .copied()
        .or_else(|| ansi_colour(name))
        .ok_or_else(|| at.unsupported_colour(name))
}

/// Parses a semantic key's value: a bare colour string (the foreground) or a table
/// `{ fg = .., bg = .., modifiers = [..] }`.
pub fn style(
    value: &toml::Value,
    palette: &BTreeMap<String, Color>,
    at: &Location<'_>,
) -> Result<Style, ThemeError> {
    match value {
        toml::Value::String(name) => Ok(Style::new().fg(style_colour(name, palette, at)?)),
        toml::Value::Table(table) => {
            let mut style = Style::new();
            for (field, field_value) in table {
                match field.as_str() {
                    "fg" | "bg" => {
                        let name = field_value.as_str().ok_or_else(|| {
                            at.invalid(format!("`{field}` must be a colour name string"))
                        })?;
                        let colour = style_colour(name, palette, at)?;
                        style = if field == "fg" {
                            style.fg(colour)
                        } else {
                            style.bg(colour)
                        };
                    }
                    "modifiers" => {
                        let names = field_value.as_array().ok_or_else(|| {
                            at.invalid("`modifiers` must be a list of modifier names")
                        })?;
                        for name in names {
                            let parsed = name.as_str().and_then(modifier).ok_or_else(|| {
                                at.invalid(format!(
                                    "modifier {name} is not one of: {}",
                                    MODIFIER_NAMES.join(", ")
                                ))
                            })?;
                            style = style.add_modifier(parsed);
                        }
                    }
                    other => {
                        return Err(at.invalid(format!(
                            "unknown field `{other}`; a style has only `fg`, `bg` and `modifiers`"
                        )));
                    }
                }
            }
            Ok(style)
        }
        _ => Err(at.invalid("a style is a colour name or a table { fg, bg, modifiers }")),
    }
}

/// Whether a TOML table is a style (rather than a table of nested dotted keys).
pub(crate) fn is_style_table(table: &toml::Table) -> bool {
    ["fg", "bg", "modifiers"]
        .iter()
        .any(|field| table.contains_key(*field))
}
