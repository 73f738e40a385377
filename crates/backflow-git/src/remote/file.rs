//! A bare repository on this machine, updated in process with an atomic compare-and-swap.

use std::collections::BTreeSet;
use std::path::PathBuf;

use git2::{ErrorCode, ObjectType, Oid, Repository};

use super::{ExpectedTip, GitRemote, PushOutcome, RemoteError, RemoteErrorKind, RemoteOp};
use crate::repo::{LocalRepo, PACK_CHUNK, PACK_FROM, copy_as_pack, tracking_ref};

/// A `file://` remote (or a plain path to a bare repository).
///
/// Pushing copies the missing objects into the remote's object database and then moves the
/// branch with libgit2's `reference_create_matching`, which takes the ref's lock file and compares
/// the current value under it: the same lock `git receive-pack` takes, so concurrent `git push`es
/// to the same repository are serialized with ours, and a stale expectation is refused.
/// Server-side hooks are not run; use the CLI transport where they matter.
pub struct FileRemote {
    url: String,
    path: PathBuf,
    // Opened lazily and dropped on any error, so a repository that disappears and comes back
    // (moved away, restored) is found again.
    repo: Option<Repository>,
}

impl FileRemote {
    /// A remote for `url` (`file:///path` or `/path`). Nothing is opened yet.
    #[must_use]
    pub fn new(url: &str) -> Self {
        let path = url
            .strip_prefix("file://localhost")
            .or_else(|| url.strip_prefix("file://"))
            .unwrap_or(url);
        Self {
            url: url.to_string(),
            path: PathBuf::from(path),
            repo: None,
        }
    }

    fn open(&mut self, op: RemoteOp) -> Result<&Repository, RemoteError> {
        if self.repo.is_none() {
            let repo = Repository::open_bare(&self.path).map_err(|e| {
                RemoteError::new(
                    op,
                    &self.url,
                    RemoteErrorKind::Unreachable,
                    e.message().to_string(),
                )
            })?;
            self.repo = Some(repo);
        }
        // Just set above when it was missing.
        self.repo.as_ref().ok_or_else(|| {
            RemoteError::new(op, &self.url, RemoteErrorKind::Unreachable, "not open")
        })
    }

    fn fail(&mut self, op: RemoteOp, kind: RemoteErrorKind, e: &git2::Error) -> RemoteError {
        self.repo = None;
        RemoteError::new(op, &self.url, kind, e.message().to_string())
    }

    fn tip(&mut self, op: RemoteOp, branch: &str) -> Result<Option<Oid>, RemoteError> {
        let name = format!("refs/heads/{branch}");
        let result = self.open(op)?.refname_to_id(&name);
        match result {
            Ok(oid) => Ok(Some(oid)),
            Err(e) if e.code() == ErrorCode::NotFound => Ok(None),
            Err(e) => Err(self.fail(op, RemoteErrorKind::Unreachable, &e)),
        }
    }
}

impl GitRemote for FileRemote {
    fn display_url(&self) -> &str {
        &self.url
    }

    fn ls_remote(&mut self, _repo: &LocalRepo, branch: &str) -> Result<Option<Oid>, RemoteError> {
        self.tip(RemoteOp::LsRemote, branch)
    }

    fn fetch(&mut self, repo: &LocalRepo, branch: &str) -> Result<Option<Oid>, RemoteError> {
        let op = RemoteOp::Fetch;
        let tip = self.tip(op, branch)?;
        match tip {
            Some(oid) => {
                if !repo.has_object(oid) {
                    let result = copy_commits(self.open(op)?, repo.git2(), oid);
                    if let Err(e) = result {
                        return Err(self.fail(op, RemoteErrorKind::Unreachable, &e));
                    }
                }
                repo.set_ref(&tracking_ref(branch), oid)
                    .map_err(|e| RemoteError::local(op, &self.url, &e))?;
            }
            None => repo
                .remove_ref(&tracking_ref(branch))
                .map_err(|e| RemoteError::local(op, &self.url, &e))?,
        }
        Ok(tip)
    }

