//! The applier claims: which claims act (a `GitTarget` names them), one runner per acting claim,
//! and the gate each runner's decision waits on.
//!
//! - `plan.rs`: claims → branch, folders, targets (pure).
//! - `status.rs`: a claim's status (pure).
//! - `runner.rs`: one claim's shell around its [`ApplierCore`](backflow_decision::ApplierCore).
//! - `store.rs`: reading and writing claims of every kind.
//! - `metrics.rs`: `backflow_apply_*`.
//!
//! The coordinator below re-reads the configuration on every change (and every 10 s) and
//! refreshes each runner's gate from the mirror five times a second.

mod events;
mod inventory;
mod metrics;
mod plan;
mod runner;
mod status;
mod store;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use backflow_api::Clock;
use backflow_api::config::{
    ApplierClaimReference, ArgoCDClaim, ClaimStatus, CommitRequest, ConditionStatus, FluxClaim,
    GitProvider, GitTarget, NativeClaim,
};
use backflow_board::{BranchRegistry, ClaimReadiness, TargetSnapshots, watch_changes};
use backflow_decision::{CommitId, Hold, Reason};
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub use metrics::ApplyMetrics;
pub use plan::{
    ARGO, ClaimKey, ClaimObject, ClaimPlan, ClaimProblem, FLUX, Holds, NATIVE, plan_claims,
};
use runner::{Runner, RunnerCommand, Shared};
use store::ListedClaim;

use crate::argo::ArgoApplier;
use crate::flux::FluxApplier;
use crate::guard::PruneGuard;
use crate::native::{Applier, NativeApplier};
use crate::owned::OwnedFolders;

/// The running applier claims.
pub struct Claims {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Claims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claims").finish_non_exhaustive()
    }
}

impl Claims {
    /// Starts acting for every claim a `GitTarget` of `client`'s API names, on the branches
    /// `mirror` writes. `identities` decrypt SOPS files besides each target's own; `act_as`
    /// says whom a claim's applier acts as and makes its clients.
    pub fn start(
        client: Client,
        act_as: crate::act_as::ActingAs,
        registry: BranchRegistry,
        identities: Vec<backflow_sops::Identity>,
        metrics: ApplyMetrics,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let coordinator = Coordinator {
            client,
            act_as,
            registry,
            identities,
            metrics,
            clock,
            running: BTreeMap::new(),
            problems: BTreeMap::new(),
            saving: BTreeSet::new(),
            claim_reported: BTreeSet::new(),
        };
        Self {
            stop,
            task: tokio::spawn(coordinator.run(stop_rx)),
        }
    }

    /// Stops every runner (an apply in flight is left to finish; its status is followed at the
    /// next start).
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}

/// A claim that acts.
struct Running {
    plan: ClaimPlan,
    commands: mpsc::Sender<RunnerCommand>,
    task: JoinHandle<()>,
    gate: Option<Option<Hold>>,
    tip: Option<String>,
    /// Per target, the mirror's asks already turned into reasons.
    asks: BTreeMap<(String, String), backflow_board::ApplyAsks>,
}

struct Coordinator {
    client: Client,
    act_as: crate::act_as::ActingAs,
    registry: BranchRegistry,
    identities: Vec<backflow_sops::Identity>,
    metrics: ApplyMetrics,
    clock: Arc<dyn Clock>,
    running: BTreeMap<ClaimKey, Running>,
    /// The problem status last written per claim that cannot act.
    problems: BTreeMap<ClaimKey, ClaimProblem>,
    /// Targets a `CommitRequest` is saving now: a save defines its own commit boundary.
    saving: BTreeSet<(String, String)>,
    /// Targets whose `ApplierClaimReady` was reported to the mirror.
    claim_reported: BTreeSet<(String, String)>,
}

