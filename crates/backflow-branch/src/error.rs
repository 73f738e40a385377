//! The errors that cross the core's edge: why an intent cannot be placed, and what an I/O step
//! of the shell reported.

use std::fmt;
use std::sync::Arc;

/// The planner refused an intent: it cannot be placed safely (an anchor, a foreign file, a
/// duplicate identity, a name that is no file name). The intent is dropped and never published.
///
/// It keeps the planner's own error whole (the file, document and path it names stay
/// reachable through [`PlanError::downcast_ref`]); two refusals are equal when they read the
/// same.
#[derive(Clone)]
pub struct PlanError(Arc<dyn std::error::Error + Send + Sync>);

/// A refusal given as text.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Refusal(String);

impl PlanError {
    /// A refusal with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(Arc::new(Refusal(message.into())))
    }

    /// A refusal that is the planner's own error.
    pub fn from_error(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// The planner's own error, if it is an `E`.
    #[must_use]
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref::<E>()
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl std::error::Error for PlanError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for PlanError {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

impl Eq for PlanError {}

/// The error of one I/O step the shell ran for the core (a fetch, a build, a push), kept whole:
/// its source chain is still there for whoever logs it.
#[derive(Clone)]
pub struct IoFailure(Arc<dyn std::error::Error + Send + Sync>);

impl IoFailure {
    /// Wraps the shell's error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// The shell's error.
    #[must_use]
    pub fn error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Display for IoFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl fmt::Debug for IoFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl std::error::Error for IoFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// Why a publication cycle ended without publishing; everything stays pending and is retried.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CycleFailure {
    /// Reading the remote failed.
    #[error("reading the remote failed: {0}")]
    Fetch(IoFailure),
    /// Writing commits into the local cache failed.
    #[error("committing failed: {0}")]
    Build(IoFailure),
    /// The push got no answer, and the remote does not hold it.
    #[error("the push failed: {0}")]
    Push(IoFailure),
    /// The remote refused the push although the branch had not moved (a hook or a protection).
    #[error("the remote refused the push and did not move: {reason}")]
    Refused {
        /// The remote's reason.
        reason: String,
    },
    /// The branch moved under every attempt of the cycle.
    #[error("the remote kept moving: {attempts} attempts in a row were refused")]
    Exhausted {
        /// Attempts made.
        attempts: u32,
    },
}

/// Why a planner produced no updates for an intent: the intent cannot be placed, or the tree
/// could not be read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TreeError {
    /// The store behind the tree view failed (a local fault; the write is retried).
    #[error(transparent)]
    Read(#[from] IoFailure),
    /// The planner refused the intent.
    #[error(transparent)]
    Plan(#[from] PlanError),
}
