//! Text from the model, a command or the workspace, made safe for a terminal.
//!
//! One predicate, [`is_unsafe`], decides what a terminal must never receive
//! raw: C0 controls (ESC starts every escape sequence: OSC 52 writes the
//! clipboard, CSI 2J clears the screen), DEL, C1 controls (U+009B is a
//! one-character CSI on some terminals), bidirectional overrides and isolates
//! (U+202E makes a line read backwards: "Trojan Source"), and the Unicode
//! line and paragraph separators. Three renderings share it:
//!
//! - [`escape_line`]: for every line minicoder prints to stdout or stderr;
//!   each unsafe character becomes a visible escape (`\x1b`, `\n`,
//!   `\u{202e}`), so one printed line is always one line on the screen;
//! - [`escape_json`]: for JSON printed on stdout, the same characters as
//!   `\uXXXX` escapes, which leave the decoded value unchanged;
//! - [`clean_for_screen`]: for the full-screen session, where escape
//!   sequences are dropped whole, newlines kept and tabs expanded.

use std::borrow::Cow;
use std::io::Write;

/// Whether a terminal must not receive `c` as it is.
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}' | '\u{200f}'
        | '\u{2028}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// `text` as one line a terminal shows literally: every [`is_unsafe`]
/// character, newlines included, replaced by a visible escape. Borrowed when
/// nothing had to change.
pub(crate) fn escape_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && is_unsafe(c) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Serialized JSON with every [`is_unsafe`] character that the serializer
/// left raw written as a `\uXXXX` escape: the same JSON value, safe to print.
/// (Outside strings, compact JSON holds only ASCII punctuation, digits and
/// letters, so every such character is inside a string.)
pub(crate) fn escape_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(is_unsafe) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_unsafe(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Text for the full-screen session: tabs become four spaces, `\r` is
/// dropped, ANSI escape sequences are removed whole, other unsafe characters
/// become `�`; newlines are kept (the caller lays out lines).
pub(crate) fn clean_for_screen(text: &str) -> String {
    if !text.chars().any(|c| is_unsafe(c) && c != '\n') {
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
            c if is_unsafe(c) => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// One line of hostile output for a terminal: escape sequences dropped
/// whole, other unsafe characters as spaces, and at most `max_chars`
/// characters (then `…`).
pub(crate) fn clean_line(line: &str, max_chars: usize) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            skip_escape(&mut chars);
            continue;
        }
        out.push(if is_unsafe(c) { ' ' } else { c });
        count += 1;
        if count >= max_chars {
            out.push('…');
            break;
        }
    }
    out
}

/// At most `max_chars` characters of `text`, the last one `…` when cut.
pub(crate) fn cut_to(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some(_) => {
            let mut kept: String = text.chars().take(max_chars.saturating_sub(1)).collect();
            kept.push('…');
            kept
        }
    }
}

/// Skips the rest of an escape sequence: CSI (`ESC [ … final`), OSC
/// (`ESC ] … BEL/ST`), or a single character after ESC.
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

/// Writes `line` escaped, then a newline. Errors (a closed pipe) are
/// ignored: output is never worth dying for mid-run.
pub(crate) fn write_line(out: &mut impl Write, line: &str) {
    let _ = writeln!(out, "{}", escape_line(line));
}

/// A question on stderr, escaped, the cursor left after it for the answer.
pub(crate) fn prompt(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{}", escape_line(text));
    let _ = err.flush();
}

/// Ends the line of a [`prompt`] whose answer was not echoed.
pub(crate) fn end_prompt() {
    write_line(&mut std::io::stderr().lock(), "");
}

/// Redraws a block of lines on stdout in place: the `previous` lines drawn
/// last time are cleared, then `lines` are written, each escaped.
pub(crate) fn redraw(previous: usize, lines: &[String]) {
    let mut out = std::io::stdout().lock();
    if previous > 0 {
        let _ = write!(out, "\x1b[{previous}F\x1b[J");
    }
    for line in lines {
        let _ = writeln!(out, "{}", escape_line(line));
    }
    let _ = out.flush();
}