impl Coordinator {
    async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let (tx, mut rx) = mpsc::channel::<()>(16);
        let triggers = [
            tokio::spawn(watch_changes(
                Api::<NativeClaim>::all(self.client.clone()),
                tx.clone(),
            )),
            tokio::spawn(watch_changes(
                Api::<FluxClaim>::all(self.client.clone()),
                tx.clone(),
            )),
            tokio::spawn(watch_changes(
                Api::<ArgoCDClaim>::all(self.client.clone()),
                tx.clone(),
            )),
            tokio::spawn(watch_changes(
                Api::<GitTarget>::all(self.client.clone()),
                tx.clone(),
            )),
            tokio::spawn(watch_changes(
                Api::<GitProvider>::all(self.client.clone()),
                tx,
            )),
        ];
        let mut config_tick = tokio::time::interval(Duration::from_secs(10));
        // What the claims act on is pushed by the mirror (`apply_news`), not polled.
        let registry = self.registry.clone();
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                Some(()) = rx.recv() => {
                    while rx.try_recv().is_ok() {}
                    self.reconcile().await;
                    self.refresh_gates().await;
                }
                _ = config_tick.tick() => {
                    self.reconcile().await;
                    self.refresh_gates().await;
                }
                () = registry.apply_news() => self.refresh_gates().await,
            }
        }
        for t in triggers {
            t.abort();
        }
        self.running.clear();
    }

    async fn reconcile(&mut self) {
        let lp = ListParams::default();
        let (targets_api, providers_api) = (
            Api::<GitTarget>::all(self.client.clone()),
            Api::<GitProvider>::all(self.client.clone()),
        );
        let (claims, targets, providers) = match tokio::try_join!(
            store::list_claims(&self.client),
            targets_api.list(&lp),
            providers_api.list(&lp),
        ) {
            Ok((c, t, p)) => (c, t.items, p.items),
            Err(e) => {
                tracing::warn!(error = %e, "listing claims failed; retrying on the next change or tick");
                return;
            }
        };
        self.saving = Api::<CommitRequest>::all(self.client.clone())
            .list(&lp)
            .await
            .map(|l| saving_targets(&l.items))
            .unwrap_or_default();
        let objects: Vec<ClaimObject> = claims.iter().map(|c| c.object.clone()).collect();
        let plans = plan_claims(&objects, &targets, &providers);
        self.report_targets(&targets, &objects, &plans);
        self.let_go(&plans).await;
        for (key, planned) in plans {
            match planned {
                Ok(plan) => {
                    if self.problems.remove(&key).is_some() {
                        // Its conditions still say why it could not act: say it acts now,
                        // before its first operation is recorded.
                        let claim = claims.iter().find(|c| c.object.key == key);
                        self.report_acting(&key, claim, &plan).await;
                    }
                    self.act(key, plan).await;
                }
                Err(problem) => {
                    let claim = claims.iter().find(|c| c.object.key == key);
                    self.report_problem(&key, claim, problem).await;
                }
            }
        }
    }

    /// Stops the runners of claims that no longer act. A claim deleted or no longer named hands
    /// its applier back as it found it; one that cannot act for now keeps it held.
    async fn let_go(&mut self, plans: &BTreeMap<ClaimKey, Result<ClaimPlan, ClaimProblem>>) {
        let stopping: Vec<ClaimKey> = self
            .running
            .iter()
            .filter(|(key, r)| !plans.get(*key).is_some_and(Result::is_ok) || r.task.is_finished())
            .map(|(key, _)| key.clone())
            .collect();
        for key in stopping {
            if let Some(running) = self.running.remove(&key)
                && !plans.contains_key(&key)
            {
                let _ = running.commands.send(RunnerCommand::Release).await;
            }
        }
    }

    /// Tells the mirror each target's `ApplierClaimReady`: whether the claim it names can act.
    fn report_targets(
        &mut self,
        targets: &[GitTarget],
        claims: &[ClaimObject],
        plans: &BTreeMap<ClaimKey, Result<ClaimPlan, ClaimProblem>>,
    ) {
        let mut reported = BTreeSet::new();
        for t in targets {
            let Some(r) = &t.spec.applier_claim_ref else {
                continue;
            };
            let ns = t.namespace().unwrap_or_default();
            let key = ClaimKey {
                kind: r.kind.clone(),
                namespace: ns.clone(),
                name: r.name.clone(),
            };
            let readiness = claim_readiness(r, &key, claims, plans);
            self.registry
                .report_claim(&ns, &t.name_any(), Some(readiness));
            reported.insert((ns, t.name_any()));
        }
        for gone in self.claim_reported.difference(&reported) {
            self.registry.report_claim(&gone.0, &gone.1, None);
        }
        self.claim_reported = reported;
    }

    /// Starts the runner of a claim that can act, or hands it a changed plan.
    async fn act(&mut self, key: ClaimKey, plan: ClaimPlan) {
        let Some(worker) = self.registry.worker(&plan.url, &plan.branch) else {
            // The mirror starts the branch's worker once it serves the targets.
            return;
        };
        if self.running.get(&key).is_some_and(|r| r.plan == plan) {
            return;
        }
        let applier = self.applier_for(&key, &plan, &worker).await;
        if let Some(running) = self.running.get_mut(&key) {
            let newly_named = plan
                .targets
                .iter()
                .any(|t| !running.plan.targets.contains(t));
            let _ = running
                .commands
                .send(RunnerCommand::Plan(plan.clone(), applier))
                .await;
            if newly_named {
                let _ = running
                    .commands
                    .send(RunnerCommand::Reason(Reason::CatchUpConverge))
                    .await;
            }
            running.plan = plan;
            return;
        }
        tracing::info!(claim = %key, folders = ?plan.folders, branch = %plan.branch, "claim acts");
        let (commands, rx) = mpsc::channel(64);
        let shared = Shared {
            client: self.client.clone(),
            clock: self.clock.clone(),
            metrics: self.metrics.clone(),
            registry: self.registry.clone(),
        };
        let task = Runner::start(key.clone(), plan.clone(), applier, worker, shared, rx);
        self.running.insert(
            key,
            Running {
                plan,
                commands,
                task,
                gate: None,
                tip: None,
                asks: BTreeMap::new(),
            },
        );
    }

    /// The applier `plan` holds, for claim `key`, on the branch `worker` writes.
    async fn applier_for(
        &self,
        key: &ClaimKey,
        plan: &ClaimPlan,
        worker: &backflow_git::WorkerHandle,
    ) -> Arc<dyn Applier> {
        let applier = self.held_applier(key, plan, worker).await;
        match self.registry.owner() {
            Some(me) => Arc::new(OwnedFolders::new(
                applier,
                worker.clone(),
                plan.folders.clone(),
                me,
            )),
            None => applier,
        }
    }

    /// The applier `plan` holds, as it is.
    async fn held_applier(
        &self,
        key: &ClaimKey,
        plan: &ClaimPlan,
        worker: &backflow_git::WorkerHandle,
    ) -> Arc<dyn Applier> {
        match &plan.holds {
            Holds::Native(service_account) => {
                let identities = self.identities_for(&key.namespace, plan).await;
                let mut applier = NativeApplier::new(
                    self.client.clone(),
                    &key.namespace,
                    &key.name,
                    worker.clone(),
                    plan.folders.clone(),
                    identities,
                )
                .with_prune_guard(PruneGuard::with_limit(plan.prune_limit));
                if let Some(who) = self
                    .act_as
                    .identity(&key.namespace, service_account.as_deref())
                {
                    applier = applier.acting_through(self.act_as.client(&who));
                }
                Arc::new(applier)
            }
            Holds::Flux(namespace, name) => Arc::new(FluxApplier::new(
                self.client.clone(),
                namespace,
                name,
                (&plan.url, &plan.branch),
                self.clock.clone(),
            )),
            Holds::Argo(namespace, name) => Arc::new(ArgoApplier::new(
                self.client.clone(),
                namespace,
                name,
                (&plan.url, &plan.branch),
                self.clock.clone(),
            )),
        }
    }

    /// The age identities that decrypt the claim's folders: the process's own and each
    /// target's `spec.encryption.age.secretRef`.
    async fn identities_for(
        &self,
        namespace: &str,
        plan: &ClaimPlan,
    ) -> Vec<backflow_sops::Identity> {
        let mut identities = self.identities.clone();
        for name in &plan.identity_secrets {
            let secret = Api::<Secret>::namespaced(self.client.clone(), namespace)
                .get_opt(name)
                .await;
            let Ok(Some(secret)) = secret else {
                tracing::warn!(secret = %format!("{namespace}/{name}"), "cannot read a target's age identities; its SOPS files will not decrypt");
                continue;
            };
            let data: BTreeMap<String, Vec<u8>> = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            match backflow_manifest::identities_from_secret(&data) {
                Ok(found) => identities.extend(found),
                Err(e) => {
                    tracing::warn!(secret = %format!("{namespace}/{name}"), error = %e, "a target's age identities are unusable");
                }
            }
        }
        identities
    }

    /// Tells each runner what holds it back, the branch's tip, and what the mirror asks
    /// (objects to adopt, collisions to repair).
    async fn refresh_gates(&mut self) {
        for running in self.running.values_mut() {
            let hold = if running.plan.targets.iter().any(|t| self.saving.contains(t)) {
                Some(Hold::CommitRequest)
            } else {
                gate(&self.registry, &running.plan)
            };
            if running.gate.as_ref() != Some(&hold) {
                running.gate = Some(hold.clone());
                let _ = running.commands.send(RunnerCommand::Gate(hold)).await;
            }
            let tip = self.registry.tip(&running.plan.url, &running.plan.branch);
            if tip.is_some() && tip != running.tip {
                if let Some(commit) = tip.as_deref().and_then(|t| t.parse::<CommitId>().ok()) {
                    let _ = running
                        .commands
                        .send(RunnerCommand::Published(commit))
                        .await;
                }
                running.tip = tip;
            }
            for (ns, name) in &running.plan.targets {
                let seen = self.registry.apply_asks(ns, name);
                let before = running
                    .asks
                    .insert((ns.clone(), name.clone()), seen)
                    .unwrap_or_default();
                if seen.adopt > before.adopt {
                    let _ = running
                        .commands
                        .send(RunnerCommand::Reason(Reason::CatchUpAdopt))
                        .await;
                }
                if seen.repair > before.repair {
                    let _ = running
                        .commands
                        .send(RunnerCommand::Reason(Reason::Repair))
                        .await;
                }
                let edits = self.registry.take_reapply(ns, name);
                if !edits.is_empty() {
                    let target = (ns.clone(), name.clone());
                    let _ = running
                        .commands
                        .send(RunnerCommand::Reapply(target, edits))
                        .await;
                }
            }
        }
    }

    /// Writes the conditions of a claim that acts again after a problem.
    async fn report_acting(&self, key: &ClaimKey, claim: Option<&ListedClaim>, plan: &ClaimPlan) {
        let now = humantime::format_rfc3339_seconds(self.clock.now()).to_string();
        let previous = claim.and_then(|c| c.status.as_ref());
        let conditions = status::acting_conditions(
            previous.map_or(&[][..], |s| s.conditions.as_slice()),
            plan,
            previous.and_then(|s| s.operation.as_ref()),
            &now,
            claim.and_then(|c| c.generation),
        );
        if let Err(e) = store::write_conditions(&self.client, key, &conditions).await {
            tracing::debug!(error = %e, "claim status update failed; retrying later");
        }
    }

    async fn report_problem(
        &mut self,
        key: &ClaimKey,
        claim: Option<&ListedClaim>,
        problem: ClaimProblem,
    ) {
        if self.problems.get(key) == Some(&problem) {
            return;
        }
        tracing::warn!(claim = %key, reason = problem.reason, message = %problem.message, "claim cannot act");
        let now = humantime::format_rfc3339_seconds(self.clock.now()).to_string();
        let status: ClaimStatus = status::problem_status(
            claim.and_then(|c| c.status.as_ref()),
            &problem,
            &now,
            claim.and_then(|c| c.generation),
        );
        match store::write_status(&self.client, key, &status).await {
            Ok(()) => {
                self.problems.insert(key.clone(), problem);
            }
            Err(e) => tracing::debug!(error = %e, "claim status update failed; retrying later"),
        }
    }
}

