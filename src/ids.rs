//! Identifiers: run ids that sort by time and short random suffixes.

use std::io::Read;

/// `n` random bytes as lowercase hex (from the kernel's CSPRNG).
pub fn random_hex(n: usize) -> String {
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

#[cfg(test)]
mod tests {
    #[test]
    fn random_hex_has_the_length_and_differs() {
        let a = super::random_hex(6);
        assert_eq!(a.len(), 12);
        assert_ne!(a, super::random_hex(6));
    }
}
