//! Live → Git: backflow's mirror.
//!
//! - `plan.rs`: which watch streams the configuration asks for (pure).
//! - `discovery.rs`: the types the live API serves.
//! - `stream.rs`: one watch per (`GitTarget`, type, namespace scope): snapshot → resync, then
//!   live changes → intents for the branch worker.
//! - `workers.rs`: one branch worker per (repository, branch).
//! - `controller.rs`: the control loop: reads the configuration, starts workers and streams,
//!   patches statuses.
//! - `status.rs`: every status computed from a snapshot (pure).
//! - `error.rs`: why a `GitProvider` or `GitTarget` cannot be served, typed.
//! - `owner.rs`: who this backflow is, as folders' owner files name it.
//! - `tracker.rs`: which commit holds which write (`X-Backflow-Wait: pushed`).
//! - [`defaults`]: the configuration `backflow serve` creates.

mod apply_windows;
mod board;
mod controller;
mod credentials;
pub mod defaults;
mod discovery;
mod error;
mod managers;
mod metrics;
mod owner;
mod plan;
mod status;
mod stream;
mod tracker;
mod watched;
mod workers;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::collections::BTreeSet;

use backflow_api::{Clock, GroupResource, ObjectKey};
use backflow_git::GitMetrics;
use backflow_manifest::KindMap;
use kube::Client;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use apply_windows::{ApplyWindows, Pruned};
pub use board::{ApplyAsks, RefusedEdit};
pub use owner::this_backflow;
pub use tracker::{Tracker, TrackerWaiter};

/// How often a branch worker reads its remote when nothing told it the branch moved, unless
/// configured (`--git-refresh-interval`, `GitProvider.spec.refreshInterval`).
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(600);

/// How to run the mirror.
#[derive(Debug, Clone)]
pub struct MirrorOptions {
    /// Where branch workers keep their repository caches.
    pub data_dir: PathBuf,
    /// How often a branch worker reads its remote's tip when nothing told it the branch moved
    /// (`--git-refresh-interval`); a `GitProvider`'s `spec.refreshInterval` overrides it.
    pub refresh_interval: Duration,
    /// age identities handed to every `GitTarget`'s encryptor (never used to encrypt): with
    /// them, a restart reuses the data keys of existing SOPS files instead of re-encrypting.
    pub identities: Vec<backflow_sops::Identity>,
    /// How long a shutdown keeps trying to push pending writes (`--shutdown-grace`).
    pub shutdown_grace: Duration,
    /// The users of recent writes, when the live side is backflow's own API server: each
    /// change's commit is authored by the user who made it.
    pub authors: Option<Arc<backflow_api::WriteAuthors>>,
    /// This backflow as folders' owner files name it ([`this_backflow`]): it writes only the
    /// folders it holds or nobody does. `None`: owner files are not looked at.
    pub owner: Option<backflow_manifest::FolderOwner>,
}

/// How long a shutdown keeps pushing pending writes, unless configured.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// A running mirror.
pub struct Mirror {
    tracker: Arc<Tracker>,
    workers: Arc<Workers>,
    clock: Arc<dyn Clock>,
    registry: Arc<Mutex<Registry>>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

use workers::Workers;

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror").finish_non_exhaustive()
    }
}

impl Mirror {
    /// Starts the mirror against the API `client` talks to.
    pub fn start(client: Client, options: MirrorOptions, clock: Arc<dyn Clock>) -> Self {
        let mut registry = Registry::default();
        let git_metrics = GitMetrics::register(&mut registry);
        let metrics = metrics::MirrorMetrics::register(&mut registry);
        let kinds = KindMap::default();
        let board = Arc::new(board::Board::default());
        let workers = Arc::new(
            Workers::new(
                options.data_dir,
                options.refresh_interval,
                options.shutdown_grace,
                board.clone(),
                clock.clone(),
                workers::WorkerMetrics {
                    git: git_metrics,
                    merge_overrides: metrics.merge_overrides.clone(),
                },
                kinds.clone(),
            )
            .with_owner(options.owner),
        );
        let tracker = Arc::new(Tracker::default());
        let controller = controller::Controller::new(
            client,
            workers.clone(),
            tracker.clone(),
            metrics,
            clock.clone(),
            kinds,
            options.identities,
        )
        .with_authors(options.authors);
        let (stop, stop_rx) = watch::channel(false);
        let task = tokio::spawn(controller.run(stop_rx));
        Self {
            tracker,
            workers,
            clock,
            registry: Arc::new(Mutex::new(registry)),
            stop,
            task,
        }
    }

