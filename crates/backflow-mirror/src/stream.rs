//! One watch stream: a type in a namespace scope, for one `GitTarget`.
//!
//! It reads the initial snapshot (streaming list with the end bookmark, or LIST+WATCH where the
//! API does not stream lists), publishes it as one resync (upsert all, sweep by prune mode), then
//! turns every live change into an intent for the branch worker. A 410 or a dropped watch starts a
//! fresh snapshot, handled the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use backflow_api::config::PruneMode;
use backflow_api::{Clock, GroupResource, ObjectKey};
use backflow_git::{Intent, Pushed, SweepScope, WorkerHandle, WriteError};
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};

use crate::board::{Board, StreamState};
use crate::metrics::{EventLabels, MirrorMetrics, TargetLabels};
use crate::plan::StreamSpec;
use crate::tracker::{Outcome, PublicationRx, Tracker};

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
    /// The branch worker of the target's branch.
    pub worker: WorkerHandle,
    /// The target's branch (repository URL, branch), for its `GitBranch` status.
    pub branch: crate::board::BranchKey,
    /// Publication tracking for `X-Backflow-Wait`.
    pub tracker: Arc<Tracker>,
    /// Status board.
    pub board: Arc<Board>,
    /// Metrics.
    pub metrics: MirrorMetrics,
    /// Time, for status stamps.
    pub clock: Arc<dyn Clock>,
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

