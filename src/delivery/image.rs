//! What a path of the source holds: nothing, a regular file (bytes and
//! permission bits) or a symbolic link (its target).

use git2::{ObjectType, Oid};
use sha2::{Digest, Sha256};

pub(crate) const GIT_MODE_FILE: u32 = 0o100644;
pub(crate) const GIT_MODE_EXEC: u32 = 0o100755;
pub(crate) const GIT_MODE_LINK: u32 = 0o120000;

/// One path apply writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Write {
    pub path: Vec<u8>,
    /// What the source holds now.
    pub pre: Image,
    /// What it will hold.
    pub post: Image,
    /// Whether `post` is a three-way merge with the user's edit.
    pub merged: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    Absent,
    /// `mode` holds the permission bits (`st_mode & 0o7777`).
    File {
        bytes: Vec<u8>,
        mode: u32,
    },
    Symlink {
        target: Vec<u8>,
    },
}

impl Image {
    /// The mode git records: 100644, 100755 (owner may execute) or 120000.
    pub(crate) fn git_mode(&self) -> Option<u32> {
        match self {
            Image::Absent => None,
            Image::File { mode, .. } if mode & 0o100 != 0 => Some(GIT_MODE_EXEC),
            Image::File { .. } => Some(GIT_MODE_FILE),
            Image::Symlink { .. } => Some(GIT_MODE_LINK),
        }
    }

    /// The bytes git stores: a file's content, a link's target.
    pub fn content(&self) -> Option<&[u8]> {
        match self {
            Image::Absent => None,
            Image::File { bytes, .. } => Some(bytes),
            Image::Symlink { target } => Some(target),
        }
    }

    /// The git blob id of the content.
    pub(crate) fn blob_id(&self) -> Option<Oid> {
        self.content()
            .and_then(|c| Oid::hash_object(ObjectType::Blob, c).ok())
    }

    /// SHA-256 of the content, lowercase hex.
    pub fn sha256(&self) -> Option<String> {
        self.content().map(|c| hex::encode(Sha256::digest(c)))
    }

    /// A short word for messages and the journal.
    pub fn kind(&self) -> &'static str {
        match self {
            Image::Absent => "absent",
            Image::File { .. } => "file",
            Image::Symlink { .. } => "symlink",
        }
    }

    /// The image git would check out for `content` with `git_mode`; an
    /// existing file's other permission bits are kept where the mode agrees.
    pub(crate) fn from_git(content: Vec<u8>, git_mode: u32, like: &Image) -> Image {
        if git_mode == GIT_MODE_LINK {
            return Image::Symlink { target: content };
        }
        let exec = git_mode == GIT_MODE_EXEC;
        let mode = match like {
            Image::File { mode, .. } if (mode & 0o100 != 0) == exec => *mode,
            _ if exec => 0o755,
            _ => 0o644,
        };
        Image::File {
            bytes: content,
            mode,
        }
    }
}
