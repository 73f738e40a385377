//! The decision's invariants under random input sequences: never an apply that was not
//! flushed first, never one while the gate holds, never two in flight, always recorded before
//! asked, and the commit asked for is the one the flush produced.
#![allow(clippy::unwrap_used, reason = "tests fail loudly on the unexpected")]

use std::time::Duration;

use backflow_decision::{
    ApplierConfig, ApplierCore, ApplyEffect, ApplyInput, CommitId, Hold, Moment, OperationId,
    OperationPhase, Reason,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Step {
    Gate(bool),
    Foreign(u8),
    Published(u8),
    Reason(u8),
    /// Answers an outstanding flush with this tip (0: no branch).
    Answer(u8),
    /// Ends the operation in flight.
    End(bool),
    Wait(u8),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        any::<bool>().prop_map(Step::Gate),
        (1..6u8).prop_map(Step::Foreign),
        (1..6u8).prop_map(Step::Published),
        (0..5u8).prop_map(Step::Reason),
        (0..6u8).prop_map(Step::Answer),
        any::<bool>().prop_map(Step::End),
        (0..200u8).prop_map(Step::Wait),
    ]
}

fn commit(n: u8) -> CommitId {
    CommitId::from_bytes([n; 20])
}

fn reason(n: u8) -> Reason {
    [
        Reason::ForeignCommit,
        Reason::CatchUpAdopt,
        Reason::CatchUpConverge,
        Reason::Refusal,
        Reason::Repair,
    ][usize::from(n % 5)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn applies_are_flushed_gated_single_and_recorded_first(steps in proptest::collection::vec(step(), 1..80)) {
        let mut core = ApplierCore::new(ApplierConfig::default());
        let mut now = Moment(Duration::ZERO);
        let mut open = false;
        let mut flush_outstanding = false;
        let mut in_flight: Option<OperationId> = None;
        for s in steps {
            let mut answered = None;
            let input = match s {
                Step::Gate(o) => {
                    open = o;
                    ApplyInput::Gate((!o).then(|| Hold::Snapshots("replaying".into())))
                }
                Step::Foreign(n) => ApplyInput::Foreign(commit(n)),
                Step::Published(n) => ApplyInput::Published(commit(n)),
                Step::Reason(n) => ApplyInput::Reason(reason(n)),
                Step::Answer(n) if flush_outstanding => {
                    flush_outstanding = false;
                    let tip = (n > 0).then(|| commit(n));
                    answered = tip;
                    ApplyInput::Flushed(tip)
                }
                Step::End(ok) if in_flight.is_some() => {
                    let id = in_flight.take().unwrap();
                    ApplyInput::Progress {
                        id,
                        phase: if ok { OperationPhase::Succeeded } else { OperationPhase::Failed },
                        message: String::new(),
                    }
                }
                Step::Wait(secs) => {
                    now = now + Duration::from_secs(u64::from(secs));
                    ApplyInput::Tick
                }
                _ => ApplyInput::Tick,
            };
            let gate_held_before = !open;
            let effects = core.step(input, now);
            let mut recorded = None;
            for e in &effects {
                match e {
                    ApplyEffect::Flush => {
                        prop_assert!(!flush_outstanding, "a second flush while one is outstanding");
                        prop_assert!(in_flight.is_none(), "a flush while an operation is in flight");
                        prop_assert!(open, "a flush while the gate holds");
                        flush_outstanding = true;
                    }
                    ApplyEffect::Record { operation, .. } if operation.phase == OperationPhase::Requested => {
                        recorded = Some(operation.id);
                    }
                    ApplyEffect::Ask(op) => {
                        prop_assert!(in_flight.is_none(), "two operations in flight");
                        prop_assert_eq!(Some(op.id), recorded, "asked before recorded");
                        prop_assert_eq!(Some(op.commit), answered, "asked for another commit than the flush produced");
                        prop_assert!(!gate_held_before, "asked while the gate held");
                        in_flight = Some(op.id);
                    }
                    _ => {}
                }
            }
        }
    }
}
