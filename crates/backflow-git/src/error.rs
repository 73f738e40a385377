//! Errors of the local repository cache.
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

pub use backflow_branch::TreeError;

impl From<RepoError> for backflow_branch::IoFailure {
    fn from(e: RepoError) -> Self {
        Self::new(e)
    }
}
