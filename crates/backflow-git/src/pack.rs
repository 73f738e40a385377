//! Packs: objects written and copied as one file rather than one file per object, and the small
//! packs that leaves behind kept few.
//!
//! Creating a file is the dearest part of a small commit on a busy file system: a loose object
//! is a temporary file, a rename and often a fan-out folder, and a commit of a few writes is a
//! dozen of them in the cache and again in a `file://` remote. So a build's objects gather in
//! memory and reach the cache as one pack ([`crate::repo::LocalRepo::stage`]), and a push to or
//! a fetch from a `file://` remote copies what the other side lacks as one pack
//! ([`copy_commits`]). The small packs this makes are rolled up in tiers
//! ([`roll_up_small_packs`]), as `git repack --geometric` keeps a repository's packs few: a pack
//! is rewritten a handful of times at most, and a busy branch leaves a few dozen small packs
//! rather than one per commit. Packs of [`PACK_CHUNK`] objects or more (a snapshot's, a
//! fetch's, `git gc`'s) are left as they are.
//!
//! Packs are written by this crate itself ([`write::write_pack`]: no deltas, fast compression,
//! the index written alongside), and a commit's pack is written once: a push to a `file://`
//! remote that lacks exactly the objects of the cache's newest pack links that pack there
//! rather than writing it again. Small roll-ups copy the entries of the packs they merge as
//! they are ([`copy::copy_packs`]: no inflating, no deflating); from [`DELTAS_FROM`] objects on
//! they go through libgit2, whose deltas keep many versions of one large tree small.

mod copy;
mod write;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository};

pub(crate) use write::{WrittenPack, write_blob_pack, write_pack};

use crate::error::StoreError;

/// At least this many files written by one update go into packs of their own as they are
/// written, rather than gathering in memory until the update is done (a snapshot's blobs).
pub(crate) const PACK_FROM: usize = 512;

/// Objects per pack while writing or copying a large update; packs this large are never rolled
/// up.
pub(crate) const PACK_CHUNK: usize = 4096;

/// Fewer objects than this are copied one file each (a hard link where the source holds them
/// loose, as `git clone --local` does). A loose object written is a file created, linked into
/// place and its temporary removed; a pack written here is two files created and renamed, for
/// any number of objects (and linked, not written again, into a `file://` remote): from two
/// objects on, the pack is cheaper, and it leaves no removed file behind for the file system
/// to skip when it next allocates one.
const LOOSE_BELOW: usize = 2;

/// Packs of one tier allowed before they are rolled up into one: tier `t` holds packs of
/// `TIER_WIDTH^t` to `TIER_WIDTH^(t+1) - 1` objects.
pub(crate) const TIER_WIDTH: usize = 8;

/// A roll-up into a pack of fewer objects than this copies the entries of the packs it merges
/// ([`copy::copy_packs`]; [`write_pack`] when one of them holds deltas); a larger one by libgit2 with deltas, so what stays
/// for good (packs of hundreds of objects and more, where many versions of one large tree
/// meet) is small on disk. On its way to a pack that is never rolled up, an object goes
/// through libgit2's delta search at most twice, not at every tier.
const DELTAS_FROM: usize = 512;

/// Writes the objects `ids` of `repo` into it again as one pack, searching for deltas (libgit2
/// indexes it): the larger roll-ups' way, where many versions of one tree meet.
fn repack_with_deltas(repo: &Repository, ids: &[Oid]) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut builder = repo.packbuilder()?;
    for id in ids {
        builder.insert_object(*id, None)?;
    }
    let mut pack = git2::Buf::new();
    builder.write_buf(&mut pack)?;
    let odb = repo.odb()?;
    let mut writer = odb.packwriter()?;
    std::io::Write::write_all(&mut writer, &pack)
        .map_err(|source| StoreError::io("indexing a pack", repo.path(), source))?;
    writer.commit()?;
    Ok(())
}

/// The packs in the bare repository at `path` (tests).
#[cfg(test)]
pub(crate) fn pack_count(path: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(path.join("objects/pack")) else {
        return 0;
    };
    entries
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "pack"))
        })
        .count()
}

