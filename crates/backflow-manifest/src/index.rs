//! The folder index: every manifest document under a target folder, by identity.
//!
//! Built from the tree a write is planned on, and refreshed file by file as the write's intents
//! change files, so planning stays a pure function of the tree (a replay on a new tip sees the
//! new tip's files) while a write of N objects parses the folder once, not N times. Building it
//! is also the acceptance check of each file: a file holding content backflow cannot handle
//! safely (invalid YAML, documents that are not Kubernetes objects, a file too large, a foreign
//! file) is *blocked*, with the reason: a write that would change it is refused, and every
//! other file of the folder is written as usual (one bad file blocks only itself). Two files
//! declaring one object still refuse the folder: which is its home is for a person to say.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};
use std::sync::Arc;

use backflow_branch::TreeView;
use backflow_branch::blob_id;

use crate::document::{ParsedFile, parse_file};
use crate::error::{IndexError, ManifestError};
use crate::identity::Identity;

/// Where one document lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocRef {
    /// The file, relative to the repository root (shared by every entry of the index that
    /// names it: at a hundred thousand files the copies added up).
    pub path: Arc<str>,
    /// The document's position in the file, from 0.
    pub doc: usize,
    /// YAML features in the document that make an in-place edit unsafe (it can still be
    /// removed whole).
    pub hazards: Vec<&'static str>,
    /// Whether the document is SOPS-encrypted (never edited as plain text).
    pub encrypted: bool,
}

/// Every manifest document under a folder, by identity.
///
/// Hash maps, not ordered ones: a folder of 100,000 objects is looked up once per object
/// written, and identities and paths that share long prefixes made the ordered maps' key
/// comparisons a large part of a snapshot's time. Only [`FolderIndex::iter`] sorts.
#[derive(Debug, Clone, Default)]
pub struct FolderIndex {
    docs: DocTable,
    /// What each file holds (the parse the cache keeps too, shared), so a changed file is
    /// re-indexed alone.
    by_path: HashMap<Arc<str>, IndexedFile>,
    /// Files that cannot be handled safely, and why: none of their documents is indexed.
    blocked: BTreeMap<String, ManifestError>,
    /// Folders of kustomize layouts that transform what they list: their files are the
    /// layout's documents (patches, bases), not objects, and are not indexed
    /// ([`crate::kustomized`] finds the objects they build).
    layouts: Vec<String>,
    /// Files such layouts read from elsewhere (patches, generator sources).
    layout_files: Vec<String>,
}

/// One file's documents in a [`FolderIndex`], and the blob id of the content they came from:
/// what tells a later write whether the file still reads the same.
#[derive(Debug, Clone)]
struct IndexedFile {
    blob: String,
    entries: Arc<Vec<(Identity, DocRef)>>,
}

/// What one file holds, derived from its content: its documents by identity, or why the file
/// refuses the folder.
pub type FileEntries = Result<Arc<Vec<(Identity, DocRef)>>, ManifestError>;

/// A file the planner has just written (rendered new from one object, or edited and read back):
/// what the index needs instead of parsing it again.
#[derive(Debug)]
pub struct KnownFile<'a> {
    /// Its path.
    pub path: &'a str,
    /// Its bytes.
    pub bytes: &'a [u8],
    /// Their blob id.
    pub blob: String,
    /// Its documents by identity, as [`FolderIndex::refresh_cached`] would parse them.
    pub entries: Arc<Vec<(Identity, DocRef)>>,
}

/// Parsed files of one folder by path, with the blob id they were parsed from, so building the
/// index again parses only files that changed.
pub type IndexCache = BTreeMap<String, (String, FileEntries)>;

/// What a file in a target folder is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileClass {
    /// A YAML file whose documents are manifests.
    Manifests,
    /// A file backflow or a person keeps next to the manifests (README, kustomization,
    /// `.sops.yaml`, ignore files, licenses); never read as manifests, never removed.
    Companion,
    /// Anything else: its presence makes the folder refused.
    Foreign,
}

/// Classifies a file by its name.
#[must_use]
pub fn classify(path: &str) -> FileClass {
    let name = path.rsplit('/').next().unwrap_or(path);
    let lower = name.to_ascii_lowercase();
    const COMPANIONS: &[&str] = &[
        "kustomization.yaml",
        "kustomization.yml",
        "kustomization",
        ".sops.yaml",
        ".gittargetignore",
        ".gitignore",
        ".gitattributes",
        ".gitkeep",
        ".keep",
        crate::owner::OWNER_FILE,
    ];
    if COMPANIONS.contains(&lower.as_str()) {
        return FileClass::Companion;
    }
    if lower.ends_with(".yaml") || lower.ends_with(".yml") {
        return FileClass::Manifests;
    }
    let stem = lower.split('.').next().unwrap_or("");
    let license_like = matches!(stem, "license" | "licence" | "copying" | "notice")
        && matches!(lower.strip_prefix(stem), Some("" | ".txt" | ".md"));
    if lower.ends_with(".md") || license_like {
        return FileClass::Companion;
    }
    FileClass::Foreign
}

