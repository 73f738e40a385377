//! What backflow's own applier does with one object, told from what Git and the live side show
//! of it: written, stamped, left to a newer live edit, pruned or kept. The native applier in
//! `backflow-apply` reads the facts and carries the verdict out; the simulator's applier runs
//! the same rule over its model objects.

/// Whether Git changed an object's document (`now`) for an operation: since the commit the
/// last successful operation applied (`since`: what that commit declared of it, `None` for
/// nothing), or since the commit of the operation asked before this one, when that one did not
/// succeed (`tried`): cut short, failed or interrupted by a restart, it may have written the
/// object as it declared it — the live side may hold that, as the mirror reads it
/// (`LiveHeld::applying`), so an object it declared otherwise is changed too.
#[must_use]
pub fn git_changed<V: PartialEq>(now: &V, since: Option<&V>, tried: Option<&V>) -> bool {
    since != Some(now) || tried.is_some_and(|t| t != now)
}

/// What an apply knows of one object the commit declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclaredObject {
    /// Git changed its document since the last applied commit.
    pub git_changed: bool,
    /// An earlier apply left it to a newer live edit: it is looked at as changed.
    pub retried: bool,
    /// What the operation does.
    pub operation: OperationKind,
    /// Its live edit is not in Git yet (a file blocked it): left as it is.
    pub spared: bool,
    /// The live object, when there is one.
    pub live: Option<LiveObject>,
}

/// What an operation does with the objects it declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationKind {
    /// Applies what Git changed, creates what is missing.
    Apply,
    /// A catch-up: stamps what is live and creates nothing.
    CatchUp,
}

impl OperationKind {
    /// A catch-up when `stamp_only`, else an apply.
    #[must_use]
    pub fn of(stamp_only: bool) -> Self {
        if stamp_only {
            Self::CatchUp
        } else {
            Self::Apply
        }
    }
}

/// Whose the live object is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveOwner {
    /// It carries this claim's ownership label.
    Stamped,
    /// Nobody's label: this applier takes it.
    Unstamped,
    /// Another applier owns it (Flux, Argo CD, another claim).
    Foreign,
}

/// What the live side shows of one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveObject {
    /// Every field Git declares holds the same value live.
    pub holds: bool,
    /// A manager other than the applier wrote it in the flush's second or later (its status
    /// aside): the edit was decided after the flush, so the commit cannot hold it.
    pub edited_since_flush: bool,
    /// Whose it is.
    pub owner: LiveOwner,
}

/// How one declared object is brought in line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectWrite {
    /// Nothing to do.
    Nothing,
    /// Only the ownership label is missing: added, no other field touched.
    Stamp,
    /// The whole declared object is applied (created when missing).
    Apply,
    /// Git changed it, but it was edited live after the flush: left, looked at again by the
    /// next apply (the edit reaches Git and wins, or Git's change is applied then).
    Deferred,
    /// Missing live during a catch-up: not created (the delete may not be published yet).
    LeftAbsent,
    /// Another applier owns it: two appliers applying one object fight, so it is left alone.
    Foreign,
    /// Its live edit is not in Git yet: left as it is, still owned.
    Spared,
}

impl DeclaredObject {
    /// Whether the apply looks at the object's content at all: Git changed it, or an earlier
    /// apply left it; a catch-up never does.
    #[must_use]
    pub fn changed(&self) -> bool {
        self.operation == OperationKind::Apply && (self.retried || self.git_changed)
    }

    /// The write the object gets.
    #[must_use]
    pub fn write(&self) -> ObjectWrite {
        let changed = self.changed();
        match self.live {
            Some(_) if changed && self.spared => ObjectWrite::Spared,
            // A delete that is not in Git yet (its file blocked it) is not undone either.
            None if self.spared => ObjectWrite::Spared,
            Some(live) if live.owner == LiveOwner::Foreign => ObjectWrite::Foreign,
            // Missing live although Git declares it, changed or not: after the flush a live
            // delete is in Git or older than Git's word (a revert, a force-push); a delete made
            // since collides in the apply's window. Only a catch-up leaves it.
            None if self.operation == OperationKind::CatchUp => ObjectWrite::LeftAbsent,
            None => ObjectWrite::Apply,
            Some(live) if changed && !live.holds => {
                if live.edited_since_flush {
                    ObjectWrite::Deferred
                } else {
                    ObjectWrite::Apply
                }
            }
            Some(live) if live.owner == LiveOwner::Stamped => ObjectWrite::Nothing,
            Some(_) => ObjectWrite::Stamp,
        }
    }
}

/// What an apply knows of one object the commit no longer declares: one the applier owned, or
/// whose file went away since the last applied commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedObject {
    /// Its live edit is not in Git yet (a file blocked it): left as it is.
    pub spared: bool,
    /// The live object, when there is one.
    pub live: Option<RemovedLive>,
}

