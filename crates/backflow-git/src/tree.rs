//! What a planner sees and produces: a read-only view of a tree, and path updates.
//!
//! A write is planned intent by intent against an [`Overlay`]: the base tree with the updates of
//! the intents planned before it. So two intents that touch one file (two documents of a
//! multi-document YAML file) compose, and an intent whose updates change nothing is detected
//! before any object is written.

use std::collections::{BTreeMap, BTreeSet};

use git2::Oid;

use crate::error::{RepoError, TreeError};
use crate::repo::LocalRepo;

/// One file-level change a planner asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathUpdate {
    /// Slash-separated path from the repository root, without a leading slash.
    pub path: String,
    /// The file's new content, or `None` to remove the file.
    pub content: Option<Vec<u8>>,
}

impl PathUpdate {
    /// Write `content` at `path`.
    pub fn write(path: impl Into<String>, content: impl Into<Vec<u8>>) -> Self {
        Self {
            path: path.into(),
            content: Some(content.into()),
        }
    }

    /// Remove the file at `path`.
    pub fn remove(path: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            content: None,
        }
    }
}

/// A read-only view of a tree, as a planner needs it.
pub trait TreeView {
    /// The file at `path`, or `None` when there is none.
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, RepoError>;
    /// Every file path under `dir` (recursively; `""` for the root), sorted.
    fn list(&self, dir: &str) -> Result<Vec<String>, RepoError>;
    /// The Git blob id of the file at `path` (the same bytes always give the same id), so a
    /// planner can reuse what it derived from a file it has seen. The default hashes the content.
    fn file_id(&self, path: &str) -> Result<Option<String>, RepoError> {
        self.read(path)?.map(|bytes| blob_id(&bytes)).transpose()
    }
    /// Every file under `dir` with its [`TreeView::file_id`], sorted by path. Views over a Git
    /// tree answer it in one walk; the default asks path by path.
    fn files(&self, dir: &str) -> Result<Vec<(String, String)>, RepoError> {
        let mut out = Vec::new();
        for path in self.list(dir)? {
            if let Some(id) = self.file_id(&path)? {
                out.push((path, id));
            }
        }
        Ok(out)
    }
}

/// `base` (sorted `(path, id)` pairs under the folder `prefix`) with `changes` on top.
fn files_with_changes(
    base: Vec<(String, String)>,
    changes: &BTreeMap<String, Option<Vec<u8>>>,
    prefix: &str,
) -> Result<Vec<(String, String)>, RepoError> {
    let mut files: BTreeMap<String, String> = base.into_iter().collect();
    for (path, content) in changes_in(changes, prefix) {
        match content {
            Some(bytes) => files.insert(path.clone(), blob_id(bytes)?),
            None => files.remove(path),
        };
    }
    Ok(files.into_iter().collect())
}

/// The changes to paths under the folder `prefix` (from [`dir_prefix`]), in path order.
fn changes_in<'c, V>(
    changes: &'c BTreeMap<String, V>,
    prefix: &'c str,
) -> impl Iterator<Item = (&'c String, &'c V)> {
    changes
        .range(prefix.to_string()..)
        .take_while(move |(p, _)| p.starts_with(prefix))
}

/// The folder prefix of `dir` (`"a/b/"`, or `""` for the root) that its files start with.
fn dir_prefix(dir: &str) -> String {
    let dir = dir.trim_matches('/');
    if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    }
}

/// The Git blob id of `bytes`, as a hex string.
pub fn blob_id(bytes: &[u8]) -> Result<String, RepoError> {
    Oid::hash_object(git2::ObjectType::Blob, bytes)
        .map(|o| o.to_string())
        .map_err(|source| RepoError {
            op: "hashing file content".into(),
            path: std::path::PathBuf::new(),
            source,
        })
}

/// Any tree view plus the updates planned so far on top: what a planner planning a whole write
/// sees after the intents before the current one. It keeps the planned results themselves
/// (handed back by [`LayeredView::into_planned`]) and reads through them, so a write of N new
/// files holds each file once, not twice.
pub struct LayeredView<'a> {
    base: &'a dyn TreeView,
    planned: Vec<Result<Vec<PathUpdate>, TreeError>>,
    /// Path → where its latest update sits in `planned` (intent, update).
    latest: BTreeMap<String, (usize, usize)>,
}

