//! The model appliers: backflow's own (it dies with the process) and a held one, Flux-like
//! (it goes on through backflow's restarts and is followed by the next process); how each is
//! asked, writes, fails, stalls and reports.

use std::collections::BTreeSet;

use backflow_branch::Moment;
use backflow_branch::model;
use backflow_decision::held_status::HeldOutcome;
use backflow_decision::object_write::{
    self, DeclaredObject, LiveObject as LiveFacts, LiveOwner, ObjectWrite, OperationKind, Prune,
    RemovedLive, RemovedObject,
};
use backflow_decision::{
    ApplyInput, CommitId, Operation, OperationId, OperationPhase, RETRY_DEFERRED,
};
use rand::Rng;

use crate::check::Violation;

use super::{ABSENT, LiveObject, NAMES, Pruned, RECONCILE, STALL, World, Writer, absent, same};

impl World {
    /// The applier is asked: every edit decided before the flush must be in what it applies.
    pub(super) fn ask(&mut self, operation: Operation) {
        self.asks += 1;
        self.log(format!(
            "apply {} asked for {} ({:?})",
            operation.id.0,
            operation.commit,
            operation.reasons.names()
        ));
        // A followed operation (found in flight after a restart) was asked before the crash.
        if self.found.is_none() && self.followed != Some(operation.id) {
            self.found = self.ledger.asked(operation.commit, &self.branch.remote);
        }
        let id = operation.id;
        if self.found.is_none() {
            self.found = self.operations.asked(id, self.followed);
        }
        if self.followed.take() == Some(id) {
            if self.held() {
                return self.follow_held(operation);
            }
            // The native applier ran in the process that died: its operation ended with it.
            self.log(format!("apply {} was interrupted by the restart", id.0));
            return self.applier_input(ApplyInput::Progress {
                id,
                phase: OperationPhase::Failed,
                message: "interrupted".into(),
            });
        }
        if self.held() {
            self.request_held(&operation);
        } else {
            // As the claims' runner: the operation asked before, when it is not the last
            // applied one, is looked at too (`ApplyRequest::tried`).
            let previous = self.tried.replace(operation.commit);
            self.tried_before = previous.filter(|t| Some(*t) != self.last_applied);
        }
        self.asked = Some(operation);
        if !self.quiescing
            && self.schedule == super::Schedule::Drawn
            && self.rng.random_range(0..8) == 0
        {
            // The applier stalls past the decision's patience (a controller that hangs).
            let until = self.branch.now + STALL;
            self.log(format!("apply {} stalls for {}s", id.0, STALL.as_secs()));
            self.stalled_until = Some(until);
        }
        self.applier_input(ApplyInput::Progress {
            id,
            phase: OperationPhase::Running,
            message: String::new(),
        });
    }

    /// backflow's driver asks the held applier for `operation`'s commit under a new mark (its
    /// `requestedAt`, or the operation's correlation id); the applier reconciles for a while.
    fn request_held(&mut self, operation: &Operation) {
        let token = self.fresh("request-");
        self.held_resource
            .request(&operation.commit.to_string(), &token);
        self.request = Some(token);
        self.reconciles_until = Some(self.branch.now + RECONCILE);
    }

    /// A restart follows the operation its held applier carries on with, by the driver's rule
    /// over what the `Kustomization` or `Application` says: the request ended meanwhile, is
    /// still under way, or never reached the applier (or ended without applying the commit)
    /// and is asked for now. Its window opened at the restart.
    fn follow_held(&mut self, operation: Operation) {
        let id = operation.id;
        let commit = operation.commit.to_string();
        let running = ApplyInput::Progress {
            id,
            phase: OperationPhase::Running,
            message: String::new(),
        };
        let Some(token) = self.held_resource.in_flight(&commit) else {
            self.log(format!(
                "apply {} is not in flight at the applier: asked now",
                id.0
            ));
            self.request_held(&operation);
            self.asked = Some(operation);
            return self.applier_input(running);
        };
        let Some(outcome) = self.held_resource.outcome(&commit, &token) else {
            self.log(format!(
                "apply {} is followed: the applier is still at it",
                id.0
            ));
            debug_assert!(
                self.asked.as_ref().is_some_and(|a| a.id == id) && self.request == Some(token),
                "a request in flight that the applier does not carry out"
            );
            return self.applier_input(running);
        };
        self.log(format!("apply {} ended while backflow was down", id.0));
        self.applier_input(running);
        self.held_resource.hold();
        self.applier_input(ApplyInput::Progress {
            id,
            phase: phase_of(&outcome),
            message: String::new(),
        });
        self.close_window();
    }

