//! One claim's shell: runs the apply decision's effects (flush, record, apply) and feeds their
//! answers back. One task per acting claim; it ends when its command channel closes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use backflow_api::Clock;
use backflow_api::ObjectKey;
use backflow_api::config::{
    ClaimStatus, FirstContact, FirstContactReport, GitProvider, GitTarget, HandBack,
    InventoryEntry, OperationStatus, PruneHeldStatus,
};
use backflow_board::{BranchRegistry, RefusedEdit};
use backflow_decision::{
    ApplierConfig, ApplierCore, ApplyEffect, ApplyEvent, ApplyInput, ApplyPhase, CommitId,
    Deferrals, Hold, LeftOff, Moment, Operation, OperationId, OperationPhase, RETRY_DEFERRED,
    Reason, Reasons,
};
use backflow_git::{BranchNotice, WorkerHandle};
use kube::{Api, Client};
use tokio::sync::{broadcast, mpsc};

use super::events::emit;
use super::metrics::{ApplyMetrics, ClaimLabels, OperationLabels};
use super::plan::{ClaimKey, ClaimPlan, Holds, recheck};
use super::status::{PushLimits, acting_conditions, inventory, limit_conditions, operation_status};
use crate::guard::{CONFIRM_PRUNE, PruneHold, confirms};
use crate::native::{Applier, ApplyReport, ApplyRequest, PruneNotice};
use backflow_board::EventType;

/// How often a held applier is checked between applies (a person's `flux resume` is undone
/// within this).
const HOLD_EVERY: Duration = Duration::from_secs(10);

/// How often a held prune's confirmation is looked for on the claim.
const CONFIRM_EVERY: Duration = Duration::from_secs(1);

/// How long a flush waits for each watch stream of the claim's targets to catch up (a list of
/// its scope): a stream that does not answer by then is not waited for.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(30);

/// What the coordinator tells a runner.
pub enum RunnerCommand {
    /// What holds applies back now.
    Gate(Option<Hold>),
    /// Another reason to apply.
    Reason(Reason),
    /// The branch is at this tip (seen by the mirror).
    Published(CommitId),
    /// The claim's targets changed: apply these folders with this applier from now on.
    Plan(ClaimPlan, Arc<dyn Applier>),
    /// Live edits a target (`onRefusal: Reapply`) refused: apply Git over them.
    Reapply((String, String), BTreeSet<RefusedEdit>),
    /// The claim lets go (deleted, or no target names it): give the applier back as it was
    /// found, then stop.
    Release,
}

/// An answer from work the runner started.
enum Done {
    Flushed(Option<CommitId>),
    Applied(OperationId, Box<ApplyReport>),
    /// Objects were deferred to a newer live edit: look at them again.
    Retry,
    /// Time to re-check a configuration that changed just before an apply.
    Recheck,
}

/// What every runner shares: the API, time, metrics and the mirror's apply windows.
#[derive(Clone)]
pub struct Shared {
    /// Client of the live API.
    pub client: Client,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Metrics.
    pub metrics: ApplyMetrics,
    /// The mirror: its apply windows, and the resyncs a reapply asks for.
    pub registry: BranchRegistry,
}

/// A running claim.
pub struct Runner {
    key: ClaimKey,
    client: Client,
    core: ApplierCore,
    plan: ClaimPlan,
    applier: Arc<dyn Applier>,
    worker: WorkerHandle,
    clock: Arc<dyn Clock>,
    metrics: ApplyMetrics,
    registry: BranchRegistry,
    inventory: Vec<InventoryEntry>,
    last_applied: Option<String>,
    /// The commit of the last operation asked (`status.operation.commit` at start): the next
    /// apply looks at what it declared too ([`ApplyRequest::tried`]).
    tried: Option<CommitId>,
    /// `status.inStepCommit`: the commit of the last operation that succeeded.
    in_step: Option<String>,
    /// Whether this start is the claim's first contact with its branch, and its report.
    first_contact: FirstContactState,
    operation: Option<OperationStatus>,
    failures: Vec<String>,
    wake: Option<Moment>,
    /// When the last flush was asked for (wall clock, compared with managedFields times).
    flushed_at: Option<std::time::SystemTime>,
    /// Objects the last apply left to a newer live edit: looked at again by the next one.
    deferred: Deferrals<backflow_manifest::Identity>,
    /// What the last apply could not do because of what was pushed.
    limits: PushLimits,
    /// The prune the last apply held, until an apply does not.
    prune_held: Option<PruneHold>,
    /// The task waiting for a held prune's confirmation.
    confirming: Option<tokio::task::JoinHandle<()>>,
    /// The task waiting for spared objects' edits to reach Git.
    publishing: Option<tokio::task::JoinHandle<()>>,
    /// The fingerprint of the inventory last written to its `ConfigMaps`, and where it is.
    saved_inventory: Option<u64>,
    stored_inventory: Option<backflow_api::config::InventoryStore>,
    /// Refused live edits to revert, by target: applied by the next operation whatever Git
    /// changed, then resynced (only a resync clears a refusal).
    reapply: BTreeMap<(String, String), BTreeSet<RefusedEdit>>,
    /// What the operation in flight reapplies.
    reapplying: BTreeMap<(String, String), BTreeSet<RefusedEdit>>,
    /// What the coordinator last said holds applies back.
    coordinator_gate: Option<Hold>,
    /// Why the re-check just before an apply found the configuration changed, until a later
    /// re-check finds it agrees with the plan again.
    stale: Option<String>,
    /// Why the applier cannot be held (a Kustomization its parent resumes), until it can.
    unheld: Option<String>,
    /// The operation a restart found in flight, until it is asked again.
    interrupted: Option<OperationId>,
    /// How the held applier was found (`status.handBack`), once recorded.
    hand_back: Option<HandBack>,
    /// The task carrying out the operation in flight: a hand-back ends it, so nothing it does
    /// afterwards (suspending a Kustomization) lands on an applier no longer held.
    applying: Option<tokio::task::JoinHandle<()>>,
    done: mpsc::Sender<Done>,
}

