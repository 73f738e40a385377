//! Named regression schedules: cases found (by the simulator, or end to end) written as the
//! world's actions, so each reads as its story and keeps its meaning whatever the random
//! schedules become. Each checks every invariant, and that its story was reached.

use backflow_sim::{Action, IoFault, Variant, World, run_script};

use Action::*;

/// The script's world, or its failure with the trace.
fn story(variant: Variant, actions: &[Action]) -> World {
    match run_script(variant, actions) {
        Ok(world) => world,
        Err(failure) => panic!("{failure}"),
    }
}

/// Whether the trace holds a line containing `what`.
fn told(world: &World, what: &str) -> bool {
    world.trace().iter().any(|line| line.contains(what))
}

/// The story reached `what` (a line of its trace contains it); the trace when it did not.
fn reached(world: &World, what: &str) {
    assert!(
        told(world, what),
        "the story never told {what:?}\n--- trace ---\n{}",
        world.trace().join("\n")
    );
}

/// Started: the initial list read and published, the first apply done.
const STARTED: [Action; 3] = [ListReturns, GateOpens, Settle];

/// Time for a one-second commit window to close.
const A_SECOND: [Action; 5] = [Tick, Tick, Tick, Tick, Tick];

/// Deleted live, created again, the process killed before either was pushed: the journal
/// forgets the delete a later write superseded, so the restart does not remove the object
/// created again (session 25; before, the object went from Git and then from the live side).
#[test]
fn a_delete_superseded_by_a_create_before_a_crash_is_not_replayed() {
    let mut script = STARTED.to_vec();
    script.extend([
        Delete("a"),
        Deliver,
        Edit("a"),
        Deliver,
        Restart,
        ListReturns,
        GateOpens,
    ]);
    let world = story(Variant::WithDeletes, &script);
    assert!(
        told(&world, "the mirror submits a = -"),
        "the delete was submitted"
    );
    assert!(!told(
        &world,
        "the journal's delete of a is submitted again"
    ));
}

/// "No edit lost", Flux and Argo CD claims: an operation in flight when backflow restarts is
/// followed once the new process's snapshot is published, never asked anew beside it
/// (invariant 9).
#[test]
fn an_operation_in_flight_at_a_restart_is_followed_not_asked_again() {
    let mut script = STARTED.to_vec();
    script.extend(ASKED_FOR_A_PUSH_OF_A);
    script.extend([Restart, ListReturns, GateOpens]);
    let world = story(Variant::HeldApplier, &script);
    assert!(told(
        &world,
        "apply 2 is followed: the applier is still at it"
    ));
    assert!(!told(
        &world,
        "apply 3 asked for 0000000000000000000000000000000000000002"
    ));
}

/// Somebody pushes `a`; the worker reads it, the claim flushes and asks its applier.
const ASKED_FOR_A_PUSH_OF_A: [Action; 5] = [Push("a"), Webhook, Tick, Answer, Tick];

/// Flux's contract, session 30: an operation the held applier finished while backflow was
/// down is read from the Kustomization's status when the restart follows it (resumed, Ready at
/// its generation, the commit applied), not asked again; and one backflow recorded but never
/// requested (the Kustomization still suspended) is asked for.
#[test]
fn an_operation_finished_while_backflow_was_down_is_read_from_the_appliers_status() {
    let mut script = STARTED.to_vec();
    script.extend(ASKED_FOR_A_PUSH_OF_A);
    script.extend([Restart, ApplierFinishes, ApplierFinishes, ApplierFinishes]);
    script.extend([ApplierFinishes, ListReturns, GateOpens, Settle]);
    let world = story(Variant::HeldApplier, &script);
    reached(&world, "apply 2 ends while backflow is down");
    reached(&world, "apply 2 ended while backflow was down");
    assert!(!told(&world, "apply 2 is not in flight at the applier"));
}

