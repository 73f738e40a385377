//! What the branch worker core is told: requests from its owner, the passing of time, and the
//! results of the I/O the shell ran for it.

use std::collections::BTreeSet;

use crate::commit::{CommitId, Tip};
use crate::error::{IoFailure, PlanError};
use crate::intent::{Intent, IntentSeq, Slot};

/// One input of [`crate::BranchCore::step`].
#[derive(Debug, Clone)]
pub enum Input {
    /// Record an intent in the open commit window; it takes the next [`IntentSeq`]
    /// ([`crate::BranchCore::last_seq`] after the step).
    Submit(Intent),
    /// A resync of `target`: decided after every intent submitted before it, into a write of
    /// its own, gathered with the target's other resyncs arriving within the commit window's
    /// silence (at most [`crate::CoreConfig::resync_window`]; at once with a zero window).
    Resync {
        /// The `GitTarget` resynced.
        target: String,
        /// Every object it holds (and its sweeps).
        intents: Vec<Intent>,
    },
    /// Close the window and take the flush mark ([`crate::BranchCore::decided_through`] after
    /// the step): everything up to it is published at once, ignoring the cooldown.
    Flush,
    /// A `CommitRequest`: close the window with this message and flush.
    CommitRequest {
        /// The commit message.
        message: String,
    },
    /// Someone waits for what was submitted so far (`X-Backflow-Wait: pushed`): close the
    /// commit window at the next opportunity instead of sitting out its silence. While a push
    /// is in flight, intents keep collecting and go out together in the next commit (group
    /// commit), still one compare-and-swap push per commit.
    Hurry,
    /// Every stream of `target` has handed in its snapshot: its resync need not wait out the
    /// silence that gathers them.
    ResyncComplete {
        /// The target (folder) whose resyncs are all in.
        target: String,
    },
    /// A hint that the branch moved (a push webhook): look at the remote now.
    RemoteMoved,
    /// The owner has resubmitted every target of the branch after a
    /// [`crate::Event::Diverged`]: publishing may go on.
    Recovered,
    /// The owner's settings changed (the `GitProvider`'s timing, or its credentials): the new
    /// timing is in force from now on, and a cycle backing off is retried at once, since what
    /// made it fail may be what changed.
    Reconfigure(crate::CoreConfig),
    /// Time passed; do what is due.
    Tick,
    /// The answer to [`crate::Effect::Fetch`].
    Fetched(Result<FetchedTip, IoFailure>),
    /// The answer to [`crate::Effect::Build`].
    Built(Result<BuiltChain, IoFailure>),
    /// The answer to [`crate::Effect::Push`].
    Pushed(PushAnswer),
}

/// The remote branch as a fetch found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedTip {
    /// Where the branch points (`Absent`: no such branch).
    pub tip: Tip,
    /// Which of the commits the fetch was asked to check the tip contains (is, or descends
    /// from).
    pub contains: BTreeSet<CommitId>,
}

/// What building a run of pending writes produced, one entry per write, in order.
#[derive(Debug, Clone, Default)]
pub struct BuiltChain {
    /// The writes built, in the order the effect named them.
    pub writes: Vec<BuiltWrite>,
}

/// What building one pending write produced.
#[derive(Debug, Clone, Default)]
pub struct BuiltWrite {
    /// The commit written, or `None` when the write changed nothing in the tree.
    pub commit: Option<CommitId>,
    /// Intents dropped because Git already read like them (only on the first build).
    pub unchanged: Vec<Slot>,
    /// Intents the planner refused.
    pub refused: Vec<RefusedIntent>,
}

/// An intent the planner refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedIntent {
    /// Its slot in the write.
    pub slot: Slot,
    /// Its sequence number.
    pub seq: IntentSeq,
    /// Why.
    pub error: PlanError,
}

/// The answer to a compare-and-swap push.
#[derive(Debug, Clone)]
pub enum PushAnswer {
    /// The remote took it: the branch now points at the pushed head.
    Accepted,
    /// The remote refused it (the branch moved, or a hook or protection said no).
    Rejected {
        /// The remote's reason.
        reason: String,
    },
    /// No answer (transport error): the push may or may not have landed.
    Lost(IoFailure),
}
