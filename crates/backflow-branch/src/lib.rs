//! What one branch worker decides, without I/O.
//!
//! The branch worker is the one writer of one branch of one remote. Its decisions live here as a
//! pure state machine, [`BranchCore`]: `step(input, now, rng) -> effects`. It links no Git
//! library, reads no clock and starts no thread; `backflow-git` runs its effects against real
//! repositories, and tests and the simulator run them against a model remote.
//!
//! Which file owns which decision:
//!
//! - `intent.rs`: intents ("this object should now read X in target T"), the pending writes they
//!   are decided into, flush marks.
//! - `commit_window.rs`: when the commit window closes (rolling silence, maximum age).
//! - `backoff.rs`: how long to wait after a failure (jittered exponential backoff).
//! - `worker.rs`: everything else — when to fetch, build, push, replay, back off; what is
//!   published; what counts as foreign; when the branch diverged — as one [`Phase`] enum.
//! - `waiters.rs`: which writers and flushes a publication (or a refusal) answers.
//! - `merge.rs`: the three-way merge that lays a live edit onto what Git holds, field by field
//!   (the replay's rule: the git shell's planner and the model shell both call it).
//! - `snapshot.rs`: what a live snapshot's objects are published as changes of (the mirror's
//!   rule for its lists: whole, as last seen, as the claim's commits held them, first contact).
//! - `input.rs` and `effect.rs`: the core's vocabulary with its shell and its owner.
//! - `tree.rs` and `planner.rs`: the planner seam — how intents become path updates against a
//!   read-only view of a tree — which the shell runs for [`Effect::Build`]; the YAML planner
//!   (`backflow-manifest`) implements it without linking a Git library.
//! - `commit.rs`, `moment.rs`, `error.rs`: commit ids, monotonic time, the errors that cross the
//!   edge.

#![deny(missing_docs)]

mod backoff;
mod commit;
mod commit_window;
mod effect;
mod error;
#[cfg(feature = "testing")]
mod file_planner;
mod input;
mod intent;
mod merge;
#[cfg(feature = "testing")]
pub mod model;
mod moment;
mod planner;
mod snapshot;
mod tree;
mod waiters;
mod worker;

pub use backoff::{Backoff, BackoffPolicy};
pub use commit::{CommitId, ParseCommitIdError, Tip};
pub use commit_window::CommitWindow;
pub use effect::{Divergence, DurableTips, Effect, Event, ForeignCommit};
pub use error::{CycleFailure, IoFailure, PlanError, TreeError};
#[cfg(feature = "testing")]
pub use file_planner::FilePerObjectPlanner;
pub use input::{BuiltChain, BuiltWrite, FetchedTip, Input, PushAnswer, RefusedIntent};
pub use intent::{
    Attribution, Baseline, ChangedBy, FlushMark, Intent, IntentSeq, LiveHeld, ObjectJson,
    ObjectState, Origin, PendingWrite, Slot, SweepScope, WriteKind,
};
pub use merge::{Merged, baseline_since, merge_keys, merge_object};
pub use moment::Moment;
pub use planner::{Held, Planner};
pub use snapshot::{ClaimStart, FirstContactRule, SeenValues, SnapshotBaseline};
pub use tree::{
    LayeredView, PathUpdate, TreeView, blob_id, changes_in, dir_prefix, files_with_changes,
};
pub use waiters::{Answered, Waiters};
pub use worker::{BranchCore, CoreConfig, FetchPurpose, Phase, WorkerStats};