/// [`escape_line`] with tabs kept: for patches, where tabs indent Makefiles
/// and Go code and only move the cursor.
pub(crate) fn escape_keeping_tabs(text: &str) -> String {
    text.split('\t')
        .map(escape_line)
        .collect::<Vec<_>>()
        .join("\t")
}

/// A writer that escapes what passes through it line by line, keeping the
/// newlines that end lines: for loggers, which format a whole record and
/// write it at once.
pub(crate) struct EscapingWriter<W: Write>(pub W);

impl<W: Write> Write for EscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let (body, newline) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (text.as_ref(), ""),
        };
        self.0.write_all(escape_line(body).as_bytes())?;
        self.0.write_all(newline.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OSC_52: &str = "\u{1b}]52;c;aGVsbG8=\u{7}";
    const CSI_2J: &str = "\u{1b}[2J";
    const RLO: &str = "\u{202e}";

    fn no_raw_unsafe(s: &str) -> bool {
        !s.chars().any(is_unsafe)
    }

    #[test]
    fn osc_52_csi_2j_and_rlo_are_shown_not_obeyed() {
        let hostile = format!("a{OSC_52}b{CSI_2J}c{RLO}d\u{9b}1m\u{7f}\r\nnext");
        let line = escape_line(&hostile);
        assert!(no_raw_unsafe(&line), "{line:?}");
        assert_eq!(
            line,
            "a\\x1b]52;c;aGVsbG8=\\x07b\\x1b[2Jc\\u{202e}d\\u{9b}1m\\x7f\\r\\nnext"
        );
        assert!(!line.contains('\n'), "one printed line stays one line");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for text in [
            "plain",
            "path/with spaces/é.py",
            "✓ edit_file: +1 -1",
            "a\\nb",
            "",
        ] {
            assert!(matches!(escape_line(text), Cow::Borrowed(t) if t == text));
            assert!(matches!(escape_json(text), Cow::Borrowed(t) if t == text));
        }
    }

    #[test]
    fn every_bidi_control_is_unsafe() {
        for c in [
            '\u{61c}', '\u{200e}', '\u{200f}', '\u{202a}', '\u{202b}', '\u{202c}', '\u{202d}',
            '\u{202e}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{2028}', '\u{2029}',
        ] {
            assert!(is_unsafe(c), "{:x}", c as u32);
        }
        for c in ['a', ' ', 'é', '→', '\u{a0}', '\u{200b}', '\u{fffd}'] {
            assert!(!is_unsafe(c), "{:x}", c as u32);
        }
    }

    #[test]
    fn json_keeps_its_value_and_loses_its_raw_controls() {
        let value = serde_json::json!({"reason": format!("x{OSC_52}{CSI_2J}{RLO}\u{85}\u{7f}y")});
        let json = serde_json::to_string(&value).expect("json");
        assert!(
            !no_raw_unsafe(&json),
            "serde_json leaves some raw: {json:?}"
        );
        let safe = escape_json(&json);
        assert!(no_raw_unsafe(&safe), "{safe:?}");
        let back: serde_json::Value = serde_json::from_str(&safe).expect("still JSON");
        assert_eq!(back, value);
    }

    #[test]
    fn the_screen_rendering_drops_sequences_and_bidi() {
        let shown = clean_for_screen(&format!("a{OSC_52}b{CSI_2J}c{RLO}d\u{9b}\n"));
        assert_eq!(shown, "abc\u{fffd}d\u{fffd}\n");
    }

    #[test]
    fn the_writer_escapes_inside_a_record_and_keeps_its_end() {
        let mut w = EscapingWriter(Vec::new());
        w.write_all(format!("WARN path `a{CSI_2J}\nb`\n").as_bytes())
            .expect("write");
        let text = String::from_utf8(w.0).expect("utf8");
        assert_eq!(text, "WARN path `a\\x1b[2J\\nb`\n");
    }

    #[test]
    fn patches_keep_their_tabs_and_lose_their_escapes() {
        assert_eq!(
            super::escape_keeping_tabs("+\tx = 1\u{1b}[2J\t# \u{202e}"),
            "+\tx = 1\\x1b[2J\t# \\u{202e}"
        );
    }
}
