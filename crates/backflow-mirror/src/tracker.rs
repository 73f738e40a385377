//! Which commit holds which write: answers `X-Backflow-Wait: pushed` for the server.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backflow_api::publication::{Publication, PublicationWaiter};
use backflow_api::{GroupResource, ObjectKey};
use backflow_git::WorkerHandle;
use tokio::sync::{Notify, oneshot, watch};

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

/// A request waiting for the mirror to handle a write of its object.
#[derive(Debug)]
struct Waiting {
    /// Tells this waiter apart from others of the same object, so it can leave.
    id: u64,
    /// The write's resourceVersion.
    resource_version: u64,
    /// Told the publication once the mirror has handled the write.
    wake: oneshot::Sender<Handled>,
}

/// What a waiter is told when the mirror has handled its write.
#[derive(Debug)]
struct Handled {
    publication: PublicationRx,
    /// The worker the waiter must still tell to hurry: `None` once the record did, or when the
    /// publication is done.
    hurry: Option<WorkerHandle>,
}

/// What the mirror handled, and who waits for what.
#[derive(Debug, Default)]
struct Keys {
    states: BTreeMap<ObjectKey, KeyState>,
    /// Requests waiting per object: a record wakes only its own object's waiters (not every
    /// waiting request, which made a busy mirror wake each of them on every write).
    waiting: BTreeMap<ObjectKey, Vec<Waiting>>,
    next_id: u64,
}

impl Keys {
    /// What a waiter for `key` is told now, or `None` while the mirror has not handled its
    /// write at `resource_version`.
    fn handled(&self, key: &ObjectKey, resource_version: u64) -> Option<Handled> {
        let state = self
            .states
            .get(key)
            .filter(|s| s.seen >= resource_version)?;
        let pending = state.publication.borrow().is_none();
        Some(Handled {
            publication: state.publication.clone(),
            hurry: state.worker.clone().filter(|_| pending),
        })
    }

    /// Wakes the waiters of `key` whose write the mirror has now handled. Returns the worker
    /// to hurry when any of them waits for a publication still in progress: hurried by the
    /// caller, in the same task that submitted the write, rather than by each waiter once it
    /// runs.
    fn wake(&mut self, key: &ObjectKey) -> Option<WorkerHandle> {
        let seen = self.states.get(key)?.seen;
        let mut waiting = self.waiting.remove(key)?;
        let mut hurry = None;
        for w in waiting.extract_if(.., |w| w.resource_version <= seen) {
            let Some(mut handled) = self.handled(key, w.resource_version) else {
                continue;
            };
            let worker = handled.hurry.take();
            if w.wake.send(handled).is_ok() {
                hurry = hurry.or(worker);
            }
        }
        if !waiting.is_empty() {
            self.waiting.insert(key.clone(), waiting);
        }
        hurry
    }
}

/// Tracks, per object, the newest write the mirror handled and the publication holding it.
#[derive(Debug, Default)]
pub struct Tracker {
    keys: Mutex<Keys>,
    /// Which types and namespaces streams watch; `None` until the mirror has read its
    /// configuration once, so a write made right after start waits instead of being answered
    /// `not-mirrored`.
    coverage: Mutex<Option<Coverage>>,
    coverage_changed: Notify,
}

/// A publication that is already done.
#[must_use]
pub fn resolved(outcome: Outcome) -> PublicationRx {
    watch::channel(Some(outcome)).1
}

/// A waiter's place in [`Keys::waiting`], given up when the waiter goes (timed out, or its
/// request dropped); a waiter that was answered has been taken out already.
struct Registration<'a> {
    tracker: &'a Tracker,
    key: &'a ObjectKey,
    id: u64,
    answered: bool,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let mut keys = self.tracker.lock_keys();
        if let Some(waiting) = keys.waiting.get_mut(self.key) {
            waiting.retain(|w| w.id != self.id);
            if waiting.is_empty() {
                keys.waiting.remove(self.key);
            }
        }
    }
}

