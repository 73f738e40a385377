//! Git → live: what learns that somebody else pushed, and the appliers backflow holds.
//!
//! - [`claims`]: which claims act, and one runner per claim around its apply decision.
//! - [`native`]: backflow's own applier (`NativeClaim`): server-side apply of a commit's folders.
//! - [`guard`]: what a push may not do: backflow's own configuration, mass prunes.
//! - `owned.rs`: one owner per folder: nothing is applied from a folder another backflow holds.
//! - [`flux`]: Flux's kustomize-controller, held (`FluxClaim`): one reconcile per apply.
//! - [`argo`]: Argo CD's application controller, held (`ArgoCDClaim`): one sync per apply.
//! - [`receiver`]: push webhooks (`GitReceiver`): verified deliveries wake the branch workers
//!   of the repository and branch they name.

pub mod act_as;
pub mod argo;
pub mod claims;
pub mod flux;
pub mod guard;
mod held;
mod live_reads;
pub mod native;
mod owned;
mod phases;
pub mod receiver;
