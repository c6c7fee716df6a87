//! Text from the outside world (model replies, command output, file contents)
//! made safe to draw: terminal escape sequences and control characters would
//! otherwise move the cursor or recolour the screen behind ratatui's back.

/// Tabs become four spaces, `\r` is dropped, ANSI escape sequences are removed,
/// other control characters become `�`; newlines are kept.
pub fn clean(text: &str) -> String {
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => out.push('\n'),
            '\t' => out.push_str("    "),
            '\r' => {}
            '\u{1b}' => skip_escape(&mut chars),
            c if c.is_control() => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Skips the rest of an escape sequence: CSI (`ESC [ … final`), OSC (`ESC ] … BEL/ST`),
/// or a single character after ESC.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            for c in chars.by_ref() {
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' {
                    break;
                }
                if c == '\u{1b}' {
                    chars.next_if_eq(&'\\');
                    break;
                }
            }
        }
        _ => {}
    }
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
