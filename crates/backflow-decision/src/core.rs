//! The apply decision of one applier: `step(input, now) -> effects`, one [`ApplyPhase`].
//!
//! A reason makes an apply *due*; nothing is asked while the gate holds it back (snapshots not
//! settled, a `CommitRequest` holding the window, a branch being recovered) or while another
//! operation of the applier is in flight. A due apply first flushes the branch worker (window
//! closed, mark taken, published ignoring the cooldown) and applies the tip that produced, so
//! every edit decided before it is in the commit applied. Just before asking, the decision is
//! checked again: a gate that closed or a foreign commit that arrived while the flush was being
//! answered means deciding again, after a new flush. A failed operation is decided again from scratch after the applier's backoff.

use std::time::Duration;

use backflow_branch::{CommitId, Moment};

use crate::operation::{Operation, OperationId, OperationPhase};
use crate::reason::{Reason, Reasons};

/// The applier's timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApplierConfig {
    /// The wait after the first failed operation; doubles with each further one.
    pub backoff_base: Duration,
    /// The longest wait after failures.
    pub backoff_max: Duration,
    /// How long an operation may be in flight before it is reported `Unresolved`.
    pub unresolved_after: Duration,
}

impl Default for ApplierConfig {
    /// 2 s doubling to 5 min; unresolved after 5 min (seed 000).
    fn default() -> Self {
        Self {
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(300),
            unresolved_after: Duration::from_secs(300),
        }
    }
}

/// Why a due apply is held back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// A target the applier covers has a collection without a settled snapshot (or none
    /// planned yet, or a blocked watch).
    Snapshots(String),
    /// A `CommitRequest` holds the window: a save defines its own commit boundary.
    CommitRequest,
    /// The branch lost backflow's commits and is being rebuilt from the live state.
    Recovering,
    /// The targets naming the claim do not agree on one branch, or none is eligible.
    Targets(String),
}

/// What the shell tells the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyInput {
    /// At start, from the claim's status: the commit the last successful operation applied,
    /// and an operation that had not ended (it is followed to its end).
    Restored {
        /// `status.lastAppliedCommit`.
        last_applied: Option<CommitId>,
        /// `status.operation`, when its phase is in flight.
        in_flight: Option<(OperationId, CommitId, Reasons, OperationPhase)>,
        /// `status.operation`'s id whatever its phase: numbering goes on after it.
        last_operation: Option<OperationId>,
        /// Whether the claim's status could be read. When not, what the live side was given is
        /// unknown: a converge only stamps (what Git holds and the live side lacks may be a
        /// delete not yet published, never to be created again).
        status_read: bool,
    },
    /// What holds applies back now (`None`: nothing).
    Gate(Option<Hold>),
    /// The branch worker saw a commit it did not push.
    Foreign(CommitId),
    /// The branch worker published (pushed) and the branch is at this tip.
    Published(CommitId),
    /// Another reason to apply.
    Reason(Reason),
    /// The flush answered: the tip its publication produced (`None`: the remote has no branch).
    Flushed(Option<CommitId>),
    /// The applier's progress on an operation.
    Progress {
        /// Which operation.
        id: OperationId,
        /// `Running`, `Succeeded` or `Failed`.
        phase: OperationPhase,
        /// What happened, for a person (the failure's reason).
        message: String,
    },
    /// Time passed (a timer the core asked for fell due).
    Tick,
}

/// What happened, for logs, metrics and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyEvent {
    /// An operation was recorded and the applier asked.
    Requested(Operation),
    /// An operation ended applied; `latency` from request to success.
    Succeeded {
        /// The operation.
        operation: Operation,
        /// From request to success.
        latency: Duration,
    },
    /// An operation failed; the reasons are due again after `retry_in`.
    Failed {
        /// The operation.
        operation: Operation,
        /// Why.
        message: String,
        /// The backoff before deciding again.
        retry_in: Duration,
    },
    /// An operation is still in flight after the unresolved timeout.
    Unresolved(Operation),
    /// A converge found the tip already applied: nothing asked.
    AlreadyApplied(CommitId),
}

