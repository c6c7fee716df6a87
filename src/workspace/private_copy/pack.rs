//! Git packs of many objects written in one pass, stored (not compressed).
//!
//! A baseline puts every file of the workspace into an object database, and
//! into two of them (the workspace's own `.git` and the checkpoint store).
//! As loose objects that is one compressed file per object per database; as
//! packs it is a few sequential files, written once and copied whole. The
//! objects' data is kept in zlib's *stored* blocks: compressing costs far
//! more time than the disk it saves while a run lasts. A large baseline is
//! split into parts (packs of a size that grows with it, the trees in one of
//! their own), so that a copy refreshed later rewrites only the parts that
//! hold something stale ([`reuse_packs`]).
//!
//! Format (version 2, as Git reads it): the pack is `PACK`, version, object
//! count, then each object as its type-and-size header and a zlib stream,
//! then the SHA-1 of all that; the index (`.idx`, version 2) holds the
//! fan-out table, the sorted object ids, each object's CRC-32 and offset,
//! the pack's checksum and its own.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid};
use rustix::fs::{Mode, OFlags};
use sha1::{Digest, Sha1};

use crate::workspace::WorkspaceError;

/// The largest stored deflate block.
const BLOCK: usize = 65_535;
const PACK_HEADER: u64 = 12;
/// Bytes gathered in memory before they are written out: one write per
/// many small objects instead of four per object.
const OUT_BUFFER: usize = 1 << 20;

/// Parts smaller than this are not closed: a small baseline is one pack.
const MIN_PART: u64 = 4 << 20;
/// A part is closed once it holds this fraction of all bytes written so
/// far (and at least [`MIN_PART`]): parts grow with the baseline, so a
/// large one is some twenty packs, well under Git's automatic repacking
/// limit of fifty.
const PART_FRACTION: u64 = 6;

/// The objects of a baseline written to `<objects>/pack` as one or more
/// packs ("parts"), each a size that is cheap to write again: a refreshed
/// copy reuses every part that holds nothing stale as it is, and rewrites
/// only the others (see [`reuse_packs`]).
pub(crate) struct PackWriter {
    dir: PathBuf,
    current: Part,
    closed: Vec<Part>,
    /// Every object in any part.
    known: HashSet<Oid>,
    /// Bytes in the closed parts.
    closed_bytes: u64,
    buf: Vec<u8>,
}

/// One pack being written.
struct Part {
    file: tempfile::NamedTempFile,
    /// Where the next object starts.
    offset: u64,
    /// Object id → (offset, CRC-32 of its bytes in the pack).
    objects: HashMap<Oid, (u64, u32)>,
    /// Bytes from `flushed` on, not written to the file yet.
    out: Vec<u8>,
    flushed: u64,
}

/// A finished pack: its two files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pack {
    pub pack: PathBuf,
    pub index: PathBuf,
}

impl Part {
    fn new(dir: &Path) -> Result<Self, WorkspaceError> {
        let file = tempfile::Builder::new()
            .prefix("tmp_pack_")
            .tempfile_in(dir)
            .map_err(|e| WorkspaceError::io(dir, e))?;
        // The header is written last, when the count is known.
        file.as_file()
            .write_all_at(&[0; PACK_HEADER as usize], 0)
            .map_err(|e| WorkspaceError::io(file.path(), e))?;
        Ok(Self {
            file,
            offset: PACK_HEADER,
            objects: HashMap::new(),
            out: Vec::with_capacity(OUT_BUFFER),
            flushed: PACK_HEADER,
        })
    }

