//! The apply decision's rules, one test each, driven with explicit inputs and times.
#![allow(clippy::unwrap_used, reason = "tests fail loudly on the unexpected")]

use std::time::Duration;

use backflow_decision::{
    ApplierConfig, ApplierCore, ApplyEffect, ApplyEvent, ApplyInput, ApplyPhase, CommitId, Hold,
    Moment, Operation, OperationId, OperationPhase, Reason, Reasons,
};

fn commit(n: u8) -> CommitId {
    CommitId::from_bytes([n; 20])
}

fn at(secs: u64) -> Moment {
    Moment(Duration::from_secs(secs))
}

/// A core with its gate open.
fn open() -> ApplierCore {
    let mut core = ApplierCore::new(ApplierConfig::default());
    assert!(
        !core
            .step(ApplyInput::Gate(None), at(0))
            .contains(&ApplyEffect::Flush)
    );
    core
}

fn asked(effects: &[ApplyEffect]) -> Option<Operation> {
    effects.iter().find_map(|e| match e {
        ApplyEffect::Ask(op) => Some(op.clone()),
        _ => None,
    })
}

fn flushes(effects: &[ApplyEffect]) -> bool {
    effects.contains(&ApplyEffect::Flush)
}

fn done(core: &mut ApplierCore, op: &Operation, now: u64) -> Vec<ApplyEffect> {
    core.step(
        ApplyInput::Progress {
            id: op.id,
            phase: OperationPhase::Succeeded,
            message: String::new(),
        },
        at(now),
    )
}

#[test]
fn a_foreign_commit_is_applied_only_as_the_tip_the_flush_produced() {
    let mut core = open();
    let foreign = commit(1);
    let replayed = commit(2); // F + the pending write W, pushed by the flush
    let effects = core.step(ApplyInput::Foreign(foreign), at(1));
    assert!(
        flushes(&effects),
        "a foreign commit makes an apply due: flush first"
    );
    assert_eq!(asked(&effects), None, "never asked for F on its own");
    let effects = core.step(ApplyInput::Flushed(Some(replayed)), at(1));
    let op = asked(&effects).unwrap();
    assert_eq!(
        op.commit, replayed,
        "F + W, which contains F: asked at once, no second flush"
    );
    assert!(op.reasons.contains(Reason::ForeignCommit));
    // Recorded before asked.
    let record = effects
        .iter()
        .position(|e| matches!(e, ApplyEffect::Record { .. }))
        .unwrap();
    let ask = effects
        .iter()
        .position(|e| matches!(e, ApplyEffect::Ask(_)))
        .unwrap();
    assert!(record < ask);
    done(&mut core, &op, 2);
    assert_eq!(core.last_applied(), Some(replayed));
    assert_eq!(core.phase(), &ApplyPhase::Idle);
}

#[test]
fn nothing_is_asked_while_the_gate_holds() {
    let mut core = ApplierCore::new(ApplierConfig::default());
    assert!(
        !flushes(&core.step(ApplyInput::Foreign(commit(1)), at(0))),
        "closed until told"
    );
    for hold in [
        Hold::Snapshots("team/web: configmaps replaying".into()),
        Hold::CommitRequest,
        Hold::Recovering,
    ] {
        assert!(!flushes(&core.step(ApplyInput::Gate(Some(hold)), at(1))));
        assert!(!flushes(&core.step(ApplyInput::Tick, at(2))));
    }
    assert!(
        flushes(&core.step(ApplyInput::Gate(None), at(3))),
        "due once the gate opens"
    );
}

#[test]
fn a_gate_that_closes_during_the_flush_means_deciding_again() {
    let mut core = open();
    assert!(flushes(&core.step(ApplyInput::Foreign(commit(1)), at(1))));
    core.step(ApplyInput::Gate(Some(Hold::CommitRequest)), at(1));
    let effects = core.step(ApplyInput::Flushed(Some(commit(1))), at(1));
    assert_eq!(asked(&effects), None);
    assert!(
        core.pending().contains(Reason::ForeignCommit),
        "kept for later"
    );
    let effects = core.step(ApplyInput::Gate(None), at(2));
    assert!(flushes(&effects), "a new flush, not the old answer");
}

