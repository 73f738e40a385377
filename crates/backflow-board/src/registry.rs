//! The branch registry: the branch workers that run, by (repository, branch), and what an
//! applier claim or a push webhook reads and tells through them and the board.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use backflow_api::{Clock, GroupResource, ObjectKey};
use backflow_git::{RemoteProblem, WorkerHandle};
use backflow_manifest::FolderOwner;

use crate::board::{ApplyAsks, Board, BranchKey, ClaimReadiness, RefusedEdit, StreamState};
use crate::{ApplyWindows, CaughtUp, TargetRef};

/// Every running branch worker's handle, by branch: the mirror starts and stops them, the
/// appliers and the push receiver find them here.
#[derive(Debug, Default)]
pub struct RunningWorkers(Mutex<BTreeMap<BranchKey, WorkerHandle>>);

impl RunningWorkers {
    fn lock(&self) -> MutexGuard<'_, BTreeMap<BranchKey, WorkerHandle>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records the worker started for `branch`.
    pub fn insert(&self, branch: BranchKey, worker: WorkerHandle) {
        self.lock().insert(branch, worker);
    }

    /// The worker of (url, branch), if one runs.
    #[must_use]
    pub fn get(&self, url: &str, branch: &str) -> Option<WorkerHandle> {
        self.lock()
            .get(&(url.to_string(), branch.to_string()))
            .cloned()
    }

    /// Every branch a worker runs for.
    #[must_use]
    pub fn branches(&self) -> Vec<BranchKey> {
        self.lock().keys().cloned().collect()
    }

    /// Why the last publication to `url` failed (any of its branches), while it keeps failing.
    #[must_use]
    pub fn remote_problem(&self, url: &str) -> Option<RemoteProblem> {
        self.lock()
            .iter()
            .filter(|((u, _), _)| u == url)
            .find_map(|(_, w)| w.remote_problem())
    }

    /// Forgets every worker, handing their handles over (to be stopped).
    pub fn take_all(&self) -> Vec<(BranchKey, WorkerHandle)> {
        std::mem::take(&mut *self.lock()).into_iter().collect()
    }
}

/// How far the watch streams of one `GitTarget` are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetSnapshots {
    /// Every planned stream has published its initial snapshot and follows live changes.
    Settled,
    /// Not yet, and why (no stream planned, one replaying, one blocked).
    Pending(String),
}

/// The branches the mirror's workers write, and how far each target's snapshots are: what a
/// push webhook can wake, and what an applier's decision is gated on.
#[derive(Clone)]
pub struct BranchRegistry {
    workers: Arc<RunningWorkers>,
    board: Arc<Board>,
    owner: Option<FolderOwner>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for BranchRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BranchRegistry").finish_non_exhaustive()
    }
}

/// A target's key on the board.
fn target(namespace: &str, name: &str) -> TargetRef {
    (namespace.to_string(), name.to_string())
}