    fn push(
        &mut self,
        repo: &LocalRepo,
        branch: &str,
        new: Oid,
        expected: ExpectedTip,
    ) -> Result<PushOutcome, RemoteError> {
        let op = RemoteOp::Push;
        let copied = copy_commits(repo.git2(), self.open(op)?, new);
        if let Err(e) = copied {
            return Err(self.fail(op, RemoteErrorKind::Unreachable, &e));
        }
        let name = format!("refs/heads/{branch}");
        let message = "backflow: compare-and-swap push";
        let remote = self.open(op)?;
        let result = match expected {
            ExpectedTip::At(old) => remote
                .reference_matching(&name, new, true, old, message)
                .map(|_| ()),
            ExpectedTip::Absent => remote.reference(&name, new, false, message).map(|_| ()),
        };
        match result {
            Ok(()) => Ok(PushOutcome::Accepted),
            Err(e)
                if matches!(
                    e.code(),
                    ErrorCode::Modified | ErrorCode::Exists | ErrorCode::NotFound
                ) =>
            {
                Ok(PushOutcome::Rejected {
                    reason: format!("stale info: expected {expected}: {}", e.message()),
                })
            }
            // Somebody else holds the ref's lock right now: nothing changed, try again later.
            Err(e) if e.code() == ErrorCode::Locked => {
                Err(self.fail(op, RemoteErrorKind::Protocol, &e))
            }
            Err(e) => Err(self.fail(op, RemoteErrorKind::Unreachable, &e)),
        }
    }
}

/// Copies `tip` and everything it reaches that `dst` lacks, oldest first, so `dst` never holds a
/// commit whose tree or parents are missing.
///
/// A tree already present in `dst` is assumed complete (the connectivity invariant every git
/// object store keeps), and each commit's tree is compared with its first parent's, which `dst`
/// holds by then: only what the commit changed is looked at, so a push costs what it changed,
/// not the size of the folders it touched.
pub(crate) fn copy_commits(
    src: &Repository,
    dst: &Repository,
    tip: Oid,
) -> Result<(), git2::Error> {
    let src_odb = src.odb()?;
    let dst_odb = dst.odb()?;
    if dst_odb.exists(tip) {
        return Ok(());
    }
    // Depth first, each commit listed after its parents (post-order), so every commit's first
    // parent is in `dst` before the commit is: parents first is what makes comparing with the
    // parent's tree sound, and what keeps `dst` connected if the copy stops half way.
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    let mut stack = vec![(tip, false)];
    while let Some((oid, parents_done)) = stack.pop() {
        if parents_done {
            let commit = src.find_commit(oid)?;
            let base = match commit.parent_ids().next() {
                Some(parent) => Some(src.find_commit(parent)?.tree_id()),
                None => None,
            };
            order.push((oid, commit.tree_id(), base));
            continue;
        }
        if !seen.insert(oid) || dst_odb.exists(oid) {
            continue;
        }
        let commit = src.find_commit(oid)?;
        stack.push((oid, true));
        stack.extend(commit.parent_ids().map(|p| (p, false)));
    }
    let mut copier = Copier {
        src,
        src_odb: &src_odb,
        dst_odb: &dst_odb,
        src_objects: src.path().join("objects"),
        dst_objects: dst.path().join("objects"),
        missing: Vec::new(),
    };
    for (commit, tree, base) in order {
        copier.tree(tree, base)?;
        copier.missing.push(commit);
    }
    copier.copy()
}

/// Copies objects from one object store to another.
struct Copier<'a> {
    src: &'a Repository,
    src_odb: &'a git2::Odb<'a>,
    dst_odb: &'a git2::Odb<'a>,
    src_objects: PathBuf,
    dst_objects: PathBuf,
    /// What `dst` lacks, each object after everything it refers to.
    missing: Vec<Oid>,
}

