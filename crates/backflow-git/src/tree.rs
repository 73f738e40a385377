//! The planner's view of a tree in the local cache: a stored tree plus the updates planned so
//! far, which [`Overlay::write`] turns into a new tree.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use backflow_branch::IoFailure;
use git2::Oid;

pub(crate) use backflow_branch::{PathUpdate, TreeView, blob_id};
use backflow_branch::{changes_in, dir_prefix, files_with_changes};

use crate::error::RepoError;
use crate::repo::{FolderEntries, LocalRepo};

/// A base tree (or nothing, for a branch that does not exist yet) plus pending path updates.
pub struct Overlay<'r> {
    repo: &'r LocalRepo,
    base: Oid,
    changes: BTreeMap<String, Option<Vec<u8>>>,
    /// The entries of each folder of the base read so far, by name (`None`: no such folder).
    /// A lookup by path parses every tree on its way, and libgit2 keeps no tree over its cache
    /// limit: a folder of 100,000 files (a 4 MB tree) was parsed again for every file read.
    folders: RefCell<BTreeMap<String, Option<Rc<FolderEntries>>>>,
}

impl<'r> Overlay<'r> {
    /// A view of `base` with no changes yet.
    #[must_use]
    pub fn new(repo: &'r LocalRepo, base: Oid) -> Self {
        Self {
            repo,
            base,
            changes: BTreeMap::new(),
            folders: RefCell::default(),
        }
    }

    /// The id of the file at `path` (normalized) in the base tree, if there is one.
    fn base_file(&self, path: &str) -> Result<Option<Oid>, RepoError> {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        let cached = self.folders.borrow().get(dir).cloned();
        let entries = if let Some(entries) = cached {
            entries
        } else {
            let entries = self.repo.folder_entries(self.base, dir)?.map(Rc::new);
            self.folders
                .borrow_mut()
                .insert(dir.to_string(), entries.clone());
            entries
        };
        Ok(entries
            .and_then(|e| e.get(name).copied())
            .and_then(|entry| entry.file.then_some(entry.id)))
    }

