//! Key names as text (`"ctrl-c"`, `"shift-tab"`, `"A"`, `"space"`) and as crossterm events.

use std::fmt;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// A key with the modifiers that matter for bindings (Ctrl, Alt, Shift), normalised so that
/// one physical key has one value: a character carries its own case (`A`, not `shift-a`)
/// and Shift+Tab is `BackTab`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    code: KeyCode,
    modifiers: KeyModifiers,
}

#[derive(Debug, thiserror::Error)]
#[error(
    "`{text}` is not a key: {reason}; write keys like \"q\", \"A\", \"ctrl-c\", \"shift-tab\", \"pageup\", \"space\", \"f1\""
)]
pub struct KeyParseError {
    pub text: String,
    pub reason: String,
}

const NAMED_KEYS: [(&str, KeyCode); 17] = [
    ("esc", KeyCode::Esc),
    ("enter", KeyCode::Enter),
    ("tab", KeyCode::Tab),
    ("backtab", KeyCode::BackTab),
    ("space", KeyCode::Char(' ')),
    ("backspace", KeyCode::Backspace),
    ("delete", KeyCode::Delete),
    ("insert", KeyCode::Insert),
    ("home", KeyCode::Home),
    ("end", KeyCode::End),
    ("pageup", KeyCode::PageUp),
    ("pagedown", KeyCode::PageDown),
    ("up", KeyCode::Up),
    ("down", KeyCode::Down),
    ("left", KeyCode::Left),
    ("right", KeyCode::Right),
    ("minus", KeyCode::Char('-')),
];

const MODIFIER_PREFIXES: [(&str, KeyModifiers); 3] = [
    ("ctrl-", KeyModifiers::CONTROL),
    ("alt-", KeyModifiers::ALT),
    ("shift-", KeyModifiers::SHIFT),
];

impl Key {
    /// A key, normalised (see [`Key`]).
    pub fn new(code: KeyCode, modifiers: KeyModifiers) -> Key {
        let mut modifiers =
            modifiers & (KeyModifiers::CONTROL | KeyModifiers::ALT | KeyModifiers::SHIFT);
        let mut code = code;
        let shifted = modifiers.contains(KeyModifiers::SHIFT);
        match code {
            KeyCode::Char(character) => {
                if shifted && character.is_lowercase() {
                    code = KeyCode::Char(character.to_uppercase().next().unwrap_or(character));
                }
                modifiers.remove(KeyModifiers::SHIFT);
            }
            KeyCode::Tab if shifted => {
                code = KeyCode::BackTab;
                modifiers.remove(KeyModifiers::SHIFT);
            }
            KeyCode::BackTab => modifiers.remove(KeyModifiers::SHIFT),
            _ => {}
        }
        Key { code, modifiers }
    }

    /// A plain character key.
    pub fn char(character: char) -> Key {
        Key::new(KeyCode::Char(character), KeyModifiers::NONE)
    }

    /// A character with Ctrl held.
    pub fn ctrl(character: char) -> Key {
        Key::new(KeyCode::Char(character), KeyModifiers::CONTROL)
    }

    /// A key without modifiers.
    pub fn code(code: KeyCode) -> Key {
        Key::new(code, KeyModifiers::NONE)
    }

    /// The key a terminal event stands for.
    pub(crate) fn from_event(event: &KeyEvent) -> Key {
        Key::new(event.code, event.modifiers)
    }

    /// Parses `"ctrl-c"`, `"?"`, `"shift-tab"`, `"A"`, `"space"`, `"f5"`, … Modifier and key
    /// names ignore case; a single character keeps its case. `"-"` is the minus key.
    pub fn parse(text: &str) -> Result<Key, KeyParseError> {
        let error = |reason: &str| KeyParseError {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let mut rest = text;
        let mut modifiers = KeyModifiers::NONE;
        'prefixes: loop {
            for (prefix, modifier) in MODIFIER_PREFIXES {
                let has_prefix = rest
                    .get(..prefix.len())
                    .is_some_and(|head| head.eq_ignore_ascii_case(prefix));
                if has_prefix && rest.len() > prefix.len() {
                    modifiers |= modifier;
                    rest = &rest[prefix.len()..];
                    continue 'prefixes;
                }
            }
            break;
        }
        let mut characters = rest.chars();
        let code = match (characters.next(), characters.next()) {
            (None, _) => return Err(error("no key after the modifiers")),
            (Some(character), None) => KeyCode::Char(character),
            _ => named_code(rest).ok_or_else(|| error("unknown key name"))?,
        };
        Ok(Key::new(code, modifiers))
    }

    /// The crossterm event a terminal sends for this key (a key press).
    pub(crate) fn to_key_event(self) -> KeyEvent {
        KeyEvent::new(self.code, self.modifiers)
    }
}

fn named_code(name: &str) -> Option<KeyCode> {
    let lower = name.to_ascii_lowercase();
    if let Some(number) = lower.strip_prefix('f').and_then(|n| n.parse::<u8>().ok())
        && (1..=24).contains(&number)
    {
        return Some(KeyCode::F(number));
    }
    NAMED_KEYS
        .iter()
        .find(|(known, _)| *known == lower)
        .map(|(_, code)| *code)
}

/// Parses a key's text straight to the crossterm event it matches.
pub fn parse_key_event(text: &str) -> Result<KeyEvent, KeyParseError> {
    Key::parse(text).map(Key::to_key_event)
}

impl fmt::Display for Key {
    /// The canonical text, which [`Key::parse`] reads back to the same key.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (prefix, modifier) in MODIFIER_PREFIXES {
            if self.modifiers.contains(modifier) {
                formatter.write_str(prefix)?;
            }
        }
        match self.code {
            KeyCode::Char(' ') => formatter.write_str("space"),
            KeyCode::Char(character) => write!(formatter, "{character}"),
            KeyCode::BackTab => formatter.write_str("shift-tab"),
            KeyCode::F(number) => write!(formatter, "f{number}"),
            code => {
                let name = NAMED_KEYS
                    .iter()
                    .find(|(_, known)| *known == code)
                    .map_or("unknown", |(name, _)| *name);
                formatter.write_str(name)
            }
        }
    }
}
