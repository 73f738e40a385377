//! The mirror's control loop: reads the configuration kinds and the served types, keeps one
//! watch stream per (`GitTarget`, type, namespace scope) running, and reports status.
//!
//! Level-triggered: any change to a configuration object or a CRD (or a 30 s tick, which also
//! refreshes discovery) recomputes the whole plan and diffs it with what runs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use backflow_api::config::{
    ArgoCDClaim, ClusterWatchRule, CommitRequest, ConditionStatus, FluxClaim, GitBranch,
    GitBranchSpec, GitBranchStatus, GitProvider, GitTarget, LocalReference, WatchRule,
};
use backflow_api::{Clock, GroupResource, WriteRecord};
use backflow_manifest::{KindMap, identities_from_secret};
use backflow_sops::{Encryptor, Identity, Recipient, generate_identity};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::discovery::served_types;
use crate::error::MirrorError;
use crate::metrics::{MirrorMetrics, PlacementLabels};
use crate::plan::{
    Plan, Problem, ServedType, StreamChanges, StreamPlacement, StreamSpec, TargetRef, diff_streams,
    hold_appliers, plan,
};
use crate::status::{self, CommitOutcome, ConditionReport, TargetSnapshot};
use crate::stream::{self, StreamContext};
use crate::tracker::Tracker;
use crate::workers::Workers;
use backflow_api::config::condition::summary;
use backflow_board::{Board, BranchKey, StreamState};

/// The field manager of every status write.
pub const FIELD_MANAGER: &str = "backflow-mirror";

/// A running stream and where it writes (a change restarts it).
struct Running {
    placement: StreamPlacement,
    task: JoinHandle<()>,
}

/// The control loop's state.
pub struct Controller {
    client: Client,
    workers: Arc<Workers>,
    tracker: Arc<Tracker>,
    board: Arc<Board>,
    metrics: MirrorMetrics,
    clock: Arc<dyn Clock>,
    kinds: KindMap,
    served: Vec<ServedType>,
    /// The CRDs' names and resourceVersions when their schemas were last read: they are read
    /// again only when one changed (some clusters hold megabytes of them).
    crds_read: Option<Vec<(String, String)>>,
    running: BTreeMap<StreamSpec, Running>,
    committed_requests: BTreeSet<String>,
    last_status: BTreeMap<String, serde_json::Value>,
    /// Per target, the generation the last reconcile acted on: a status written between
    /// reconciles says no newer one (its `observedGeneration` would claim a spec not acted on
    /// yet, such as placement rules not yet in force).
    reconciled: BTreeMap<TargetRef, Option<i64>>,
    /// The `GitBranch` object (namespace, name) reporting each branch in use.
    branch_objects: BTreeMap<BranchKey, (String, String)>,
    /// Placement totals already added to the counter.
    placements_exported: (u64, u64, u64),
    /// Identities handed in (e.g. `serve`'s own key): given to every encryptor so that data
    /// keys survive restarts.
    identities: Vec<Identity>,
    /// Per target, the recipients its encryptor was built for and the encryptor: kept while
    /// they do not change, since the encryptor remembers the data keys of files it wrote.
    encryptors: BTreeMap<TargetRef, (Vec<String>, Arc<Encryptor>)>,
    /// Per target, the `EncryptionConfigured` condition of the last reconcile.
    encryption_status: BTreeMap<TargetRef, ConditionReport>,
    /// Branches that lost backflow's commits whose streams are replaying their snapshots: once
    /// every stream of the branch published its resync, its worker is told it recovered.
    recovering: BTreeSet<BranchKey>,
    /// The users of recent writes, when the live side is backflow's own API server.
    authors: Option<Arc<WriteRecord>>,
    /// Per `GitProvider` (namespace, name), why its workers cannot run (its Secret), as the
    /// last reconcile found.
    provider_problems: BTreeMap<(String, String), Problem>,
    /// The Secrets `GitProvider`s take credentials from: a change to one reconciles.
    credential_secrets: Arc<std::sync::Mutex<BTreeSet<(String, String)>>>,
}