/// What a target's `ApplierClaimReady` says about the claim it names.
fn claim_readiness(
    reference: &ApplierClaimReference,
    key: &ClaimKey,
    claims: &[ClaimObject],
    plans: &BTreeMap<ClaimKey, Result<ClaimPlan, ClaimProblem>>,
) -> ClaimReadiness {
    let not = |reason: &str, message: String| ClaimReadiness {
        ready: false,
        reason: reason.to_string(),
        message,
    };
    if ![NATIVE, FLUX, ARGO].contains(&reference.kind.as_str()) {
        return not(
            "UnsupportedKind",
            format!(
                "applierClaimRef.kind {:?} is not served: NativeClaim, FluxClaim or ArgoCDClaim",
                reference.kind
            ),
        );
    }
    if !claims.iter().any(|c| c.key == *key) {
        return not("ClaimNotFound", format!("{key} does not exist; create it"));
    }
    match plans.get(key) {
        Some(Ok(plan)) => ClaimReadiness {
            ready: true,
            reason: "Claimed".into(),
            message: format!(
                "{key} applies {} of branch {} when backflow asks",
                plan.folders.join(", "),
                plan.branch
            ),
        },
        Some(Err(problem)) => not(problem.reason, problem.message.clone()),
        None => not("ClaimNotFound", format!("{key} is not planned")),
    }
}