/// Lines shown in a status, at most a hundred: a status is one object, and its size is bounded.
fn capped(lines: &[String]) -> Vec<String> {
    const SHOWN: usize = 100;
    let mut out: Vec<String> = lines.iter().take(SHOWN).cloned().collect();
    if lines.len() > SHOWN {
        out.push(format!("… and {} more", lines.len() - SHOWN));
    }
    out
}

/// A claim's first contact with its branch, as far as this process knows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum FirstContactState {
    /// Not first contact (an earlier operation), or not known yet.
    Before,
    /// This start is first contact: reported with the first operation.
    Met,
    /// Reported in the status.
    Reported(FirstContactReport),
}

/// What first contact under `rule` did, at `now`.
fn first_contact_report(rule: FirstContact, now: &str) -> FirstContactReport {
    let message = match rule {
        FirstContact::LiveWins => {
            "first contact: objects both sides held were published as the live side had them; what only Git held was created live"
        }
        FirstContact::GitWins => {
            "first contact: objects both sides held were applied as Git had them; what only the live side held was published"
        }
    };
    FirstContactReport {
        rule,
        at: now.to_string(),
        message: message.to_string(),
    }
}

impl Runner {
    /// A runner of `key` applying `plan` with `applier` on the branch `worker` writes.
    pub fn start(
        key: ClaimKey,
        plan: ClaimPlan,
        applier: Arc<dyn Applier>,
        worker: WorkerHandle,
        shared: Shared,
        commands: mpsc::Receiver<RunnerCommand>,
    ) -> tokio::task::JoinHandle<()> {
        let (done, done_rx) = mpsc::channel(8);
        let runner = Self {
            key,
            client: shared.client,
            core: ApplierCore::new(ApplierConfig::default()),
            plan,
            applier,
            worker,
            clock: shared.clock,
            metrics: shared.metrics,
            registry: shared.registry,
            inventory: Vec::new(),
            last_applied: None,
            tried: None,
            in_step: None,
            first_contact: FirstContactState::Before,
            operation: None,
            failures: Vec::new(),
            wake: None,
            flushed_at: None,
            deferred: Deferrals::default(),
            limits: PushLimits::default(),
            prune_held: None,
            confirming: None,
            publishing: None,
            saved_inventory: None,
            stored_inventory: None,
            reapply: BTreeMap::new(),
            reapplying: BTreeMap::new(),
            // Closed until the coordinator says otherwise: nothing before the snapshots.
            coordinator_gate: Some(Hold::Snapshots("not looked at yet".into())),
            stale: None,
            unheld: None,
            interrupted: None,
            hand_back: None,
            applying: None,
            done,
        };
        tokio::spawn(runner.run(commands, done_rx))
    }

    fn now(&self) -> Moment {
        Moment(self.clock.monotonic())
    }

    fn claim_name(&self) -> String {
        format!("{}/{}", self.key.namespace, self.key.name)
    }