    /// Adds bytes at the end of the pack.
    fn put(&mut self, bytes: &[u8]) -> Result<(), WorkspaceError> {
        self.out.extend_from_slice(bytes);
        self.offset += bytes.len() as u64;
        if self.out.len() >= OUT_BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes out what is gathered in memory.
    fn flush(&mut self) -> Result<(), WorkspaceError> {
        self.file
            .as_file()
            .write_all_at(&self.out, self.flushed)
            .map_err(|e| WorkspaceError::io(self.file.path(), e))?;
        self.flushed += self.out.len() as u64;
        self.out.clear();
        Ok(())
    }

    /// Forgets everything from `start` on (an object cut short).
    fn truncate(&mut self, start: u64) -> Result<(), WorkspaceError> {
        self.offset = start;
        if start >= self.flushed {
            self.out
                .truncate(usize::try_from(start - self.flushed).unwrap_or(usize::MAX));
        } else {
            self.out.clear();
            self.flushed = start;
            self.file
                .as_file()
                .set_len(start)
                .map_err(|e| WorkspaceError::io(self.file.path(), e))?;
        }
        Ok(())
    }

    /// Writes the header, the checksum and the index, and puts both files
    /// in place (`pack-<checksum>.pack` first, then its `.idx`).
    fn finish(mut self, dir: &Path) -> Result<Pack, WorkspaceError> {
        self.flush()?;
        let Self { file, objects, .. } = self;
        let path = file.path().to_path_buf();
        let io = |e: std::io::Error| WorkspaceError::io(&path, e);
        let count = u32::try_from(objects.len())
            .map_err(|_| io(std::io::Error::other("too many objects for one pack")))?;
        let mut header = Vec::with_capacity(PACK_HEADER as usize);
        header.extend_from_slice(b"PACK");
        header.extend_from_slice(&2u32.to_be_bytes());
        header.extend_from_slice(&count.to_be_bytes());
        file.as_file().write_all_at(&header, 0).map_err(io)?;
        // The checksum covers every byte before it.
        let mut sum = Sha1::new();
        let mut reader = std::io::BufReader::with_capacity(1 << 20, file.as_file());
        std::io::copy(&mut reader, &mut sum).map_err(io)?;
        drop(reader);
        let checksum: [u8; 20] = sum.finalize().into();
        let mut end = file.as_file();
        std::io::Seek::seek(&mut end, std::io::SeekFrom::End(0)).map_err(io)?;
        end.write_all(&checksum).map_err(io)?;

        let mut sorted: Vec<(Oid, u64, u32)> =
            objects.into_iter().map(|(id, (o, c))| (id, o, c)).collect();
        sorted.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let index = index_bytes(&sorted, &checksum);

        let name = format!("pack-{}", hex::encode(checksum));
        let pack = dir.join(format!("{name}.pack"));
        let idx = dir.join(format!("{name}.idx"));
        file.persist(&pack)
            .map_err(|e| WorkspaceError::io(&pack, e.error))?;
        set_read_only(&pack)?;
        let mut tmp = tempfile::Builder::new()
            .prefix("tmp_idx_")
            .tempfile_in(dir)
            .map_err(|e| WorkspaceError::io(dir, e))?;
        tmp.write_all(&index)
            .map_err(|e| WorkspaceError::io(&idx, e))?;
        tmp.persist(&idx)
            .map_err(|e| WorkspaceError::io(&idx, e.error))?;
        set_read_only(&idx)?;
        Ok(Pack { pack, index: idx })
    }
}

impl PackWriter {
    /// Starts writing packs in `objects_dir/pack` (created if missing).
    pub(crate) fn new(objects_dir: &Path) -> Result<Self, WorkspaceError> {
        let dir = objects_dir.join("pack");
        std::fs::create_dir_all(&dir).map_err(|e| WorkspaceError::io(&dir, e))?;
        let current = Part::new(&dir)?;
        Ok(Self {
            dir,
            current,
            closed: Vec::new(),
            known: HashSet::new(),
            closed_bytes: 0,
            buf: vec![0; BLOCK],
        })
    }

    /// How many distinct objects the packs hold so far.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.known.len()
    }

    /// Adds `size` bytes from `reader` as a blob and gives its id; fewer
    /// bytes than that is an error. An object already in the pack is not
    /// added twice.
    pub(crate) fn add_blob(
        &mut self,
        reader: &mut dyn Read,
        size: u64,
    ) -> Result<Oid, WorkspaceError> {
        self.add(ObjectType::Blob, reader, size)
    }

    /// Appends a blob framed by [`encode_blob`]; `false` when the pack
    /// holds it already (and nothing is written).
    pub(crate) fn append(&mut self, blob: &EncodedBlob) -> Result<bool, WorkspaceError> {
        self.append_raw(blob.id, &blob.bytes, blob.crc)
    }

    /// Appends the entry `bytes` (header and zlib stream, no delta) of the
    /// object `id`, whose CRC-32 is `crc`; `false` when it is in already.
    fn append_raw(&mut self, id: Oid, bytes: &[u8], crc: u32) -> Result<bool, WorkspaceError> {
        if self.known.contains(&id) {
            return Ok(false);
        }
        let start = self.current.offset;
        self.current.put(bytes)?;
        self.current.objects.insert(id, (start, crc));
        self.known.insert(id);
        self.roll()?;
        Ok(true)
    }

    /// Adds an object of `kind` (blob, tree or commit) from memory.
    pub(crate) fn add_bytes(
        &mut self,
        kind: ObjectType,
        data: &[u8],
    ) -> Result<Oid, WorkspaceError> {
        let mut reader = data;
        self.add(kind, &mut reader, data.len() as u64)
    }

    /// Closes the part being written, if it holds anything: what comes
    /// next goes into a pack of its own (the trees, after the files).
    pub(crate) fn start_part(&mut self) -> Result<(), WorkspaceError> {
        if self.current.objects.is_empty() {
            return Ok(());
        }
        let next = Part::new(&self.dir)?;
        let mut done = std::mem::replace(&mut self.current, next);
        done.flush()?;
        self.closed_bytes += done.offset;
        self.closed.push(done);
        Ok(())
    }