    /// The applier finishes: backflow's own writes what Git changed since the last applied
    /// commit, over nothing a person edited after the flush (that is left for a Repair); a
    /// held one writes the whole commit. A held applier that ends while backflow restarts is
    /// heard of when the restart follows it.
    pub(super) fn finish_apply(&mut self) {
        let now = self.branch.now;
        if [self.stalled_until, self.reconciles_until]
            .into_iter()
            .flatten()
            .any(|until| until > now)
        {
            // Still stalled: time goes on without it.
            return self.tick();
        }
        self.stalled_until = None;
        self.reconciles_until = None;
        let Some(op) = self.asked.take() else {
            return;
        };
        let heard = self.followed.is_none();
        if heard {
            self.reports_running_again(op.id);
        }
        // Once the world stops, the applier stops failing too.
        let fails = !self.quiescing
            && self.schedule == super::Schedule::Drawn
            && self.rng.random_range(0..10) == 0;
        if self.held() {
            if !fails {
                self.held_writes(&op);
                self.last_applied = Some(op.commit);
            }
            let commit = op.commit.to_string();
            self.held_resource.finished(&commit, !fails);
            if !heard {
                self.log(format!("apply {} ends while backflow is down", op.id.0));
                return;
            }
            // As the driver: the outcome is what the status says of its request.
            let outcome = (self.request.as_ref())
                .and_then(|token| self.held_resource.outcome(&commit, token));
            self.held_resource.hold();
            return match outcome {
                Some(HeldOutcome::Applied) => self.succeeded(&op),
                Some(HeldOutcome::Failed(_)) => self.fail_apply(&op),
                None => {
                    self.found = Some(Violation::Operations(format!(
                        "the held applier finished apply {} but its status says nothing of the request",
                        op.id.0
                    )));
                }
            };
        }
        if fails {
            return self.fail_apply(&op);
        }
        self.native_writes(&op, NAMES.len());
        self.succeeded(&op);
    }

    /// The process dies while backflow's own applier carries out its operation, after it
    /// wrote at most `written` of the objects it changes (their events die with the process).
    pub(super) fn cut_short(&mut self, written: usize) {
        if self.held() || self.stalled_until.is_some() {
            return;
        }
        let Some(op) = self.asked.take() else {
            return;
        };
        self.log(format!(
            "apply {} is cut short after at most {written} writes",
            op.id.0
        ));
        self.native_writes(&op, written);
    }