/// Why a target's encryption is not usable: (reason, message for a person).
type EncryptionProblem = (&'static str, String);

/// The key a generated identity is stored under in a `secretRef` Secret.
pub const GENERATED_IDENTITY_KEY: &str = "identity.agekey";

fn now(clock: &dyn Clock) -> String {
    humantime::format_rfc3339_seconds(clock.now()).to_string()
}

impl Controller {
    /// Commits name the users `authors` records as the authors of their changes.
    #[must_use]
    pub fn with_authors(mut self, authors: Option<Arc<WriteRecord>>) -> Self {
        self.authors = authors;
        self
    }

    /// A controller over `client`'s API.
    pub fn new(
        client: Client,
        workers: Arc<Workers>,
        tracker: Arc<Tracker>,
        metrics: MirrorMetrics,
        clock: Arc<dyn Clock>,
        kinds: KindMap,
        identities: Vec<Identity>,
    ) -> Self {
        Self {
            identities,
            authors: None,
            provider_problems: BTreeMap::new(),
            credential_secrets: Arc::default(),
            encryptors: BTreeMap::new(),
            encryption_status: BTreeMap::new(),
            board: workers.board(),
            client,
            workers,
            tracker,
            metrics,
            clock,
            kinds,
            served: Vec::new(),
            crds_read: None,
            running: BTreeMap::new(),
            committed_requests: BTreeSet::new(),
            last_status: BTreeMap::new(),
            reconciled: BTreeMap::new(),
            branch_objects: BTreeMap::new(),
            placements_exported: (0, 0, 0),
            recovering: BTreeSet::new(),
        }
    }

    /// Runs until `stop` flips to true, then stops every stream.
    pub async fn run(mut self, mut stop: watch::Receiver<bool>) {
        let (tx, mut rx) = mpsc::channel::<()>(64);
        let triggers = vec![
            spawn_trigger::<GitProvider>(self.client.clone(), tx.clone()),
            spawn_trigger::<GitTarget>(self.client.clone(), tx.clone()),
            spawn_trigger::<WatchRule>(self.client.clone(), tx.clone()),
            spawn_trigger::<ClusterWatchRule>(self.client.clone(), tx.clone()),
            spawn_trigger::<CommitRequest>(self.client.clone(), tx.clone()),
            spawn_trigger::<CustomResourceDefinition>(self.client.clone(), tx.clone()),
            // A rotated credential is taken at once, not at the next tick.
            spawn_secret_trigger(
                self.client.clone(),
                tx.clone(),
                self.credential_secrets.clone(),
            ),
        ];
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        let mut status_tick = tokio::time::interval(Duration::from_secs(1));
        let mut divergences = self.workers.take_divergences();
        let board = self.board.clone();
        loop {
            tokio::select! {
                _ = stop.changed() => break,
                Some(branch) = next_divergence(&mut divergences) => self.resync_branch(branch),
                () = board.resync_news() => self.resync_asked(),
                Some(()) = rx.recv() => {
                    // Coalesce a burst of changes into one reconcile.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    while rx.try_recv().is_ok() {}
                }
                _ = tick.tick() => {}
                _ = status_tick.tick() => {
                    self.report_recoveries();
                    self.write_statuses().await;
                    continue;
                }
                () = board.branch_news() => {
                    self.write_branch_statuses().await;
                    continue;
                }
            }
            match served_types(&self.client).await {
                Ok(s) => {
                    self.served = s;
                    self.update_kinds();
                    self.update_schemas().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "discovery failed; keeping the previous view of served types");
                }
            }
            if let Err(e) = self.reconcile().await {
                tracing::warn!(error = %e, "reconcile failed; retrying on the next change or tick");
            }
        }
        for t in triggers {
            t.abort();
        }
        for (_, r) in std::mem::take(&mut self.running) {
            r.task.abort();
        }
        self.write_statuses().await;
    }

    /// A branch lost backflow's commits: every stream writing to it starts over (a fresh
    /// snapshot, published as a resync), so nothing acknowledged stays missing from Git. The
    /// next reconcile starts them again.
    fn resync_branch(&mut self, branch: BranchKey) {
        let specs: Vec<StreamSpec> = self
            .running
            .iter()
            .filter(|(_, r)| r.placement.is_on(&branch.0, &branch.1))
            .map(|(s, _)| s.clone())
            .collect();
        tracing::warn!(url = %branch.0, branch = %branch.1, streams = specs.len(), "the branch lost backflow's commits; resyncing every target on it");
        for s in specs {
            if let Some(r) = self.running.remove(&s) {
                r.task.abort();
                self.board.remove_stream(&s);
            }
        }
        self.recovering.insert(branch);
    }

    /// Starts over the streams whose fresh resync was asked for (a reapply reverted a refused
    /// edit: only a resync of its scope clears the refusal). The reconcile that follows starts
    /// them again.
    fn resync_asked(&mut self) {
        let asked = self.board.take_resyncs();
        let specs: Vec<StreamSpec> = self
            .running
            .keys()
            .filter(|s| {
                asked
                    .get(&s.target)
                    .is_some_and(|resources| resources.contains(&s.served.group_resource()))
            })
            .cloned()
            .collect();
        for s in specs {
            if let Some(r) = self.running.remove(&s) {
                tracing::info!(target = %stream_target(&s), resource = %s.served.plural, namespace = ?s.namespace, "resyncing (asked after a reapply, or a refused write tried again)");
                r.task.abort();
                self.board.remove_stream(&s);
            }
        }
    }

    /// Tells each recovering branch's worker once every stream on it has published its resync
    /// (a stream turns `Streaming` right after submitting it).
    fn report_recoveries(&mut self) {
        let recovered: Vec<BranchKey> = self
            .recovering
            .iter()
            .filter(|b| {
                let mut streams = self
                    .running
                    .iter()
                    .filter(|(_, r)| r.placement.is_on(&b.0, &b.1))
                    .peekable();
                streams.peek().is_some()
                    && streams.all(|(s, _)| self.board.stream(s) == Some(StreamState::Streaming))
            })
            .cloned()
            .collect();
        for branch in recovered {
            self.recovering.remove(&branch);
            if let Some(worker) = self.workers.get(&branch.0, &branch.1) {
                tracing::info!(url = %branch.0, branch = %branch.1, "every target on the branch resynced; publishing again");
                worker.recovered();
            }
        }
    }

    fn update_kinds(&self) {
        for t in &self.served {
            self.kinds
                .insert(GroupResource::new(&t.group, &t.plural), t.kind.clone());
        }
    }

    /// Reads the CRDs' schemas, so the planner leaves the defaults they declare out of Git —
    /// only when a CRD changed since the last read. Unreadable (no permission on a real
    /// cluster): the last ones read stay, and custom resources are written whole.
    async fn update_schemas(&mut self) {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let versions = match api.list_metadata(&ListParams::default()).await {
            Ok(list) => list
                .items
                .iter()
                .map(|m| (m.name_any(), m.resource_version().unwrap_or_default()))
                .collect::<Vec<_>>(),
            Err(e) => {
                tracing::debug!(error = %e, "cannot list the CRDs; custom resources keep their defaults in Git");
                return;
            }
        };
        if self.crds_read.as_ref() == Some(&versions) {
            return;
        }
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                let crds: Vec<serde_json::Value> = list
                    .items
                    .iter()
                    .filter_map(|crd| serde_json::to_value(crd).ok())
                    .collect();
                self.kinds.set_schemas_from_crds(&crds);
                self.crds_read = Some(versions);
            }
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the CRDs; custom resources keep their defaults in Git");
            }
        }
    }

    async fn reconcile(&mut self) -> Result<(), kube::Error> {
        let config = Configuration::list(&self.client).await?;
        let mut p = plan(
            &config.providers,
            &config.targets,
            &config.rules,
            &config.cluster_rules,
            &self.served,
        );
        hold_appliers(
            &mut p,
            &config.targets,
            &config.flux_claims,
            &config.argo_claims,
        );
        let (wanted, worker_problems) = self.wanted_streams(&p, &config).await;
        let running: BTreeMap<StreamSpec, StreamPlacement> = self
            .running
            .iter()
            .map(|(s, r)| (s.clone(), r.placement.clone()))
            .collect();
        self.apply_stream_changes(diff_streams(&wanted, &running));
        self.write_config_statuses(&p, &config, &worker_problems)
            .await;
        self.commit_requests(&p).await;
        Ok(())
    }

    /// Notes which Secrets the providers take credentials from: a change to one reconciles.
    fn remember_credential_secrets(&self, providers: &[GitProvider]) {
        let referenced = providers
            .iter()
            .filter_map(|g| {
                let name = g.spec.secret_ref.as_ref()?.name.clone();
                Some((g.namespace().unwrap_or_default(), name))
            })
            .collect();
        *self
            .credential_secrets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = referenced;
    }

    /// Starts the branch worker of every target that can be served, and says which streams
    /// should run and where they write; targets whose worker cannot run get their reason.
    async fn wanted_streams(
        &mut self,
        p: &Plan,
        config: &Configuration,
    ) -> (
        BTreeMap<StreamSpec, StreamPlacement>,
        BTreeMap<TargetRef, MirrorError>,
    ) {
        let mut wanted = BTreeMap::new();
        let mut worker_problems = BTreeMap::new();
        self.provider_problems.clear();
        self.remember_credential_secrets(&config.providers);
        // Each provider's Secret is read once per reconcile, however many targets use it.
        let mut accesses: BTreeMap<(String, String), crate::credentials::Access> = BTreeMap::new();
        for (tref, tp) in &p.targets {
            let Some(provider) = config.providers.iter().find(|g| {
                g.namespace().as_deref() == Some(tp.provider.0.as_str())
                    && g.name_any() == tp.provider.1
            }) else {
                continue;
            };
            let access = if let Some(access) = accesses.get(&tp.provider) {
                Ok(access.clone())
            } else {
                let dir = self.workers.credentials_dir();
                crate::credentials::read(&self.client, provider, &dir).await
            };
            let started = access.and_then(|access| {
                accesses.insert(tp.provider.clone(), access.clone());
                self.workers.get_or_start(provider, &tp.branch, access)
            });
            if let Err(e) = started {
                self.provider_problems.insert(
                    tp.provider.clone(),
                    Problem {
                        reason: e.reason(),
                        message: e.to_string(),
                    },
                );
                worker_problems.insert(tref.clone(), e);
                continue;
            }
            self.ensure_branch_object(provider, &tp.branch).await;
            self.workers
                .placement(&tp.url, &tp.branch)
                .set(&tp.path, tp.placement.clone());
            let encrypts = self.configure_encryption(tref, tp, &config.targets).await;
            for s in &tp.streams {
                if !encrypts && tp.is_sensitive(&s.served.group_resource()) {
                    // Never plain text: without a usable recipient, sensitive types are not watched.
                    continue;
                }
                wanted.insert(s.clone(), StreamPlacement::of(tp));
            }
        }
        (wanted, worker_problems)
    }

    /// Stops and starts streams as `changes` says, logging one INFO line per target whose
    /// streams changed (each stream at DEBUG), and tells the tracker what is now watched.
    fn apply_stream_changes(&mut self, changes: StreamChanges) {
        let mut stopped: BTreeMap<TargetRef, usize> = BTreeMap::new();
        let mut started: BTreeMap<TargetRef, (usize, String)> = BTreeMap::new();
        for s in changes.stop {
            if let Some(r) = self.running.remove(&s) {
                r.task.abort();
                self.board.remove_stream(&s);
                tracing::debug!(target = %stream_target(&s), resource = %s.served.plural, namespace = ?s.namespace, "watch stream stopped");
                *stopped.entry(s.target.clone()).or_default() += 1;
            }
        }
        let countdowns = self.snapshot_countdowns(&changes.start);
        for (s, placement) in changes.start {
            let countdown = countdowns.get(&s.target).cloned();
            let Some(running) = self.start_stream(&s, &placement, countdown) else {
                continue;
            };
            tracing::debug!(target = %stream_target(&s), resource = %s.served.plural, namespace = ?s.namespace, "watch stream started");
            let entry = started.entry(s.target.clone()).or_insert_with(|| {
                let StreamPlacement {
                    url, branch, path, ..
                } = &placement;
                (0, format!("{url} {branch}:{path}"))
            });
            entry.0 += 1;
            self.running.insert(s, running);
        }
        for (target, count) in stopped {
            tracing::info!(target = %format!("{}/{}", target.0, target.1), streams = count, "watch streams stopped");
        }
        for (target, (count, folder)) in started {
            tracing::info!(target = %format!("{}/{}", target.0, target.1), streams = count, %folder, "watch streams started");
        }
        self.metrics.streams.set(self.running.len() as i64);
        self.tracker.set_coverage(
            self.running
                .keys()
                .map(|s| {
                    (
                        s.served.group_resource(),
                        s.namespace.clone().filter(|_| s.served.namespaced),
                    )
                })
                .collect(),
        );
    }

    /// One countdown per target whose streams start together, so its resync goes out as soon
    /// as every one of them handed in its snapshot.
    fn snapshot_countdowns(
        &self,
        start: &BTreeMap<StreamSpec, StreamPlacement>,
    ) -> BTreeMap<TargetRef, Arc<stream::SnapshotCountdown>> {
        let mut streams: BTreeMap<TargetRef, (usize, &StreamPlacement)> = BTreeMap::new();
        for (s, placement) in start {
            streams.entry(s.target.clone()).or_insert((0, placement)).0 += 1;
        }
        streams
            .into_iter()
            .filter_map(|(target, (n, placement))| {
                let worker = self.workers.get(&placement.url, &placement.branch)?;
                let countdown = stream::SnapshotCountdown::new(n, worker, placement.path.clone());
                Some((target, Arc::new(countdown)))
            })
            .collect()
    }

    /// Starts one stream; `None` when its branch worker is not running.
    fn start_stream(
        &self,
        s: &StreamSpec,
        placement: &StreamPlacement,
        countdown: Option<Arc<stream::SnapshotCountdown>>,
    ) -> Option<Running> {
        let worker = self.workers.get(&placement.url, &placement.branch)?;
        let ctx = StreamContext {
            client: self.client.clone(),
            spec: s.clone(),
            path: placement.path.clone(),
            prune: placement.prune,
            policy: placement.policy.clone(),
            worker,
            branch: (placement.url.clone(), placement.branch.clone()),
            tracker: self.tracker.clone(),
            board: self.board.clone(),
            metrics: self.metrics.clone(),
            clock: self.clock.clone(),
            authors: self.authors.clone(),
        };
        self.board.set_stream(s, StreamState::Replaying);
        let (barriers, barrier_rx) = mpsc::channel(8);
        self.board.catch_ups.register(s, barriers);
        let task = tokio::spawn(stream::run(ctx, barrier_rx, countdown));
        Some(Running {
            placement: placement.clone(),
            task,
        })
    }

    /// Resolves a target's encryption, hands its encryptor to the planner of its branch and
    /// records `EncryptionConfigured`. Returns whether sensitive types may be mirrored.
    async fn configure_encryption(
        &mut self,
        tref: &TargetRef,
        tp: &crate::plan::TargetPlan,
        targets: &[GitTarget],
    ) -> bool {
        let map = self.workers.encryption(&tp.url, &tp.branch);
        let resolved = match (&tp.encryption, targets.iter().find(|t| {
            t.namespace().unwrap_or_default() == tref.0 && t.name_any() == tref.1
        })) {
            (Some(age), Some(_)) => self.resolve_recipients(&tref.0, age).await,
            _ => Err((
                "NotConfigured",
                "Secrets (and the types any GitTarget lists in spec.encryption.sensitiveResources) are not mirrored into this folder: set spec.encryption.age (recipients or secretRef) to mirror them SOPS-encrypted"
                    .to_string(),
            )),
        };
        match resolved {
            Ok((recipients, mut identities)) => {
                let encryptor = match self.encryptors.get(tref) {
                    Some((r, e)) if *r == recipients => Ok(e.clone()),
                    _ => {
                        identities.extend(self.identities.iter().cloned());
                        Encryptor::new(&recipients)
                            .map(|e| Arc::new(e.with_identities(identities)))
                            .map_err(|e| ("InvalidRecipient", e.to_string()))
                    }
                };
                match encryptor {
                    Ok(encryptor) => {
                        self.encryptors
                            .insert(tref.clone(), (recipients.clone(), encryptor.clone()));
                        map.set(&tp.path, encryptor);
                        map.set_sensitive(&tp.path, tp.sensitive.clone());
                        self.encryption_status.insert(
                            tref.clone(),
                            ConditionReport {
                                status: ConditionStatus::True,
                                reason: "Configured",
                                message: format!(
                                    "Secrets are written SOPS-encrypted to {} age recipient(s)",
                                    recipients.len()
                                ),
                            },
                        );
                        true
                    }
                    Err((reason, message)) => {
                        self.encryption_failed(tref, &tp.path, &map, reason, message);
                        false
                    }
                }
            }
            Err((reason, message)) => {
                self.encryption_failed(tref, &tp.path, &map, reason, message);
                false
            }
        }
    }

    fn encryption_failed(
        &mut self,
        tref: &TargetRef,
        path: &str,
        map: &backflow_manifest::EncryptionMap,
        reason: &'static str,
        message: String,
    ) {
        map.remove(path);
        self.encryptors.remove(tref);
        if reason != "NotConfigured" {
            tracing::warn!(target = %format!("{}/{}", tref.0, tref.1), reason, %message, "Secrets are not mirrored");
        }
        let report = ConditionReport {
            status: ConditionStatus::False,
            reason,
            message,
        };
        self.encryption_status.insert(tref.clone(), report);
    }

    /// The recipients of `age` (inline, plus those of the identities in its Secret, created
    /// when asked to), sorted, and the Secret's identities. Key material never reaches a
    /// message.
    async fn resolve_recipients(
        &self,
        ns: &str,
        age: &backflow_api::config::AgeEncryption,
    ) -> Result<(Vec<String>, Vec<Identity>), EncryptionProblem> {
        let mut recipients = Vec::new();
        for r in &age.recipients {
            let parsed: Recipient = r.parse().map_err(|e| {
                (
                    "InvalidRecipient",
                    format!("spec.encryption.age.recipients: {e}; use an age1… public key"),
                )
            })?;
            recipients.push(parsed.to_string());
        }
        let mut identities = Vec::new();
        if let Some(r) = &age.secret_ref {
            let api = Api::<Secret>::namespaced(self.client.clone(), ns);
            let secret = api.get_opt(&r.name).await.map_err(|e| {
                (
                    "SecretUnreadable",
                    format!("cannot read Secret {ns}/{}: {e}", r.name),
                )
            })?;
            let secret = match secret {
                Some(s) => s,
                None if age.generate_when_missing => {
                    self.generate_secret(&api, ns, &r.name).await?
                }
                None => {
                    return Err((
                        "SecretNotFound",
                        format!(
                            "Secret {ns}/{} named by spec.encryption.age.secretRef does not exist; create it with an `identity.agekey` entry (age-keygen output) or set generateWhenMissing: true",
                            r.name
                        ),
                    ));
                }
            };
            let data: BTreeMap<String, Vec<u8>> = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            let found = identities_from_secret(&data)
                .map_err(|e| ("InvalidIdentity", format!("Secret {ns}/{} {e}", r.name)))?;
            for id in found {
                recipients.push(id.recipient().to_string());
                identities.push(id);
            }
        }
        recipients.sort();
        recipients.dedup();
        if recipients.is_empty() {
            return Err((
                "NoRecipients",
                "spec.encryption.age names no recipient; add recipients or a secretRef holding an age identity"
                    .to_string(),
            ));
        }
        Ok((recipients, identities))
    }

    /// Creates the `secretRef` Secret with a new identity (generateWhenMissing).
    async fn generate_secret(
        &self,
        api: &Api<Secret>,
        ns: &str,
        name: &str,
    ) -> Result<Secret, EncryptionProblem> {
        // The identity is key material: drawn from the OS generator, stored only in the Secret.
        let (identity, recipient) = generate_identity(&mut rand::rng());
        let text = format!("# public key: {recipient}\n{}\n", identity.as_str());
        let secret: Secret = serde_json::from_value(json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": ns},
            "type": "Opaque",
            "stringData": {GENERATED_IDENTITY_KEY: text},
        }))
        .map_err(|e| {
            (
                "SecretUnreadable",
                format!("cannot build Secret {ns}/{name}: {e}"),
            )
        })?;
        let created = api
            .create(&kube::api::PostParams::default(), &secret)
            .await
            .map_err(|e| {
                (
                    "SecretUnreadable",
                    format!("cannot create Secret {ns}/{name}: {e}"),
                )
            })?;
        tracing::info!(secret = %format!("{ns}/{name}"), %recipient, "generated an age identity for spec.encryption.age.secretRef");
        Ok(created)
    }

    async fn patch_status<K>(
        &mut self,
        api: Api<K>,
        ns: Option<&str>,
        name: &str,
        status: serde_json::Value,
    ) where
        K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let id = format!("{}/{}/{name}", K::kind(&()), ns.unwrap_or(""));
        // Compare without times so an unchanged status is not rewritten every second.
        let mut comparable = status.clone();
        if let Some(cs) = comparable
            .get_mut("conditions")
            .and_then(|c| c.as_array_mut())
        {
            for c in cs {
                if let Some(m) = c.as_object_mut() {
                    m.remove("lastTransitionTime");
                }
            }
        }
        if self.last_status.get(&id) == Some(&comparable) {
            return;
        }
        let patch = Patch::Merge(json!({ "status": status }));
        match api
            .patch_status(name, &PatchParams::default(), &patch)
            .await
        {
            Ok(_) => {
                self.last_status.insert(id, comparable);
            }
            Err(e) => {
                tracing::debug!(object = %id, error = %e, "status update failed; retrying later");
            }
        }
    }

    async fn write_config_statuses(
        &mut self,
        p: &Plan,
        config: &Configuration,
        worker_problems: &BTreeMap<TargetRef, MirrorError>,
    ) {
        let now = now(self.clock.as_ref());
        self.write_provider_statuses(&config.providers).await;
        for r in &config.rules {
            let ns = r.namespace().unwrap_or_default();
            let key = ("WatchRule".to_string(), ns.clone(), r.name_any());
            let st = status::rule_status(
                r.status.clone(),
                r.metadata.generation,
                p.rules.get(&key),
                &now,
            );
            let api = Api::<WatchRule>::namespaced(self.client.clone(), &ns);
            let status = serde_json::to_value(&st).unwrap_or_default();
            self.patch_status(api, Some(&ns), &r.name_any(), status)
                .await;
        }
        for r in &config.cluster_rules {
            let key = ("ClusterWatchRule".to_string(), String::new(), r.name_any());
            let st = status::rule_status(
                r.status.clone(),
                r.metadata.generation,
                p.rules.get(&key),
                &now,
            );
            let api = Api::<ClusterWatchRule>::all(self.client.clone());
            let status = serde_json::to_value(&st).unwrap_or_default();
            self.patch_status(api, None, &r.name_any(), status).await;
        }
        for t in &config.targets {
            let tref = (t.namespace().unwrap_or_default(), t.name_any());
            let problem = p.target_problems.get(&tref).cloned().or_else(|| {
                worker_problems.get(&tref).map(|e| Problem {
                    reason: e.reason(),
                    message: e.to_string(),
                })
            });
            let status = self.target_status(t, problem, &now);
            self.reconciled.insert(tref.clone(), t.metadata.generation);
            let api = Api::<GitTarget>::namespaced(self.client.clone(), &tref.0);
            self.patch_status(api, Some(&tref.0), &tref.1, status).await;
        }
    }

    /// What `t`'s status is computed from, as the board and this reconcile show it.
    fn target_snapshot(&self, t: &GitTarget, problem: Option<Problem>) -> TargetSnapshot {
        let tref = (t.namespace().unwrap_or_default(), t.name_any());
        TargetSnapshot {
            streams: self
                .board
                .streams_of(&tref)
                .into_iter()
                .map(|(_, state)| state)
                .collect(),
            activity: self.board.activity(&tref),
            problem,
            encryption: self.encryption_status.get(&tref).cloned(),
            claim: self.board.claim(&tref),
        }
    }

    fn target_status(
        &self,
        t: &GitTarget,
        problem: Option<Problem>,
        now: &str,
    ) -> serde_json::Value {
        let snapshot = self.target_snapshot(t, problem);
        serde_json::to_value(status::target_status(t, &snapshot, now)).unwrap_or_default()
    }

    /// Refreshes target statuses from the board (streams settle and pushes land between changes).
    /// Creates the `GitBranch` that reports `branch` of `provider`'s repository, once.
    async fn ensure_branch_object(&mut self, provider: &GitProvider, branch: &str) {
        let key: BranchKey = (provider.spec.url.clone(), branch.to_string());
        if self.branch_objects.contains_key(&key) {
            return;
        }
        let ns = provider.namespace().unwrap_or_default();
        let name = branch_object_name(&provider.name_any(), branch);
        let obj = GitBranch::new(
            &name,
            GitBranchSpec {
                provider_ref: LocalReference {
                    name: provider.name_any(),
                },
                branch: branch.to_string(),
            },
        );
        let api = Api::<GitBranch>::namespaced(self.client.clone(), &ns);
        match api
            .patch(
                &name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&obj),
            )
            .await
        {
            Ok(_) => {
                self.branch_objects.insert(key, (ns, name));
            }
            Err(e) => {
                tracing::warn!(gitbranch = %format!("{ns}/{name}"), error = %e, "cannot create the GitBranch status object; retrying later");
            }
        }
    }

    /// Reports each branch's tip, last push and pending writes on its `GitBranch`.
    async fn write_branch_statuses(&mut self) {
        let now = now(self.clock.as_ref());
        let objects: Vec<(BranchKey, (String, String))> = self
            .branch_objects
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, (ns, name)) in objects {
            let a = self.board.branch(&key);
            let mut conditions = Vec::new();
            summary(&mut conditions, Ok(()), &now, None);
            let status = GitBranchStatus {
                observed_generation: Some(1),
                conditions,
                tip: a.tip,
                last_push_time: a.last_push_time,
                pending_writes: a.pending,
                last_push_notice_at: a.last_push_notice_at,
            };
            let api = Api::<GitBranch>::namespaced(self.client.clone(), &ns);
            self.patch_status(
                api,
                Some(&ns),
                &name,
                serde_json::to_value(&status).unwrap_or_default(),
            )
            .await;
        }
    }

    /// Brings the placements counter up to the planners' totals.
    fn export_placements(&mut self) {
        let now = self.workers.placement_totals();
        let before = self.placements_exported;
        for (source, n, was) in [
            ("byType", now.0, before.0),
            ("default", now.1, before.1),
            ("canonical", now.2, before.2),
        ] {
            if n > was {
                self.metrics
                    .placements
                    .get_or_create(&PlacementLabels {
                        source: source.into(),
                    })
                    .inc_by(n - was);
            }
        }
        self.placements_exported = now;
    }

    /// Each provider's status: its settings, its Secret, and what its workers last found of
    /// its remote (so a refused credential shows within a second, and clears as fast).
    async fn write_provider_statuses(&mut self, providers: &[GitProvider]) {
        let now = now(self.clock.as_ref());
        for g in providers {
            let key = (g.namespace().unwrap_or_default(), g.name_any());
            let problem = self.provider_problems.get(&key).cloned().or_else(|| {
                self.workers.remote_problem(&g.spec.url).map(|p| Problem {
                    reason: p.reason,
                    message: p.message,
                })
            });
            let status = status::provider_status(g, problem, &now);
            let api = Api::<GitProvider>::namespaced(self.client.clone(), &key.0);
            self.patch_status(api, Some(&key.0), &key.1, status).await;
        }
    }

    async fn write_statuses(&mut self) {
        self.export_placements();
        self.write_branch_statuses().await;
        if let Ok(providers) = Api::<GitProvider>::all(self.client.clone())
            .list(&ListParams::default())
            .await
        {
            self.write_provider_statuses(&providers.items).await;
        }
        let Ok(targets) = Api::<GitTarget>::all(self.client.clone())
            .list(&ListParams::default())
            .await
        else {
            return;
        };
        let now = now(self.clock.as_ref());
        for t in targets.items {
            let tref = (t.namespace().unwrap_or_default(), t.name_any());
            // Targets with problems are written by the reconcile, which knows the problem; so is
            // a target whose spec changed since the last reconcile.
            if !self.running.keys().any(|s| s.target == tref)
                || self.reconciled.get(&tref) != Some(&t.metadata.generation)
            {
                continue;
            }
            let status = self.target_status(&t, None, &now);
            let api = Api::<GitTarget>::namespaced(self.client.clone(), &tref.0);
            self.patch_status(api, Some(&tref.0), &tref.1, status).await;
        }
    }

    /// Saves for every new `CommitRequest`: close the window with its message, report the SHA.
    async fn commit_requests(&mut self, p: &Plan) {
        let Ok(list) = Api::<CommitRequest>::all(self.client.clone())
            .list(&ListParams::default())
            .await
        else {
            return;
        };
        for cr in list.items {
            let uid = cr.uid().unwrap_or_default();
            let done = cr.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status != ConditionStatus::Unknown)
            });
            if done || self.committed_requests.contains(&uid) {
                continue;
            }
            self.committed_requests.insert(uid);
            let ns = cr.namespace().unwrap_or_default();
            let name = cr.name_any();
            let generation = cr.metadata.generation;
            let tref = (ns.clone(), cr.spec.target_ref.name.clone());
            let client = self.client.clone();
            let clock = self.clock.clone();
            let target = p.targets.get(&tref).cloned();
            let worker = target
                .as_ref()
                .and_then(|t| self.workers.get(&t.url, &t.branch));
            let message = cr
                .spec
                .message
                .clone()
                .unwrap_or_else(|| format!("Save requested by CommitRequest {ns}/{name}"));
            let board = self.board.clone();
            tokio::spawn(async move {
                // Every change stored before the request must be decided before the window closes,
                // even if its watch event is still on its way.
                let targets = [tref.clone()];
                board.catch_ups.of(&targets, Duration::from_secs(60)).await;
                let outcome = match (target, worker) {
                    (Some(t), Some(w)) => match w.commit_request(message).await {
                        Ok(Some(tip)) => CommitOutcome::Committed {
                            branch: t.branch,
                            sha: tip.to_string(),
                        },
                        Ok(None) => CommitOutcome::NothingToCommit { branch: t.branch },
                        Err(e) => CommitOutcome::PushFailed(e.to_string()),
                    },
                    _ => CommitOutcome::TargetNotFound(tref),
                };
                let status =
                    status::commit_request_status(&outcome, generation, &now(clock.as_ref()));
                let api = Api::<CommitRequest>::namespaced(client, &ns);
                if let Err(e) = api
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": status})),
                    )
                    .await
                {
                    tracing::warn!(commit_request = %format!("{ns}/{name}"), error = %e, "cannot report the CommitRequest outcome");
                }
            });
        }
    }
}