/// A gate that closed and opened again while the flush was answered (a stream relisting after
/// the branch lost backflow's commits) held back what the flush cannot have covered: decided
/// again, after a new flush. Found by the simulator once its gate opened, as the board's does,
/// when the lists are read rather than published.
#[test]
fn a_gate_that_closes_and_opens_during_the_flush_means_a_new_flush() {
    let mut core = open();
    assert!(flushes(&core.step(ApplyInput::Foreign(commit(1)), at(1))));
    core.step(
        ApplyInput::Gate(Some(Hold::Snapshots("relisting".into()))),
        at(1),
    );
    core.step(ApplyInput::Gate(None), at(1));
    let effects = core.step(ApplyInput::Flushed(Some(commit(1))), at(1));
    assert_eq!(asked(&effects), None, "the old answer is not applied");
    assert!(flushes(&effects), "a new flush at once");
    let effects = core.step(ApplyInput::Flushed(Some(commit(2))), at(1));
    assert_eq!(asked(&effects).unwrap().commit, commit(2));
}

#[test]
fn a_tip_that_moves_before_the_request_means_a_new_flush() {
    let mut core = open();
    assert!(flushes(&core.step(ApplyInput::Foreign(commit(1)), at(1))));
    // Another push lands while the flush is answered with the older tip.
    core.step(ApplyInput::Foreign(commit(3)), at(1));
    let effects = core.step(ApplyInput::Flushed(Some(commit(1))), at(1));
    assert_eq!(
        asked(&effects),
        None,
        "never asks for a tip that is no longer the tip"
    );
    assert!(flushes(&effects));
    let effects = core.step(ApplyInput::Flushed(Some(commit(3))), at(1));
    assert_eq!(asked(&effects).unwrap().commit, commit(3));
}

#[test]
fn one_operation_in_flight_and_a_burst_of_reasons_is_one_apply() {
    let mut core = open();
    core.step(ApplyInput::Reason(Reason::CatchUpAdopt), at(1));
    let op = asked(&core.step(ApplyInput::Flushed(Some(commit(1))), at(1))).unwrap();
    for n in 2..6 {
        let effects = core.step(ApplyInput::Foreign(commit(n)), at(2));
        assert!(
            !flushes(&effects) && asked(&effects).is_none(),
            "in flight: nothing else"
        );
        core.step(ApplyInput::Reason(Reason::CatchUpAdopt), at(2));
    }
    let effects = done(&mut core, &op, 3);
    assert!(
        flushes(&effects),
        "what came due meanwhile is one new apply"
    );
    let next = asked(&core.step(ApplyInput::Flushed(Some(commit(5))), at(3))).unwrap();
    assert_eq!(
        next.reasons.names(),
        vec!["ForeignCommit", "CatchUp"],
        "both reasons, one operation"
    );
}

#[test]
fn a_converge_of_the_commit_already_applied_asks_nothing_but_an_adopt_always_asks() {
    let mut core = ApplierCore::new(ApplierConfig::default());
    core.step(
        ApplyInput::Restored {
            last_applied: Some(commit(7)),
            in_flight: None,
            last_operation: None,
            status_read: true,
        },
        at(0),
    );
    core.step(ApplyInput::Published(commit(7)), at(0));
    core.step(ApplyInput::Gate(None), at(0));
    // It flushes first (what the mirror has not published yet may move the tip), and asks
    // nothing when the flush finds the commit already applied.
    assert!(flushes(
        &core.step(ApplyInput::Reason(Reason::CatchUpConverge), at(1))
    ));
    let effects = core.step(ApplyInput::Flushed(Some(commit(7))), at(1));
    assert!(asked(&effects).is_none());
    assert!(effects.contains(&ApplyEffect::Emit(ApplyEvent::AlreadyApplied(commit(7)))));
    assert!(core.pending().is_empty());
    // Adopting stamps objects, which only an apply does: never skipped.
    assert!(flushes(
        &core.step(ApplyInput::Reason(Reason::CatchUpAdopt), at(2))
    ));
    let op = asked(&core.step(ApplyInput::Flushed(Some(commit(7))), at(2))).unwrap();
    assert_eq!(op.commit, commit(7));
    // After applying a newer foreign commit, a converge of it asks nothing either.
    done(&mut core, &op, 3);
    core.step(ApplyInput::Foreign(commit(8)), at(4));
    let op = asked(&core.step(ApplyInput::Flushed(Some(commit(8))), at(4))).unwrap();
    done(&mut core, &op, 5);
    assert!(flushes(
        &core.step(ApplyInput::Reason(Reason::CatchUpConverge), at(6))
    ));
    assert!(asked(&core.step(ApplyInput::Flushed(Some(commit(8))), at(6))).is_none());
}

