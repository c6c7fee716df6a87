//! Capture of a command's output streams. Each stream keeps at most
//! [`STREAM_CAP`] bytes in memory: its first half-budget (the head) and, in a
//! ring buffer, its last half-budget (the tail), with the count of bytes
//! between them. Everything that arrives is also spooled to a file (when one
//! is given), so the full output is never lost to the cap.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

use super::SandboxError;

/// In-memory budget of each stream (1 MB), head and tail together.
pub(crate) const STREAM_CAP: usize = 1 << 20;

/// One stream of a finished command.
///
/// Stream offsets: the head is bytes `0..head.len()`; the tail ends where the
/// bytes that arrived end (`received`) and starts `omitted` bytes after the
/// head. When nothing was omitted the whole stream is in `head` and `tail`
/// is empty.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapturedStream {
    /// The first bytes of the stream, at most half the budget when bytes
    /// were omitted, else the whole stream.
    pub head: Vec<u8>,
    /// The last bytes that arrived, when bytes were omitted.
    pub tail: Vec<u8>,
    /// Bytes that arrived between the head and the tail and were not kept.
    pub omitted: u64,
    /// Every byte the command wrote, including those the sandbox stopped
    /// forwarding (which are neither kept nor spooled).
    pub total_bytes: u64,
    /// The file holding the full output, if it was spooled and was not empty.
    pub spool: Option<PathBuf>,
}

/// A bounded view of a stream: its first and last bytes, cut so that no
/// well-formed UTF-8 character is split, and the range between them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamView<'a> {
    pub front: &'a [u8],
    /// Stream offset of the first byte left out (the end of `front`).
    pub gap_start: u64,
    /// Bytes left out between `front` and `back`.
    pub gap_len: u64,
    pub back: &'a [u8],
    /// Bytes past the end of what arrived (never forwarded by the sandbox).
    pub unforwarded: u64,
}

impl CapturedStream {
    /// Bytes that arrived (and were spooled).
    pub fn received(&self) -> u64 {
        self.head.len() as u64 + self.omitted + self.tail.len() as u64
    }

    /// Whether bytes of the stream are not in memory.
    pub fn truncated(&self) -> bool {
        self.total_bytes > self.head.len() as u64 + self.tail.len() as u64
    }

    /// Whether the stream had no bytes at all.
    pub fn is_empty(&self) -> bool {
        self.total_bytes == 0 && self.head.is_empty()
    }

    /// The spool file's name: the id `read_output` knows the stream by.
    pub(crate) fn spool_name(&self) -> Option<String> {
        self.spool
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|n| n.to_string_lossy().into_owned())
    }

    /// The kept bytes as text, with a plain `[… N bytes omitted …]` line where
    /// bytes were left out.
    pub fn text(&self) -> String {
        let view = self.view(usize::MAX);
        let mut text = String::from_utf8_lossy(view.front).into_owned();
        if view.gap_len > 0 {
            text.push_str(&format!("\n[… {} bytes omitted …]\n", view.gap_len));
        }
        text.push_str(&String::from_utf8_lossy(view.back));
        if view.unforwarded > 0 {
            text.push_str(&format!(
                "\n[… {} further bytes were not kept …]\n",
                view.unforwarded
            ));
        }
        text
    }

    /// At most `budget` bytes of the stream: half from its beginning, half
    /// from its end (the whole stream when it fits).
    pub fn view(&self, budget: usize) -> StreamView<'_> {
        let unforwarded = self.total_bytes.saturating_sub(self.received());
        if self.tail.is_empty() && self.omitted == 0 && self.head.len() <= budget {
            return StreamView {
                front: &self.head,
                gap_start: self.head.len() as u64,
                gap_len: 0,
                back: &[],
                unforwarded,
            };
        }
        let half = budget / 2;
        let cut = char_floor(&self.head, half.min(self.head.len()));
        // A gap follows the front: a character the cut split is left out.
        let front = &self.head[..complete_end(&self.head[..cut])];
        let source: &[u8] = if self.tail.is_empty() {
            &self.head[front.len()..]
        } else {
            &self.tail
        };
        let want = half.min(source.len());
        let back = &source[char_ceil(source, source.len() - want)..];
        let gap_len = self.received() - front.len() as u64 - back.len() as u64;
        StreamView {
            front,
            gap_start: front.len() as u64,
            gap_len,
            back,
            unforwarded,
        }
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// `at`, moved back (at most three bytes) so that it does not fall inside a
/// UTF-8 character.
fn char_floor(bytes: &[u8], at: usize) -> usize {
    let mut at = at;
    for _ in 0..3 {
        if at == 0 || at >= bytes.len() || !is_continuation(bytes[at]) {
            break;
        }
        at -= 1;
    }
    at
}

