//! The status board: what each stream and target is doing, written by streams, read by the
//! status writer. Decouples the hot path (events) from status patches (a few per second at most).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use backflow_api::{GroupResource, ObjectKey};
use backflow_manifest::Identity;

use std::sync::{Arc, OnceLock};

use crate::withheld::Withheld;
use crate::{ApplyWindows, CatchUps, EventRecorder, Note, StreamSpec, TargetRef};

/// Where a watch stream stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamState {
    /// Reading its initial snapshot, or publishing it.
    Replaying,
    /// Snapshot published; following live changes.
    Streaming,
    /// Cannot watch; the message says why.
    Blocked(String),
}

/// What a target has done lately.
#[allow(
    clippy::struct_field_names,
    reason = "named as the GitTarget status fields they fill"
)]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetActivity {
    /// The newest commit pushed holding one of its changes.
    pub last_commit: Option<String>,
    /// When that was (RFC 3339).
    pub last_push_time: Option<String>,
    /// The number its worker gave `last_commit` ([`PushReport::order`]).
    pub last_commit_order: u64,
    /// Writes refused (they could not be placed safely) and not yet superseded, by what they
    /// wrote: a later publication of the same object, or a resync of its type and namespace
    /// that publishes without a refusal, clears one.
    pub refusals: BTreeMap<WriteScope, String>,
    /// Fields changed both live and in Git where the live value was kept, counted.
    pub merge_overrides: u64,
    /// The last of them, for a person: the object and its fields.
    pub last_merge_override: Option<String>,
}

/// What one write to the branch covers, for its refusal.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriteScope {
    /// One object (a watch event).
    Object(ObjectKey),
    /// A resync of a type in one namespace (`None`: every namespace).
    Resync(GroupResource, Option<String>),
    /// An object the watch could not decode: only a later publication of that object (a write
    /// that decodes, or its delete) clears it, never a resync of its type, which skipped it.
    Unreadable(ObjectKey),
}

impl WriteScope {
    /// Whether a write of `self` that published supersedes a refused write of `other`.
    fn covers(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Object(a), Self::Object(b)) => a == b,
            (Self::Resync(gr, ns), Self::Object(key)) => {
                key.resource == *gr && ns.as_ref().is_none_or(|n| *n == key.namespace)
            }
            (Self::Resync(..), Self::Resync(..)) => self == other,
            (Self::Object(a), Self::Unreadable(b)) => a == b,
            (Self::Object(_), Self::Resync(..))
            | (Self::Resync(..), Self::Unreadable(_))
            | (Self::Unreadable(_), _) => false,
        }
    }
}

/// The commit a write was published by, as the task that followed the write reports it. Those tasks run in any order, so a report carries the number the branch's worker
/// gave the commit when it pushed or found it (`WorkerHandle::tip_order`), and a status keeps
/// the report with the largest: it never goes back to an older commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushReport {
    /// The commit's id.
    pub sha: String,
    /// Its number; 0 when the worker no longer knows it (it is older than every recent tip).
    pub order: u64,
    /// When it was pushed (RFC 3339).
    pub at: String,
}

/// What a branch (repository URL, branch) has seen lately.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BranchActivity {
    /// The newest commit pushed.
    pub tip: Option<String>,
    /// The number its worker gave `tip` ([`PushReport::order`]).
    pub tip_order: u64,
    /// When it was pushed (RFC 3339).
    pub last_push_time: Option<String>,
    /// Writes submitted and not yet published.
    pub pending: u32,
    /// When a push webhook last named the branch (RFC 3339).
    pub last_push_notice_at: Option<String>,
}

impl BranchActivity {
    /// Takes commit `sha`, numbered `order`, as the tip unless a newer one is recorded; says
    /// whether it did.
    fn learn(&mut self, sha: String, order: u64) -> bool {
        if self.tip.is_some() && order < self.tip_order {
            return false;
        }
        self.tip = Some(sha);
        self.tip_order = order;
        true
    }
}