/// A held applier at an older commit when backflow restarts, a live edit of the object made
/// just before (its event and pending write die with the process): the restart's snapshot
/// carries the edit to Git, the applier writes the older commit over it, and once its
/// operation ends the converge applies the snapshot's commit — the edit comes back. (The
/// converge's flush fixed in session 25 needs the tip heard to equal the applied commit when
/// the operation ends; this story does not reach that, the decision's test
/// `a_converge_after_a_followed_operation_applies_what_the_restart_published` does.)
#[test]
fn a_converge_after_a_followed_operation_applies_the_restarts_snapshot() {
    let mut script = STARTED.to_vec();
    script.extend(ASKED_FOR_A_PUSH_OF_A);
    script.extend([Edit("a"), Restart, ListReturns, GateOpens]);
    // The applier ends its reconcile before the worker answers anything: the restart's
    // snapshot is not published yet when the operation ends.
    script.extend([ApplierFinishes; 6]);
    let world = story(Variant::HeldApplier, &script);
    assert!(told(
        &world,
        "apply 2 is followed: the applier is still at it"
    ));
    assert!(told(&world, "apply 2 writes a = g"));
    assert!(told(&world, "apply 3 writes a = p"));
}

/// A failed push is retried after its backoff, and the edit it carried reaches Git
/// (invariant 10 bounds the retry).
#[test]
fn an_edit_whose_push_failed_is_retried_after_the_backoff() {
    let mut script = STARTED.to_vec();
    script.extend([Edit("c"), Deliver]);
    script.extend(A_SECOND);
    script.extend([Answer, Fail(IoFault::Fails)]);
    let world = story(Variant::Correct, &script);
    assert!(told(&world, "the push never reaches the remote"));
    assert!(told(&world, "the cycle failed"));
}

/// "No edit lost" case 2: pushes made while backflow is stopped — an edit of an object the
/// live side has, and a new file for one it lacks — are applied at start, not reverted by the
/// start-up snapshot (read against the claim's in-step commit, the live objects did not change
/// since).
#[test]
fn pushes_made_while_backflow_was_stopped_are_applied_not_reverted() {
    let mut script = STARTED.to_vec();
    // The live side lacks b, and so does the commit it last held in full.
    script.extend([PushRemoval("b"), Webhook, Settle]);
    script.extend([
        Restart,
        Push("a"),
        Push("b"),
        ListReturns,
        GateOpens,
        Settle,
    ]);
    let world = story(Variant::WithDeletes, &script);
    reached(&world, "writes b = -");
    reached(&world, "writes a = g");
    reached(&world, "writes b = g");
}

/// "No edit lost" case 2, over backflow's own commit: a live edit mirrored and pushed, the
/// process stopped before any apply took the live side to that commit, then somebody pushes
/// over it. The in-step commit predates the edit, but the object reads as backflow's last push
/// held it: the push wins (session 25's `DurableTips::pushed` baseline).
#[test]
fn a_push_over_a_mirrored_live_edit_made_while_backflow_was_stopped_wins() {
    let mut script = STARTED.to_vec();
    script.extend([Edit("a"), Deliver]);
    script.extend(A_SECOND);
    script.extend([Answer, Answer, Answer]);
    script.extend([Restart, Push("a"), ListReturns, GateOpens, Settle]);
    let world = story(Variant::Correct, &script);
    reached(&world, "the push is answered");
    reached(&world, "apply 2 writes a = g");
}

/// "No edit lost" case 3: an apply of a push changing all three objects is cut short after
/// writing one; at start the objects it did not write read as the in-step commit holds them,
/// so Git's values stand and are applied — and the one it wrote reads as the operation's
/// commit, so a push made over it meanwhile stands too (the claim's `operation.commit`).
#[test]
fn an_apply_cut_short_is_finished_at_start_and_a_push_over_it_stands() {
    let mut script = STARTED.to_vec();
    // Past the second the objects were created in (the applier leaves what was written in
    // its flush's second).
    script.extend(A_SECOND);
    script.extend([Push("a"), Push("b"), Push("c"), Webhook, Tick, Answer, Tick]);
    script.extend([
        RestartDuringApply(1),
        Push("a"),
        ListReturns,
        GateOpens,
        Settle,
    ]);
    let world = story(Variant::Correct, &script);
    reached(&world, "is cut short after at most 1 writes");
    reached(&world, "apply 2 writes a = g");
    reached(&world, "apply 3 writes b = g");
}