/// The targets (namespace, name) of `CommitRequests` not answered yet.
fn saving_targets(requests: &[CommitRequest]) -> BTreeSet<(String, String)> {
    requests
        .iter()
        .filter(|r| {
            !r.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status != ConditionStatus::Unknown)
            })
        })
        .map(|r| {
            (
                r.namespace().unwrap_or_default(),
                r.spec.target_ref.name.clone(),
            )
        })
        .collect()
}

/// What holds a claim's applies back now: a suspended claim, or a target whose snapshots are
/// not all published.
fn gate(registry: &BranchRegistry, plan: &ClaimPlan) -> Option<Hold> {
    if plan.suspended {
        return Some(Hold::Targets("spec.suspend is true".into()));
    }
    plan.targets
        .iter()
        .find_map(|(ns, name)| match registry.target_snapshots(ns, name) {
            TargetSnapshots::Settled => None,
            TargetSnapshots::Pending(why) => Some(Hold::Snapshots(why)),
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_commit_request_holds_applies_to_its_target_until_it_is_answered() {
        let request = |name: &str, status: serde_json::Value| -> CommitRequest {
            serde_json::from_value(json!({
                "apiVersion": "backflow.dev/v1alpha1", "kind": "CommitRequest",
                "metadata": {"name": name, "namespace": "team"},
                "spec": {"targetRef": {"name": name}}, "status": status,
            }))
            .unwrap()
        };
        let answered = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Committed",
                                               "message": "", "lastTransitionTime": "t"}]});
        let saving = saving_targets(&[request("pending", json!({})), request("done", answered)]);
        assert_eq!(
            saving.into_iter().collect::<Vec<_>>(),
            vec![("team".to_string(), "pending".to_string())]
        );
    }
}
