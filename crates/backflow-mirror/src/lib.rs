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

use backflow_api::Clock;
use backflow_board::{Board, BranchRegistry};
use backflow_git::GitMetrics;
use backflow_manifest::KindMap;
use kube::Client;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use owner::{host_name, this_backflow};
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
    pub authors: Option<Arc<backflow_api::WriteRecord>>,
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
        let board = Arc::new(Board::default());
        let host = owner::host_name().unwrap_or_else(|| "backflow".into());
        board.set_recorder(backflow_board::EventRecorder::new(client.clone(), host));
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
    pub fn branches(&self) -> BranchRegistry {
        BranchRegistry::new(
            self.workers.running(),
            self.workers.board(),
            self.workers.owner(),
            self.clock.clone(),
        )
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
