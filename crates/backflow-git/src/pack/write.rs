//! Writing a pack and its index in one pass, for objects this process holds already.
//!
//! libgit2's way (a `PackBuilder`, then an indexer on the receiving side) deflates every object
//! at zlib's default level, searches it for deltas, and then has the indexer inflate and hash
//! each object again to learn what the writer knew all along: its id, offset and checksum. For a
//! commit into a large folder, whose tree is written anew each time, that was most of the
//! branch worker's time. Here each object is deflated once, at zlib's fastest level (or
//! stored, level 0, in a pack small enough that a roll-up compresses it later), without deltas,
//! and the index is written from what was recorded while writing the pack. Small
//! roll-ups are written here too; large ones (`super::roll_up_small_packs`) go through libgit2,
//! whose deltas keep a long history of one large tree small on disk.
//!
//! The formats are git's own (`gitformat-pack(5)`): a version-2 pack (header, entries,
//! trailing SHA-1) and a version-2 index (fan-out table, sorted ids, CRC-32s, offsets, both
//! checksums). Both are written to temporary files and renamed into place, the pack first: a
//! reader that finds the index finds the pack.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use flate2::{Compress, Compression, FlushCompress, Status};
use git2::{ObjectType, Oid};
use sha1::{Digest, Sha1};

use crate::error::StoreError;

/// A pack this process wrote (or found already written with the same content).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WrittenPack {
    /// The pack's path without its extension (`…/objects/pack/pack-<checksum>`).
    pub(crate) stem: PathBuf,
    /// The objects it holds, sorted.
    pub(crate) ids: Vec<Oid>,
}

impl WrittenPack {
    /// Whether `packs` together hold exactly the objects `ids` (listed once each, in any
    /// order), each object in one of them only.
    pub(crate) fn hold_exactly(packs: &[WrittenPack], ids: &[Oid]) -> bool {
        if packs.is_empty() || packs.iter().map(|p| p.ids.len()).sum::<usize>() != ids.len() {
            return false;
        }
        let mut held: Vec<Oid> = packs.iter().flat_map(|p| p.ids.iter().copied()).collect();
        held.sort_unstable();
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        held == sorted
    }

    /// The pack, linked (or, across file systems, copied) into the store at `objects`, pack
    /// before index. Pack files never change once written, so another store may share them.
    pub(crate) fn link_into(&self, objects: &Path) -> Result<WrittenPack, StoreError> {
        let Some(name) = self.stem.file_name() else {
            return Err(StoreError::io(
                "linking a pack",
                &self.stem,
                std::io::ErrorKind::InvalidInput.into(),
            ));
        };
        let dir = objects.join("pack");
        let stem = dir.join(name);
        for ext in ["pack", "idx"] {
            let from = self.stem.with_extension(ext);
            let to = stem.with_extension(ext);
            match std::fs::hard_link(&from, &to) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                // Another file system: copied beside, then moved into place.
                Err(_) => {
                    let (tmp, _) = temporary(&dir, ext)?;
                    std::fs::copy(&from, &tmp).map_err(|source| {
                        remove_quietly(&tmp);
                        StoreError::io("copying a pack", &from, source)
                    })?;
                    place(&tmp, &to)?;
                }
            }
        }
        Ok(WrittenPack {
            stem,
            ids: self.ids.clone(),
        })
    }
}

/// One object's place in the pack being written.
pub(super) struct Entry {
    id: Oid,
    offset: u64,
    crc: u32,
}

/// Writes the objects `ids` (read from `src`, each once however often it is listed) as one pack
/// and its index into `objects/pack` under `objects`. Returns `None` when `ids` is empty.
pub(crate) fn write_pack(
    src: &git2::Odb<'_>,
    ids: &[Oid],
    objects: &Path,
) -> Result<Option<WrittenPack>, StoreError> {
    let mut seen = BTreeSet::new();
    let ids: Vec<Oid> = ids.iter().copied().filter(|id| seen.insert(*id)).collect();
    if ids.is_empty() {
        return Ok(None);
    }
    store_pack(objects, ids.len(), |body| {
        WholeEntries::with(EntryLevel::for_pack(ids.len()), |whole| {
            for id in &ids {
                let object = src.read(*id)?;
                whole.push(body, *id, object.kind(), object.data())?;
            }
            Ok(())
        })
    })
    .map(Some)
}