impl FolderIndex {
    /// Indexes every manifest under `target` (normalized; `""` is the repository root).
    pub fn build(tree: &dyn TreeView, target: &str) -> Result<Self, IndexError> {
        let listed = tree.list(target)?;
        let (layouts, layout_files) = layouts(tree, &listed)?;
        let mut index = Self {
            layouts,
            layout_files,
            ..Self::default()
        };
        let mut scratch = IndexCache::new();
        for path in listed {
            if let Some(bytes) = tree.read(&path)? {
                index.refresh_cached(&path, Some(&bytes), &mut scratch)?;
            }
        }
        Ok(index)
    }

    /// Whether the folder holds a kustomize layout that transforms what it lists.
    #[must_use]
    pub fn has_layouts(&self) -> bool {
        !self.layouts.is_empty()
    }

    /// The layout whose folder holds `path`, if any.
    #[must_use]
    pub fn layout_of(&self, path: &str) -> Option<&str> {
        self.layouts
            .iter()
            .find(|d| d.is_empty() || path.starts_with(&format!("{d}/")))
            .map(String::as_str)
    }

    /// Whether `path` is a document of such a layout.
    fn in_layout(&self, path: &str) -> bool {
        self.layouts
            .iter()
            .any(|d| d.is_empty() || path.starts_with(&format!("{d}/")))
            || self.layout_files.iter().any(|f| f == path)
    }

    /// Re-indexes one file after it changed (`None`: it was removed), as planning a write
    /// changes files one intent at a time.
    pub fn refresh(&mut self, path: &str, content: Option<&[u8]>) -> Result<(), IndexError> {
        self.refresh_cached(path, content, &mut IndexCache::new())
    }

    /// [`FolderIndex::refresh`], also keeping the parse in `cache` under the content's blob id,
    /// so the next [`FolderIndex::build_cached`] does not parse the file again (after a resync
    /// of many objects, the next write would otherwise parse every file it wrote).
    pub fn refresh_cached(
        &mut self,
        path: &str,
        content: Option<&[u8]>,
        cache: &mut IndexCache,
    ) -> Result<(), IndexError> {
        self.forget(path);
        let Some(bytes) = content else {
            cache.remove(path);
            return Ok(());
        };
        match classify(path) {
            FileClass::Companion => return Ok(()),
            FileClass::Foreign => {
                self.block(
                    path,
                    ManifestError::ForeignFile {
                        path: path.to_string(),
                    },
                );
                return Ok(());
            }
            FileClass::Manifests if self.in_layout(path) => return Ok(()),
            FileClass::Manifests => {}
        }
        let blob = blob_id(bytes);
        let entries: FileEntries = parse_entries(path, bytes).map(Arc::new);
        cache.insert(path.to_string(), (blob.clone(), entries.clone()));
        match entries {
            Ok(entries) => self.insert_entries(blob, &entries),
            Err(refusal) => {
                self.block(path, refusal);
                Ok(())
            }
        }
    }

    /// Records that `path` cannot be handled safely.
    fn block(&mut self, path: &str, why: ManifestError) {
        self.blocked.insert(path.to_string(), why);
    }

    /// Why the file at `path` is blocked, if it is.
    #[must_use]
    pub fn blocked(&self, path: &str) -> Option<&ManifestError> {
        self.blocked.get(path)
    }

    /// Every blocked file and why, sorted by path.
    pub fn blocked_files(&self) -> impl Iterator<Item = (&str, &ManifestError)> {
        self.blocked.iter().map(|(p, e)| (p.as_str(), e))
    }

    /// Hands the parse of every indexed file to `cache` (files it already holds keep theirs).
    fn into_cache(self, cache: &mut IndexCache) {
        for (path, file) in self.by_path {
            cache
                .entry(path.to_string())
                .or_insert((file.blob, Ok(file.entries)));
        }
    }

    /// Takes the documents of the file at `path` out of the index.
    fn forget(&mut self, path: &str) {
        self.blocked.remove(path);
        if let Some(file) = self.by_path.remove(path) {
            for (identity, _) in file.entries.iter() {
                self.docs.remove(identity);
            }
        }
    }

    /// Like [`FolderIndex::refresh_cached`] for a file the planner has just written and whose
    /// documents it knows (it rendered the file from one object, with no YAML feature that
    /// makes an edit unsafe, or it parsed the edited file to check it reads back), so the file
    /// is not parsed again: at a snapshot's ten thousand new files the parses took half the
    /// planning, and an edit's third parse a sixth of a busy branch worker's time.
    pub fn refresh_known(
        &mut self,
        file: KnownFile<'_>,
        cache: &mut IndexCache,
    ) -> Result<(), IndexError> {
        self.forget(file.path);
        #[cfg(debug_assertions)]
        crate::document::uncounted(|| {
            assert_eq!(
                parse_entries(file.path, file.bytes).ok().as_ref(),
                Some(&*file.entries),
                "a known file reads as the planner says"
            );
        });
        cache.insert(
            file.path.to_string(),
            (file.blob.clone(), Ok(file.entries.clone())),
        );
        self.insert_entries(file.blob, &file.entries)
    }

