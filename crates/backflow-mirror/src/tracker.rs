//! Which commit holds which write: answers `X-Backflow-Wait: pushed` for the server.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backflow_api::publication::{Publication, PublicationWaiter};
use backflow_api::{GroupResource, ObjectKey};
use backflow_git::WorkerHandle;
use tokio::sync::{Notify, watch};

/// How a write ended up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// In the commit with this SHA, on the remote.
    Pushed(String),
    /// The mirror refuses to place it; the reason says why.
    Refused(String),
    /// Not pushed, for this reason (the worker stopped, or it changed nothing on a branch that
    /// does not exist); a later write of the object may still be.
    NotPushed(String),
}

/// The types and namespaces streams watch (`None`: every namespace).
type Coverage = Vec<(GroupResource, Option<String>)>;

/// A publication in progress: resolves to the commit once pushed.
pub type PublicationRx = watch::Receiver<Option<Outcome>>;

#[derive(Debug)]
struct KeyState {
    /// The newest resourceVersion of this object the mirror has handled.
    seen: u64,
    /// The publication that holds the object's state as of `seen`.
    publication: PublicationRx,
    /// The branch worker that publishes it, told to hurry when someone waits.
    worker: Option<WorkerHandle>,
}

/// Tracks, per object, the newest write the mirror handled and the publication holding it.
#[derive(Debug, Default)]
pub struct Tracker {
    keys: Mutex<BTreeMap<ObjectKey, KeyState>>,
    /// Which types and namespaces streams watch; `None` until the mirror has read its
    /// configuration once, so a write made right after start waits instead of being answered
    /// `not-mirrored`.
    coverage: Mutex<Option<Coverage>>,
    changed: Notify,
}

/// A publication that is already done.
#[must_use]
pub fn resolved(outcome: Outcome) -> PublicationRx {
    watch::channel(Some(outcome)).1
}

impl Tracker {
    /// Records that the mirror handled `key` at `resource_version`, published by `publication`
    /// from `worker`'s branch.
    pub fn record(
        &self,
        key: ObjectKey,
        resource_version: u64,
        publication: PublicationRx,
        worker: &WorkerHandle,
    ) {
        let mut keys = self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = keys.entry(key).or_insert_with(|| KeyState {
            seen: 0,
            publication: publication.clone(),
            worker: None,
        });
        if resource_version >= entry.seen {
            entry.seen = resource_version;
            entry.publication = publication;
            entry.worker = Some(worker.clone());
        }
        drop(keys);
        self.changed.notify_waiters();
    }

    /// Records that the mirror handled `key` at `resource_version` without changing what Git
    /// should hold (a no-op): it is held by the object's last publication.
    pub fn record_unchanged(&self, key: ObjectKey, resource_version: u64) {
        let mut keys = self
            .keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(entry) = keys.get_mut(&key) {
            entry.seen = entry.seen.max(resource_version);
        } else {
            keys.insert(
                key,
                KeyState {
                    seen: resource_version,
                    publication: resolved(Outcome::NotPushed("not published".into())),
                    worker: None,
                },
            );
        }
        drop(keys);
        self.changed.notify_waiters();
    }

    /// Which types and namespaces streams currently watch (`None` = every namespace).
    pub fn set_coverage(&self, coverage: Vec<(GroupResource, Option<String>)>) {
        *self
            .coverage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(coverage);
        self.changed.notify_waiters();
    }

    /// Whether a stream watches `key`; `None` while that is not known yet.
    fn covers(&self, key: &ObjectKey) -> Option<bool> {
        let coverage = self
            .coverage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        coverage.as_ref().map(|coverage| {
            coverage.iter().any(|(gr, ns)| {
                *gr == key.resource && ns.as_deref().is_none_or(|n| n == key.namespace)
            })
        })
    }

    async fn wait_seen(
        &self,
        key: &ObjectKey,
        resource_version: u64,
    ) -> Option<(PublicationRx, Option<WorkerHandle>)> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.covers(key) == Some(false) {
                return None;
            }
            {
                let keys = self
                    .keys
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if let Some(state) = keys.get(key)
                    && state.seen >= resource_version
                {
                    return Some((state.publication.clone(), state.worker.clone()));
                }
            }
            notified.await;
        }
    }

    /// Waits until the write of `key` at `resource_version` is on the remote.
    pub async fn wait(
        self: Arc<Self>,
        key: ObjectKey,
        resource_version: u64,
        timeout: Duration,
    ) -> Publication {
        let waited = tokio::time::timeout(timeout, async {
            let Some((mut rx, worker)) = self.wait_seen(&key, resource_version).await else {
                return Publication::NotMirrored;
            };
            if let Some(worker) = worker.filter(|_| rx.borrow().is_none()) {
                // Someone waits: the write must not sit out the commit window.
                worker.hurry();
            }
            loop {
                if let Some(outcome) = rx.borrow_and_update().clone() {
                    return match outcome {
                        Outcome::Pushed(sha) => Publication::Pushed(sha),
                        Outcome::Refused(reason) => Publication::Refused(reason),
                        Outcome::NotPushed(_) => Publication::Pending,
                    };
                }
                if rx.changed().await.is_err() {
                    return Publication::Pending;
                }
            }
        })
        .await;
        waited.unwrap_or(Publication::Pending)
    }
}

/// The tracker as the server's waiter.
#[derive(Debug, Clone)]
pub struct TrackerWaiter(pub Arc<Tracker>);

impl PublicationWaiter for TrackerWaiter {
    fn wait(
        &self,
        key: ObjectKey,
        resource_version: u64,
        timeout: Duration,
    ) -> Pin<Box<dyn Future<Output = Publication> + Send + 'static>> {
        Box::pin(self.0.clone().wait(key, resource_version, timeout))
    }
}
