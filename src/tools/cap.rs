//! Bounding what the model sees of a tool result (SPEC §3: at most 16,000
//! characters, beginning and end kept, with an omission notice between).

/// The most characters of one tool result the model sees.
pub const MODEL_CHAR_LIMIT: usize = 16_000;

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
pub(crate) fn group_thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
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

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(group_thousands(12_345), "12,345");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(1_000_000), "1,000,000");
    }
}