/// A live edit mirrored and pushed, somebody pushes over it, another live edit is mirrored on
/// top before that push is applied, and the process dies: at start the object reads as
/// backflow's commit of the edit held it (a commit on the branch since the in-step one, neither
/// the last push nor the operation's), so the push stands (default seed 59889 of a soak).
#[test]
fn a_push_over_a_mirrored_edit_stands_though_backflow_pushed_again_since() {
    let mut script = STARTED.to_vec();
    script.extend(A_SECOND);
    script.extend([Edit("a"), Deliver]);
    script.extend(A_SECOND);
    script.extend([Answer, Answer, Answer, Push("a"), Edit("b"), Deliver]);
    script.extend(A_SECOND);
    script.extend([Answer, Answer, Answer, Answer, Answer, Answer]);
    script.extend([Restart, ListReturns, GateOpens, Settle]);
    let world = story(Variant::Correct, &script);
    reached(&world, "somebody pushes a = g");
    reached(&world, "writes a = g");
}

/// What the branch's tip holds of `name` (the last line of the branch's history).
fn in_git(world: &World, name: &str) -> String {
    let history = world.branch_history();
    let tip = history.lines().last().unwrap_or_default();
    let start = tip.find(&format!("{name} = ")).unwrap_or(tip.len());
    let rest = &tip[start..];
    rest.split(", ").next().unwrap_or_default().to_string()
}

/// The branch's tip holds the person's `x` and the push's `y` of `a`.
fn persons_x_and_pushs_y_in_git(world: &World) {
    let a = in_git(world, "a");
    assert!(
        a.contains(r#""x":"p"#) && a.contains(r#""y":"g"#),
        "the person's x and the push's y: {a}\n{}",
        world.branch_history()
    );
}

/// "No edit lost", two fields of one object edited on both sides: a live edit of `x` waits in
/// the commit window while a push of `y` lands. The replay lays the edit onto the push field
/// by field, and the apply brings the push's `y` to the live side: both stand.
#[test]
fn a_live_edit_of_one_field_and_a_push_of_the_other_both_stand() {
    let mut script = STARTED.to_vec();
    script.extend([EditField("a", "x"), Deliver, PushField("a", "y"), Webhook]);
    script.extend(A_SECOND);
    script.push(Settle);
    let world = story(Variant::TwoFields, &script);
    reached(&world, "somebody pushes a = ");
    persons_x_and_pushs_y_in_git(&world);
}

/// Backflow pushed a live edit of `y`; a person then edits `x` live and the process dies before
/// that is published; somebody pushes `y` while it is down. The start-up list reads `y` as
/// backflow's push held it — unchanged live since — so the push's `y` stands beside the live
/// `x` (session 31, soak seed 5437: read against the in-step commit alone, the live `y` was
/// written over the push).
#[test]
fn a_push_of_a_field_backflow_had_pushed_stands_beside_a_live_edit_after_a_restart() {
    let mut script = STARTED.to_vec();
    script.extend([EditField("a", "y"), Deliver, Settle, EditField("a", "x")]);
    script.extend([Restart, PushField("a", "y"), ListReturns, GateOpens, Settle]);
    let world = story(Variant::TwoFields, &script);
    reached(&world, "the process is killed");
    persons_x_and_pushs_y_in_git(&world);
}

/// Somebody deletes the branch; backflow rebuilds it from the live side, and the process dies
/// as that push lands, before any apply; somebody then pushes the removal of `a`. The start-up
/// list is read against the claim's commit, which the branch lost, and the walk has nothing to
/// walk (the rebuilt branch shares no commit with it): `a` reads as backflow's last push held
/// it, unchanged live since, so the removal stands (session 31: reverting that rule,
/// `DurableTips::pushed`, failed no CI seed any more — the walk covers it on a branch that
/// holds the claim's commit — only soak seeds; this is the case only it covers).
#[test]
fn a_removal_over_a_rebuilt_branch_stands_after_a_restart() {
    let mut script = STARTED.to_vec();
    script.extend([ApplierFinishes, DeleteBranch, Webhook, Tick, Answer, Tick]);
    script.extend([
        ListReturns,
        GateOpens,
        Tick,
        Answer,
        Tick,
        RestartAfterPushLands,
    ]);
    script.extend([PushRemoval("a"), ListReturns, GateOpens, Settle]);
    let world = story(Variant::WithDeletes, &script);
    reached(&world, "somebody deletes the branch");
    reached(
        &world,
        "the push lands; the process dies before it hears so",
    );
    assert_eq!(in_git(&world, "a"), "a = -", "{}", world.branch_history());
}