fn resource_version(obj: &DynamicObject) -> u64 {
    obj.resource_version()
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

    /// Follows a submitted write to its end: records the commit for status and waiters.
    fn follow(&self, pushed: Pushed) -> PublicationRx {
        let (tx, rx) = watch::channel(None);
        let board = self.board.clone();
        let target = self.spec.target.clone();
        let clock = self.clock.clone();
        let metrics = self.metrics.clone();
        let label = self.target_label();
        let branch = self.branch.clone();
        metrics.in_flight.inc();
        board.branch_submitted(&branch);
        tokio::spawn(async move {
            let outcome = match pushed.await {
                Ok(Some(oid)) => {
                    let sha = oid.to_string();
                    let at = humantime::format_rfc3339_seconds(clock.now()).to_string();
                    board.pushed(&target, sha.clone(), at.clone());
                    board.branch_settled(&branch, Some((sha.clone(), at)));
                    Outcome::Pushed(sha)
                }
                Ok(None) => Outcome::NotPushed(
                    "the branch does not exist yet and the write changed nothing".to_string(),
                ),
                Err(WriteError::Refused(e)) => {
                    metrics
                        .refusals
                        .get_or_create(&TargetLabels { target: label })
                        .inc();
                    tracing::warn!(target = %format!("{}/{}", target.0, target.1), reason = %e, "write refused");
                    board.refused(&target, e.to_string());
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

    fn sanitized(&self, obj: &DynamicObject) -> Option<Value> {
        let value = serde_json::to_value(obj).ok()?;
        Some(backflow_manifest::sanitize(&value))
    }
}

/// Per object, a fingerprint of the sanitized value last submitted and the resourceVersion it
/// came from: an unchanged value commits nothing, and an event older than what a catch-up already
/// read is stale. A fingerprint rather than the value, so the mirror does not hold a second copy
/// of every object.
type Submitted = BTreeMap<ObjectKey, (Fingerprint, u64)>;

/// The Git blob id (SHA-1) of a value's JSON: equal values give equal fingerprints; a differing
/// pair colliding is as unlikely as a Git object collision.
type Fingerprint = String;

fn fingerprint(value: &Value) -> Fingerprint {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    // Hashing in memory does not fail; an empty fingerprint only makes the next event look changed.
    backflow_git::blob_id(&bytes)
}

/// A request to catch up: every change stored before it is submitted when it is answered.
pub type Barrier = oneshot::Sender<()>;

/// Runs the stream until the task is aborted. Each [`Barrier`] received is answered once every
/// object the API holds now has been submitted (see [`catch_up`]).
pub async fn run(ctx: StreamContext, mut barriers: mpsc::Receiver<Barrier>) {
    let ar = api_resource(&ctx.spec);
    let api: Api<DynamicObject> = match (&ctx.spec.namespace, ctx.spec.served.namespaced) {
        (Some(ns), true) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
        _ => Api::all_with(ctx.client.clone(), &ar),
    };
    let gr = ctx.spec.served.group_resource();
    let mut streaming = true;
    loop {
        let config = if streaming {
            watcher::Config::default().streaming_lists()
        } else {
            watcher::Config::default()
        };
        ctx.board.set_stream(&ctx.spec, StreamState::Replaying);
        let mut events = watcher::watcher(api.clone(), config)
            .default_backoff()
            .boxed();
        let mut last = Submitted::new();
        let mut snapshot: Vec<Listed> = Vec::new();
        let mut fall_back = false;
        loop {
            let event = tokio::select! {
                e = events.next() => match e {
                    Some(e) => e,
                    None => break,
                },
                Some(done) = barriers.recv() => {
                    catch_up(&ctx, &api, &gr, &mut last).await;
                    let _ = done.send(());
                    continue;
                }
            };
            match event {
                Ok(Event::Init) => {
                    snapshot.clear();
                    ctx.board.set_stream(&ctx.spec, StreamState::Replaying);
                }
                // Sanitized as it arrives, so the raw object (managedFields and all) is not
                // held until the whole snapshot is read.
                Ok(Event::InitApply(obj)) => snapshot.push(Listed::new(&ctx, &gr, &obj)),
                Ok(Event::InitDone) => {
                    resync(&ctx, &gr, std::mem::take(&mut snapshot), &mut last);
                    ctx.board.set_stream(&ctx.spec, StreamState::Streaming);
                }
                Ok(Event::Apply(obj)) => apply(&ctx, &gr, &obj, &mut last),
                Ok(Event::Delete(obj)) => delete(&ctx, &gr, &obj, &mut last),
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
    api: &Api<DynamicObject>,
    gr: &GroupResource,
    last: &mut Submitted,
) {
    let objects = match api.list(&kube::api::ListParams::default()).await {
        Ok(list) => list.items,
        Err(e) => {
            tracing::warn!(stream = ?ctx.spec, error = %e, "catch-up list failed; the save may miss changes still in flight");
            return;
        }
    };
    let mut present = BTreeSet::new();
    for obj in &objects {
        present.insert(object_key(gr, obj));
        apply(ctx, gr, obj, last);
    }
    let gone: Vec<ObjectKey> = last
        .keys()
        .filter(|k| !present.contains(*k))
        .cloned()
        .collect();
    for key in gone {
        last.remove(&key);
        if ctx.prune != PruneMode::Never {
            ctx.count("submitted");
            let rx = ctx.follow(
                ctx.worker
                    .submit(Intent::delete(ctx.path.clone(), key.clone())),
            );
            ctx.tracker.record(key, 0, rx);
        }
    }
}

/// One object of the initial snapshot, as much of it as the resync needs.
struct Listed {
    key: ObjectKey,
    resource_version: u64,
    /// The sanitized object; `None` when it could not be read as JSON.
    value: Option<Value>,
    /// Whether an applier stamped it.
    stamped: bool,
}

impl Listed {
    fn new(ctx: &StreamContext, gr: &GroupResource, obj: &DynamicObject) -> Self {
        Self {
            key: object_key(gr, obj),
            resource_version: resource_version(obj),
            value: ctx.sanitized(obj),
            stamped: stamped(obj),
        }
    }
}

fn resync(ctx: &StreamContext, gr: &GroupResource, objects: Vec<Listed>, last: &mut Submitted) {
    last.clear();
    let count = objects.len();
    let mut intents = Vec::with_capacity(count);
    let mut keep = BTreeSet::new();
    let mut seen: Vec<(ObjectKey, u64)> = Vec::with_capacity(count);
    for listed in objects {
        let Listed {
            key,
            resource_version: rv,
            value,
            stamped,
        } = listed;
        if !stamped && value.is_some() {
            // A resync that writes an object no applier stamped: the folder's applier adopts it.
            ctx.board.unstamped_object(&ctx.spec.target);
        }
        keep.insert((key.namespace.clone(), key.name.clone()));
        seen.push((key.clone(), rv));
        if let Some(v) = value {
            last.insert(key.clone(), (fingerprint(&v), rv));
            intents.push(Intent::put(ctx.path.clone(), key, v));
        }
    }
    if ctx.prune == PruneMode::Always {
        let scope = SweepScope {
            resource: gr.clone(),
            namespace: ctx.spec.namespace.clone(),
            keep,
        };
        intents.push(Intent::sweep(ctx.path.clone(), scope));
        ctx.metrics
            .sweeps
            .get_or_create(&TargetLabels {
                target: ctx.target_label(),
            })
            .inc();
    }
    tracing::debug!(target = %ctx.target_label(), resource = %ctx.spec.served.plural, namespace = ?ctx.spec.namespace, objects = count, "initial snapshot read; publishing it as a resync");
    let rx = ctx.follow(ctx.worker.submit_resync(ctx.path.clone(), intents));
    // Counted once in flight, so a counted resync that is no longer in flight is published.
    ctx.metrics
        .resyncs
        .get_or_create(&TargetLabels {
            target: ctx.target_label(),
        })
        .inc();
    for (key, rv) in seen {
        ctx.tracker.record(key, rv, rx.clone());
    }
}

fn apply(ctx: &StreamContext, gr: &GroupResource, obj: &DynamicObject, last: &mut Submitted) {
    let key = object_key(gr, obj);
    let rv = resource_version(obj);
    let Some(value) = ctx.sanitized(obj) else {
        return;
    };
    let print = fingerprint(&value);
    let stale = last
        .get(&key)
        .is_some_and(|(_, seen)| rv != 0 && rv <= *seen);
    if !stale
        && let Some((v, seen)) = last.get_mut(&key)
        && *v == print
    {
        *seen = rv;
    }
    if stale
        || last
            .get(&key)
            .is_some_and(|(v, seen)| *v == print && *seen == rv)
    {
        ctx.count("unchanged");
        ctx.tracker.record_unchanged(key, rv);
        return;
    }
    match applier_write(
        obj,
        ctx.board.windows.since(&ctx.spec.target, ctx.clock.now()),
    ) {
        Some(Echo::Landing) => {
            // The apply landing: Git holds what it applied (or a newer tip that will be applied).
            ctx.echo("not_mirrored");
            last.insert(key.clone(), (print, rv));
            ctx.tracker.record_unchanged(key, rv);
            return;
        }
        Some(Echo::Late) => ctx.echo("late"),
        None => {}
    }
    if !last.contains_key(&key) && !stamped(obj) {
        // A live create (or a delete and re-create): an applier of the folder adopts it.
        ctx.board.unstamped_object(&ctx.spec.target);
    }
    last.insert(key.clone(), (print, rv));
    ctx.count("submitted");
    let rx = ctx.follow(
        ctx.worker
            .submit(Intent::put(ctx.path.clone(), key.clone(), value)),
    );
    ctx.tracker.record(key, rv, rx);
}

/// The field manager of backflow's native applier.
const APPLIER_MANAGER: &str = "backflow-applier";

/// A write whose newest field managers are the applier's alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Echo {
    /// Inside an open apply window, made since it opened, to an object nobody else wrote in it.
    Landing,
    /// With no window open: mirrored like any edit.
    Late,
}

/// Whether `obj`'s newest managedFields entries are the applier's alone, and whether that is an
/// apply landing inside the window opened at `window` (second precision: an entry in the
/// window's second counts as inside it).
fn applier_write(obj: &DynamicObject, window: Option<std::time::SystemTime>) -> Option<Echo> {
    let entries = obj.metadata.managed_fields.as_deref().unwrap_or_default();
    let times: Vec<(bool, i64)> = entries
        .iter()
        .filter(|e| e.subresource.as_deref() != Some("status"))
        .filter_map(|e| {
            let time = e.time.as_ref()?.0.as_second();
            Some((e.manager.as_deref() == Some(APPLIER_MANAGER), time))
        })
        .collect();
    let newest = times.iter().map(|(_, t)| *t).max()?;
    if !times
        .iter()
        .filter(|(_, t)| *t == newest)
        .all(|(ours, _)| *ours)
    {
        return None;
    }
    let Some(since) = window else {
        return Some(Echo::Late);
    };
    let since = since
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    let others_in_window = times.iter().any(|(ours, t)| !ours && *t >= since);
    (newest >= since && !others_in_window).then_some(Echo::Landing)
}

/// The label backflow's applier stamps on what it applied.
pub const APPLIER_LABEL: &str = "backflow.dev/applier";

/// Whether an applier stamped the object (it is then in some claim's inventory).
fn stamped(obj: &DynamicObject) -> bool {
    obj.labels().contains_key(APPLIER_LABEL)
}

fn delete(ctx: &StreamContext, gr: &GroupResource, obj: &DynamicObject, last: &mut Submitted) {
    let key = object_key(gr, obj);
    let rv = resource_version(obj);
    last.remove(&key);
    if ctx.prune == PruneMode::Never {
        ctx.count("kept");
        ctx.tracker.record_unchanged(key, rv);
        return;
    }
    ctx.count("submitted");
    let rx = ctx.follow(
        ctx.worker
            .submit(Intent::delete(ctx.path.clone(), key.clone())),
    );
    ctx.tracker.record(key, rv, rx);
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

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
}

#[cfg(test)]
mod echo_tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn object(entries: &[(&str, u64)]) -> DynamicObject {
        let fields: Vec<serde_json::Value> = entries
            .iter()
            .map(|(manager, secs)| {
                let time = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(*secs));
                serde_json::json!({"manager": manager, "operation": "Update", "time": time.to_string()})
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "managedFields": fields},
        }))
        .unwrap()
    }

    #[test]
    fn an_apply_landing_is_the_applier_alone_newest_inside_its_window() {
        let window = Some(UNIX_EPOCH + Duration::from_secs(100));
        let landing = object(&[("kubectl-edit", 50), ("backflow-applier", 101)]);
        assert_eq!(applier_write(&landing, window), Some(Echo::Landing));
        assert_eq!(
            applier_write(&landing, None),
            Some(Echo::Late),
            "no window: an edit"
        );
        let edited_in_window = object(&[("kubectl-edit", 100), ("backflow-applier", 101)]);
        assert_eq!(
            applier_write(&edited_in_window, window),
            None,
            "somebody else wrote in it"
        );
        let tie = object(&[("kubectl-edit", 101), ("backflow-applier", 101)]);
        assert_eq!(
            applier_write(&tie, window),
            None,
            "a tie with another manager is mirrored"
        );
        let before = object(&[("backflow-applier", 90)]);
        assert_eq!(
            applier_write(&before, window),
            None,
            "older than the window"
        );
        let user = object(&[("backflow-applier", 90), ("kubectl-edit", 120)]);
        assert_eq!(applier_write(&user, window), None);
    }
}
