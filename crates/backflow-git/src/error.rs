//! Errors of the local repository cache.
//!
//! Remote errors live in [`crate::remote`], next to the transports that produce them.

use std::path::{Path, PathBuf};

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
    /// What failed underneath.
    #[source]
    pub source: StoreError,
}

/// What failed underneath a [`RepoError`]: libgit2, or a file this crate writes itself (a pack).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// libgit2 refused or failed.
    #[error(transparent)]
    Git(#[from] git2::Error),
    /// Reading or writing a file of the object store failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done, in words (`"writing a pack"`).
        op: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An object copied from one store to another came out with another id.
    #[error("object {expected} was written as {written}")]
    WrittenAs {
        /// The id it had.
        expected: git2::Oid,
        /// The id the destination gave it.
        written: git2::Oid,
    },
}

impl StoreError {
    pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }
}

pub(crate) use backflow_branch::TreeError;

impl From<RepoError> for backflow_branch::IoFailure {
    fn from(e: RepoError) -> Self {
        Self::new(e)
    }
}