    /// Like [`FolderIndex::build`], reusing the parse of every file whose blob id is in
    /// `cache` (and refreshing the cache): the result is the same, only cheaper.
    pub fn build_cached(
        tree: &dyn TreeView,
        target: &str,
        cache: &mut IndexCache,
    ) -> Result<Self, IndexError> {
        let files = tree.files(target)?;
        let listed: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
        let (layouts, layout_files) = layouts(tree, &listed)?;
        let mut index = Self {
            layouts,
            layout_files,
            ..Self::default()
        };
        let mut seen = BTreeMap::new();
        for (path, id) in files {
            match classify(&path) {
                FileClass::Companion => continue,
                FileClass::Foreign => {
                    let why = ManifestError::ForeignFile { path: path.clone() };
                    index.block(&path, why);
                    continue;
                }
                FileClass::Manifests if index.in_layout(&path) => continue,
                FileClass::Manifests => {}
            }
            let entries = match cache.get(&path) {
                Some((cached_id, entries)) if *cached_id == id => entries.clone(),
                _ => {
                    let Some(bytes) = tree.read(&path)? else {
                        continue;
                    };
                    parse_entries(&path, &bytes).map(Arc::new)
                }
            };
            seen.insert(path.clone(), (id.clone(), entries.clone()));
            match entries {
                Ok(entries) => index.insert_entries(id, &entries)?,
                Err(refusal) => index.block(&path, refusal),
            }
        }
        *cache = seen;
        Ok(index)
    }

    /// Brings the index to `tree`, where only the files at `paths` may read otherwise than the
    /// index holds them: each whose blob id is not the one indexed is indexed again (from
    /// `cache` when it holds that blob's parse). Every such file is taken out first, so an
    /// object moving from one of them to another is not taken for a duplicate.
    fn catch_up(
        &mut self,
        tree: &dyn TreeView,
        paths: &BTreeSet<String>,
        cache: &mut IndexCache,
    ) -> Result<(), IndexError> {
        let mut stale = Vec::new();
        for path in paths {
            let id = tree.file_id(path)?;
            let indexed = self.by_path.get(path.as_str()).map(|f| f.blob.as_str());
            // A companion file is never indexed, so it always looks stale: re-reading it
            // indexes nothing and costs one read of a file that changed.
            if id.as_deref() != indexed {
                self.forget(path);
                stale.push((path, id));
            }
        }
        for (path, id) in stale {
            match (id, cache.get(path.as_str())) {
                (Some(id), Some((cached, Ok(entries))))
                    if *cached == id && classify(path) == FileClass::Manifests =>
                {
                    let entries = entries.clone();
                    self.insert_entries(id, &entries)?;
                }
                (None, _) => {
                    cache.remove(path.as_str());
                }
                (Some(_), _) => {
                    let bytes = tree.read(path)?;
                    self.refresh_cached(path, bytes.as_deref(), cache)?;
                }
            }
        }
        Ok(())
    }

    /// Indexes the documents of one file (parsed by [`parse_entries`], all with one path) read
    /// from the blob `blob`.
    fn insert_entries(
        &mut self,
        blob: String,
        entries: &Arc<Vec<(Identity, DocRef)>>,
    ) -> Result<(), IndexError> {
        let Some((_, first_doc)) = entries.first() else {
            return Ok(());
        };
        let path = first_doc.path.clone();
        for (n, (identity, here)) in entries.iter().enumerate() {
            if let Some(first) = self.docs.get(identity) {
                // Two files for one object refuse the folder: which is its home is for a person
                // to say, and blocking either file alone would depend on the order they were
                // read in.
                let error = ManifestError::DuplicateIdentity {
                    identity: identity.to_string(),
                    first: format!("{}#{}", first.path, first.doc),
                    second: format!("{}#{}", here.path, here.doc),
                };
                // The file owns what it added before the duplicate, so re-indexing it (fixed)
                // takes those back and nothing of the other file.
                // Those are not the blob's documents: no blob id names them.
                let entries = Arc::new(entries[..n].to_vec());
                let blob = String::new();
                self.by_path.insert(path, IndexedFile { blob, entries });
                return Err(error.into());
            }
            self.docs.insert(entries, n);
        }
        let entries = entries.clone();
        self.by_path.insert(path, IndexedFile { blob, entries });
        Ok(())
    }

    /// The blob id of the content the file at `path` was indexed from.
    #[must_use]
    pub fn blob_of(&self, path: &str) -> Option<&str> {
        self.by_path.get(path).map(|f| f.blob.as_str())
    }

    /// How many documents of the file at `path` are indexed.
    #[must_use]
    pub fn documents_in(&self, path: &str) -> usize {
        self.by_path.get(path).map_or(0, |f| f.entries.len())
    }

    /// Where the document for `identity` lives.
    #[must_use]
    pub fn get(&self, identity: &Identity) -> Option<&DocRef> {
        self.docs.get(identity)
    }

    /// Every indexed document, by identity, sorted.
    pub fn iter(&self) -> impl Iterator<Item = (&Identity, &DocRef)> {
        let mut docs: Vec<(&Identity, &DocRef)> = self.docs.iter().collect();
        docs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        docs.into_iter()
    }