/// The loose objects in the bare repository at `path` (tests).
#[cfg(test)]
pub(crate) fn loose_count(path: &Path) -> usize {
    let Ok(fanout) = std::fs::read_dir(path.join("objects")) else {
        return 0;
    };
    fanout
        .flatten()
        .filter(|e| e.file_name().len() == 2)
        .map(|e| std::fs::read_dir(e.path()).map_or(0, Iterator::count))
        .sum()
}

/// Copies `tip` and everything it reaches that `dst` lacks into `dst`, oldest first, so `dst`
/// never holds a commit whose tree or parents are missing: as packs of at most [`PACK_CHUNK`]
/// objects, or one file each when they are fewer than [`LOOSE_BELOW`]. When `src`'s packs
/// `built` together hold exactly what `dst` lacks, they are linked into `dst` instead (the
/// packs a build wrote once, pushed to a `file://` remote: a commit's pack, or a snapshot's
/// blob packs and the pack of its trees). Returns the packs written or linked.
///
/// A tree already present in `dst` is assumed complete (the connectivity invariant every git
/// object store keeps), and each commit's tree is compared with its first parent's, which `dst`
/// holds by then: only what the commit changed is looked at, so a copy costs what it changed,
/// not the size of the folders it touched.
pub(crate) fn copy_commits(
    src: &Repository,
    dst: &Repository,
    tip: Oid,
    built: &[WrittenPack],
) -> Result<Vec<WrittenPack>, StoreError> {
    let dst_odb = dst.odb()?;
    // Listed once: every lookup below may miss, and a miss would list `dst`'s packs again.
    dst_odb.refresh()?;
    let mut missing = Missing {
        src,
        dst_odb: &dst_odb,
        listed: BTreeSet::new(),
        ids: Vec::new(),
    };
    for commit in missing.commits(tip)? {
        missing.tree(commit.tree, commit.parent_tree)?;
        missing.ids.push(commit.id);
    }
    let objects = [src.path(), dst.path()].map(|p| p.join("objects"));
    if missing.ids.is_empty() {
        return Ok(Vec::new());
    }
    if missing.ids.len() < LOOSE_BELOW {
        let src_odb = src.odb()?;
        for id in &missing.ids {
            copy_loose(&objects, &src_odb, &dst_odb, *id)?;
        }
        return Ok(Vec::new());
    }
    if WrittenPack::hold_exactly(built, &missing.ids) {
        let linked: Result<Vec<WrittenPack>, StoreError> =
            built.iter().map(|p| p.link_into(&objects[1])).collect();
        match linked {
            Ok(linked) => {
                dst_odb.refresh()?;
                return Ok(linked);
            }
            Err(e) => {
                // A pack linked before the failure only holds objects written again below.
                tracing::debug!(error = %e, "cannot link the build's packs; writing them again");
            }
        }
    }
    // Each pack holds only objects whose references are in it or in an earlier one, so `dst`
    // stays connected whenever the copy stops.
    let src_odb = src.odb()?;
    let mut packs = Vec::new();
    for chunk in missing.ids.chunks(PACK_CHUNK) {
        packs.extend(write_pack(&src_odb, chunk, &objects[1])?);
    }
    // The handle learns of the new packs (the caller reads or points a ref at what they hold).
    dst_odb.refresh()?;
    Ok(packs)
}

/// Copies one object into `dst`'s store as a loose file. A loose object of `src` is hard-linked:
/// loose object files are immutable and named by their content, so sharing the file is copying
/// it, without reading, inflating, hashing and deflating it again. Anything else (a packed or
/// staged object, another file system) is read and written.
fn copy_loose(
    [src_objects, dst_objects]: &[PathBuf; 2],
    src_odb: &git2::Odb<'_>,
    dst_odb: &git2::Odb<'_>,
    oid: Oid,
) -> Result<(), StoreError> {
    // One store staged in memory in front of itself has nothing to link.
    if src_objects != dst_objects {
        let hex = oid.to_string();
        let (dir, file) = hex.split_at(2);
        let to_dir = dst_objects.join(dir);
        // Only the fan-out folder is made: a store that went away is not recreated here.
        let linked = match std::fs::create_dir(&to_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => std::fs::hard_link(src_objects.join(dir).join(file), to_dir.join(file)),
        };
        match linked {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
            Err(_) => {}
        }
    }
    let obj = src_odb.read(oid)?;
    let written = dst_odb.write(obj.kind(), obj.data())?;
    if written == oid {
        Ok(())
    } else {
        Err(StoreError::WrittenAs {
            expected: oid,
            written,
        })
    }
}