/// What the live side shows of an object the commit no longer declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemovedLive {
    /// It is this applier's to remove: its label is this claim's (or, for a file gone before
    /// the object was ever applied, no other's), and no other applier owns it.
    pub ours: bool,
    /// A manager other than the applier wrote it in the flush's second or later.
    pub edited_since_flush: bool,
}

/// What becomes of an object the commit no longer declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    /// Deleted (as it was read: its uid and resourceVersion as preconditions).
    Delete,
    /// Not there, or not this applier's: nothing to own any more.
    Gone,
    /// Edited after the flush: left, still owned, looked at again by the next apply; the edit
    /// reaches Git and declares the object again.
    Kept,
    /// Its live edit is not in Git yet: left, still owned.
    Spared,
}

impl RemovedObject {
    /// What becomes of it.
    #[must_use]
    pub fn prune(&self) -> Prune {
        match self.live {
            _ if self.spared => Prune::Spared,
            None => Prune::Gone,
            Some(live) if !live.ours => Prune::Gone,
            Some(live) if live.edited_since_flush => Prune::Kept,
            Some(_) => Prune::Delete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRESH: LiveObject = LiveObject {
        holds: false,
        edited_since_flush: false,
        owner: LiveOwner::Stamped,
    };

    fn declared(live: Option<LiveObject>) -> DeclaredObject {
        DeclaredObject {
            git_changed: true,
            retried: false,
            operation: OperationKind::Apply,
            spared: false,
            live,
        }
    }

    #[test]
    fn a_change_is_applied_unless_edited_since_the_flush() {
        assert_eq!(declared(Some(FRESH)).write(), ObjectWrite::Apply);
        let edited = LiveObject {
            edited_since_flush: true,
            ..FRESH
        };
        assert_eq!(declared(Some(edited)).write(), ObjectWrite::Deferred);
        let holds = LiveObject {
            holds: true,
            ..edited
        };
        assert_eq!(
            declared(Some(holds)).write(),
            ObjectWrite::Nothing,
            "what already holds is not deferred"
        );
        let unstamped = LiveObject {
            owner: LiveOwner::Unstamped,
            ..holds
        };
        assert_eq!(declared(Some(unstamped)).write(), ObjectWrite::Stamp);
    }

    #[test]
    fn only_a_change_or_a_retry_is_looked_at() {
        let unchanged = DeclaredObject {
            git_changed: false,
            ..declared(Some(FRESH))
        };
        assert_eq!(unchanged.write(), ObjectWrite::Nothing);
        let retried = DeclaredObject {
            retried: true,
            ..unchanged
        };
        assert_eq!(retried.write(), ObjectWrite::Apply);
        let catch_up = DeclaredObject {
            operation: OperationKind::CatchUp,
            ..retried
        };
        assert!(!catch_up.changed());
        assert_eq!(catch_up.write(), ObjectWrite::Nothing);
    }

    #[test]
    fn a_missing_object_is_created_changed_or_not_except_by_a_catch_up() {
        let missing = DeclaredObject {
            git_changed: false,
            ..declared(None)
        };
        assert_eq!(missing.write(), ObjectWrite::Apply);
        let catch_up = DeclaredObject {
            operation: OperationKind::CatchUp,
            ..missing
        };
        assert_eq!(catch_up.write(), ObjectWrite::LeftAbsent);
    }

    #[test]
    fn spared_and_foreign_objects_are_left_alone() {
        let spared = DeclaredObject {
            spared: true,
            ..declared(Some(FRESH))
        };
        assert_eq!(spared.write(), ObjectWrite::Spared);
        assert_eq!(
            DeclaredObject {
                spared: true,
                ..declared(None)
            }
            .write(),
            ObjectWrite::Spared
        );
        let foreign = LiveObject {
            owner: LiveOwner::Foreign,
            ..FRESH
        };
        assert_eq!(declared(Some(foreign)).write(), ObjectWrite::Foreign);
        assert_eq!(
            DeclaredObject {
                spared: true,
                git_changed: false,
                ..declared(Some(foreign))
            }
            .write(),
            ObjectWrite::Foreign,
            "an unchanged object is spared only from a write"
        );
    }

    #[test]
    fn a_removed_object_is_deleted_only_when_ours_and_not_edited_since_the_flush() {
        let live = RemovedLive {
            ours: true,
            edited_since_flush: false,
        };
        let removed = |spared, live| RemovedObject { spared, live };
        assert_eq!(removed(false, Some(live)).prune(), Prune::Delete);
        assert_eq!(removed(true, Some(live)).prune(), Prune::Spared);
        assert_eq!(removed(false, None).prune(), Prune::Gone);
        let theirs = RemovedLive {
            ours: false,
            ..live
        };
        assert_eq!(removed(false, Some(theirs)).prune(), Prune::Gone);
        let edited = RemovedLive {
            edited_since_flush: true,
            ..live
        };
        assert_eq!(removed(false, Some(edited)).prune(), Prune::Kept);
    }
}