    /// Closes the current part once it is big enough.
    fn roll(&mut self) -> Result<(), WorkspaceError> {
        let limit = MIN_PART.max((self.closed_bytes + self.current.offset) / PART_FRACTION);
        if self.current.offset >= limit {
            self.start_part()?;
        }
        Ok(())
    }

    fn add(
        &mut self,
        kind: ObjectType,
        reader: &mut dyn Read,
        size: u64,
    ) -> Result<Oid, WorkspaceError> {
        let start = self.current.offset;
        let written = self.write_object(kind, reader, size);
        match written {
            Ok((oid, crc)) if !self.known.contains(&oid) => {
                self.current.objects.insert(oid, (start, crc));
                self.known.insert(oid);
                self.roll()?;
                Ok(oid)
            }
            // Already in, or cut short: what was just written goes.
            _ => {
                self.current.truncate(start)?;
                written.map(|(oid, _)| oid)
            }
        }
    }

    /// Writes one object at the end; its id and CRC-32.
    fn write_object(
        &mut self,
        kind: ObjectType,
        reader: &mut dyn Read,
        size: u64,
    ) -> Result<(Oid, u32), WorkspaceError> {
        let mut id = Sha1::new();
        id.update(format!("{} {size}\0", kind.str()).as_bytes());
        let mut crc = Crc32::default();
        let mut adler = Adler32::default();
        let mut out = Vec::with_capacity(32);
        push_object_header(&mut out, type_code(kind), size);
        out.extend_from_slice(&[0x78, 0x01]);
        self.emit(&mut crc, &out)?;
        let mut left = size;
        loop {
            let want = usize::try_from(left).unwrap_or(BLOCK).min(BLOCK);
            let mut got = 0;
            while got < want {
                let n = match reader.read(&mut self.buf[got..want]) {
                    Ok(0) => {
                        return Err(WorkspaceError::io(
                            Path::new("."),
                            std::io::Error::other("the file shrank while it was read"),
                        ));
                    }
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(WorkspaceError::io(Path::new("."), e)),
                };
                got += n;
            }
            left -= want as u64;
            let last = left == 0;
            let len = u16::try_from(want).unwrap_or(u16::MAX);
            let mut head = [0u8; 5];
            head[0] = u8::from(last);
            head[1..3].copy_from_slice(&len.to_le_bytes());
            head[3..5].copy_from_slice(&(!len).to_le_bytes());
            let block = std::mem::take(&mut self.buf);
            id.update(&block[..want]);
            adler.update(&block[..want]);
            let written = self
                .emit(&mut crc, &head)
                .and_then(|()| self.emit(&mut crc, &block[..want]));
            self.buf = block;
            written?;
            if last {
                break;
            }
        }
        self.emit(&mut crc, &adler.finish().to_be_bytes())?;
        let oid =
            Oid::from_bytes(&id.finalize()).map_err(WorkspaceError::git("hashing an object"))?;
        Ok((oid, crc.finish()))
    }

    fn emit(&mut self, crc: &mut Crc32, bytes: &[u8]) -> Result<(), WorkspaceError> {
        crc.update(bytes);
        self.current.put(bytes)
    }

    /// Finishes every part that holds anything (checksums on as many
    /// threads as the machine has, up to two) and gives their files.
    pub(crate) fn finish(mut self) -> Result<Vec<Pack>, WorkspaceError> {
        self.start_part()?;
        let Self { dir, closed, .. } = self;
        let parts = std::sync::Mutex::new(closed.into_iter().enumerate().collect::<Vec<_>>());
        let workers = std::thread::available_parallelism()
            .map_or(1, std::num::NonZero::get)
            .min(2);
        let done = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| {
                    loop {
                        let next = parts
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .pop();
                        let Some((n, part)) = next else { break };
                        let finished = part.finish(&dir);
                        done.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push((n, finished));
                    }
                });
            }
        });
        let mut done = done
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        done.sort_by_key(|(n, _)| *n);
        done.into_iter().map(|(_, p)| p).collect()
    }
}

/// A blob framed as a pack entry, ready to be appended by any writer: its
/// id, its bytes in the pack and their CRC-32.
pub(crate) struct EncodedBlob {
    pub(crate) id: Oid,
    bytes: Vec<u8>,
    crc: u32,
}

impl EncodedBlob {
    /// The framing buffer, to be used again.
    pub(crate) fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }
}

