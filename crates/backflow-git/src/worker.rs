//! The branch worker's shell: runs the decisions of [`BranchCore`] against a real repository.
//!
//! Every decision (when to fetch, commit, push, replay, back off; what is published, foreign or
//! diverged) is made by the pure core in `backflow-branch`. This shell owns the I/O: it reads
//! the clock, runs each [`Effect`] — fetch through the [`GitRemote`], build commits in the
//! [`LocalRepo`] with the [`Planner`], compare-and-swap push, keep [`DurableTips`] as refs in
//! the cache — and feeds each result back as the next [`Input`]. The calls mirror the core's
//! inputs: [`BranchWorker::submit`] and friends record what the caller wants,
//! [`BranchWorker::poll`] does whatever is due and says when to poll next, and what happened
//! comes out as [`WorkerEvent`]s from [`BranchWorker::take_events`]. The async
//! [`crate::driver`] wraps it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use backflow_api::{Clock, ObjectKey};
use backflow_branch::{
    Baseline, Held, Intent, LiveHeld, ObjectState, Origin, WriteKind, baseline_since,
};
use backflow_branch::{
    BranchCore, BuiltChain, BuiltWrite, CommitId, CoreConfig, CycleFailure, Divergence,
    DurableTips, Effect, Event, FetchedTip, FlushMark, ForeignCommit, Input, IntentSeq, IoFailure,
    Moment, PendingWrite, PlanError, PushAnswer, RefusedIntent, Tip, WorkerStats,
};
use git2::Oid;
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;

use crate::error::{RepoError, TreeError};
use crate::health::{RemoteHealth, RemoteProblem};
use crate::history::FolderHistory;
use crate::housekeeper::{Housekeeper, Store};
use crate::journal::{DeleteJournal, JournaledDelete};
use crate::message::{CommitPeople, MessageTemplates};
use crate::metrics::BranchMetrics;
use crate::remote::{ExpectedTip, GitRemote, PushOutcome, RemoteSpec, open_remote};
use crate::repo::{Identity, LocalRepo, tracking_ref};
use crate::tree::Overlay;
use backflow_branch::Planner;

/// How a branch worker behaves. [`WorkerConfig::new`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerConfig {
    /// The branch written (`main`, not `refs/heads/main`).
    pub branch: String,
    /// Windows, cooldown, refresh, retries: what the core decides with.
    pub timing: CoreConfig,
    /// Committer of every commit.
    pub committer: Identity,
    /// Author of commits whose changes no known user made; the committer when `None`.
    pub author: Option<Identity>,
    /// The email of a user who authors a commit: `{user}` stands for the user name.
    pub author_email: String,
    /// Commit message shapes.
    pub messages: MessageTemplates,
    /// Seed of the backoff jitter; the driver's caller picks a random one in production.
    pub seed: u64,
}

impl WorkerConfig {
    /// Defaults: those of [`CoreConfig::default`], the default identity and messages.
    pub fn new(branch: impl Into<String>) -> Self {
        Self {
            branch: branch.into(),
            timing: CoreConfig::default(),
            committer: Identity::default(),
            author: None,
            author_email: crate::message::DEFAULT_AUTHOR_EMAIL.to_string(),
            messages: MessageTemplates::default(),
            seed: 0,
        }
    }
}

/// Something the worker did that its owner may care about: the core's [`Event`]s, with times
/// on the wall clock.
#[derive(Debug, Clone)]
pub enum WorkerEvent {
    /// Every intent up to `through` is contained in the remote branch at `tip` (`None`: the
    /// branch does not exist, which happens only when nothing was ever written).
    Published {
        /// The last intent covered.
        through: IntentSeq,
        /// The remote tip holding them.
        tip: Option<CommitId>,
    },
    /// The branch moved to a commit the worker did not push.
    Foreign(ForeignCommit),
    /// The branch lost backflow's last push: resubmit every target, then
    /// [`BranchWorker::recovered`].
    Diverged(Divergence),
    /// The planner refused an intent; it is dropped and will never be published.
    Refused {
        /// The intent.
        seq: IntentSeq,
        /// Its target.
        target: String,
        /// Its object.
        key: ObjectKey,
        /// Why.
        error: PlanError,
    },
    /// A publication cycle failed; everything stays pending and is retried at `retry_at`.
    Failed {
        /// What went wrong.
        error: CycleFailure,
        /// When the next attempt is due.
        retry_at: SystemTime,
    },
}

/// The refs of the cache that keep [`DurableTips`] for `branch`.
fn durable_refs(branch: &str) -> [String; 3] {
    [
        format!("refs/backflow/seen/{branch}"),
        format!("refs/backflow/pushed/{branch}"),
        crate::repo::outgoing_ref(branch),
    ]
}

/// How far back [`BranchWorker::read_gone`] looks when it does not meet its starting commit.
pub const GONE_WALK: usize = 256;

/// A git2 object id as the core's commit id.
/// A file of a commit, as [`BranchWorker::read_folder`] returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderFile {
    /// Its path from the root of the tree.
    pub path: String,
    /// Its bytes.
    pub content: Vec<u8>,
}

pub(crate) fn commit_id(oid: Oid) -> CommitId {
    let mut bytes = [0u8; 20];
    let raw = oid.as_bytes();
    let n = raw.len().min(bytes.len());
    bytes[..n].copy_from_slice(&raw[..n]);
    CommitId::from_bytes(bytes)
}

/// The core's commit id as a git2 object id.
pub(crate) fn oid(id: CommitId) -> Oid {
    // 20 bytes are always a valid SHA-1 object id.
    Oid::from_bytes(id.as_bytes()).unwrap_or(Oid::ZERO_SHA1)
}

