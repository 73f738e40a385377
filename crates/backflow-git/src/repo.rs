//! The local bare cache of one remote: object storage, tree building and commits, with no
//! worktree and no index.
//!
//! Every remote gets its own bare repository under the data directory. Commits are built here
//! from a base tree plus path updates and then pushed; fetched foreign commits land here too.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use git2::{Binding, ObjectType, Oid, Repository, Signature, Time};

use crate::error::{RepoError, StoreError};
use crate::pack::{
    PACK_CHUNK, PACK_FROM, RollUpPace, WrittenPack, copy_commits, roll_up_small_packs,
    write_blob_pack,
};

mod tree_write;

/// The ref that holds the last fetched remote tip of `branch` in the cache.
#[must_use]
pub fn tracking_ref(branch: &str) -> String {
    format!("refs/remotes/origin/{branch}")
}

/// The ref a push is sent from. libgit2 pushes refs, not bare object ids, so the commit to
/// publish is named here first.
#[must_use]
pub fn outgoing_ref(branch: &str) -> String {
    format!("refs/backflow/outgoing/{branch}")
}

/// Author or committer identity written into commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Display name.
    pub name: String,
    /// E-mail address.
    pub email: String,
}

impl Identity {
    /// An identity from a name and an address.
    pub fn new(name: impl Into<String>, email: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            email: email.into(),
        }
    }
}

impl Default for Identity {
    fn default() -> Self {
        Self::new("backflow", "backflow@localhost")
    }
}

/// A local bare repository used as the object cache for one remote.
pub struct LocalRepo {
    /// The handle every read and write goes through: while [`LocalRepo::stage`]d, one with an
    /// in-memory object store in front of the cache's.
    repo: Repository,
    path: PathBuf,
    /// Where a build's objects gather ([`LocalRepo::stage`]): kept between builds, so its
    /// handle's parsed trees and the cache's pack indexes are read once.
    staging: Option<Staging>,
    /// Whether `repo` is the staging handle right now.
    staged: bool,
    roll_up: RollUpPace,
    /// The packs the last build wrote, while they are in the cache as written: a push to a
    /// `file://` remote that lacks exactly their objects links them there. (Blob packs are
    /// written through `&self`, by [`LocalRepo::apply_updates`].)
    built_packs: RefCell<Vec<WrittenPack>>,
}

self_cell::self_cell!(
    /// An object database whose new objects stay in memory: a mempack in front of the cache's
    /// loose and packed stores (as alternates, which reads see and writes skip).
    struct StagingOdb {
        owner: git2::Odb<'static>,
        #[not_covariant]
        dependent: Mempack,
    }
);

type Mempack<'a> = git2::Mempack<'a>;

/// A handle of the cache whose writes go to a [`StagingOdb`].
struct Staging {
    odb: StagingOdb,
    repo: Repository,
}

// SAFETY: a `Staging` is used by one thread at a time (it lives in a `LocalRepo`, which is
// `Send` and not `Sync`). Its parts are a `Repository` and an `Odb`, which git2 marks `Send`
// (libgit2's object database is thread-safe), and the `Mempack` handle, a pointer to a backend
// that the `Odb` owns and frees: it is not `Send` only because it wraps a raw pointer.
unsafe impl Send for Staging {}

impl Staging {
    fn open(path: &Path) -> Result<Self, git2::Error> {
        let odb = git2::Odb::new()?;
        let objects = path.join("objects");
        odb.add_disk_alternate(&objects.to_string_lossy())?;
        let odb = StagingOdb::try_new(odb, |odb| odb.add_new_mempack_backend(1000))?;
        let repo = Repository::open_bare(path)?;
        repo.set_odb(odb.borrow_owner())?;
        Ok(Self { odb, repo })
    }

    /// Drops every staged object.
    fn reset(&self) -> Result<(), git2::Error> {
        self.odb.with_dependent(|_, mempack| mempack.reset())
    }

    /// Writes an object into the mempack itself, not through `git_odb_write`: that first asks
    /// every backend whether it holds the object, and on a miss (any new object) lists the
    /// cache's pack folder again, which was a tenth of a lone write's branch worker.
    fn put(&self, kind: ObjectType, data: &[u8]) -> Result<Oid, git2::Error> {
        let id = Oid::hash_object(kind, data)?;
        self.odb.with_dependent(|_, mempack| {
            let backend = mempack.raw();
            // SAFETY: `backend` is the mempack that `odb` owns and frees, alive as long as
            // `self`; it is used by one thread at a time (see `Send` above). The mempack's
            // `write` copies `data` (of `data.len()` bytes) under `id`, which names exactly those
            // bytes as an object of `kind`, as `git_odb_write` would after hashing them.
            let code = unsafe {
                let write = (*backend)
                    .write
                    .ok_or_else(|| git2::Error::from_str("the staging area cannot write"))?;
                write(
                    backend,
                    id.raw(),
                    data.as_ptr().cast(),
                    data.len(),
                    kind.raw(),
                )
            };
            if code < 0 {
                return Err(git2::Error::last_error(code));
            }
            Ok(id)
        })
    }
}