impl<'a> LayeredView<'a> {
    /// `base` with nothing planned yet.
    pub fn new(base: &'a dyn TreeView) -> Self {
        Self {
            base,
            planned: Vec::new(),
            latest: BTreeMap::new(),
        }
    }

    /// Records the next intent's planning result; its updates (when it succeeded) show on top
    /// from now on, later ones winning, and are returned.
    pub fn record(&mut self, planned: Result<Vec<PathUpdate>, TreeError>) -> &[PathUpdate] {
        let at = self.planned.len();
        if let Ok(updates) = &planned {
            for (i, u) in updates.iter().enumerate() {
                self.latest.insert(u.path.clone(), (at, i));
            }
        }
        self.planned.push(planned);
        match &self.planned[at] {
            Ok(updates) => updates,
            Err(_) => &[],
        }
    }

    /// Every recorded result, in the order recorded.
    pub fn into_planned(self) -> Vec<Result<Vec<PathUpdate>, TreeError>> {
        self.planned
    }

    /// Every planned path under `dir` with its planned content (`None`: removed).
    fn changes_under(&self, dir: &str) -> impl Iterator<Item = (&String, Option<&[u8]>)> {
        let prefix = dir_prefix(dir);
        self.latest
            .range(prefix.clone()..)
            .take_while(move |(p, _)| p.starts_with(&prefix))
            .filter_map(|(p, _)| self.change(p).map(|c| (p, c)))
    }

    /// The planned state of `path`: `None` when nothing planned touches it, `Some(None)` when
    /// it was removed.
    fn change(&self, path: &str) -> Option<Option<&[u8]>> {
        let (at, i) = *self.latest.get(path)?;
        match &self.planned[at] {
            Ok(updates) => Some(updates[i].content.as_deref()),
            Err(_) => None,
        }
    }
}

impl TreeView for LayeredView<'_> {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, RepoError> {
        match self.change(path) {
            Some(c) => Ok(c.map(<[u8]>::to_vec)),
            None => self.base.read(path),
        }
    }

    fn file_id(&self, path: &str) -> Result<Option<String>, RepoError> {
        match self.change(path) {
            Some(c) => c.map(blob_id).transpose(),
            None => self.base.file_id(path),
        }
    }

    fn files(&self, dir: &str) -> Result<Vec<(String, String)>, RepoError> {
        let mut files: BTreeMap<String, String> = self.base.files(dir)?.into_iter().collect();
        for (path, content) in self.changes_under(dir) {
            match content {
                Some(bytes) => files.insert(path.clone(), blob_id(bytes)?),
                None => files.remove(path),
            };
        }
        Ok(files.into_iter().collect())
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, RepoError> {
        let mut paths: BTreeSet<String> = self.base.list(dir)?.into_iter().collect();
        for (path, content) in self.changes_under(dir) {
            match content {
                Some(_) => paths.insert(path.clone()),
                None => paths.remove(path),
            };
        }
        Ok(paths.into_iter().collect())
    }
}

/// A base tree (or nothing, for a branch that does not exist yet) plus pending path updates.
pub struct Overlay<'r> {
    repo: &'r LocalRepo,
    base: Oid,
    changes: BTreeMap<String, Option<Vec<u8>>>,
}

impl<'r> Overlay<'r> {
    /// A view of `base` with no changes yet.
    pub fn new(repo: &'r LocalRepo, base: Oid) -> Self {
        Self {
            repo,
            base,
            changes: BTreeMap::new(),
        }
    }