impl BranchRegistry {
    /// The registry of `workers`, reporting on `board`; `owner` is this backflow as folders'
    /// owner files name it (when it claims folders).
    #[must_use]
    pub fn new(
        workers: Arc<RunningWorkers>,
        board: Arc<Board>,
        owner: Option<FolderOwner>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            workers,
            board,
            owner,
            clock,
        }
    }

    /// This backflow as folders' owner files name it, when it claims folders: an applier
    /// applies nothing from a folder another backflow holds.
    #[must_use]
    pub fn owner(&self) -> Option<FolderOwner> {
        self.owner.clone()
    }

    /// Every (repository URL as its `GitProvider` names it, branch) a worker writes.
    #[must_use]
    pub fn list(&self) -> Vec<BranchKey> {
        self.workers.branches()
    }

    /// Reports (or with `None` clears) the `ApplierClaimReady` of `GitTarget` `namespace/name`.
    pub fn report_claim(&self, namespace: &str, name: &str, readiness: Option<ClaimReadiness>) {
        self.board.set_claim(&target(namespace, name), readiness);
    }

    /// Fields a live edit in `GitTarget` `namespace/name`'s folder kept over a push's value,
    /// counted, and the last of them (see [`crate::TargetActivity::merge_overrides`]).
    #[must_use]
    pub fn merge_overrides(&self, namespace: &str, name: &str) -> (u64, Option<String>) {
        let activity = self.board.activity(&target(namespace, name));
        (activity.merge_overrides, activity.last_merge_override)
    }

    /// The apply windows the watch streams consult.
    #[must_use]
    pub fn apply_windows(&self) -> ApplyWindows {
        self.board.windows.clone()
    }

    /// Asks every watch stream of `targets` to decide what its scope holds now (see
    /// [`crate::CatchUps`]) and waits, each for at most `limit`.
    pub async fn catch_up(&self, targets: &[TargetRef], limit: Duration) -> CaughtUp {
        self.board.catch_ups.of(targets, limit).await
    }

    /// Records `note` as a Kubernetes Event, in the background.
    pub fn record(&self, note: crate::Note) {
        self.board.record(note);
    }

    /// Resolves when something an applier claim acts on changed since the last call: a
    /// stream's state, a branch's tip, a reason to apply, an edit to apply Git over.
    pub async fn apply_news(&self) {
        self.board.apply_news().await;
    }

    /// The worker of (url, branch), if one runs.
    #[must_use]
    pub fn worker(&self, url: &str, branch: &str) -> Option<WorkerHandle> {
        self.workers.get(url, branch)
    }

    /// The watch streams of `GitTarget` `namespace/name`: the types and namespaces its folder
    /// mirrors.
    #[must_use]
    pub fn streams_of(&self, namespace: &str, name: &str) -> Vec<crate::StreamSpec> {
        self.board
            .streams_of(&target(namespace, name))
            .into_iter()
            .map(|(spec, _)| spec)
            .collect()
    }

    /// The remote tip the mirror last saw for (url, branch) (its own push or a foreign one).
    #[must_use]
    pub fn tip(&self, url: &str, branch: &str) -> Option<String> {
        self.board
            .branch(&(url.to_string(), branch.to_string()))
            .tip
    }

    /// The reasons the mirror gave `GitTarget` `namespace/name`'s applier so far: objects that
    /// appeared without an applier's stamp (adopt), applier writes withheld over a newer live
    /// edit (repair). A counter that grew asks once.
    #[must_use]
    pub fn apply_asks(&self, namespace: &str, name: &str) -> ApplyAsks {
        self.board.asks(&target(namespace, name))
    }

    /// Takes the objects of `GitTarget` `namespace/name` (`onRefusal: Reapply`) whose live edit
    /// was refused: its applier is to apply Git over them.
    #[must_use]
    pub fn take_reapply(&self, namespace: &str, name: &str) -> BTreeSet<RefusedEdit> {
        self.board.take_reapply(&target(namespace, name))
    }

    /// The objects of `GitTarget` `namespace/name` whose live write its folder refused and
    /// that no later write superseded: an apply leaves them as they are (the edit is not in
    /// Git; it is published once the block clears).
    #[must_use]
    pub fn refused_objects(&self, namespace: &str, name: &str) -> BTreeSet<ObjectKey> {
        self.board.refused_objects(&target(namespace, name))
    }

    /// Asks for a fresh resync of `resources` in `GitTarget` `namespace/name`: a reverted
    /// refused edit clears only with a resync covering it.
    pub fn resync(&self, namespace: &str, name: &str, resources: BTreeSet<GroupResource>) {
        self.board.ask_resync(&target(namespace, name), resources);
    }

    /// Whether every watch stream of `GitTarget` `namespace/name` has published its snapshot.
    #[must_use]
    pub fn target_snapshots(&self, namespace: &str, name: &str) -> TargetSnapshots {
        let streams = self.board.streams_of(&target(namespace, name));
        if streams.is_empty() {
            return TargetSnapshots::Pending(format!(
                "GitTarget {namespace}/{name} has no watch stream yet (its rules are not resolved)"
            ));
        }
        for (spec, state) in streams {
            match state {
                StreamState::Streaming => {}
                StreamState::Replaying => {
                    return TargetSnapshots::Pending(format!(
                        "GitTarget {namespace}/{name}: {} is reading its snapshot",
                        spec.describe()
                    ));
                }
                StreamState::Blocked(why) => {
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
        self.board
            .push_noticed(&(url.to_string(), branch.to_string()), at);
        if let Some(worker) = self.workers.get(url, branch).filter(|_| wake) {
            worker.notify_remote_moved();
        }
    }
}
