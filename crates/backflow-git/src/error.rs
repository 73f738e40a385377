//! Errors of the local repository cache and of planning.
//!
//! Remote errors live in [`crate::remote`], next to the transports that produce them.

use std::path::PathBuf;

/// A failure inside the local bare cache: reading or writing objects and refs.
///
/// These are local faults (disk, corruption), not "the remote moved"; the branch worker keeps its
/// pending writes and retries after a backoff.
#[derive(Debug, thiserror::Error)]
#[error("{op} in the local cache {path}: {source}")]
pub struct RepoError {
    /// What the cache was asked to do, in words (`"writing a blob"`).
    pub op: String,
    /// The cache's directory.
    pub path: PathBuf,
    /// The libgit2 error.
    #[source]
    pub source: git2::Error,
}

/// A planner could not place an intent into the tree.
///
/// The intent is dropped from its write and reported as refused; the rest of the write goes on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct PlanError {
    /// Why the intent cannot be placed, for status and logs.
    pub message: String,
}

impl PlanError {
    /// A refusal with this explanation.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// Reading the base tree on behalf of a planner failed.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// The object database could not be read.
    #[error(transparent)]
    Repo(#[from] RepoError),
    /// The planner refused the intent.
    #[error(transparent)]
    Plan(#[from] PlanError),
}