    /// Whether applying `updates` would change what this view shows.
    pub fn would_change(&self, updates: &[PathUpdate]) -> Result<bool, IoFailure> {
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
    #[must_use]
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
    fn read(&self, path: &str) -> Result<Option<Vec<u8>>, IoFailure> {
        let path = normalize(path);
        if let Some(change) = self.changes.get(&path) {
            return Ok(change.clone());
        }
        match self.base_file(&path)? {
            Some(id) => Ok(Some(self.repo.read_blob(id)?)),
            None => Ok(None),
        }
    }

    fn file_id(&self, path: &str) -> Result<Option<String>, IoFailure> {
        let path = normalize(path);
        if let Some(change) = self.changes.get(&path) {
            return Ok(change.as_deref().map(blob_id));
        }
        Ok(self.base_file(&path)?.map(|o| o.to_string()))
    }

    fn exists(&self, path: &str) -> Result<bool, IoFailure> {
        let path = normalize(path);
        if let Some(change) = self.changes.get(&path) {
            return Ok(change.is_some());
        }
        Ok(self.base_file(&path)?.is_some())
    }

    fn files(&self, dir: &str) -> Result<Vec<(String, String)>, IoFailure> {
        let base = self
            .repo
            .list_file_ids(self.base, dir.trim_matches('/'))?
            .into_iter()
            .map(|(path, id)| (path, id.to_string()))
            .collect();
        files_with_changes(base, &self.changes, &dir_prefix(dir))
    }

    fn folder_id(&self, dir: &str) -> Result<Option<String>, IoFailure> {
        if changes_in(&self.changes, &dir_prefix(dir)).next().is_some() {
            return Ok(None);
        }
        Ok(self
            .repo
            .folder_tree(self.base, dir)?
            .map(|id| id.to_string()))
    }

    fn changed_since(&self, dir: &str, since: &str) -> Result<Option<Vec<String>>, IoFailure> {
        let Ok(since) = Oid::from_str(since) else {
            return Ok(None);
        };
        let Some(changed) = self.repo.changed_files(since, self.base, dir)? else {
            return Ok(None);
        };
        let mut paths: BTreeSet<String> = changed.into_iter().collect();
        paths.extend(changes_in(&self.changes, &dir_prefix(dir)).map(|(path, _)| path.clone()));
        Ok(Some(paths.into_iter().collect()))
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, IoFailure> {
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
    use backflow_branch::LayeredView;

    /// A view answering `files` with the trait's default, to compare the walks against.
    struct DefaultFiles<'a>(&'a dyn TreeView);

    impl TreeView for DefaultFiles<'_> {
        fn read(&self, path: &str) -> Result<Option<Vec<u8>>, IoFailure> {
            self.0.read(path)
        }
        fn list(&self, dir: &str) -> Result<Vec<String>, IoFailure> {
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
                .map(|(p, c)| (p.to_string(), blob_id(c.as_bytes())))
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
        // Whether a file is there, answered without reading it, agrees with reading it: in
        // the base, changed, removed, added, never there, a folder.
        for path in ["d/a", "d/b", "d/c", "d/zz", "d"] {
            let there = |view: &dyn TreeView| view.exists(path).expect("exists");
            assert_eq!(there(&o), o.read(path).expect("read").is_some(), "{path}");
            assert_eq!(
                there(&layered),
                layered.read(path).expect("read").is_some(),
                "{path}"
            );
        }
        let t = o.write().expect("write");
        assert_eq!(repo.list_files(t, "").expect("list"), vec!["d/b", "d/c"]);
        assert_eq!(Overlay::new(&repo, base).write().expect("write"), base);
    }

    /// A folder's tree is named while nothing is planned under it, and the files that differ
    /// since a named folder tree are exactly those a write changed there (plus what is planned
    /// on top), whatever changed elsewhere.
    // One scenario over one repository, each step building on the trees the one before wrote:
    // kept whole rather than split into steps that would each rebuild them.
    #[test]
    fn a_folder_tree_is_named_and_diffed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = LocalRepo::open_or_init(&dir.path().join("c.git")).expect("init");
        let write = |base: Oid, files: &[(&str, Option<&str>)]| {
            let updates = files
                .iter()
                .map(|(p, c)| (p.to_string(), c.map(|c| c.as_bytes().to_vec())))
                .collect();
            repo.apply_updates(base, &updates).expect("tree")
        };
        let empty = repo.empty_tree().expect("empty");
        let first = write(
            empty,
            &[
                ("d/a", Some("1")),
                ("d/b", Some("2")),
                ("d/s/x", Some("3")),
                ("e/x", Some("4")),
            ],
        );
        let then = Overlay::new(&repo, first);
        let d0 = then.folder_id("d").expect("named").expect("a folder");
        assert_eq!(then.folder_id("nowhere").expect("named"), None);
        assert_eq!(then.folder_id("").expect("named"), Some(first.to_string()));
        assert_eq!(
            then.changed_since("d", &d0).expect("diffed"),
            Some(Vec::new()),
            "a folder has not changed since itself"
        );

        let second = write(
            first,
            &[
                ("d/a", None),
                ("d/b", Some("22")),
                ("d/c", Some("5")),
                ("d/s/x", Some("33")),
                ("e/x", Some("44")),
            ],
        );
        let now = Overlay::new(&repo, second);
        assert_ne!(now.folder_id("d").expect("named"), Some(d0.clone()));
        let changed = |view: &dyn TreeView, dir: &str, since: &str| {
            view.changed_since(dir, since).expect("diffed")
        };
        assert_eq!(
            changed(&now, "d", &d0),
            Some(vec![
                "d/a".into(),
                "d/b".into(),
                "d/c".into(),
                "d/s/x".into()
            ])
        );
        assert_eq!(
            changed(&now, "", &first.to_string()),
            Some(vec![
                "d/a".into(),
                "d/b".into(),
                "d/c".into(),
                "d/s/x".into(),
                "e/x".into()
            ])
        );
        let gone = write(second, &[("d/b", None), ("d/c", None), ("d/s/x", None)]);
        assert_eq!(
            changed(&Overlay::new(&repo, gone), "d", &d0),
            Some(vec!["d/a".into(), "d/b".into(), "d/s/x".into()]),
            "a folder that is gone differs in every file it had"
        );
        // A tree the store never had, or no tree id at all: the caller reads the folder whole.
        assert_eq!(changed(&now, "d", &"1".repeat(40)), None);
        assert_eq!(changed(&now, "d", "not an id"), None);

        // What is planned on top unnames the folder and shows among the changes.
        let mut planned = Overlay::new(&repo, second);
        planned.apply(vec![PathUpdate::write("d/z", "9")]);
        assert_eq!(planned.folder_id("d").expect("named"), None);
        assert!(planned.folder_id("e").expect("named").is_some());
        assert_eq!(
            changed(&planned, "d", &d0).map(|c| c.contains(&"d/z".to_string())),
            Some(true)
        );
        let mut layered = LayeredView::new(&now);
        assert_eq!(
            layered.folder_id("d").expect("named"),
            now.folder_id("d").expect("named")
        );
        layered.record(Ok(vec![PathUpdate::write("d/y", "8")]));
        assert_eq!(layered.folder_id("d").expect("named"), None);
        assert_eq!(
            changed(&layered, "d", &d0).map(|c| c.contains(&"d/y".to_string())),
            Some(true)
        );
    }
}