/// Writes the blobs `blobs` (each with its id, as [`Oid::hash_object`] names it; an id listed
/// twice is written once) as one pack and its index into `objects/pack` under `objects`, without
/// going through an object database. Returns `None` when `blobs` is empty.
///
/// libgit2 looks for every object it is asked to write, and on a miss it lists the pack folder
/// again: for a snapshot's new blobs that was a folder listing per blob.
pub(crate) fn write_blob_pack(
    blobs: &[(Oid, &[u8])],
    objects: &Path,
) -> Result<Option<WrittenPack>, StoreError> {
    let mut seen = BTreeSet::new();
    let blobs: Vec<&(Oid, &[u8])> = blobs.iter().filter(|(id, _)| seen.insert(*id)).collect();
    if blobs.is_empty() {
        return Ok(None);
    }
    store_pack(objects, blobs.len(), |body| {
        WholeEntries::with(EntryLevel::for_pack(blobs.len()), |whole| {
            for (id, content) in blobs {
                whole.push(body, *id, ObjectType::Blob, content)?;
            }
            Ok(())
        })
    })
    .map(Some)
}

/// Blobs named by their ids, as [`write_blob_pack`] takes them.
#[cfg(test)]
pub(crate) fn hashed_blobs(contents: &[Vec<u8>]) -> Vec<(Oid, &[u8])> {
    contents
        .iter()
        .map(|c| {
            let id = Oid::hash_object(ObjectType::Blob, c).expect("hash");
            (id, c.as_slice())
        })
        .collect()
}

/// How the entries of a pack are compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryLevel {
    /// zlib's fastest level.
    Fast,
    /// zlib streams of stored blocks (level 0): for packs small enough that a roll-up writes
    /// their objects again, compressed and searched for deltas by libgit2, once their tier fills
    /// (a commit's pack; deflating a large folder's tree anew for every commit was a tenth of a
    /// busy branch worker).
    Stored,
}

impl EntryLevel {
    /// The level for a pack of `count` objects.
    fn for_pack(count: usize) -> Self {
        if count < super::DELTAS_FROM {
            Self::Stored
        } else {
            Self::Fast
        }
    }
}

/// Adds whole objects to a pack, each deflated once at its pack's [`EntryLevel`], the deflaters
/// and the output buffer reused from one object to the next.
struct WholeEntries {
    fast: Compress,
    stored: Compress,
    level: EntryLevel,
    deflated: Vec<u8>,
}

impl Default for WholeEntries {
    fn default() -> Self {
        Self {
            fast: Compress::new(Compression::fast(), true),
            stored: Compress::new(Compression::none(), true),
            level: EntryLevel::Fast,
            deflated: Vec::new(),
        }
    }
}

thread_local! {
    /// This thread's [`WholeEntries`], kept from one pack to the next: zlib allocates and clears
    /// its window and tables for every new deflater, which cost about as much as deflating a
    /// small commit's objects.
    static WHOLE: RefCell<WholeEntries> = RefCell::new(WholeEntries::default());
}

/// The output buffer a kept [`WholeEntries`] may hold on to between packs.
const KEEP_DEFLATED: usize = 1 << 20;

impl WholeEntries {
    /// Runs `fill` with this thread's deflaters, set to `level` (never from inside another
    /// `fill`).
    fn with<T>(level: EntryLevel, fill: impl FnOnce(&mut Self) -> T) -> T {
        WHOLE.with_borrow_mut(|whole| {
            whole.level = level;
            let out = fill(whole);
            whole.deflated.clear();
            whole.deflated.shrink_to(KEEP_DEFLATED);
            out
        })
    }

    fn push(
        &mut self,
        body: &mut PackBody,
        id: Oid,
        kind: ObjectType,
        data: &[u8],
    ) -> std::io::Result<()> {
        let header = entry_header(kind, data.len())?;
        let deflate = match self.level {
            EntryLevel::Fast => &mut self.fast,
            EntryLevel::Stored => &mut self.stored,
        };
        deflated(deflate, data, &mut self.deflated)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&header);
        crc.update(&self.deflated);
        body.push(id, crc.finalize(), &[&header, &self.deflated])
    }
}