/// A commit a copy brings, with what its tree is compared with.
struct CommitToCopy {
    id: Oid,
    tree: Oid,
    /// Its first parent's tree, which the destination holds by the time this commit is copied.
    parent_tree: Option<Oid>,
}

/// What a copy must bring: the objects `dst` lacks, each after everything it refers to.
struct Missing<'a> {
    src: &'a Repository,
    dst_odb: &'a git2::Odb<'a>,
    /// Blobs listed already (two paths of one history may hold the same content).
    listed: BTreeSet<Oid>,
    ids: Vec<Oid>,
}

impl Missing<'_> {
    /// Whether `dst` has `id` (its packs were listed when the copy started).
    fn in_dst(&self, id: Oid) -> bool {
        self.dst_odb
            .exists_ext(id, git2::OdbLookupFlags::NO_REFRESH)
    }

    /// The commits `tip` reaches that `dst` lacks, each after its parents.
    ///
    /// Depth first, each commit listed after its parents (post-order), so every commit's first
    /// parent is in `dst` before the commit is: parents first is what makes comparing with the
    /// parent's tree sound, and what keeps `dst` connected if the copy stops half way.
    fn commits(&self, tip: Oid) -> Result<Vec<CommitToCopy>, git2::Error> {
        let mut order = Vec::new();
        let mut seen = BTreeSet::new();
        let mut stack = vec![(tip, false)];
        while let Some((oid, parents_done)) = stack.pop() {
            if parents_done {
                let commit = self.src.find_commit(oid)?;
                let parent_tree = match commit.parent_ids().next() {
                    Some(parent) => Some(self.src.find_commit(parent)?.tree_id()),
                    None => None,
                };
                order.push(CommitToCopy {
                    id: oid,
                    tree: commit.tree_id(),
                    parent_tree,
                });
                continue;
            }
            if !seen.insert(oid) || self.in_dst(oid) {
                continue;
            }
            let commit = self.src.find_commit(oid)?;
            stack.push((oid, true));
            stack.extend(commit.parent_ids().map(|p| (p, false)));
        }
        Ok(order)
    }

    /// Lists `tree` and what it holds that `base` (a tree `dst` holds completely) does not.
    fn tree(&mut self, tree: Oid, base: Option<Oid>) -> Result<(), git2::Error> {
        if base == Some(tree) || self.in_dst(tree) || !self.listed.insert(tree) {
            return Ok(());
        }
        let t = self.src.find_tree(tree)?;
        let base = base.map(|b| self.src.find_tree(b)).transpose()?;
        for entry in &t {
            let old = base
                .as_ref()
                .and_then(|b| b.get_name_bytes(entry.name_bytes()))
                .map(|e| (e.id(), e.kind()));
            if old.is_some_and(|(id, _)| id == entry.id()) {
                // Unchanged since the base: `dst` has it.
                continue;
            }
            match entry.kind() {
                Some(ObjectType::Tree) => {
                    let old_tree = old
                        .filter(|(_, kind)| *kind == Some(ObjectType::Tree))
                        .map(|(id, _)| id);
                    self.tree(entry.id(), old_tree)?;
                }
                Some(ObjectType::Blob)
                    if !self.in_dst(entry.id()) && self.listed.insert(entry.id()) =>
                {
                    self.ids.push(entry.id());
                }
                // Blobs already there, and submodule commits (not ours to copy).
                _ => {}
            }
        }
        self.ids.push(tree);
        Ok(())
    }
}

/// When to look for small packs to roll up in one repository: a tier fills after
/// [`TIER_WIDTH`] packs, so looking after every few packs written is as good as after each, and
/// spares listing the packs and reading their indexes on every commit.
///
/// Packs are counted as they are written and looked at later, when nothing waits for the
/// branch worker ([`crate::BranchWorker::maintain`]): a roll-up is no write's latency.
#[derive(Debug, Default)]
pub(crate) struct RollUpPace {
    written: usize,
}