/// A restart that follows its held applier's operation submits its snapshot meanwhile: the
/// converge due after the operation ends flushes, and applies the snapshot's commit when it
/// moved the tip past the one applied (before, the tip last heard equalled the applied
/// commit and nothing was asked, leaving the applier's older write over a live edit).
#[test]
fn a_converge_after_a_followed_operation_applies_what_the_restart_published() {
    let mut core = ApplierCore::new(ApplierConfig::default());
    let op = Operation {
        id: OperationId(2),
        commit: commit(6),
        reasons: Reasons::from_iter([Reason::ForeignCommit]),
        phase: OperationPhase::Running,
        requested_at: at(0),
    };
    core.step(
        ApplyInput::Restored {
            last_applied: Some(commit(5)),
            in_flight: Some((op.id, op.commit, op.reasons.clone(), op.phase)),
            last_operation: Some(op.id),
            status_read: true,
        },
        at(0),
    );
    core.step(ApplyInput::Reason(Reason::CatchUpConverge), at(0));
    core.step(ApplyInput::Published(commit(6)), at(0));
    let followed = asked(&core.step(ApplyInput::Gate(None), at(0))).expect("followed");
    assert_eq!(followed.id, OperationId(2));
    let effects = core.step(
        ApplyInput::Progress {
            id: followed.id,
            phase: OperationPhase::Succeeded,
            message: String::new(),
        },
        at(1),
    );
    assert!(flushes(&effects), "{effects:?}");
    let next = asked(&core.step(ApplyInput::Flushed(Some(commit(9))), at(1)));
    assert_eq!(next.map(|op| op.commit), Some(commit(9)));
}

#[test]
fn a_failed_operation_is_decided_again_after_a_doubling_backoff() {
    let mut core = open();
    core.step(ApplyInput::Foreign(commit(1)), at(10));
    let op = asked(&core.step(ApplyInput::Flushed(Some(commit(1))), at(10))).unwrap();
    let effects = core.step(
        ApplyInput::Progress {
            id: op.id,
            phase: OperationPhase::Failed,
            message: "ConfigMap default/x: invalid".into(),
        },
        at(11),
    );
    assert!(
        effects.contains(&ApplyEffect::WakeAt(at(13))),
        "2 s: {effects:?}"
    );
    assert!(!flushes(&core.step(ApplyInput::Tick, at(12))));
    assert!(
        !flushes(&core.step(ApplyInput::Foreign(commit(2)), at(12))),
        "still backing off"
    );
    assert!(flushes(&core.step(ApplyInput::Tick, at(13))));
    let op = asked(&core.step(ApplyInput::Flushed(Some(commit(2))), at(13))).unwrap();
    assert_eq!(op.commit, commit(2), "at the tip as it is then");
    let effects = core.step(
        ApplyInput::Progress {
            id: op.id,
            phase: OperationPhase::Failed,
            message: "again".into(),
        },
        at(13),
    );
    assert!(
        effects.contains(&ApplyEffect::WakeAt(at(17))),
        "then 4 s: {effects:?}"
    );
    // Capped at five minutes.
    let mut core = open();
    let mut now = 0;
    for _ in 0..12 {
        core.step(ApplyInput::Reason(Reason::Repair), at(now));
        core.step(ApplyInput::Tick, at(now));
        let Some(op) = asked(&core.step(ApplyInput::Flushed(Some(commit(1))), at(now))) else {
            panic!("not asked at {now}: {:?}", core.phase());
        };
        let effects = core.step(
            ApplyInput::Progress {
                id: op.id,
                phase: OperationPhase::Failed,
                message: String::new(),
            },
            at(now),
        );
        let wake = effects.iter().find_map(|e| match e {
            ApplyEffect::WakeAt(m) => Some(*m),
            _ => None,
        });
        assert!(wake.unwrap().saturating_since(at(now)) <= Duration::from_secs(300));
        now = wake.unwrap().0.as_secs();
    }
}

#[test]
fn an_operation_in_flight_for_five_minutes_is_unresolved_and_still_followed() {
    let mut core = open();
    core.step(ApplyInput::Foreign(commit(1)), at(0));
    let op = asked(&core.step(ApplyInput::Flushed(Some(commit(1))), at(0))).unwrap();
    let effects = core.step(ApplyInput::Tick, at(299));
    assert!(
        effects
            .iter()
            .all(|e| !matches!(e, ApplyEffect::Record { .. }))
    );
    let effects = core.step(ApplyInput::Tick, at(300));
    assert!(effects.iter().any(|e| matches!(
        e,
        ApplyEffect::Record { operation, .. } if operation.phase == OperationPhase::Unresolved
    )));
    assert!(
        !flushes(&core.step(ApplyInput::Foreign(commit(2)), at(400))),
        "nothing more asked"
    );
    let effects = done(&mut core, &op, 500);
    assert!(effects.iter().any(|e| matches!(
        e,
        ApplyEffect::Record { operation, .. } if operation.phase == OperationPhase::Succeeded
    )));
    assert!(
        flushes(&effects),
        "the foreign commit seen meanwhile is due now"
    );
}