impl std::fmt::Debug for LocalRepo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRepo")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Process-wide libgit2 settings for a process that commits hundreds of times a second:
///
/// - parsed trees of up to 1 MiB stay in libgit2's object cache (its default stops at 4 KiB): a
///   resource folder with a hundred files has a larger tree, which every commit reads several
///   times (index, planning, rebuilding the path);
/// - the cache's total is bounded to [`OBJECT_CACHE_BYTES`] (or what [`set_object_cache_limit`]
///   asked for): libgit2's own bound, 256 MiB, fills by a few KiB per commit (every commit's trees
///   are new objects), which on a server committing all day looks like a leak of 256 MiB;
/// - objects read back are not re-hashed: every object this crate stores it wrote itself (the
///   store hashes what it writes) or copied with its id checked, so re-hashing each read only
///   spends SHA-1 (with collision detection) time on every commit.
fn tune_libgit2() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: the option is process-wide state that libgit2 reads without a lock; it is set
        // once, before this crate opens any repository, and only ever to this value.
        let set = unsafe { git2::opts::set_cache_object_limit(ObjectType::Tree, 1 << 20) };
        if let Err(e) = set {
            tracing::debug!(error = %e, "libgit2 kept its default tree cache limit");
        }
        let bytes = OBJECT_CACHE_LIMIT.load(Ordering::Relaxed);
        // SAFETY: as above: set once, before this crate opens any repository.
        let set =
            unsafe { git2::opts::set_cache_max_size(isize::try_from(bytes).unwrap_or(isize::MAX)) };
        if let Err(e) = set {
            tracing::warn!(error = %e, "libgit2 kept its default object cache bound (256 MiB)");
        }
        git2::opts::strict_hash_verification(false);
    });
    TUNED.store(true, Ordering::Relaxed);
}

/// One entry of a folder's tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FolderEntry {
    /// The blob or tree it names.
    pub id: Oid,
    /// Whether it is a file (not a folder or a submodule).
    pub file: bool,
}

/// A folder's entries by name.
pub type FolderEntries = BTreeMap<String, FolderEntry>;

/// The default bound of libgit2's process-wide cache of parsed objects: the trees a few busy
/// branches read on every commit fit in it many times over.
pub const OBJECT_CACHE_BYTES: usize = 32 << 20;

static OBJECT_CACHE_LIMIT: AtomicUsize = AtomicUsize::new(OBJECT_CACHE_BYTES);
static TUNED: AtomicBool = AtomicBool::new(false);

/// Bounds libgit2's process-wide object cache to `bytes` instead of [`OBJECT_CACHE_BYTES`].
/// It takes effect only before the process opens its first [`LocalRepo`] (libgit2's settings are
/// not safe to change while repositories are in use): the answer says whether it will.
pub fn set_object_cache_limit(bytes: usize) -> bool {
    OBJECT_CACHE_LIMIT.store(bytes, Ordering::Relaxed);
    !TUNED.load(Ordering::Relaxed)
}

impl LocalRepo {
    /// Opens the bare repository at `path`, creating it when missing.
    pub fn open_or_init(path: &Path) -> Result<Self, RepoError> {
        tune_libgit2();
        let repo = match Repository::open_bare(path) {
            Ok(repo) => repo,
            Err(_) => Repository::init_bare(path).map_err(|source| RepoError {
                op: "creating the bare cache".into(),
                path: path.to_path_buf(),
                source: source.into(),
            })?,
        };
        Ok(Self {
            repo,
            path: path.to_path_buf(),
            staging: None,
            staged: false,
            roll_up: RollUpPace::default(),
            built_packs: RefCell::new(Vec::new()),
        })
    }

    /// Creates a bare repository to serve as a remote (when missing) whose HEAD names `branch`,
    /// so a clone checks that branch out. An existing repository is left as it is.
    pub fn init_remote(path: &Path, branch: &str) -> Result<Self, RepoError> {
        let existed = Repository::open_bare(path).is_ok();
        let repo = Self::open_or_init(path)?;
        if !existed {
            repo.repo
                .set_head(&format!("refs/heads/{branch}"))
                .map_err(|source| RepoError {
                    op: format!("pointing HEAD at branch {branch}"),
                    path: path.to_path_buf(),
                    source: source.into(),
                })?;
        }
        Ok(repo)
    }

    /// Opens (or creates) the cache for `url` under `data_dir`: `data_dir/git/<name>.git`, where the
    /// name is derived from the URL without its credentials, so two workers of one remote share it.
    pub fn open_cache(data_dir: &Path, url: &str) -> Result<Self, RepoError> {
        Self::open_or_init(&data_dir.join("git").join(cache_dir_name(url)))
    }