/// Frames `data` as a blob entry of a pack (as [`PackWriter::add_blob`]
/// writes it) in `buf`, away from any writer: the work of an entry is
/// done where the data is, and only the append is shared.
pub(crate) fn encode_blob(data: &[u8], mut buf: Vec<u8>) -> Result<EncodedBlob, WorkspaceError> {
    let mut id = Sha1::new();
    id.update(format!("blob {}\0", data.len()).as_bytes());
    id.update(data);
    let id = Oid::from_bytes(&id.finalize()).map_err(WorkspaceError::git("hashing an object"))?;
    buf.clear();
    buf.reserve(data.len() + data.len() / BLOCK * 5 + 32);
    push_object_header(&mut buf, type_code(ObjectType::Blob), data.len() as u64);
    buf.extend_from_slice(&[0x78, 0x01]);
    let mut blocks = data.chunks(BLOCK).peekable();
    if blocks.peek().is_none() {
        // An empty stream is one empty final block.
        buf.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let len = u16::try_from(block.len()).unwrap_or(u16::MAX);
        buf.push(u8::from(blocks.peek().is_none()));
        buf.extend_from_slice(&len.to_le_bytes());
        buf.extend_from_slice(&(!len).to_le_bytes());
        buf.extend_from_slice(block);
    }
    let mut adler = Adler32::default();
    adler.update(data);
    buf.extend_from_slice(&adler.finish().to_be_bytes());
    let mut crc = Crc32::default();
    crc.update(&buf);
    Ok(EncodedBlob {
        id,
        bytes: buf,
        crc: crc.finish(),
    })
}

/// The entries of a version-2 pack index: (id, offset, CRC-32), by id.
fn read_index(path: &Path) -> Result<Vec<(Oid, u64, u32)>, WorkspaceError> {
    let bad = || WorkspaceError::io(path, std::io::Error::other("not a pack index Git writes"));
    let data = std::fs::read(path).map_err(|e| WorkspaceError::io(path, e))?;
    if data.len() < 8 + 1024 + 40 || data[..8] != [0xff, b't', b'O', b'c', 0, 0, 0, 2] {
        return Err(bad());
    }
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(data.get(at..at + 4)?.try_into().ok()?))
    };
    let count = usize::try_from(word(8 + 255 * 4).ok_or_else(bad)?).map_err(|_| bad())?;
    let ids = 8 + 1024;
    let crcs = ids + count.checked_mul(20).ok_or_else(bad)?;
    let offsets = crcs + count * 4;
    let large = offsets + count * 4;
    if data.len() < large + 40 {
        return Err(bad());
    }
    let mut entries = Vec::with_capacity(count);
    for i in 0..count {
        let id = Oid::from_bytes(&data[ids + i * 20..ids + i * 20 + 20]).map_err(|_| bad())?;
        let crc = word(crcs + i * 4).ok_or_else(bad)?;
        let small = word(offsets + i * 4).ok_or_else(bad)?;
        let offset = if small & 0x8000_0000 == 0 {
            u64::from(small)
        } else {
            let at = large + usize::try_from(small & 0x7fff_ffff).map_err(|_| bad())? * 8;
            u64::from_be_bytes(
                data.get(at..at + 8)
                    .ok_or_else(bad)?
                    .try_into()
                    .map_err(|_| bad())?,
            )
        };
        entries.push((id, offset, crc));
    }
    Ok(entries)
}

/// Takes what a new baseline keeps of an earlier one's packs, in the pack
/// directory `from`, into `into`: a pack whose every object is `wanted`
/// moves over whole (nothing of it is read); of any other, only the
/// wanted objects are copied, entry by entry as they are (each checked
/// against its CRC-32 and refused if it is a delta). Whatever is not
/// wanted stays behind in `from`. Gives the packs that moved and the
/// wanted objects found.
pub(crate) fn reuse_packs(
    from: &Path,
    wanted: &HashSet<Oid>,
    into: &mut PackWriter,
) -> Result<(Vec<Pack>, HashSet<Oid>), WorkspaceError> {
    let mut moved = Vec::new();
    let mut found = HashSet::new();
    let mut indexes: Vec<PathBuf> = std::fs::read_dir(from)
        .map_err(|e| WorkspaceError::io(from, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "idx"))
        .collect();
    indexes.sort();
    let mut buf = Vec::new();
    for index in indexes {
        let pack = index.with_extension("pack");
        let mut entries = read_index(&index)?;
        if entries.iter().all(|(id, _, _)| wanted.contains(id)) {
            let to = Pack {
                pack: into.dir.join(pack.file_name().unwrap_or_default()),
                index: into.dir.join(index.file_name().unwrap_or_default()),
            };
            std::fs::rename(&pack, &to.pack).map_err(|e| WorkspaceError::io(&to.pack, e))?;
            std::fs::rename(&index, &to.index).map_err(|e| WorkspaceError::io(&to.index, e))?;
            for (id, _, _) in entries {
                into.known.insert(id);
                found.insert(id);
            }
            moved.push(to);
            continue;
        }
        if !entries.iter().any(|(id, _, _)| wanted.contains(id)) {
            continue;
        }
        let file = std::fs::File::open(&pack).map_err(|e| WorkspaceError::io(&pack, e))?;
        let len = file
            .metadata()
            .map_err(|e| WorkspaceError::io(&pack, e))?
            .len();
        let bad = |why: &str| WorkspaceError::io(&pack, std::io::Error::other(why.to_string()));
        entries.sort_unstable_by_key(|(_, offset, _)| *offset);
        let ends: Vec<u64> = entries
            .iter()
            .skip(1)
            .map(|(_, offset, _)| *offset)
            .chain([len.saturating_sub(20)])
            .collect();
        for ((id, start, crc), end) in entries.into_iter().zip(ends) {
            if !wanted.contains(&id) {
                continue;
            }
            if end <= start || start < PACK_HEADER {
                return Err(bad("an entry out of the pack's bounds"));
            }
            let size = usize::try_from(end - start).map_err(|_| bad("an entry too large"))?;
            buf.resize(size, 0);
            file.read_exact_at(&mut buf, start)
                .map_err(|e| WorkspaceError::io(&pack, e))?;
            if !(1..=4).contains(&((buf[0] >> 4) & 7)) {
                return Err(bad("a delta entry"));
            }
            let mut check = Crc32::default();
            check.update(&buf);
            if check.finish() != crc {
                return Err(bad("an entry that does not match its checksum"));
            }
            into.append_raw(id, &buf, crc)?;
            found.insert(id);
        }
    }
    Ok((moved, found))
}

