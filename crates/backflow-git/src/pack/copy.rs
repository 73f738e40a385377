//! Rolling small packs up by copying their entries as they are.
//!
//! The packs a small roll-up merges were written by [`super::write_pack`] (each object whole,
//! one zlib stream) or are earlier small roll-ups of such packs. Inflating every object to
//! deflate it again, as writing from the object database does, was most of a roll-up's time;
//! an entry of a whole object means the same in any pack, so it is copied byte for byte and
//! only the new pack's checksum and index are computed. Each entry's CRC-32 is checked against
//! its old index on the way, as `git repack` checks what it reuses.
//!
//! A delta cannot be copied this way (an offset delta names its base by its place in its own
//! pack), nor can a pack whose index is not a plain version 2 one: then [`copy_packs`] says so
//! before writing anything, and the caller writes from the object database instead.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use git2::Oid;

use super::write::{INDEX_HEADER, PackBody, WrittenPack, index_header_count, store_pack};
use crate::error::StoreError;

/// Packs larger than this together are not read into memory to be copied; the object database
/// writes them one object at a time instead.
const COPY_AT_MOST: u64 = 64 << 20;

/// One entry of a pack, as its index lists it.
pub(super) struct Listed {
    pub(super) id: Oid,
    crc: u32,
    offset: u64,
}

/// A pack read whole, with its index's entries sorted by offset.
struct Source {
    bytes: Vec<u8>,
    listed: Vec<Listed>,
}

/// One entry to copy: its bytes in its source pack.
struct Picked<'a> {
    id: Oid,
    crc: u32,
    bytes: &'a [u8],
}

/// Writes the objects of the packs `stems` (paths without extension) as one pack and its index
/// into `objects/pack` by copying their entries, each object once. Returns `None`, having
/// written nothing, when they cannot be copied (a delta, an entry whose CRC-32 disagrees with
/// its index, another index format, or more than [`COPY_AT_MOST`] bytes together).
pub(crate) fn copy_packs(
    stems: &[PathBuf],
    objects: &Path,
) -> Result<Option<WrittenPack>, StoreError> {
    let Some(sources) = read_sources(stems)? else {
        return Ok(None);
    };
    let Some(picked) = pick(&sources) else {
        return Ok(None);
    };
    store_pack(objects, picked.len(), |body: &mut PackBody| {
        for entry in &picked {
            body.push(entry.id, entry.crc, &[entry.bytes])?;
        }
        Ok(())
    })
    .map(Some)
}

/// Every pack of `stems` with its index, or `None` if one cannot be copied.
fn read_sources(stems: &[PathBuf]) -> Result<Option<Vec<Source>>, StoreError> {
    let mut total = 0u64;
    for stem in stems {
        let pack = stem.with_extension("pack");
        let meta = std::fs::metadata(&pack)
            .map_err(|source| StoreError::io("reading a pack to roll up", &pack, source))?;
        total += meta.len();
    }
    if total > COPY_AT_MOST {
        return Ok(None);
    }
    let mut sources = Vec::with_capacity(stems.len());
    for stem in stems {
        let read = |ext: &str| {
            let path = stem.with_extension(ext);
            std::fs::read(&path)
                .map_err(|source| StoreError::io("reading a pack to roll up", &path, source))
        };
        let Some(mut listed) = listed_entries(&read("idx")?) else {
            return Ok(None);
        };
        listed.sort_unstable_by_key(|l| l.offset);
        sources.push(Source {
            bytes: read("pack")?,
            listed,
        });
    }
    Ok(Some(sources))
}

/// The entries a version-2 pack index lists (the format git and libgit2 write), in the
/// index's order, or `None` for anything else.
pub(super) fn listed_entries(index: &[u8]) -> Option<Vec<Listed>> {
    let count = index_header_count(index)?;
    // Ids, CRCs and 4-byte offsets, then the pack's and the index's checksums: a pack under
    // 2 GiB has no 8-byte offsets, and another length is another hash (SHA-256).
    if index.len() != INDEX_HEADER + count * 28 + 40 {
        return None;
    }
    let ids = &index[INDEX_HEADER..INDEX_HEADER + count * 20];
    let crcs = &index[INDEX_HEADER + count * 20..INDEX_HEADER + count * 24];
    let offsets = &index[INDEX_HEADER + count * 24..INDEX_HEADER + count * 28];
    let word = |table: &[u8], n: usize| {
        u32::from_be_bytes([
            table[n * 4],
            table[n * 4 + 1],
            table[n * 4 + 2],
            table[n * 4 + 3],
        ])
    };
    (0..count)
        .map(|n| {
            Some(Listed {
                id: Oid::from_bytes(&ids[n * 20..n * 20 + 20]).ok()?,
                crc: word(crcs, n),
                offset: u64::from(word(offsets, n)),
            })
        })
        .collect()
}

