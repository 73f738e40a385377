//! Writes that wait for Git: the contract between the API server (which answers the write) and
//! the mirror (which knows when the commit holding it is on the remote).

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::ObjectKey;

/// What became of a write that waited for publication.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Publication {
    /// The commit that holds the write is on the remote.
    Pushed(String),
    /// No `GitTarget` mirrors this object.
    NotMirrored,
    /// Not on the remote yet (timeout, or the remote is unreachable); it will be pushed.
    Pending,
    /// Stored, but the mirror refuses to place it in Git (an anchor, a foreign file, a
    /// duplicate identity): it will not be pushed until what is in the way changes. The reason
    /// is for the client (a `Warning` header).
    Refused(String),
}

impl Publication {
    /// The `X-Backflow-Commit` header value: a SHA, `not-mirrored`, `pending` or `refused`.
    #[must_use]
    pub fn header_value(&self) -> &str {
        match self {
            Self::Pushed(sha) => sha,
            Self::NotMirrored => "not-mirrored",
            Self::Pending => "pending",
            Self::Refused(_) => "refused",
        }
    }

    /// What the client should be warned of, if anything.
    #[must_use]
    pub fn warning(&self) -> Option<String> {
        match self {
            Self::Refused(reason) => Some(format!("stored, but not written to Git: {reason}")),
            _ => None,
        }
    }
}

/// Reports when a stored write reaches the Git remote.
pub trait PublicationWaiter: Send + Sync {
    /// Resolves once the write that gave `key` the resourceVersion `resource_version` is
    /// published, or with [`Publication::Pending`] after `timeout`.
    fn wait(
        &self,
        key: ObjectKey,
        resource_version: u64,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Publication> + Send + 'static>>;
}
