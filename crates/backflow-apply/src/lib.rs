//! Git → live: what learns that somebody else pushed, and (next) the appliers backflow holds.
//!
//! - [`receiver`]: push webhooks (`GitReceiver`): verified deliveries wake the branch workers
//!   of the repository and branch they name.

pub mod receiver;
