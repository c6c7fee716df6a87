//! Reading project instruction files from the private workspace: for each
//! lookup the first candidate that is a regular file, at most
//! [`MAX_FILE_BYTES`] of it, through the confined [`WorkspaceRoot`] (never
//! a symlink that leads outside; the source repository only for the root's,
//! read before the copy for the run's early first request, and only where
//! the copy takes them as they are).

use std::io::ErrorKind;
use std::path::Path;

use crate::agent::instructions::{InstructionDoc, InstructionLookup, MAX_FILE_BYTES};
use crate::workspace::{WorkspaceError, WorkspaceRoot};

/// The instruction files the lookups find, in their order.
pub(crate) fn read(root: &WorkspaceRoot, lookups: &[InstructionLookup]) -> Vec<InstructionDoc> {
    lookups
        .iter()
        .filter_map(|lookup| {
            lookup
                .candidates
                .iter()
                .find_map(|path| read_one(root, path))
        })
        .collect()
}

/// The root's instruction files as [`read`] will find them in the run's
/// copy, read before the copy from the source repository at `repo` (through
/// the same confinement); `None` where one of the candidates is a file the
/// copy leaves out or does not take as it is (ignored, a credential path).
pub(crate) fn read_root_from_source(
    repo: &Path,
    secrets: &crate::workspace::SecretPaths,
) -> Option<Vec<InstructionDoc>> {
    let root = crate::agent::instructions::lookup("");
    if !crate::workspace::copied_as_they_are(repo, &root.candidates, secrets) {
        return None;
    }
    let source = WorkspaceRoot::open(repo).ok()?;
    Some(read(&source, &[root]))
}

fn read_one(root: &WorkspaceRoot, path: &str) -> Option<InstructionDoc> {
    match root.read_prefix(Path::new(path), MAX_FILE_BYTES) {
        Ok((bytes, size)) => Some(doc(path, &bytes, size)),
        Err(WorkspaceError::Io { source, .. })
            if matches!(
                source.kind(),
                ErrorKind::NotFound | ErrorKind::NotADirectory
            ) =>
        {
            None
        }
        Err(e) => {
            tracing::warn!("project instructions {path} are not read: {e}");
            None
        }
    }
}

/// The text of a file cut at `MAX_FILE_BYTES`: a character split by the
/// cut is dropped, other invalid bytes are replaced.
pub(crate) fn doc(path: &str, bytes: &[u8], size: u64) -> InstructionDoc {
    let truncated = size > bytes.len() as u64;
    let bytes = if truncated {
        // Up to three bytes of a character the cut split.
        match std::str::from_utf8(bytes) {
            Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
            _ => bytes,
        }
    } else {
        bytes
    };
    InstructionDoc {
        path: path.to_string(),
        text: String::from_utf8_lossy(bytes).into_owned(),
        bytes: size,
        truncated,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::instructions::lookup;

    #[test]
    fn the_first_candidate_that_exists_is_read_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(dir.path().join("sub/deeper")).expect("mkdir");
        std::fs::create_dir_all(dir.path().join(".github")).expect("mkdir");
        std::fs::write(dir.path().join("CLAUDE.md"), "root claude").expect("write");
        std::fs::write(
            dir.path().join(".github/copilot-instructions.md"),
            "copilot",
        )
        .expect("write");
        std::fs::write(dir.path().join("sub/AGENTS.md"), "sub agents").expect("write");
        std::fs::write(dir.path().join("sub/CLAUDE.md"), "sub claude").expect("write");
        let mut big = "é".repeat(MAX_FILE_BYTES);
        big.push_str("tail");
        std::fs::write(dir.path().join("sub/deeper/AGENTS.md"), &big).expect("write");
        let root = WorkspaceRoot::open(dir.path()).expect("root");
        let docs = read(
            &root,
            &[
                lookup(""),
                lookup("sub"),
                lookup("sub/deeper"),
                lookup("missing"),
                lookup("sub/AGENTS.md"),
            ],
        );
        let found: Vec<(&str, &str)> = docs
            .iter()
            .map(|d| (d.path.as_str(), &d.text[..d.text.len().min(10)]))
            .collect();
        assert_eq!(
            found[..2],
            [("CLAUDE.md", "root claud"), ("sub/AGENTS.md", "sub agents")]
        );
        assert_eq!(docs.len(), 3, "missing directories and files find nothing");
        let deep = &docs[2];
        assert_eq!(deep.path, "sub/deeper/AGENTS.md");
        assert!(deep.truncated);
        assert_eq!(deep.bytes, big.len() as u64);
        assert_eq!(
            deep.text.len(),
            MAX_FILE_BYTES,
            "cut at a character boundary"
        );
        assert!(!deep.text.contains('\u{fffd}'));
    }

    #[test]
    fn a_cut_that_splits_a_character_drops_it() {
        let d = doc("A.md", "aé".as_bytes().get(..2).unwrap_or_default(), 3);
        assert_eq!((d.text.as_str(), d.truncated), ("a", true));
        let d = doc("A.md", b"a\xffb", 3);
        assert_eq!(d.text, "a\u{fffd}b", "a whole file keeps what it has");
    }
}