/// Writes a pack of `count` entries, which `fill` adds, and its index into `objects/pack`:
/// the pack to a temporary file, named by its checksum once written, then the index; both
/// renamed into place, pack first. Nothing is left behind when `fill` fails.
pub(super) fn store_pack(
    objects: &Path,
    count: usize,
    fill: impl FnOnce(&mut PackBody) -> Result<(), EntryError>,
) -> Result<WrittenPack, StoreError> {
    let dir = objects.join("pack");
    let (tmp, file) = temporary(&dir, "pack")?;
    let written = PackBody::start(file, count)
        .map_err(EntryError::from)
        .and_then(|mut body| {
            fill(&mut body)?;
            Ok(body.finish()?)
        })
        .map_err(|e| e.at(&tmp));
    // A pack's checksum is a SHA-1, an object id's size: git2 spells it in hex for the name.
    let named = written.and_then(|(entries, checksum)| {
        let name = Oid::from_bytes(&checksum)?;
        Ok((entries, checksum, name))
    });
    let (mut entries, checksum, name) = match named {
        Ok(done) => done,
        Err(e) => {
            remove_quietly(&tmp);
            return Err(e);
        }
    };
    entries.sort_unstable_by_key(|e| e.id);
    let stem = dir.join(format!("pack-{name}"));
    let index = encode_index(&entries, &checksum);
    let placed = place(&tmp, &stem.with_extension("pack")).and_then(|()| {
        let (tmp_index, mut file) = temporary(&dir, "idx")?;
        let wrote = file
            .write_all(&index)
            .map_err(|source| StoreError::io("writing a pack index", &tmp_index, source));
        drop(file);
        wrote.and_then(|()| place(&tmp_index, &stem.with_extension("idx")))
    });
    placed?;
    Ok(WrittenPack {
        stem,
        ids: entries.into_iter().map(|e| e.id).collect(),
    })
}

/// A failure while writing the entries, before its file is known to the message.
pub(super) enum EntryError {
    Git(git2::Error),
    Io(std::io::Error),
}

impl EntryError {
    fn at(self, path: &Path) -> StoreError {
        match self {
            Self::Git(e) => StoreError::Git(e),
            Self::Io(source) => StoreError::io("writing a pack", path, source),
        }
    }
}

impl From<git2::Error> for EntryError {
    fn from(e: git2::Error) -> Self {
        Self::Git(e)
    }
}

impl From<std::io::Error> for EntryError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// The pack being written: its file, hashed as it goes, and where each entry went.
pub(super) struct PackBody {
    out: Hashed<BufWriter<File>>,
    entries: Vec<Entry>,
    count: usize,
}

impl PackBody {
    /// Writes the header of a pack of `count` entries into `file`.
    fn start(file: File, count: usize) -> std::io::Result<Self> {
        let declared = u32::try_from(count).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "too many objects for one pack",
            )
        })?;
        let mut out = Hashed::new(BufWriter::with_capacity(1 << 16, file));
        out.write_all(b"PACK")?;
        out.write_all(&2u32.to_be_bytes())?;
        out.write_all(&declared.to_be_bytes())?;
        Ok(Self {
            out,
            entries: Vec::with_capacity(count),
            count,
        })
    }

    /// Adds the entry of object `id`: its `parts` (the entry's header and its zlib stream)
    /// one after the other, whose CRC-32 is `crc`.
    pub(super) fn push(&mut self, id: Oid, crc: u32, parts: &[&[u8]]) -> std::io::Result<()> {
        if self.entries.len() == self.count {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "more entries than the pack's header declares",
            ));
        }
        self.entries.push(Entry {
            id,
            offset: self.out.written,
            crc,
        });
        for part in parts {
            self.out.write_all(part)?;
        }
        Ok(())
    }

    /// Writes the trailing checksum; returns where each entry went and the checksum.
    fn finish(self) -> std::io::Result<(Vec<Entry>, [u8; 20])> {
        if self.entries.len() != self.count {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "fewer entries than the pack's header declares",
            ));
        }
        let checksum: [u8; 20] = self.out.hash.finalize().into();
        let mut file = self.out.inner;
        file.write_all(&checksum)?;
        file.into_inner()
            .map_err(std::io::IntoInnerError::into_error)?;
        Ok((self.entries, checksum))
    }
}