    /// Answers `X-Backflow-Wait: pushed` for the API server.
    #[must_use]
    pub fn waiter(&self) -> TrackerWaiter {
        TrackerWaiter(self.tracker.clone())
    }

    /// The branches the mirror's workers write, for push notices.
    #[must_use]
    pub fn branches(&self) -> MirrorBranches {
        MirrorBranches {
            workers: self.workers.clone(),
            clock: self.clock.clone(),
        }
    }

    /// Registers more metrics beside the mirror's, rendered by [`Mirror::metrics_renderer`].
    pub fn register_metrics<R>(&self, register: impl FnOnce(&mut Registry) -> R) -> R {
        let mut registry = self
            .registry
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        register(&mut registry)
    }

    /// Renders every metric (mirror and branch workers) as `OpenMetrics` text.
    #[must_use]
    pub fn metrics_renderer(&self) -> Arc<dyn Fn() -> String + Send + Sync> {
        let registry = self.registry.clone();
        Arc::new(move || {
            let mut out = String::new();
            let registry = registry
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if prometheus_client::encoding::text::encode(&mut out, &registry).is_err() {
                out = "# metrics could not be encoded\n# EOF\n".into();
            }
            out
        })
    }

    /// Stops the watches, then flushes and stops every branch worker (pending writes are pushed).
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        let _ = self.task.await;
        self.workers.shutdown().await;
    }
}

/// The branches the mirror's workers write, and how far each target's snapshots are: what a
/// push webhook can wake, and what an applier's decision is gated on.
#[derive(Clone)]
pub struct MirrorBranches {
    workers: Arc<Workers>,
    clock: Arc<dyn Clock>,
}

/// Whether the applier claim a `GitTarget` names can act: its `ApplierClaimReady` condition,
/// written by the mirror with the rest of the target's status (one writer of the list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimReadiness {
    /// Whether the claim can act.
    pub ready: bool,
    /// CamelCase reason (`Claimed`, `ClaimNotFound`, `TargetsDisagree`, …).
    pub reason: String,
    /// For a person.
    pub message: String,
}

/// How far the watch streams of one `GitTarget` are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSnapshots {
    /// Every planned stream has published its initial snapshot and follows live changes.
    Settled,
    /// Not yet, and why (no stream planned, one replaying, one blocked).
    Pending(String),
}

impl std::fmt::Debug for MirrorBranches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorBranches").finish_non_exhaustive()
    }
}

impl MirrorBranches {
    /// This backflow as folders' owner files name it, when it claims folders: an applier
    /// applies nothing from a folder another backflow holds.
    #[must_use]
    pub fn owner(&self) -> Option<backflow_manifest::FolderOwner> {
        self.workers.owner()
    }

    /// Every (repository URL as its `GitProvider` names it, branch) a worker writes.
    #[must_use]
    pub fn list(&self) -> Vec<(String, String)> {
        self.workers.branches()
    }

    /// Reports (or with `None` clears) the `ApplierClaimReady` of `GitTarget` `namespace/name`.
    pub fn report_claim(&self, namespace: &str, name: &str, readiness: Option<ClaimReadiness>) {
        self.workers
            .board()
            .set_claim(&(namespace.to_string(), name.to_string()), readiness);
    }

    /// Fields a live edit in `GitTarget` `namespace/name`'s folder kept over a push's value,
    /// counted, and the last of them (see [`board::TargetActivity::merge_overrides`]).
    #[must_use]
    pub fn merge_overrides(&self, namespace: &str, name: &str) -> (u64, Option<String>) {
        let activity = self
            .workers
            .board()
            .activity(&(namespace.to_string(), name.to_string()));
        (activity.merge_overrides, activity.last_merge_override)
    }

    /// The apply windows the watch streams consult.
    #[must_use]
    pub fn apply_windows(&self) -> ApplyWindows {
        self.workers.board().windows.clone()
    }

    /// Resolves when something an applier claim acts on changed since the last call: a
    /// stream's state, a branch's tip, a reason to apply, an edit to apply Git over.
    pub async fn apply_news(&self) {
        self.workers.board().apply_news().await;
    }

