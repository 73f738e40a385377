//! One watch stream: a type in a namespace scope, for one `GitTarget`.
//!
//! It reads the initial snapshot (streaming list with the end bookmark, or LIST+WATCH where the
//! API does not stream lists), publishes it as one resync (upsert all, sweep by prune mode), then
//! turns every live change into an intent for the branch worker. A 410 or a dropped watch starts a
//! fresh snapshot, handled the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use backflow_api::config::PruneMode;
use backflow_api::config::{ClaimStatus, FirstContact, claim_resource};
use backflow_api::{APPLIER_LABEL, AppliedBy, Clock, GroupResource, ObjectKey, WriteRecord};
use backflow_branch::{
    Attribution, ChangedBy, ClaimStart, FirstContactRule, Intent, ObjectJson, ObjectState,
    SnapshotBaseline, SweepScope,
};
use backflow_git::{Pushed, WorkerHandle, WriteError};
use backflow_manifest::Identity;
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use crate::managers::writes_of;
use crate::metrics::{CatchUpLabels, EventLabels, MirrorMetrics, TargetLabels};
use crate::plan::{FolderPolicy, StreamSpec};
use crate::tracker::{Outcome, PublicationRx, Tracker, resolved};
use crate::watched::Watched;
use backflow_board::Pruned;
use backflow_board::{
    Barrier, Board, Kept, PushReport, RefusedEdit, StreamState, WithheldWrite, WriteScope,
};
use backflow_decision::{
    AsKept, Mirrored, OperationPhase, Verdict, WindowEdits, WindowSpan, Writers, Writes,
};

/// Everything a stream needs.
#[derive(Clone)]
pub struct StreamContext {
    /// Client of the live API.
    pub client: Client,
    /// What to watch and for which target.
    pub spec: StreamSpec,
    /// The target's folder in the repository.
    pub path: String,
    /// The target's deletion policy.
    pub prune: PruneMode,
    /// Which live writes the folder takes, and what a refused one asks for.
    pub policy: FolderPolicy,
    /// The branch worker of the target's branch.
    pub worker: WorkerHandle,
    /// The target's branch (repository URL, branch), for its `GitBranch` status.
    pub branch: backflow_board::BranchKey,
    /// Publication tracking for `X-Backflow-Wait`.
    pub tracker: Arc<Tracker>,
    /// Status board.
    pub board: Arc<Board>,
    /// Metrics.
    pub metrics: MirrorMetrics,
    /// Time, for status stamps.
    pub clock: Arc<dyn Clock>,
    /// The users of recent writes, when the live side is backflow's own API server.
    pub authors: Option<Arc<WriteRecord>>,
}

fn api_resource(spec: &StreamSpec) -> ApiResource {
    let s = &spec.served;
    ApiResource {
        group: s.group.clone(),
        version: s.version.clone(),
        api_version: if s.group.is_empty() {
            s.version.clone()
        } else {
            format!("{}/{}", s.group, s.version)
        },
        kind: s.kind.clone(),
        plural: s.plural.clone(),
    }
}

fn object_key(gr: &GroupResource, obj: &DynamicObject) -> ObjectKey {
    ObjectKey::new(
        gr.clone(),
        obj.namespace().unwrap_or_default(),
        obj.name_any(),
    )
}