impl RollUpPace {
    /// Counts `packs` more written.
    pub(crate) fn wrote(&mut self, packs: usize) {
        self.written += packs;
    }

    /// Whether enough packs were written since the last look to look now (counting starts
    /// again when it says yes).
    pub(crate) fn due(&mut self) -> bool {
        if self.written < TIER_WIDTH / 2 {
            return false;
        }
        self.written = 0;
        true
    }
}

/// A pack of the repository, as its index's header describes it.
#[derive(Debug)]
struct PackFile {
    /// The pack's path without its extension (`…/objects/pack/pack-<hash>`).
    stem: PathBuf,
    /// How many objects its index lists.
    count: usize,
}

impl PackFile {
    /// The objects its index lists; `None` when the index cannot be read as version 2.
    fn ids(&self) -> Option<Vec<Oid>> {
        index_ids(&std::fs::read(self.stem.with_extension("idx")).ok()?)
    }
}

/// Rolls the small packs of `repo` up when one size tier holds [`TIER_WIDTH`] of them: they are
/// written again as one pack and removed. Returns whether packs were removed, in which case
/// handles opened before keep listing them and should be opened again (libgit2 skips a pack
/// that went away and looks again when it misses an object, so an old handle stays correct,
/// only slower).
///
/// Packs with a `.keep`, `.promisor`, `.mtimes` or `.bitmap` file and repositories with a
/// multi-pack index are left alone. Two processes rolling up at once write the same objects twice at worst; the next
/// roll-up merges them.
pub(crate) fn roll_up_small_packs(repo: &Repository) -> Result<bool, StoreError> {
    let dir = repo.path().join("objects").join("pack");
    if dir.join("multi-pack-index").exists() {
        return Ok(false);
    }
    let Some(tier) = full_tier(small_packs(&dir)) else {
        return Ok(false);
    };
    // Only the indexes of the packs rolled up are read whole.
    let Some(lists) = tier.iter().map(PackFile::ids).collect::<Option<Vec<_>>>() else {
        return Ok(false);
    };
    let mut ids: Vec<Oid> = lists.into_iter().flatten().collect();
    ids.sort_unstable();
    ids.dedup();
    let odb = repo.odb()?;
    // Packs written by others since this handle last looked are read too.
    odb.refresh()?;
    // A pack that already holds every object is the roll-up (the same objects written as one
    // pack would be named like it and then removed with the others).
    let whole = tier.iter().position(|p| p.count == ids.len());
    if whole.is_none() {
        if ids.len() < DELTAS_FROM {
            let objects = repo.path().join("objects");
            let stems: Vec<PathBuf> = tier.iter().map(|p| p.stem.clone()).collect();
            if copy::copy_packs(&stems, &objects)?.is_none() {
                write_pack(&odb, &ids, &objects)?;
            }
        } else {
            repack_with_deltas(repo, &ids)?;
        }
    }
    for (index, pack) in tier.iter().enumerate() {
        if Some(index) != whole {
            remove_pack(&pack.stem);
        }
    }
    Ok(true)
}

/// The packs under [`PACK_CHUNK`] objects in `dir` that may be rolled up, in name order. One
/// listing of the folder says which files are there, and only each index's header is read (a
/// stat per sibling file and every index read whole, every few commits, were a few percent of
/// a busy branch worker).
fn small_packs(dir: &Path) -> Vec<PackFile> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let names: BTreeSet<std::ffi::OsString> = entries.flatten().map(|e| e.file_name()).collect();
    let has = |stem: &Path, ext: &str| {
        stem.with_extension(ext)
            .file_name()
            .is_some_and(|name| names.contains(name))
    };
    names
        .iter()
        .map(|name| dir.join(name))
        .filter(|path| path.extension().is_some_and(|x| x == "idx"))
        .map(|idx| idx.with_extension(""))
        .filter(|stem| {
            // Kept, promised, cruft (objects with their own expiry) or bitmapped packs are
            // `git gc`'s to manage.
            let kept = ["keep", "promisor", "mtimes", "bitmap"]
                .iter()
                .any(|x| has(stem, x));
            !kept && has(stem, "pack")
        })
        .filter_map(|stem| {
            let count = index_count(&stem.with_extension("idx"))?;
            (count < PACK_CHUNK).then_some(PackFile { stem, count })
        })
        .collect()
}