    /// The worker of (url, branch), if one runs.
    #[must_use]
    pub fn worker(&self, url: &str, branch: &str) -> Option<backflow_git::WorkerHandle> {
        self.workers.get(url, branch)
    }

    /// The remote tip the mirror last saw for (url, branch) (its own push or a foreign one).
    #[must_use]
    pub fn tip(&self, url: &str, branch: &str) -> Option<String> {
        self.workers
            .board()
            .branch(&(url.to_string(), branch.to_string()))
            .tip
    }

    /// The reasons the mirror gave `GitTarget` `namespace/name`'s applier so far: objects that
    /// appeared without an applier's stamp (adopt), applier writes withheld over a newer live
    /// edit (repair). A counter that grew asks once.
    #[must_use]
    pub fn apply_asks(&self, namespace: &str, name: &str) -> ApplyAsks {
        self.workers
            .board()
            .asks(&(namespace.to_string(), name.to_string()))
    }

    /// Takes the objects of `GitTarget` `namespace/name` (`onRefusal: Reapply`) whose live edit
    /// was refused: its applier is to apply Git over them.
    #[must_use]
    pub fn take_reapply(&self, namespace: &str, name: &str) -> BTreeSet<RefusedEdit> {
        self.workers
            .board()
            .take_reapply(&(namespace.to_string(), name.to_string()))
    }

    /// The objects of `GitTarget` `namespace/name` whose live write its folder refused and
    /// that no later write superseded: an apply leaves them as they are (the edit is not in
    /// Git; it is published once the block clears).
    #[must_use]
    pub fn refused_objects(&self, namespace: &str, name: &str) -> BTreeSet<ObjectKey> {
        self.workers
            .board()
            .refused_objects(&(namespace.to_string(), name.to_string()))
    }

    /// Asks for a fresh resync of `resources` in `GitTarget` `namespace/name`: a reverted
    /// refused edit clears only with a resync covering it.
    pub fn resync(&self, namespace: &str, name: &str, resources: BTreeSet<GroupResource>) {
        self.workers
            .board()
            .ask_resync(&(namespace.to_string(), name.to_string()), resources);
    }

    /// Whether every watch stream of `GitTarget` `namespace/name` has published its snapshot.
    #[must_use]
    pub fn target_snapshots(&self, namespace: &str, name: &str) -> TargetSnapshots {
        let streams = self
            .workers
            .board()
            .streams_of(&(namespace.to_string(), name.to_string()));
        if streams.is_empty() {
            return TargetSnapshots::Pending(format!(
                "GitTarget {namespace}/{name} has no watch stream yet (its rules are not resolved)"
            ));
        }
        for (spec, state) in streams {
            match state {
                board::StreamState::Streaming => {}
                board::StreamState::Replaying => {
                    return TargetSnapshots::Pending(format!(
                        "GitTarget {namespace}/{name}: {} is reading its snapshot",
                        spec.describe()
                    ));
                }
                board::StreamState::Blocked(why) => {
                    return TargetSnapshots::Pending(format!(
                        "GitTarget {namespace}/{name}: {} cannot watch: {why}",
                        spec.describe()
                    ));
                }
            }
        }
        TargetSnapshots::Settled
    }

    /// A push webhook named (url, branch): its `GitBranch` reports it in
    /// `status.lastPushNoticeAt`, and unless `wake` is false (a redelivery of a push already
    /// acted on) its worker reads the remote at once.
    pub fn push_noticed(&self, url: &str, branch: &str, wake: bool) {
        let at = humantime::format_rfc3339_seconds(self.clock.now()).to_string();
        self.workers.push_noticed(url, branch, at, wake);
    }
}

/// Sends `()` on `tx` for every change a watch of `api` sees (dropped when `tx` is full: a
/// level-triggered loop needs one tick, not every event), retrying a failed watch every second.
/// Runs until the watch ends.
pub async fn watch_changes<K>(api: kube::Api<K>, tx: tokio::sync::mpsc::Sender<()>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt as _;
    let mut events =
        kube::runtime::watcher::watcher(api, kube::runtime::watcher::Config::default()).boxed();
    while let Some(e) = events.next().await {
        if e.is_ok() {
            let _ = tx.try_send(());
        } else {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}