/// What the shell must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyEffect {
    /// Flush the branch worker and answer with [`ApplyInput::Flushed`].
    Flush,
    /// Write the operation (and `lastAppliedCommit` once it succeeded) into the claim's status,
    /// before anything else.
    Record {
        /// The operation as it stands.
        operation: Operation,
        /// For a person (a failure's reason).
        message: String,
    },
    /// Carry the operation out (or follow it, if it was already running) and report its
    /// progress with [`ApplyInput::Progress`].
    Ask(Operation),
    /// Report.
    Emit(ApplyEvent),
    /// Send [`ApplyInput::Tick`] at this moment (the latest request replaces earlier ones).
    WakeAt(Moment),
}

/// Where the applier stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyPhase {
    /// Nothing in flight.
    Idle,
    /// A flush was asked for, for these reasons.
    Flushing(Reasons),
    /// An operation found in flight at start (the status recorded it): followed once the gate
    /// opens, never before. The applier may still be at it (Flux, Argo CD), but a live edit made
    /// while backflow was down reaches Git only once this process's snapshot is published;
    /// following it sooner would let a re-asked apply write over that edit.
    Following(Operation),
    /// An operation is recorded and the applier asked; nothing else is asked meanwhile.
    InFlight(Operation),
    /// The last operation failed; nothing is asked before `until`.
    BackingOff {
        /// When the pending reasons are decided again.
        until: Moment,
    },
}

/// The apply decision of one applier.
#[derive(Debug, Clone)]
pub struct ApplierCore {
    config: ApplierConfig,
    phase: ApplyPhase,
    pending: Reasons,
    hold: Option<Hold>,
    /// The remote has no branch: nothing to apply until a tip is seen.
    no_branch: bool,
    /// A foreign commit arrived or the gate closed while a flush was being answered: its answer
    /// may predate it.
    changed_while_flushing: bool,
    /// The newest tip seen (published or foreign).
    tip: Option<CommitId>,
    last_applied: Option<CommitId>,
    /// The claim's status could not be read at start: nothing is known to have been applied,
    /// nor known not to have been.
    status_unknown: bool,
    failures: u32,
    next_id: u64,
}

impl ApplierCore {
    /// A core that holds everything back until the first [`ApplyInput::Gate`] opens it.
    #[must_use]
    pub fn new(config: ApplierConfig) -> Self {
        Self {
            config,
            phase: ApplyPhase::Idle,
            pending: Reasons::default(),
            hold: Some(Hold::Snapshots("not evaluated yet".into())),
            no_branch: false,
            changed_while_flushing: false,
            tip: None,
            last_applied: None,
            status_unknown: false,
            failures: 0,
            next_id: 1,
        }
    }

    /// Where it stands.
    #[must_use]
    pub fn phase(&self) -> &ApplyPhase {
        &self.phase
    }

    /// The reasons due and not yet asked for.
    #[must_use]
    pub fn pending(&self) -> &Reasons {
        &self.pending
    }

    /// What holds applies back.
    #[must_use]
    pub fn hold(&self) -> Option<&Hold> {
        self.hold.as_ref()
    }

    /// The commit the last successful operation applied.
    #[must_use]
    pub fn last_applied(&self) -> Option<CommitId> {
        self.last_applied
    }

