//! The schedules: many seeds of the real system keep every invariant, and each deliberately
//! broken variant is caught within the first few hundred seeds (the checker bites).

use backflow_sim::{Variant, run};

/// Seeds run by `./scripts/test.sh`; `BACKFLOW_SIM_SEEDS=<start>..<end>` runs another range
/// (a longer soak: `BACKFLOW_SIM_SEEDS=0..1000000 cargo test --release -p backflow-sim`).
fn seeds() -> std::ops::Range<u64> {
    std::env::var("BACKFLOW_SIM_SEEDS")
        .ok()
        .and_then(|r| {
            let (a, b) = r.split_once("..")?;
            Some(a.parse().ok()?..b.parse().ok()?)
        })
        .unwrap_or(0..10_000)
}

#[test]
fn every_schedule_keeps_every_invariant() {
    for seed in seeds() {
        if let Err(failure) = run(seed, Variant::Correct) {
            panic!("{failure}");
        }
    }
}

/// The first seed in `0..limit` that `variant` fails, if any.
fn first_failure(variant: Variant, limit: u64) -> Option<backflow_sim::Failure> {
    (0..limit).find_map(|seed| run(seed, variant).err())
}

#[test]
fn an_apply_without_a_flush_is_caught() {
    let failure = first_failure(Variant::ApplyWithoutFlush, 500)
        .expect("applying without flushing must break an invariant");
    assert!(failure.seed < 500);
    eprintln!("caught at seed {}: {}", failure.seed, failure.violation);
}

/// Since the flush before an apply waits for the streams to catch up (session 26), fewer
/// schedules show mirroring the apply's writes (the first at seed 1005).
#[test]
fn mirroring_the_apply_is_caught() {
    let failure = first_failure(Variant::MirrorTheApply, 2000)
        .expect("mirroring the apply's own writes must break an invariant");
    eprintln!("caught at seed {}: {}", failure.seed, failure.violation);
}

#[test]
fn replaying_a_textual_diff_instead_of_the_intent_is_caught() {
    let failure = first_failure(Variant::ReplayTextualDiff, 500)
        .expect("replaying the textual diff must lose an API edit");
    eprintln!("caught at seed {}: {}", failure.seed, failure.violation);
}

#[test]
fn a_seed_reproduces_exactly() {
    let trace = |seed| {
        let mut world = backflow_sim::World::new(seed, Variant::Correct);
        for _ in 0..backflow_sim::STEPS {
            world.step();
        }
        world.trace().join("\n")
    };
    assert_eq!(trace(42), trace(42));
    assert_ne!(trace(42), trace(43));
}

/// The schedules reach an applier stalled past the decision's patience: the operation is
/// reported `Unresolved`, followed on, and its end decided as any other.
#[test]
fn a_stall_past_five_minutes_is_reached_and_reported_unresolved() {
    let seed = (0..500)
        .find(|&seed| {
            let mut world = backflow_sim::World::new(seed, Variant::Correct);
            for _ in 0..backflow_sim::STEPS {
                world.step();
            }
            let trace = world.trace().join("\n");
            trace.contains("stalls for") && trace.contains("Unresolved")
        })
        .expect("a schedule with a stalled applier reported Unresolved");
    eprintln!("first reached at seed {seed}");
}

/// Deletes on both sides: people delete objects through the API and pushes remove files.
#[test]
fn deletes_on_both_sides_keep_every_invariant() {
    for seed in seeds() {
        if let Err(failure) = run(seed, Variant::WithDeletes) {
            panic!("{failure}");
        }
    }
}

/// The schedules reach every I/O fault the world injects, and edits and pushes made while a
/// push is in flight.
#[test]
fn io_faults_and_work_during_a_push_are_reached() {
    let wanted = [
        "the fetch fails",
        "the build fails",
        "the push never reaches the remote",
        "the push lands, its answer is lost",
        "a hook refuses the push",
    ];
    let mut seen = std::collections::BTreeSet::new();
    let mut during_a_push = false;
    for seed in 0..500 {
        let mut world = backflow_sim::World::new(seed, Variant::Correct);
        for _ in 0..backflow_sim::STEPS {
            world.step();
        }
        let trace = world.trace();
        for line in trace {
            for fault in wanted {
                if line.ends_with(fault) {
                    seen.insert(fault);
                }
            }
        }
        // A person's edit or a foreign push between a build's answer (the push goes out at
        // once) and the push's answer.
        let mut after_build: Option<bool> = None;
        for line in trace {
            if line.ends_with("the build is answered") {
                after_build = Some(false);
            } else if line.contains("through the API") || line.contains("to the branch") {
                after_build = after_build.map(|_| true);
            } else if line.contains("the push") || line.contains("refuses the push") {
                during_a_push |= after_build == Some(true);
                after_build = None;
            } else if line.contains("is answered") || line.contains("fails") {
                after_build = None;
            }
        }
    }
    assert_eq!(seen.len(), wanted.len(), "reached only {seen:?}");
    assert!(during_a_push, "no edit or push while a push was in flight");
}

/// The schedules reach what the timing invariant (10) judges: a push held for its cooldown,
/// failed cycles backing off, a cooldown changed while the worker runs, writers waiting for
/// their push.
#[test]
fn the_timing_the_worker_promises_is_reached() {
    let wanted = [
        "holds its push for the cooldown",
        "the cycle failed",
        "push cooldown becomes",
        "waits for the push",
    ];
    let mut seen = std::collections::BTreeSet::<&str>::new();
    for seed in 0..200 {
        let mut world = backflow_sim::World::new(seed, Variant::Correct);
        for _ in 0..backflow_sim::STEPS {
            world.step();
        }
        for line in world.trace() {
            seen.extend(wanted.iter().filter(|w| line.contains(**w)).copied());
        }
    }
    assert_eq!(seen.len(), wanted.len(), "reached only {seen:?}");
}

/// backflow holding a Flux-like applier: it applies whole commits, goes on through restarts
/// and is followed by the process that starts again.
#[test]
fn a_held_applier_keeps_every_invariant() {
    for seed in seeds() {
        if let Err(failure) = run(seed, Variant::HeldApplier) {
            panic!("{failure}");
        }
    }
}

/// Objects of two fields: a person's edit and a push each change one, so an edit and a push of
/// one object meet in the field-level replay, and each field must keep its last edit.
#[test]
fn edits_of_two_fields_keep_every_invariant() {
    for seed in seeds() {
        if let Err(failure) = run(seed, Variant::TwoFields) {
            panic!("{failure}");
        }
    }
}
