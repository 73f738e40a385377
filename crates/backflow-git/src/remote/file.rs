//! A bare repository on this machine, updated in process with an atomic compare-and-swap.

use std::collections::BTreeSet;
use std::path::PathBuf;

use git2::{ErrorCode, ObjectType, Oid, Repository};

use super::{ExpectedTip, GitRemote, PushOutcome, RemoteError, RemoteErrorKind, RemoteOp};
use crate::repo::{LocalRepo, tracking_ref};

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
/// object store keeps), so only the changed part of each commit is walked.
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
    let mut order = Vec::new();
    let mut seen = BTreeSet::new();
    let mut stack = vec![tip];
    while let Some(oid) = stack.pop() {
        if !seen.insert(oid) || dst_odb.exists(oid) {
            continue;
        }
        let commit = src.find_commit(oid)?;
        stack.extend(commit.parent_ids());
        order.push((oid, commit.tree_id()));
    }
    for (commit, tree) in order.into_iter().rev() {
        copy_tree(src, &src_odb, &dst_odb, tree)?;
        copy_object(&src_odb, &dst_odb, commit)?;
    }
    Ok(())
}

fn copy_tree(
    src: &Repository,
    src_odb: &git2::Odb<'_>,
    dst_odb: &git2::Odb<'_>,
    tree: Oid,
) -> Result<(), git2::Error> {
    if dst_odb.exists(tree) {
        return Ok(());
    }
    let t = src.find_tree(tree)?;
    for entry in t.iter() {
        match entry.kind() {
            Some(ObjectType::Tree) => copy_tree(src, src_odb, dst_odb, entry.id())?,
            Some(ObjectType::Blob) if !dst_odb.exists(entry.id()) => {
                copy_object(src_odb, dst_odb, entry.id())?
            }
            // Blobs already there, and submodule commits (not ours to copy).
            _ => {}
        }
    }
    copy_object(src_odb, dst_odb, tree)
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