impl Copier<'_> {
    /// Copies what was found missing, in order: object by object for a few, as packs of
    /// [`PACK_CHUNK`] for many (one file per pack instead of one per object). Each pack holds
    /// only objects whose references are in it or in an earlier one, so `dst` stays connected
    /// whenever the copy stops.
    fn copy(&self) -> Result<(), git2::Error> {
        if self.missing.len() < PACK_FROM {
            return self.missing.iter().try_for_each(|oid| self.object(*oid));
        }
        for chunk in self.missing.chunks(PACK_CHUNK) {
            copy_as_pack(self.src, chunk, self.dst_odb)?;
        }
        Ok(())
    }

    /// Lists `tree` and what it holds that `base` (a tree `dst` holds completely) does not.
    fn tree(&mut self, tree: Oid, base: Option<Oid>) -> Result<(), git2::Error> {
        if base == Some(tree) || self.dst_odb.exists(tree) {
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
                Some(ObjectType::Blob) if !self.dst_odb.exists(entry.id()) => {
                    self.missing.push(entry.id());
                }
                // Blobs already there, and submodule commits (not ours to copy).
                _ => {}
            }
        }
        self.missing.push(tree);
        Ok(())
    }

    /// A loose object is hard-linked, as `git clone --local` does: loose object files are
    /// immutable and named by their content, so sharing the file is copying it, without
    /// reading, inflating, hashing and deflating it again. Anything else (a packed object,
    /// another file system) is read and written.
    fn object(&self, oid: Oid) -> Result<(), git2::Error> {
        let hex = oid.to_string();
        let (dir, file) = hex.split_at(2);
        let from = self.src_objects.join(dir).join(file);
        let to_dir = self.dst_objects.join(dir);
        // Only the fan-out folder is made: a store that went away is not recreated here.
        let linked = match std::fs::create_dir(&to_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => std::fs::hard_link(&from, to_dir.join(file)),
        };
        match linked {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(_) => copy_object(self.src_odb, self.dst_odb, oid),
        }
    }
}