    /// How many documents the folder holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.docs.len
    }

    /// Whether the folder holds no documents.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.docs.len == 0
    }
}

/// Documents by identity, each identity held once: an entry points into its file's parsed
/// entries rather than copying the identity (four strings) and its reference, which were most
/// of an index kept between writes (about 300 bytes per document; this is about 50).
#[derive(Debug, Clone, Default)]
struct DocTable<S = RandomState> {
    hasher: S,
    /// Keyed by the identity's hash, which is hashed no further.
    slots: HashMap<u64, Slot, BuildHasherDefault<TakenAsIs>>,
    len: usize,
}

/// Hashes a `u64` that is already a hash by taking it as it is.
#[derive(Debug, Clone, Copy, Default)]
struct TakenAsIs(u64);

impl Hasher for TakenAsIs {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// The documents whose identities share one hash: almost always one.
#[derive(Debug, Clone)]
enum Slot {
    One(Located),
    Many(Vec<Located>),
}

/// One document: its file's parsed entries and its position among them.
#[derive(Debug, Clone)]
struct Located {
    file: Arc<Vec<(Identity, DocRef)>>,
    at: usize,
}

impl Located {
    fn entry(&self) -> Option<&(Identity, DocRef)> {
        self.file.get(self.at)
    }

    fn is(&self, identity: &Identity) -> bool {
        self.entry().is_some_and(|(id, _)| id == identity)
    }
}

impl Slot {
    fn all(&self) -> &[Located] {
        match self {
            Self::One(one) => std::slice::from_ref(one),
            Self::Many(many) => many,
        }
    }
}

impl<S: BuildHasher> DocTable<S> {
    fn get(&self, identity: &Identity) -> Option<&DocRef> {
        let slot = self.slots.get(&self.hasher.hash_one(identity))?;
        let found = slot.all().iter().find(|l| l.is(identity))?;
        found.entry().map(|(_, at)| at)
    }

    /// Adds the document `at` of `file`, whose identity the table does not hold yet.
    fn insert(&mut self, file: &Arc<Vec<(Identity, DocRef)>>, at: usize) {
        let Some((identity, _)) = file.get(at) else {
            return;
        };
        let located = Located {
            file: file.clone(),
            at,
        };
        let hash = self.hasher.hash_one(identity);
        let slot = self
            .slots
            .entry(hash)
            .or_insert_with(|| Slot::Many(Vec::new()));
        *slot = match std::mem::replace(slot, Slot::Many(Vec::new())) {
            Slot::Many(many) if many.is_empty() => Slot::One(located),
            Slot::One(other) => Slot::Many(vec![other, located]),
            Slot::Many(mut many) => {
                many.push(located);
                Slot::Many(many)
            }
        };
        self.len += 1;
    }

