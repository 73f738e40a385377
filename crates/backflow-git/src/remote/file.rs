//! A bare repository on this machine, updated in process with an atomic compare-and-swap.

use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::{ErrorCode, Oid, Repository};

use super::{ExpectedTip, GitRemote, PushOutcome, RemoteError, RemoteErrorKind, RemoteOp};
use crate::error::StoreError;
use crate::pack::{RollUpPace, copy_commits, roll_up_small_packs};
use crate::repo::{LocalRepo, tracking_ref};

/// How old a ref's lock file must be before it is taken for one a killed pusher left: a pusher
/// (git's receive-pack, libgit2) holds it only while it writes one ref.
const STALE_LOCK: Duration = Duration::from_secs(10);

/// Removes `<git dir>/<name>.lock` when it is older than [`STALE_LOCK`]: a pusher killed while
/// it held it (kill -9, a lost node) leaves it, neither git nor libgit2 ever removes it, and
/// every later push to the branch — ours and people's — would fail. Whether it removed one.
fn clear_stale_lock(git_dir: &Path, name: &str) -> bool {
    let lock = git_dir.join(format!("{name}.lock"));
    let Some(age) = std::fs::metadata(&lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|m| m.elapsed().ok())
    else {
        return false;
    };
    if age < STALE_LOCK {
        return false;
    }
    match std::fs::remove_file(&lock) {
        Ok(()) => {
            tracing::warn!(lock = %lock.display(), age_s = age.as_secs(), "removed a ref lock a killed pusher left");
            true
        }
        Err(e) => {
            tracing::warn!(lock = %lock.display(), error = %e, "cannot remove a stale ref lock");
            false
        }
    }
}

/// A `file://` remote (or a plain path to a bare repository).
///
/// Pushing copies the missing objects into the remote's object database (one pack, or loose
/// objects for a few; small packs are rolled up as they accumulate, see `pack.rs`) and then
/// moves the branch with libgit2's `reference_create_matching`, which takes the ref's lock file
/// and compares the current value under it: the same lock `git receive-pack` takes, so
/// concurrent `git push`es to the same repository are serialized with ours, and a stale
/// expectation is refused.
/// Server-side hooks are not run; use the CLI transport where they matter.
pub struct FileRemote {
    url: String,
    path: PathBuf,
    // Opened lazily and dropped on any error, so a repository that disappears and comes back
    // (moved away, restored) is found again.
    repo: Option<Repository>,
    roll_up: RollUpPace,
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
            roll_up: RollUpPace::default(),
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

    /// [`FileRemote::fail`] for a copy of objects, which may fail outside libgit2 too.
    fn fail_copy(&mut self, op: RemoteOp, e: &StoreError) -> RemoteError {
        match e {
            StoreError::Git(e) => self.fail(op, RemoteErrorKind::Unreachable, e),
            e => {
                self.repo = None;
                RemoteError::new(op, &self.url, RemoteErrorKind::Unreachable, e.to_string())
            }
        }
    }

    /// Rolls the remote's small packs up. A failure leaves more packs than needed, nothing
    /// else: it is logged.
    fn roll_up(&mut self) {
        let Some(repo) = &self.repo else { return };
        match roll_up_small_packs(repo) {
            Ok(true) => self.packs_rolled_up(),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(remote = %self.url, error = %e, "cannot roll the remote's small packs up");
            }
        }
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

    fn maintain(&mut self) -> bool {
        if !self.roll_up.due() {
            return false;
        }
        self.roll_up();
        true
    }

    fn roll_up_due(&mut self) -> Option<PathBuf> {
        self.roll_up.due().then(|| self.path.clone())
    }