    /// The cache's directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The underlying libgit2 repository, for transports.
    #[must_use]
    pub fn git2(&self) -> &Repository {
        &self.repo
    }

    fn err<E: Into<StoreError>>(&self, op: impl Into<String>) -> impl FnOnce(E) -> RepoError + '_ {
        let op = op.into();
        move |source| RepoError {
            op,
            path: self.path.clone(),
            source: source.into(),
        }
    }

    /// From now on, objects written gather in memory (libgit2's mempack, in front of the cache's
    /// stores) instead of one file each, until [`LocalRepo::unstage`]. Reads see both.
    pub fn stage(&mut self) -> Result<(), RepoError> {
        if self.staged {
            return Ok(());
        }
        // A new build: the packs of the last one are the last push's business no more.
        self.built_packs.borrow_mut().clear();
        if self.staging.is_none() {
            self.staging =
                Some(Staging::open(&self.path).map_err(self.err("opening a staging area"))?);
        }
        if let Some(staging) = &mut self.staging {
            std::mem::swap(&mut self.repo, &mut staging.repo);
            self.staged = true;
        }
        Ok(())
    }

    /// Ends [`LocalRepo::stage`]: what `keep` (a commit) reaches that the cache lacks is written
    /// into it (one pack, or a lone loose object), and everything else staged is dropped.
    /// Without `keep`, or when writing fails, nothing staged stays. The small packs this leaves
    /// are rolled up later, by [`LocalRepo::roll_up_packs`].
    pub fn unstage(&mut self, keep: Option<Oid>) -> Result<(), RepoError> {
        if !std::mem::take(&mut self.staged) {
            return Ok(());
        }
        let Some(mut staging) = self.staging.take() else {
            return Ok(());
        };
        std::mem::swap(&mut self.repo, &mut staging.repo);
        let copied = match keep {
            Some(keep) => self.keep_staged(&staging.repo, keep),
            None => Ok(()),
        };
        // Whatever happened, the staging area is emptied for the next build.
        staging
            .reset()
            .map_err(self.err("emptying the staging area"))?;
        self.staging = Some(staging);
        copied
    }

    /// Copies what `keep` reaches from `staged` into the cache.
    fn keep_staged(&mut self, staged: &Repository, keep: Oid) -> Result<(), RepoError> {
        // `copy_commits` lists the cache's packs first, those written while staged (a
        // snapshot's blobs) too, so they are not copied again.
        let copied = copy_commits(staged, &self.repo, keep, &[])
            .map_err(self.err(format!("writing the objects of {keep}")));
        let packs = match copied {
            Ok(packs) => packs,
            Err(e) => {
                self.built_packs.borrow_mut().clear();
                return Err(e);
            }
        };
        self.roll_up.wrote(packs.len());
        self.built_packs.borrow_mut().extend(packs);
        Ok(())
    }

    /// Rolls the cache's small packs up when enough were written since the last look and a
    /// size tier filled; nothing while a build is staged. Returns whether packs were rolled up.
    /// A failure leaves more packs than needed, nothing else: it is logged.
    ///
    /// Housekeeping no write waits for: a branch worker has its roll-up thread do it
    /// ([`LocalRepo::roll_up_due`], then [`LocalRepo::packs_rolled_up`]); this does it here.
    pub fn roll_up_packs(&mut self) -> Result<bool, RepoError> {
        if self.roll_up_due().is_none() {
            return Ok(false);
        }
        match roll_up_small_packs(&self.repo) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(e) => {
                tracing::warn!(cache = %self.path.display(), error = %e, "cannot roll the cache's small packs up");
                return Ok(false);
            }
        }
        self.packs_rolled_up()?;
        Ok(true)
    }

    /// The cache's path, when enough packs were written since the last look that a roll-up
    /// may find a full tier (counting starts again); `None` while a build is staged.
    pub(crate) fn roll_up_due(&mut self) -> Option<&Path> {
        if self.staged || !self.roll_up.due() {
            return None;
        }
        Some(&self.path)
    }

    /// Packs of the cache were rolled up (here or by another handle): the newest pack may be
    /// one of them, and the handles opened before list packs that are gone, so they are
    /// opened again. Call it while no build is staged.
    pub(crate) fn packs_rolled_up(&mut self) -> Result<(), RepoError> {
        self.built_packs.borrow_mut().clear();
        self.staging = None;
        self.repo = Repository::open_bare(&self.path)
            .map_err(self.err("opening the cache again after rolling packs up"))?;
        Ok(())
    }

    /// Whether a build is staged ([`LocalRepo::stage`]) right now.
    pub(crate) fn is_staged(&self) -> bool {
        self.staged
    }

    /// The packs the last build wrote into the cache (a snapshot's blob packs, then the pack
    /// of what its commit reaches), while they are still there as written.
    pub(crate) fn built_packs(&self) -> std::cell::Ref<'_, Vec<WrittenPack>> {
        self.built_packs.borrow()
    }

    /// The cache's own handle, also while staged (a pack cannot be written through the staging
    /// handle).
    fn cache_handle(&self) -> &Repository {
        match &self.staging {
            Some(staging) if self.staged => &staging.repo,
            _ => &self.repo,
        }
    }

    /// Whether the object is present in the cache.
    #[must_use]
    pub fn has_object(&self, oid: Oid) -> bool {
        self.repo.odb().is_ok_and(|odb| odb.exists(oid))
    }

    /// The first parent of `commit`, if it has one.
    pub fn parent(&self, commit: Oid) -> Result<Option<Oid>, RepoError> {
        let c = self
            .repo
            .find_commit(commit)
            .map_err(self.err(format!("reading commit {commit}")))?;
        Ok(c.parent_ids().next())
    }

    /// The files under `dir` (`""`: the whole tree) that `commit` removed: present in its first
    /// parent, absent from it, with the blob ids they had. A diff of the two trees, so it costs
    /// what the commit changed, not the size of the folder.
    pub fn removed_files(&self, commit: Oid, dir: &str) -> Result<Vec<(String, Oid)>, RepoError> {
        let what = || format!("diffing commit {commit}");
        let c = self.repo.find_commit(commit).map_err(self.err(what()))?;
        let Some(parent) = c.parents().next() else {
            return Ok(Vec::new());
        };
        let old = parent.tree().map_err(self.err(what()))?;
        let new = c.tree().map_err(self.err(what()))?;
        let mut opts = git2::DiffOptions::new();
        if !dir.is_empty() {
            opts.pathspec(dir);
        }
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&old), Some(&new), Some(&mut opts))
            .map_err(self.err(what()))?;
        Ok(diff
            .deltas()
            .filter(|d| d.status() == git2::Delta::Deleted)
            .filter_map(|d| {
                let file = d.old_file();
                Some((file.path()?.to_str()?.to_string(), file.id()))
            })
            .collect())
    }

    /// The tree of a commit.
    pub fn commit_tree(&self, commit: Oid) -> Result<Oid, RepoError> {
        let c = self
            .repo
            .find_commit(commit)
            .map_err(self.err(format!("reading commit {commit}")))?;
        Ok(c.tree_id())
    }

    /// The id of the empty tree, written if needed (the base of a branch that does not exist yet).
    pub fn empty_tree(&self) -> Result<Oid, RepoError> {
        self.put_object(ObjectType::Tree, &[])
            .map_err(self.err("writing the empty tree"))
    }

    /// Reads the file at `path` in `tree`; `None` when there is no file there.
    pub fn read_file(&self, tree: Oid, path: &str) -> Result<Option<Vec<u8>>, RepoError> {
        let tree = self
            .repo
            .find_tree(tree)
            .map_err(self.err(format!("reading tree {tree}")))?;
        let entry = match tree.get_path(Path::new(path)) {
            Ok(entry) => entry,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(self.err(format!("looking up {path}"))(e)),
        };
        if entry.kind() != Some(ObjectType::Blob) {
            return Ok(None);
        }
        let blob = self
            .repo
            .find_blob(entry.id())
            .map_err(self.err(format!("reading blob of {path}")))?;
        Ok(Some(blob.content().to_vec()))
    }

    /// The bytes of the blob `id`.
    pub fn read_blob(&self, id: Oid) -> Result<Vec<u8>, RepoError> {
        let blob = self
            .repo
            .find_blob(id)
            .map_err(self.err(format!("reading blob {id}")))?;
        Ok(blob.content().to_vec())
    }

    /// The blob id of the file at `path` in `tree`, without reading it (`None`: no such file).
    pub fn file_id(&self, tree: Oid, path: &str) -> Result<Option<Oid>, RepoError> {
        let tree = self
            .repo
            .find_tree(tree)
            .map_err(self.err(format!("reading tree {tree}")))?;
        match tree.get_path(Path::new(path)) {
            Ok(entry) if entry.kind() == Some(ObjectType::Blob) => Ok(Some(entry.id())),
            Ok(_) => Ok(None),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(self.err(format!("looking up {path}"))(e)),
        }
    }

    /// The id of the tree of the folder `dir` in `tree` (`""`: `tree` itself); `None` when
    /// there is no such folder.
    pub fn folder_tree(&self, tree: Oid, dir: &str) -> Result<Option<Oid>, RepoError> {
        let dir = dir.trim_matches('/');
        if dir.is_empty() {
            return Ok(Some(tree));
        }
        let root = self
            .repo
            .find_tree(tree)
            .map_err(self.err(format!("reading tree {tree}")))?;
        match root.get_path(Path::new(dir)) {
            Ok(e) if e.kind() == Some(ObjectType::Tree) => Ok(Some(e.id())),
            Ok(_) => Ok(None),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(self.err(format!("looking up {dir}"))(e)),
        }
    }

    /// The entries of the folder `dir` of `tree` (`""`: `tree` itself) by name, each with its id
    /// and whether it is a file; `None` when there is no such folder. Names that are not UTF-8
    /// are left out (no path backflow reads has one).
    pub fn folder_entries(&self, tree: Oid, dir: &str) -> Result<Option<FolderEntries>, RepoError> {
        let Some(id) = self.folder_tree(tree, dir)? else {
            return Ok(None);
        };
        let folder = self
            .repo
            .find_tree(id)
            .map_err(self.err(format!("reading tree {id}")))?;
        Ok(Some(
            folder
                .iter()
                .filter_map(|e| {
                    let name = e.name().ok()?.to_string();
                    let entry = FolderEntry {
                        id: e.id(),
                        file: e.kind() == Some(ObjectType::Blob),
                    };
                    Some((name, entry))
                })
                .collect(),
        ))
    }

    /// The paths of the files under `dir` that differ between the folder tree `since` and the
    /// folder `dir` of `tree`, sorted; `None` when `since` is not in the cache. A diff of the two
    /// trees: it compares entry ids and reads no file.
    pub fn changed_files(
        &self,
        since: Oid,
        tree: Oid,
        dir: &str,
    ) -> Result<Option<Vec<String>>, RepoError> {
        let Ok(old) = self.repo.find_tree(since) else {
            return Ok(None);
        };
        let what = || format!("diffing {dir} against tree {since}");
        let new = match self.folder_tree(tree, dir)? {
            Some(id) => Some(self.repo.find_tree(id).map_err(self.err(what()))?),
            None => None,
        };
        let diff = self
            .repo
            .diff_tree_to_tree(Some(&old), new.as_ref(), None)
            .map_err(self.err(what()))?;
        let prefix = backflow_branch::dir_prefix(dir);
        let mut paths = Vec::new();
        for delta in diff.deltas() {
            for file in [delta.old_file(), delta.new_file()] {
                if let Some(path) = file.path().and_then(Path::to_str) {
                    paths.push(format!("{prefix}{path}"));
                }
            }
        }
        paths.sort_unstable();
        paths.dedup();
        Ok(Some(paths))
    }

    /// Every file path under `dir` (recursively; `""` for the whole tree), sorted.
    pub fn list_files(&self, tree: Oid, dir: &str) -> Result<Vec<String>, RepoError> {
        Ok(self
            .list_file_ids(tree, dir)?
            .into_iter()
            .map(|(path, _)| path)
            .collect())
    }

    /// Every file under `dir` (recursively; `""` for the whole tree; a path naming a file: that
    /// file) with its blob id, sorted by path: one walk, where looking each file up by path would read every tree on its way
    /// again.
    pub fn list_file_ids(&self, tree: Oid, dir: &str) -> Result<Vec<(String, Oid)>, RepoError> {
        let root = self
            .repo
            .find_tree(tree)
            .map_err(self.err(format!("reading tree {tree}")))?;
        let dir = dir.trim_matches('/');
        let start = if dir.is_empty() {
            root
        } else {
            match root.get_path(Path::new(dir)) {
                Ok(e) if e.kind() == Some(ObjectType::Tree) => self
                    .repo
                    .find_tree(e.id())
                    .map_err(self.err(format!("reading tree {dir}")))?,
                // A file is listed as itself: one file is read the way a folder is.
                Ok(e) if e.kind() == Some(ObjectType::Blob) => {
                    return Ok(vec![(dir.to_string(), e.id())]);
                }
                Ok(_) => return Ok(Vec::new()),
                Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(Vec::new()),
                Err(e) => return Err(self.err(format!("looking up {dir}"))(e)),
            }
        };
        let mut out = Vec::new();
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        start
            .walk(git2::TreeWalkMode::PreOrder, |parent, entry| {
                if entry.kind() == Some(ObjectType::Blob)
                    && let Ok(name) = entry.name()
                {
                    out.push((format!("{prefix}{parent}{name}"), entry.id()));
                }
                git2::TreeWalkResult::Ok
            })
            .map_err(self.err(format!("listing {dir}")))?;
        out.sort();
        Ok(out)
    }

    /// Writes a blob and returns its id.
    pub fn write_blob(&self, content: &[u8]) -> Result<Oid, RepoError> {
        self.put_object(ObjectType::Blob, content)
            .map_err(self.err("writing a blob"))
    }

    /// Writes an object: while staged into the staging area's memory directly, otherwise
    /// through the object database (a loose object).
    fn put_object(&self, kind: ObjectType, data: &[u8]) -> Result<Oid, git2::Error> {
        match &self.staging {
            Some(staging) if self.staged => staging.put(kind, data),
            _ => self.repo.odb()?.write(kind, data),
        }
    }

    /// Writes many blobs as packs of [`PACK_CHUNK`] objects rather than one file each, and
    /// returns their ids in order. Each chunk is written straight from the contents (named by
    /// hashing them, without asking the object database whether it holds them already: the
    /// roll-ups and `git gc` drop a second copy) and the handles are told about its pack before
    /// the next chunk.
    fn write_blobs_packed<'a>(
        &self,
        contents: impl Iterator<Item = &'a Vec<u8>>,
    ) -> Result<Vec<Oid>, RepoError> {
        let mut ids = Vec::new();
        let mut chunk: Vec<(Oid, &[u8])> = Vec::with_capacity(PACK_CHUNK);
        for content in contents {
            let id = Oid::hash_object(git2::ObjectType::Blob, content)
                .map_err(self.err("hashing a blob"))?;
            ids.push(id);
            chunk.push((id, content));
            if chunk.len() == PACK_CHUNK {
                self.write_blob_pack(&chunk)?;
                chunk.clear();
            }
        }
        self.write_blob_pack(&chunk)?;
        Ok(ids)
    }

    /// Writes `blobs` as one pack into the cache and tells the handles about it.
    fn write_blob_pack(&self, blobs: &[(Oid, &[u8])]) -> Result<(), RepoError> {
        let Some(written) = write_blob_pack(blobs, &self.path.join("objects"))
            .map_err(self.err("writing a pack"))?
        else {
            return Ok(());
        };
        self.built_packs.borrow_mut().push(written);
        // The handles list packs once: they are told about the new one.
        self.cache_handle()
            .odb()
            .and_then(|odb| odb.refresh())
            .map_err(self.err("reading the new pack"))?;
        if self.staged {
            self.repo
                .odb()
                .and_then(|odb| odb.refresh())
                .map_err(self.err("reading the new pack"))?;
        }
        Ok(())
    }

    /// Applies path updates (`Some(content)` writes a file, `None` removes it) to `base` and
    /// returns the new tree. Intermediate trees are created and emptied ones dropped.
    ///
    /// Paths are applied in sorted order, one final state per path, so the result never depends on
    /// the order updates were produced in.
    pub fn apply_updates(
        &self,
        base: Oid,
        updates: &BTreeMap<String, Option<Vec<u8>>>,
    ) -> Result<Oid, RepoError> {
        if updates.is_empty() {
            return Ok(base);
        }
        let written = updates.values().filter(|c| c.is_some()).count();
        let mut packed = if written >= PACK_FROM {
            self.write_blobs_packed(updates.values().flatten())?
                .into_iter()
        } else {
            Vec::new().into_iter()
        };
        let mut blobs = BTreeMap::new();
        for (path, content) in updates {
            let blob = match content {
                Some(bytes) => Some(match packed.next() {
                    Some(blob) => blob,
                    None => self.write_blob(bytes)?,
                }),
                None => None,
            };
            blobs.insert(path.clone(), blob);
        }
        let put = |kind: ObjectType, data: &[u8]| self.put_object(kind, data);
        tree_write::write_updated(&self.repo, &put, base, &blobs)
            .map_err(self.err("building the updated tree"))
    }

    /// Writes a commit of `tree` with an optional parent and returns its id. No ref is moved.
    pub fn write_commit(
        &self,
        tree: Oid,
        parent: Option<Oid>,
        author: &Identity,
        committer: &Identity,
        at: SystemTime,
        message: &str,
    ) -> Result<Oid, RepoError> {
        let secs = at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let time = Time::new(secs, 0);
        let author = Signature::new(&author.name, &author.email, &time)
            .map_err(self.err("building the author"))?;
        let committer = Signature::new(&committer.name, &committer.email, &time)
            .map_err(self.err("building the committer"))?;
        let tree = self
            .repo
            .find_tree(tree)
            .map_err(self.err(format!("reading tree {tree}")))?;
        let parent_commit = match parent {
            Some(p) => Some(
                self.repo
                    .find_commit(p)
                    .map_err(self.err(format!("reading commit {p}")))?,
            ),
            None => None,
        };
        let parents: Vec<&git2::Commit<'_>> = parent_commit.iter().collect();
        let commit = self
            .repo
            .commit_create_buffer(&author, &committer, message, &tree, &parents)
            .map_err(self.err("writing a commit"))?;
        self.put_object(ObjectType::Commit, &commit)
            .map_err(self.err("writing a commit"))
    }

    /// Points `name` at `oid`, creating or moving it (local bookkeeping refs only).
    pub fn set_ref(&self, name: &str, oid: Oid) -> Result<(), RepoError> {
        self.repo
            .reference(name, oid, true, "backflow")
            .map_err(self.err(format!("setting {name}")))?;
        Ok(())
    }

    /// Removes a local ref if it exists.
    pub fn remove_ref(&self, name: &str) -> Result<(), RepoError> {
        match self.repo.find_reference(name) {
            Ok(mut r) => r.delete().map_err(self.err(format!("removing {name}"))),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(()),
            Err(e) => Err(self.err(format!("reading {name}"))(e)),
        }
    }

    /// Reads a local ref; `None` when it does not exist.
    pub fn read_ref(&self, name: &str) -> Result<Option<Oid>, RepoError> {
        match self.repo.refname_to_id(name) {
            Ok(oid) => Ok(Some(oid)),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(self.err(format!("reading {name}"))(e)),
        }
    }
}

