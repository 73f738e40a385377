//! Writes that wait for Git (seed 004's answer-after-push): the server's side of
//! `X-Backflow-Wait: pushed`.
//!
//! The server knows nothing about Git; whoever publishes objects (the mirror) implements
//! [`PublicationWaiter`] (from `backflow-api`) and is handed to the server. A write that asks to wait is answered once
//! the waiter says the commit holding it is on the remote, or when the timeout runs out.

use std::time::Duration;

pub use backflow_api::publication::{Publication, PublicationWaiter};

/// The request header that asks to wait: `pushed` or `pushed;timeout=10s`.
pub const WAIT_HEADER: &str = "x-backflow-wait";
/// The response header that reports the commit: a SHA, `pending`, `not-mirrored` or `refused`
/// (then with a `Warning` header naming the reason).
pub const COMMIT_HEADER: &str = "x-backflow-commit";
/// How long a write waits when the header names no timeout.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// The longest wait a request may ask for.
pub const MAX_WAIT: Duration = Duration::from_secs(300);

/// Parses `X-Backflow-Wait`; `None` when absent, an error naming the problem when malformed.
pub fn parse_wait_header(value: Option<&str>) -> Result<Option<Duration>, String> {
    let Some(v) = value else { return Ok(None) };
    let mut parts = v.split(';').map(str::trim);
    if parts.next() != Some("pushed") {
        return Err(format!(
            "X-Backflow-Wait must be `pushed` or `pushed;timeout=10s`, got {v:?}"
        ));
    }
    let mut timeout = DEFAULT_WAIT;
    for p in parts {
        match p.split_once('=') {
            Some(("timeout", t)) => {
                timeout = humantime::parse_duration(t).map_err(|e| {
                    format!("X-Backflow-Wait timeout {t:?} is not a duration (like 10s): {e}")
                })?;
            }
            _ => {
                return Err(format!(
                    "X-Backflow-Wait: unknown parameter {p:?}; only `timeout=` is understood"
                ));
            }
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
        assert_eq!(
            parse_wait_header(Some("pushed; timeout=2s")),
            Ok(Some(Duration::from_secs(2)))
        );
        assert_eq!(
            parse_wait_header(Some("pushed;timeout=1h")),
            Ok(Some(MAX_WAIT))
        );
        assert!(parse_wait_header(Some("committed")).is_err());
        assert!(parse_wait_header(Some("pushed;timeout=soon")).is_err());
    }
}