    /// Takes one input at `now` and says what to do.
    pub fn step(&mut self, input: ApplyInput, now: Moment) -> Vec<ApplyEffect> {
        let mut out = Vec::new();
        match input {
            ApplyInput::Restored {
                last_applied,
                in_flight,
                last_operation,
                status_read,
            } => {
                if let Some(last) = last_operation {
                    self.next_id = self.next_id.max(last.0 + 1);
                }
                self.status_unknown = !status_read;
                self.restore(last_applied, in_flight, now);
            }
            ApplyInput::Gate(hold) => {
                // Closed even for a moment (a stream relisting after the branch lost
                // backflow's commits): the flush may predate what it held back.
                if hold.is_some() && matches!(self.phase, ApplyPhase::Flushing(_)) {
                    self.changed_while_flushing = true;
                }
                self.hold = hold;
            }
            ApplyInput::Foreign(tip) => {
                self.seen(tip);
                self.pending.insert(Reason::ForeignCommit);
                if matches!(self.phase, ApplyPhase::Flushing(_)) {
                    self.changed_while_flushing = true;
                }
            }
            ApplyInput::Published(tip) => self.seen(tip),
            ApplyInput::Reason(reason) => self.pending.insert(reason),
            ApplyInput::Flushed(tip) => self.flushed(tip, now, &mut out),
            ApplyInput::Progress { id, phase, message } => {
                self.progress(id, phase, message, now, &mut out);
            }
            ApplyInput::Tick => {}
        }
        self.advance(now, &mut out);
        if let Some(at) = self.next_timer() {
            out.push(ApplyEffect::WakeAt(at));
        }
        // Nothing is flushed for or asked of the applier while held (before the snapshots,
        // while a commit request is saved, while suspended): checked in debug builds, so a
        // simulator schedule that breaks it stops with its seed.
        debug_assert!(
            self.hold.is_none()
                || !out
                    .iter()
                    .any(|e| matches!(e, ApplyEffect::Flush | ApplyEffect::Ask(_))),
            "an apply started while held: {:?}",
            self.hold
        );
        out
    }

    fn seen(&mut self, tip: CommitId) {
        self.tip = Some(tip);
        self.no_branch = false;
    }

    fn restore(
        &mut self,
        last_applied: Option<CommitId>,
        in_flight: Option<(OperationId, CommitId, Reasons, OperationPhase)>,
        now: Moment,
    ) {
        self.last_applied = last_applied;
        if let Some((id, commit, reasons, phase)) = in_flight {
            self.next_id = self.next_id.max(id.0 + 1);
            let operation = Operation {
                id,
                commit,
                reasons,
                phase,
                requested_at: now,
            };
            self.phase = ApplyPhase::Following(operation);
        }
    }

    /// Starts what is due, ends a backoff, follows an operation found in flight once the gate
    /// opens, marks an operation unresolved.
    fn advance(&mut self, now: Moment, out: &mut Vec<ApplyEffect>) {
        match &mut self.phase {
            ApplyPhase::BackingOff { until } if *until <= now => self.phase = ApplyPhase::Idle,
            ApplyPhase::Following(op) if self.hold.is_none() => {
                let operation = op.clone();
                out.push(ApplyEffect::Ask(operation.clone()));
                self.phase = ApplyPhase::InFlight(operation);
            }
            ApplyPhase::InFlight(op)
                if op.phase != OperationPhase::Unresolved
                    && now.saturating_since(op.requested_at) >= self.config.unresolved_after =>
            {
                op.phase = OperationPhase::Unresolved;
                let operation = op.clone();
                out.push(ApplyEffect::Record {
                    operation: operation.clone(),
                    message: format!(
                        "still in flight after {}s; followed, nothing more is asked",
                        self.config.unresolved_after.as_secs()
                    ),
                });
                out.push(ApplyEffect::Emit(ApplyEvent::Unresolved(operation)));
            }
            _ => {}
        }
        if self.phase != ApplyPhase::Idle
            || self.pending.is_empty()
            || self.hold.is_some()
            || self.no_branch
        {
            return;
        }
        // Even a converge that finds the last applied commit at the tip flushes first: what the
        // mirror has not published yet (a restart's snapshot) may move the tip past it.
        self.phase = ApplyPhase::Flushing(self.pending.take());
        self.changed_while_flushing = false;
        out.push(ApplyEffect::Flush);
    }

