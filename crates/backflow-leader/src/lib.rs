//! Leader election on a `coordination.k8s.io/v1` Lease, following the contract client-go's
//! `leaderelection` package and every controller-runtime manager follow, so a backflow replica,
//! `kubectl get lease` and other tools read the same record:
//!
//! - the Lease names its holder (`holderIdentity`), how long a holder that stops renewing keeps
//!   it (`leaseDurationSeconds`), when it was taken and last renewed (`acquireTime`,
//!   `renewTime`) and how many times it changed hands (`leaseTransitions`);
//! - a candidate takes it only once the holder let it expire: the record unchanged, as this
//!   candidate observed it, for `leaseDurationSeconds` (its own clock, not the holder's
//!   timestamps, so clock skew between replicas does not matter);
//! - every write names the resourceVersion it read: two candidates never both win;
//! - a leader that cannot renew within its renew deadline stops leading;
//! - a clean stop releases the Lease (no holder, one second), so a standby takes over at once.
//!
//! `election.rs` decides (pure: `Election::step(input, now, wall) -> effects`); `lease.rs` reads
//! and writes the Lease and runs the loop.

mod election;
mod lease;

pub use election::{
    Election, ElectionConfig, ElectionEffect, ElectionInput, Leadership, LeaseRecord, TimingError,
    WriteFailure,
};
pub use lease::{LeaseElector, LeaseError, LeaseName};