/// A writer that hashes and counts what passes through it.
struct Hashed<W> {
    inner: W,
    hash: Sha1,
    written: u64,
}

impl<W: Write> Hashed<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            hash: Sha1::new(),
            written: 0,
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.inner.write_all(bytes)?;
        self.hash.update(bytes);
        self.written += bytes.len() as u64;
        Ok(())
    }
}

/// An entry's header: the object's type and inflated size, 4 bits of the size in the first
/// byte and 7 in each further one, low bits first.
fn entry_header(kind: ObjectType, size: usize) -> std::io::Result<Vec<u8>> {
    let code: u8 = match kind {
        ObjectType::Commit => 1,
        ObjectType::Tree => 2,
        ObjectType::Blob => 3,
        ObjectType::Tag => 4,
        ObjectType::Any => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "an object of no known type",
            ));
        }
    };
    let mut size = size as u64;
    // The size's low 4 bits, below the type; the high bit says more size follows.
    let mut byte = (code << 4) | (size & 0x0f) as u8;
    size >>= 4;
    let mut header = Vec::with_capacity(4);
    while size != 0 {
        header.push(byte | 0x80);
        byte = (size & 0x7f) as u8;
        size >>= 7;
    }
    header.push(byte);
    Ok(header)
}

/// `data` as one zlib stream, into `out` (emptied first).
fn deflated(deflate: &mut Compress, data: &[u8], out: &mut Vec<u8>) -> std::io::Result<()> {
    deflate.reset();
    out.clear();
    // Incompressible data grows by a few bytes per 16 KiB block, and the stream by its header.
    out.reserve(data.len() + data.len() / 1000 + 64);
    loop {
        let consumed = usize::try_from(deflate.total_in()).unwrap_or(usize::MAX);
        let rest = data.get(consumed..).unwrap_or_default();
        let status = deflate
            .compress_vec(rest, out, FlushCompress::Finish)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        match status {
            Status::StreamEnd => return Ok(()),
            Status::Ok | Status::BufError => out.reserve(out.capacity().max(64)),
        }
    }
}

/// The first bytes of a version-2 pack index (the format git and libgit2 write): its magic
/// number and version.
pub(super) const INDEX_V2: [u8; 8] = [0xff, b't', b'O', b'c', 0, 0, 0, 2];

/// The length of a version-2 index's header: [`INDEX_V2`] and the 256-entry fan-out table,
/// whose last entry is the number of objects.
pub(super) const INDEX_HEADER: usize = 8 + 256 * 4;

/// How many objects a version-2 index lists, read from its header (the start of `index` is
/// enough); `None` for anything else.
pub(super) fn index_header_count(index: &[u8]) -> Option<usize> {
    if index.get(..INDEX_V2.len())? != INDEX_V2 {
        return None;
    }
    let last = index.get(INDEX_HEADER - 4..INDEX_HEADER)?;
    usize::try_from(u32::from_be_bytes(last.try_into().ok()?)).ok()
}

/// The version-2 index of a pack whose entries (sorted by id) and checksum are given.
fn encode_index(entries: &[Entry], pack_checksum: &[u8; 20]) -> Vec<u8> {
    let mut index = Vec::with_capacity(INDEX_HEADER + entries.len() * 28 + 40);
    index.extend_from_slice(&INDEX_V2);
    // Fan-out: how many ids start with a byte at most `b`.
    let mut below = 0usize;
    for b in 0..=255u8 {
        below += entries[below..]
            .iter()
            .take_while(|e| e.id.as_bytes()[0] == b)
            .count();
        index.extend_from_slice(&(below as u32).to_be_bytes());
    }
    for e in entries {
        index.extend_from_slice(e.id.as_bytes());
    }
    for e in entries {
        index.extend_from_slice(&e.crc.to_be_bytes());
    }
    // Offsets from 2 GiB on go to a table of 8-byte offsets, named by their place in it.
    let mut large = Vec::new();
    for e in entries {
        let small = match u32::try_from(e.offset) {
            Ok(offset) if offset < 0x8000_0000 => offset,
            _ => {
                large.push(e.offset);
                0x8000_0000 | (large.len() as u32 - 1)
            }
        };
        index.extend_from_slice(&small.to_be_bytes());
    }
    for offset in large {
        index.extend_from_slice(&offset.to_be_bytes());
    }
    index.extend_from_slice(pack_checksum);
    let checksum: [u8; 20] = Sha1::digest(&index).into();
    index.extend_from_slice(&checksum);
    index
}