    async fn run(
        mut self,
        mut commands: mpsc::Receiver<RunnerCommand>,
        mut done: mpsc::Receiver<Done>,
    ) {
        let mut notices = self.worker.subscribe();
        self.begin_acting().await;
        let mut hold_tick = tokio::time::interval(HOLD_EVERY);
        loop {
            let sleep = self.wake.map_or(Duration::from_secs(3600), |w| {
                w.saturating_since(self.now())
            });
            let input = tokio::select! {
                _ = hold_tick.tick() => {
                    if !self.busy() {
                        let before = self.unheld.clone();
                        self.keep_held().await;
                        if self.unheld != before {
                            self.handle(ApplyInput::Gate(self.gate())).await;
                        }
                    }
                    continue;
                }
                command = commands.recv() => match command {
                    None => break,
                    Some(RunnerCommand::Release) => {
                        let tasks = [self.applying.take(), self.confirming.take(), self.publishing.take()];
                        for task in tasks.into_iter().flatten() {
                            task.abort();
                        }
                        self.release().await;
                        return;
                    }
                    Some(RunnerCommand::Plan(plan, applier)) => {
                        // A held prune is judged again under a changed limit.
                        let limit_changed = plan.prune_limit != self.plan.prune_limit;
                        self.plan = plan;
                        self.applier = applier;
                        if !(limit_changed && self.prune_held.is_some()) {
                            continue;
                        }
                        ApplyInput::Reason(Reason::Repair)
                    }
                    Some(RunnerCommand::Gate(hold)) => {
                        self.coordinator_gate.clone_from(&hold);
                        ApplyInput::Gate(self.gate())
                    }
                    Some(RunnerCommand::Reason(r)) => ApplyInput::Reason(r),
                    Some(RunnerCommand::Reapply(target, edits)) => {
                        self.reapply.entry(target).or_default().extend(edits);
                        ApplyInput::Reason(Reason::Refusal)
                    }
                    Some(RunnerCommand::Published(tip)) => ApplyInput::Published(tip),
                },
                notice = notices.recv() => match notice {
                    Ok(BranchNotice::Foreign(commit)) => ApplyInput::Foreign(commit.tip),
                    // The branch lost backflow's commits: a Git-side change, applied once the
                    // resync that rebuilds it is published (an apply in flight may still write
                    // the commit the branch lost).
                    Ok(BranchNotice::Diverged(_)) => ApplyInput::Reason(Reason::ForeignCommit),
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                Some(answer) = done.recv() => self.answered(answer).await,
                () = tokio::time::sleep(sleep), if self.wake.is_some() => ApplyInput::Tick,
            };
            self.handle(input).await;
        }
        // A graceful stop leaves the applier held (a Kustomization suspended).
        self.keep_held().await;
        tracing::info!(claim = %self.claim_name(), "claim stopped acting");
    }

    /// What the answer of a task the claim started (a flush, a recheck, an apply, a retry)
    /// tells the core.
    async fn answered(&mut self, answer: Done) -> ApplyInput {
        match answer {
            Done::Flushed(tip) => {
                self.recheck().await;
                self.handle(ApplyInput::Gate(self.gate())).await;
                ApplyInput::Flushed(tip)
            }
            Done::Recheck => {
                self.recheck().await;
                ApplyInput::Gate(self.gate())
            }
            Done::Applied(id, report) => self.applied(id, *report),
            Done::Retry => ApplyInput::Reason(Reason::Repair),
        }
    }

    /// What the claim does when it starts acting: restores its status, holds the applier, and
    /// converges once (at start, or when a target first names it).
    async fn begin_acting(&mut self) {
        let restored = self.restore().await;
        self.handle(restored).await;
        if !self.busy() {
            // An operation found in flight is followed as the applier runs it: holding it now
            // would suspend a Kustomization in the middle of the apply asked for.
            self.keep_held().await;
        }
        self.handle(ApplyInput::Reason(Reason::CatchUpConverge))
            .await;
    }

    /// Whether an operation is in flight or found in flight: the applier is left as it runs it.
    fn busy(&self) -> bool {
        matches!(
            self.core.phase(),
            ApplyPhase::InFlight(_) | ApplyPhase::Following(_)
        )
    }

    /// What holds applies back: the coordinator's gate, a configuration found changed, or an
    /// applier that cannot be held.
    fn gate(&self) -> Option<Hold> {
        match self.stale.as_ref().or(self.unheld.as_ref()) {
            Some(why) => Some(Hold::Targets(why.clone())),
            None => self.coordinator_gate.clone(),
        }
    }

    /// Keeps the applier held; the first time, records how it was found (the hand-back).
    async fn keep_held(&mut self) {
        match self.applier.hold().await {
            Ok(found) => {
                self.unheld = None;
                let Some(suspended) = found else {
                    return;
                };
                if self.hand_back.is_none() {
                    let hand_back = HandBack { suspend: suspended };
                    match super::store::write_hand_back(&self.client, &self.key, &hand_back).await {
                        Ok(()) => self.hand_back = Some(hand_back),
                        Err(e) => {
                            tracing::warn!(claim = %self.claim_name(), error = %e, "cannot record the hand-back");
                        }
                    }
                }
            }
            Err(why) => {
                if self.unheld.as_ref() != Some(&why) {
                    tracing::warn!(claim = %self.claim_name(), reason = %why, "the applier cannot be held");
                    self.report_unheld(&why).await;
                }
                self.unheld = Some(why);
            }
        }
    }

    /// Shows on the claim why its applier is not held (nothing is asked of it meanwhile).
    async fn report_unheld(&self, why: &str) {
        let now = humantime::format_rfc3339_seconds(self.clock.now()).to_string();
        let current = super::store::read(&self.client, &self.key)
            .await
            .ok()
            .flatten();
        let problem = super::plan::ClaimProblem {
            reason: "ApplierNotHeld",
            message: why.to_string(),
        };
        let status = super::status::problem_status(
            current.as_ref().map(|(s, _)| s),
            &problem,
            &now,
            current.as_ref().and_then(|(_, g)| *g),
        );
        if let Err(e) = super::store::write_status(&self.client, &self.key, &status).await {
            tracing::warn!(claim = %self.claim_name(), error = %e, "cannot report the claim's problem");
        }
    }

    /// Gives the applier back as the hand-back says it was found.
    async fn release(&self) {
        let suspended = self.hand_back.as_ref().is_some_and(|h| h.suspend);
        match self
            .applier
            .release(suspended, self.inventory.clone())
            .await
        {
            Ok(()) => tracing::info!(claim = %self.claim_name(), suspended, "applier handed back"),
            Err(e) => {
                tracing::warn!(claim = %self.claim_name(), error = %e, "cannot hand the applier back");
            }
        }
    }

    /// Re-checks the claim and its targets as the API holds them now, just before an apply is
    /// asked for: the coordinator's view follows its watches and may lag a change made a moment
    /// ago. While they disagree with the plan, nothing is asked and the check repeats.
    async fn recheck(&mut self) {
        let ns = &self.key.namespace;
        let params = kube::api::ListParams::default();
        let targets = Api::<GitTarget>::namespaced(self.client.clone(), ns);
        let providers = Api::<GitProvider>::namespaced(self.client.clone(), ns);
        let stale = match tokio::join!(
            super::store::list_claims(&self.client),
            targets.list(&params),
            providers.list(&params)
        ) {
            (Ok(c), Ok(t), Ok(p)) => {
                let claims: Vec<_> = c.into_iter().map(|c| c.object).collect();
                recheck(&self.key, &self.plan, &claims, &t.items, &p.items)
            }
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                Some(format!("cannot re-check the claim's configuration: {e}"))
            }
        };
        if let Some(why) = &stale {
            tracing::info!(claim = %self.claim_name(), reason = %why, "not asking for the apply: the configuration changed");
            let done = self.done.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = done.send(Done::Recheck).await;
            });
        }
        self.stale = stale;
    }

    /// What the claim's status says: the last applied commit, an operation still in flight,
    /// the inventory.
    async fn restore(&mut self) -> ApplyInput {
        let (status, unread) = match super::store::read(&self.client, &self.key).await {
            Ok(Some((status, _))) => (status, false),
            Ok(None) => (ClaimStatus::default(), false),
            Err(e) => {
                tracing::warn!(claim = %self.claim_name(), error = %e, "cannot read the claim's status; starting without it");
                (ClaimStatus::default(), true)
            }
        };
        self.inventory.clone_from(&status.inventory);
        if let Some(store) = &status.inventory_store {
            match super::inventory::load(&self.client, &self.key, store).await {
                Ok(entries) => {
                    self.saved_inventory = Some(super::inventory::digest(&entries));
                    self.inventory = entries;
                }
                Err(e) => {
                    tracing::warn!(claim = %self.claim_name(), error = %e, "cannot read the claim's inventory: what it applied before is not pruned until applied again");
                }
            }
        }
        self.hand_back.clone_from(&status.hand_back);
        self.last_applied.clone_from(&status.last_applied_commit);
        self.in_step.clone_from(&status.in_step_commit);
        self.operation.clone_from(&status.operation);
        self.tried = (status.operation.as_ref()).and_then(|op| op.commit.parse().ok());
        let in_flight = status.operation.as_ref().and_then(|op| {
            let phase = OperationPhase::parse(&op.phase).filter(|p| p.in_flight())?;
            let commit: CommitId = op.commit.parse().ok()?;
            let reasons: Reasons = op.reasons.iter().filter_map(|r| Reason::parse(r)).collect();
            tracing::info!(claim = %self.claim_name(), operation = op.id, commit = %op.commit, "following an operation found in flight");
            Some((OperationId(op.id), commit, reasons, phase))
        });
        self.interrupted = in_flight.as_ref().map(|(id, ..)| *id);
        if in_flight.is_some() && !matches!(self.plan.holds, Holds::Native(_)) {
            // The held applier goes on with it and may write any moment; its flush was in the
            // process that died. The window opens now (or joins the one a stream opened
            // before its first list), so its writes are judged from the start.
            let now = self.clock.now();
            self.registry
                .apply_windows()
                .open_restored(&self.plan.targets, now);
            self.flushed_at = Some(now);
        }
        self.first_contact = match status.first_contact.clone() {
            Some(report) => FirstContactState::Reported(report),
            // The decision core's rule for first contact, reported with the first operation.
            None if !unread
                && status.operation.is_none()
                && status.last_applied_commit.is_none() =>
            {
                FirstContactState::Met
            }
            None => FirstContactState::Before,
        };
        ApplyInput::Restored {
            last_applied: status.last_applied_commit.and_then(|c| c.parse().ok()),
            in_flight,
            // A status that could not be read is no first contact: what Git holds and the live
            // side lacks may be a delete not yet published, never to be created again.
            last_operation: status
                .operation
                .as_ref()
                .map(|op| OperationId(op.id))
                .or(unread.then_some(OperationId(0))),
            status_read: !unread,
        }
    }

    /// Steps the core and runs its effects; an effect's immediate answer is stepped too.
    async fn handle(&mut self, input: ApplyInput) {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            let now = self.now();
            for effect in self.core.step(input, now) {
                if let Some(next) = self.run_effect(effect).await {
                    queue.push_back(next);
                }
            }
        }
    }

    async fn run_effect(&mut self, effect: ApplyEffect) -> Option<ApplyInput> {
        match effect {
            ApplyEffect::Flush => {
                let now = self.clock.now();
                self.flushed_at = Some(now);
                // The window opens at the flush: an edit decided after its mark is not in
                // the commit the apply will write.
                self.registry.apply_windows().open(&self.plan.targets, now);
                let (worker, done) = (self.worker.clone(), self.done.clone());
                let (registry, targets) = (self.registry.clone(), self.plan.targets.clone());
                let claim = self.claim_name();
                tokio::spawn(async move {
                    // Every edit stored before the flush is decided before its mark, even one
                    // whose watch event is still on its way: the apply never writes over an
                    // edit only that event remembers.
                    let caught = registry.catch_up(&targets, CATCH_UP_LIMIT).await;
                    if caught.unanswered > 0 {
                        tracing::warn!(%claim, streams = caught.unanswered, "a watch stream did not catch up before the flush; an edit whose event is still on its way may be applied over and is repaired once its event arrives");
                    }
                    // A stopped worker answers nothing: the coordinator starts this claim again
                    // with the worker that replaces it.
                    if let Ok(tip) = worker.flush().await {
                        let _ = done.send(Done::Flushed(tip)).await;
                    }
                });
                None
            }
            ApplyEffect::Record { operation, message } => {
                self.record(&operation, &message).await;
                None
            }
            ApplyEffect::Ask(operation) => Some(self.ask(operation)),
            ApplyEffect::Emit(event) => {
                self.report(event);
                None
            }
            ApplyEffect::WakeAt(at) => {
                self.wake = Some(at);
                None
            }
        }
    }

    /// Starts the apply (its window opened at the flush); the native applier is at work at once.
    fn ask(&mut self, operation: Operation) -> ApplyInput {
        let restored = self.interrupted.take() == Some(operation.id);
        if restored && matches!(self.plan.holds, Holds::Native(_)) {
            // backflow's own applier ran in the process that died: the operation ended with
            // it. Applying its commit again now, before this process's snapshot is published,
            // could write over a live edit made after its flush that never reached Git.
            tracing::info!(claim = %self.claim_name(), operation = operation.id.0, "the operation found in flight was interrupted by the restart; it is decided again");
            return ApplyInput::Progress {
                id: operation.id,
                phase: OperationPhase::Failed,
                message:
                    "interrupted: the process restarted during this apply; it is decided again"
                        .into(),
            };
        }
        let flushed_at = self.flushed_at.unwrap_or_else(|| {
            // Every ask follows a flush or a restore, which opened the window; should one not,
            // the window opens now.
            let now = self.clock.now();
            self.registry
                .apply_windows()
                .open_restored(&self.plan.targets, now);
            now
        });
        self.reapplying = std::mem::take(&mut self.reapply);
        let mut retry = self.deferred.objects().clone();
        retry.extend(
            self.reapplying
                .values()
                .flatten()
                .map(|edit| edit.object.clone()),
        );
        let (applier, done) = (self.applier.clone(), self.done.clone());
        let since = (self.last_applied.as_deref()).and_then(|c| c.parse::<CommitId>().ok());
        let tried = self
            .tried
            .replace(operation.commit)
            .filter(|t| Some(*t) != since);
        let request = ApplyRequest {
            commit: operation.commit,
            since,
            tried,
            // A restored operation's flush is not known: every later edit is spared.
            flushed_at,
            inventory: self.inventory.clone(),
            retry,
            stamp_only: operation.reasons.catch_up_only(),
            follow: restored,
            prunes: PruneNotice::new(self.registry.apply_windows(), self.plan.targets.clone()),
            spare: self.spared_objects(),
        };
        let id = operation.id;
        self.applying = Some(tokio::spawn(async move {
            let report = applier.apply(request).await;
            let _ = done.send(Done::Applied(id, Box::new(report))).await;
        }));
        ApplyInput::Progress {
            id,
            phase: OperationPhase::Running,
            message: String::new(),
        }
    }

    /// An apply ended: close its window, keep its inventory and failures, and tell the core.
    fn applied(&mut self, id: OperationId, mut report: ApplyReport) -> ApplyInput {
        self.registry
            .apply_windows()
            .close(&self.plan.targets, self.clock.now());
        self.reapplied(&report);
        self.count_objects(&report);
        self.metrics.phases(&self.claim_name(), &report.phases);
        self.inventory = std::mem::take(&mut report.inventory);
        self.failures.clone_from(&report.failures);
        let catch_up = matches!(self.core.phase(), ApplyPhase::InFlight(op) if op.id == id && op.reasons.catch_up_only());
        self.push_limits(&mut report, !catch_up);
        let retry_soon = self
            .deferred
            .ended(catch_up, report.deferred.iter().cloned());
        if !report.spared.is_empty() {
            // Left to a live edit not in Git yet: looked at again once it got there.
            self.deferred
                .extend(report.spared.iter().map(|s| s.identity.clone()));
            self.await_published(report.spared.iter().map(|s| s.key.clone()).collect());
        }
        if retry_soon {
            // Once the edit that held them back is in Git (or proves to be older than the flush,
            // managedFields having second precision), apply them: after a new flush.
            let done = self.done.clone();
            tokio::spawn(async move {
                tokio::time::sleep(RETRY_DEFERRED).await;
                let _ = done.send(Done::Retry).await;
            });
        }
        if report.failures.is_empty() {
            self.tell_what_it_did(id, &report);
        }
        let (phase, message) = if report.failures.is_empty() {
            (
                OperationPhase::Succeeded,
                format!(
                    "applied {}, unchanged {}, pruned {}, left to a newer live edit {}, owned by another applier {}, changes refused {}, unreadable files {}{}",
                    report.applied,
                    report.unchanged,
                    report.pruned,
                    report.deferred.len(),
                    report.foreign.len(),
                    self.limits.refused.len(),
                    self.limits.unreadable.len(),
                    self.prune_held.as_ref().map_or(String::new(), |h| format!(
                        ", prune held ({} of {} objects)",
                        h.pruning, h.owned
                    )),
                ),
            )
        } else {
            let shown: Vec<&str> = report.failures.iter().take(3).map(String::as_str).collect();
            let more = report.failures.len().saturating_sub(3);
            let tail = if more > 0 {
                format!(" (and {more} more)")
            } else {
                String::new()
            };
            (
                OperationPhase::Failed,
                format!("{}{tail}", shown.join("; ")),
            )
        };
        ApplyInput::Progress { id, phase, message }
    }

    /// Counts what an apply did with each object, and logs the files another applier owns.
    fn count_objects(&self, report: &ApplyReport) {
        let claim = self.claim_name();
        self.metrics.objects(&claim, "applied", report.applied);
        self.metrics.objects(&claim, "unchanged", report.unchanged);
        self.metrics.objects(&claim, "pruned", report.pruned);
        self.metrics
            .objects(&claim, "owned_elsewhere", report.foreign.len());
        for path in &report.foreign {
            tracing::warn!(%claim, %path, "another applier owns the object this file declares: not applied");
        }
        self.metrics
            .objects(&claim, "failed", report.failures.len());
    }

    /// Events for what operation `id` did that a person may look for: objects created live
    /// that it adopted (stamped, now this claim's to prune), and live edits an applier wrote
    /// over that it put back (a Repair).
    fn tell_what_it_did(&self, id: OperationId, report: &ApplyReport) {
        let ApplyPhase::InFlight(op) = self.core.phase() else {
            return;
        };
        if op.id != id {
            return;
        }
        if op.reasons.contains(Reason::Repair) && report.applied + report.pruned > 0 {
            let message = format!(
                "put back {} live edits an applier had written over (applied {}, pruned {}) at {}",
                report.applied + report.pruned,
                report.applied,
                report.pruned,
                op.commit
            );
            emit(
                &self.registry,
                &self.key,
                EventType::Normal,
                "Repaired",
                &message,
            );
        }
        if op.reasons.contains(Reason::CatchUpAdopt)
            && op.reasons.catch_up_only()
            && report.applied > 0
        {
            let message = format!(
                "adopted {} objects created live: this claim applies and prunes them from now on",
                report.applied
            );
            emit(
                &self.registry,
                &self.key,
                EventType::Normal,
                "Adopted",
                &message,
            );
        }
    }

    /// Takes what `report` could not do because of what was pushed: shown on the claim, counted,
    /// told as Events when it changes, and a held prune waited on for its confirmation. An
    /// operation that only stamped (`judged`: false) wrote and pruned nothing: what the last
    /// one refused or held stands.
    fn push_limits(&mut self, report: &mut ApplyReport, judged: bool) {
        if !judged {
            report.refused.clone_from(&self.limits.refused);
            report.prune_held.clone_from(&self.prune_held);
        }
        let claim = self.claim_name();
        self.metrics
            .objects(&claim, "refused", report.refused.len());
        self.metrics
            .objects(&claim, "unreadable_file", report.unreadable.len());
        self.metrics
            .objects(&claim, "plaintext_secret", report.plaintext.len());
        let held = report.prune_held.take();
        let limits = PushLimits {
            prune_held: held.as_ref().map(|h| h.message(&claim)),
            refused: std::mem::take(&mut report.refused),
            unreadable: std::mem::take(&mut report.unreadable),
            plaintext: std::mem::take(&mut report.plaintext),
        };
        let mut events = Vec::new();
        if held != self.prune_held
            && let (Some(h), Some(message)) = (&held, &limits.prune_held)
        {
            tracing::warn!(%claim, commit = %h.commit, pruning = h.pruning, owned = h.owned, "prune held for a person to confirm");
            events.push((EventType::Warning, "PruneHeld", message.clone()));
        }
        for (lines, old, reason) in [
            (&limits.refused, &self.limits.refused, "GitChangesRefused"),
            (
                &limits.unreadable,
                &self.limits.unreadable,
                "FilesUnreadable",
            ),
            (&limits.plaintext, &self.limits.plaintext, "PlaintextSecret"),
        ] {
            for line in lines.iter().filter(|l| !old.contains(l)) {
                tracing::warn!(%claim, reason, detail = %line, "what was pushed needs a person");
                events.push((EventType::Warning, reason, line.clone()));
            }
        }
        for (kind, reason, message) in events.into_iter().take(20) {
            emit(&self.registry, &self.key, kind, reason, &message);
        }
        self.limits = limits;
        if held != self.prune_held {
            if let Some(task) = self.confirming.take() {
                task.abort();
            }
            if let Some(h) = &held {
                self.confirming = Some(self.await_confirmation(h.commit));
            }
        }
        self.prune_held = held;
    }

    /// The live objects of the claim's targets whose edit their folder refused: an apply leaves
    /// them alone, unless it reverts them (`onRefusal: Reapply`).
    fn spared_objects(&self) -> BTreeSet<ObjectKey> {
        let reverted: BTreeSet<ObjectKey> = self
            .reapplying
            .values()
            .flatten()
            .map(|edit| {
                ObjectKey::new(
                    edit.resource.clone(),
                    edit.object.namespace.clone(),
                    edit.object.name.clone(),
                )
            })
            .collect();
        self.plan
            .targets
            .iter()
            .flat_map(|(ns, name)| self.registry.refused_objects(ns, name))
            .filter(|key| !reverted.contains(key))
            .collect()
    }

    /// Asks for an apply again once the mirror published the edit of one of the `spared`
    /// objects (its refusal cleared), so Git's change to it is applied then (merged with the
    /// edit). Nothing is asked while the refusals stand.
    fn await_published(&mut self, spared: BTreeSet<ObjectKey>) {
        if let Some(task) = self.publishing.take() {
            task.abort();
        }
        let (registry, targets, done) = (
            self.registry.clone(),
            self.plan.targets.clone(),
            self.done.clone(),
        );
        self.publishing = Some(tokio::spawn(async move {
            loop {
                tokio::time::sleep(CONFIRM_EVERY).await;
                let standing: BTreeSet<ObjectKey> = targets
                    .iter()
                    .flat_map(|(ns, name)| registry.refused_objects(ns, name))
                    .collect();
                if spared.iter().any(|k| !standing.contains(k)) {
                    let _ = done.send(Done::Retry).await;
                    return;
                }
            }
        }));
    }

    /// Waits until the claim's annotation confirms the prune held at `commit`, then asks for
    /// the apply again (the commit, or a newer tip, with the prune confirmed).
    fn await_confirmation(&self, commit: CommitId) -> tokio::task::JoinHandle<()> {
        let api = Api::<backflow_api::config::NativeClaim>::namespaced(
            self.client.clone(),
            &self.key.namespace,
        );
        let (registry, key, done) = (self.registry.clone(), self.key.clone(), self.done.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(CONFIRM_EVERY).await;
                let Ok(Some(claim)) = api.get_opt(&key.name).await else {
                    continue;
                };
                let value = kube::ResourceExt::annotations(&claim)
                    .get(CONFIRM_PRUNE)
                    .cloned();
                if confirms(value.as_deref(), &commit) {
                    tracing::info!(claim = %key.name, %commit, "held prune confirmed");
                    let message =
                        format!("the prune of commit {commit} was confirmed: applying it");
                    emit(
                        &registry,
                        &key,
                        EventType::Normal,
                        "PruneConfirmed",
                        &message,
                    );
                    let _ = done.send(Done::Retry).await;
                    return;
                }
            }
        })
    }

    /// After an operation that reverted refused edits: the scopes of those it reverted are
    /// resynced (which clears the refusals); one it failed or deferred is reverted by the next
    /// operation (a failure is retried after the backoff, a deferral 1.5 s later).
    fn reapplied(&mut self, report: &ApplyReport) {
        let succeeded = report.failures.is_empty();
        for (target, edits) in std::mem::take(&mut self.reapplying) {
            let (again, done): (BTreeSet<RefusedEdit>, BTreeSet<RefusedEdit>) = edits
                .into_iter()
                .partition(|e| !succeeded || report.deferred.contains(&e.object));
            if !done.is_empty() {
                // A note holds 1 KiB: the first few by name.
                let mut names: Vec<String> =
                    done.iter().take(5).map(|e| e.object.to_string()).collect();
                if done.len() > names.len() {
                    names.push(format!("and {} more", done.len() - names.len()));
                }
                let message = format!(
                    "applied Git's value over {} live edits its folder refused (onRefusal: Reapply): {}",
                    done.len(),
                    names.join(", ")
                );
                emit(
                    &self.registry,
                    &self.key,
                    EventType::Normal,
                    "Reapplied",
                    &message,
                );
                let resources = done.into_iter().map(|e| e.resource).collect();
                self.registry.resync(&target.0, &target.1, resources);
            }
            if !again.is_empty() {
                self.reapply.entry(target).or_default().extend(again);
            }
        }
    }

    /// Takes a recorded operation's commit as applied and in step when it is the live side's in
    /// full. Objects left to a newer live edit are not on the live side yet: until an operation
    /// applies them, the commit is not the live side's in full, and a process that starts
    /// after a crash must apply it again (the deferred set dies with this one). A held prune is
    /// not on the live side either: the next apply looks at it again.
    fn note_in_step(&mut self, operation: &Operation) {
        let left = LeftOff {
            prune_held: self.prune_held.is_some(),
            unreadable: !self.limits.unreadable.is_empty(),
        };
        let recorded = self.deferred.recorded(operation, left);
        if let Some(applied) = recorded.applied {
            self.last_applied = Some(applied.to_string());
        }
        if let Some(in_step) = recorded.in_step {
            self.in_step = Some(in_step.to_string());
        }
    }

    /// Writes the operation, inventory and conditions into the claim's status.
    async fn record(&mut self, operation: &Operation, message: &str) {
        let now = humantime::format_rfc3339_seconds(self.clock.now()).to_string();
        let requested_at = self
            .operation
            .as_ref()
            .filter(|o| o.id == operation.id.0)
            .and_then(|o| o.requested_at.clone())
            .unwrap_or_else(|| now.clone());
        let op = operation_status(operation, message, &requested_at, &now);
        if operation.phase == OperationPhase::Failed {
            // No operation number: the same failure retried after the backoff is counted on
            // one Event.
            let text = format!("applying {}: {message}", operation.commit);
            emit(
                &self.registry,
                &self.key,
                EventType::Warning,
                "ApplyFailed",
                &text,
            );
        }
        if self.first_contact == FirstContactState::Met {
            let report = first_contact_report(self.plan.first_contact, &now);
            tracing::info!(claim = %self.claim_name(), rule = report.rule.as_str(), "first contact with the branch");
            self.first_contact = FirstContactState::Reported(report);
        }
        self.note_in_step(operation);
        self.operation = Some(op.clone());
        let overrides = self.merge_overrides();
        let current = super::store::read(&self.client, &self.key)
            .await
            .ok()
            .flatten();
        let generation = current.as_ref().and_then(|(_, g)| *g);
        let previous = current.map(|(s, _)| s.conditions).unwrap_or_default();
        let (inline, inventory_store) = self.stored_inventory().await;
        let mut conditions = acting_conditions(&previous, &self.plan, Some(&op), &now, generation);
        limit_conditions(&mut conditions, &self.limits, &now, generation);
        let status = ClaimStatus {
            observed_generation: generation,
            conditions,
            operation: Some(op),
            last_applied_commit: self.last_applied.clone(),
            in_step_commit: self.in_step.clone(),
            first_contact: match &self.first_contact {
                FirstContactState::Reported(report) => Some(report.clone()),
                FirstContactState::Met | FirstContactState::Before => None,
            },
            merge_overrides: (overrides.0 > 0).then_some(overrides.0),
            last_merge_override: overrides.1,
            prune_held: self.prune_held.as_ref().map(|h| PruneHeldStatus {
                commit: h.commit.to_string(),
                pruning: h.pruning as u64,
                owned: h.owned as u64,
            }),
            refused_changes: capped(&self.limits.refused),
            unreadable_files: capped(&self.limits.unreadable),
            plaintext_secrets: capped(&self.limits.plaintext),
            inventory: inline,
            inventory_store,
            failures: capped(&self.failures),
            hand_back: None,
        };
        if let Err(e) = super::store::write_status(&self.client, &self.key, &status).await {
            tracing::warn!(claim = %self.claim_name(), error = %e, "cannot record the operation in the claim's status");
        }
    }

    /// The inventory as the status keeps it: inline when small, else written to its
    /// `ConfigMaps` (only when it changed) and named.
    async fn stored_inventory(
        &mut self,
    ) -> (
        Vec<InventoryEntry>,
        Option<backflow_api::config::InventoryStore>,
    ) {
        let entries = inventory(self.inventory.clone());
        if entries.len() <= super::inventory::INLINE_MAX && self.stored_inventory.is_none() {
            return (entries, None);
        }
        let digest = super::inventory::digest(&entries);
        if self.saved_inventory == Some(digest)
            && let Some(store) = &self.stored_inventory
        {
            return (Vec::new(), Some(store.clone()));
        }
        match super::inventory::save(&self.client, &self.key, entries.clone()).await {
            Ok(stored) => {
                self.saved_inventory = Some(digest);
                self.stored_inventory.clone_from(&stored.store);
                (stored.inline, stored.store)
            }
            Err(e) => {
                tracing::warn!(claim = %self.claim_name(), error = %e, "cannot write the claim's inventory; it stays in the status");
                (entries, None)
            }
        }
    }

    /// The merge overrides of the claim's targets' folders, summed, with the last one shown.
    fn merge_overrides(&self) -> (u64, Option<String>) {
        let mut total = 0;
        let mut last = None;
        for (ns, name) in &self.plan.targets {
            let (count, shown) = self.registry.merge_overrides(ns, name);
            total += count;
            last = shown.or(last);
        }
        (total, last)
    }

    fn report(&self, event: ApplyEvent) {
        let claim = self.claim_name();
        match event {
            ApplyEvent::Requested(op) => {
                tracing::info!(%claim, operation = op.id.0, commit = %op.commit, reasons = ?op.reasons.names(), "apply requested");
            }
            ApplyEvent::Succeeded { operation, latency } => {
                tracing::info!(%claim, operation = operation.id.0, commit = %operation.commit, latency_ms = latency.as_millis(), "apply succeeded");
                self.count(&operation, "succeeded");
                self.metrics
                    .latency
                    .get_or_create(&ClaimLabels { claim })
                    .observe(latency.as_secs_f64());
            }
            ApplyEvent::Failed {
                operation,
                message,
                retry_in,
            } => {
                tracing::warn!(%claim, operation = operation.id.0, commit = %operation.commit, retry_in_s = retry_in.as_secs(), %message, "apply failed");
                self.count(&operation, "failed");
            }
            ApplyEvent::Unresolved(op) => {
                tracing::warn!(%claim, operation = op.id.0, "apply still in flight after 5 minutes");
            }
            ApplyEvent::AlreadyApplied(commit) => {
                tracing::debug!(%claim, %commit, "converge: the tip is already applied");
            }
        }
    }

    fn count(&self, operation: &Operation, outcome: &str) {
        for reason in operation.reasons.names() {
            self.metrics
                .operations
                .get_or_create(&OperationLabels {
                    claim: self.claim_name(),
                    reason: reason.to_string(),
                    outcome: outcome.to_string(),
                })
                .inc();
        }
    }
}