    /// Whether applying `updates` would change what this view shows.
    pub fn would_change(&self, updates: &[PathUpdate]) -> Result<bool, RepoError> {
        // Apply to a scratch copy of the changed paths only, so repeated updates of one path in
        // `updates` are judged by their final value.
        let mut last: BTreeMap<&str, &Option<Vec<u8>>> = BTreeMap::new();
        for u in updates {
            last.insert(u.path.as_str(), &u.content);
        }
        for (path, content) in last {
            if self.read(path)? != *content {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Records `updates` in the view.
    pub fn apply(&mut self, updates: Vec<PathUpdate>) {
        for u in updates {
            self.changes.insert(normalize(&u.path), u.content);
        }
    }

    /// The recorded changes, one final state per path.
    pub fn changes(&self) -> &BTreeMap<String, Option<Vec<u8>>> {
        &self.changes
    }

    /// Writes the resulting tree and returns its id (the base itself when nothing changed).
    pub fn write(&self) -> Result<Oid, RepoError> {
        self.repo.apply_updates(self.base, &self.changes)
    }
}

fn normalize(path: &str) -> String {
    path.trim_start_matches('/').to_string()
}

impl TreeView for Overlay<'_> {
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, RepoError> {
        let path = normalize(path);
        if let Some(change) = self.changes.get(&path) {
            return Ok(change.clone());
        }
        self.repo.read_file(self.base, &path)
    }

    fn file_id(&self, path: &str) -> Result<Option<String>, RepoError> {
        let path = normalize(path);
        if let Some(change) = self.changes.get(&path) {
            return change.as_deref().map(blob_id).transpose();
        }
        Ok(self.repo.file_id(self.base, &path)?.map(|o| o.to_string()))
    }

    fn files(&self, dir: &str) -> Result<Vec<(String, String)>, RepoError> {
        let base = self
            .repo
            .list_file_ids(self.base, dir.trim_matches('/'))?
            .into_iter()
            .map(|(path, id)| (path, id.to_string()))
            .collect();
        files_with_changes(base, &self.changes, &dir_prefix(dir))
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, RepoError> {
        let mut files: BTreeSet<String> = self
            .repo
            .list_files(self.base, dir.trim_matches('/'))?
            .into_iter()
            .collect();
        for (path, content) in changes_in(&self.changes, &dir_prefix(dir)) {
            match content {
                Some(_) => files.insert(path.clone()),
                None => files.remove(path),
            };
        }
        Ok(files.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A view answering `files` with the trait's default, to compare the walks against.
    struct DefaultFiles<'a>(&'a dyn TreeView);

    impl TreeView for DefaultFiles<'_> {
        fn read(&self, path: &str) -> Result<Option<Vec<u8>>, RepoError> {
            self.0.read(path)
        }
        fn list(&self, dir: &str) -> Result<Vec<String>, RepoError> {
            self.0.list(dir)
        }
    }

    #[test]
    fn overlay_reads_its_own_changes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = LocalRepo::open_or_init(&dir.path().join("c.git")).expect("init");
        let mut base_up = BTreeMap::new();
        base_up.insert("d/a".to_string(), Some(b"1".to_vec()));
        base_up.insert("d/b".to_string(), Some(b"2".to_vec()));
        let base = repo
            .apply_updates(repo.empty_tree().expect("empty"), &base_up)
            .expect("base");
        let mut o = Overlay::new(&repo, base);
        assert!(
            !o.would_change(&[PathUpdate::write("d/a", "1")])
                .expect("judge")
        );
        assert!(
            !o.would_change(&[PathUpdate::remove("d/zz")])
                .expect("judge")
        );
        assert!(
            o.would_change(&[PathUpdate::write("d/a", "9")])
                .expect("judge")
        );
        o.apply(vec![
            PathUpdate::remove("d/a"),
            PathUpdate::write("d/c", "3"),
        ]);
        assert_eq!(o.list("d").expect("list"), vec!["d/b", "d/c"]);
        let ids = |paths: &[(&str, &str)]| -> Vec<(String, String)> {
            paths
                .iter()
                .map(|(p, c)| (p.to_string(), blob_id(c.as_bytes()).expect("hash")))
                .collect()
        };
        assert_eq!(
            o.files("d").expect("files"),
            ids(&[("d/b", "2"), ("d/c", "3")])
        );
        assert_eq!(
            o.files("").expect("files"),
            ids(&[("d/b", "2"), ("d/c", "3")])
        );
        let mut layered = LayeredView::new(&o);
        layered.record(Ok(vec![PathUpdate::write("d/b", "7")]));
        layered.record(Ok(vec![PathUpdate::remove("d/c")]));
        assert_eq!(layered.read("d/b").expect("read"), Some(b"7".to_vec()));
        assert_eq!(layered.list("d").expect("list"), vec!["d/b"]);
        assert_eq!(layered.files("d/").expect("files"), ids(&[("d/b", "7")]));
        assert_eq!(
            layered.files("d").expect("files"),
            TreeView::files(&DefaultFiles(&layered), "d").expect("files")
        );
        assert_eq!(o.read("d/a").expect("read"), None);
        let t = o.write().expect("write");
        assert_eq!(repo.list_files(t, "").expect("list"), vec!["d/b", "d/c"]);
        assert_eq!(Overlay::new(&repo, base).write().expect("write"), base);
    }
}