/// The reasons the mirror gave a target's applier to apply, counted since start: a counter
/// that rose asks once, however many times it rose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyAsks {
    /// Objects that appeared live without an applier's stamp (a create, a delete and
    /// re-create): the applier adopts them (`CatchUp`).
    pub adopt: u64,
    /// Applier writes withheld from Git because they landed over a newer live edit: the
    /// applier applies the tip that holds the edit (`Repair`).
    pub repair: u64,
}

/// A live edit a folder refused, which its applier is to revert (`onRefusal: Reapply`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct RefusedEdit {
    /// The object edited.
    pub object: Identity,
    /// Its resource type: a resync of it clears the refusal once reverted.
    pub resource: GroupResource,
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

/// A branch: repository URL and branch name.
pub type BranchKey = (String, String);

/// Shared state for status.
#[derive(Debug, Default)]
pub struct Board {
    streams: Mutex<BTreeMap<StreamSpec, StreamState>>,
    targets: Mutex<BTreeMap<TargetRef, TargetActivity>>,
    branches: Mutex<BTreeMap<BranchKey, BranchActivity>>,
    /// Per target, the reasons given to its applier to apply, counted.
    asks: Mutex<BTreeMap<TargetRef, ApplyAsks>>,
    /// Per target (`onRefusal: Reapply`), objects whose live edit was refused: its applier
    /// applies Git over them.
    reapply: Mutex<BTreeMap<TargetRef, BTreeSet<RefusedEdit>>>,
    /// Per target, types whose refusals only a fresh resync clears (after a reapply).
    resyncs: Mutex<BTreeMap<TargetRef, BTreeSet<GroupResource>>>,
    /// Signalled when a resync is asked for.
    resync_news: tokio::sync::Notify,
    /// Apply windows, shared with the claims that open and close them.
    pub windows: ApplyWindows,
    /// Objects whose applier's write was withheld from Git, beyond the streams that saw it.
    pub withheld: Withheld,
    /// Where each running stream takes its catch-ups.
    pub catch_ups: CatchUps,
    /// Where Events are recorded, once the mirror has a client.
    recorder: OnceLock<Arc<EventRecorder>>,
    /// Per coordinated target, whether its applier claim can act (its `ApplierClaimReady`).
    claims: Mutex<BTreeMap<TargetRef, ClaimReadiness>>,
    /// Which target each folder of each branch belongs to, as its streams run.
    folders: Mutex<BTreeMap<(BranchKey, String), TargetRef>>,
    /// Signalled when a branch learns something from outside (a foreign tip, a push notice),
    /// so its `GitBranch` shows it at once rather than at the next status tick.
    branch_news: tokio::sync::Notify,
    /// Signalled when something an applier claim acts on changed (a stream's state, a branch's
    /// tip, a reason to apply, an edit to apply Git over), so the claims look at once instead
    /// of polling.
    apply_news: tokio::sync::Notify,
}

impl Board {
    /// Records Events through `recorder` from now on (set once; later calls are ignored).
    pub fn set_recorder(&self, recorder: Arc<EventRecorder>) {
        let _ = self.recorder.set(recorder);
    }

    /// Records `note` as a Kubernetes Event, in the background (nothing before a recorder is
    /// set).
    pub fn record(&self, note: Note) {
        if let Some(recorder) = self.recorder.get() {
            recorder.record(note);
        }
    }

    /// Sets a stream's state.
    pub fn set_stream(&self, spec: &StreamSpec, state: StreamState) {
        self.streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(spec.clone(), state);
        self.apply_news.notify_one();
    }

    /// Forgets a stopped stream.
    pub fn remove_stream(&self, spec: &StreamSpec) {
        self.streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(spec);
        self.catch_ups.forget(spec);
        self.apply_news.notify_one();
    }

    /// A stream's state, if it is running.
    pub fn stream(&self, spec: &StreamSpec) -> Option<StreamState> {
        self.streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(spec)
            .cloned()
    }

    /// The states of a target's streams.
    pub fn streams_of(&self, target: &TargetRef) -> Vec<(StreamSpec, StreamState)> {
        let streams = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        streams
            .iter()
            .filter(|(s, _)| &s.target == target)
            .map(|(s, st)| (s.clone(), st.clone()))
            .collect()
    }