/// The branch worker. See the module documentation.
pub struct BranchWorker {
    cfg: WorkerConfig,
    core: BranchCore,
    repo: LocalRepo,
    remote: Box<dyn GitRemote>,
    planner: Box<dyn Planner>,
    clock: Arc<dyn Clock>,
    rng: StdRng,
    metrics: BranchMetrics,
    wake: Moment,
    events: Vec<WorkerEvent>,
    /// What the durable refs hold now (`seen` only while it differs from `pushed`).
    stored_refs: DurableTips,
    /// A routine record not written yet, and when the refs were last written.
    deferred_refs: Option<DurableTips>,
    refs_written_at: Option<Moment>,
    /// Deletes taken and not yet pushed, on disk (see `journal.rs`).
    journal: DeleteJournal,
    /// The journal's deletes this run submitted again at start: each is judged against
    /// backflow's last push as the worker knows it when it builds (see [`Self::resubmitted_held`]).
    resubmitted: BTreeSet<IntentSeq>,
    /// Why the last cycle failed, until the remote answers again.
    health: RemoteHealth,
    /// Rolls the cache's and a `file://` remote's small packs up on a thread of its own
    /// (`None`: it could not be started, and [`BranchWorker::maintain`] rolls up here).
    housekeeper: Option<Housekeeper>,
}

/// The longest a routine record of the tips waits before it is written.
const REF_PACE: Duration = Duration::from_secs(1);

/// How far back a start-up snapshot's objects are read, besides the commit the live side held
/// in full: at most this many commits since it (each read costs a tree and the objects'
/// documents)...
const WALK_COMMITS: usize = 64;

/// ... and only while at most this many objects read as changed (a mass of live changes made
/// while backflow was down is published as it is, without the walk).
const WALK_OBJECTS: usize = 256;

impl Drop for BranchWorker {
    fn drop(&mut self) {
        self.flush_refs(true);
    }
}

impl std::fmt::Debug for BranchWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BranchWorker")
            .field("remote", &self.remote.display_url())
            .field("branch", &self.cfg.branch)
            .field("phase", self.core.phase())
            .field("remote_tip", &self.core.remote_tip())
            .field("pending", &self.core.pending_writes().len())
            .finish_non_exhaustive()
    }
}

impl BranchWorker {
    /// A worker writing `cfg.branch` of `remote`, building commits in `repo`. What the last run
    /// kept (the tip it saw, its last push) is read from the cache.
    pub fn new(
        cfg: WorkerConfig,
        repo: LocalRepo,
        remote: Box<dyn GitRemote>,
        planner: Box<dyn Planner>,
        clock: Arc<dyn Clock>,
        metrics: BranchMetrics,
    ) -> Self {
        let (durable, stored_refs) = read_durable(&repo, &cfg.branch);
        let (journal, left) = DeleteJournal::open(repo.path(), &cfg.branch);
        let now = Moment(clock.monotonic());
        let mut worker = Self {
            core: BranchCore::new(cfg.timing.clone(), durable, now),
            rng: StdRng::seed_from_u64(cfg.seed),
            wake: now,
            repo,
            remote,
            planner,
            clock,
            metrics,
            events: Vec::new(),
            stored_refs,
            deferred_refs: None,
            refs_written_at: None,
            journal,
            resubmitted: BTreeSet::new(),
            health: RemoteHealth::default(),
            housekeeper: Housekeeper::spawn(&cfg.branch),
            cfg,
        };
        if !left.is_empty() {
            tracing::info!(branch = %worker.cfg.branch, deletes = left.len(), "resubmitting deletes a previous run took but did not push");
        }
        for delete in left {
            let seq = worker.submit(Intent::delete(delete.target, delete.key));
            worker.resubmitted.insert(seq);
        }
        worker
    }

    /// A worker for `spec`, with its cache under `data_dir` and the transport `spec` asks for.
    pub fn open(
        data_dir: &Path,
        spec: &RemoteSpec,
        cfg: WorkerConfig,
        planner: Box<dyn Planner>,
        clock: Arc<dyn Clock>,
        metrics: BranchMetrics,
    ) -> Result<Self, RepoError> {
        let repo = LocalRepo::open_cache(data_dir, &spec.url)?;
        Ok(Self::new(
            cfg,
            repo,
            open_remote(spec),
            planner,
            clock,
            metrics,
        ))
    }