/// The configuration objects the mirror reads, listed together.
struct Configuration {
    providers: Vec<GitProvider>,
    targets: Vec<GitTarget>,
    rules: Vec<WatchRule>,
    cluster_rules: Vec<ClusterWatchRule>,
    flux_claims: Vec<FluxClaim>,
    argo_claims: Vec<ArgoCDClaim>,
}

impl Configuration {
    async fn list(client: &Client) -> Result<Self, kube::Error> {
        let lp = ListParams::default();
        Ok(Self {
            providers: Api::<GitProvider>::all(client.clone())
                .list(&lp)
                .await?
                .items,
            targets: Api::<GitTarget>::all(client.clone()).list(&lp).await?.items,
            rules: Api::<WatchRule>::all(client.clone()).list(&lp).await?.items,
            cluster_rules: Api::<ClusterWatchRule>::all(client.clone())
                .list(&lp)
                .await?
                .items,
            flux_claims: Api::<FluxClaim>::all(client.clone()).list(&lp).await?.items,
            argo_claims: Api::<ArgoCDClaim>::all(client.clone())
                .list(&lp)
                .await?
                .items,
        })
    }
}

/// A stream's `GitTarget` as `namespace/name`, for logs.
fn stream_target(s: &StreamSpec) -> String {
    format!("{}/{}", s.target.0, s.target.1)
}