fn copy_object(
    src_odb: &git2::Odb<'_>,
    dst_odb: &git2::Odb<'_>,
    oid: Oid,
) -> Result<(), git2::Error> {
    let obj = src_odb.read(oid)?;
    let written = dst_odb.write(obj.kind(), obj.data())?;
    if written != oid {
        return Err(git2::Error::from_str(&format!(
            "object {oid} was written as {written}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use git2::{Repository, Signature};

    use super::*;
    use crate::repo::LocalRepo;

    fn commit(repo: &LocalRepo, base: Oid, parents: &[Oid], files: &[(&str, Option<&str>)]) -> Oid {
        let updates: BTreeMap<String, Option<Vec<u8>>> = files
            .iter()
            .map(|(p, c)| (p.to_string(), c.map(|c| c.as_bytes().to_vec())))
            .collect();
        let tree = repo.apply_updates(base, &updates).expect("tree");
        let r = repo.git2();
        let sig = Signature::now("t", "t@example.invalid").expect("signature");
        let tree = r.find_tree(tree).expect("find tree");
        let parents: Vec<git2::Commit<'_>> = parents
            .iter()
            .map(|p| r.find_commit(*p).expect("parent"))
            .collect();
        let refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
        r.commit(None, &sig, &sig, "c", &tree, &refs)
            .expect("commit")
    }

    fn tree_of(repo: &LocalRepo, c: Oid) -> Oid {
        repo.git2().find_commit(c).expect("commit").tree_id()
    }

    /// Every object every commit reaches, read from `repo`'s own store.
    fn assert_complete(repo: &Repository, tip: Oid) {
        let mut walk = repo.revwalk().expect("revwalk");
        walk.push(tip).expect("push");
        for oid in walk {
            let commit = repo.find_commit(oid.expect("oid")).expect("commit present");
            let tree = commit.tree().expect("tree present");
            tree.walk(git2::TreeWalkMode::PreOrder, |_, e| {
                repo.find_object(e.id(), None)
                    .unwrap_or_else(|err| panic!("{} missing: {err}", e.id()));
                git2::TreeWalkResult::Ok
            })
            .expect("walk");
        }
    }

    /// Across file systems (the cache in tmpfs, the remote on disk) a hard link is impossible:
    /// objects are copied instead, and the copy is as sound.
    #[cfg(target_os = "linux")]
    #[test]
    fn objects_are_copied_where_they_cannot_be_linked() {
        use std::os::unix::fs::MetadataExt;
        let shm = std::path::Path::new("/dev/shm");
        let src_dir = tempfile::tempdir_in(shm).expect("a folder in /dev/shm");
        let dst_dir = tempfile::tempdir().expect("tempdir");
        let src = LocalRepo::open_or_init(&src_dir.path().join("src.git")).expect("src");
        let empty = src.empty_tree().expect("empty");
        let root = commit(&src, empty, &[], &[("d/a", Some("1"))]);
        let next = commit(&src, tree_of(&src, root), &[root], &[("d/b", Some("2"))]);
        let dst = LocalRepo::open_or_init(&dst_dir.path().join("dst.git")).expect("dst");
        copy_commits(src.git2(), dst.git2(), next).expect("copy");
        assert_complete(dst.git2(), next);
        let hex = next.to_string();
        let copied = dst_dir
            .path()
            .join("dst.git/objects")
            .join(&hex[..2])
            .join(&hex[2..]);
        let same_fs = std::fs::metadata(src_dir.path()).expect("src").dev()
            == std::fs::metadata(dst_dir.path()).expect("dst").dev();
        let links = std::fs::metadata(&copied).expect("loose commit").nlink();
        assert_eq!(
            links,
            if same_fs { 2 } else { 1 },
            "same file system: {same_fs}"
        );
    }

    /// A history with a merge whose parents share folders, copied whole and then on top of a
    /// partial copy: the destination ends up with every object, though each commit's tree is
    /// only compared with its first parent's.
    #[test]
    fn a_large_push_lands_as_packs_the_real_git_finds_sound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = LocalRepo::open_or_init(&dir.path().join("src.git")).expect("src");
        let empty = src.empty_tree().expect("empty");
        let files: Vec<(String, String)> = (0..PACK_CHUNK + 50)
            .map(|i| (format!("live/f{i:05}.yaml"), format!("n: {i}\n")))
            .collect();
        let refs: Vec<(&str, Option<&str>)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), Some(c.as_str())))
            .collect();
        let first = commit(&src, empty, &[], &refs);
        let second = commit(
            &src,
            tree_of(&src, first),
            &[first],
            &[("live/f00001.yaml", Some("n: one\n"))],
        );
        let dst_path = dir.path().join("dst.git");
        let dst = LocalRepo::open_or_init(&dst_path).expect("dst");
        copy_commits(src.git2(), dst.git2(), second).expect("copy");
        assert_complete(dst.git2(), second);
        assert_eq!(
            crate::repo::pack_count(&dst_path),
            2,
            "{} objects in packs of {PACK_CHUNK}",
            PACK_CHUNK + 50
        );
        let fsck = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&dst_path)
            .args(["fsck", "--full", &second.to_string()])
            .output()
            .expect("git runs");
        assert!(
            fsck.status.success(),
            "{}",
            String::from_utf8_lossy(&fsck.stderr)
        );
    }

    #[test]
    fn histories_with_merges_copy_completely() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = LocalRepo::open_or_init(&dir.path().join("src.git")).expect("src");
        let empty = src.empty_tree().expect("empty");
        let root = commit(&src, empty, &[], &[("d/a", Some("1")), ("d/b", Some("2"))]);
        let left = commit(
            &src,
            tree_of(&src, root),
            &[root],
            &[("d/a", Some("L")), ("e/x", Some("x"))],
        );
        let right = commit(
            &src,
            tree_of(&src, root),
            &[root],
            &[("d/b", Some("R")), ("f/y", Some("y"))],
        );
        let merge = commit(
            &src,
            tree_of(&src, left),
            &[left, right],
            &[("d/b", Some("R")), ("f/y", Some("y")), ("d/c", Some("M"))],
        );
        let after = commit(&src, tree_of(&src, merge), &[merge], &[("d/a", None)]);

        let whole = LocalRepo::open_or_init(&dir.path().join("whole.git")).expect("dst");
        copy_commits(src.git2(), whole.git2(), after).expect("copy");
        assert_complete(whole.git2(), after);
        // Loose objects were shared, not rewritten, and the real git finds them sound.
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            let hex = after.to_string();
            let linked = dir
                .path()
                .join("whole.git/objects")
                .join(&hex[..2])
                .join(&hex[2..]);
            assert_eq!(std::fs::metadata(&linked).expect("loose commit").nlink(), 2);
        }
        whole
            .git2()
            .reference("refs/heads/main", after, true, "test")
            .expect("branch");
        let fsck = std::process::Command::new("git")
            .args(["fsck", "--full", "--strict"])
            .current_dir(dir.path().join("whole.git"))
            .output()
            .expect("git fsck runs");
        assert!(
            fsck.status.success(),
            "{}",
            String::from_utf8_lossy(&fsck.stderr)
        );

        let partial = LocalRepo::open_or_init(&dir.path().join("partial.git")).expect("dst");
        copy_commits(src.git2(), partial.git2(), left).expect("copy the left side");
        assert_complete(partial.git2(), left);
        copy_commits(src.git2(), partial.git2(), after).expect("copy the rest");
        assert_complete(partial.git2(), after);
    }
}