    /// What the worker last found of its remote (shared: it follows the worker).
    #[must_use]
    pub fn health(&self) -> RemoteHealth {
        self.health.clone()
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &WorkerConfig {
        &self.cfg
    }

    /// The decisions, for inspection.
    #[must_use]
    pub fn core(&self) -> &BranchCore {
        &self.core
    }

    /// The local cache.
    #[must_use]
    pub fn repo(&self) -> &LocalRepo {
        &self.repo
    }

    /// What the worker believes the remote tip is.
    #[must_use]
    pub fn remote_tip(&self) -> Tip {
        self.core.remote_tip()
    }

    /// The last intent known to be on the remote.
    #[must_use]
    pub fn published_through(&self) -> IntentSeq {
        self.core.published_through()
    }

    /// The last intent received.
    #[must_use]
    pub fn last_seq(&self) -> IntentSeq {
        self.core.last_seq()
    }

    /// Decided writes not yet contained in a successful push.
    #[must_use]
    pub fn pending_writes(&self) -> &[PendingWrite] {
        self.core.pending_writes()
    }

    /// Objects waiting in the open commit window.
    #[must_use]
    pub fn window_len(&self) -> usize {
        self.core.window_len()
    }

    /// Whether anything is unpublished (in the window or pending).
    #[must_use]
    pub fn has_unpublished(&self) -> bool {
        self.core.has_unpublished()
    }

    /// What the worker did so far.
    #[must_use]
    pub fn stats(&self) -> WorkerStats {
        self.core.stats()
    }

    /// Hands over the events since the last call.
    pub fn take_events(&mut self) -> Vec<WorkerEvent> {
        std::mem::take(&mut self.events)
    }

    /// Records an intent in the open window (with a zero window it is decided at once). Returns
    /// its sequence number; it is published once a [`WorkerEvent::Published`] covers it.
    pub fn submit(&mut self, intent: Intent) -> IntentSeq {
        let delete = matches!(intent.state, ObjectState::Absent).then(|| JournaledDelete {
            target: intent.target.clone(),
            key: intent.key.clone(),
        });
        if let ObjectState::Present(_) = intent.state {
            self.journal.superseded(&intent.target, &intent.key);
        }
        self.run(Input::Submit(intent));
        let seq = self.core.last_seq();
        if let Some(delete) = delete {
            self.journal.record(seq, delete);
        }
        seq
    }

    /// Records a resync of `target`: its own write, decided after every intent submitted before
    /// it, and gathered with the target's other resyncs of the same commit window (a start's
    /// snapshots of every type become one commit). Returns the sequence number that, once
    /// published, covers it.
    pub fn submit_resync(&mut self, target: impl Into<String>, intents: Vec<Intent>) -> IntentSeq {
        for intent in &intents {
            if let ObjectState::Present(_) = intent.state {
                self.journal.superseded(&intent.target, &intent.key);
            }
        }
        self.run(Input::Resync {
            target: target.into(),
            intents,
        });
        self.core.resync_receipt()
    }

    /// Closes the window with the caller's commit message (a `CommitRequest`) and takes a flush
    /// mark: the save is published at once, ignoring the cooldown.
    pub fn commit_request(&mut self, message: impl Into<String>) -> FlushMark {
        self.run(Input::CommitRequest {
            message: message.into(),
        });
        self.core.flush_mark()
    }

    /// Closes the open window and takes the flush mark: the last intent decided so far.
    /// Everything up to it is published at the next poll, ignoring the cooldown; a
    /// [`WorkerEvent::Published`] covering the mark carries the resulting remote tip (emitted
    /// even when there was nothing to publish). Intents submitted later do not delay it.
    pub fn flush(&mut self) -> FlushMark {
        self.run(Input::Flush);
        self.core.flush_mark()
    }

    /// Every file under `folder` (`""` or `"."`: the whole tree) of `commit`, as (path, bytes)
    /// sorted by path: what an applier applies. The commit must be in the cache (every tip the
    /// worker saw or pushed is).
    pub fn read_folder(
        &self,
        commit: CommitId,
        folder: &str,
    ) -> Result<Vec<FolderFile>, RepoError> {
        let tree = self.repo.commit_tree(oid(commit))?;
        let dir = if folder == "." { "" } else { folder };
        self.repo
            .list_file_ids(tree, dir)?
            .into_iter()
            .map(|(path, id)| {
                let content = self.repo.read_blob(id)?;
                Ok(FolderFile { path, content })
            })
            .collect()
    }

    /// The files under `folder` that some commit before `commit` held and `commit` does not: on
    /// `commit`'s first-parent history back to `since` (included), or at most
    /// [`GONE_WALK`] commits back when `since` is `None` or not on it. Each file as the newest
    /// of those commits held it. Found from each commit's removals (a tree diff), so the walk
    /// costs what the commits changed. What an applier needs to remove objects whose files went away
    /// before it ever applied them (an object created through the API, published, and removed
    /// by a push before the applier adopted it).
    pub fn read_gone(
        &self,
        since: Option<CommitId>,
        commit: CommitId,
        folder: &str,
    ) -> Result<Vec<FolderFile>, RepoError> {
        let dir = if folder == "." { "" } else { folder };
        let now: std::collections::BTreeSet<String> = self
            .repo
            .list_file_ids(self.repo.commit_tree(oid(commit))?, dir)?
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        // Walking back from `commit`, each commit's removals (what its parent held and it does
        // not): the first removal met of a path is its newest, with the content it last had.
        let mut gone = std::collections::BTreeMap::new();
        let mut at = Some(oid(commit));
        for _ in 0..GONE_WALK {
            let Some(c) = at else { break };
            if since.is_some_and(|s| oid(s) == c) {
                break;
            }
            for (path, id) in self.repo.removed_files(c, dir)? {
                if !now.contains(&path) {
                    gone.entry(path).or_insert(id);
                }
            }
            at = self.repo.parent(c)?;
        }
        gone.into_iter()
            .map(|(path, id)| {
                let content = self.repo.read_blob(id)?;
                Ok(FolderFile { path, content })
            })
            .collect()
    }

    /// The commits on `commit`'s first-parent line that changed files under `folder`, newest
    /// first, at most `limit` (see [`LocalRepo::folder_history`]).
    pub fn read_history(
        &self,
        commit: CommitId,
        folder: &str,
        limit: usize,
    ) -> Result<FolderHistory, RepoError> {
        let dir = if folder == "." { "" } else { folder };
        Ok(FolderHistory {
            backflow: self.cfg.committer.clone(),
            changes: self.repo.folder_history(oid(commit), dir, limit)?,
        })
    }

    /// New settings from the owner: commit identities and messages for the commits built from
    /// now on, the timing, and the remote's transport and credentials (the remote is opened
    /// again, so a rotated key or token is used by the next fetch or push). The backoff seed
    /// stays.
    pub fn reconfigure(&mut self, cfg: WorkerConfig, remote: &RemoteSpec) {
        let seed = self.cfg.seed;
        self.remote = open_remote(remote);
        self.cfg = WorkerConfig { seed, ..cfg };
        self.run(Input::Reconfigure(self.cfg.timing.clone()));
    }

    /// Someone waits for what was submitted so far: the window closes at the next opportunity
    /// ([`Input::Hurry`]).
    pub fn hurry(&mut self) {
        self.run(Input::Hurry);
    }

    /// Every stream of `target` has handed in its snapshot ([`Input::ResyncComplete`]).
    pub fn resync_complete(&mut self, target: String) {
        self.run(Input::ResyncComplete { target });
    }

    /// A hint that the branch moved (a push webhook): the remote is looked at on the next poll.
    pub fn notify_remote_moved(&mut self) {
        self.run(Input::RemoteMoved);
    }

    /// Every target of the branch was resubmitted after a [`WorkerEvent::Diverged`]:
    /// publication goes on at the next poll.
    pub fn recovered(&mut self) {
        self.run(Input::Recovered);
    }

    /// Does whatever is due now, housekeeping included ([`BranchWorker::maintain`]), and
    /// returns when the worker next wants to be polled, on the wall clock. (A caller that
    /// answers writers calls [`BranchWorker::poll_for`], answers, then `maintain`.)
    pub fn poll(&mut self) -> SystemTime {
        let mut wait = self.poll_for();
        while self.maintain() {
            wait = self.poll_for();
        }
        self.clock.now() + wait
    }

    /// Does whatever is due now and returns how long until the worker next wants to be polled
    /// (measured on the monotonic clock, so a wall-clock step changes nothing).
    pub fn poll_for(&mut self) -> Duration {
        self.run(Input::Tick);
        self.flush_refs(false);
        let mut wake = self.wake;
        if let (Some(_), Some(at)) = (self.deferred_refs, self.refs_written_at) {
            wake = wake.min(at + REF_PACE);
        }
        wake.saturating_since(self.now())
    }

    /// Housekeeping no write waits for: rolls up the small packs that builds left in the cache
    /// and pushes left in a `file://` remote, when enough were written since the last look.
    /// The roll-ups run on the worker's roll-up thread (`housekeeper.rs`), so the next commit
    /// does not wait for them; this hands them over and reopens the handles whose packs a
    /// finished roll-up removed. Call it after answering the writes a poll published (the
    /// driver does); a failure is logged and changes nothing else. Returns whether it did
    /// work here (time passed: poll again before waiting).
    pub fn maintain(&mut self) -> bool {
        let Some(keeper) = &self.housekeeper else {
            return self.maintain_here();
        };
        if !self.repo.is_staged()
            && keeper.take_rolled(Store::Cache)
            && let Err(e) = self.repo.packs_rolled_up()
        {
            tracing::warn!(branch = %self.cfg.branch, error = %e, "cannot reopen the cache after rolling its packs up");
        }
        if keeper.take_rolled(Store::Remote) {
            self.remote.packs_rolled_up();
        }
        let mut gone = false;
        if let Some(path) = self.repo.roll_up_due() {
            gone |= !keeper.roll_up(Store::Cache, path.to_path_buf());
        }
        if let Some(path) = self.remote.roll_up_due() {
            gone |= !keeper.roll_up(Store::Remote, path);
        }
        if gone {
            tracing::warn!(branch = %self.cfg.branch, "the roll-up thread has stopped; the branch worker rolls packs up itself");
            self.housekeeper = None;
        }
        false
    }

    /// Waits for the roll-ups [`BranchWorker::maintain`] handed over to finish, and takes in
    /// what they did: for a caller that wants the repositories at rest (a test counting what a
    /// worker keeps, a benchmark's end).
    pub fn settle(&mut self) {
        if let Some(keeper) = &self.housekeeper {
            keeper.wait_idle();
        }
        self.maintain();
    }

    /// [`BranchWorker::maintain`] without a roll-up thread: everything on this one.
    fn maintain_here(&mut self) -> bool {
        let cache = match self.repo.roll_up_packs() {
            Ok(looked) => looked,
            Err(e) => {
                tracing::warn!(branch = %self.cfg.branch, error = %e, "cannot reopen the cache after rolling its packs up");
                true
            }
        };
        self.remote.maintain() || cache
    }

    fn now(&self) -> Moment {
        Moment(self.clock.monotonic())
    }

    /// Steps the core with `input`, runs every effect, and feeds each I/O result back until
    /// nothing is in flight. Requests (submit, flush, …) start no I/O in the core, so for them
    /// this only records; the next poll does the work, and a burst goes out in one push.
    fn run(&mut self, input: Input) {
        let mut next = Some(input);
        while let Some(input) = next.take() {
            let now = self.now();
            let before = self.core.stats();
            let effects = self.core.step(input, now, &mut self.rng);
            for effect in effects {
                if let Some(answer) = self.apply(effect) {
                    next = Some(answer);
                }
            }
            let after = self.core.stats();
            for _ in before.replays..after.replays {
                self.metrics.replay();
            }
        }
        self.metrics.pending(self.core.pending_writes().len());
    }

    /// Runs one effect; an I/O effect returns its answer.
    fn apply(&mut self, effect: Effect) -> Option<Input> {
        match effect {
            Effect::Fetch { .. } | Effect::Build { .. } | Effect::Push { .. } => self.io(effect),
            Effect::Persist(tips) => {
                self.persist(tips);
                None
            }
            Effect::Emit(event) => {
                self.emit(event);
                None
            }
            Effect::WakeAt(at) => {
                self.wake = at;
                None
            }
        }
    }

    fn io(&mut self, effect: Effect) -> Option<Input> {
        match effect {
            Effect::Fetch { check } => {
                self.metrics.remote_read();
                tracing::debug!(branch = %self.cfg.branch, "reading the remote's tip");
                let fetched = self.fetch(&check);
                if fetched.is_ok() {
                    // The remote answered: whatever failed before (a credential, a host key)
                    // works now.
                    self.health.set(None);
                }
                Some(Input::Fetched(fetched))
            }
            Effect::Build {
                parent,
                from,
                count,
            } => {
                let started = self.now();
                let built = self.build(parent, from, count);
                let seconds = self.now().saturating_since(started).as_secs_f64();
                self.metrics.build(seconds);
                tracing::debug!(branch = %self.cfg.branch, writes = count, seconds, "built commits");
                Some(Input::Built(built))
            }
            Effect::Push { head, expected } => Some(Input::Pushed(self.push(head, expected))),
            _ => None,
        }
    }

    fn emit(&mut self, event: Event) {
        let event = match event {
            Event::Published { through, tip } => {
                self.journal.published(through);
                WorkerEvent::Published { through, tip }
            }
            Event::Foreign(commit) => {
                tracing::info!(remote = self.remote.display_url(), branch = %self.cfg.branch, tip = %commit.tip, "foreign commit");
                self.metrics.foreign();
                WorkerEvent::Foreign(commit)
            }
            Event::Diverged(divergence) => {
                tracing::warn!(
                    remote = self.remote.display_url(),
                    branch = %self.cfg.branch,
                    tip = ?divergence.tip.map(|t| t.to_string()),
                    lost = %divergence.lost,
                    "the branch no longer holds backflow's last push (force-push or deleted branch): every target is resynced"
                );
                WorkerEvent::Diverged(divergence)
            }
            Event::Refused {
                seq,
                target,
                key,
                error,
            } => {
                self.journal.refused(seq);
                tracing::warn!(%target, %key, %error, "intent refused by the planner");
                WorkerEvent::Refused {
                    seq,
                    target,
                    key,
                    error,
                }
            }
            Event::Failed { error, retry_at } => {
                self.health.set(Some(RemoteProblem::of(&error)));
                let retry_in = retry_at.saturating_since(self.now());
                tracing::warn!(
                    remote = self.remote.display_url(),
                    branch = %self.cfg.branch,
                    pending = self.core.pending_writes().len(),
                    error = %error,
                    ?retry_in,
                    "publication failed; everything stays pending"
                );
                WorkerEvent::Failed {
                    error,
                    retry_at: self.clock.now() + retry_in,
                }
            }
        };
        self.events.push(event);
    }

    /// Keeps `tips` as refs of the cache. A routine advance (backflow's own push, seen and
    /// pushed equal) is written at most once per [`REF_PACE`]: a ref update costs about as much
    /// as the rest of a commit, and a record that lags a moment behind is still an ancestor of
    /// the real last push (a divergence past it is still seen; the start-up resync restores the
    /// rest). Anything else is written at once, and so is the commit about to be sent (before
    /// it goes out: one ref per push).
    fn persist(&mut self, tips: DurableTips) {
        if tips.sending != self.stored_refs.sending {
            let [_, _, sending_ref] = durable_refs(&self.cfg.branch);
            self.write_ref(&sending_ref, tips.sending);
            self.stored_refs.sending = tips.sending;
        }
        let routine = tips.seen == tips.pushed;
        if routine && self.within_ref_pace() {
            self.deferred_refs = Some(tips);
            return;
        }
        self.write_refs(tips);
    }

    /// Writes a record [`BranchWorker::persist`] held back, once its pace allows (or now, with
    /// `force`).
    fn flush_refs(&mut self, force: bool) {
        if !force && self.within_ref_pace() {
            return;
        }
        if let Some(tips) = self.deferred_refs.take() {
            self.write_refs(tips);
        }
    }

    /// Whether the refs were written less than [`REF_PACE`] ago.
    fn within_ref_pace(&self) -> bool {
        self.refs_written_at
            .is_some_and(|at| self.now().saturating_since(at) < REF_PACE)
    }

    /// Writes what changed: `pushed` always, `seen` only while it differs from `pushed`.
    fn write_refs(&mut self, tips: DurableTips) {
        self.deferred_refs = None;
        let [seen_ref, pushed_ref, _] = durable_refs(&self.cfg.branch);
        let seen_apart = tips.seen.filter(|_| tips.seen != tips.pushed);
        let wanted = [(pushed_ref, tips.pushed), (seen_ref, seen_apart)];
        let stored = [self.stored_refs.pushed, self.stored_refs.seen];
        for ((name, tip), stored) in wanted.into_iter().zip(stored) {
            if tip != stored {
                self.write_ref(&name, tip);
                self.refs_written_at = Some(self.now());
            }
        }
        self.stored_refs.seen = seen_apart;
        self.stored_refs.pushed = tips.pushed;
    }

    /// Points `name` at `tip` (removes it for none).
    fn write_ref(&self, name: &str, tip: Option<CommitId>) {
        let result = match tip {
            Some(id) => self.repo.set_ref(name, oid(id)),
            None => self.repo.remove_ref(name),
        };
        if let Err(e) = result {
            // The next run then reports a foreign commit twice or misses a divergence the
            // mirror's start-up resync repairs anyway; nothing acknowledged is lost.
            tracing::error!(branch = %self.cfg.branch, error = %e, "cannot record the branch's tips in the cache");
        }
    }

    fn fetch(&mut self, check: &BTreeSet<CommitId>) -> Result<FetchedTip, IoFailure> {
        let tip = self
            .remote
            .fetch(&self.repo, &self.cfg.branch)
            .map_err(IoFailure::new)?;
        let mut contains = BTreeSet::new();
        if let Some(tip) = tip {
            for &id in check {
                if self.tip_contains(tip, oid(id)).map_err(IoFailure::new)? {
                    contains.insert(id);
                }
            }
        }
        Ok(FetchedTip {
            tip: Tip::from_remote(tip.map(commit_id)),
            contains,
        })
    }

    /// Whether `tip` is `commit` or descends from it. A commit the cache does not hold cannot be
    /// in a tip whose whole history was just fetched into it.
    fn tip_contains(&self, tip: Oid, commit: Oid) -> Result<bool, RepoError> {
        if tip == commit {
            return Ok(true);
        }
        if !self.repo.has_object(commit) {
            return Ok(false);
        }
        self.repo
            .git2()
            .graph_descendant_of(tip, commit)
            .map_err(|source| RepoError {
                op: format!("checking whether {tip} contains {commit}"),
                path: self.repo.path().to_path_buf(),
                source: source.into(),
            })
    }

    fn push(&mut self, head: CommitId, expected: Tip) -> PushAnswer {
        let expected = ExpectedTip::from(expected.commit().map(oid));
        let started = self.now();
        let outcome = self
            .remote
            .push(&self.repo, &self.cfg.branch, oid(head), expected);
        let seconds = self.now().saturating_since(started).as_secs_f64();
        match outcome {
            Ok(PushOutcome::Accepted) => {
                self.metrics.push("accepted", seconds);
                tracing::debug!(branch = %self.cfg.branch, tip = %head, "pushed");
                PushAnswer::Accepted
            }
            Ok(PushOutcome::Rejected { reason }) => {
                self.metrics.push("rejected", seconds);
                tracing::info!(branch = %self.cfg.branch, %expected, %reason, "push refused; fetching");
                PushAnswer::Rejected { reason }
            }
            Err(e) => {
                self.metrics.push("error", seconds);
                tracing::info!(branch = %self.cfg.branch, error = %e, "push got no answer; looking whether it landed");
                PushAnswer::Lost(IoFailure::new(e))
            }
        }
    }

    /// Writes one commit per pending write `from .. from + count`, the first on `parent`.
    /// Builds pending writes `from .. from + count` on `parent`. Their objects are staged in
    /// memory and reach the cache as one pack once the chain is built.
    fn build(
        &mut self,
        parent: Option<CommitId>,
        from: usize,
        count: usize,
    ) -> Result<BuiltChain, IoFailure> {
        self.repo.stage().map_err(IoFailure::new)?;
        let built = self.build_staged(parent, from, count);
        let head = built
            .as_ref()
            .ok()
            .and_then(|chain| chain.writes.iter().rev().find_map(|w| w.commit).map(oid));
        self.repo.unstage(head).map_err(IoFailure::new)?;
        built
    }

    fn build_staged(
        &mut self,
        parent: Option<CommitId>,
        from: usize,
        count: usize,
    ) -> Result<BuiltChain, IoFailure> {
        let mut parent = parent.map(oid);
        let mut tree = match parent {
            Some(commit) => self.repo.commit_tree(commit),
            None => self.repo.empty_tree(),
        }
        .map_err(IoFailure::new)?;
        let now = self.clock.now();
        let mut chain = BuiltChain::default();
        let writes = self
            .core
            .pending_writes()
            .get(from..from + count)
            .unwrap_or_default();
        for write in writes {
            let (built, new_tree) = self.build_write(write, tree, parent)?;
            let mut built = built;
            if new_tree != tree {
                let people = CommitPeople::of(write, &self.cfg.author_email);
                let author = people
                    .author
                    .as_ref()
                    .or(self.cfg.author.as_ref())
                    .unwrap_or(&self.cfg.committer);
                let mut message = self.cfg.messages.render(write);
                if !matches!(write.kind, WriteKind::Save { .. }) {
                    // A saved commit's message is used as it was asked for.
                    message.push_str(&people.trailers());
                }
                let commit = self
                    .repo
                    .write_commit(new_tree, parent, author, &self.cfg.committer, now, &message)
                    .map_err(IoFailure::new)?;
                self.metrics.commit();
                parent = Some(commit);
                tree = new_tree;
                built.commit = Some(commit_id(commit));
            }
            chain.writes.push(built);
        }
        Ok(chain)
    }

    /// Plans one write on `tree`: what it drops, what the planner refuses, the tree it makes.
    fn build_write(
        &self,
        write: &PendingWrite,
        tree: Oid,
        parent: Option<Oid>,
    ) -> Result<(BuiltWrite, Oid), IoFailure> {
        let mut overlay = Overlay::new(&self.repo, tree);
        let mut built = BuiltWrite::default();
        // The planner sees the whole write at once, so per-tree work (indexing the folder) is
        // done once per write rather than once per intent.
        let resolved = self.with_baselines(write, parent)?;
        let intents: Vec<&Intent> = resolved.iter().map(AsRef::as_ref).collect();
        let planned = self.planner.plan_all(&overlay, &intents);
        for ((slot, (seq, intent)), planned) in write.intents.iter().zip(planned) {
            match planned {
                Ok(updates) => {
                    let unchanged = !write.is_screened()
                        && (!overlay.would_change(&updates)?
                            || self.echo_held(intent)
                            || self.resubmitted_held(*seq, intent));
                    if unchanged {
                        // Git already reads like this: the intent is dropped for good, so it
                        // can never overwrite a later foreign change on replay.
                        built.unchanged.push(slot.clone());
                    } else {
                        overlay.apply(updates);
                    }
                }
                Err(TreeError::Plan(error)) => built.refused.push(RefusedIntent {
                    slot: slot.clone(),
                    seq: *seq,
                    error,
                }),
                Err(TreeError::Read(e)) => return Err(e),
            }
        }
        let new_tree = overlay.write()?;
        Ok((built, new_tree))
    }

    /// The write's intents, each whose baseline is a commit ([`Baseline::Commit`]) with what
    /// that commit holds of its object read in. A commit the cache cannot read leaves its
    /// intents whole (as before baselines existed), logged.
    ///
    /// The live side also held what backflow's last push carried of the objects it wrote, and
    /// whatever the operation it applied since wrote of its commit: an object that reads as
    /// either held it did not change live since, even when the commit the live side last
    /// applied in full is older. So a push made over backflow's commit of a live edit, or over
    /// objects an apply cut short had written, while backflow was down is Git's change, not
    /// overwritten by the start-up resync.
    fn with_baselines<'w>(
        &self,
        write: &'w PendingWrite,
        parent: Option<Oid>,
    ) -> Result<Vec<Cow<'w, Intent>>, IoFailure> {
        let mut intents: Vec<Cow<'w, Intent>> = write
            .intents
            .values()
            .map(|(_, i)| Cow::Borrowed(i))
            .collect();
        let commits: BTreeSet<LiveHeld> = intents
            .iter()
            .filter_map(|i| match i.baseline {
                Some(Baseline::Commit(c)) => Some(c),
                _ => None,
            })
            .collect();
        for live_held in commits {
            let commit = live_held.in_step;
            let at: Vec<usize> = (0..intents.len())
                .filter(|&n| intents[n].baseline == Some(Baseline::Commit(live_held)))
                .collect();
            let asked: Vec<&Intent> = at.iter().map(|&n| intents[n].as_ref()).collect();
            let held = self.held_at(commit, &asked)?.unwrap_or_else(|| {
                tracing::warn!(branch = %self.cfg.branch, %commit, "cannot read the commit the live side last held; its objects are written whole");
                vec![Held::Nothing; at.len()]
            });
            // Only objects that do not read as that commit held them may read as the operation
            // applied since or the last push did (most objects did not change: no second tree
            // read for them) — or all, on a branch rewritten past that commit: one that reads
            // as a later commit the branch holds keeps Git's removal since.
            let descends = self.on_branch(parent, commit)?;
            let changed: Vec<usize> = (0..at.len())
                .filter(|&i| !descends || !reads_as(&intents[at[i]], &held[i]))
                .collect();
            let mut later: Vec<CommitId> =
                [live_held.applying, self.last_push_after(commit, descends)?]
                    .into_iter()
                    .flatten()
                    .collect();
            // The last commit the branch shares with the commit read: that one, or on a branch
            // rewritten past it, where the rewrite left off.
            let shared = if descends {
                Some(commit)
            } else {
                self.shared_with(parent, commit)?
            };
            if let Some(shared) = shared.filter(|_| changed.len() <= WALK_OBJECTS) {
                later.extend(self.first_parents_since(parent, shared)?);
            }
            later.retain(|c| *c != commit);
            let mut since = self.read_as_later(&asked, changed, later, parent)?;
            let rewritten = !descends || since.whole.values().any(|(_, on)| !on);
            let removed_since = if rewritten {
                self.held_after_rewrite([shared, live_held.listed_on], &asked)?
            } else {
                Vec::new()
            };
            for (i, (n, held)) in at.into_iter().zip(held).enumerate() {
                // An object that reads as no later commit held it whole may still read as
                // one in some fields: those did not change live since.
                let held = match (held, since.fields.remove(&i), &intents[n].state) {
                    (Held::Object(held), Some(later), ObjectState::Present(live)) => {
                        let later: Vec<&Value> = later.iter().collect();
                        Held::Object(baseline_since(held.as_ref(), &later, &live.value()))
                    }
                    (held, ..) => held,
                };
                let (held, on_branch) = since.whole.remove(&i).unwrap_or((held, descends));
                let removed_since = removed_since.get(i).copied().unwrap_or(false);
                let resolved = intents[n].with_held(held);
                intents[n] = Cow::Owned(published_again(resolved, on_branch || removed_since));
            }
        }
        Ok(intents)
    }

    /// Which of `objects` (by index; only the `changed` ones are read) read as one of the
    /// `later` commits, tried in order, held them: what that commit held, and whether the
    /// branch at `parent` holds it; and for the others, what the later commits the branch
    /// holds held of them (read field by field, [`baseline_since`]).
    fn read_as_later(
        &self,
        objects: &[&Intent],
        mut changed: Vec<usize>,
        later: Vec<CommitId>,
        parent: Option<Oid>,
    ) -> Result<ReadSince, IoFailure> {
        let mut since = ReadSince::default();
        let mut tried = BTreeSet::new();
        for later in later {
            if changed.is_empty() {
                break;
            }
            if !tried.insert(later) {
                continue;
            }
            let asked: Vec<&Intent> = changed.iter().map(|&i| objects[i]).collect();
            let Some(later_held) = self.held_at(later, &asked)? else {
                continue;
            };
            let later_on_branch = self.on_branch(parent, later)?;
            let mut still = Vec::new();
            for (i, h) in changed.into_iter().zip(later_held) {
                if reads_as(objects[i], &h) {
                    since.whole.insert(i, (h, later_on_branch));
                    since.fields.remove(&i);
                    continue;
                }
                if let (true, Held::Object(Some(doc))) = (later_on_branch, h) {
                    since.fields.entry(i).or_default().push(doc);
                }
                still.push(i);
            }
            changed = still;
        }
        Ok(since)
    }

    /// The commits on `parent`'s first-parent history after `commit`, newest first, at most
    /// [`WALK_COMMITS`] (the branch holds `commit`): what the live side may have held since the
    /// commit it held in full — backflow's own commits of live edits, and Git's changes an
    /// apply brought.
    fn first_parents_since(
        &self,
        parent: Option<Oid>,
        commit: CommitId,
    ) -> Result<Vec<CommitId>, IoFailure> {
        let mut out = Vec::new();
        let mut at = parent;
        while let Some(c) = at {
            let id = commit_id(c);
            if id == commit || out.len() == WALK_COMMITS {
                break;
            }
            out.push(id);
            at = self.repo.parent(c).map_err(IoFailure::new)?;
        }
        Ok(out)
    }

    /// Which of `asked` the branch held after a rewrite past the commit the live side held, at
    /// any of `after` (the last commit the branch shares with that one, and the tip when the
    /// live side was listed, [`LiveHeld::listed_on`]). Git lacking such a document now removed
    /// it after the rewrite.
    fn held_after_rewrite(
        &self,
        after: [Option<CommitId>; 2],
        asked: &[&Intent],
    ) -> Result<Vec<bool>, IoFailure> {
        let mut held_since = vec![false; asked.len()];
        for commit in after.into_iter().flatten() {
            let Some(held) = self.held_at(commit, asked)? else {
                continue;
            };
            for (since, held) in held_since.iter_mut().zip(held) {
                *since |= matches!(held, Held::Object(Some(_)));
            }
        }
        Ok(held_since)
    }

    /// The last commit the branch at `parent` shares with `commit` (their merge base), when
    /// the cache has both.
    fn shared_with(
        &self,
        parent: Option<Oid>,
        commit: CommitId,
    ) -> Result<Option<CommitId>, IoFailure> {
        let Some(parent) = parent.filter(|_| self.repo.has_object(oid(commit))) else {
            return Ok(None);
        };
        match self.repo.git2().merge_base(parent, oid(commit)) {
            Ok(base) => Ok(Some(commit_id(base))),
            Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
            Err(e) => Err(IoFailure::new(e)),
        }
    }

    /// Whether the branch, at the build's `parent`, holds `commit`.
    fn on_branch(&self, parent: Option<Oid>, commit: CommitId) -> Result<bool, IoFailure> {
        match parent {
            Some(parent) => self
                .tip_contains(parent, oid(commit))
                .map_err(IoFailure::new),
            None => Ok(false),
        }
    }

    /// What `commit` holds of the objects `asked` names; `None` when the cache cannot read it.
    fn held_at(&self, commit: CommitId, asked: &[&Intent]) -> Result<Option<Vec<Held>>, IoFailure> {
        let Ok(tree) = self.repo.commit_tree(oid(commit)) else {
            return Ok(None);
        };
        let view = Overlay::new(&self.repo, tree);
        match self.planner.held(&view, asked) {
            Ok(held) => Ok(Some(held)),
            Err(TreeError::Read(e)) => Err(e),
            Err(TreeError::Plan(_)) => Ok(Some(vec![Held::Nothing; asked.len()])),
        }
    }

    /// Backflow's last push, when it came after `commit`: it descends from it, or the branch
    /// was rewritten past it (`on_branch` false), and backflow pushed onto what replaced it.
    fn last_push_after(
        &self,
        commit: CommitId,
        on_branch: bool,
    ) -> Result<Option<CommitId>, IoFailure> {
        let Some(pushed) = self.core.durable().pushed.filter(|p| *p != commit) else {
            return Ok(None);
        };
        let after = !on_branch
            || self
                .tip_contains(oid(pushed), oid(commit))
                .map_err(IoFailure::new)?;
        Ok(after.then_some(pushed))
    }

    /// Whether `intent` is an applier's echo of what the commit it is judged against held (see
    /// [`Origin::Echo`]): then it repeats Git, whatever the build's base says since. A commit
    /// the cache cannot read answers no (the echo is judged on the base alone, as before).
    fn echo_held(&self, intent: &Intent) -> bool {
        let Origin::Echo { of: Some(of) } = intent.origin else {
            return false;
        };
        self.reads_like(of, intent)
    }

    /// Whether `intent`, a delete the journal kept and this run submitted again (`seq`), is
    /// held by backflow's last push as the worker knows it now — after its first fetch, which
    /// finds whether the push a dying process was sending landed. Then the delete reached Git
    /// already, and a file there now is a push made since (the object created again in Git):
    /// the delete must not remove it.
    fn resubmitted_held(&self, seq: IntentSeq, intent: &Intent) -> bool {
        let pushed = self.core.durable().pushed;
        match pushed.filter(|_| self.resubmitted.contains(&seq)) {
            Some(pushed) => self.reads_like(pushed, intent),
            None => false,
        }
    }

    /// Whether `commit` already reads as `intent` would make it; a commit the cache cannot
    /// read answers no.
    fn reads_like(&self, commit: CommitId, intent: &Intent) -> bool {
        let Ok(tree) = self.repo.commit_tree(oid(commit)) else {
            return false;
        };
        let view = Overlay::new(&self.repo, tree);
        self.planner
            .plan(&view, intent)
            .is_ok_and(|updates| view.would_change(&updates).is_ok_and(|changes| !changes))
    }
}

