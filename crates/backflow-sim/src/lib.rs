//! A deterministic simulation of the bi-directional protocol.
//!
//! Seed 000 admits that no test covers writes to one object from both sides at once, because
//! the outcome depends on an arrival order nobody controls. Here the order is a seeded schedule:
//! the real branch-worker core ([`backflow_branch::BranchCore`], over the model remote of its
//! `testing` feature) and the real apply decision ([`backflow_decision::ApplierCore`]) run
//! against a model live store, a model applier, people editing through the API, people pushing
//! to the branch, push webhooks and the passing of time, and the invariants are checked after
//! every step and at quiescence. A failing seed reproduces exactly and comes with its trace.
//!
//! - `world.rs`: the simulated system and one step of it.
//! - `live.rs`: the live store's objects, with the managedFields the mirror judges them by.
//! - `check.rs`: the invariants.
//!
//! Deliberately broken [`Variant`]s (an apply asked without a flush, the apply's own writes
//! mirrored back) show the checker bites.

mod check;
mod live;
mod world;

pub use check::Violation;
pub use world::{Variant, World};

/// How many steps one schedule runs before it drains to quiescence.
pub const STEPS: usize = 60;

/// Runs the schedule of `seed` with `variant`: [`STEPS`] random steps, then quiescence. The
/// error carries the violated invariant and the whole trace.
pub fn run(seed: u64, variant: Variant) -> Result<(), Failure> {
    let mut world = World::new(seed, variant);
    let fail = |world: &World, violation: Violation| Failure {
        seed,
        violation,
        trace: world.trace().join("\n"),
    };
    for _ in 0..STEPS {
        world.step();
        if let Err(v) = world.check_step() {
            return Err(fail(&world, v));
        }
    }
    if let Err(v) = world.quiesce() {
        return Err(fail(&world, v));
    }
    world.check_quiescent().map_err(|v| fail(&world, v))
}

/// A schedule that broke an invariant.
#[derive(Debug)]
pub struct Failure {
    /// The seed that reproduces it (`run(seed, variant)`).
    pub seed: u64,
    /// What broke.
    pub violation: Violation,
    /// Every step and effect, in order.
    pub trace: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {} broke an invariant: {}\n--- trace ---\n{}",
            self.seed, self.violation, self.trace
        )
    }
}