/// A new temporary file in `dir` (`tmp_<what>_<pid>_<n>`, as git names its own), created
/// exclusively.
fn temporary(dir: &Path, what: &str) -> Result<(PathBuf, File), StoreError> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    loop {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.join(format!("tmp_{what}_{}_{n}", std::process::id()));
        match File::options().write(true).create_new(true).open(&path) {
            Ok(file) => return Ok((path, file)),
            // Left by a process of the same id before a restart.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(source) => return Err(StoreError::io("creating a pack file", &path, source)),
        }
    }
}

/// Moves the finished `tmp` to `to`, read-only as git leaves its packs. A file already there
/// has the same content (the name is its checksum): `tmp` is dropped instead.
fn place(tmp: &Path, to: &Path) -> Result<(), StoreError> {
    if to.exists() {
        remove_quietly(tmp);
        return Ok(());
    }
    let read_only = std::fs::metadata(tmp).and_then(|m| {
        let mut permissions = m.permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(tmp, permissions)
    });
    let renamed = read_only.and_then(|()| std::fs::rename(tmp, to));
    renamed.map_err(|source| {
        remove_quietly(tmp);
        StoreError::io("moving a pack file into place", to, source)
    })
}

fn remove_quietly(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove a temporary pack file");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_testkit::git_out;
    use git2::{Repository, Signature};

    /// Bytes that do not compress: each is a step of a simple generator.
    fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    }

    /// Blobs of every header length (sizes below 16, below 2 KiB, large and incompressible), a
    /// tree, a commit and an id listed twice, written by `write_pack`: git reads every object
    /// back, `git index-pack` names the pack as it was named and indexes it byte for byte as
    /// it was indexed, and `git fsck` finds the store whole.
    #[test]
    fn a_pack_and_its_index_are_what_git_itself_would_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = Repository::init_bare(dir.path().join("src.git")).expect("src");
        let dst_path = dir.path().join("dst.git");
        Repository::init_bare(&dst_path).expect("dst");
        let contents: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"short\n".to_vec(),
            b"kind: ConfigMap\n".repeat(100),
            noise(300_000),
        ];
        let blobs: Vec<Oid> = contents
            .iter()
            .map(|c| src.blob(c).expect("blob"))
            .collect();
        let mut tree = src.treebuilder(None).expect("treebuilder");
        for (i, blob) in blobs.iter().enumerate() {
            tree.insert(format!("f{i}.yaml"), *blob, 0o100_644)
                .expect("insert");
        }
        let tree = src.find_tree(tree.write().expect("tree")).expect("find");
        let sig = Signature::now("t", "t@example.invalid").expect("sig");
        let commit = src
            .commit(None, &sig, &sig, "m", &tree, &[])
            .expect("commit");
        let mut ids = blobs.clone();
        ids.extend([tree.id(), commit, blobs[1]]);

        let odb = src.odb().expect("odb");
        let pack = write_pack(&odb, &ids, &dst_path.join("objects"))
            .expect("write")
            .expect("a pack");
        assert_eq!(pack.ids.len(), 6, "each object once");
        packs_hold_exactly_what_they_list_once(&pack, &ids[..6]);

        let packed = pack.stem.with_extension("pack");
        let reindexed = dir.path().join("git.idx");
        let named = git_out(
            dir.path(),
            &[
                "index-pack",
                "-o",
                &reindexed.to_string_lossy(),
                &packed.to_string_lossy(),
            ],
        );
        let name = pack.stem.file_name().expect("name").to_string_lossy();
        assert_eq!(format!("pack-{}", named.trim()), name);
        assert_eq!(
            std::fs::read(pack.stem.with_extension("idx")).expect("ours"),
            std::fs::read(&reindexed).expect("git's"),
            "the index is git's own"
        );
        git_out(&dst_path, &["verify-pack", &packed.to_string_lossy()]);
        for (blob, content) in blobs.iter().zip(&contents) {
            let shown = std::process::Command::new("git")
                .current_dir(&dst_path)
                .args(["cat-file", "blob", &blob.to_string()])
                .output()
                .expect("git cat-file");
            assert_eq!(&shown.stdout, content, "blob {blob}");
        }
        let dst = Repository::open_bare(&dst_path).expect("open");
        dst.reference("refs/heads/main", commit, false, "t")
            .expect("ref");
        git_out(&dst_path, &["fsck", "--full", "--strict", "--no-dangling"]);

        // The same objects again: the same pack, found in place.
        let again = write_pack(&odb, &ids, &dst_path.join("objects"))
            .expect("write again")
            .expect("a pack");
        assert_eq!(again, pack);
        let files = std::fs::read_dir(dst_path.join("objects/pack"))
            .expect("pack dir")
            .count();
        assert_eq!(files, 2, "one pack and its index, no temporary left");
    }

    /// `pack` holds exactly `ids` (distinct): one pack holds them, fewer are not what it holds,
    /// no packs hold nothing, and two packs sharing objects do not hold them once each.
    fn packs_hold_exactly_what_they_list_once(pack: &WrittenPack, ids: &[Oid]) {
        let one = std::slice::from_ref(pack);
        assert!(WrittenPack::hold_exactly(one, ids));
        assert!(!WrittenPack::hold_exactly(one, &ids[..ids.len() - 1]));
        assert!(!WrittenPack::hold_exactly(&[], &[]));
        let twice = [pack.clone(), pack.clone()];
        assert!(!WrittenPack::hold_exactly(&twice, ids));
    }

    #[test]
    fn nothing_to_write_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = Repository::init_bare(dir.path().join("src.git")).expect("src");
        let odb = src.odb().expect("odb");
        let written = write_pack(&odb, &[], &dir.path().join("src.git/objects")).expect("write");
        assert!(written.is_none());
    }

    /// A pack under the delta roll-up's size stores its entries (a roll-up compresses them
    /// later), a larger one compresses them; git reads both, and `fsck` accepts them.
    #[test]
    fn small_packs_store_their_entries_and_large_ones_compress_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.git");
        Repository::init_bare(&path).expect("repo");
        let objects = path.join("objects");
        let pack_bytes = |n: usize| {
            let contents: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    format!("kind: ConfigMap\nindex: {i}\n")
                        .repeat(40)
                        .into_bytes()
                })
                .collect();
            let blobs = hashed_blobs(&contents);
            let written = write_blob_pack(&blobs, &objects)
                .expect("write")
                .expect("a pack");
            let size = std::fs::metadata(written.stem.with_extension("pack"))
                .expect("pack")
                .len();
            let raw: usize = contents.iter().map(Vec::len).sum();
            let id = blobs[n - 1].0.to_string();
            let read = git_out(&path, &["cat-file", "blob", &id]);
            assert_eq!(read.as_bytes(), contents[n - 1].as_slice());
            (size as f64, raw as f64)
        };
        let (small, small_raw) = pack_bytes(super::super::DELTAS_FROM - 1);
        assert!(small > small_raw, "stored: {small} bytes for {small_raw}");
        let (large, large_raw) = pack_bytes(super::super::DELTAS_FROM);
        assert!(
            large < large_raw / 4.0,
            "compressed: {large} bytes for {large_raw}"
        );
        git_out(&path, &["fsck", "--strict", "--no-dangling"]);
    }

    /// Blobs written straight from their contents (one listed twice, one empty, one that
    /// does not compress) land as one pack git reads whole, each under the id `git hash-object`
    /// gives its content; nothing written leaves nothing.
    #[test]
    fn blobs_are_written_from_their_contents_under_gits_ids() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.git");
        Repository::init_bare(&path).expect("repo");
        let contents: Vec<Vec<u8>> = vec![
            b"kind: ConfigMap\n".repeat(50),
            Vec::new(),
            noise(70_000),
            b"kind: ConfigMap\n".repeat(50),
        ];
        let blobs = hashed_blobs(&contents);
        let objects = path.join("objects");
        assert!(write_blob_pack(&[], &objects).expect("nothing").is_none());

        let written = write_blob_pack(&blobs, &objects)
            .expect("write")
            .expect("a pack");

        assert_eq!(
            written.ids.len(),
            3,
            "the blob listed twice is written once"
        );
        for (n, content) in contents.iter().enumerate() {
            let file = dir.path().join(format!("content-{n}"));
            std::fs::write(&file, content).expect("content");
            let id = git_out(dir.path(), &["hash-object", &file.to_string_lossy()]);
            assert_eq!(id.trim(), blobs[n].0.to_string());
            let read = std::process::Command::new("git")
                .args([
                    "--git-dir",
                    &path.to_string_lossy(),
                    "cat-file",
                    "blob",
                    id.trim(),
                ])
                .output()
                .expect("git cat-file");
            assert!(read.status.success());
            assert_eq!(&read.stdout, content, "blob {n} reads back");
        }
        git_out(&path, &["fsck", "--strict"]);
    }

    /// An object the source does not hold fails the write, and no file is left behind.
    #[test]
    fn a_missing_object_fails_the_write_and_leaves_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = Repository::init_bare(dir.path().join("src.git")).expect("src");
        let dst_path = dir.path().join("dst.git");
        Repository::init_bare(&dst_path).expect("dst");
        let present = src.blob(b"here").expect("blob");
        let absent = Oid::from_bytes(&[9u8; 20]).expect("oid");
        let odb = src.odb().expect("odb");
        let result = write_pack(&odb, &[present, absent], &dst_path.join("objects"));
        assert!(matches!(result, Err(StoreError::Git(_))), "{result:?}");
        let files = std::fs::read_dir(dst_path.join("objects/pack"))
            .expect("pack dir")
            .count();
        assert_eq!(files, 0);
    }

    #[test]
    fn entry_headers_carry_type_and_size_low_bits_first() {
        let header = |kind, size| entry_header(kind, size).expect("header");
        assert_eq!(header(ObjectType::Blob, 0), [0x30]);
        assert_eq!(header(ObjectType::Blob, 15), [0x3f]);
        assert_eq!(header(ObjectType::Tree, 16), [0xa0, 0x01]);
        // 300_000 = 0x493e0: its low 4 bits (0) below the type, then 62, 18 and 1, 7 bits each.
        assert_eq!(
            header(ObjectType::Commit, 300_000),
            [0x90, 0xbe, 0x92, 0x01]
        );
        assert!(entry_header(ObjectType::Any, 1).is_err());
    }

    /// Offsets from 2 GiB on are named in the 4-byte table by their place in the 8-byte one.
    #[test]
    fn offsets_past_two_gibibytes_go_to_the_large_offset_table() {
        let entry = |byte: u8, offset: u64| Entry {
            id: Oid::from_bytes(&[byte; 20]).expect("oid"),
            offset,
            crc: u32::from(byte),
        };
        let entries = [entry(1, 12), entry(2, 0x8000_0000), entry(3, 0x1_0000_0000)];
        let index = encode_index(&entries, &[0u8; 20]);
        let fanout = |b: usize| {
            let at = 8 + b * 4;
            u32::from_be_bytes(index[at..at + 4].try_into().expect("4 bytes"))
        };
        assert_eq!((fanout(0), fanout(1), fanout(2), fanout(255)), (0, 1, 2, 3));
        let offsets = 8 + 256 * 4 + 3 * 24;
        let word = |at: usize| u32::from_be_bytes(index[at..at + 4].try_into().expect("4 bytes"));
        assert_eq!(
            [word(offsets), word(offsets + 4), word(offsets + 8)],
            [12, 0x8000_0000, 0x8000_0001]
        );
        let large = offsets + 12;
        let long = |at: usize| u64::from_be_bytes(index[at..at + 8].try_into().expect("8 bytes"));
        assert_eq!([long(large), long(large + 8)], [0x8000_0000, 0x1_0000_0000]);
        assert_eq!(index.len(), large + 16 + 40);
    }
}