    /// backflow's own applier writes what Git changed since the last applied commit and
    /// creates what Git declares and the live side lacks, over nothing a person edited after
    /// the flush (left, and looked at again after 1.5 s). It stops after `limit` writes (the
    /// process dies).
    fn native_writes(&mut self, op: &Operation, limit: usize) {
        let mut written = 0;
        let files = self.branch.remote.files(Some(op.commit));
        let before = self.branch.remote.files(self.last_applied);
        let catch_up_only = op.reasons.catch_up_only();
        let now = self.branch.now;
        let gone = ABSENT.to_string();
        let left = self.left_since(self.last_applied, op.commit);
        let tried = (self.tried_before.filter(|t| *t != op.commit))
            .map(|t| self.branch.remote.files(Some(t)));
        let mut deferred_now = Vec::new();
        for name in NAMES {
            let path = model::file(name);
            // A file Git does not hold is an object the applier removes (prunes); one whose
            // file went away since the last apply is removed even if it was never applied (the
            // native applier's `prune_gone`).
            let want = files.get(&path).unwrap_or(&gone);
            // As the native applier (`object_write::git_changed`): changed since the last
            // applied commit, or since the commit of the operation asked before when that one
            // did not succeed; a file gone is changed when it left since the last apply.
            let git_changed = if absent(want) {
                !same(before.get(&path).unwrap_or(&gone), want) || left.contains(&path)
            } else {
                let tried = tried.as_ref().and_then(|t| t.get(&path));
                object_write::git_changed(want, before.get(&path), tried)
            };
            let change = Change {
                git_changed,
                retried: self.deferred.contains(name),
                catch_up_only,
            };
            let verdict = self.native_verdict(name, want, change);
            match verdict {
                // Only stamps: what an earlier apply deferred stays deferred (the runner's).
                _ if catch_up_only => {}
                NativeVerdict::Leave => {}
                NativeVerdict::Defer => {
                    self.log(format!(
                        "apply {}: {name} was edited after the flush: left",
                        op.id.0
                    ));
                    deferred_now.push(name.to_string());
                }
                NativeVerdict::Write if written == limit => return,
                NativeVerdict::Write => {
                    written += 1;
                    self.log(format!("apply {} writes {name} = {want}", op.id.0));
                    self.applier_writes(name, want, now);
                }
            }
        }
        // A catch-up only stamps: it is not what the next apply's "changed since" starts from.
        if !catch_up_only {
            self.last_applied = Some(op.commit);
        }
        if self.deferred.ended(catch_up_only, deferred_now) {
            self.retry_at = Some(now + RETRY_DEFERRED);
        }
    }

    /// What backflow's own applier does with `name` given Git's `want`, by the native
    /// applier's own rule (`object_write`). An object somebody wrote in the flush's second or
    /// later (`edited_since`) is left, whether it would be written or pruned; what somebody
    /// deleted is created again (a delete leaves nothing to read): the mirror's window judges
    /// that.
    fn native_verdict(&self, name: &str, want: &str, change: Change) -> NativeVerdict {
        let live = &self.live[name];
        let edited_since_flush = live.edited_since(self.flushed_at);
        if absent(want) {
            // A catch-up prunes nothing; what is not there is gone.
            let looked_at = !change.catch_up_only && (change.git_changed || change.retried);
            let removed = RemovedObject {
                spared: false,
                live: (looked_at && !absent(&live.value)).then_some(RemovedLive {
                    ours: true,
                    edited_since_flush,
                }),
            };
            return match removed.prune() {
                Prune::Delete => NativeVerdict::Write,
                Prune::Kept => NativeVerdict::Defer,
                Prune::Gone | Prune::Spared => NativeVerdict::Leave,
            };
        }
        let declared = DeclaredObject {
            git_changed: change.git_changed,
            retried: change.retried,
            operation: OperationKind::of(change.catch_up_only),
            spared: false,
            live: (!absent(&live.value)).then(|| LiveFacts {
                holds: same(&live.value, want),
                edited_since_flush,
                owner: LiveOwner::Stamped,
            }),
        };
        match declared.write() {
            ObjectWrite::Apply => NativeVerdict::Write,
            ObjectWrite::Deferred => NativeVerdict::Defer,
            _ => NativeVerdict::Leave,
        }
    }

    fn succeeded(&mut self, op: &Operation) {
        self.applier_input(ApplyInput::Progress {
            id: op.id,
            phase: OperationPhase::Succeeded,
            message: String::new(),
        });
        self.close_window();
        self.pump();
    }

    /// A held applier (Flux's kustomize-controller) applies `op`'s commit whole, edits made
    /// after the flush or not, and prunes what its last apply applied that the commit lacks.
    fn held_writes(&mut self, op: &Operation) {
        let files = self.branch.remote.files(Some(op.commit));
        let inventory = self.branch.remote.files(self.last_applied);
        let now = self.branch.now;
        let gone = ABSENT.to_string();
        for name in NAMES {
            let path = model::file(name);
            let want = files.get(&path).unwrap_or(&gone).clone();
            if same(&self.live[name].value, &want)
                || (absent(&want) && !inventory.contains_key(&path))
            {
                continue;
            }
            self.log(format!("apply {} writes {name} = {want}", op.id.0));
            self.applier_writes(name, &want, now);
        }
    }