/// A directory name for the cache of `url`: readable, credential-free, and unique per URL.
fn cache_dir_name(url: &str) -> String {
    let clean = strip_credentials(url);
    let readable: String = clean
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let readable: String = readable
        .trim_matches('_')
        .chars()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    // FNV-1a: stable across runs and platforms, unlike the std hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in clean.as_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{readable}-{hash:016x}.git")
}

/// `url` with any `user:password@` part removed, for logs, metrics and cache names.
#[must_use]
pub fn strip_credentials(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if let Some((_, host)) = authority.rsplit_once('@') {
            return format!("{scheme}://{host}{path}");
        }
    }
    url.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_testkit::git_out;

    use crate::pack::pack_count;

    #[test]
    fn credentials_are_stripped() {
        assert_eq!(
            strip_credentials("https://u:secret@example.com/r.git"),
            "https://example.com/r.git"
        );
        assert_eq!(
            strip_credentials("https://example.com/r.git"),
            "https://example.com/r.git"
        );
        assert_eq!(
            strip_credentials("git@example.com:r.git"),
            "git@example.com:r.git"
        );
        assert!(!cache_dir_name("https://u:secret@example.com/r.git").contains("secret"));
        assert_eq!(
            cache_dir_name("https://u:p@example.com/r.git"),
            cache_dir_name("https://example.com/r.git")
        );
        assert_ne!(cache_dir_name("file:///a/b"), cache_dir_name("file:///a/c"));
    }

    #[test]
    fn a_large_update_is_written_as_packs_that_git_reads() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.git");
        let repo = LocalRepo::open_or_init(&path).expect("init");
        let empty = repo.empty_tree().expect("empty");
        let n = PACK_CHUNK + 100;
        let up: BTreeMap<String, Option<Vec<u8>>> = (0..n)
            .map(|i| {
                (
                    format!("live/f{i:05}.yaml"),
                    Some(format!("n: {i}\n").into_bytes()),
                )
            })
            .collect();
        let tree = repo.apply_updates(empty, &up).expect("apply");
        assert_eq!(
            repo.read_file(tree, "live/f04150.yaml").expect("read"),
            Some(b"n: 4150\n".to_vec())
        );
        // Two packs (a full chunk and the rest), not one file per blob.
        assert_eq!(pack_count(&path), 2);
        let loose = std::fs::read_dir(path.join("objects"))
            .expect("objects")
            .filter(|e| e.as_ref().is_ok_and(|e| e.file_name().len() == 2))
            .count();
        assert!(
            loose < 10,
            "{loose} fan-out folders: blobs were written loose"
        );
        // The real git reads the tree and finds the store whole.
        let sig = Signature::now("t", "t@example.invalid").expect("sig");
        let commit = repo
            .git2()
            .commit(
                None,
                &sig,
                &sig,
                "m",
                &repo.git2().find_tree(tree).expect("tree"),
                &[],
            )
            .expect("commit");
        let shown = git_out(
            &path,
            &["cat-file", "-p", &format!("{commit}:live/f00007.yaml")],
        );
        assert_eq!(shown, "n: 7\n");
        git_out(&path, &["fsck", "--full", &commit.to_string()]);
    }

    /// Builds are staged in memory: what a kept commit reaches lands in the cache (one file for a
    /// lone object, one pack for more, small packs rolled up), anything else is dropped,
    /// and the real git finds the cache whole.
    #[test]
    fn staged_objects_reach_the_cache_only_when_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("c.git");
        let mut repo = LocalRepo::open_or_init(&path).expect("init");
        let empty = repo.empty_tree().expect("empty");
        let who = Identity::default();
        let files = |round: usize, n: usize| -> BTreeMap<String, Option<Vec<u8>>> {
            (0..n)
                .map(|i| {
                    (
                        format!("live/ns{i}/f.yaml"),
                        Some(format!("{round}.{i}\n").into_bytes()),
                    )
                })
                .collect()
        };
        let commit = |repo: &mut LocalRepo, base: Oid, parent: Option<Oid>, up| {
            let tree = repo.apply_updates(base, &up).expect("apply");
            let c = repo
                .write_commit(tree, parent, &who, &who, SystemTime::now(), "m")
                .expect("commit");
            (tree, c)
        };

        repo.stage().expect("stage");
        let (_, dropped) = commit(&mut repo, empty, None, files(0, 1));
        assert!(repo.has_object(dropped), "staged objects are read back");
        repo.unstage(None).expect("unstage");
        assert!(!repo.has_object(dropped), "what is not kept is dropped");
        assert_eq!(crate::pack::loose_count(&path), 1, "only the empty tree");

        repo.stage().expect("stage");
        let (mut tree, mut tip) = commit(&mut repo, empty, None, files(1, 1));
        repo.unstage(Some(tip)).expect("unstage");
        assert!(repo.has_object(tip));
        assert_eq!(
            (crate::pack::loose_count(&path), pack_count(&path)),
            (1, 1),
            "a commit of one write is one pack, not five files"
        );
        repo.stage().expect("stage");
        tip = repo
            .write_commit(tree, Some(tip), &who, &who, SystemTime::now(), "again")
            .expect("commit");
        repo.unstage(Some(tip)).expect("unstage");
        assert_eq!(
            (crate::pack::loose_count(&path), pack_count(&path)),
            (2, 1),
            "a lone object is written as one file"
        );

        for round in 2..22 {
            repo.stage().expect("stage");
            (tree, tip) = commit(&mut repo, tree, Some(tip), files(round, 10));
            let before = pack_count(&path);
            repo.unstage(Some(tip)).expect("unstage");
            // A build only adds its pack: rolling up is housekeeping, done apart.
            assert_eq!(pack_count(&path), before + 1, "round {round}");
            repo.roll_up_packs().expect("roll up");
        }
        assert_eq!(
            crate::pack::loose_count(&path),
            2,
            "groups of writes are packed"
        );
        let packs = pack_count(&path);
        assert!(
            (2..10).contains(&packs),
            "{packs} packs after 20 packed builds"
        );
        repo.set_ref("refs/heads/main", tip).expect("ref");
        git_out(&path, &["fsck", "--full", "--strict", "--no-dangling"]);
        let shown = git_out(&path, &["cat-file", "-p", "main:live/ns9/f.yaml"]);
        assert_eq!(shown, "21.9\n");
    }

    /// A build writes its blobs, trees and commit into the staging area without libgit2
    /// listing the pack folder again (it did for every new object): a pack that appears in the
    /// folder meanwhile stays unseen by the staging handle, as nothing asked it to look.
    #[test]
    fn a_staged_build_does_not_list_the_pack_folder() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut repo = LocalRepo::open_or_init(&dir.path().join("c.git")).expect("init");
        let empty = repo.empty_tree().expect("empty");
        let who = Identity::default();
        repo.stage().expect("stage");
        let unseen = b"written behind the handles' backs".to_vec();
        let id = Oid::hash_object(ObjectType::Blob, &unseen).expect("hash");
        write_blob_pack(&[(id, unseen.as_slice())], &repo.path().join("objects"))
            .expect("pack")
            .expect("one blob");
        let mut up = BTreeMap::new();
        up.insert("live/a/b.yaml".to_string(), Some(b"x: 1\n".to_vec()));
        up.insert("top.yaml".to_string(), Some(b"y: 2\n".to_vec()));
        let tree = repo.apply_updates(empty, &up).expect("apply");
        let commit = repo
            .write_commit(tree, None, &who, &who, SystemTime::now(), "m")
            .expect("commit");
        let seen = repo
            .git2()
            .odb()
            .expect("odb")
            .exists_ext(id, git2::OdbLookupFlags::NO_REFRESH);
        assert!(
            !seen,
            "the staging handle listed the pack folder while building"
        );
        repo.unstage(Some(commit)).expect("unstage");
        assert_eq!(repo.commit_tree(commit).expect("tree"), tree);
        assert_eq!(
            repo.read_file(tree, "live/a/b.yaml").expect("read"),
            Some(b"x: 1\n".to_vec())
        );
    }

    #[test]
    fn updates_build_trees_without_a_worktree() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = LocalRepo::open_or_init(&dir.path().join("c.git")).expect("init");
        let empty = repo.empty_tree().expect("empty");
        let mut up = BTreeMap::new();
        up.insert("a/b/c.yaml".to_string(), Some(b"one".to_vec()));
        up.insert("top.txt".to_string(), Some(b"two".to_vec()));
        up.insert("missing/gone".to_string(), None);
        let t1 = repo.apply_updates(empty, &up).expect("apply");
        assert_eq!(
            repo.read_file(t1, "a/b/c.yaml").expect("read"),
            Some(b"one".to_vec())
        );
        assert_eq!(
            repo.list_files(t1, "").expect("list"),
            vec!["a/b/c.yaml", "top.txt"]
        );
        assert_eq!(repo.list_files(t1, "a").expect("list"), vec!["a/b/c.yaml"]);
        let mut rm = BTreeMap::new();
        rm.insert("a/b/c.yaml".to_string(), None);
        let t2 = repo.apply_updates(t1, &rm).expect("remove");
        assert_eq!(repo.list_files(t2, "").expect("list"), vec!["top.txt"]);
    }
}