    fn remove(&mut self, identity: &Identity) {
        let hash = self.hasher.hash_one(identity);
        let Some(slot) = self.slots.remove(&hash) else {
            return;
        };
        let mut rest: Vec<Located> = slot.all().to_vec();
        let before = rest.len();
        rest.retain(|l| !l.is(identity));
        self.len -= before - rest.len();
        match rest.len() {
            0 => {}
            1 => {
                if let Some(one) = rest.pop() {
                    self.slots.insert(hash, Slot::One(one));
                }
            }
            _ => {
                self.slots.insert(hash, Slot::Many(rest));
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&Identity, &DocRef)> {
        self.slots
            .values()
            .flat_map(|slot| slot.all().iter().filter_map(Located::entry))
            .map(|(identity, at)| (identity, at))
    }
}

/// What a planner keeps of one folder between writes: the parse of each file by blob id, and
/// the folder's index as the last write left it with the folder tree it was built on, so the
/// next write re-reads only the files a diff of the two trees names (and those the last write
/// planned) instead of listing the folder whole: at a few thousand files, listing and
/// re-indexing the folder for every write was a fifth of a busy branch worker's time.
#[derive(Debug, Default)]
pub(crate) struct FolderMemo {
    /// Parsed files by path, with the blob id they were parsed from; empty between writes
    /// while an index is kept, which holds the same parses.
    pub(crate) parsed: IndexCache,
    kept: Option<KeptIndex>,
}

/// A write that changes more files than this in a folder leaves no index of it for the next
/// write: such a write (a snapshot, a resync) is where the process's memory peaks, building its
/// trees and packs, and an index of a hundred thousand objects kept through it added a twentieth
/// to that peak; the next write builds the index again, once, from the parse cache.
const KEPT_AFTER_AT_MOST: usize = 4096;

/// A folder's index kept between writes.
#[derive(Debug)]
struct KeptIndex {
    /// The folder tree it was built on ([`TreeView::folder_id`]).
    base: String,
    /// Files refreshed into it since, as a write planned them: they may never have been
    /// committed.
    touched: BTreeSet<String>,
    index: FolderIndex,
}

/// A folder's index lent to one write, noting the files the write refreshes into it so the
/// memo can keep it afterwards.
#[derive(Debug)]
pub(crate) struct WriteIndex {
    index: FolderIndex,
    /// The folder tree the index was brought to, when the view could name it.
    base: Option<String>,
    touched: BTreeSet<String>,
}

impl FolderMemo {
    /// The index of `target` in `tree`: the kept one brought up to date when `tree` can say
    /// what changed since it was built, else built from the folder's files (parsing only
    /// those not parsed before). Either way the same index a fresh build makes.
    pub(crate) fn take_index(
        &mut self,
        tree: &dyn TreeView,
        target: &str,
    ) -> Result<WriteIndex, IndexError> {
        let base = tree.folder_id(target)?;
        let index = match self.catch_up(tree, target, base.is_some())? {
            Some(index) => index,
            None => FolderIndex::build_cached(tree, target, &mut self.parsed)?,
        };
        Ok(WriteIndex {
            index,
            base,
            touched: BTreeSet::new(),
        })
    }

    /// The kept index brought up to date with `tree`, when there is one and `tree` (whose
    /// folder tree has a name: `named`) can say what changed since it was built; else `None`,
    /// with the kept index's parses handed to the cache for a whole build.
    fn catch_up(
        &mut self,
        tree: &dyn TreeView,
        target: &str,
        named: bool,
    ) -> Result<Option<FolderIndex>, IndexError> {
        let Some(kept) = self.kept.take() else {
            return Ok(None);
        };
        let changed = if named {
            tree.changed_since(target, &kept.base)?
        } else {
            None
        };
        let Some(changed) = changed else {
            kept.index.into_cache(&mut self.parsed);
            return Ok(None);
        };
        let mut paths: BTreeSet<String> = changed.into_iter().collect();
        paths.extend(kept.touched);
        if paths.iter().any(|p| crate::kustomize::is_kustomization(p)) {
            // Which files are a layout's documents may have changed: index the folder anew.
            kept.index.into_cache(&mut self.parsed);
            return Ok(None);
        }
        let mut index = kept.index;
        match index.catch_up(tree, &paths, &mut self.parsed) {
            Ok(()) => Ok(Some(index)),
            Err(e @ IndexError::Repo(_)) => Err(e),
            // The whole build names the refusal as it always does (the first of two
            // duplicates in path order).
            Err(IndexError::Refused(_)) => {
                index.into_cache(&mut self.parsed);
                Ok(None)
            }
        }
    }

    /// Keeps `write`'s index for the next write, unless its folder tree had no name or the
    /// write was large (see [`KEPT_AFTER_AT_MOST`]).
    pub(crate) fn keep(&mut self, write: WriteIndex) {
        if write.touched.len() > KEPT_AFTER_AT_MOST {
            self.kept = None;
            write.index.into_cache(&mut self.parsed);
            return;
        }
        self.kept = write.base.map(|base| KeptIndex {
            base,
            touched: write.touched,
            index: write.index,
        });
        if self.kept.is_some() {
            // The kept index holds every parse the next write can reuse.
            self.parsed = IndexCache::new();
        }
    }
}

impl WriteIndex {
    /// The index.
    pub(crate) fn index(&self) -> &FolderIndex {
        &self.index
    }

    /// [`FolderIndex::refresh_known`] when the planner knows the file's documents, else
    /// [`FolderIndex::refresh_cached`]; either way the file is noted as touched.
    pub(crate) fn refresh(
        &mut self,
        path: &str,
        content: Option<&[u8]>,
        known: Option<KnownFile<'_>>,
        cache: &mut IndexCache,
    ) -> Result<(), IndexError> {
        self.touched.insert(path.to_string());
        match known {
            Some(file) => self.index.refresh_known(file, cache),
            None => self.index.refresh_cached(path, content, cache),
        }
    }
}

/// The folders of the kustomize layouts among `listed` ([`crate::kustomize::layouts`]), and
/// the files they read from elsewhere.
fn layouts(
    tree: &dyn TreeView,
    listed: &[String],
) -> Result<(Vec<String>, Vec<String>), IndexError> {
    let mut kustomizations = Vec::new();
    for path in listed
        .iter()
        .filter(|p| crate::kustomize::is_kustomization(p))
    {
        if let Some(bytes) = tree.read(path)? {
            kustomizations.push((path.clone(), bytes));
        }
    }
    let found = crate::kustomize::layouts(&kustomizations);
    let named = found.iter().flat_map(|l| l.named.clone()).collect();
    Ok((found.into_iter().map(|l| l.dir).collect(), named))
}

/// The one document of a file rendered from the object `identity` names: rendering writes no
/// YAML feature that makes an edit unsafe (anchors, aliases, tags; a `<<` key is quoted).
pub(crate) fn rendered_entries(path: &str, identity: Identity) -> Arc<Vec<(Identity, DocRef)>> {
    let here = DocRef {
        path: Arc::from(path),
        doc: 0,
        hazards: Vec::new(),
        encrypted: false,
    };
    Arc::new(vec![(identity, here)])
}

/// Every document of one manifest file, by identity.
fn parse_entries(path: &str, bytes: &[u8]) -> Result<Vec<(Identity, DocRef)>, ManifestError> {
    entries_of(path, &parse_file(path, bytes)?)
}

/// Every document of a parsed manifest file, by identity.
pub(crate) fn entries_of(
    path: &str,
    file: &ParsedFile,
) -> Result<Vec<(Identity, DocRef)>, ManifestError> {
    let shared: Arc<str> = Arc::from(path);
    let mut out = Vec::new();
    for (i, doc) in file.docs.iter().enumerate() {
        if doc.value.is_null() {
            // An empty or comment-only document describes nothing.
            continue;
        }
        let identity = Identity::of(&doc.value).map_err(|reason| ManifestError::NotKrm {
            path: path.to_string(),
            doc: i,
            reason,
        })?;
        let here = DocRef {
            path: shared.clone(),
            doc: i,
            hazards: doc.hazards.clone(),
            encrypted: doc.value.get("sops").is_some(),
        };
        out.push((identity, here));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        assert_eq!(classify("t/a/b.yaml"), FileClass::Manifests);
        assert_eq!(classify("t/a/b.YML"), FileClass::Manifests);
        assert_eq!(classify("t/README.md"), FileClass::Companion);
        assert_eq!(classify("t/kustomization.yaml"), FileClass::Companion);
        assert_eq!(classify("t/.backflow-owner"), FileClass::Companion);
        assert_eq!(classify("t/.sops.yaml"), FileClass::Companion);
        assert_eq!(classify("t/.gittargetignore"), FileClass::Companion);
        assert_eq!(classify("t/LICENSE"), FileClass::Companion);
        assert_eq!(classify("t/NOTICE.txt"), FileClass::Companion);
        assert_eq!(classify("t/run.sh"), FileClass::Foreign);
        assert_eq!(classify("t/notes.txt"), FileClass::Foreign);
        assert_eq!(classify("t/x.json"), FileClass::Foreign);
    }

    /// A tree in memory.
    struct Mem(BTreeMap<String, Vec<u8>>);

    impl TreeView for Mem {
        fn read(&self, path: &str) -> Result<Option<Vec<u8>>, backflow_branch::IoFailure> {
            Ok(self.0.get(path).cloned())
        }
        fn list(&self, dir: &str) -> Result<Vec<String>, backflow_branch::IoFailure> {
            Ok(self
                .0
                .keys()
                .filter(|p| p.starts_with(&format!("{dir}/")))
                .cloned()
                .collect())
        }
    }

    fn cm(name: &str) -> Vec<u8> {
        format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: d\n")
            .into_bytes()
    }

    /// The cached build sees exactly what a fresh build sees, as files change between builds.
    #[test]
    fn cached_build_follows_content() {
        let mut tree = Mem(BTreeMap::new());
        tree.0.insert("t/a.yaml".into(), cm("a"));
        tree.0.insert("t/b.yaml".into(), cm("b"));
        let mut cache = IndexCache::new();
        let names = |i: &FolderIndex| {
            i.iter()
                .map(|(id, at)| format!("{}@{}", id.name, at.path))
                .collect::<Vec<_>>()
        };
        let first = FolderIndex::build_cached(&tree, "t", &mut cache).expect("builds");
        assert_eq!(
            names(&first),
            names(&FolderIndex::build(&tree, "t").expect("builds"))
        );
        assert_eq!(cache.len(), 2);

        tree.0.insert("t/b.yaml".into(), cm("renamed"));
        tree.0.remove("t/a.yaml");
        let second = FolderIndex::build_cached(&tree, "t", &mut cache).expect("builds");
        assert_eq!(names(&second), vec!["renamed@t/b.yaml"]);
        assert_eq!(cache.len(), 1, "removed files leave the cache");

        tree.0.insert("t/c.yaml".into(), cm("renamed"));
        assert!(
            FolderIndex::build_cached(&tree, "t", &mut cache).is_err(),
            "a duplicate is refused from cached entries too"
        );
        tree.0.insert("t/c.yaml".into(), b"not: [valid".to_vec());
        for _ in 0..2 {
            // Read, then from the cache: the file is blocked, the rest indexed.
            let index = FolderIndex::build_cached(&tree, "t", &mut cache).expect("builds");
            assert_eq!(names(&index), vec!["renamed@t/b.yaml"]);
            let blocked: Vec<&str> = index.blocked_files().map(|(p, _)| p).collect();
            assert_eq!(blocked, ["t/c.yaml"]);
        }
        tree.0.insert("t/run.sh".into(), b"echo hi\n".to_vec());
        let index = FolderIndex::build_cached(&tree, "t", &mut cache).expect("builds");
        assert!(matches!(
            index.blocked("t/run.sh"),
            Some(ManifestError::ForeignFile { .. })
        ));
        assert_eq!(names(&index), vec!["renamed@t/b.yaml"]);
    }

    /// A tree in memory that names each folder tree it is asked for by its content and
    /// remembers it, as a Git store does, and counts how often a folder is listed.
    #[derive(Default)]
    struct Versioned {
        files: BTreeMap<String, Vec<u8>>,
        named: std::cell::RefCell<HashMap<String, BTreeMap<String, Vec<u8>>>>,
        listed: std::cell::Cell<usize>,
    }

    impl Versioned {
        fn under(&self, dir: &str) -> BTreeMap<String, Vec<u8>> {
            let prefix = format!("{dir}/");
            self.files
                .iter()
                .filter(|(p, _)| p.starts_with(&prefix))
                .map(|(p, c)| (p.clone(), c.clone()))
                .collect()
        }
    }

    impl TreeView for Versioned {
        fn read(&self, path: &str) -> Result<Option<Vec<u8>>, backflow_branch::IoFailure> {
            Ok(self.files.get(path).cloned())
        }
        fn list(&self, dir: &str) -> Result<Vec<String>, backflow_branch::IoFailure> {
            self.listed.set(self.listed.get() + 1);
            Ok(self.under(dir).into_keys().collect())
        }
        fn folder_id(&self, dir: &str) -> Result<Option<String>, backflow_branch::IoFailure> {
            let files = self.under(dir);
            let id = blob_id(format!("{files:?}").as_bytes());
            self.named.borrow_mut().insert(id.clone(), files);
            Ok(Some(id))
        }
        fn changed_since(
            &self,
            dir: &str,
            since: &str,
        ) -> Result<Option<Vec<String>>, backflow_branch::IoFailure> {
            let named = self.named.borrow();
            let Some(then) = named.get(since) else {
                return Ok(None);
            };
            let now = self.under(dir);
            let paths: BTreeSet<String> = then.keys().chain(now.keys()).cloned().collect();
            Ok(Some(
                paths
                    .into_iter()
                    .filter(|p| then.get(p) != now.get(p))
                    .collect(),
            ))
        }
    }

    /// Content for the randomized walk: `ConfigMap`s from a pool of names (so two files
    /// can claim one object), files of two documents, invalid YAML, empty files, companions
    /// and a foreign file.
    fn random_file(rng: &mut rand::rngs::StdRng) -> (String, Option<Vec<u8>>) {
        use rand::Rng;
        let name = |rng: &mut rand::rngs::StdRng| format!("n{}", rng.random_range(0..120));
        let path = match rng.random_range(0..60) {
            0 => "t/README.md".to_string(),
            1 => "t/notes.json".to_string(),
            n => format!("t/f{}.yaml", n % 9),
        };
        let content = match rng.random_range(0..40) {
            0..=11 => None,
            12 => Some(b"not: [valid".to_vec()),
            13 => Some(b"# nothing here\n".to_vec()),
            14..=19 => {
                let mut two = cm(&name(rng));
                two.extend_from_slice(b"---\n");
                two.extend_from_slice(&cm(&name(rng)));
                Some(two)
            }
            _ => Some(cm(&name(rng))),
        };
        (path, content)
    }

    fn apply(tree: &mut Versioned, path: String, content: Option<Vec<u8>>) {
        match content {
            Some(bytes) => tree.files.insert(path, bytes),
            None => tree.files.remove(&path),
        };
    }

    /// The index a memo brings up to date from the files that changed is the index a fresh
    /// build makes (or the same refusal), through files added, edited, removed, objects moving
    /// between files, duplicates, bad YAML and foreign files, and files a write planned that
    /// never reached the tree; and while the last index was kept, the folder is not listed.
    #[test]
    fn a_kept_index_caught_up_is_a_fresh_build() {
        use rand::{Rng, SeedableRng};
        let (mut incremental, mut refused) = (0, 0);
        for seed in 0..24 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut tree = Versioned::default();
            let mut memo = FolderMemo::default();
            let mut kept = false;
            for step in 0..120 {
                for _ in 0..rng.random_range(0..4) {
                    let (path, content) = random_file(&mut rng);
                    apply(&mut tree, path, content);
                }
                let listed = tree.listed.get();
                let caught_up = memo.take_index(&tree, "t");
                let fresh = FolderIndex::build(&tree, "t");
                let at = format!("seed {seed}, step {step}");
                let mut write = match (caught_up, fresh) {
                    (Ok(write), Ok(fresh)) => {
                        let all = |i: &FolderIndex| {
                            i.iter()
                                .map(|(id, at)| (id.clone(), at.clone()))
                                .collect::<Vec<_>>()
                        };
                        assert_eq!(all(write.index()), all(&fresh), "{at}");
                        if kept {
                            assert_eq!(
                                tree.listed.get(),
                                listed + 1,
                                "{at}: only the fresh build lists"
                            );
                            incremental += 1;
                        }
                        write
                    }
                    (Err(a), Err(b)) => {
                        assert_eq!(a.to_string(), b.to_string(), "{at}");
                        refused += 1;
                        // Somebody fixes the folder: the refused file goes.
                        if let Some((path, _)) = a.to_string().split_once(':') {
                            tree.files.remove(path);
                        }
                        kept = false;
                        continue;
                    }
                    (a, b) => panic!("{at}: kept {:?} against fresh {:?}", a.err(), b.err()),
                };
                // A write plans a file: sometimes it reaches the tree, sometimes not.
                let (path, content) = random_file(&mut rng);
                let planned = write.refresh(&path, content.as_deref(), None, &mut memo.parsed);
                if rng.random_bool(0.5) {
                    apply(&mut tree, path, content);
                }
                kept = planned.is_ok();
                if kept {
                    memo.keep(write);
                }
            }
        }
        // 24 walks of 120 writes: most catch up, and refusals are met too.
        assert!(
            incremental > 1500,
            "the kept index was used {incremental} times"
        );
        assert!(refused > 50, "{refused} refusals");
    }

    /// A kept index holds the folder's parses (the cache empties); a write of more files than
    /// [`KEPT_AFTER_AT_MOST`] keeps none, and its parses stay in the cache for the next build.
    #[test]
    fn a_large_write_keeps_no_index() {
        let mut tree = Versioned::default();
        let mut memo = FolderMemo::default();
        let mut write = memo.take_index(&tree, "t").expect("indexed");
        write
            .refresh("t/a.yaml", Some(&cm("a")), None, &mut memo.parsed)
            .expect("refreshed");
        memo.keep(write);
        apply(&mut tree, "t/a.yaml".into(), Some(cm("a")));
        assert!(memo.kept.is_some());
        assert!(memo.parsed.is_empty(), "the kept index holds the parse");

        let mut write = memo.take_index(&tree, "t").expect("indexed");
        for n in 0..=KEPT_AFTER_AT_MOST {
            let path = format!("t/f{n}.yaml");
            write
                .refresh(&path, Some(&cm(&format!("f{n}"))), None, &mut memo.parsed)
                .expect("refreshed");
        }
        memo.keep(write);
        assert!(memo.kept.is_none(), "a large write keeps no index");
        assert_eq!(
            memo.parsed.len(),
            KEPT_AFTER_AT_MOST + 2,
            "its parses, and those the index it caught up held, are in the cache"
        );
    }

    /// A hasher that gives every identity the same hash.
    #[derive(Default, Clone)]
    struct Colliding;

    impl std::hash::Hasher for Colliding {
        fn finish(&self) -> u64 {
            7
        }
        fn write(&mut self, _: &[u8]) {}
    }

    impl BuildHasher for Colliding {
        type Hasher = Self;
        fn build_hasher(&self) -> Self {
            Self
        }
    }

    /// Identities that share a hash are told apart: found, removed and counted one by one.
    #[test]
    fn the_doc_table_tells_colliding_identities_apart() {
        let file = Arc::new(
            ["a", "b", "c"]
                .iter()
                .enumerate()
                .map(|(n, name)| {
                    let identity = Identity::of(&serde_json::json!({"apiVersion": "v1",
                        "kind": "ConfigMap", "metadata": {"name": name, "namespace": "d"}}))
                    .expect("an object");
                    let at = DocRef {
                        path: Arc::from("t/all.yaml"),
                        doc: n,
                        hazards: Vec::new(),
                        encrypted: false,
                    };
                    (identity, at)
                })
                .collect::<Vec<_>>(),
        );
        let mut table = DocTable {
            hasher: Colliding,
            slots: HashMap::default(),
            len: 0,
        };
        for at in 0..3 {
            table.insert(&file, at);
        }
        assert_eq!(table.slots.len(), 1, "one slot for the three");
        assert_eq!(table.len, 3);
        for (n, (identity, _)) in file.iter().enumerate() {
            assert_eq!(table.get(identity).map(|at| at.doc), Some(n));
        }
        table.remove(&file[1].0);
        assert_eq!(table.get(&file[1].0), None);
        assert_eq!(table.get(&file[2].0).map(|at| at.doc), Some(2));
        assert_eq!(table.len, 2);
        table.remove(&file[0].0);
        table.remove(&file[0].0);
        assert_eq!(table.len, 1, "removing what is gone changes nothing");
        assert_eq!(table.iter().count(), 1);
        table.remove(&file[2].0);
        assert!(table.slots.is_empty());
    }

    /// A file refreshed as rendered leaves the index and the cache as a parse of it would, and
    /// replaces what an earlier file at its path held.
    #[test]
    fn a_rendered_file_is_indexed_as_its_parse_would_be() {
        let object = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "<<", "namespace": "d"}, "data": {"<<": "*x", "k": "&y"}});
        let bytes = crate::yaml::render(&object).into_bytes();
        let (mut parsed, mut rendered) = (FolderIndex::default(), FolderIndex::default());
        let (mut parsed_cache, mut rendered_cache) = (IndexCache::new(), IndexCache::new());
        for (index, cache) in [
            (&mut parsed, &mut parsed_cache),
            (&mut rendered, &mut rendered_cache),
        ] {
            index
                .refresh_cached("t/x.yaml", Some(&cm("old")), cache)
                .expect("indexed");
        }
        parsed
            .refresh_cached("t/x.yaml", Some(&bytes), &mut parsed_cache)
            .expect("indexed");
        let file = KnownFile {
            path: "t/x.yaml",
            bytes: &bytes,
            blob: blob_id(&bytes),
            entries: rendered_entries("t/x.yaml", Identity::of(&object).expect("an object")),
        };
        rendered
            .refresh_known(file, &mut rendered_cache)
            .expect("indexed");
        let all = |i: &FolderIndex| {
            i.iter()
                .map(|(id, at)| (id.clone(), at.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(all(&rendered), all(&parsed));
        assert_eq!(rendered.len(), 1, "the old file's object is gone");
        assert_eq!(rendered_cache, parsed_cache);
    }
}