impl Tracker {
    fn lock_keys(&self) -> std::sync::MutexGuard<'_, Keys> {
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wakes the waiters of `key` (see [`Keys::wake`]) and, once the lock is let go, hurries
    /// the worker for them.
    fn wake(mut keys: std::sync::MutexGuard<'_, Keys>, key: &ObjectKey) {
        let hurry = keys.wake(key);
        drop(keys);
        if let Some(worker) = hurry {
            // Someone waits: the write must not sit out the commit window.
            worker.hurry();
        }
    }

    /// Records that the mirror handled `key` at `resource_version`, published by `publication`
    /// from `worker`'s branch.
    pub fn record(
        &self,
        key: ObjectKey,
        resource_version: u64,
        publication: PublicationRx,
        worker: &WorkerHandle,
    ) {
        let mut keys = self.lock_keys();
        let entry = keys.states.entry(key.clone()).or_insert_with(|| KeyState {
            seen: 0,
            publication: publication.clone(),
            worker: None,
        });
        if resource_version >= entry.seen {
            entry.seen = resource_version;
            entry.publication = publication;
            entry.worker = Some(worker.clone());
        }
        Self::wake(keys, &key);
    }

    /// Records that the mirror handled `key` at `resource_version` without changing what Git
    /// should hold (a no-op): it is held by the object's last publication.
    pub fn record_unchanged(&self, key: ObjectKey, resource_version: u64) {
        let mut keys = self.lock_keys();
        if let Some(entry) = keys.states.get_mut(&key) {
            entry.seen = entry.seen.max(resource_version);
        } else {
            keys.states.insert(
                key.clone(),
                KeyState {
                    seen: resource_version,
                    publication: resolved(Outcome::NotPushed("not published".into())),
                    worker: None,
                },
            );
        }
        Self::wake(keys, &key);
    }