    /// The applier said it was working when asked, so the status says so by now; and it
    /// reports its progress once more, as controllers do (nothing changes in the status).
    fn reports_running_again(&mut self, id: OperationId) {
        if self.found.is_none() {
            self.found = self.operations.running(id);
        }
        self.applier_input(ApplyInput::Progress {
            id,
            phase: OperationPhase::Running,
            message: String::new(),
        });
        self.pump();
    }

    /// The applier writes `value` to `name` (a prune when it is a tombstone, announced to the
    /// window first as the native applier does).
    fn applier_writes(&mut self, name: &str, value: &str, now: Moment) {
        if absent(value) {
            let uid = self.live.get(name).map_or(0, |o| o.uid);
            self.windows.note_prune(Pruned {
                name: name.to_string(),
                uid,
            });
        }
        let uid = self.uid();
        let previous = self.live.get(name);
        let writer = if self.held() {
            Writer::Held(self.held_manager)
        } else {
            Writer::Applier
        };
        if self.listing
            && previous.is_some_and(|p| p.by == Writer::Person)
            && let Some(e) = self.expected.get_mut(name)
        {
            // A held applier writes over an edit while backflow is down (its list not back
            // yet): nobody sees the edit, as nobody would without backflow.
            let in_git = self
                .branch
                .remote
                .tip_files()
                .get(&model::file(name))
                .cloned();
            let in_git = in_git.as_deref().unwrap_or(ABSENT);
            e.lost_to_applier(value, in_git, &self.branch.remote);
        }
        // Over a person's edit Git does not hold yet.
        let over_pending = |p: &LiveObject| {
            let e = self.expected.get(name);
            p.by == Writer::Person
                && e.is_some_and(|e| e.pending_edit_in(&p.value, &self.branch.remote))
        };
        if previous.is_some_and(over_pending) {
            self.applied_over_edit.insert(name.to_string());
        }
        let object = LiveObject::written(previous, value.to_string(), writer, now, uid);
        if !self.listing {
            // While the mirror lists, the list reads the write.
            self.echoes_queued += 1;
            self.watch.push_back(object.event(name));
        }
        self.live.insert(name.to_string(), object);
    }

    /// The applier fails (an object the API refuses): nothing written, decided again after the
    /// backoff.
    fn fail_apply(&mut self, op: &Operation) {
        self.log(format!("apply {} fails", op.id.0));
        self.applier_input(ApplyInput::Progress {
            id: op.id,
            phase: OperationPhase::Failed,
            message: "the applier failed".into(),
        });
        self.close_window();
        self.pump();
    }

    /// The files some commit on `commit`'s first-parent history back to `since` (included; 256
    /// commits back without one) held that `commit` does not, as the native applier finds them.
    fn left_since(&self, since: Option<CommitId>, commit: CommitId) -> BTreeSet<String> {
        let remote = &self.branch.remote;
        let now = remote.files(Some(commit));
        let mut left = BTreeSet::new();
        let mut at = remote.commits.get(&commit).and_then(|c| c.parent);
        for _ in 0..256 {
            let Some(c) = at else { break };
            left.extend(
                remote
                    .files(Some(c))
                    .into_keys()
                    .filter(|p| !now.contains_key(p)),
            );
            if since == Some(c) {
                break;
            }
            at = remote.commits.get(&c).and_then(|m| m.parent);
        }
        left
    }
}

/// What an apply knows of how Git moved for one object.
#[derive(Debug, Clone, Copy)]
struct Change {
    /// Git changed or removed its file since the last applied commit.
    git_changed: bool,
    /// An earlier apply left it to a newer live edit.
    retried: bool,
    /// The operation only stamps.
    catch_up_only: bool,
}

/// What backflow's own applier does with one model object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NativeVerdict {
    /// Writes Git's value (a prune when Git lacks it).
    Write,
    /// Leaves it to a live edit made since the flush, looked at again later.
    Defer,
    /// Nothing to do.
    Leave,
}

/// The phase an operation ends in, as the held applier's status says.
fn phase_of(outcome: &HeldOutcome) -> OperationPhase {
    match outcome {
        HeldOutcome::Applied => OperationPhase::Succeeded,
        HeldOutcome::Failed(_) => OperationPhase::Failed,
    }
}