/// The next branch that lost backflow's commits; never, once the channel is gone.
async fn next_divergence(
    divergences: &mut Option<mpsc::UnboundedReceiver<BranchKey>>,
) -> Option<BranchKey> {
    match divergences {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Sends a tick on every change to a Secret in `referenced` (metadata only: their data is read
/// by the reconcile, not streamed here).
fn spawn_secret_trigger(
    client: Client,
    tx: mpsc::Sender<()>,
    referenced: Arc<std::sync::Mutex<BTreeSet<(String, String)>>>,
) -> JoinHandle<()> {
    use futures::StreamExt as _;
    use kube::runtime::watcher::{self, Event};
    tokio::spawn(async move {
        let api = Api::<kube::core::PartialObjectMeta<Secret>>::all(client);
        let mut events = watcher::watcher(api, watcher::Config::default()).boxed();
        while let Some(e) = events.next().await {
            let object = match &e {
                Ok(Event::Apply(o) | Event::Delete(o) | Event::InitApply(o)) => o,
                Ok(_) => continue,
                Err(_) => {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let key = (object.namespace().unwrap_or_default(), object.name_any());
            let named = referenced
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(&key);
            if named {
                let _ = tx.try_send(());
            }
        }
    })
}

/// Sends a tick on every change to objects of kind `K`.
fn spawn_trigger<K>(client: Client, tx: mpsc::Sender<()>) -> JoinHandle<()>
where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    tokio::spawn(backflow_board::watch_changes(Api::<K>::all(client), tx))
}

/// The `GitBranch` name for a provider's branch: `{provider}-{branch}`, made a DNS subdomain.
fn branch_object_name(provider: &str, branch: &str) -> String {
    let raw = format!("{provider}-{branch}").to_ascii_lowercase();
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let trimmed = cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    trimmed.chars().take(253).collect()
}

#[cfg(test)]
mod tests {
    use super::branch_object_name;

    #[test]
    fn branch_object_names_are_valid() {
        assert_eq!(branch_object_name("default", "main"), "default-main");
        assert_eq!(branch_object_name("Git", "env/prod_1"), "git-env-prod-1");
    }
}
