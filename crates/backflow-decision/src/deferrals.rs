//! What an operation leaves for later, and what the claim takes as applied because of it:
//! objects backflow's own applier left to a live edit made after the flush are looked at again
//! shortly (after a new flush), and until then the operation's commit is not the live side's in
//! full. The claims' runner and the simulator keep both through these types.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::{CommitId, Operation, OperationPhase};

/// How long after an operation that deferred objects they are looked at again: once the edit
/// that held them back is in Git (or proves older than the flush, managedFields having second
/// precision), Git's change is applied — after a new flush.
pub const RETRY_DEFERRED: Duration = Duration::from_millis(1500);

/// The objects (`I`: how the runner names them) the last operations deferred.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deferrals<I>(BTreeSet<I>);

impl<I> Default for Deferrals<I> {
    fn default() -> Self {
        Self(BTreeSet::new())
    }
}

impl<I: Ord + Clone> Deferrals<I> {
    /// An operation ended having deferred `deferred`: they replace what was deferred before
    /// (the operation looked at those again), unless it was a catch-up, which only stamps and
    /// looked at none of them — then they stay deferred for the Repair (replaced, the Repair
    /// would find nothing changed and a push the first operation left to a live edit would
    /// never reach the live side). Says whether to look at them again after
    /// [`RETRY_DEFERRED`].
    pub fn ended(&mut self, catch_up: bool, deferred: impl IntoIterator<Item = I>) -> bool {
        if catch_up {
            self.0.extend(deferred);
        } else {
            self.0 = deferred.into_iter().collect();
        }
        !self.0.is_empty()
    }

    /// Also looks at `objects` again (left to a live edit not in Git yet).
    pub fn extend(&mut self, objects: impl IntoIterator<Item = I>) {
        self.0.extend(objects);
    }

    /// What the next operation looks at as changed, whatever Git says.
    #[must_use]
    pub fn objects(&self) -> &BTreeSet<I> {
        &self.0
    }

    /// Whether `object` is deferred.
    #[must_use]
    pub fn contains<Q: Ord + ?Sized>(&self, object: &Q) -> bool
    where
        I: std::borrow::Borrow<Q>,
    {
        self.0.contains(object)
    }

    /// Whether nothing is deferred.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What besides deferred objects an ended operation left off the live side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeftOff {
    /// A prune held for a person to confirm.
    pub prune_held: bool,
    /// Files the applier could not read (what they declare is not known to be live).
    pub unreadable: bool,
}

/// What a claim records of an ended operation: the commit it takes as applied (what the next
/// apply's "changed since" starts from) and as in step (what the mirror reads the live side
/// against at start). `None`: keep what was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recorded {
    /// The commit now applied.
    pub applied: Option<CommitId>,
    /// The commit now in step.
    pub in_step: Option<CommitId>,
}

impl<I: Ord + Clone> Deferrals<I> {
    /// What `operation`, as it ended, makes the claim record. Only a success with nothing
    /// deferred and no prune held is the live side's in full (a process that starts after a
    /// crash must apply it again otherwise: the deferrals die with this one); a catch-up only
    /// stamps, so Git's changes up to its commit are not what "changed since" starts from; and
    /// what an unreadable file declares keeps the mirror's baseline at the last commit that
    /// could read it.
    #[must_use]
    pub fn recorded(&self, operation: &Operation, left: LeftOff) -> Recorded {
        let full =
            operation.phase == OperationPhase::Succeeded && self.is_empty() && !left.prune_held;
        if !full {
            return Recorded::default();
        }
        Recorded {
            applied: (!operation.reasons.catch_up_only()).then_some(operation.commit),
            in_step: (!left.unreadable).then_some(operation.commit),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{Moment, OperationId, Reason, Reasons};

    fn operation(phase: OperationPhase, reasons: &[Reason]) -> Operation {
        Operation {
            id: OperationId(1),
            commit: CommitId::from_bytes([7; 20]),
            reasons: reasons.iter().copied().collect::<Reasons>(),
            phase,
            requested_at: Moment(Duration::ZERO),
        }
    }

    #[test]
    fn a_catch_up_keeps_what_was_deferred_and_an_apply_replaces_it() {
        let mut deferrals = Deferrals::default();
        assert!(deferrals.ended(false, ["a", "b"]));
        assert!(
            deferrals.ended(true, []),
            "a catch-up looked at none of them"
        );
        assert_eq!(deferrals.objects().len(), 2);
        assert!(deferrals.ended(false, ["c"]));
        assert!(deferrals.contains(&"c") && !deferrals.contains(&"a"));
        assert!(!deferrals.ended(false, []), "nothing left: no retry");
        deferrals.extend(["spared"]);
        assert!(!deferrals.is_empty());
    }

    #[test]
    fn only_a_success_with_nothing_left_off_is_recorded_as_applied_and_in_step() {
        let commit = CommitId::from_bytes([7; 20]);
        let apply = operation(OperationPhase::Succeeded, &[Reason::ForeignCommit]);
        let mut deferrals = Deferrals::default();
        let full = Recorded {
            applied: Some(commit),
            in_step: Some(commit),
        };
        assert_eq!(deferrals.recorded(&apply, LeftOff::default()), full);
        let catch_up = operation(OperationPhase::Succeeded, &[Reason::CatchUpConverge]);
        assert_eq!(
            deferrals.recorded(&catch_up, LeftOff::default()),
            Recorded {
                applied: None,
                in_step: Some(commit)
            }
        );
        let unreadable = LeftOff {
            unreadable: true,
            ..LeftOff::default()
        };
        assert_eq!(deferrals.recorded(&apply, unreadable).in_step, None);
        let held = LeftOff {
            prune_held: true,
            ..LeftOff::default()
        };
        assert_eq!(deferrals.recorded(&apply, held), Recorded::default());
        let failed = operation(OperationPhase::Failed, &[Reason::ForeignCommit]);
        assert_eq!(
            deferrals.recorded(&failed, LeftOff::default()),
            Recorded::default()
        );
        deferrals.ended(false, ["a"]);
        assert_eq!(
            deferrals.recorded(&apply, LeftOff::default()),
            Recorded::default()
        );
    }
}