    fn packs_rolled_up(&mut self) {
        // Opened again at the next use, so it lists the packs that are there now.
        self.repo = None;
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
                    let result = copy_commits(self.open(op)?, repo.git2(), oid, &[]);
                    // The cache's small packs are rolled up by its next build.
                    if let Err(e) = result {
                        return Err(self.fail_copy(op, &e));
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
        // The build's packs, written once into the cache, are linked here when they hold what
        // the remote lacks.
        let packs = match copy_commits(repo.git2(), self.open(op)?, new, &repo.built_packs()) {
            Ok(packs) => packs.len(),
            Err(e) => return Err(self.fail_copy(op, &e)),
        };
        let name = format!("refs/heads/{branch}");
        let message = "backflow: compare-and-swap push";
        let remote = self.open(op)?;
        let update = |remote: &Repository| match expected {
            ExpectedTip::At(old) => remote
                .reference_matching(&name, new, true, old, message)
                .map(|_| ()),
            ExpectedTip::Absent => remote.reference(&name, new, false, message).map(|_| ()),
        };
        let mut result = update(remote);
        if matches!(&result, Err(e) if e.code() == ErrorCode::Locked)
            && clear_stale_lock(remote.path(), &name)
        {
            result = update(remote);
        }
        match result {
            Ok(()) => {
                // Rolled up by `maintain`, once the writes this push published are answered.
                self.roll_up.wrote(packs);
                Ok(PushOutcome::Accepted)
            }
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use git2::{Repository, Signature};

    use super::*;
    use backflow_testkit::git_out;

    use crate::pack::PACK_CHUNK;
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

    /// Paths and contents as the file writes [`commit`] takes.
    fn written(files: &[(String, String)]) -> Vec<(&str, Option<&str>)> {
        files
            .iter()
            .map(|(p, c)| (p.as_str(), Some(c.as_str())))
            .collect()
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

    /// A hundred pushes of eight files each leave no loose object and a bounded number of packs
    /// in the remote, which the real git finds whole (before, each push left 18 loose files).
    /// A killed pusher's lock on the branch (kill -9 in the middle of a push) is cleared once
    /// it is stale, and the push goes through; a fresh one is a pusher at work: refused, kept.
    #[test]
    fn a_stale_ref_lock_a_killed_pusher_left_is_cleared_and_a_fresh_one_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = LocalRepo::open_or_init(&dir.path().join("src.git")).expect("src");
        let remote_path = dir.path().join("remote.git");
        LocalRepo::init_remote(&remote_path, "main").expect("remote");
        let mut remote = FileRemote::new(&format!("file://{}", remote_path.display()));
        let tree = src.empty_tree().expect("empty");
        let first = commit(&src, tree, &[], &[("a.yaml", Some("a: 1\n"))]);
        let lock = remote_path.join("refs/heads/main.lock");
        std::fs::create_dir_all(lock.parent().expect("refs/heads")).expect("refs/heads");
        std::fs::write(&lock, "").expect("a fresh lock");
        let refused = remote.push(&src, "main", first, ExpectedTip::Absent);
        assert!(refused.is_err(), "{refused:?}");
        assert!(lock.exists(), "a fresh lock is a pusher at work");
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&lock)
            .and_then(|f| f.set_modified(old))
            .expect("age the lock");
        let outcome = remote
            .push(&src, "main", first, ExpectedTip::Absent)
            .expect("push");
        assert!(matches!(outcome, PushOutcome::Accepted), "{outcome:?}");
        assert!(!lock.exists());
    }

    #[test]
    fn small_pushes_leave_few_packs_and_no_loose_objects() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = LocalRepo::open_or_init(&dir.path().join("src.git")).expect("src");
        let remote_path = dir.path().join("remote.git");
        LocalRepo::init_remote(&remote_path, "main").expect("remote");
        let mut remote = FileRemote::new(&format!("file://{}", remote_path.display()));
        let mut tip = None;
        let mut tree = src.empty_tree().expect("empty");
        for i in 0..100 {
            // Eight files: a commit of a group of writes, worth a pack.
            let files: Vec<(String, String)> = (0..8)
                .map(|j| (format!("live/ns{j}/f{i}.yaml"), format!("n: {i}.{j}\n")))
                .collect();
            let parents: Vec<Oid> = tip.into_iter().collect();
            let next = commit(&src, tree, &parents, &written(&files));
            let expected = tip.map_or(ExpectedTip::Absent, ExpectedTip::At);
            let before = crate::pack::pack_count(&remote_path);
            let outcome = remote.push(&src, "main", next, expected).expect("push");
            assert!(matches!(outcome, PushOutcome::Accepted), "push {i}");
            // The push only adds its pack; rolling up waits for `maintain`.
            assert_eq!(
                crate::pack::pack_count(&remote_path),
                before + 1,
                "push {i}"
            );
            remote.maintain();
            tip = Some(next);
            tree = tree_of(&src, next);
        }
        assert_eq!(crate::pack::loose_count(&remote_path), 0);
        let packs = crate::pack::pack_count(&remote_path);
        assert!((2..=20).contains(&packs), "{packs} packs after 100 pushes");
        let tip = tip.expect("pushed");
        assert_complete(&Repository::open_bare(&remote_path).expect("open"), tip);
        git_out(&remote_path, &["fsck", "--full", "--strict"]);
        let count = git_out(&remote_path, &["rev-list", "--count", "main"]);
        assert_eq!(count.trim(), "100");
    }

    /// A cache at `dir/cache.git` and an empty bare remote at `dir/remote.git` (branch `main`),
    /// with the `file://` remote that pushes to it.
    fn cache_and_remote(dir: &std::path::Path) -> (LocalRepo, PathBuf, FileRemote) {
        let cache = LocalRepo::open_or_init(&dir.join("cache.git")).expect("cache");
        let remote_path = dir.join("remote.git");
        LocalRepo::init_remote(&remote_path, "main").expect("remote");
        let remote = FileRemote::new(&format!("file://{}", remote_path.display()));
        (cache, remote_path, remote)
    }

    /// A build staged in memory is written into the cache as one pack, and a push to a
    /// `file://` remote that lacks exactly its objects links that pack there: one file on disk,
    /// written and hashed once, which the real git finds sound in the remote. So it is for
    /// every build, those after which the cache's packs are rolled up too (housekeeping after
    /// the push, not between the build and its push).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_builds_pack_is_linked_into_the_remote_not_written_again() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut cache, remote_path, mut remote) = cache_and_remote(dir.path());
        let who = crate::repo::Identity::default();
        let mut tree = cache.empty_tree().expect("empty");
        let mut tip = None;
        for round in 0..12 {
            cache.stage().expect("stage");
            let files: BTreeMap<String, Option<Vec<u8>>> = (0..12)
                .map(|i| {
                    (
                        format!("live/ns{i}/f.yaml"),
                        Some(format!("{round}.{i}\n").into_bytes()),
                    )
                })
                .collect();
            tree = cache.apply_updates(tree, &files).expect("apply");
            let next = cache
                .write_commit(tree, tip, &who, &who, std::time::SystemTime::now(), "m")
                .expect("commit");
            cache.unstage(Some(next)).expect("unstage");
            let built = cache
                .built_packs()
                .last()
                .expect("the build's pack")
                .clone();
            let expected = tip.map_or(ExpectedTip::Absent, ExpectedTip::At);
            let outcome = remote.push(&cache, "main", next, expected).expect("push");
            assert!(matches!(outcome, PushOutcome::Accepted));
            let name = built.stem.file_name().expect("name");
            let linked = remote_path
                .join("objects/pack")
                .join(name)
                .with_extension("pack");
            let built_file = std::fs::metadata(built.stem.with_extension("pack")).expect("built");
            let remote_file = std::fs::metadata(&linked).expect("the same pack in the remote");
            assert_eq!(
                (remote_file.ino(), remote_file.nlink()),
                (built_file.ino(), 2),
                "round {round}: linked, not written again"
            );
            cache.roll_up_packs().expect("roll up");
            remote.maintain();
            tip = Some(next);
        }
        assert!(
            crate::pack::pack_count(&dir.path().join("cache.git")) < 12,
            "the cache's packs were rolled up"
        );
        assert_eq!(crate::pack::loose_count(&remote_path), 0);
        git_out(
            &remote_path,
            &["fsck", "--full", "--strict", "--no-dangling"],
        );
        let shown = git_out(&remote_path, &["cat-file", "-p", "main:live/ns11/f.yaml"]);
        assert_eq!(shown, "11.11\n");
    }