    /// The flush answered: check the decision again, then record and ask.
    fn flushed(&mut self, tip: Option<CommitId>, now: Moment, out: &mut Vec<ApplyEffect>) {
        let ApplyPhase::Flushing(reasons) = &self.phase else {
            return;
        };
        let reasons = reasons.clone();
        self.phase = ApplyPhase::Idle;
        let Some(tip) = tip else {
            // No branch, so no commit to apply: due again once the remote carries one.
            self.pending.extend(&reasons);
            self.no_branch = true;
            return;
        };
        let moved = std::mem::take(&mut self.changed_while_flushing);
        if self.hold.is_some() || moved {
            // The gate closed or the branch moved while flushing: decide again, after a new
            // flush, never asking for something weaker than what was due.
            self.pending.extend(&reasons);
            return;
        }
        self.tip = Some(tip);
        if reasons.only_converge() && self.last_applied == Some(tip) {
            out.push(ApplyEffect::Emit(ApplyEvent::AlreadyApplied(tip)));
            return;
        }
        let mut reasons = reasons;
        if reasons.contains(Reason::CatchUpConverge) && self.git_moved_past_live(tip) {
            reasons.insert(Reason::ForeignCommit);
        }
        let operation = Operation {
            id: OperationId(self.next_id),
            commit: tip,
            reasons,
            phase: OperationPhase::Requested,
            requested_at: now,
        };
        self.next_id += 1;
        out.push(ApplyEffect::Record {
            operation: operation.clone(),
            message: String::new(),
        });
        out.push(ApplyEffect::Emit(ApplyEvent::Requested(operation.clone())));
        out.push(ApplyEffect::Ask(operation.clone()));
        self.phase = ApplyPhase::InFlight(operation);
    }

    /// Whether the branch at `tip` holds commits the live side was never given: commits after
    /// the last applied one (pushed while backflow was down, or while an apply was cut short),
    /// or, when no operation ever brought Git's changes to the live side (first contact, or
    /// only stamps and applies that left objects to newer edits), the branch whole. A converge
    /// then applies them as a foreign commit would (creating what the live side lacks), rather
    /// than only stamping what is live: the snapshot published before it already carries what
    /// changed live, so only Git's own changes remain to apply.
    fn git_moved_past_live(&self, tip: CommitId) -> bool {
        match self.last_applied {
            Some(applied) => applied != tip,
            None => !self.status_unknown,
        }
    }

    fn progress(
        &mut self,
        id: OperationId,
        phase: OperationPhase,
        message: String,
        now: Moment,
        out: &mut Vec<ApplyEffect>,
    ) {
        let ApplyPhase::InFlight(op) = &mut self.phase else {
            return;
        };
        if op.id != id {
            return;
        }
        match phase {
            OperationPhase::Running if op.phase == OperationPhase::Requested => {
                op.phase = OperationPhase::Running;
                out.push(ApplyEffect::Record {
                    operation: op.clone(),
                    message,
                });
            }
            OperationPhase::Succeeded => {
                op.phase = OperationPhase::Succeeded;
                let operation = op.clone();
                if !operation.reasons.catch_up_only() {
                    // An operation that only stamped brought none of Git's changes to the
                    // live side (as the claim's status records it).
                    self.last_applied = Some(operation.commit);
                }
                self.failures = 0;
                self.phase = ApplyPhase::Idle;
                out.push(ApplyEffect::Record {
                    operation: operation.clone(),
                    message,
                });
                let latency = now.saturating_since(operation.requested_at);
                out.push(ApplyEffect::Emit(ApplyEvent::Succeeded {
                    operation,
                    latency,
                }));
            }
            OperationPhase::Failed => {
                op.phase = OperationPhase::Failed;
                let operation = op.clone();
                self.failures = self.failures.saturating_add(1);
                let retry_in = self.backoff();
                self.pending.extend(&operation.reasons);
                self.phase = ApplyPhase::BackingOff {
                    until: now + retry_in,
                };
                out.push(ApplyEffect::Record {
                    operation: operation.clone(),
                    message: message.clone(),
                });
                out.push(ApplyEffect::Emit(ApplyEvent::Failed {
                    operation,
                    message,
                    retry_in,
                }));
            }
            _ => {}
        }
    }

    /// 2 s doubling to 5 min by default.
    fn backoff(&self) -> Duration {
        let doublings = self.failures.saturating_sub(1).min(31);
        self.config
            .backoff_base
            .saturating_mul(1_u32 << doublings)
            .min(self.config.backoff_max)
    }

    fn next_timer(&self) -> Option<Moment> {
        match &self.phase {
            ApplyPhase::BackingOff { until } => Some(*until),
            ApplyPhase::InFlight(op) if op.phase != OperationPhase::Unresolved => {
                Some(op.requested_at + self.config.unresolved_after)
            }
            _ => None,
        }
    }
}