/// `resolved` (read against a commit's document, [`Baseline::Held`]) as it goes out. A removal
/// stands only where Git removed the document since the commit read (`removal_stands`): on a
/// branch rewritten past it (a force-push, a deleted branch) the live side is published again,
/// so what Git lacks is written back ([`Baseline::Value`]) — unless the branch held the
/// document after the rewrite (at the last commit it shares with the commit read, or when the
/// live side was listed, [`LiveHeld::listed_on`]): Git removed it after.
fn published_again(mut resolved: Intent, removal_stands: bool) -> Intent {
    if !removal_stands {
        resolved.baseline = match resolved.baseline {
            Some(Baseline::Held(v)) => Some(Baseline::Value(v)),
            other => other,
        };
    }
    resolved
}

/// What the later commits after the one the live side held held of the objects that changed
/// live ([`BranchWorker::read_as_later`]), by the objects' index.
#[derive(Default)]
struct ReadSince {
    /// The objects that read as a later commit held them whole: that document, and whether
    /// the branch holds the commit.
    whole: BTreeMap<usize, (Held, bool)>,
    /// The others: what each later commit the branch holds held of them, newest first.
    fields: BTreeMap<usize, Vec<Value>>,
}

/// Whether the object `intent` writes reads exactly as `held` (what a commit held of it).
fn reads_as(intent: &Intent, held: &Held) -> bool {
    match (&intent.state, held) {
        (ObjectState::Present(value), Held::Object(Some(held))) => value.value() == *held,
        _ => false,
    }
}

/// What the last run kept, from the cache's refs, and what those refs hold. The tip last seen
/// is its own ref only while it differs from the last push; a cache written before these refs
/// existed falls back to its tracking ref.
fn read_durable(repo: &LocalRepo, branch: &str) -> (DurableTips, DurableTips) {
    let [seen, pushed, sending] = durable_refs(branch);
    let read = |name: &str| match repo.read_ref(name) {
        Ok(tip) => tip.map(commit_id),
        Err(e) => {
            tracing::warn!(branch, error = %e, "cannot read the branch's recorded tips; starting without them");
            None
        }
    };
    let stored = DurableTips {
        seen: read(&seen),
        pushed: read(&pushed),
        sending: read(&sending),
    };
    let durable = DurableTips {
        seen: stored
            .seen
            .or(stored.pushed)
            .or_else(|| read(&tracking_ref(branch))),
        pushed: stored.pushed,
        sending: stored.sending,
    };
    (durable, stored)
}
