//! Capture of a command's output streams: the first [`STREAM_CAP`] bytes of
//! each stream are kept in memory; everything that arrives is also spooled to a
//! file (when one is given), so the full output is never lost to the cap.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::SandboxError;

/// In-memory cap of each stream (SPEC §3: 1 MB).
pub(crate) const STREAM_CAP: usize = 1 << 20;

/// One stream of a finished command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedStream {
    /// The first bytes of the stream, at most the cap.
    pub bytes: Vec<u8>,
    /// Every byte the command wrote, including those past the cap.
    pub total_bytes: u64,
    /// The file holding the full output, if it was spooled and was not empty.
    pub spool: Option<PathBuf>,
}

impl CapturedStream {
    /// Whether bytes were left out of [`Self::bytes`].
    pub fn truncated(&self) -> bool {
        self.total_bytes > self.bytes.len() as u64
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Accumulates one stream while the command runs.
#[derive(Debug)]
pub(crate) struct StreamCapture {
    cap: usize,
    bytes: Vec<u8>,
    received: u64,
    spool_path: Option<PathBuf>,
    spool: Option<BufWriter<File>>,
}

impl StreamCapture {
    pub fn new(cap: usize, spool_path: Option<PathBuf>) -> Self {
        Self {
            cap,
            bytes: Vec::new(),
            received: 0,
            spool_path,
            spool: None,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), SandboxError> {
        self.received += chunk.len() as u64;
        let room = self.cap.saturating_sub(self.bytes.len());
        self.bytes
            .extend_from_slice(&chunk[..room.min(chunk.len())]);
        if let Some(path) = &self.spool_path {
            let spool_err = |source| SandboxError::Spool {
                path: path.clone(),
                source,
            };
            if self.spool.is_none() {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(spool_err)?;
                }
                self.spool = Some(BufWriter::new(File::create(path).map_err(spool_err)?));
            }
            if let Some(file) = self.spool.as_mut() {
                file.write_all(chunk).map_err(spool_err)?;
            }
        }
        Ok(())
    }

    /// Ends the stream; `reported_total` is the count the supervisor saw,
    /// which exceeds what arrived when its forwarding limit was reached.
    pub fn finish(mut self, reported_total: u64) -> Result<CapturedStream, SandboxError> {
        let spool = match (self.spool.take(), self.spool_path) {
            (Some(mut file), Some(path)) => {
                file.flush().map_err(|source| SandboxError::Spool {
                    path: path.clone(),
                    source,
                })?;
                Some(path)
            }
            _ => None,
        };
        Ok(CapturedStream {
            bytes: self.bytes,
            total_bytes: self.received.max(reported_total),
            spool,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_in_memory_and_spools_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out/1.stdout");
        let mut c = StreamCapture::new(10, Some(path.clone()));
        c.push(b"0123456").expect("push");
        c.push(b"789abcdef").expect("push");
        let s = c.finish(0).expect("finish");
        assert_eq!(s.bytes, b"0123456789");
        assert_eq!(s.total_bytes, 16);
        assert!(s.truncated());
        assert_eq!(std::fs::read(&path).expect("spool"), b"0123456789abcdef");
        assert_eq!(s.spool, Some(path));
    }

    #[test]
    fn empty_stream_creates_no_file_and_reported_total_wins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("e");
        let c = StreamCapture::new(10, Some(path.clone()));
        let s = c.finish(0).expect("finish");
        assert!(s.spool.is_none());
        assert!(!path.exists());
        let mut c = StreamCapture::new(4, None);
        c.push(b"abcdef").expect("push");
        let s = c.finish(100).expect("finish");
        assert_eq!(s.total_bytes, 100);
        assert!(s.truncated());
    }
}
