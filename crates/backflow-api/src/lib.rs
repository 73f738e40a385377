//! backflow's shared vocabulary: the configuration kinds, object identity and injected time.
//!
//! This crate does no I/O. The configuration kinds (`config`, feature `kinds`, on by default)
//! need the Kubernetes types; the pure cores build without them (`default-features = false`).
//!
//! This crate does no I/O. Everything that decides (the branch worker, the apply decision, the
//! store's metadata stamping) reads time through [`Clock`] so a simulator can drive it.

pub mod authors;
pub mod clock;
pub mod compact;
#[cfg(feature = "kinds")]
pub mod config;
pub mod defaults;
pub mod identity;
pub mod ids;
pub mod ownership;
pub mod publication;

pub use authors::{CommitAuthors, RecordedWrite, WriteRecord, WriteVerb};
pub use clock::{Clock, ManualClock, SystemClock};
pub use identity::{GroupResource, ObjectKey};
pub use ids::{IdSource, SequentialIds};
pub use ownership::{APPLIER_LABEL, AppliedBy, RECORD_LABEL};