/// How many objects a version-2 pack index lists, from its header alone (the last entry of its
/// fan-out table); `None` for anything else.
fn index_count(idx: &Path) -> Option<usize> {
    use std::io::Read;
    let mut header = [0u8; write::INDEX_HEADER];
    std::fs::File::open(idx)
        .ok()?
        .read_exact(&mut header)
        .ok()?;
    write::index_header_count(&header)
}

/// The lowest size tier holding [`TIER_WIDTH`] packs or more, if any.
fn full_tier(packs: Vec<PackFile>) -> Option<Vec<PackFile>> {
    let mut tiers: Vec<Vec<PackFile>> = Vec::new();
    for pack in packs {
        let tier = tier_of(pack.count);
        if tiers.len() <= tier {
            tiers.resize_with(tier + 1, Vec::new);
        }
        tiers[tier].push(pack);
    }
    tiers.into_iter().find(|t| t.len() >= TIER_WIDTH)
}

/// The size tier of a pack of `objects` objects.
fn tier_of(objects: usize) -> usize {
    let mut tier = 0;
    let mut bound = TIER_WIDTH;
    while objects >= bound {
        tier += 1;
        bound *= TIER_WIDTH;
    }
    tier
}

/// The object ids a version-2 pack index lists (the format git and libgit2 write), or `None`
/// for anything else.
fn index_ids(index: &[u8]) -> Option<Vec<Oid>> {
    Some(
        copy::listed_entries(index)?
            .into_iter()
            .map(|e| e.id)
            .collect(),
    )
}

