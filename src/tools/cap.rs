//! Bounding what the model sees of a tool result (at most 16,000
//! characters, beginning and end kept, with an omission notice between).

use crate::sandbox::CapturedStream;

/// The most characters of one tool result the model sees.
pub const MODEL_CHAR_LIMIT: usize = 16_000;

/// At most `budget` bytes of a captured stream, as text: its beginning and
/// its end, with a line between them saying how many bytes were left out and,
/// when the stream was spooled, the `read_output` call that reads them.
/// Output that was never forwarded past the sandbox's limit is noted after.
pub(crate) fn stream_for_model(stream: &CapturedStream, budget: usize) -> String {
    let view = stream.view(budget);
    let mut text = String::from_utf8_lossy(view.front).into_owned();
    if view.gap_len > 0 {
        text.push_str(&omission_marker(
            view.gap_start,
            view.gap_len,
            stream.spool_name().as_deref(),
        ));
    }
    text.push_str(&String::from_utf8_lossy(view.back));
    if view.unforwarded > 0 {
        text.push_str(&format!(
            "\n[… and {} bytes past the sandbox's forwarding limit, which were not kept …]\n",
            group_thousands(view.unforwarded as usize)
        ));
    }
    text
}

/// `[… N bytes omitted; read them with read_output id=… offset=… …]` on a
/// line of its own (without the `read_output` part when there is no id).
pub(crate) fn omission_marker(offset: u64, omitted: u64, id: Option<&str>) -> String {
    let omitted_text = group_thousands(usize::try_from(omitted).unwrap_or(usize::MAX));
    match id {
        Some(id) => format!(
            "\n[… {omitted_text} bytes omitted; read them with read_output id={id} offset={offset} …]\n"
        ),
        None => format!("\n[… {omitted_text} bytes omitted …]\n"),
    }
}

/// Returns `text` unchanged when it has at most `limit` characters; otherwise
/// its beginning and its end with `[… N characters omitted …]` between, the
/// whole at most `limit` characters (for any limit above the notice's length).
/// Cuts only at character boundaries.
pub fn cap_for_model(text: &str, limit: usize) -> String {
    let total = text.chars().count();
    if total <= limit {
        return text.to_string();
    }
    // The notice's length depends on the omitted count; size it for the
    // largest possible count, which is never shorter than the real one.
    let notice_len = notice(total).chars().count();
    let keep = limit.saturating_sub(notice_len);
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let omitted = total - head - tail;
    let head_end = byte_offset(text, head);
    let tail_start = byte_offset(text, total - tail);
    format!(
        "{}{}{}",
        &text[..head_end],
        notice(omitted),
        &text[tail_start..]
    )
}

fn notice(omitted: usize) -> String {
    format!("\n[… {} characters omitted …]\n", group_thousands(omitted))
}

/// The byte offset of the `chars`-th character of `text`.
fn byte_offset(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(offset, _)| offset)
}

/// `12345` → `12,345`.
pub fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(cap_for_model("hello", 16_000), "hello");
    }

    #[test]
    fn long_text_keeps_head_and_tail_with_a_notice() {
        let text = format!("HEAD{}TAIL", "x".repeat(40_000));
        let capped = cap_for_model(&text, 16_000);
        assert!(capped.starts_with("HEADxx"));
        assert!(capped.ends_with("xxTAIL"));
        assert!(capped.contains("characters omitted"));
        assert!(
            capped.chars().count() <= 16_000,
            "{}",
            capped.chars().count()
        );
    }

    #[test]
    fn notice_states_the_omitted_count_exactly() {
        let text = "a".repeat(1000);
        let capped = cap_for_model(&text, 100);
        // "characters" in the notice holds two more.
        let kept = capped.chars().filter(|c| *c == 'a').count() - 2;
        assert!(capped.contains(&format!("[… {} characters omitted …]", 1000 - kept)));
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let text = "é🙂".repeat(20_000);
        let capped = cap_for_model(&text, 1_000);
        assert!(capped.chars().count() <= 1_000);
        assert!(capped.starts_with("é🙂"));
    }

    fn stream(cap: usize, bytes: &[u8], spool: Option<&str>) -> CapturedStream {
        let mut c = crate::sandbox::StreamCapture::new(cap, None);
        c.push(bytes).unwrap();
        let mut s = c.finish(0).unwrap();
        s.spool = spool.map(std::path::PathBuf::from);
        s
    }

    #[test]
    fn a_stream_shows_its_ends_and_how_to_read_the_middle() {
        let mut bytes = b"FIRST\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'.', 100_000));
        bytes.extend_from_slice(b"\nLAST\n");
        let s = stream(1 << 20, &bytes, Some("/state/run/outputs/0002-c1.stdout"));
        let text = stream_for_model(&s, 1000);
        assert!(text.starts_with("FIRST\n"), "{text}");
        assert!(text.ends_with("\nLAST\n"), "{text}");
        let omitted = bytes.len() - 1000;
        assert!(
            text.contains(&format!(
                "[… {} bytes omitted; read them with read_output id=0002-c1.stdout offset=500 …]",
                group_thousands(omitted)
            )),
            "{text}"
        );
        assert!(!text.contains("/state"), "no host path: {text}");
        // The middle omitted from a truncated capture is counted from the
        // stream, not from what was kept.
        let s = stream(64, &bytes, None);
        let text = stream_for_model(&s, 16);
        assert!(text.starts_with("FIRST\n.."), "{text}");
        assert!(
            text.contains(&format!(
                "[… {} bytes omitted …]",
                group_thousands(bytes.len() - 16)
            )),
            "{text}"
        );
        let short = stream(64, b"ok\n", Some("x.stdout"));
        assert_eq!(stream_for_model(&short, 16), "ok\n");
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(12_345), "12,345");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1_000_000), "1,000,000");
    }
}