    /// Which types and namespaces streams currently watch (`None` = every namespace).
    pub fn set_coverage(&self, coverage: Vec<(GroupResource, Option<String>)>) {
        *self
            .coverage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(coverage);
        self.coverage_changed.notify_waiters();
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

    /// Waits until the mirror has handled the write of `key` at `resource_version` (`None`:
    /// no stream watches it). Woken by a record of `key` alone, or by a change of coverage.
    async fn wait_seen(&self, key: &ObjectKey, resource_version: u64) -> Option<Handled> {
        loop {
            let coverage_changed = self.coverage_changed.notified();
            tokio::pin!(coverage_changed);
            coverage_changed.as_mut().enable();
            if self.covers(key) == Some(false) {
                return None;
            }
            let (tx, rx) = oneshot::channel();
            let id = {
                let mut keys = self.lock_keys();
                if let Some(handled) = keys.handled(key, resource_version) {
                    return Some(handled);
                }
                keys.next_id += 1;
                let id = keys.next_id;
                keys.waiting.entry(key.clone()).or_default().push(Waiting {
                    id,
                    resource_version,
                    wake: tx,
                });
                id
            };
            let mut registered = Registration {
                tracker: self,
                key,
                id,
                answered: false,
            };
            tokio::select! {
                handled = rx => {
                    if let Ok(handled) = handled {
                        registered.answered = true;
                        return Some(handled);
                    }
                }
                () = &mut coverage_changed => {}
            }
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
            let Some(handled) = self.wait_seen(&key, resource_version).await else {
                return Publication::NotMirrored;
            };
            let Handled {
                publication: mut rx,
                hurry,
            } = handled;
            if let Some(worker) = hurry {
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

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::task::Poll;

    use backflow_api::SystemClock;
    use backflow_branch::{FilePerObjectPlanner, Intent};
    use backflow_git::{BranchMetrics, BranchWorker, Identity, RemoteSpec, WorkerConfig};

    use super::*;

    /// Hang guard only: a test that takes this long has failed.
    const HANG: Duration = Duration::from_secs(30);

    fn configmap(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "configmaps"), "default", name)
    }

    fn tracker() -> Arc<Tracker> {
        let tracker = Arc::new(Tracker::default());
        tracker.set_coverage(vec![(GroupResource::new("", "configmaps"), None)]);
        tracker
    }

    /// Polls `future` once, keeping it for later.
    async fn poll_once<F: Future + Unpin>(future: &mut F) {
        std::future::poll_fn(|cx| {
            let _ = Pin::new(&mut *future).poll(cx);
            Poll::Ready(())
        })
        .await;
    }

    /// A branch worker on a bare repository whose commit window is an hour long, so only a
    /// hurry (or a flush) publishes what it is handed.
    fn hour_window_worker(dir: &std::path::Path) -> WorkerHandle {
        backflow_testkit::git_out(dir, &["init", "--quiet", "--bare", "-b", "main", "r.git"]);
        let url = format!("file://{}", dir.join("r.git").display());
        let mut cfg = WorkerConfig::new("main");
        cfg.timing.window = Duration::from_secs(3600);
        cfg.committer = Identity::new("backflow test", "backflow@example.com");
        let clock = Arc::new(SystemClock);
        let worker = BranchWorker::open(
            &dir.join("data"),
            &RemoteSpec::new(url),
            cfg,
            Box::new(FilePerObjectPlanner),
            clock.clone(),
            BranchMetrics::disabled(),
        )
        .expect("worker");
        backflow_git::spawn(worker, clock, Duration::from_secs(5))
    }

    /// The record of a write somebody already waits for hurries the worker itself: the write
    /// is pushed (an hour-long window notwithstanding) while the waiting request is not run
    /// again, so it never waits for its own task to be scheduled before the window closes.
    #[tokio::test]
    async fn recording_a_write_somebody_waits_for_hurries_its_worker() {
        let dir = tempfile::tempdir().expect("tempdir");
        let worker = hour_window_worker(dir.path());
        let tracker = tracker();
        let key = configmap("a");
        let mut waiting = Box::pin(tracker.clone().wait(key.clone(), 7, HANG));
        poll_once(&mut waiting).await;

        let pushed = worker.submit(Intent::put(
            "apps",
            key.clone(),
            serde_json::json!({"v": 1}),
        ));
        let (tx, rx) = watch::channel(None);
        tracker.record(key, 7, rx, &worker);
        let commit = tokio::time::timeout(HANG, pushed)
            .await
            .expect("the record hurried the worker: pushed without waiting out the window")
            .expect("pushed")
            .expect("the branch exists");

        tx.send_replace(Some(Outcome::Pushed(commit.to_string())));
        assert_eq!(waiting.await, Publication::Pushed(commit.to_string()));
    }

    /// A record wakes its own object's waiters only (those whose write it covers), and a
    /// waiter that gives up leaves no trace behind.
    #[tokio::test]
    async fn waiters_wait_per_object_and_leave_when_they_go() {
        let tracker = tracker();
        let mut a = Box::pin(tracker.clone().wait(configmap("a"), 3, HANG));
        let mut later_a = Box::pin(tracker.clone().wait(configmap("a"), 9, HANG));
        let mut b = Box::pin(tracker.clone().wait(configmap("b"), 3, HANG));
        for w in [&mut a, &mut later_a, &mut b] {
            poll_once(w).await;
        }
        let waiting = |key: &str| {
            let keys = tracker.lock_keys();
            keys.waiting.get(&configmap(key)).map_or(0, Vec::len)
        };
        assert_eq!((waiting("a"), waiting("b")), (2, 1));

        tracker.record_unchanged(configmap("a"), 5);
        assert_eq!(
            (waiting("a"), waiting("b")),
            (1, 1),
            "the record of a at 5 wakes only the waiter for a at 3"
        );
        assert_eq!(a.await, Publication::Pending);
        drop(later_a);
        assert_eq!(waiting("a"), 0, "a waiter that goes leaves its place");

        let keys_before = tracker.lock_keys().states.len();
        tracker.record_unchanged(configmap("c"), 1);
        assert_eq!(tracker.lock_keys().states.len(), keys_before + 1);
        assert_eq!(waiting("b"), 1, "a record of another object wakes nobody");
        tracker.record_unchanged(configmap("b"), 3);
        assert_eq!(b.await, Publication::Pending);
        assert!(tracker.lock_keys().waiting.is_empty());
    }
}
