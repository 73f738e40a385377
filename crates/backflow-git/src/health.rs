//! What a branch worker last found of its remote, for the status of the `GitProvider` that
//! names it: the reason a person acts on (`AuthenticationFailed`, `HostKeyUnknown`, …) and the
//! remote's own message.

use std::sync::{Arc, Mutex};

use backflow_branch::CycleFailure;

use crate::remote::{RemoteError, RemoteErrorKind};

/// Why the last publication cycle failed, in a condition's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteProblem {
    /// A condition reason: `AuthenticationFailed`, `HostKeyUnknown`, `RemoteUnreachable`,
    /// `RemoteProtocolError`, `PushRefused`, `RemoteBusy` or `CacheFailed`.
    pub reason: &'static str,
    /// What the remote (or the cache) said.
    pub message: String,
}

impl RemoteProblem {
    /// The problem a failed cycle shows.
    #[must_use]
    pub fn of(failure: &CycleFailure) -> Self {
        let io = match failure {
            CycleFailure::Fetch(io) | CycleFailure::Push(io) => io,
            CycleFailure::Build(io) => {
                return Self::new("CacheFailed", io.to_string());
            }
            CycleFailure::Refused { .. } => return Self::new("PushRefused", failure.to_string()),
            CycleFailure::Exhausted { .. } => {
                return Self::new("RemoteBusy", failure.to_string());
            }
        };
        let Some(remote) = io.error().downcast_ref::<RemoteError>() else {
            return Self::new("CacheFailed", io.to_string());
        };
        let reason = match remote.kind {
            RemoteErrorKind::Auth => "AuthenticationFailed",
            RemoteErrorKind::HostKey => "HostKeyUnknown",
            RemoteErrorKind::Unreachable => "RemoteUnreachable",
            RemoteErrorKind::Protocol => "RemoteProtocolError",
            RemoteErrorKind::Local => "CacheFailed",
        };
        Self::new(reason, remote.to_string())
    }

    fn new(reason: &'static str, message: String) -> Self {
        Self { reason, message }
    }
}

/// The health of one worker's remote, shared between the worker's thread and its handles.
#[derive(Debug, Clone, Default)]
pub struct RemoteHealth(Arc<Mutex<Option<RemoteProblem>>>);

impl RemoteHealth {
    /// The problem of the last cycle, or `None` when it published (or none ran yet).
    #[must_use]
    pub fn problem(&self) -> Option<RemoteProblem> {
        self.lock().clone()
    }

    pub(crate) fn set(&self, problem: Option<RemoteProblem>) {
        *self.lock() = problem;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<RemoteProblem>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
