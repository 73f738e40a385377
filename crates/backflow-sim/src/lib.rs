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
//! - `world.rs`: the simulated system and one step of it; `world/applier.rs`: the model
//!   appliers (backflow's own, and a held, Flux-like one that goes on through restarts).
//! - `live.rs`: the live store's objects, with the managedFields the mirror judges them by.
//! - `oracle.rs`: the outside oracle's ledgers: what was submitted and flushed, which commit
//!   an apply must hold; which operations were asked and what the status recorded.
//! - `world/script.rs`: scripted schedules, the world's actions named rather than drawn.
//! - `check.rs`: the invariants; `expected.rs`: what each object may end with, field by field.
//! - `pace.rs`: time as a yardstick — what the branch worker was seen doing when, against the
//!   timing its configuration promises.
//!
//! Deliberately broken [`Variant`]s (an apply asked without a flush, the apply's own writes
//! mirrored back) show the checker bites.

mod check;
mod expected;
mod live;
mod oracle;
mod pace;
mod world;

pub use check::Violation;
pub use world::{Action, IoFault, Variant, World};

/// How many steps one schedule runs before it drains to quiescence.
pub const STEPS: usize = 60;

/// Runs the schedule of `seed` with `variant`: [`STEPS`] random steps, then quiescence. The
/// error carries the violated invariant and the whole trace.
///
/// A core that breaks one of its own checks (the `debug_assert!`s on its phase and
/// watermarks, in debug builds) panics inside the schedule: that is reported as a failure of
/// this seed too, with the trace up to the step that broke it.
pub fn run(seed: u64, variant: Variant) -> Result<(), Failure> {
    let mut world = World::new(seed, variant);
    let fail = |world: &World, violation: Violation| Failure {
        seed,
        violation,
        trace: format!(
            "{}\n--- the branch's tips ---\n{}",
            world.trace().join("\n"),
            world.branch_history()
        ),
    };
    let schedule = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for _ in 0..STEPS {
            world.step();
            world.check_step()?;
        }
        world.quiesce()?;
        world.check_quiescent()
    }));
    match schedule {
        Ok(result) => result.map_err(|v| fail(&world, v)),
        Err(panic) => Err(fail(&world, Violation::CoreCheck(panic_message(&panic)))),
    }
}

/// What a core's failed check (a panic) said.
fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Runs a scripted schedule of `variant`: `actions` in order, each followed by the invariants
/// of a step, then quiescence and its invariants. The world comes back for the script's own
/// checks of what it was about (that the case was reached).
pub fn run_script(variant: Variant, actions: &[Action]) -> Result<World, Failure> {
    let mut world = World::scripted(variant);
    let fail = |world: &World, violation: Violation| Failure {
        seed: 0,
        violation,
        trace: format!(
            "{}\n--- the branch's tips ---\n{}",
            world.trace().join("\n"),
            world.branch_history()
        ),
    };
    let schedule = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for action in actions {
            world.act(*action)?;
            world.check_step()?;
        }
        world.quiesce()?;
        world.check_quiescent()
    }));
    match schedule {
        Ok(Ok(())) => Ok(world),
        Ok(Err(v)) => Err(fail(&world, v)),
        Err(panic) => Err(fail(&world, Violation::CoreCheck(panic_message(&panic)))),
    }
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
