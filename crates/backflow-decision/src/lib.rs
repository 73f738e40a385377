//! The apply decision: when one applier is asked to apply which commit, as a pure state machine.
//!
//! Like the branch worker's core, [`ApplierCore::step`] takes an [`ApplyInput`] and the time
//! and returns [`ApplyEffect`]s; a shell (in `backflow-apply`) flushes the branch worker,
//! records the operation in the claim's status, runs the applier, and feeds the answers back.
//! No clock, no threads, no Kubernetes client, so a simulator can drive it.
//!
//! - `reason.rs`: why an apply is asked for.
//! - `operation.rs`: one apply as the claim's `status.operation` records it.
//! - `core.rs`: the state machine (one [`ApplyPhase`] enum).
//! - `apply_window.rs`: which write seen during an apply is the apply's own ([`WindowEdits`]).
//! - `object_write.rs`: what backflow's own applier does with each object (write, stamp,
//!   leave to a newer edit, prune or keep).
//! - `withheld.rs`: how a list reads an object whose applier's write was withheld from Git.
//! - `held_status.rs`: what Flux's and Argo CD's own status says of backflow's request.
//! - `deferrals.rs`: what an operation left to a newer live edit, and what the claim records
//!   as applied and in step because of it.

mod apply_window;
mod core;
mod deferrals;
pub mod held_status;
pub mod object_write;
mod operation;
mod reason;
mod withheld;

pub use apply_window::{
    APPLIER_MANAGERS, APPLY_WINDOW_GRACE, ManagedWrite, Mirrored, Verdict, WindowEdits,
    WindowHistory, WindowSpan, Writers, Writes,
};
pub use core::{ApplierConfig, ApplierCore, ApplyEffect, ApplyEvent, ApplyInput, ApplyPhase, Hold};
pub use deferrals::{Deferrals, LeftOff, RETRY_DEFERRED, Recorded};
pub use operation::{Operation, OperationId, OperationPhase};
pub use reason::{Reason, Reasons};
pub use withheld::{AsKept, ListedAsKept, WithheldWrite, as_git_keeps};

pub use backflow_branch::{CommitId, Moment};