#[test]
fn an_operation_found_in_flight_at_start_is_followed_to_its_end() {
    let mut core = ApplierCore::new(ApplierConfig::default());
    let reasons: Reasons = [Reason::ForeignCommit].into_iter().collect();
    let effects = core.step(
        ApplyInput::Restored {
            last_applied: Some(commit(1)),
            in_flight: Some((OperationId(41), commit(2), reasons, OperationPhase::Running)),
            last_operation: None,
            status_read: true,
        },
        at(0),
    );
    assert!(
        asked(&effects).is_none(),
        "nothing is followed before the snapshot gate opens"
    );
    assert!(matches!(core.phase(), ApplyPhase::Following(_)));
    for input in [
        ApplyInput::Reason(Reason::Repair),
        ApplyInput::Foreign(commit(5)),
        ApplyInput::Tick,
    ] {
        let effects = core.step(input, at(0));
        assert!(
            asked(&effects).is_none() && !flushes(&effects),
            "{effects:?}"
        );
    }
    let op = asked(&core.step(ApplyInput::Gate(None), at(0))).expect("followed once open");
    assert_eq!((op.id, op.commit), (OperationId(41), commit(2)));
    assert_eq!(op.phase, OperationPhase::Running);
    let effects = done(&mut core, &op, 1);
    assert_eq!(core.last_applied(), Some(commit(2)));
    assert!(flushes(&effects), "what came meanwhile is decided after it");
    let next = asked(&core.step(ApplyInput::Flushed(Some(commit(5))), at(1))).unwrap();
    assert_eq!(next.id, OperationId(42), "numbering goes on");
}

#[test]
fn a_remote_without_the_branch_holds_the_reason_until_a_tip_appears() {
    let mut core = open();
    assert!(flushes(
        &core.step(ApplyInput::Reason(Reason::CatchUpConverge), at(0))
    ));
    let effects = core.step(ApplyInput::Flushed(None), at(0));
    assert!(
        asked(&effects).is_none() && !flushes(&effects),
        "no busy loop"
    );
    assert!(!flushes(&core.step(ApplyInput::Tick, at(5))));
    assert!(flushes(&core.step(ApplyInput::Published(commit(1)), at(6))));
}

#[test]
fn numbering_goes_on_after_the_last_recorded_operation_even_one_that_ended() {
    let mut core = ApplierCore::new(ApplierConfig::default());
    core.step(
        ApplyInput::Restored {
            last_applied: Some(commit(1)),
            in_flight: None,
            last_operation: Some(OperationId(41)),
            status_read: true,
        },
        at(0),
    );
    core.step(ApplyInput::Gate(None), at(0));
    core.step(ApplyInput::Foreign(commit(2)), at(0));
    let op = asked(&core.step(ApplyInput::Flushed(Some(commit(2))), at(0))).expect("asked");
    assert_eq!(op.id, OperationId(42));
}

/// A core restored from a claim's status, its gate open, asked to converge; the operation the
/// flush answering `tip` asks for.
fn converge_after_restore(
    last_applied: Option<CommitId>,
    last_operation: Option<OperationId>,
    tip: CommitId,
) -> (ApplierCore, Option<Operation>) {
    converge_after(last_applied, last_operation, true, tip)
}

/// [`converge_after_restore`], the status read or (`status_read`: false) not.
fn converge_after(
    last_applied: Option<CommitId>,
    last_operation: Option<OperationId>,
    status_read: bool,
    tip: CommitId,
) -> (ApplierCore, Option<Operation>) {
    let mut core = ApplierCore::new(ApplierConfig::default());
    core.step(
        ApplyInput::Restored {
            last_applied,
            in_flight: None,
            last_operation,
            status_read,
        },
        at(0),
    );
    core.step(ApplyInput::Gate(None), at(0));
    assert!(flushes(
        &core.step(ApplyInput::Reason(Reason::CatchUpConverge), at(0))
    ));
    let op = asked(&core.step(ApplyInput::Flushed(Some(tip)), at(0)));
    (core, op)
}