impl Pack {
    /// Puts the pack into the object database at `objects_dir` (the index
    /// last, so no reader ever sees an index without its pack): a hard link
    /// where the sandbox user cannot change the files (they are ours,
    /// read-only, and we are not that user; a workspace's packs are never
    /// given away, see `chown_git_dir`), else, or where a link fails
    /// (another filesystem), a copy.
    pub(crate) fn share_into(&self, objects_dir: &Path) -> Result<Pack, WorkspaceError> {
        let dir = objects_dir.join("pack");
        std::fs::create_dir_all(&dir).map_err(|e| WorkspaceError::io(&dir, e))?;
        let checksum = pack_checksum_of_name(&self.pack)?;
        let mut put = Vec::with_capacity(2);
        for (from, is_index) in [(&self.pack, false), (&self.index, true)] {
            let name = from
                .file_name()
                .ok_or_else(|| WorkspaceError::io(from, std::io::Error::other("not a file")))?;
            let to = dir.join(name);
            let tmp = dir.join(format!(".tmp-{}", name.to_string_lossy()));
            // (Never written through: a leftover may be a link.)
            let _ = std::fs::remove_file(&tmp);
            // The file is opened once, never through a link, and what is
            // checked, linked or copied is that open file: a name swapped
            // meanwhile changes nothing.
            let file = rustix::fs::open(
                from,
                OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| WorkspaceError::io(from, e))?;
            let file = std::fs::File::from(file);
            let st = rustix::fs::fstat(&file).map_err(|e| WorkspaceError::io(from, e))?;
            if !names_its_pack(&file, st.st_size, is_index, &checksum)? {
                return Err(WorkspaceError::io(
                    from,
                    std::io::Error::other("the pack's file does not hold the pack its name says"),
                ));
            }
            let linked = cannot_be_changed_by_sandbox(&st)
                && rustix::fs::linkat(
                    rustix::fs::CWD,
                    format!("/proc/self/fd/{}", file.as_raw_fd()),
                    rustix::fs::CWD,
                    &tmp,
                    rustix::fs::AtFlags::SYMLINK_FOLLOW,
                )
                .is_ok();
            if !linked {
                let mut out = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&tmp)
                    .map_err(|e| WorkspaceError::io(&tmp, e))?;
                std::io::copy(&mut &file, &mut out).map_err(|e| WorkspaceError::io(&tmp, e))?;
                drop(out);
                set_read_only(&tmp)?;
            }
            std::fs::rename(&tmp, &to).map_err(|e| WorkspaceError::io(&to, e))?;
            put.push(to);
        }
        let index = put.pop().unwrap_or_default();
        let pack = put.pop().unwrap_or_default();
        Ok(Pack { pack, index })
    }
}

/// The checksum a pack's file name (`pack-<hex>.pack`) gives.
fn pack_checksum_of_name(pack: &Path) -> Result<[u8; 20], WorkspaceError> {
    let hex = pack
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_prefix("pack-"))
        .and_then(|n| n.strip_suffix(".pack"));
    let mut out = [0u8; 20];
    match hex.map(|h| hex::decode_to_slice(h, &mut out)) {
        Some(Ok(())) => Ok(out),
        _ => Err(WorkspaceError::io(
            pack,
            std::io::Error::other("not a pack's name"),
        )),
    }
}

