//! Writes that wait for Git (seed 004's answer-after-push): the server's side of
//! `X-Backflow-Wait: pushed`.
//!
//! The server knows nothing about Git; whoever publishes objects (the mirror) implements
//! [`PublicationWaiter`] and is handed to the server. A write that asks to wait is answered once
//! the waiter says the commit holding it is on the remote, or when the timeout runs out.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use backflow_api::ObjectKey;

/// The request header that asks to wait: `pushed` or `pushed;timeout=10s`.
pub const WAIT_HEADER: &str = "x-backflow-wait";
/// The response header that reports the commit: a SHA, `pending` or `not-mirrored`.
pub const COMMIT_HEADER: &str = "x-backflow-commit";
/// How long a write waits when the header names no timeout.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// The longest wait a request may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// What became of a write that waited.
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
    /// The `X-Backflow-Commit` value.
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

/// Parses `X-Backflow-Wait`; `None` when absent, an error naming the problem when malformed.
pub fn parse_wait_header(value: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(v) = value else { return Ok(None) };
    let mut parts = v.split(';').map(str::trim);
    if parts.next() != Some("pushed") {
        return Err(format!("X-Backflow-Wait must be `pushed` or `pushed;timeout=10s`, got {v:?}"));
    }
    let mut timeout = DEFAULT_WAIT;
    for p in parts {
        match p.split_once('=') {
            Some(("timeout", t)) => {
                timeout = humantime::parse_duration(t)
                    .map_err(|e| format!("X-Backflow-Wait timeout {t:?} is not a duration (like 10s): {e}"))?;
            }
            _ => return Err(format!("X-Backflow-Wait: unknown parameter {p:?}; only `timeout=` is understood")),
        }
    }
    Ok(Some(timeout.min(MAX_WAIT)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_header() {
        assert_eq!(parse_wait_header(None), Ok(None));
        assert_eq!(parse_wait_header(Some("pushed")), Ok(Some(DEFAULT_WAIT)));
        assert_eq!(parse_wait_header(Some("pushed; timeout=2s")), Ok(Some(Duration::from_secs(2))));
        assert_eq!(parse_wait_header(Some("pushed;timeout=1h")), Ok(Some(MAX_WAIT)));
        assert!(parse_wait_header(Some("committed")).is_err());
        assert!(parse_wait_header(Some("pushed;timeout=soon")).is_err());
    }
}