#[test]
fn a_converge_applies_what_git_gained_since_the_last_apply_and_everything_when_nothing_was() {
    // Pushed while backflow was down: the tip is past the last applied commit.
    let (_, op) = converge_after_restore(Some(commit(1)), Some(OperationId(4)), commit(2));
    let op = op.expect("asked");
    assert!(op.reasons.contains(Reason::ForeignCommit), "{op:?}");
    assert!(!op.reasons.catch_up_only());
    // First contact: no operation was ever recorded; the branch whole is new to the live side.
    let (mut core, op) = converge_after_restore(None, None, commit(3));
    let op = op.expect("asked");
    assert!(op.reasons.contains(Reason::ForeignCommit), "{op:?}");
    done(&mut core, &op, 1);
    assert_eq!(core.last_applied(), Some(commit(3)));
    // A claim that recorded operations but never brought Git's changes to the live side (it
    // only stamped, or left objects to newer edits): what Git gained meanwhile is applied
    // too. (Before, it only stamped, and a push made after its last catch-up stayed in Git
    // and never reached the live side; found by the simulator, seed 64070.) The snapshot
    // published first carries what changed live, so a live delete is in Git by then.
    let (_, op) = converge_after_restore(None, Some(OperationId(2)), commit(3));
    let op = op.expect("asked");
    assert!(op.reasons.contains(Reason::ForeignCommit), "{op:?}");
    // A status that could not be read says nothing of what was applied: the converge only
    // stamps, so an object missing live (a delete not yet published) is not created again.
    let (_, op) = converge_after(None, Some(OperationId(0)), false, commit(3));
    let op = op.expect("asked");
    assert!(op.reasons.catch_up_only(), "{op:?}");
    // Nothing new since the last apply: nothing asked.
    let (_, op) = converge_after_restore(Some(commit(1)), Some(OperationId(4)), commit(1));
    assert!(op.is_none());
}

#[test]
fn an_operation_that_only_stamped_does_not_count_as_applied() {
    let mut core = ApplierCore::new(ApplierConfig::default());
    core.step(
        ApplyInput::Restored {
            last_applied: Some(commit(1)),
            in_flight: None,
            last_operation: Some(OperationId(2)),
            status_read: true,
        },
        at(0),
    );
    core.step(ApplyInput::Gate(None), at(0));
    // An object created live without the applier's stamp: adopted, at a tip Git moved to.
    assert!(flushes(
        &core.step(ApplyInput::Reason(Reason::CatchUpAdopt), at(0))
    ));
    let op = asked(&core.step(ApplyInput::Flushed(Some(commit(3))), at(0))).expect("asked");
    assert!(op.reasons.catch_up_only(), "{op:?}");
    done(&mut core, &op, 3);
    assert_eq!(
        core.last_applied(),
        Some(commit(1)),
        "Git's changes are not live yet"
    );
}

#[test]
fn a_gate_said_open_again_during_the_flush_asks_at_once_and_a_hold_is_reported() {
    let mut core = open();
    assert!(flushes(&core.step(ApplyInput::Foreign(commit(1)), at(1))));
    // The board says the gate is open again (another stream's list came in): nothing was held.
    core.step(ApplyInput::Gate(None), at(1));
    let effects = core.step(ApplyInput::Flushed(Some(commit(1))), at(1));
    assert_eq!(asked(&effects).map(|op| op.commit), Some(commit(1)));
    assert_eq!(core.hold(), None);
    core.step(ApplyInput::Gate(Some(Hold::CommitRequest)), at(2));
    assert_eq!(core.hold(), Some(&Hold::CommitRequest));
}

#[test]
fn an_operation_in_flight_asks_to_be_woken_when_it_would_be_unresolved_and_no_longer_after() {
    let mut core = open();
    core.step(ApplyInput::Foreign(commit(1)), at(10));
    let effects = core.step(ApplyInput::Flushed(Some(commit(1))), at(10));
    assert!(asked(&effects).is_some());
    assert!(
        effects.contains(&ApplyEffect::WakeAt(at(310))),
        "five minutes after the request: {effects:?}"
    );
    let effects = core.step(ApplyInput::Tick, at(310));
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, ApplyEffect::Emit(ApplyEvent::Unresolved(_))))
    );
    assert!(
        !effects.iter().any(|e| matches!(e, ApplyEffect::WakeAt(_))),
        "an unresolved operation is only followed: {effects:?}"
    );
}