/// The length of `bytes` without a UTF-8 character that starts in its last
/// three bytes and is not complete.
fn complete_end(bytes: &[u8]) -> usize {
    let len = bytes.len();
    for back in 1..=3.min(len) {
        let byte = bytes[len - back];
        if is_continuation(byte) {
            continue;
        }
        let width = match byte {
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            0xf0..=0xf7 => 4,
            _ => 1,
        };
        return if width > back { len - back } else { len };
    }
    len
}

/// `at`, moved forward (at most three bytes) past the continuation bytes of
/// a character that began before it.
fn char_ceil(bytes: &[u8], at: usize) -> usize {
    let mut at = at;
    for _ in 0..3 {
        if at >= bytes.len() || !is_continuation(bytes[at]) {
            break;
        }
        at += 1;
    }
    at
}

/// Accumulates one stream while the command runs; never holds more than
/// its budget, however much arrives.
#[derive(Debug)]
pub struct StreamCapture {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    received: u64,
    spool_path: Option<PathBuf>,
    spool: Option<BufWriter<File>>,
}

impl StreamCapture {
    /// `cap` bytes in memory in all: the first half (rounded up) for the
    /// head, the rest for the tail.
    pub fn new(cap: usize, spool_path: Option<PathBuf>) -> Self {
        let head_cap = cap.div_ceil(2);
        Self {
            head_cap,
            tail_cap: cap - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            received: 0,
            spool_path,
            spool: None,
        }
    }

    /// Bytes held in memory now (at most the budget).
    pub fn held(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), SandboxError> {
        self.received += chunk.len() as u64;
        let room = self.head_cap.saturating_sub(self.head.len());
        let (to_head, rest) = chunk.split_at(room.min(chunk.len()));
        self.head.extend_from_slice(to_head);
        self.keep_tail(rest);
        if let Some(path) = &self.spool_path {
            let spool_err = |source| SandboxError::Spool {
                path: path.clone(),
                source,
            };
            if self.spool.is_none() {
                if let Some(dir) = path.parent() {
                    crate::state::private_dir(dir).map_err(spool_err)?;
                }
                use std::os::unix::fs::OpenOptionsExt;
                let file = std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(path)
                    .map_err(spool_err)?;
                self.spool = Some(BufWriter::new(file));
            }
            if let Some(file) = self.spool.as_mut() {
                file.write_all(chunk).map_err(spool_err)?;
            }
        }
        Ok(())
    }