    /// Records a pushed commit holding a change of `target`, unless a newer one is recorded.
    pub fn pushed(&self, target: &TargetRef, report: &PushReport) {
        let mut targets = self
            .targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let a = targets.entry(target.clone()).or_default();
        if a.last_commit.is_some() && report.order < a.last_commit_order {
            return;
        }
        a.last_commit = Some(report.sha.clone());
        a.last_push_time = Some(report.at.clone());
        a.last_commit_order = report.order;
    }

    /// Records that `folder` of `branch` is `target`'s (its streams run).
    pub fn serve_folder(&self, branch: &BranchKey, folder: &str, target: &TargetRef) {
        self.folders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((branch.clone(), folder.to_string()), target.clone());
    }

    /// A branch moved (somebody pushed): the writes its folders refused are tried again, as
    /// a fresh resync of each refused object's type, since the push may have fixed the file
    /// that blocked them. Says how many targets it asked.
    pub fn retry_refused(&self, branch: &BranchKey) -> usize {
        let targets: BTreeSet<TargetRef> = self
            .folders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|((b, _), _)| b == branch)
            .map(|(_, t)| t.clone())
            .collect();
        let mut asked = 0;
        for target in targets {
            let resources: BTreeSet<GroupResource> = self
                .activity(&target)
                .refusals
                .keys()
                .filter_map(|scope| match scope {
                    WriteScope::Object(key) => Some(key.resource.clone()),
                    WriteScope::Resync(resource, _) => Some(resource.clone()),
                    // A resync skips what the watch cannot decode: only its next write helps.
                    WriteScope::Unreadable(_) => None,
                })
                .collect();
            if !resources.is_empty() {
                self.ask_resync(&target, resources);
                asked += 1;
            }
        }
        asked
    }

    /// The objects of `target` whose live write was refused and not yet superseded.
    pub fn refused_objects(&self, target: &TargetRef) -> BTreeSet<ObjectKey> {
        self.activity(target)
            .refusals
            .into_keys()
            .filter_map(|scope| match scope {
                WriteScope::Object(key) => Some(key),
                WriteScope::Resync(..) | WriteScope::Unreadable(_) => None,
            })
            .collect()
    }

    /// Records that a live edit of `object` in `folder` of `branch` was kept over Git's value
    /// of `fields`; returns the target the folder belongs to.
    pub fn merge_override(
        &self,
        branch: &BranchKey,
        folder: &str,
        object: &ObjectKey,
        fields: &[String],
    ) -> Option<TargetRef> {
        let target = self
            .folders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(branch.clone(), folder.to_string()))
            .cloned()?;
        let mut targets = self
            .targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let a = targets.entry(target.clone()).or_default();
        a.merge_overrides += 1;
        a.last_merge_override = Some(format!(
            "{object}: {} changed both live and in Git; the live value was kept",
            fields.join(", ")
        ));
        Some(target)
    }

    /// Records a refused write of `scope`.
    pub fn refused(&self, target: &TargetRef, scope: WriteScope, message: String) {
        self.targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(target.clone())
            .or_default()
            .refusals
            .insert(scope, message);
    }

    /// A write of `scope` published (or changed nothing): the refusals it supersedes clear.
    pub fn accepted(&self, target: &TargetRef, scope: &WriteScope) {
        let mut targets = self
            .targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(a) = targets.get_mut(target) {
            a.refusals.retain(|refused, _| !scope.covers(refused));
        }
    }

    /// Records that an object appeared in `target`'s scope without an applier's stamp.
    pub fn unstamped_object(&self, target: &TargetRef) {
        self.ask(target, |asks| asks.adopt += 1);
    }

    /// Records that an applier's write over a newer live edit in `target` was withheld.
    pub fn collision(&self, target: &TargetRef) {
        self.ask(target, |asks| asks.repair += 1);
    }

    fn ask(&self, target: &TargetRef, count: impl FnOnce(&mut ApplyAsks)) {
        count(
            self.asks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(target.clone())
                .or_default(),
        );
        self.apply_news.notify_one();
    }

    /// A refused live edit of `object` in `target`, whose applier is to apply Git over it.
    pub fn reapply(&self, target: &TargetRef, object: RefusedEdit) {
        self.reapply
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(target.clone())
            .or_default()
            .insert(object);
        self.apply_news.notify_one();
    }

    /// Takes the objects `target`'s applier is to apply Git over.
    pub fn take_reapply(&self, target: &TargetRef) -> BTreeSet<RefusedEdit> {
        self.reapply
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(target)
            .unwrap_or_default()
    }

    /// Asks for a fresh resync of `resources` in `target` (the streams start over).
    pub fn ask_resync(
        &self,
        target: &TargetRef,
        resources: impl IntoIterator<Item = GroupResource>,
    ) {
        self.resyncs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(target.clone())
            .or_default()
            .extend(resources);
        self.resync_news.notify_one();
    }

    /// Takes the resyncs asked for.
    pub fn take_resyncs(&self) -> BTreeMap<TargetRef, BTreeSet<GroupResource>> {
        std::mem::take(
            &mut *self
                .resyncs
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Resolves when a resync was asked for since the last call.
    pub async fn resync_news(&self) {
        self.resync_news.notified().await;
    }

    /// The reasons given to `target`'s applier so far.
    pub fn asks(&self, target: &TargetRef) -> ApplyAsks {
        self.asks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(target)
            .copied()
            .unwrap_or_default()
    }

    /// Sets (or with `None` clears) what `target`'s `ApplierClaimReady` says.
    pub fn set_claim(&self, target: &TargetRef, readiness: Option<ClaimReadiness>) {
        let mut claims = self
            .claims
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match readiness {
            Some(r) => {
                claims.insert(target.clone(), r);
            }
            None => {
                claims.remove(target);
            }
        }
    }

    /// What `target`'s `ApplierClaimReady` says, if it names a claim.
    pub fn claim(&self, target: &TargetRef) -> Option<ClaimReadiness> {
        self.claims
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(target)
            .cloned()
    }

    /// Records a write submitted to a branch.
    pub fn branch_submitted(&self, branch: &BranchKey) {
        self.branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(branch.clone())
            .or_default()
            .pending += 1;
    }

    /// Records the end of a submitted write, and the commit that published it if it was pushed
    /// (unless a newer tip is recorded).
    pub fn branch_settled(&self, branch: &BranchKey, pushed: Option<&PushReport>) {
        let mut branches = self
            .branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let b = branches.entry(branch.clone()).or_default();
        b.pending = b.pending.saturating_sub(1);
        if let Some(report) = pushed
            && b.learn(report.sha.clone(), report.order)
        {
            b.last_push_time = Some(report.at.clone());
            drop(branches);
            self.apply_news.notify_one();
        }
    }

    /// Records the remote tip a fetch found (somebody else pushed) and the number its worker
    /// gave it, unless a newer tip is recorded.
    pub fn remote_tip(&self, branch: &BranchKey, sha: String, order: u64) {
        self.branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(branch.clone())
            .or_default()
            .learn(sha, order);
        self.branch_news.notify_one();
        self.apply_news.notify_one();
    }

    /// Records that a push webhook named the branch at `at` (RFC 3339).
    pub fn push_noticed(&self, branch: &BranchKey, at: String) {
        self.branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(branch.clone())
            .or_default()
            .last_push_notice_at = Some(at);
        self.branch_news.notify_one();
    }

    /// Resolves when something an applier claim acts on changed since the last call (one
    /// listener: the claims' coordinator).
    pub async fn apply_news(&self) {
        self.apply_news.notified().await;
    }

    /// Resolves when a branch learned something from outside since the last call.
    pub async fn branch_news(&self) {
        self.branch_news.notified().await;
    }

    /// A branch's activity.
    pub fn branch(&self, branch: &BranchKey) -> BranchActivity {
        self.branches
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(branch)
            .cloned()
            .unwrap_or_default()
    }

    /// A target's activity.
    pub fn activity(&self, target: &TargetRef) -> TargetActivity {
        self.targets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(target)
            .cloned()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(namespace: &str, name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "configmaps"), namespace, name)
    }

    /// The tasks that follow single writes settle in whatever order the runtime wakes them:
    /// the status kept the tip of whichever settled last, and a `GitBranch` could report an
    /// older commit than the remote's for good (an e2e test waited 30 s for it under load).
    #[test]
    fn reports_settling_out_of_order_keep_the_newest_tip() {
        let board = Board::default();
        let branch: BranchKey = ("file:///r.git".into(), "main".into());
        let t = ("ns".to_string(), "t".to_string());
        let report = |sha: &str, order: u64| PushReport {
            sha: sha.into(),
            order,
            at: format!("2026-12-03T00:00:0{order}Z"),
        };
        for _ in 0..3 {
            board.branch_submitted(&branch);
        }
        let (older, newer) = (report("a", 1), report("b", 2));
        board.pushed(&t, &newer);
        board.branch_settled(&branch, Some(&newer));
        board.pushed(&t, &older);
        board.branch_settled(&branch, Some(&older));
        let b = board.branch(&branch);
        assert_eq!(b.tip.as_deref(), Some("b"));
        assert_eq!(b.last_push_time, Some(newer.at.clone()));
        assert_eq!(b.pending, 1);
        assert_eq!(board.activity(&t).last_commit.as_deref(), Some("b"));
        // A foreign tip found before our newest push is older too; one found after is newer.
        board.remote_tip(&branch, "f".into(), 1);
        assert_eq!(board.branch(&branch).tip.as_deref(), Some("b"));
        board.remote_tip(&branch, "g".into(), 3);
        assert_eq!(board.branch(&branch).tip.as_deref(), Some("g"));
        // The same commit reported again refreshes its time.
        board.branch_settled(&branch, Some(&report("g", 3)));
        assert_eq!(board.branch(&branch).pending, 0);
        assert_eq!(
            board.branch(&branch).last_push_time.as_deref(),
            Some("2026-12-03T00:00:03Z")
        );
    }

    #[test]
    fn a_refusal_clears_when_its_object_or_a_resync_of_its_scope_publishes() {
        let board = Board::default();
        let t = ("ns".to_string(), "t".to_string());
        let configmaps = GroupResource::new("", "configmaps");
        let refusals = |b: &Board| b.activity(&t).refusals.len();
        board.refused(&t, WriteScope::Object(key("a", "x")), "anchors".into());
        board.refused(&t, WriteScope::Object(key("b", "y")), "anchors".into());
        board.accepted(&t, &WriteScope::Object(key("a", "other")));
        assert_eq!(refusals(&board), 2, "another object clears nothing");
        board.accepted(
            &t,
            &WriteScope::Resync(configmaps.clone(), Some("a".into())),
        );
        assert_eq!(
            refusals(&board),
            1,
            "a resync of namespace a covers a/x only"
        );
        board.accepted(&t, &WriteScope::Object(key("b", "y")));
        assert_eq!(refusals(&board), 0);
        let every = WriteScope::Resync(configmaps.clone(), None);
        board.refused(&t, every.clone(), "anchors".into());
        board.accepted(&t, &WriteScope::Object(key("a", "x")));
        assert_eq!(
            refusals(&board),
            1,
            "one object does not cover a refused resync"
        );
        board.accepted(&t, &every);
        assert_eq!(refusals(&board), 0);
    }

    /// The resync that skipped an unreadable object publishes after it was reported: that must
    /// not clear the report (it did, and the target stopped naming the object at random).
    #[test]
    fn an_unreadable_object_stays_reported_until_the_object_itself_publishes() {
        let board = Board::default();
        let t = ("ns".to_string(), "t".to_string());
        let refusals = |b: &Board| b.activity(&t).refusals.len();
        board.refused(
            &t,
            WriteScope::Unreadable(key("a", "x")),
            "cannot be read".into(),
        );
        board.accepted(
            &t,
            &WriteScope::Resync(GroupResource::new("", "configmaps"), None),
        );
        assert_eq!(refusals(&board), 1, "a resync skipped it");
        board.accepted(&t, &WriteScope::Object(key("a", "x")));
        assert_eq!(
            refusals(&board),
            0,
            "written again (or deleted): it publishes"
        );
    }
}