/// The key `meta` names (what of it is readable).
fn meta_key(gr: &GroupResource, meta: &ObjectMeta) -> ObjectKey {
    ObjectKey::new(
        gr.clone(),
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn resource_version(obj: &DynamicObject) -> u64 {
    meta_resource_version(&obj.metadata)
}

/// The resourceVersion `meta` carries, as a number (0 when it has none).
fn meta_resource_version(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

impl StreamContext {
    fn echo(&self, outcome: &str) {
        self.metrics
            .apply_echoes
            .get_or_create(&crate::metrics::EchoLabels {
                outcome: outcome.to_string(),
            })
            .inc();
    }

    /// Who made the change that gave `key` the resourceVersion `rv`: the user the API server
    /// authenticated when it is known, else (not for a delete, whose managedFields say nothing
    /// of who deleted) the newest field manager.
    fn changed_by(
        &self,
        key: &ObjectKey,
        rv: u64,
        obj: Option<&DynamicObject>,
    ) -> Option<ChangedBy> {
        let user = self.authors.as_ref().and_then(|a| a.user_of(key, rv));
        user.map(ChangedBy::User).or_else(|| {
            let writes = writes_of(obj?);
            writes
                .newest_manager()
                .map(|m| ChangedBy::Manager(m.into()))
        })
    }

    /// Whether `by` is a user whose changes the folder does not mirror (`spec.exclude.users`).
    fn excludes(&self, by: Option<&ChangedBy>) -> bool {
        matches!(by, Some(ChangedBy::User(u)) if self.policy.excluded_users.iter().any(|x| x.as_str() == &**u))
    }

    fn attribution(&self, by: Option<ChangedBy>) -> Option<Attribution> {
        by.map(|by| Attribution {
            by,
            commits: self.policy.commit_authors,
        })
    }

    /// The apply windows the folder's writes are judged against: none for a folder no claim
    /// coordinates (windows it kept from when one did judge nothing: everything is mirrored).
    fn windows(&self) -> Vec<WindowSpan> {
        if self.policy.applier.is_none() {
            return Vec::new();
        }
        self.board
            .windows
            .spans(&self.spec.target, self.clock.now())
    }

    /// `key`, an object of this stream's type, as an Event names it.
    fn regarding(&self, key: &ObjectKey) -> backflow_board::Regarding {
        let served = &self.spec.served;
        let api_version = if served.group.is_empty() {
            served.version.clone()
        } else {
            format!("{}/{}", served.group, served.version)
        };
        backflow_board::Regarding {
            api_version,
            kind: served.kind.clone(),
            namespace: (!key.namespace.is_empty()).then(|| key.namespace.clone()),
            name: key.name.clone(),
        }
    }

    fn target_label(&self) -> String {
        format!("{}/{}", self.spec.target.0, self.spec.target.1)
    }

    fn count(&self, outcome: &str) {
        self.metrics
            .events
            .get_or_create(&EventLabels {
                target: self.target_label(),
                outcome: outcome.into(),
            })
            .inc();
    }

    /// Submits one object's intent, and follows it.
    fn submit(&self, intent: Intent) -> PublicationRx {
        self.count("submitted");
        // Only an edit asks for a reapply when refused, never a delete.
        let reapply = (self.policy.reapply && matches!(intent.state, ObjectState::Present(_)))
            .then(|| RefusedEdit {
                object: Identity {
                    group: intent.key.resource.group.clone(),
                    kind: self.spec.served.kind.clone(),
                    namespace: intent.key.namespace.clone(),
                    name: intent.key.name.clone(),
                },
                resource: intent.key.resource.clone(),
            });
        let scope = WriteScope::Object(intent.key.clone());
        self.follow(self.worker.submit(intent), scope, reapply)
    }

    /// Follows a submitted write of `scope` to its end: records the commit (or the refusal) for
    /// status and waiters.
    /// A refused edit of `reapply` asks the folder's applier to apply Git over it.
    fn follow(
        &self,
        pushed: Pushed,
        scope: WriteScope,
        reapply: Option<RefusedEdit>,
    ) -> PublicationRx {
        let (tx, rx) = watch::channel(None);
        let board = self.board.clone();
        let target = self.spec.target.clone();
        let clock = self.clock.clone();
        let metrics = self.metrics.clone();
        let label = self.target_label();
        let branch = self.branch.clone();
        let worker = self.worker.clone();
        let regarding = match &scope {
            WriteScope::Object(key) => Some(self.regarding(key)),
            WriteScope::Resync(..) | WriteScope::Unreadable(_) => None,
        };
        metrics.in_flight.inc();
        board.branch_submitted(&branch);
        tokio::spawn(async move {
            let outcome = match pushed.await {
                Ok(Some(oid)) => {
                    board.accepted(&target, &scope);
                    let report = PushReport {
                        sha: oid.to_string(),
                        order: worker.tip_order(oid).unwrap_or(0),
                        at: humantime::format_rfc3339_seconds(clock.now()).to_string(),
                    };
                    board.pushed(&target, &report);
                    board.branch_settled(&branch, Some(&report));
                    Outcome::Pushed(report.sha)
                }
                Ok(None) => {
                    board.accepted(&target, &scope);
                    Outcome::NotPushed(
                        "the branch does not exist yet and the write changed nothing".to_string(),
                    )
                }
                Err(WriteError::Refused(e)) => {
                    metrics
                        .refusals
                        .get_or_create(&TargetLabels { target: label })
                        .inc();
                    tracing::warn!(target = %format!("{}/{}", target.0, target.1), reason = %e, "write refused");
                    board.refused(&target, scope, e.to_string());
                    if let Some(regarding) = regarding {
                        let then = if reapply.is_some() {
                            "Git's value is applied over it (onRefusal: Reapply)"
                        } else {
                            "the live value stays until Git or the object changes (onRefusal: Ignore)"
                        };
                        board.record(backflow_board::Note {
                            regarding,
                            kind: backflow_board::EventType::Warning,
                            reason: "WriteRefused".into(),
                            action: "Mirror".into(),
                            message: format!("the live edit cannot be written to Git: {e}; {then}"),
                        });
                    }
                    if let Some(object) = reapply {
                        board.reapply(&target, object);
                    }
                    Outcome::Refused(e.to_string())
                }
                Err(e) => Outcome::NotPushed(e.to_string()),
            };
            if !matches!(outcome, Outcome::Pushed(_)) {
                board.branch_settled(&branch, None);
            }
            metrics.in_flight.dec();
            let _ = tx.send(Some(outcome));
        });
        rx
    }

    /// Whether another applier than the folder's owns an object (`owner`): then it is neither
    /// mirrored nor swept. Logged and counted once per object.
    fn owned_elsewhere(
        &self,
        key: &ObjectKey,
        owner: Option<&AppliedBy>,
        excluded: &mut BTreeSet<ObjectKey>,
    ) -> bool {
        if !AppliedBy::excludes(self.policy.applier.as_ref(), owner) {
            excluded.remove(key);
            return false;
        }
        // backflow's own records are nobody's conflict.
        if matches!(owner, Some(AppliedBy::Record(_))) {
            return true;
        }
        if excluded.insert(key.clone()) {
            let owner = owner.map(ToString::to_string).unwrap_or_default();
            tracing::warn!(target = %self.target_label(), object = %key, %owner, "another applier owns this object: not mirrored into the coordinated folder");
            self.metrics
                .ownership_conflicts
                .get_or_create(&TargetLabels {
                    target: self.target_label(),
                })
                .inc();
        }
        true
    }

    /// Whether the stream keeps each object's value: only where an applier coordinates the
    /// folder (a push reaches the live side there, so an edit must not write over it).
    fn keeps_values(&self) -> bool {
        self.policy.applier.is_some()
    }

    fn sanitized(&self, obj: &DynamicObject) -> Option<Value> {
        let value = serde_json::to_value(obj).ok()?;
        Some(backflow_manifest::sanitize(&value))
    }
}

/// Per object, what the stream last saw of it.
type Submitted = BTreeMap<ObjectKey, Seen>;

/// What a stream last saw of an object: a fingerprint of the sanitized value last submitted and
/// the resourceVersion it came from (an unchanged value commits nothing, and an event older than
/// what a catch-up already read is stale; a fingerprint rather than the value, so the mirror does
/// not hold a second copy of every object), and who its last event or the list it came in
/// showed wrote it: the next event is judged against it (see [`Writes::looks_like_applier`] and
/// [`Writes::applier_wrote_since`]).
#[derive(Debug, Clone)]
struct Seen {
    print: Fingerprint,
    rv: u64,
    writers: Writers,
    /// The sanitized value itself, kept only where an applier coordinates the folder: the next
    /// edit is published as a change of it (three-way, [`Intent::baseline`]), so a push that
    /// changed other fields of the object meanwhile keeps them.
    value: Option<Arc<ObjectJson>>,
}

/// What one stream remembers between events.
#[derive(Debug, Default)]
struct Memory {
    /// What it last submitted, per object.
    submitted: Submitted,
    /// Live edits seen in the open apply window.
    window_edits: WindowEdits<ObjectKey>,
    /// Objects another applier owns, already logged and counted.
    excluded: BTreeSet<ObjectKey>,
    /// Objects that cannot be read, with the resourceVersion last logged.
    undecodable: BTreeMap<ObjectKey, u64>,
    /// Objects the folder does not take (another applier owns them, or `spec.exclude` names
    /// who wrote them), with the resourceVersion decided so: a catch-up need not read them again.
    passed: BTreeMap<ObjectKey, u64>,
    /// What the folder's claim said when the watch started, until the first snapshot takes it:
    /// that snapshot is published as changes of the commit the live side last held, so what
    /// Git gained since (a push while backflow was stopped, an apply cut short) is not written
    /// over. Later snapshots (a relist) are changes of what the stream saw.
    start: Option<ClaimStart>,
}

impl Memory {
    /// Whether version `rv` of `key` was decided already: what was last submitted of it is
    /// that version or newer, or that version was not taken or could not be read.
    fn decided(&self, key: &ObjectKey, rv: u64) -> bool {
        rv != 0
            && (self.submitted.get(key).is_some_and(|s| rv <= s.rv)
                || self.passed.get(key) == Some(&rv)
                || self.undecodable.get(key) == Some(&rv))
    }

    /// Which of `versions` (a scope's objects and their resourceVersions) were not decided at
    /// that version already, when at most `most` were not.
    fn undecided(
        &self,
        versions: impl IntoIterator<Item = (ObjectKey, u64)>,
        most: usize,
    ) -> ByVersions {
        let mut present = BTreeSet::new();
        let mut undecided = Vec::new();
        for (key, rv) in versions {
            if !self.decided(&key, rv) {
                if undecided.len() == most {
                    return ByVersions::ReadWhole;
                }
                undecided.push(key.clone());
            }
            present.insert(key);
        }
        if undecided.is_empty() {
            ByVersions::Decided(present)
        } else {
            ByVersions::Undecided { present, undecided }
        }
    }
}

/// The Git blob id (SHA-1) of a value's JSON: equal values give equal fingerprints; a differing
/// pair colliding is as unlikely as a Git object collision.
type Fingerprint = String;

fn fingerprint(value: &Value) -> Fingerprint {
    let mut bytes = Vec::new();
    canonical(value, &mut bytes);
    backflow_branch::blob_id(&bytes)
}

/// `value`'s JSON with object keys sorted: the API may send the same object with its keys in
/// another order (a server-side apply rebuilds it), which is no change.
fn canonical(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by_key(|(k, _)| *k);
            out.push(b'{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(&Value::String(k.clone()), out);
                out.push(b':');
                canonical(v, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(v, out);
            }
            out.push(b']');
        }
        // Writing a scalar into memory does not fail.
        scalar => out.extend(serde_json::to_vec(scalar).unwrap_or_default()),
    }
}

/// The streams of one target started together, counting down their first snapshots: when the
/// last is handed in, the branch worker is told, so the target's resync goes out at once
/// instead of after the silence that gathers a target's snapshots into one commit. A stream
/// that never lists (refused, failing) leaves the count above zero, and the silence decides.
#[derive(Debug)]
pub struct SnapshotCountdown {
    remaining: AtomicUsize,
    worker: WorkerHandle,
    target: String,
}

impl SnapshotCountdown {
    /// A countdown of `streams` snapshots of the target at `path`, told to `worker`.
    #[must_use]
    pub fn new(streams: usize, worker: WorkerHandle, path: String) -> Self {
        Self {
            remaining: AtomicUsize::new(streams),
            worker,
            target: path,
        }
    }

    /// One stream handed in its first snapshot.
    fn handed_in(&self) {
        if self.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.worker.resync_complete(&self.target);
        }
    }
}

/// Runs the stream until the task is aborted. Each [`Barrier`] received is answered once every
/// object the API holds now has been submitted (see [`catch_up`]); its first snapshot counts
/// down `countdown`.
pub async fn run(
    ctx: StreamContext,
    mut barriers: mpsc::Receiver<Barrier>,
    mut countdown: Option<Arc<SnapshotCountdown>>,
) {
    let ar = api_resource(&ctx.spec);
    let api: Api<Watched> = match (&ctx.spec.namespace, ctx.spec.served.namespaced) {
        (Some(ns), true) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
        _ => Api::all_with(ctx.client.clone(), &ar),
    };
    let gr = ctx.spec.served.group_resource();
    // The planner names folders normalized; a path that does not normalize writes nothing.
    if let Ok(folder) = backflow_manifest::normalize_target(&ctx.path) {
        ctx.board
            .serve_folder(&ctx.branch, &folder, &ctx.spec.target);
    }
    let mut streaming = true;
    // Catch-ups asked while the first snapshot is read, answered once it is submitted.
    let mut replaying: Vec<Barrier> = Vec::new();
    loop {
        let mut config = if streaming {
            watcher::Config::default().streaming_lists()
        } else {
            watcher::Config::default()
        };
        if let Some(selector) = crate::plan::unseen_objects(&ctx.spec.served) {
            config = config.labels(selector);
        }
        ctx.board.set_stream(&ctx.spec, StreamState::Replaying);
        let mut events = watcher::watcher(api.clone(), config)
            .default_backoff()
            .boxed();
        let mut memory = Memory {
            start: Some(claim_start(&ctx).await),
            ..Memory::default()
        };
        let mut snapshot: Vec<Listed> = Vec::new();
        let mut fall_back = false;
        loop {
            let event = tokio::select! {
                e = events.next() => match e {
                    Some(e) => e,
                    None => break,
                },
                Some(done) = barriers.recv() => {
                    on_barrier(&ctx, &api, &gr, &mut memory, &mut replaying, done).await;
                    continue;
                }
            };
            match event {
                Ok(event) => {
                    on_event(&ctx, &gr, event, &mut snapshot, &mut memory, &mut countdown);
                    if memory.start.is_none() {
                        // The first snapshot is submitted: it answers the catch-ups it held.
                        for done in replaying.drain(..) {
                            let _ = done.send(());
                        }
                    }
                }
                Err(e) => {
                    if streaming && refuses_streaming_lists(&e) {
                        fall_back = true;
                        break;
                    }
                    let message = e.to_string();
                    tracing::warn!(stream = ?ctx.spec, error = %message, "watch failed; retrying with backoff");
                    ctx.board
                        .set_stream(&ctx.spec, StreamState::Blocked(message));
                }
            }
        }
        if fall_back {
            tracing::info!(stream = ?ctx.spec, "the API does not stream lists; using LIST+WATCH");
            streaming = false;
        }
        // The watcher stream never ends on its own; if it does, start over.
    }
}

/// A catch-up asked of the stream: answered once every object its scope holds now is decided.
/// While the first snapshot is still read, that snapshot (read against what the claim says)
/// answers it: a catch-up now would submit whole objects with no baseline.
async fn on_barrier(
    ctx: &StreamContext,
    api: &Api<Watched>,
    gr: &GroupResource,
    memory: &mut Memory,
    replaying: &mut Vec<Barrier>,
    done: Barrier,
) {
    if memory.start.is_some() {
        replaying.push(done);
    } else {
        catch_up(ctx, api, gr, memory).await;
        let _ = done.send(());
    }
}

/// One watcher event: a snapshot's objects gathered and handed in as a resync (its first one
/// counting down `countdown`), then each change applied as it comes.
fn on_event(
    ctx: &StreamContext,
    gr: &GroupResource,
    event: Event<Watched>,
    snapshot: &mut Vec<Listed>,
    memory: &mut Memory,
    countdown: &mut Option<Arc<SnapshotCountdown>>,
) {
    match event {
        Event::Init => {
            snapshot.clear();
            ctx.board.set_stream(&ctx.spec, StreamState::Replaying);
        }
        // Sanitized as it arrives, so the raw object (managedFields and all) is not held until
        // the whole snapshot is read.
        Event::InitApply(Watched::Decoded(obj)) => snapshot.push(Listed::new(ctx, gr, &obj)),
        Event::InitApply(Watched::Undecodable { meta, error }) => {
            let key = undecodable(ctx, gr, &meta, &error, memory);
            snapshot.push(Listed::unreadable(key, &meta));
        }
        Event::InitDone => {
            resync(ctx, gr, std::mem::take(snapshot), memory);
            ctx.board.set_stream(&ctx.spec, StreamState::Streaming);
            if let Some(countdown) = countdown.take() {
                countdown.handed_in();
            }
        }
        Event::Apply(Watched::Decoded(obj)) => apply(ctx, gr, &obj, memory),
        Event::Apply(Watched::Undecodable { meta, error }) => {
            undecodable(ctx, gr, &meta, &error, memory);
        }
        Event::Delete(obj) => delete(ctx, gr, &obj.into_gone(), memory),
    }
}

/// Whether the API refused the streaming list itself: starting the watch with
/// `sendInitialEvents` was answered 400 (Bad Request) or 422 (Invalid), as API servers without
/// the `WatchList` feature answer it. LIST+WATCH does the same job there. Decided by the status,
/// never by the message, which differs between servers and versions.
fn refuses_streaming_lists(e: &watcher::Error) -> bool {
    let status = match e {
        watcher::Error::WatchStartFailed(kube::Error::Api(status)) => status,
        watcher::Error::WatchError(status) => status,
        _ => return false,
    };
    matches!(status.code, 400 | 422)
}

/// Lists the scope now and submits whatever differs from what this stream last submitted, so a
/// change stored before the call is decided even if its watch event has not arrived yet. The event,
/// when it arrives, then finds nothing to do.
async fn catch_up(
    ctx: &StreamContext,
    api: &Api<Watched>,
    gr: &GroupResource,
    memory: &mut Memory,
) {
    let mut params = kube::api::ListParams::default();
    if let Some(selector) = crate::plan::unseen_objects(&ctx.spec.served) {
        params = params.labels(selector);
    }
    // Most catch-ups find every object at the version the stream last decided: the versions
    // alone tell. A few that differ (a write whose event is on its way) are read one by one;
    // only more than that, or a failure, has the scope read whole.
    let read = match by_versions(api, &params, gr, memory).await {
        ByVersions::Decided(present) => {
            forget_gone(ctx, memory, &present);
            "versions"
        }
        ByVersions::Undecided { present, undecided } => {
            if let Some(present) = decide_each(ctx, gr, &undecided, present, memory).await {
                forget_gone(ctx, memory, &present);
                "objects"
            } else {
                read_whole(ctx, api, &params, gr, memory).await;
                "whole"
            }
        }
        ByVersions::ReadWhole => {
            read_whole(ctx, api, &params, gr, memory).await;
            "whole"
        }
    };
    ctx.metrics
        .catch_ups
        .get_or_create(&CatchUpLabels {
            target: ctx.target_label(),
            read,
        })
        .inc();
}

/// Lists the scope whole and decides every object in it.
async fn read_whole(
    ctx: &StreamContext,
    api: &Api<Watched>,
    params: &kube::api::ListParams,
    gr: &GroupResource,
    memory: &mut Memory,
) {
    let objects = match api.list(params).await {
        Ok(list) => list.items,
        Err(e) => {
            tracing::warn!(stream = ?ctx.spec, error = %e, "catch-up list failed; the save may miss changes still in flight");
            return;
        }
    };
    let mut present = BTreeSet::new();
    for obj in &objects {
        match obj {
            Watched::Decoded(obj) => {
                present.insert(object_key(gr, obj));
                apply(ctx, gr, obj, memory);
            }
            Watched::Undecodable { meta, error } => {
                present.insert(undecodable(ctx, gr, meta, error, memory));
            }
        }
    }
    forget_gone(ctx, memory, &present);
}

/// The most objects a catch-up reads one by one; with more at versions it has not decided, it
/// reads the scope whole (one list costs less than that many reads).
const READ_ONE_BY_ONE: usize = 16;

/// What a catch-up learnt from its scope's resourceVersions.
enum ByVersions {
    /// Every object is at a version the stream decided already.
    Decided(BTreeSet<ObjectKey>),
    /// These few are not (`present`: every object listed).
    Undecided {
        present: BTreeSet<ObjectKey>,
        undecided: Vec<ObjectKey>,
    },
    /// More are not, or the list failed.
    ReadWhole,
}

/// Lists the scope's metadata alone and tells which objects are at versions the stream has
/// not decided.
async fn by_versions(
    api: &Api<Watched>,
    params: &kube::api::ListParams,
    gr: &GroupResource,
    memory: &Memory,
) -> ByVersions {
    let Ok(listed) = api.list_metadata(params).await else {
        return ByVersions::ReadWhole;
    };
    let versions = listed.items.iter().map(|item| {
        (
            meta_key(gr, &item.metadata),
            meta_resource_version(&item.metadata),
        )
    });
    memory.undecided(versions, READ_ONE_BY_ONE)
}

/// Reads each of `undecided` and decides it; what the scope holds afterwards (`present`
/// without what went meanwhile), or `None` when a read failed and the scope is to be read whole.
async fn decide_each(
    ctx: &StreamContext,
    gr: &GroupResource,
    undecided: &[ObjectKey],
    mut present: BTreeSet<ObjectKey>,
    memory: &mut Memory,
) -> Option<BTreeSet<ObjectKey>> {
    let ar = api_resource(&ctx.spec);
    for key in undecided {
        let api: Api<Watched> = if key.namespace.is_empty() {
            Api::all_with(ctx.client.clone(), &ar)
        } else {
            Api::namespaced_with(ctx.client.clone(), &key.namespace, &ar)
        };
        match api.get_opt(&key.name).await {
            Ok(Some(Watched::Decoded(obj))) => apply(ctx, gr, &obj, memory),
            Ok(Some(Watched::Undecodable { meta, error })) => {
                undecodable(ctx, gr, &meta, &error, memory);
            }
            Ok(None) => {
                present.remove(key);
            }
            Err(_) => return None,
        }
    }
    Some(present)
}

/// Submits the removal of what the stream submitted and `present` no longer holds.
fn forget_gone(ctx: &StreamContext, memory: &mut Memory, present: &BTreeSet<ObjectKey>) {
    memory.passed.retain(|k, _| present.contains(k));
    let gone: Vec<ObjectKey> = memory
        .submitted
        .keys()
        .filter(|k| !present.contains(*k))
        .cloned()
        .collect();
    for key in gone {
        memory.submitted.remove(&key);
        if ctx.prune != PruneMode::Never {
            let rx = ctx.submit(Intent::delete(ctx.path.clone(), key.clone()));
            ctx.tracker.record(key, 0, rx, &ctx.worker);
        }
    }
}

/// One object of the initial snapshot, as much of it as the resync needs.
struct Listed {
    key: ObjectKey,
    resource_version: u64,
    /// The sanitized object as JSON text, with its fingerprint; `None` when it could not be
    /// read. Text, not a parsed value: a snapshot holds every object of the type at once.
    value: Option<(Fingerprint, ObjectJson)>,
    /// Whether an applier stamped it.
    stamped: bool,
    /// The applier that owns it, read before sanitizing strips the stamps.
    owner: Option<AppliedBy>,
    /// Who its managedFields say wrote it: the object's next event is judged against it.
    writers: Writers,
}

impl Listed {
    fn new(ctx: &StreamContext, gr: &GroupResource, obj: &DynamicObject) -> Self {
        Self {
            key: object_key(gr, obj),
            resource_version: resource_version(obj),
            value: ctx
                .sanitized(obj)
                .map(|v| (fingerprint(&v), ObjectJson::new(&v))),
            stamped: stamped(obj),
            owner: owner(obj),
            writers: writes_of(obj).writers(),
        }
    }
}

impl Listed {
    /// An object the watch could not decode: kept in the sweep's scope (what Git holds for it
    /// stays), and nothing written for it.
    fn unreadable(key: ObjectKey, meta: &ObjectMeta) -> Self {
        Self {
            key,
            resource_version: meta_resource_version(meta),
            value: None,
            stamped: false,
            owner: None,
            writers: Writers::default(),
        }
    }
}

/// An object whose metadata does not decode: reported on its target (the status names it until
/// it is written again), logged once per version, counted, and skipped; what Git holds for it
/// stays, and every other object of its type goes on being mirrored. Returns its key.
fn undecodable(
    ctx: &StreamContext,
    gr: &GroupResource,
    meta: &ObjectMeta,
    error: &str,
    memory: &mut Memory,
) -> ObjectKey {
    let key = meta_key(gr, meta);
    let rv = meta_resource_version(meta);
    ctx.count("undecodable");
    if memory.undecodable.insert(key.clone(), rv) != Some(rv) {
        tracing::warn!(target = %ctx.target_label(), object = %key, resource_version = rv, error, "the object cannot be read; skipped, the rest of its type is mirrored");
    }
    let reason =
        format!("{key} cannot be read ({error}); it is not mirrored until it is written again");
    ctx.board.refused(
        &ctx.spec.target,
        WriteScope::Unreadable(key.clone()),
        reason.clone(),
    );
    ctx.tracker.record(
        key.clone(),
        rv,
        resolved(Outcome::Refused(reason)),
        &ctx.worker,
    );
    key
}

/// A list as Git keeps it (see [`as_git_keeps`]).
#[derive(Default)]
struct ListedAsKept {
    /// The objects to publish (one listed as the edit Git keeps is read against the claim's
    /// commits like any other: an edit a commit since holds was published, and what Git
    /// gained after it stands).
    objects: Vec<Listed>,
    /// Objects listed live whose edit was a delete: their documents go.
    deleted: Vec<ObjectKey>,
}

/// The listed `objects` of type `gr` (in `namespace`, or all) as Git keeps them where an
/// applier's write was withheld (`kept`, see [`backflow_board::Withheld`]) and nothing wrote
/// the object since: such an object is listed as the edit Git keeps, an edit the applier
/// pruned is listed although the list lacks it, and withheld objects whose edit was a delete
/// come back apart.
fn as_git_keeps(
    objects: Vec<Listed>,
    mut kept: Kept,
    gr: &GroupResource,
    namespace: Option<&str>,
) -> ListedAsKept {
    kept.retain(|key, _| key.resource == *gr && namespace.is_none_or(|ns| key.namespace == ns));
    let versions = objects.iter().map(|l| (&l.key, l.resource_version));
    let read = backflow_decision::as_git_keeps(versions, kept);
    let mut out = ListedAsKept::default();
    for (mut listed, reads) in objects.into_iter().zip(read.listed) {
        match reads {
            AsKept::Listed => out.objects.push(listed),
            AsKept::Deleted => out.deleted.push(listed.key),
            AsKept::Edit(edit) => {
                listed.value = Some((fingerprint(&edit.value()), ObjectJson::clone(&edit)));
                out.objects.push(listed);
            }
        }
    }
    for (key, edit) in read.unlisted {
        out.objects.push(Listed {
            key,
            resource_version: 0,
            value: Some((fingerprint(&edit.value()), ObjectJson::clone(&edit))),
            stamped: true,
            owner: None,
            writers: Writers::default(),
        });
    }
    out
}

fn resync(ctx: &StreamContext, gr: &GroupResource, objects: Vec<Listed>, memory: &mut Memory) {
    let previous = std::mem::take(&mut memory.submitted);
    // What was passed over is decided again from the listing.
    memory.passed.clear();
    let seen = previous.into_iter().map(|(k, s)| (k, s.value)).collect();
    let baseline = SnapshotBaseline::of(ctx.keeps_values(), seen, memory.start.take());
    let kept = ctx.board.withheld.of(&ctx.spec.target);
    let ListedAsKept { objects, deleted } =
        as_git_keeps(objects, kept, gr, ctx.spec.namespace.as_deref());
    let count = objects.len();
    let mut intents = Vec::with_capacity(count + deleted.len());
    let mut keep = BTreeSet::new();
    for key in deleted {
        // Kept in the sweep's scope: the delete removes its document, whatever the sweep may.
        keep.insert((key.namespace.clone(), key.name.clone()));
        intents.push(Intent::delete(ctx.path.clone(), key));
    }
    let mut seen: Vec<(ObjectKey, u64)> = Vec::with_capacity(count);
    for listed in objects {
        let Listed {
            key,
            resource_version: rv,
            value,
            stamped,
            owner,
            writers,
        } = listed;
        // Kept in the sweep's scope either way: another applier's document is not removed.
        keep.insert((key.namespace.clone(), key.name.clone()));
        if ctx.owned_elsewhere(&key, owner.as_ref(), &mut memory.excluded) {
            continue;
        }
        if !stamped && value.is_some() {
            // A resync that writes an object no applier stamped: the folder's applier adopts it.
            ctx.board.unstamped_object(&ctx.spec.target);
        }
        if let Some((print, object)) = value {
            // An object that could not be read has its refusal recorded already.
            seen.push((key.clone(), rv));
            // The listed object is the state its next event follows: an apply over a create
            // made in the same second is still known as the applier's.
            let object = Arc::new(object);
            let seen = Seen {
                print,
                rv,
                writers,
                value: ctx.keeps_values().then(|| object.clone()),
            };
            memory.submitted.insert(key.clone(), seen);
            let intent = Intent::put_json(ctx.path.clone(), key.clone(), object);
            intents.push(baseline.of_object(intent));
        }
    }
    if ctx.policy.applier.is_some() {
        // A coordinated folder exists before it is applied, even with nothing in it.
        intents.push(Intent::bootstrap(ctx.path.clone()));
    }
    intents.extend(sweep(ctx, gr, keep, &baseline));
    tracing::debug!(target = %ctx.target_label(), resource = %ctx.spec.served.plural, namespace = ?ctx.spec.namespace, objects = count, "initial snapshot read; publishing it as a resync");
    let scope = WriteScope::Resync(gr.clone(), ctx.spec.namespace.clone());
    let rx = ctx.follow(
        ctx.worker.submit_resync(ctx.path.clone(), intents),
        scope,
        None,
    );
    // Counted once in flight, so a counted resync that is no longer in flight is published.
    ctx.metrics
        .resyncs
        .get_or_create(&TargetLabels {
            target: ctx.target_label(),
        })
        .inc();
    for (key, rv) in seen {
        ctx.tracker.record(key, rv, rx.clone(), &ctx.worker);
    }
}

/// Under `prune.mode: Always`, the list's sweep of its scope: every document not in `keep`
/// that `baseline` lets it remove.
fn sweep(
    ctx: &StreamContext,
    gr: &GroupResource,
    keep: BTreeSet<(String, String)>,
    baseline: &SnapshotBaseline,
) -> Option<Intent> {
    if ctx.prune != PruneMode::Always {
        return None;
    }
    let scope = SweepScope {
        resource: gr.clone(),
        namespace: ctx.spec.namespace.clone(),
        keep,
        removable: None,
    };
    ctx.metrics
        .sweeps
        .get_or_create(&TargetLabels {
            target: ctx.target_label(),
        })
        .inc();
    Some(baseline.of_sweep(Intent::sweep(ctx.path.clone(), scope)))
}

fn apply(ctx: &StreamContext, gr: &GroupResource, obj: &DynamicObject, memory: &mut Memory) {
    let key = object_key(gr, obj);
    let rv = resource_version(obj);
    let by = ctx.changed_by(&key, rv, Some(obj));
    if not_taken(ctx, &key, obj, by.as_ref(), memory) {
        memory.passed.insert(key.clone(), rv);
        ctx.tracker.record_unchanged(key, rv);
        return;
    }
    memory.passed.remove(&key);
    let Some(value) = ctx.sanitized(obj) else {
        return;
    };
    let print = fingerprint(&value);
    let writes = writes_of(obj);
    let writers = writes.writers();
    let last = &mut memory.submitted;
    if already_submitted(last, &key, rv, &print, writers) {
        ctx.count("unchanged");
        ctx.tracker.record_unchanged(key, rv);
        return;
    }
    let previous = last.get(&key).map(|s| s.writers);
    let before = last.get(&key).and_then(|s| s.value.clone());
    let verdict = judge_in_window(ctx, memory, &key, &writes, previous);
    let json = Arc::new(ObjectJson::new(&value));
    let seen = Seen {
        print,
        rv,
        writers,
        value: ctx.keeps_values().then(|| json.clone()),
    };
    match verdict {
        Verdict::Edit | Verdict::Late => ctx.board.withheld.release(&ctx.spec.target, &key),
        Verdict::Landing => {
            // Git holds what was applied (or a newer tip that will be applied).
            ctx.board.withheld.release(&ctx.spec.target, &key);
            memory.submitted.insert(key.clone(), seen);
            ctx.tracker.record_unchanged(key, rv);
            return;
        }
        Verdict::Collision | Verdict::OverCollided => {
            // Git keeps the edit, and so does what this stream remembers Git holds (and the
            // board, for a stream that lists again); the next event is judged against this
            // one's writers.
            let kept = memory.submitted.get(&key).and_then(|s| s.value.clone());
            let write = WithheldWrite { version: rv, kept };
            ctx.board
                .withheld
                .withhold(&ctx.spec.target, key.clone(), write);
            if let Some(seen) = memory.submitted.get_mut(&key) {
                seen.rv = rv;
                seen.writers = writers;
            }
            ctx.tracker.record_unchanged(key, rv);
            return;
        }
    }
    if !memory.submitted.contains_key(&key) && !stamped(obj) {
        // A live create (or a delete and re-create): an applier of the folder adopts it.
        ctx.board.unstamped_object(&ctx.spec.target);
    }
    memory.submitted.insert(key.clone(), seen);
    let intent =
        Intent::put_json(ctx.path.clone(), key.clone(), json).attributed(ctx.attribution(by));
    let mirrored = verdict
        .mirrored_as(&writes, previous)
        .unwrap_or(Mirrored::Edit);
    let intent = mirrored.intent(intent, before);
    let rx = ctx.submit(intent);
    // Read after the submit: a window opening from now on flushes the edit.
    memory.window_edits.submitted(&key, &ctx.windows());
    ctx.tracker.record(key, rv, rx, &ctx.worker);
}

/// Whether the folder does not take this write of `obj`: another applier owns it, or
/// `spec.exclude` names who wrote it (Git keeps what it had until someone else writes).
fn not_taken(
    ctx: &StreamContext,
    key: &ObjectKey,
    obj: &DynamicObject,
    by: Option<&ChangedBy>,
    memory: &mut Memory,
) -> bool {
    if ctx.owned_elsewhere(key, owner(obj).as_ref(), &mut memory.excluded) {
        return true;
    }
    let excluded = &ctx.policy.excluded_managers;
    let excluded =
        ctx.excludes(by) || (!excluded.is_empty() && writes_of(obj).newest_only_by(excluded));
    if excluded {
        ctx.count("excluded");
    }
    excluded
}

/// Whether version `rv` of `key` (fingerprint `print`) is nothing new: older than what the
/// stream read, or the value it last submitted, whose version and writers it then takes.
fn already_submitted(
    last: &mut Submitted,
    key: &ObjectKey,
    rv: u64,
    print: &Fingerprint,
    writers: Writers,
) -> bool {
    let stale = last.get(key).is_some_and(|s| rv != 0 && rv <= s.rv);
    if !stale
        && let Some(seen) = last.get_mut(key)
        && seen.print == *print
    {
        seen.rv = rv;
        seen.writers = writers;
    }
    stale
        || last
            .get(key)
            .is_some_and(|s| s.print == *print && s.rv == rv)
}

/// What the folder's claim says when a stream starts. `since`: the newest commit the live side
/// of the folder is known to have held in full: the claim's
/// `status.inStepCommit` (the commit of its last operation that succeeded; an operation cut
/// short or failed after it applied part of its commit at most), else `lastAppliedCommit`.
/// Commits backflow pushed after it hold what the live side held when it published them, so
/// they read as live changes of it. `None` when no claim coordinates the folder, none applied
/// yet, or its status cannot be read (logged; the first snapshot is then published whole).
async fn claim_start(ctx: &StreamContext) -> ClaimStart {
    let Some(claim) = ctx.policy.claim.as_ref() else {
        return ClaimStart::default();
    };
    let api: Api<DynamicObject> = Api::namespaced_with(
        ctx.client.clone(),
        &claim.namespace,
        &claim_resource(&claim.kind),
    );
    match api.get_opt(&claim.name).await {
        Ok(Some(found)) => {
            let status: ClaimStatus =
                serde_json::from_value(found.data["status"].clone()).unwrap_or_default();
            if claim.kind != "NativeClaim" && operation_in_flight(&status) {
                // A held applier goes on with it, and may write before this list is read.
                ctx.board
                    .windows
                    .open_restored(std::slice::from_ref(&ctx.spec.target), ctx.clock.now());
            }
            let since = status
                .in_step_commit
                .or(status.last_applied_commit)
                .and_then(|c| c.parse().ok());
            let first_contact = (status.operation.is_none() && since.is_none()).then(|| {
                let rule: FirstContact =
                    serde_json::from_value(found.data["spec"]["firstContact"].clone())
                        .unwrap_or_default();
                match rule {
                    FirstContact::LiveWins => FirstContactRule::LiveWins,
                    FirstContact::GitWins => FirstContactRule::GitWins,
                }
            });
            let applying = (status.operation.as_ref())
                .and_then(|op| op.commit.parse().ok())
                .filter(|commit| Some(*commit) != since);
            ClaimStart {
                since,
                applying,
                first_contact,
            }
        }
        Ok(None) => ClaimStart::default(),
        Err(e) => {
            tracing::warn!(target = %ctx.target_label(), claim = %claim.name, error = %e, "cannot read the claim's last applied commit; the live side's snapshot is published whole");
            ClaimStart::default()
        }
    }
}

/// Whether the claim's status records an operation that had not ended.
fn operation_in_flight(status: &ClaimStatus) -> bool {
    status
        .operation
        .as_ref()
        .and_then(|op| OperationPhase::parse(&op.phase))
        .is_some_and(OperationPhase::in_flight)
}

/// Judges a write against the apply window, counting what the verdict means: the apply landing
/// and the applier's write over a newer live edit are kept out of Git, and the latter asks for a
/// Repair.
fn judge_in_window(
    ctx: &StreamContext,
    memory: &mut Memory,
    key: &ObjectKey,
    writes: &Writes,
    previous: Option<Writers>,
) -> Verdict {
    let windows = ctx.windows();
    let verdict = memory.window_edits.judge(key, writes, previous, &windows);
    tracing::trace!(target = %ctx.target_label(), object = %key, ?writes, ?previous, ?windows, "what the window judgement read");
    count_verdict(ctx, key, verdict)
}

/// Counts what a window verdict means, and asks for the Repair of a collision.
fn count_verdict(ctx: &StreamContext, key: &ObjectKey, verdict: Verdict) -> Verdict {
    tracing::debug!(target = %ctx.target_label(), object = %key, ?verdict, "judged against the apply windows");
    match verdict {
        Verdict::Edit | Verdict::OverCollided => {}
        Verdict::Late => ctx.echo("late"),
        Verdict::Landing => ctx.echo("not_mirrored"),
        Verdict::Collision => {
            tracing::info!(target = %ctx.target_label(), object = %key, "the apply wrote over a newer live edit: kept out of Git, asking for a Repair");
            ctx.metrics
                .apply_collisions
                .get_or_create(&TargetLabels {
                    target: ctx.target_label(),
                })
                .inc();
            ctx.board.collision(&ctx.spec.target);
            ctx.board.record(backflow_board::Note {
                regarding: ctx.regarding(key),
                kind: backflow_board::EventType::Warning,
                reason: "ApplierOverwroteEdit".into(),
                action: "Mirror".into(),
                message: "the applier wrote over a live edit made during its apply: Git keeps the edit, and a Repair applies it back".into(),
            });
        }
    }
    verdict
}

/// Whether an applier stamped the object (it is then in some claim's inventory).
fn stamped(obj: &DynamicObject) -> bool {
    obj.labels().contains_key(APPLIER_LABEL)
}

/// The applier that owns the object, read from its stamps.
fn owner(obj: &DynamicObject) -> Option<AppliedBy> {
    AppliedBy::of(
        obj.metadata.labels.as_ref(),
        obj.metadata.annotations.as_ref(),
    )
}

fn delete(ctx: &StreamContext, gr: &GroupResource, obj: &DynamicObject, memory: &mut Memory) {
    let key = object_key(gr, obj);
    let rv = resource_version(obj);
    memory.passed.remove(&key);
    let kept = memory.submitted.remove(&key).and_then(|s| s.value);
    if ctx.owned_elsewhere(&key, owner(obj).as_ref(), &mut memory.excluded) {
        memory.excluded.remove(&key);
        ctx.tracker.record_unchanged(key, rv);
        return;
    }
    if ctx.prune == PruneMode::Never {
        ctx.count("kept");
        ctx.tracker.record_unchanged(key, rv);
        return;
    }
    let by = ctx.changed_by(&key, rv, None);
    if ctx.excludes(by.as_ref()) {
        ctx.count("excluded");
        ctx.tracker.record_unchanged(key, rv);
        return;
    }
    let windows = ctx.windows();
    let pruned = Pruned {
        key: key.clone(),
        uid: obj.uid().unwrap_or_default(),
    };
    let pruned_in = ctx.board.windows.take_prune(&ctx.spec.target, &pruned);
    let verdict = memory.window_edits.judge_delete(&key, &windows, pruned_in);
    match verdict {
        Verdict::Collision | Verdict::OverCollided => {
            let write = WithheldWrite { version: rv, kept };
            ctx.board
                .withheld
                .withhold(&ctx.spec.target, key.clone(), write);
        }
        Verdict::Edit | Verdict::Late | Verdict::Landing => {
            ctx.board.withheld.release(&ctx.spec.target, &key);
        }
    }
    if count_verdict(ctx, &key, verdict) != Verdict::Edit {
        // The applier's prune: Git does not hold the object at the applied commit (a landing),
        // or holds a live edit it deleted (a collision, repaired).
        ctx.tracker.record_unchanged(key, rv);
        return;
    }
    let intent = Intent::delete(ctx.path.clone(), key.clone()).attributed(ctx.attribution(by));
    let rx = ctx.submit(intent);
    memory.window_edits.submitted(&key, &ctx.windows());
    ctx.tracker.record(key, rv, rx, &ctx.worker);
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    /// A catch-up trusts only versions the stream decided: an object changed since it was
    /// submitted, passed over at another version or never seen is read (one by one while they
    /// are few, the scope whole past that).
    #[test]
    fn a_catch_up_trusts_only_versions_the_stream_decided() {
        let key = |name: &str| ObjectKey::new(GroupResource::new("", "configmaps"), "d", name);
        let mut memory = Memory::default();
        memory.submitted.insert(
            key("mirrored"),
            Seen {
                print: Fingerprint::new(),
                rv: 7,
                writers: Writers::default(),
                value: None,
            },
        );
        memory.passed.insert(key("excluded"), 5);
        memory.undecodable.insert(key("broken"), 3);
        let scope = vec![
            (key("mirrored"), 7),
            (key("excluded"), 5),
            (key("broken"), 3),
        ];
        let keys = |names: &[&str]| names.iter().map(|n| key(n)).collect::<BTreeSet<_>>();
        assert!(matches!(
            memory.undecided(scope.clone(), 2),
            ByVersions::Decided(present) if present == keys(&["mirrored", "excluded", "broken"])
        ));
        // An older version than the one submitted was decided too (it is stale).
        assert!(memory.decided(&key("mirrored"), 6));
        for undecided in [
            (key("mirrored"), 8),
            (key("excluded"), 6),
            (key("broken"), 4),
            (key("new"), 1),
            (key("mirrored"), 0),
        ] {
            let mut changed = scope.clone();
            changed.push(undecided.clone());
            let found = memory.undecided(changed, 2);
            let ByVersions::Undecided {
                present,
                undecided: read,
            } = found
            else {
                panic!("{undecided:?} is read");
            };
            assert_eq!(read, vec![undecided.0.clone()]);
            assert!(present.contains(&undecided.0));
        }
        let mut many = scope.clone();
        many.extend([(key("a"), 1), (key("b"), 1), (key("c"), 1)]);
        assert!(matches!(memory.undecided(many, 2), ByVersions::ReadWhole));
        assert!(matches!(
            memory.undecided([], 2),
            ByVersions::Decided(present) if present.is_empty()
        ));
    }

    #[test]
    fn the_fingerprint_ignores_key_order_and_nothing_else() {
        let a = serde_json::json!({"metadata": {"name": "x", "namespace": "y"}, "data": {"k": [1, "v"]}});
        let b = serde_json::json!({"data": {"k": [1, "v"]}, "metadata": {"namespace": "y", "name": "x"}});
        assert_eq!(fingerprint(&a), fingerprint(&b));
        let c = serde_json::json!({"data": {"k": ["v", 1]}, "metadata": {"namespace": "y", "name": "x"}});
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }

    fn status(code: u16, message: &str) -> Box<Status> {
        Box::new(Status::failure(message, "Invalid").with_code(code))
    }

    #[test]
    fn the_streaming_list_fallback_follows_the_status_not_the_message() {
        let refused = watcher::Error::WatchStartFailed(kube::Error::Api(status(
            422,
            "ListOptions.meta.k8s.io is invalid: the WatchList feature is disabled",
        )));
        assert!(
            refuses_streaming_lists(&refused),
            "no mention of sendInitialEvents needed"
        );
        let bad_request = watcher::Error::WatchError(status(400, "bad request"));
        assert!(refuses_streaming_lists(&bad_request));
        for code in [403, 404, 410, 500] {
            let other = watcher::Error::WatchStartFailed(kube::Error::Api(status(
                code,
                "sendInitialEvents is mentioned but the status says otherwise",
            )));
            assert!(!refuses_streaming_lists(&other), "{code}");
        }
        assert!(!refuses_streaming_lists(&watcher::Error::NoResourceVersion));
    }

    fn cm_key(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "configmaps"), "web", name)
    }

    fn listed(name: &str, v: &str, namespace: &str) -> Listed {
        let value = serde_json::json!({"v": v});
        let key = ObjectKey::new(GroupResource::new("", "configmaps"), namespace, name);
        Listed {
            key,
            resource_version: 7,
            value: Some((fingerprint(&value), ObjectJson::new(&value))),
            stamped: true,
            owner: None,
            writers: Writers::default(),
        }
    }

    fn values(objects: &[Listed]) -> Vec<(String, String)> {
        objects
            .iter()
            .map(|l| {
                let v = l.value.as_ref().map(|(_, o)| o.value()["v"].clone());
                (l.key.name.clone(), v.unwrap_or_default().to_string())
            })
            .collect()
    }

    #[test]
    fn a_list_reads_a_withheld_applier_write_as_the_edit_git_keeps() {
        let edit = |v: &str| Some(Arc::new(ObjectJson::new(&serde_json::json!({"v": v}))));
        let secrets = ObjectKey::new(GroupResource::new("", "secrets"), "web", "s");
        let at = |version, kept| WithheldWrite { version, kept };
        let kept = Kept::from([
            (cm_key("a"), at(7, edit("person"))),
            (cm_key("b"), at(7, None)),
            (cm_key("c"), at(5, edit("pruned edit"))),
            (cm_key("gone"), at(5, None)),
            (cm_key("later"), at(5, edit("older than what is listed"))),
            (secrets, at(7, edit("another type"))),
            (
                ObjectKey::new(GroupResource::new("", "configmaps"), "other", "d"),
                at(7, edit("another namespace")),
            ),
        ]);
        let objects = vec![
            listed("a", "applier", "web"),
            listed("b", "applier re-created", "web"),
            listed("x", "untouched", "web"),
            listed("later", "written since", "web"),
        ];
        let configmaps = GroupResource::new("", "configmaps");
        let as_kept = as_git_keeps(objects, kept.clone(), &configmaps, Some("web"));
        let (objects, deleted) = (as_kept.objects, as_kept.deleted);
        assert_eq!(
            values(&objects),
            [
                ("a".into(), "\"person\"".into()),
                ("x".into(), "\"untouched\"".into()),
                ("later".into(), "\"written since\"".into()),
                ("c".into(), "\"pruned edit\"".into()),
            ]
        );
        assert_eq!(deleted, [cm_key("b")]);
        // Nothing withheld: the list as it was.
        let unchanged = as_git_keeps(
            vec![listed("a", "applier", "web")],
            Kept::new(),
            &configmaps,
            None,
        );
        assert_eq!(
            values(&unchanged.objects),
            [("a".into(), "\"applier\"".into())]
        );
        assert!(unchanged.deleted.is_empty());
    }
}
