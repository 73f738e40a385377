//! What a folder's history holds, for people (`backflow history`, `backflow why`): the commits
//! on a branch's first-parent line that changed files under a folder, each with its author,
//! message and the changed files' contents before and after.

use git2::Oid;

use backflow_branch::CommitId;

use crate::RepoError;
use crate::repo::{Identity, LocalRepo};
use crate::worker::commit_id;

/// How many commits a history walk reads at most, whatever it finds: a folder that changed
/// long ago costs a bounded walk, not the whole branch.
pub const HISTORY_WALK: usize = 2_000;

/// A folder's recent history on a branch, and who backflow commits as there (its own commits
/// are those it committed: live edits it carried, resyncs, saves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderHistory {
    /// The committer of backflow's commits on the branch.
    pub backflow: Identity,
    /// The commits that changed the folder, newest first.
    pub changes: Vec<FolderChange>,
}

/// One commit that changed files under a folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderChange {
    /// The commit.
    pub commit: CommitId,
    /// Who wrote the change.
    pub author: Identity,
    /// When, in seconds since the Unix epoch (the author's time).
    pub time: i64,
    /// Who made the commit.
    pub committer: Identity,
    /// Its whole message.
    pub message: String,
    /// The files it changed under the folder, sorted by path.
    pub files: Vec<ChangedFile>,
}

/// One file a commit changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedFile {
    /// Its path from the root of the tree.
    pub path: String,
    /// Its bytes in the commit's first parent (`None`: the commit added it).
    pub before: Option<Vec<u8>>,
    /// Its bytes in the commit (`None`: the commit removed it).
    pub after: Option<Vec<u8>>,
}

impl LocalRepo {
    /// The commits on `commit`'s first-parent line that changed files under `dir` (`""`: the
    /// whole tree), newest first: at most `limit` of them, found within [`HISTORY_WALK`]
    /// commits.
    pub fn folder_history(
        &self,
        commit: Oid,
        dir: &str,
        limit: usize,
    ) -> Result<Vec<FolderChange>, RepoError> {
        let mut found = Vec::new();
        let mut at = Some(commit);
        for _ in 0..HISTORY_WALK {
            let Some(c) = at else { break };
            if found.len() >= limit {
                break;
            }
            if let Some(change) = self.folder_change(c, dir)? {
                found.push(change);
            }
            at = self.parent(c)?;
        }
        Ok(found)
    }

    /// What `commit` changed under `dir`, against its first parent (the empty tree for a root
    /// commit); `None` when it changed nothing there.
    fn folder_change(&self, commit: Oid, dir: &str) -> Result<Option<FolderChange>, RepoError> {
        let repo = self.git2();
        let what = |e: git2::Error| RepoError {
            op: format!("reading the history of {dir} at {commit}"),
            path: self.path().to_path_buf(),
            source: e.into(),
        };
        let c = repo.find_commit(commit).map_err(what)?;
        let old = match c.parents().next() {
            Some(parent) => Some(parent.tree().map_err(what)?),
            None => None,
        };
        let new = c.tree().map_err(what)?;
        let mut opts = git2::DiffOptions::new();
        if !dir.is_empty() {
            opts.pathspec(dir);
        }
        let diff = repo
            .diff_tree_to_tree(old.as_ref(), Some(&new), Some(&mut opts))
            .map_err(what)?;
        let mut files = Vec::new();
        for delta in diff.deltas() {
            let path = delta
                .new_file()
                .path()
                .or_else(|| delta.old_file().path())
                .and_then(|p| p.to_str())
                .map(str::to_string);
            let Some(path) = path else { continue };
            let blob = |id: Oid| -> Result<Option<Vec<u8>>, RepoError> {
                if id.is_zero() {
                    Ok(None)
                } else {
                    self.read_blob(id).map(Some)
                }
            };
            files.push(ChangedFile {
                path,
                before: blob(delta.old_file().id())?,
                after: blob(delta.new_file().id())?,
            });
        }
        if files.is_empty() {
            return Ok(None);
        }
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let identity = |s: git2::Signature<'_>| {
            Identity::new(
                String::from_utf8_lossy(s.name_bytes()),
                String::from_utf8_lossy(s.email_bytes()),
            )
        };
        Ok(Some(FolderChange {
            commit: commit_id(commit),
            author: identity(c.author()),
            time: c.author().when().seconds(),
            committer: identity(c.committer()),
            message: String::from_utf8_lossy(c.message_bytes()).into_owned(),
            files,
        }))
    }
}
