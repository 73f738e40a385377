//! What the branch worker core asks its shell to do, and what it tells its owner.

use std::collections::BTreeSet;

use backflow_api::ObjectKey;

use crate::commit::{CommitId, Tip};
use crate::error::{CycleFailure, PlanError};
use crate::intent::IntentSeq;
use crate::moment::Moment;

/// One effect of [`crate::BranchCore::step`]. The shell runs them in order; each I/O effect is
/// answered with the matching [`crate::Input`], and at most one is in flight at a time.
#[derive(Debug, Clone)]
pub enum Effect {
    /// Fetch the branch and say where it points and which of `check` it contains. Answer:
    /// [`crate::Input::Fetched`].
    Fetch {
        /// Commits whose presence in the tip matters (the head of a push whose answer was lost,
        /// the last push backflow made).
        check: BTreeSet<CommitId>,
    },
    /// Write one commit per pending write `from .. from + count`
    /// ([`crate::BranchCore::pending_writes`]), the first on `parent` (on an empty tree when
    /// `None`). Answer: [`crate::Input::Built`].
    Build {
        /// The commit the chain grows from.
        parent: Option<CommitId>,
        /// Index of the first pending write to build.
        from: usize,
        /// How many pending writes to build.
        count: usize,
    },
    /// Push `head` to the branch if, and only if, the branch is still at `expected`. Answer:
    /// [`crate::Input::Pushed`].
    Push {
        /// The commit pushed.
        head: CommitId,
        /// What the remote must still point at.
        expected: Tip,
    },
    /// Keep these durably (they survive a restart and are handed back to
    /// [`crate::BranchCore::new`]).
    Persist(DurableTips),
    /// Tell the owner.
    Emit(Event),
    /// Step again with [`crate::Input::Tick`] at this moment, unless another input comes first.
    WakeAt(Moment),
}

/// What a branch worker keeps across restarts: enough to tell, on start, a push made while it
/// was stopped (foreign) and a branch that lost backflow's commits (diverged).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DurableTips {
    /// The last remote tip the worker saw and reported.
    pub seen: Option<CommitId>,
    /// The last commit the worker pushed (or found it had pushed).
    pub pushed: Option<CommitId>,
    /// The last commit the worker sent to the remote, kept before the push goes out: a process
    /// killed before it heard the answer still knows, on start, that a tip holding it is its
    /// own commit, not somebody else's.
    pub sending: Option<CommitId>,
}

/// Something the owner of a worker may care about.
#[derive(Debug, Clone)]
pub enum Event {
    /// Every intent up to `through` is contained in the remote branch at `tip` (`None`: the
    /// branch does not exist, which happens only when nothing was ever written).
    Published {
        /// The last intent covered.
        through: IntentSeq,
        /// The remote tip holding them.
        tip: Option<CommitId>,
    },
    /// The branch moved to a commit the worker did not push.
    Foreign(ForeignCommit),
    /// The branch no longer holds backflow's last push (a force-push dropped it, or the branch
    /// was deleted): the owner must resubmit every target of the branch (a full resync) and
    /// then send [`crate::Input::Recovered`]. Nothing is published until then.
    Diverged(Divergence),
    /// The planner refused an intent; it is dropped and will never be published.
    Refused {
        /// The intent.
        seq: IntentSeq,
        /// Its target.
        target: String,
        /// Its object.
        key: ObjectKey,
        /// Why.
        error: PlanError,
    },
    /// A publication cycle failed; everything stays pending and is retried at `retry_at`.
    Failed {
        /// What went wrong.
        error: CycleFailure,
        /// When the next attempt is due.
        retry_at: Moment,
    },
}

/// A remote tip the worker did not push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForeignCommit {
    /// The new tip.
    pub tip: CommitId,
    /// The tip the worker knew before, if any (across a restart: the last one it saw).
    pub previous: Option<CommitId>,
}

/// The branch lost backflow's last push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Divergence {
    /// Where the branch points now (`None`: it was deleted).
    pub tip: Option<CommitId>,
    /// backflow's last push, which the branch no longer contains.
    pub lost: CommitId,
}
