//! Text from the outside world (model replies, command output, file contents)
//! made safe to draw: terminal escape sequences and control characters would
//! otherwise move the cursor or recolour the screen behind ratatui's back.
//! And read bounded: a file from outside is read from its end, never whole.

/// Tabs become four spaces, `\r` is dropped, ANSI escape sequences are removed,
/// other control characters (and bidirectional overrides) become `�`; newlines
/// are kept. The rules are those of [`crate::terminal_text`], shared with every
/// line printed outside the session. Secrets are redacted first, as on
/// every other output.
pub fn clean(text: &str) -> String {
    crate::terminal_text::clean_for_screen(&crate::trace::redact::shown(text))
}

#[cfg(test)]
mod tests {
    use super::clean;

    #[test]
    fn escape_sequences_and_controls_never_reach_the_terminal() {
        assert_eq!(clean("plain\ntext"), "plain\ntext");
        assert_eq!(clean("\u{1b}[31mred\u{1b}[0m ok"), "red ok");
        assert_eq!(clean("a\tb\r\n"), "a    b\n");
        assert_eq!(clean("title\u{1b}]0;pwned\u{7}after"), "titleafter");
        assert_eq!(clean("osc\u{1b}]8;;x\u{1b}\\link"), "osclink");
        assert_eq!(clean("bell\u{7}\u{0}"), "bell\u{fffd}\u{fffd}");
        assert_eq!(clean("cut \u{1b}["), "cut ");
        assert!(!clean("\u{1b}c\u{1b}[2J\u{9b}x").contains('\u{1b}'));
    }
}
