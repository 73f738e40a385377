//! What a planner sees and produces: a read-only view of a tree, and path updates.
//!
//! A write is planned intent by intent against a [`TreeView`] (in the Git engine, an overlay of
//! the base tree with the updates of the intents planned before it). So two intents that touch one file (two documents of a
//! multi-document YAML file) compose, and an intent whose updates change nothing is detected
//! before any object is written.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use sha1::{Digest, Sha1};

use crate::error::{IoFailure, TreeError};

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
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, IoFailure>;
    /// Every file path under `dir` (recursively; `""` for the root), sorted.
    fn list(&self, dir: &str) -> Result<Vec<String>, IoFailure>;
    /// The Git blob id of the file at `path` (the same bytes always give the same id), so a
    /// planner can reuse what it derived from a file it has seen. The default hashes the content.
    fn file_id(&self, path: &str) -> Result<Option<String>, IoFailure> {
        Ok(self.read(path)?.map(|bytes| blob_id(&bytes)))
    }
    /// Whether there is a file at `path`, without reading it. The default asks
    /// [`TreeView::file_id`].
    fn exists(&self, path: &str) -> Result<bool, IoFailure> {
        Ok(self.file_id(path)?.is_some())
    }
    /// Every file under `dir` with its [`TreeView::file_id`], sorted by path. Views over a Git
    /// tree answer it in one walk; the default asks path by path.
    fn files(&self, dir: &str) -> Result<Vec<(String, String)>, IoFailure> {
        let mut out = Vec::new();
        for path in self.list(dir)? {
            if let Some(id) = self.file_id(&path)? {
                out.push((path, id));
            }
        }
        Ok(out)
    }
    /// The id of the tree of the folder `dir`, when this view can name it: a stored tree with
    /// nothing planned under `dir`. A planner keeps what it derived from a folder under this id
    /// and asks [`TreeView::changed_since`] what differs at the next write, instead of reading
    /// the whole folder again. The default names none.
    fn folder_id(&self, dir: &str) -> Result<Option<String>, IoFailure> {
        let _ = dir;
        Ok(None)
    }
    /// Every file under `dir` whose content differs between the folder tree `since` (a
    /// [`TreeView::folder_id`] of an earlier view of the same store) and this view: added,
    /// changed or removed, sorted. `None` when the view cannot tell (the default, or `since` is
    /// not in the store): the caller reads the folder whole.
    fn changed_since(&self, dir: &str, since: &str) -> Result<Option<Vec<String>>, IoFailure> {
        let _ = (dir, since);
        Ok(None)
    }
}

/// `base` (sorted `(path, id)` pairs under the folder `prefix`) with `changes` on top: what
/// [`TreeView::files`] answers for a view that is a stored tree plus changes.
pub fn files_with_changes(
    base: Vec<(String, String)>,
    changes: &BTreeMap<String, Option<Vec<u8>>>,
    prefix: &str,
) -> Result<Vec<(String, String)>, IoFailure> {
    let mut files: BTreeMap<String, String> = base.into_iter().collect();
    for (path, content) in changes_in(changes, prefix) {
        match content {
            Some(bytes) => files.insert(path.clone(), blob_id(bytes)),
            None => files.remove(path),
        };
    }
    Ok(files.into_iter().collect())
}

/// The changes to paths under the folder `prefix` (from [`dir_prefix`]), in path order.
pub fn changes_in<'c, V>(
    changes: &'c BTreeMap<String, V>,
    prefix: &'c str,
) -> impl Iterator<Item = (&'c String, &'c V)> {
    changes
        .range(prefix.to_string()..)
        .take_while(move |(p, _)| p.starts_with(prefix))
}

/// The folder prefix of `dir` (`"a/b/"`, or `""` for the root) that its files start with.
#[must_use]
pub fn dir_prefix(dir: &str) -> String {
    let dir = dir.trim_matches('/');
    if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    }
}

/// The Git blob id of `bytes` (SHA-1 of `blob <length>\0` and the bytes), as a hex string: the
/// id Git gives the same file.
#[must_use]
pub fn blob_id(bytes: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {}\0", bytes.len()).as_bytes());
    hasher.update(bytes);
    hasher.finalize().iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
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
    #[must_use]
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
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, IoFailure> {
        match self.change(path) {
            Some(c) => Ok(c.map(<[u8]>::to_vec)),
            None => self.base.read(path),
        }
    }

    fn file_id(&self, path: &str) -> Result<Option<String>, IoFailure> {
        match self.change(path) {
            Some(c) => Ok(c.map(blob_id)),
            None => self.base.file_id(path),
        }
    }

    fn exists(&self, path: &str) -> Result<bool, IoFailure> {
        match self.change(path) {
            Some(c) => Ok(c.is_some()),
            None => self.base.exists(path),
        }
    }

    fn files(&self, dir: &str) -> Result<Vec<(String, String)>, IoFailure> {
        let mut files: BTreeMap<String, String> = self.base.files(dir)?.into_iter().collect();
        for (path, content) in self.changes_under(dir) {
            match content {
                Some(bytes) => files.insert(path.clone(), blob_id(bytes)),
                None => files.remove(path),
            };
        }
        Ok(files.into_iter().collect())
    }

    fn folder_id(&self, dir: &str) -> Result<Option<String>, IoFailure> {
        if self.changes_under(dir).next().is_some() {
            return Ok(None);
        }
        self.base.folder_id(dir)
    }

    fn changed_since(&self, dir: &str, since: &str) -> Result<Option<Vec<String>>, IoFailure> {
        let Some(changed) = self.base.changed_since(dir, since)? else {
            return Ok(None);
        };
        let mut paths: BTreeSet<String> = changed.into_iter().collect();
        paths.extend(self.changes_under(dir).map(|(path, _)| path.clone()));
        Ok(Some(paths.into_iter().collect()))
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, IoFailure> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blob_ids_are_gits() {
        // What `git hash-object --stdin` prints for the same bytes.
        assert_eq!(
            blob_id(b"hello\n"),
            "ce013625030ba8dba906f756967f9e9ca394464a"
        );
        assert_eq!(blob_id(b""), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
    }
}
