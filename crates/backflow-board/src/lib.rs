//! What the two directions share while they run, so neither depends on the other: the mirror
//! (Live → Git) writes it, the appliers (Git → live) and the push receiver read it and are
//! woken by it.
//!
//! - `board.rs`: the status board — each stream's state, each target's and branch's
//!   activity, the reasons given to appliers, refused edits, claims' readiness — with the
//!   notifications that wake its readers (no polling).
//! - `apply_windows.rs`: each coordinated target's apply windows, opened and closed by its
//!   claim, consulted by its watch streams.
//! - `registry.rs`: the running branch workers by (repository, branch), and
//!   [`BranchRegistry`], what an applier claim or a push webhook reads and tells.
//! - `streams.rs`: what a watch stream is ([`StreamSpec`]).
//! - `withheld.rs`: [`Withheld`], objects whose applier's write was kept out of Git (a
//!   collision), remembered beyond the streams that found them.
//! - `catch_up.rs`: [`CatchUps`], each stream asked to decide what its scope holds now (before
//!   an apply's flush, before a `CommitRequest`).
//! - `events.rs`: Kubernetes Events about what backflow did, counted when repeated.
//! - `explain.rs`: a Kubernetes API error as a person reads it.
//! - `changes.rs`: [`watch_changes`], a watch that only wakes a level-triggered loop.

mod apply_windows;
mod board;
mod catch_up;
mod changes;
mod events;
mod explain;
mod registry;
mod streams;
mod withheld;

pub use apply_windows::{ApplyWindows, Pruned};
pub use board::{
    ApplyAsks, Board, BranchActivity, BranchKey, ClaimReadiness, PushReport, RefusedEdit,
    StreamState, TargetActivity, WriteScope,
};
pub use catch_up::{Barrier, CatchUps, CaughtUp};
pub use changes::watch_changes;
pub use events::{Correlator, EventRecorder, EventType, Note, Regarding, Write};
pub use explain::explain;
pub use registry::{BranchRegistry, RunningWorkers, TargetSnapshots};
pub use streams::{ServedType, StreamSpec, TargetRef, unseen_objects};
pub use withheld::{Kept, Withheld, WithheldWrite};