/// Removes a pack and its index (and any reverse index), index last, as `git repack -d` does: a
/// reader that still finds the index finds the pack.
fn remove_pack(stem: &Path) {
    for ext in ["pack", "rev", "idx"] {
        let path = stem.with_extension(ext);
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a rolled-up pack; its objects are in the new one too");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_grow_by_their_width() {
        assert_eq!(tier_of(0), 0);
        assert_eq!(tier_of(7), 0);
        assert_eq!(tier_of(8), 1);
        assert_eq!(tier_of(63), 1);
        assert_eq!(tier_of(64), 2);
        assert_eq!(tier_of(PACK_CHUNK - 1), 3);
    }

    /// The header gives the count the whole index lists; a file that is not a version-2 index
    /// gives none.
    #[test]
    fn an_index_header_gives_its_object_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let objects = dir.path().join("objects");
        std::fs::create_dir_all(objects.join("pack")).expect("mkdir");
        let blobs: Vec<Vec<u8>> = (0..37)
            .map(|i| format!("blob {i}\n").into_bytes())
            .collect();
        let ids = write::hashed_blobs(&blobs);
        let written = write::write_blob_pack(&ids, &objects)
            .expect("written")
            .expect("a pack");
        let packs = small_packs(&objects.join("pack"));
        assert_eq!(packs.len(), 1);
        assert_eq!(packs[0].count, 37);
        assert_eq!(packs[0].ids().map(|i| i.len()), Some(37));
        assert!(
            written
                .ids
                .iter()
                .all(|id| ids.iter().any(|(i, _)| i == id))
        );
        let idx = packs[0].stem.with_extension("idx");
        std::fs::write(&idx, b"not an index").expect("write");
        assert_eq!(index_count(&idx), None);
        assert!(small_packs(&objects.join("pack")).is_empty());
    }

    #[test]
    fn the_lowest_full_tier_is_rolled_up() {
        let pack = |n: usize| PackFile {
            stem: PathBuf::from(format!("p{n}")),
            count: n,
        };
        let few: Vec<PackFile> = (0..TIER_WIDTH - 1).map(|_| pack(12)).collect();
        assert!(full_tier(few).is_none(), "a tier short of its width stays");
        let mut many: Vec<PackFile> = (0..TIER_WIDTH).map(|_| pack(12)).collect();
        many.extend((0..TIER_WIDTH).map(|_| pack(100)));
        many.push(pack(3));
        let tier = full_tier(many).expect("a full tier");
        assert_eq!(tier.len(), TIER_WIDTH);
        assert!(
            tier.iter().all(|p| p.count == 12),
            "the lowest full tier first"
        );
    }

    /// What `git verify-pack -v` says of the one pack in `repo`: how many objects it stores
    /// whole, and how many as deltas.
    fn whole_and_deltas(repo: &Path) -> (usize, usize) {
        let packs: Vec<PathBuf> = std::fs::read_dir(repo.join("objects/pack"))
            .expect("pack dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "idx"))
            .collect();
        assert_eq!(packs.len(), 1, "one pack after the roll-up: {packs:?}");
        let listed =
            backflow_testkit::git_out(repo, &["verify-pack", "-v", &packs[0].to_string_lossy()]);
        let count = |prefix: &str| {
            listed
                .lines()
                .filter_map(|l| l.strip_prefix(prefix))
                .filter_map(|rest| rest.split(':').nth(1))
                .filter_map(|n| n.trim().split(' ').next()?.parse::<usize>().ok())
                .sum::<usize>()
        };
        (count("non delta"), count("chain length"))
    }

    /// Eight packs of one tier holding `per_pack` versions each of a 2 KiB manifest that
    /// differs in one line, rolled up.
    fn rolled_up_versions(per_pack: usize) -> (tempfile::TempDir, usize) {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = Repository::init_bare(dir.path().join("r.git")).expect("init");
        let odb = repo.odb().expect("odb");
        let body = "    kind: ConfigMap # a line every version shares\n".repeat(40);
        let mut n = 0;
        for _ in 0..TIER_WIDTH {
            let ids: Vec<Oid> = (0..per_pack)
                .map(|_| {
                    n += 1;
                    odb.write(ObjectType::Blob, format!("version: {n}\n{body}").as_bytes())
                        .expect("blob")
                })
                .collect();
            write_pack(&odb, &ids, &repo.path().join("objects")).expect("pack");
        }
        // The loose copies go: only the packs hold the versions.
        for entry in std::fs::read_dir(repo.path().join("objects"))
            .expect("objects")
            .flatten()
        {
            if entry.file_name().len() == 2 {
                std::fs::remove_dir_all(entry.path()).expect("remove loose");
            }
        }
        assert!(
            roll_up_small_packs(&repo).expect("roll up"),
            "a full tier rolls up"
        );
        (dir, n)
    }

    /// Small roll-ups are written whole (cheap, and rolled up again soon); from
    /// [`DELTAS_FROM`] objects on, libgit2's deltas keep the pack small. Either way git finds
    /// every version in the one pack left.
    #[test]
    fn small_roll_ups_store_objects_whole_and_large_ones_as_deltas() {
        let (small, n) = rolled_up_versions(4);
        let repo = small.path().join("r.git");
        assert_eq!(
            whole_and_deltas(&repo),
            (n, 0),
            "32 objects: no delta search"
        );
        backflow_testkit::git_out(&repo, &["fsck", "--full", "--strict"]);

        let (large, n) = rolled_up_versions(DELTAS_FROM / TIER_WIDTH);
        let repo = large.path().join("r.git");
        let (whole, deltas) = whole_and_deltas(&repo);
        assert_eq!(whole + deltas, n);
        assert!(deltas > n / 2, "{deltas} of {n} versions stored as deltas");
        backflow_testkit::git_out(&repo, &["fsck", "--full", "--strict"]);
    }

    #[test]
    fn only_version_two_indexes_are_read() {
        assert!(index_ids(b"PACK").is_none());
        let mut index = write::INDEX_V2.to_vec();
        index.extend(std::iter::repeat_n(0u8, 255 * 4));
        index.extend(1u32.to_be_bytes());
        assert!(index_ids(&index).is_none(), "a truncated index is not read");
        index.extend([7u8; 20]);
        index.extend([0u8; 8 + 40]);
        let mut longer = index.clone();
        longer.extend([0u8; 12]);
        assert!(
            index_ids(&longer).is_none(),
            "another hash's index is not read"
        );
        assert_eq!(
            index_ids(&index),
            Some(vec![Oid::from_bytes(&[7u8; 20]).expect("oid")])
        );
    }
}