/// The entries to copy, the first of each object, or `None` if one cannot be copied.
fn pick(sources: &[Source]) -> Option<Vec<Picked<'_>>> {
    let mut seen = HashSet::new();
    let mut picked = Vec::new();
    for source in sources {
        let bytes = &source.bytes;
        if bytes.len() < 12 + 20 || bytes[..8] != *b"PACK\0\0\0\x02" {
            return None;
        }
        // Each entry runs to the next one, the last to the trailing checksum.
        let ends = source
            .listed
            .iter()
            .skip(1)
            .map(|l| l.offset)
            .chain([bytes.len() as u64 - 20]);
        for (listed, end) in source.listed.iter().zip(ends) {
            let start = usize::try_from(listed.offset).ok()?;
            let entry = bytes.get(start..usize::try_from(end).ok()?)?;
            if !seen.insert(listed.id) {
                continue;
            }
            // Types 1–4 are whole objects; 6 and 7 are deltas.
            let kind = (entry.first()? >> 4) & 0x07;
            if !(1..=4).contains(&kind) || crc32fast::hash(entry) != listed.crc {
                return None;
            }
            picked.push(Picked {
                id: listed.id,
                crc: listed.crc,
                bytes: entry,
            });
        }
    }
    Some(picked)
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_testkit::git_out;
    use git2::Repository;

    /// Three packs written by `write_pack` (one object in two of them) are copied into one:
    /// `git index-pack` indexes it byte for byte as it was indexed, `git verify-pack` finds
    /// every object once and whole, and every object reads back.
    #[test]
    fn packs_of_whole_objects_are_copied_into_one_that_git_indexes_alike() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init_bare(dir.path().join("r.git")).expect("repo");
        let blobs: Vec<Oid> = (0..9)
            .map(|n| repo.blob(format!("object {n}\n").repeat(n * 40).as_bytes()))
            .collect::<Result<_, _>>()
            .expect("blobs");
        let objects = repo.path().join("objects");
        let odb = repo.odb().expect("odb");
        let stems: Vec<PathBuf> = [&blobs[0..4], &blobs[3..6], &blobs[6..9]]
            .iter()
            .map(|ids| {
                let written = super::super::write_pack(&odb, ids, &objects)
                    .expect("write")
                    .expect("a pack");
                written.stem
            })
            .collect();

        let copied = copy_packs(&stems, &objects)
            .expect("copy")
            .expect("whole objects are copied");

        let mut sorted = blobs.clone();
        sorted.sort_unstable();
        assert_eq!(copied.ids, sorted, "every object once");
        let pack = copied.stem.with_extension("pack");
        let verify = git_out(dir.path(), &["verify-pack", "-v", &pack.to_string_lossy()]);
        let objects_listed = verify.lines().filter(|l| l.contains(" blob ")).count();
        assert_eq!(objects_listed, 9, "{verify}");
        assert!(verify.contains("non delta: 9 objects"), "{verify}");
        let reindexed = dir.path().join("again.idx");
        git_out(
            dir.path(),
            &[
                "index-pack",
                "-o",
                &reindexed.to_string_lossy(),
                &pack.to_string_lossy(),
            ],
        );
        assert_eq!(
            std::fs::read(&reindexed).expect("git's index"),
            std::fs::read(copied.stem.with_extension("idx")).expect("our index"),
            "git indexes the copied pack as it was indexed"
        );
        for stem in &stems {
            for ext in ["pack", "idx"] {
                std::fs::remove_file(stem.with_extension(ext)).expect("remove a source");
            }
        }
        let fresh = Repository::open_bare(repo.path()).expect("reopen");
        for (n, id) in blobs.iter().enumerate() {
            let blob = fresh.find_blob(*id).expect("reads back from the copy");
            assert_eq!(
                blob.content(),
                format!("object {n}\n").repeat(n * 40).as_bytes()
            );
        }
    }

    /// A pack holding deltas (libgit2's) or an entry whose bytes disagree with its index's
    /// CRC-32 is not copied, and nothing is written.
    #[test]
    fn deltas_and_damaged_entries_are_not_copied() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init_bare(dir.path().join("r.git")).expect("repo");
        let base = "kind: ConfigMap\ndata:\n".to_string() + &"  key: value\n".repeat(200);
        let ids: Vec<Oid> = (0..6)
            .map(|n| repo.blob(format!("{base}  n: \"{n}\"\n").as_bytes()))
            .collect::<Result<_, _>>()
            .expect("blobs");
        let objects = repo.path().join("objects");
        let pack_dir = objects.join("pack");
        let listing = || {
            let mut names: Vec<_> = std::fs::read_dir(&pack_dir)
                .expect("pack dir")
                .map(|e| e.expect("entry").file_name())
                .collect();
            names.sort();
            names
        };

        super::super::repack_with_deltas(&repo, &ids).expect("libgit2 pack");
        let deltified: Vec<PathBuf> = listing()
            .iter()
            .map(|n| pack_dir.join(n))
            .filter(|p| p.extension().is_some_and(|x| x == "idx"))
            .map(|p| p.with_extension(""))
            .collect();
        assert_eq!(deltified.len(), 1);
        let verify = git_out(
            dir.path(),
            &[
                "verify-pack",
                "-v",
                &deltified[0].with_extension("pack").to_string_lossy(),
            ],
        );
        assert!(
            verify.contains("chain length"),
            "libgit2 wrote deltas: {verify}"
        );
        let before = listing();
        assert!(
            copy_packs(&deltified, &objects)
                .expect("no failure")
                .is_none()
        );
        assert_eq!(listing(), before, "nothing written");

        let odb = repo.odb().expect("odb");
        let whole = super::super::write_pack(&odb, &ids[..2], &objects)
            .expect("write")
            .expect("a pack");
        let pack = whole.stem.with_extension("pack");
        let mut bytes = std::fs::read(&pack).expect("pack");
        // A byte inside the first entry's zlib stream (after the 12-byte header and its own).
        bytes[16] ^= 0x01;
        let mut permissions = std::fs::metadata(&pack).expect("meta").permissions();
        #[allow(clippy::permissions_set_readonly_false)]
        permissions.set_readonly(false);
        std::fs::set_permissions(&pack, permissions).expect("writable");
        std::fs::write(&pack, &bytes).expect("damage");
        let before = listing();
        assert!(
            copy_packs(&[whole.stem], &objects)
                .expect("no failure")
                .is_none()
        );
        assert_eq!(listing(), before, "nothing written");
    }
}
