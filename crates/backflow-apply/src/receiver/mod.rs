//! The push receiver: Git hosts' push webhooks, verified and turned into "read the remote now"
//! for the branch workers they concern.
//!
//! - `path.rs`: the webhook path derived from the token.
//! - `signature.rs`: verifying a delivery per host type (pure).
//! - `delivery.rs`: what a push payload names (pure).
//! - `repository.rs`: one identity for every URL of a repository (pure).
//! - `dispatch.rs`: matching a push to branch workers, dropping redeliveries (pure).
//! - `endpoint.rs`: the HTTP handler.
//! - `hook.rs`: the `post-receive` hook of `serve`'s own repository.
//! - `controller.rs`: `GitReceiver` objects and their Secrets → the endpoint's table and status.
//! - `deliveries.rs`: what became of each delivery, kept in the receiver's status.

mod controller;
mod deliveries;
mod delivery;
mod dispatch;
mod endpoint;
mod hook;
mod metrics;
mod path;
mod repository;
mod signature;

use std::sync::Arc;

use backflow_api::Clock;
use backflow_board::BranchRegistry;
use kube::Client;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

pub use controller::{ReceiverController, TOKEN_KEY, TokenProblem};
pub use deliveries::{DeliveryLog, merged};
pub use delivery::{DeliveryError, PushDelivery, PushedRef, Revision};
pub use dispatch::{Dispatch, PushTargets, RecentPushes, WrittenBranch, dispatch, matching};
pub use endpoint::{EndpointState, MAX_BODY, ReceiverEntry, ReceiverTable, VerifiedPush, router};
pub use hook::{RefUpdate, post_receive_script, token_from};
pub use metrics::{DeliveryLabels, Outcome, ReceiverMetrics};
pub use path::{PATH_PREFIX, webhook_path};
pub use repository::RepositoryId;
pub use signature::{Event, Rejection, sign_sha256, verify};

/// How many verified pushes may wait for dispatch before deliveries are answered 503.
const QUEUE: usize = 1024;
/// How many branches' last notified tips are remembered to drop redeliveries.
const REMEMBERED: usize = 4096;

/// A running receiver: its controller and dispatcher, and the routes to serve.
pub struct Receiver {
    router: axum::Router,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}

impl Receiver {
    /// Starts serving the `GitReceivers` of `client`'s API, waking `targets`.
    pub fn start(
        client: Client,
        targets: Arc<dyn PushTargets>,
        metrics: ReceiverMetrics,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let table = Arc::new(ReceiverTable::default());
        let (stop, stop_rx) = watch::channel(false);
        let deliveries = Arc::new(DeliveryLog::new(clock.clone()));
        let controller = ReceiverController::new(client, table.clone(), clock)
            .with_deliveries(deliveries.clone());
        let (router, dispatcher) = endpoint(table, targets, metrics, deliveries);
        let tasks = vec![tokio::spawn(controller.run(stop_rx)), dispatcher];
        Self {
            router,
            stop,
            tasks,
        }
    }

    /// The routes to serve (`/git-push/…`).
    pub fn router(&self) -> axum::Router {
        self.router.clone()
    }

    /// Stops the controller and the dispatcher.
    pub async fn shutdown(self) {
        self.stop.send_replace(true);
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
    }
}

/// The endpoint serving the receivers of `table`, and its dispatcher task (spawned), which
/// wakes `targets`; what became of each delivery goes to `deliveries`. [`Receiver::start`] adds
/// the controller that fills the table and keeps the deliveries in the receivers' status.
pub fn endpoint(
    table: Arc<ReceiverTable>,
    targets: Arc<dyn PushTargets>,
    metrics: ReceiverMetrics,
    deliveries: Arc<DeliveryLog>,
) -> (axum::Router, JoinHandle<()>) {
    let (pushes, rx) = mpsc::channel(QUEUE);
    let dispatcher = tokio::spawn(run_dispatch(
        rx,
        targets,
        metrics.clone(),
        deliveries.clone(),
    ));
    let router = router(EndpointState {
        table,
        metrics,
        pushes,
        deliveries,
    });
    (router, dispatcher)
}

/// Dispatches verified pushes one at a time, in arrival order.
async fn run_dispatch(
    mut rx: mpsc::Receiver<VerifiedPush>,
    targets: Arc<dyn PushTargets>,
    metrics: ReceiverMetrics,
    deliveries: Arc<DeliveryLog>,
) {
    let mut recent = RecentPushes::new(REMEMBERED);
    while let Some(push) = rx.recv().await {
        let kind = push.kind.as_str();
        let outcome = dispatch(&push.delivery, targets.as_ref(), &mut recent);
        let receiver = &push.receiver;
        let pushed_ref = &push.delivery.pushed_ref;
        match &outcome {
            Dispatch::Woke(branches) => {
                metrics.count(kind, Outcome::Accepted);
                let woke: Vec<String> = branches
                    .iter()
                    .map(|b| format!("{} {}", b.url, b.branch))
                    .collect();
                deliveries.record(
                    receiver,
                    "accepted",
                    format!(
                        "{pushed_ref} at {}: woke {}",
                        push.delivery.after,
                        woke.join(", ")
                    ),
                );
                for b in branches {
                    tracing::info!(%receiver, url = %b.url, branch = %b.branch, after = ?push.delivery.after, "push notice: the branch worker reads the remote");
                }
            }
            Dispatch::Duplicate(_) => {
                metrics.count(kind, Outcome::Duplicate);
                deliveries.record(
                    receiver,
                    "duplicate",
                    format!("{pushed_ref}: already acted on"),
                );
                tracing::debug!(%receiver, ?pushed_ref, "push notice already acted on (a redelivery)");
            }
            Dispatch::NoMatch => {
                metrics.count(kind, Outcome::NoMatch);
                deliveries.record(receiver, "no matching branch", format!("{pushed_ref} of {:?}: no GitTarget writes it (is the GitProvider's spec.url another URL of this repository?)", push.delivery.repositories));
                let repositories: Vec<&str> = push
                    .delivery
                    .repositories
                    .iter()
                    .map(RepositoryId::as_str)
                    .collect();
                tracing::info!(%receiver, ?repositories, ?pushed_ref, "push notice names no branch a GitTarget writes (is the GitProvider's spec.url another URL of this repository?)");
            }
            Dispatch::NotABranch => {
                metrics.count(kind, Outcome::Ignored);
                deliveries.record(receiver, "ignored", format!("{pushed_ref} is not a branch"));
                tracing::debug!(%receiver, ?pushed_ref, "push notice for a ref that is not a branch");
            }
        }
    }
}

impl PushTargets for BranchRegistry {
    fn branches(&self) -> Vec<WrittenBranch> {
        self.list()
            .into_iter()
            .map(|(url, branch)| WrittenBranch { url, branch })
            .collect()
    }

    fn notice(&self, branch: &WrittenBranch, wake: bool) {
        self.push_noticed(&branch.url, &branch.branch, wake);
    }
}