    /// Appends to the tail ring, dropping its oldest bytes past the cap.
    fn keep_tail(&mut self, bytes: &[u8]) {
        if bytes.is_empty() || self.tail_cap == 0 {
            return;
        }
        let bytes = &bytes[bytes.len().saturating_sub(self.tail_cap)..];
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
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
        let mut head = self.head;
        let mut tail = Vec::from(self.tail);
        let omitted = self.received - head.len() as u64 - tail.len() as u64;
        if omitted == 0 {
            head.append(&mut tail);
        }
        Ok(CapturedStream {
            head,
            tail,
            omitted,
            total_bytes: self.received.max(reported_total),
            spool,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(cap: usize, chunks: &[&[u8]]) -> CapturedStream {
        let mut c = StreamCapture::new(cap, None);
        for chunk in chunks {
            c.push(chunk).expect("push");
        }
        c.finish(0).expect("finish")
    }

    #[test]
    fn keeps_head_and_tail_and_spools_everything() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out/1.stdout");
        let mut c = StreamCapture::new(10, Some(path.clone()));
        c.push(b"0123456").expect("push");
        c.push(b"789abcdef").expect("push");
        let s = c.finish(0).expect("finish");
        assert_eq!(s.head, b"01234");
        assert_eq!(s.tail, b"bcdef");
        assert_eq!(s.omitted, 6);
        assert_eq!(s.total_bytes, 16);
        assert!(s.truncated());
        assert_eq!(s.text(), "01234\n[… 6 bytes omitted …]\nbcdef");
        assert_eq!(std::fs::read(&path).expect("spool"), b"0123456789abcdef");
        assert_eq!(s.spool, Some(path));
        assert_eq!(s.spool_name().as_deref(), Some("1.stdout"));
    }

    #[test]
    fn exactly_the_budget_is_kept_whole_and_one_more_byte_is_omitted() {
        let s = capture(10, &[b"0123456789"]);
        assert_eq!(
            (s.head.as_slice(), s.tail.len(), s.omitted),
            (&b"0123456789"[..], 0, 0)
        );
        assert!(!s.truncated());
        assert_eq!(s.text(), "0123456789");
        let s = capture(10, &[b"01234567", b"89X"]);
        assert_eq!(s.head, b"01234");
        assert_eq!(s.tail, b"6789X");
        assert_eq!(s.omitted, 1);
        assert!(s.truncated());
        let view = s.view(usize::MAX);
        assert_eq!((view.gap_start, view.gap_len), (5, 1));
    }

    #[test]
    fn the_tail_ring_keeps_the_last_bytes_across_chunks_of_any_size() {
        // Budget 8: head 4, tail 4.
        let s = capture(8, &[b"abcd", b"e", b"fghijklmnopqrstuvwxyz", b"1", b"23"]);
        assert_eq!(s.head, b"abcd");
        assert_eq!(s.tail, b"z123");
        assert_eq!(s.omitted, 29 - 8);
        let s = capture(8, &[b"abcd", b"efghijklmnopqrstuvwxyz", b"123"]);
        assert_eq!(s.tail, b"z123");
        assert_eq!(s.omitted, 29 - 8);
        assert_eq!(s.received(), 29);
    }

    #[test]
    fn memory_stays_within_the_budget_for_50_mb() {
        let mut c = StreamCapture::new(STREAM_CAP, None);
        let chunk = vec![b'x'; 65_536];
        let mut most = 0;
        for i in 0..800u32 {
            let mut chunk = chunk.clone();
            chunk[..4].copy_from_slice(&i.to_be_bytes());
            c.push(&chunk).expect("push");
            most = most.max(c.held());
            assert!(c.head.capacity() + c.tail.capacity() <= 2 * STREAM_CAP);
        }
        assert_eq!(most, STREAM_CAP);
        let s = c.finish(0).expect("finish");
        assert_eq!(s.total_bytes, 800 * 65_536);
        assert_eq!(s.head.len() + s.tail.len(), STREAM_CAP);
        assert_eq!(s.omitted, 800 * 65_536 - STREAM_CAP as u64);
        // The tail holds the last eight chunks, the last one's marker among them.
        let last = s.tail.len() - 65_536;
        assert_eq!(&s.tail[last..last + 4], &799u32.to_be_bytes());
    }

    #[test]
    fn a_character_split_at_a_cut_is_left_out_whole() {
        // "é" is two bytes; the head ends inside the second one.
        let text = "aaaé".as_bytes().to_vec(); // 5 bytes
        let mut all = text.clone();
        all.extend_from_slice(&[b'-'; 20]);
        all.extend_from_slice("ébbb".as_bytes()); // tail starts inside é
        let s = capture(10, &[&all]);
        assert_eq!(s.head, "aaaé".as_bytes());
        assert_eq!(s.tail, "ébbb".as_bytes());
        let s = capture(8, &[&all]);
        assert_eq!(s.head, b"aaa\xc3"); // cut inside é
        let view = s.view(usize::MAX);
        assert_eq!(view.front, b"aaa");
        assert_eq!(view.back, b"bbb"); // tail was "\xa9bbb"
        assert_eq!(view.gap_start, 3);
        assert_eq!(view.gap_len, all.len() as u64 - 6);
        assert!(!s.text().contains('\u{fffd}'), "{}", s.text());
        // Bytes that are not UTF-8 at all stay as they are (and show as U+FFFD).
        let s = capture(4, &[b"\xff\xfe", b"zzzzzz", b"\x80\x80"]);
        let view = s.view(usize::MAX);
        assert_eq!(view.front, b"\xff\xfe");
        assert_eq!(view.back, b"");
        assert_eq!(view.gap_len, 8);
    }

    #[test]
    fn a_view_takes_the_ends_of_a_whole_stream_too() {
        let s = capture(100, &[b"0123456789abcdefghij"]);
        let view = s.view(8);
        assert_eq!(view.front, b"0123");
        assert_eq!(view.back, b"ghij");
        assert_eq!((view.gap_start, view.gap_len), (4, 12));
        let view = s.view(20);
        assert_eq!(view.front, b"0123456789abcdefghij");
        assert_eq!(view.gap_len, 0);
    }

    #[test]
    fn empty_stream_creates_no_file_and_reported_total_wins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("e");
        let c = StreamCapture::new(10, Some(path.clone()));
        let s = c.finish(0).expect("finish");
        assert!(s.spool.is_none());
        assert!(s.is_empty());
        assert!(!path.exists());
        let mut c = StreamCapture::new(4, None);
        c.push(b"abcdef").expect("push");
        let s = c.finish(100).expect("finish");
        assert_eq!(s.total_bytes, 100);
        assert!(s.truncated());
        assert_eq!(s.view(usize::MAX).unforwarded, 94);
        assert!(s.text().ends_with("[… 94 further bytes were not kept …]\n"));
    }
}