/// Whether `file` (`size` bytes) ends as the pack of `checksum` or its
/// index does: a pack with the checksum, an index with it before its own.
fn names_its_pack(
    file: &std::fs::File,
    size: i64,
    is_index: bool,
    checksum: &[u8; 20],
) -> Result<bool, WorkspaceError> {
    let from_end = if is_index { 40 } else { 20 };
    let Some(at) = u64::try_from(size)
        .ok()
        .and_then(|s| s.checked_sub(from_end))
    else {
        return Ok(false);
    };
    let mut tail = [0u8; 20];
    file.read_exact_at(&mut tail, at)
        .map_err(|e| WorkspaceError::io(Path::new("pack"), e))?;
    Ok(&tail == checksum)
}

/// Whether the open file is one the sandbox user can neither write nor
/// make writable: ours (and we are not that user), with no write bit.
fn cannot_be_changed_by_sandbox(st: &rustix::fs::Stat) -> bool {
    let me = rustix::process::geteuid().as_raw();
    rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::RegularFile
        && st.st_uid == me
        && me != crate::workspace::SANDBOX_UID
        && st.st_mode & 0o222 == 0
}

fn set_read_only(path: &Path) -> Result<(), WorkspaceError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o444))
        .map_err(|e| WorkspaceError::io(path, e))
}

fn type_code(kind: ObjectType) -> u8 {
    match kind {
        ObjectType::Commit => 1,
        ObjectType::Tree => 2,
        ObjectType::Tag => 4,
        _ => 3,
    }
}

/// The type-and-size header of a pack entry: 3 type bits and the size, 4
/// bits then 7 per byte, low first, the top bit saying more follow.
fn push_object_header(out: &mut Vec<u8>, code: u8, size: u64) {
    let mut byte = (code << 4) | (size & 0x0f) as u8;
    let mut rest = size >> 4;
    while rest != 0 {
        out.push(byte | 0x80);
        byte = (rest & 0x7f) as u8;
        rest >>= 7;
    }
    out.push(byte);
}

/// The version-2 index of `sorted` (id, offset, CRC-32), sorted by id.
fn index_bytes(sorted: &[(Oid, u64, u32)], checksum: &[u8; 20]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1032 + sorted.len() * 28 + 40);
    out.extend_from_slice(&[0xff, b't', b'O', b'c']);
    out.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for (id, _, _) in sorted {
        fanout[usize::from(id.as_bytes()[0])] += 1;
    }
    let mut total = 0u32;
    for n in fanout {
        total += n;
        out.extend_from_slice(&total.to_be_bytes());
    }
    for (id, _, _) in sorted {
        out.extend_from_slice(id.as_bytes());
    }
    for (_, _, crc) in sorted {
        out.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for (_, offset, _) in sorted {
        match u32::try_from(*offset) {
            Ok(small) if small < 0x8000_0000 => out.extend_from_slice(&small.to_be_bytes()),
            _ => {
                let at = u32::try_from(large.len()).unwrap_or(u32::MAX) | 0x8000_0000;
                out.extend_from_slice(&at.to_be_bytes());
                large.push(*offset);
            }
        }
    }
    for offset in large {
        out.extend_from_slice(&offset.to_be_bytes());
    }
    out.extend_from_slice(checksum);
    let own: [u8; 20] = Sha1::digest(&out).into();
    out.extend_from_slice(&own);
    out
}

/// zlib's Adler-32.
struct Adler32 {
    a: u32,
    b: u32,
}

impl Default for Adler32 {
    fn default() -> Self {
        Self { a: 1, b: 0 }
    }
}

impl Adler32 {
    const MOD: u32 = 65_521;
    /// The most bytes summed before `b` could overflow.
    const RUN: usize = 5_552;

    fn update(&mut self, bytes: &[u8]) {
        for run in bytes.chunks(Self::RUN) {
            for &byte in run {
                self.a += u32::from(byte);
                self.b += self.a;
            }
            self.a %= Self::MOD;
            self.b %= Self::MOD;
        }
    }

    fn finish(&self) -> u32 {
        (self.b << 16) | self.a
    }
}

/// CRC-32 (IEEE), eight bytes at a time.
#[derive(Default)]
struct Crc32(u32);

const CRC_TABLES: [[u32; 256]; 8] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 8] {
    let mut tables = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        tables[0][i] = c;
        i += 1;
    }
    let mut t = 1;
    while t < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = tables[t - 1][i];
            tables[t][i] = (prev >> 8) ^ tables[0][(prev & 0xff) as usize];
            i += 1;
        }
        t += 1;
    }
    tables
}

