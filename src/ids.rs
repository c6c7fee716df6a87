//! Identifiers: short random suffixes, and names made safe for files and
//! containers from text that may hold any character.

use std::io::Read;

/// `n` random bytes as lowercase hex (from the kernel's CSPRNG).
pub(crate) fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    let filled = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !filled {
        // No /dev/urandom: fall back to time and pid, still unique per process.
        use sha2::{Digest, Sha256};
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let digest = Sha256::digest(format!("{nanos}:{}", std::process::id()));
        bytes.copy_from_slice(&digest[..n.min(32)]);
    }
    hex::encode(bytes)
}

/// `text` as a name for a file or a container: `[A-Za-z0-9._-]` kept, any
/// other character `_`, at most `max` characters, never empty and never
/// starting with `.`.
pub(crate) fn file_safe(text: &str, max: usize) -> String {
    let mut out: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(max.max(1))
        .collect();
    if out.is_empty() || out.starts_with('.') {
        out.insert(0, '_');
        out.truncate(max.max(1));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_safe_names_keep_safe_characters_only() {
        assert_eq!(super::file_safe("edit-src/a.py", 64), "edit-src_a.py");
        assert_eq!(super::file_safe("../../etc", 64), "_.._.._etc");
        assert_eq!(super::file_safe("", 8), "_");
        assert_eq!(super::file_safe("call\u{1b}[2J", 64), "call__2J");
        assert_eq!(super::file_safe("abcdef", 3), "abc");
    }

    #[test]
    fn random_hex_has_the_length_and_differs() {
        let a = super::random_hex(6);
        assert_eq!(a.len(), 12);
        assert_ne!(a, super::random_hex(6));
    }
}
