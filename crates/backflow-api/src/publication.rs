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
    /// No GitTarget mirrors this object.
    NotMirrored,
    /// Not on the remote yet (timeout, or the remote is unreachable); it will be pushed.
    Pending,
}

impl Publication {
    /// The `X-Backflow-Commit` header value: a SHA, `not-mirrored` or `pending`.
    pub fn header_value(&self) -> &str {
        match self {
            Self::Pushed(sha) => sha,
            Self::NotMirrored => "not-mirrored",
            Self::Pending => "pending",
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