impl Crc32 {
    fn update(&mut self, bytes: &[u8]) {
        let mut c = !self.0;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let lo = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) ^ c;
            let hi = u32::from_le_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]);
            let t = &CRC_TABLES;
            c = t[7][(lo & 0xff) as usize]
                ^ t[6][((lo >> 8) & 0xff) as usize]
                ^ t[5][((lo >> 16) & 0xff) as usize]
                ^ t[4][(lo >> 24) as usize]
                ^ t[3][(hi & 0xff) as usize]
                ^ t[2][((hi >> 8) & 0xff) as usize]
                ^ t[1][((hi >> 16) & 0xff) as usize]
                ^ t[0][(hi >> 24) as usize];
        }
        for &byte in chunks.remainder() {
            c = CRC_TABLES[0][((c ^ u32::from(byte)) & 0xff) as usize] ^ (c >> 8);
        }
        self.0 = !c;
    }

    fn finish(&self) -> u32 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn verify_pack(pack: &Pack) {
        let verified = std::process::Command::new("git")
            .args(["verify-pack", "-v"])
            .arg(&pack.index)
            .output()
            .expect("git verify-pack");
        assert!(
            verified.status.success(),
            "{}",
            String::from_utf8_lossy(&verified.stderr)
        );
    }

    /// Blobs of about 1 MB each, all different.
    fn megabyte_blobs(n: u32) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                (0..262_144u32)
                    .flat_map(|j| (j ^ i.wrapping_mul(2_654_435_761)).to_le_bytes())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_large_baseline_is_several_packs_and_its_trees_one_of_their_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = git2::Repository::init_bare(dir.path().join("a.git")).expect("init");
        let mut writer = PackWriter::new(&repo.path().join("objects")).expect("writer");
        let blobs = megabyte_blobs(14);
        let mut buf = Vec::new();
        for b in &blobs {
            let blob = encode_blob(b, buf).expect("encode");
            assert!(writer.append(&blob).expect("append"));
            buf = blob.into_buffer();
        }
        writer.start_part().expect("part");
        let tree = writer
            .add_bytes(ObjectType::Tree, b"")
            .expect("the empty tree");
        let packs = writer.finish().expect("finish");
        // 14 MB: 4 MB parts, then the trees alone.
        assert_eq!(packs.len(), 5, "{packs:?}");
        for pack in &packs {
            verify_pack(pack);
        }
        let last = read_index(&packs[4].index).expect("index");
        assert_eq!(
            last.iter().map(|e| e.0).collect::<Vec<_>>(),
            vec![tree],
            "the trees' pack holds only them"
        );
        let odb = repo.odb().expect("odb");
        for b in &blobs {
            let id = Oid::hash_object(ObjectType::Blob, b).expect("hash");
            assert_eq!(odb.read(id).expect("read").data(), b.as_slice());
        }
    }

    #[test]
    fn reusing_packs_keeps_what_is_wanted_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = git2::Repository::init_bare(dir.path().join("old.git")).expect("init");
        let mut writer = PackWriter::new(&old.path().join("objects")).expect("writer");
        let blobs = megabyte_blobs(9);
        let ids: Vec<Oid> = blobs
            .iter()
            .map(|b| writer.add_bytes(ObjectType::Blob, b).expect("add"))
            .collect();
        let packs = writer.finish().expect("finish");
        assert!(packs.len() >= 2, "{packs:?}");
        // Every object but one of the first pack's is wanted.
        let first: Vec<Oid> = read_index(&packs[0].index)
            .expect("index")
            .iter()
            .map(|e| e.0)
            .collect();
        let stale = first[0];
        let wanted: HashSet<Oid> = ids.iter().copied().filter(|id| *id != stale).collect();

        let new = git2::Repository::init_bare(dir.path().join("new.git")).expect("init");
        let mut writer = PackWriter::new(&new.path().join("objects")).expect("writer");
        let from = old.path().join("objects/pack");
        let (moved, found) = reuse_packs(&from, &wanted, &mut writer).expect("reuse");
        assert_eq!(found, wanted);
        assert_eq!(
            moved.len(),
            packs.len() - 1,
            "the untouched packs move whole"
        );
        assert!(moved.iter().all(|p| p.pack.is_file() && p.index.is_file()));
        // A kept object is not written again.
        assert!(!writer.append_raw(ids[8], b"", 0).expect("append"));
        let written = writer.finish().expect("finish");
        for pack in moved.iter().chain(&written) {
            verify_pack(pack);
        }
        let odb = new.odb().expect("odb");
        for (b, id) in blobs.iter().zip(&ids) {
            if *id == stale {
                assert!(odb.read(*id).is_err(), "the stale object is gone");
            } else {
                assert_eq!(odb.read(*id).expect("read").data(), b.as_slice());
            }
        }
        // What was not wanted stayed behind, and only that.
        let left: Vec<_> = std::fs::read_dir(&from).expect("dir").flatten().collect();
        assert_eq!(left.len(), 2, "the rewritten pack and its index");

        // An entry that does not match its index is refused.
        let damaged = git2::Repository::init_bare(dir.path().join("d.git")).expect("init");
        let mut writer = PackWriter::new(&damaged.path().join("objects")).expect("writer");
        let id = writer.add_bytes(ObjectType::Blob, b"one\n").expect("add");
        writer.add_bytes(ObjectType::Blob, b"two\n").expect("add");
        let [pack]: [Pack; 1] = writer
            .finish()
            .expect("finish")
            .try_into()
            .expect("one pack");
        let mut bytes = std::fs::read(&pack.pack).expect("read");
        let at = usize::try_from(
            read_index(&pack.index)
                .expect("index")
                .iter()
                .find(|e| e.0 == id)
                .expect("entry")
                .1,
        )
        .expect("offset");
        bytes[at + 8] ^= 0x20;
        std::fs::set_permissions(&pack.pack, std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        std::fs::write(&pack.pack, bytes).expect("write");
        let mut writer = PackWriter::new(&dir.path().join("e.git/objects")).expect("writer");
        let only: HashSet<Oid> = [id].into_iter().collect();
        let err = reuse_packs(&damaged.path().join("objects/pack"), &only, &mut writer)
            .map(|_| ())
            .expect_err("a damaged entry");
        assert!(err.to_string().contains("checksum"), "{err}");
    }

    #[test]
    fn checksums_match_their_definitions() {
        let mut crc = Crc32::default();
        crc.update(b"123456789");
        assert_eq!(crc.finish(), 0xcbf4_3926);
        let mut split = Crc32::default();
        split.update(b"1234");
        split.update(b"56789");
        assert_eq!(split.finish(), 0xcbf4_3926);
        let mut adler = Adler32::default();
        adler.update(b"Wikipedia");
        assert_eq!(adler.finish(), 0x11e6_0398);
    }

    #[test]
    fn git_and_libgit2_read_every_object_of_the_pack() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = git2::Repository::init_bare(dir.path().join("a.git")).expect("init");
        let mut writer = PackWriter::new(&repo.path().join("objects")).expect("writer");
        let big: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        let contents: [&[u8]; 4] = [b"", b"hello\n", &big, b"hello\n"];
        let mut ids = Vec::new();
        for c in contents {
            let mut r = c;
            ids.push(writer.add_blob(&mut r, c.len() as u64).expect("add"));
        }
        // Ends early: refused.
        let mut short: &[u8] = b"abc";
        assert!(writer.add_blob(&mut short, 10).is_err());
        assert_eq!(writer.len(), 3, "the duplicate is stored once");
        let packs = writer.finish().expect("finish");
        let [pack] = packs.as_slice() else {
            panic!("a small pack is one part: {packs:?}")
        };
        let odb = repo.odb().expect("odb");
        for (c, id) in contents.iter().zip(&ids) {
            assert_eq!(*id, Oid::hash_object(ObjectType::Blob, c).expect("hash"));
            let obj = odb.read(*id).expect("read");
            assert_eq!(obj.data(), *c);
        }
        // Git's own check of the pack and its index.
        verify_pack(pack);
        // Framed apart and appended: the same objects, each once.
        let other = git2::Repository::init_bare(dir.path().join("c.git")).expect("init");
        let mut writer = PackWriter::new(&other.path().join("objects")).expect("writer");
        let mut buf = Vec::new();
        for (c, new) in contents.iter().zip([true, true, true, false]) {
            let blob = encode_blob(c, buf).expect("encode");
            assert_eq!(
                blob.id,
                Oid::hash_object(ObjectType::Blob, c).expect("hash")
            );
            assert_eq!(writer.append(&blob).expect("append"), new);
            buf = blob.into_buffer();
        }
        // Cut short past what is gathered in memory: rolled back on disk.
        let huge = vec![5u8; 3 * OUT_BUFFER];
        assert!(
            writer
                .add_blob(&mut &huge[..], huge.len() as u64 + 1)
                .is_err()
        );
        let mut r = huge.as_slice();
        let huge_id = writer.add_blob(&mut r, huge.len() as u64).expect("add");
        for framed in writer.finish().expect("finish") {
            verify_pack(&framed);
        }
        let odb = other.odb().expect("odb");
        for (c, id) in contents.iter().zip(&ids) {
            assert_eq!(odb.read(*id).expect("read").data(), *c);
        }
        assert_eq!(odb.read(huge_id).expect("read").data(), huge.as_slice());

        // A copy into another database reads the same.
        let other = git2::Repository::init_bare(dir.path().join("b.git")).expect("init");
        pack.share_into(&other.path().join("objects"))
            .expect("share");
        let odb = other.odb().expect("odb");
        assert_eq!(odb.read(ids[2]).expect("read").data(), big.as_slice());
    }
}