    /// A copy of a lone object shares the source's loose file (a hard link); across file
    /// systems (the cache in tmpfs, the remote on disk) a hard link is impossible: objects are
    /// copied instead, and the copy is as sound.
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
        // A commit that changes no file: one object, fewer than a pack is worth.
        let next = commit(&src, tree_of(&src, root), &[root], &[]);
        let dst = LocalRepo::open_or_init(&dst_dir.path().join("dst.git")).expect("dst");
        let packs = copy_commits(src.git2(), dst.git2(), root, &[])
            .expect("copy")
            .len();
        assert_eq!(packs, 1, "four objects are a pack");
        let packs = copy_commits(src.git2(), dst.git2(), next, &[])
            .expect("copy")
            .len();
        assert_eq!(packs, 0, "one object is a file");
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

    /// A snapshot-sized build (its blobs in packs of [`PACK_CHUNK`] written as they fill, then
    /// the pack of its trees and commit) is pushed by linking every one of those packs into
    /// the remote, none written again; the real git finds the remote sound.
    #[test]
    fn a_snapshots_packs_are_all_linked_into_the_remote() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut cache, remote_path, mut remote) = cache_and_remote(dir.path());
        let who = crate::repo::Identity::default();
        cache.stage().expect("stage");
        let files: BTreeMap<String, Option<Vec<u8>>> = (0..PACK_CHUNK + 50)
            .map(|i| {
                (
                    format!("live/f{i:05}.yaml"),
                    Some(format!("n: {i}\n").into_bytes()),
                )
            })
            .collect();
        let tree = cache
            .apply_updates(cache.empty_tree().expect("empty"), &files)
            .expect("apply");
        let tip = cache
            .write_commit(tree, None, &who, &who, std::time::SystemTime::now(), "m")
            .expect("commit");
        cache.unstage(Some(tip)).expect("unstage");
        let built = cache.built_packs().clone();
        assert_eq!(built.len(), 3, "two blob packs, then trees and commit");

        let outcome = remote
            .push(&cache, "main", tip, ExpectedTip::Absent)
            .expect("push");

        assert!(matches!(outcome, PushOutcome::Accepted));
        for pack in &built {
            let name = pack.stem.file_name().expect("name");
            let there = remote_path.join("objects/pack").join(name);
            for ext in ["pack", "idx"] {
                let ours = std::fs::metadata(pack.stem.with_extension(ext)).expect("built");
                let theirs =
                    std::fs::metadata(there.with_extension(ext)).expect("the same file there");
                assert_eq!(
                    theirs.ino(),
                    ours.ino(),
                    "{name:?}.{ext} linked, not written"
                );
            }
        }
        assert_eq!(crate::pack::pack_count(&remote_path), 3);
        git_out(&remote_path, &["fsck", "--full", &tip.to_string()]);
    }

    /// More objects than one pack takes land as packs of [`PACK_CHUNK`], complete and sound.
    #[test]
    fn a_large_push_lands_as_packs_the_real_git_finds_sound() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = LocalRepo::open_or_init(&dir.path().join("src.git")).expect("src");
        let empty = src.empty_tree().expect("empty");
        let files: Vec<(String, String)> = (0..PACK_CHUNK + 50)
            .map(|i| (format!("live/f{i:05}.yaml"), format!("n: {i}\n")))
            .collect();
        let first = commit(&src, empty, &[], &written(&files));
        let second = commit(
            &src,
            tree_of(&src, first),
            &[first],
            &[("live/f00001.yaml", Some("n: one\n"))],
        );
        let dst_path = dir.path().join("dst.git");
        let dst = LocalRepo::open_or_init(&dst_path).expect("dst");
        copy_commits(src.git2(), dst.git2(), second, &[]).expect("copy");
        assert_complete(dst.git2(), second);
        assert_eq!(
            crate::pack::pack_count(&dst_path),
            2,
            "{} objects in packs of {PACK_CHUNK}",
            PACK_CHUNK + 50
        );
        git_out(&dst_path, &["fsck", "--full", &second.to_string()]);
    }

    /// A history with a merge whose parents share folders, copied whole and then on top of a
    /// partial copy: the destination ends up with every object, though each commit's tree is
    /// only compared with its first parent's.
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
        copy_commits(src.git2(), whole.git2(), after, &[]).expect("copy");
        assert_complete(whole.git2(), after);
        // One pack, no loose object, and the real git finds it sound.
        assert_eq!(crate::pack::pack_count(&dir.path().join("whole.git")), 1);
        assert_eq!(crate::pack::loose_count(&dir.path().join("whole.git")), 0);
        whole
            .git2()
            .reference("refs/heads/main", after, true, "test")
            .expect("branch");
        git_out(
            dir.path().join("whole.git"),
            &["fsck", "--full", "--strict"],
        );

        let partial = LocalRepo::open_or_init(&dir.path().join("partial.git")).expect("dst");
        copy_commits(src.git2(), partial.git2(), left, &[]).expect("copy the left side");
        assert_complete(partial.git2(), left);
        copy_commits(src.git2(), partial.git2(), after, &[]).expect("copy the rest");
        assert_complete(partial.git2(), after);
    }
}
