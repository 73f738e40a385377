//! The branch worker: the one writer of one branch of one remote.
//!
//! It is a plain state machine driven by calls: [`BranchWorker::submit`] and friends record what
//! the caller wants, and [`BranchWorker::poll`] does whatever is due (close the window, commit,
//! push, replay, refresh) and says when it next needs to be polled. Time comes from the injected
//! [`Clock`], randomness (backoff jitter) from a seeded RNG, and the remote sits behind
//! [`GitRemote`], so a test or a simulator drives it step by step. What happened comes out as
//! [`WorkerEvent`]s from [`BranchWorker::take_events`]. The async [`crate::driver`] wraps it.
//!
//! # Publication
//!
//! A closed window becomes a [`PendingWrite`]. Pending writes are built into a *chain* of
//! commits on the last known remote tip, one commit per write, and the chain's head is pushed
//! with compare-and-swap. A write stays pending until a push containing it succeeds. When the
//! push is refused because the branch moved, the worker fetches the new tip and re-plans every
//! pending write onto it from its intents: the API side's objects win, every other path of the
//! foreign commit survives, and a write that no longer changes the tree collapses away. Any
//! failure schedules a timed retry with jittered exponential backoff.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use backflow_api::{Clock, ObjectKey};
use git2::Oid;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::backoff::{Backoff, BackoffPolicy};
use crate::error::{PlanError, RepoError, TreeError};
use crate::intent::{FlushMark, Intent, IntentSeq, PendingWrite, Slot, WriteKind};
use crate::message::MessageTemplates;
use crate::metrics::BranchMetrics;
use crate::planner::Planner;
use crate::remote::{ExpectedTip, GitRemote, PushOutcome, RemoteError, RemoteSpec, open_remote};
use crate::repo::{Identity, LocalRepo};
use crate::tree::Overlay;
use crate::window::CommitWindow;

/// How a branch worker behaves. [`WorkerConfig::new`] gives the documented defaults.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The branch written (`main`, not `refs/heads/main`).
    pub branch: String,
    /// Rolling silence that closes the commit window; zero makes one commit per intent.
    pub window: Duration,
    /// The longest a window stays open under a steady stream of intents.
    pub max_window_age: Duration,
    /// After a push, further commits wait this long and go out together in one push. A flush
    /// ignores it.
    pub push_cooldown: Duration,
    /// How often the remote's tip is read without any other reason to (foreign commits).
    pub refresh_interval: Duration,
    /// Push attempts per publication cycle before backing off (each refused attempt replays).
    pub max_attempts: u32,
    /// Retry pacing after a failed cycle.
    pub backoff: BackoffPolicy,
    /// Committer of every commit.
    pub committer: Identity,
    /// Author of every commit; the committer when `None`.
    pub author: Option<Identity>,
    /// Commit message shapes.
    pub messages: MessageTemplates,
    /// Seed of the backoff jitter; the driver's caller picks a random one in production.
    pub seed: u64,
}

impl WorkerConfig {
    /// Defaults: 1 s window, 10 s maximum age, no cooldown, refresh every 10 min, 5 attempts,
    /// backoff 0.5 s doubling to 60 s.
    pub fn new(branch: impl Into<String>) -> Self {
        Self {
            branch: branch.into(),
            window: Duration::from_secs(1),
            max_window_age: Duration::from_secs(10),
            push_cooldown: Duration::ZERO,
            refresh_interval: Duration::from_secs(600),
            max_attempts: 5,
            backoff: BackoffPolicy::default(),
            committer: Identity::default(),
            author: None,
            messages: MessageTemplates::default(),
            seed: 0,
        }
    }
}

/// What the worker believes the remote branch points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tip {
    /// Not looked at yet.
    Unknown,
    /// The branch does not exist.
    Absent,
    /// The branch points at this commit.
    At(Oid),
}

impl Tip {
    /// The commit, if the branch is known to exist.
    pub fn oid(self) -> Option<Oid> {
        match self {
            Self::At(oid) => Some(oid),
            _ => None,
        }
    }

    fn from_remote(tip: Option<Oid>) -> Self {
        tip.map_or(Self::Absent, Self::At)
    }
}

/// A remote tip the worker did not push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForeignCommit {
    /// The new tip.
    pub tip: Oid,
    /// The tip the worker knew before, if any.
    pub previous: Option<Oid>,
}

/// Something the worker did that its owner may care about.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEvent {
    /// Every intent up to `through` is contained in the remote branch at `tip` (`None`: the
    /// branch does not exist, which happens only when nothing was ever written).
    Published {
        /// The last intent covered.
        through: IntentSeq,
        /// The remote tip holding them.
        tip: Option<Oid>,
    },
    /// The branch moved to a commit the worker did not push.
    Foreign(ForeignCommit),
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
        error: String,
        /// When the next attempt is due.
        retry_at: SystemTime,
    },
}

/// Counters of what the worker did, for tests and benchmarks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Commits written.
    pub commits: u64,
    /// Pushes the remote accepted.
    pub pushes_accepted: u64,
    /// Pushes the remote refused.
    pub pushes_rejected: u64,
    /// Pushes that failed in transport.
    pub push_errors: u64,
    /// Re-plans of the pending writes onto a moved tip.
    pub replays: u64,
    /// Foreign tips seen.
    pub foreign_commits: u64,
}

/// Why a cycle ended early.
#[derive(Debug, thiserror::Error)]
enum CycleError {
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error(transparent)]
    Repo(#[from] RepoError),
    #[error("the remote refused the push and did not move: {0}")]
    Refused(String),
    #[error("the remote kept moving: {0} attempts in a row were refused")]
    Exhausted(u32),
}

/// Commits built on `base` for the first `built` pending writes.
#[derive(Debug, Clone)]
struct Chain {
    base: Tip,
    built: usize,
    head: Option<Oid>,
    through: IntentSeq,
}

/// Commits this process wrote, to recognise its own pushes by SHA. Bounded; the oldest are
/// forgotten first (a tip that old is long superseded).
#[derive(Debug, Default)]
struct OwnCommits {
    set: BTreeSet<Oid>,
    order: VecDeque<Oid>,
}

impl OwnCommits {
    const CAPACITY: usize = 16_384;

    fn insert(&mut self, oid: Oid) {
        if self.set.insert(oid) {
            self.order.push_back(oid);
            if self.order.len() > Self::CAPACITY
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }

    fn contains(&self, oid: Oid) -> bool {
        self.set.contains(&oid)
    }
}

/// The branch worker. See the module documentation.
pub struct BranchWorker {
    cfg: WorkerConfig,
    repo: LocalRepo,
    remote: Box<dyn GitRemote>,
    planner: Box<dyn Planner>,
    clock: Arc<dyn Clock>,
    rng: StdRng,
    metrics: BranchMetrics,
    window: CommitWindow,
    pending: Vec<PendingWrite>,
    chain: Chain,
    remote_tip: Tip,
    // Set after a push whose fate is unknown (transport error): look before pushing again.
    tip_stale: bool,
    own: OwnCommits,
    last_seq: IntentSeq,
    decided_through: IntentSeq,
    published_through: IntentSeq,
    flush_through: IntentSeq,
    flush_waiting: bool,
    push_not_before: Option<SystemTime>,
    retry_at: Option<SystemTime>,
    backoff: Backoff,
    refresh_at: SystemTime,
    events: Vec<WorkerEvent>,
    stats: WorkerStats,
}

impl std::fmt::Debug for BranchWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BranchWorker")
            .field("remote", &self.remote.display_url())
            .field("branch", &self.cfg.branch)
            .field("remote_tip", &self.remote_tip)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl BranchWorker {
    /// A worker writing `cfg.branch` of `remote`, building commits in `repo`.
    pub fn new(
        cfg: WorkerConfig,
        repo: LocalRepo,
        remote: Box<dyn GitRemote>,
        planner: Box<dyn Planner>,
        clock: Arc<dyn Clock>,
        metrics: BranchMetrics,
    ) -> Self {
        let now = clock.now();
        Self {
            window: CommitWindow::new(cfg.window, cfg.max_window_age),
            backoff: Backoff::new(cfg.backoff),
            rng: StdRng::seed_from_u64(cfg.seed),
            repo,
            remote,
            planner,
            clock,
            metrics,
            pending: Vec::new(),
            chain: Chain {
                base: Tip::Unknown,
                built: 0,
                head: None,
                through: IntentSeq(0),
            },
            remote_tip: Tip::Unknown,
            tip_stale: false,
            own: OwnCommits::default(),
            last_seq: IntentSeq(0),
            decided_through: IntentSeq(0),
            published_through: IntentSeq(0),
            flush_through: IntentSeq(0),
            flush_waiting: false,
            push_not_before: None,
            retry_at: None,
            // The first poll looks at the remote, so foreign commits are told apart from the
            // starting point.
            refresh_at: now,
            events: Vec::new(),
            stats: WorkerStats::default(),
            cfg,
        }
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

    /// The configuration.
    pub fn config(&self) -> &WorkerConfig {
        &self.cfg
    }

    /// The local cache.
    pub fn repo(&self) -> &LocalRepo {
        &self.repo
    }

    /// What the worker believes the remote tip is.
    pub fn remote_tip(&self) -> Tip {
        self.remote_tip
    }

    /// The last intent known to be on the remote.
    pub fn published_through(&self) -> IntentSeq {
        self.published_through
    }

    /// The last intent received.
    pub fn last_seq(&self) -> IntentSeq {
        self.last_seq
    }

    /// Decided writes not yet contained in a successful push.
    pub fn pending_writes(&self) -> &[PendingWrite] {
        &self.pending
    }

    /// Objects waiting in the open commit window.
    pub fn window_len(&self) -> usize {
        self.window.len()
    }

    /// Whether anything is unpublished (in the window or pending).
    pub fn has_unpublished(&self) -> bool {
        !self.window.is_empty() || !self.pending.is_empty()
    }

    /// What the worker did so far.
    pub fn stats(&self) -> WorkerStats {
        self.stats
    }

    /// Hands over the events since the last call.
    pub fn take_events(&mut self) -> Vec<WorkerEvent> {
        std::mem::take(&mut self.events)
    }

    fn next_seq(&mut self) -> IntentSeq {
        self.last_seq = IntentSeq(self.last_seq.0 + 1);
        self.last_seq
    }

    /// Records an intent in the open window (with a zero window it is decided at once). Returns
    /// its sequence number; it is published once a [`WorkerEvent::Published`] covers it.
    pub fn submit(&mut self, intent: Intent) -> IntentSeq {
        let now = self.clock.now();
        let seq = self.next_seq();
        self.window.put(seq, intent, now);
        if self.window.is_immediate() {
            self.decide(WriteKind::Window);
        }
        seq
    }

    /// Decides a resync of `target` as one write of its own (after closing the open window).
    /// Returns the last sequence number it covers.
    pub fn submit_resync(&mut self, target: impl Into<String>, intents: Vec<Intent>) -> IntentSeq {
        self.decide(WriteKind::Window);
        let mut map: BTreeMap<Slot, (IntentSeq, Intent)> = BTreeMap::new();
        for intent in intents {
            let seq = self.next_seq();
            map.insert(intent.slot(), (seq, intent));
        }
        if !map.is_empty() {
            self.pending.push(PendingWrite::new(
                map,
                WriteKind::Resync {
                    target: target.into(),
                },
                self.last_seq,
            ));
            self.decided_through = self.last_seq;
            self.metrics.pending(self.pending.len());
        } else if self.decided_through <= self.published_through {
            // Nothing to write and nothing pending whose publication would cover the number
            // returned: without a flush mark no `Published` event would ever report it (its
            // caller would wait until some unrelated write is pushed). The next poll reports
            // it published at the current remote tip.
            self.take_flush_mark();
        }
        self.decided_through
    }

    /// Closes the window with the caller's commit message (a CommitRequest) and takes a flush
    /// mark: the save is published at once, ignoring the cooldown.
    pub fn commit_request(&mut self, message: impl Into<String>) -> FlushMark {
        self.decide(WriteKind::Save {
            message: message.into(),
        });
        self.take_flush_mark()
    }

    /// Closes the open window and takes the flush mark: the last intent decided so far.
    /// Everything up to it is published at the next poll, ignoring the cooldown; a
    /// [`WorkerEvent::Published`] covering the mark carries the resulting remote tip (emitted
    /// even when there was nothing to publish). Intents submitted later do not delay it.
    pub fn flush(&mut self) -> FlushMark {
        self.decide(WriteKind::Window);
        self.take_flush_mark()
    }

    fn take_flush_mark(&mut self) -> FlushMark {
        self.flush_through = self.flush_through.max(self.decided_through);
        self.flush_waiting = true;
        FlushMark(self.decided_through)
    }

    /// A hint that the branch moved (a push webhook): the remote is looked at on the next poll.
    pub fn notify_remote_moved(&mut self) {
        self.refresh_at = self.clock.now();
    }

    fn decide(&mut self, kind: WriteKind) {
        let intents = self.window.close();
        if intents.is_empty() {
            return;
        }
        let through = intents
            .values()
            .map(|(seq, _)| *seq)
            .max()
            .unwrap_or(self.last_seq);
        self.pending.push(PendingWrite::new(intents, kind, through));
        self.decided_through = self.decided_through.max(through);
        self.metrics.pending(self.pending.len());
    }

    /// Does whatever is due now and returns when the worker next wants to be polled.
    pub fn poll(&mut self) -> SystemTime {
        let now = self.clock.now();
        if self.window.is_due(now) {
            self.decide(WriteKind::Window);
        }
        if self.refresh_at <= now {
            self.refresh(now);
        }
        // Commit decided writes now, even while the push waits for its cooldown: the commit
        // records when the write was decided, and its intents are screened against the tip
        // known then.
        if self.chain.built < self.pending.len()
            && self.remote_tip != Tip::Unknown
            && !self.tip_stale
            && let Err(e) = self.build_chain(now)
        {
            tracing::warn!(branch = %self.cfg.branch, error = %e, "committing failed; retried at the next publication");
        }
        let urgent = self.flush_waiting || self.flush_through > self.published_through;
        let work = !self.pending.is_empty() || self.flush_waiting;
        let retry_due = self.retry_at.is_none_or(|t| t <= now);
        let cooled = self.push_not_before.is_none_or(|t| t <= now);
        if work && retry_due && (urgent || cooled) {
            self.retry_at = None;
            if let Err(e) = self.publish(now) {
                let delay = self.backoff.next_delay(&mut self.rng);
                let retry_at = now + delay;
                tracing::warn!(
                    remote = self.remote.display_url(),
                    branch = %self.cfg.branch,
                    pending = self.pending.len(),
                    error = %e,
                    retry_in = ?delay,
                    "publication failed; everything stays pending"
                );
                self.retry_at = Some(retry_at);
                self.events.push(WorkerEvent::Failed {
                    error: e.to_string(),
                    retry_at,
                });
            }
        }
        self.next_wake(now)
    }

    /// When the next poll is due.
    pub fn next_wake(&self, now: SystemTime) -> SystemTime {
        let mut wake = self.refresh_at;
        if let Some(d) = self.window.deadline() {
            wake = wake.min(d);
        }
        if !self.pending.is_empty() || self.flush_waiting {
            let urgent = self.flush_waiting || self.flush_through > self.published_through;
            let at = match (self.retry_at, self.push_not_before) {
                (Some(retry), _) => retry,
                (None, Some(cool)) if !urgent => cool,
                _ => now,
            };
            wake = wake.min(at);
        }
        wake
    }

    fn refresh(&mut self, now: SystemTime) {
        match self.remote.fetch(&self.repo, &self.cfg.branch) {
            Ok(tip) => {
                self.observe(Tip::from_remote(tip));
                self.refresh_at = now + self.cfg.refresh_interval;
            }
            Err(e) => {
                let delay = self
                    .backoff
                    .next_delay(&mut self.rng)
                    .min(self.cfg.refresh_interval);
                tracing::warn!(remote = self.remote.display_url(), branch = %self.cfg.branch, error = %e, "refresh failed");
                self.refresh_at = now + delay;
            }
        }
    }

    /// Takes note of the remote tip as just read.
    fn observe(&mut self, tip: Tip) {
        self.tip_stale = false;
        if tip == self.remote_tip {
            return;
        }
        let previous = self.remote_tip;
        if let Tip::At(oid) = tip
            && !self.own.contains(oid)
            && previous != Tip::Unknown
        {
            tracing::info!(remote = self.remote.display_url(), branch = %self.cfg.branch, tip = %oid, "foreign commit");
            self.stats.foreign_commits += 1;
            self.metrics.foreign();
            self.events.push(WorkerEvent::Foreign(ForeignCommit {
                tip: oid,
                previous: previous.oid(),
            }));
        }
        self.remote_tip = tip;
        // A push whose answer was lost may have landed: if the new tip contains our chain, the
        // writes in it are published and must not be replayed (never twice).
        if let (Some(head), Tip::At(oid)) = (self.chain.head, tip)
            && (head == oid
                || self
                    .repo
                    .git2()
                    .graph_descendant_of(oid, head)
                    .unwrap_or(false))
        {
            let built = self.chain.built.min(self.pending.len());
            let through = self.chain.through;
            self.pending.drain(..built);
            self.mark_published(through, tip);
        }
    }

    fn mark_published(&mut self, through: IntentSeq, tip: Tip) {
        self.published_through = self.published_through.max(through);
        self.chain = Chain {
            base: tip,
            built: 0,
            head: None,
            through: self.published_through,
        };
        self.metrics.pending(self.pending.len());
        if self.flush_through <= self.published_through {
            self.flush_waiting = false;
        }
        self.events.push(WorkerEvent::Published {
            through: self.published_through,
            tip: tip.oid(),
        });
    }

    fn publish(&mut self, now: SystemTime) -> Result<(), CycleError> {
        for _ in 0..self.cfg.max_attempts.max(1) {
            if self.remote_tip == Tip::Unknown || self.tip_stale {
                let tip = self.remote.fetch(&self.repo, &self.cfg.branch)?;
                self.observe(Tip::from_remote(tip));
            }
            self.build_chain(now)?;
            let Some(head) = self.chain.head else {
                // Nothing pending changes the tree: the remote tip already holds it all.
                self.pending.clear();
                let (through, tip) = (
                    self.chain.through.max(self.decided_through),
                    self.remote_tip,
                );
                self.mark_published(through, tip);
                return Ok(());
            };
            let expected = ExpectedTip::from(self.remote_tip.oid());
            let started = self.clock.now();
            let outcome = self
                .remote
                .push(&self.repo, &self.cfg.branch, head, expected);
            let seconds = self
                .clock
                .now()
                .duration_since(started)
                .unwrap_or_default()
                .as_secs_f64();
            match outcome {
                Ok(PushOutcome::Accepted) => {
                    self.metrics.push("accepted", seconds);
                    self.stats.pushes_accepted += 1;
                    tracing::debug!(branch = %self.cfg.branch, tip = %head, writes = self.pending.len(), "pushed");
                    self.remote_tip = Tip::At(head);
                    self.pending.clear();
                    let through = self.chain.through;
                    self.mark_published(through, Tip::At(head));
                    self.backoff.reset();
                    self.push_not_before =
                        (!self.cfg.push_cooldown.is_zero()).then(|| now + self.cfg.push_cooldown);
                    return Ok(());
                }
                Ok(PushOutcome::Rejected { reason }) => {
                    self.metrics.push("rejected", seconds);
                    self.stats.pushes_rejected += 1;
                    tracing::info!(branch = %self.cfg.branch, expected = %expected, %reason, "push refused; fetching");
                    let tip = Tip::from_remote(self.remote.fetch(&self.repo, &self.cfg.branch)?);
                    if tip == Tip::from_remote(expected.oid()) {
                        // The branch did not move, so replaying cannot help: a hook or a
                        // protection refused it. Back off and try again later.
                        self.observe(tip);
                        return Err(CycleError::Refused(reason));
                    }
                    self.observe(tip);
                    if !self.pending.is_empty() {
                        self.stats.replays += 1;
                        self.metrics.replay();
                    }
                }
                Err(e) => {
                    self.metrics.push("error", seconds);
                    self.stats.push_errors += 1;
                    self.tip_stale = true;
                    return Err(e.into());
                }
            }
        }
        Err(CycleError::Exhausted(self.cfg.max_attempts.max(1)))
    }

    /// Extends (or, when the tip moved, rebuilds) the chain so it covers every pending write.
    fn build_chain(&mut self, now: SystemTime) -> Result<(), RepoError> {
        if self.chain.base != self.remote_tip {
            self.chain = Chain {
                base: self.remote_tip,
                built: 0,
                head: None,
                through: self.published_through,
            };
        }
        let mut parent = self.chain.head.or(self.remote_tip.oid());
        let mut tree = match parent {
            Some(commit) => self.repo.commit_tree(commit)?,
            None => self.repo.empty_tree()?,
        };
        let author = self.cfg.author.as_ref().unwrap_or(&self.cfg.committer);
        for write in self.pending.iter_mut().skip(self.chain.built) {
            let mut overlay = Overlay::new(&self.repo, tree);
            let mut dropped = Vec::new();
            // The planner sees the whole write at once, so per-tree work (indexing the folder)
            // is done once per write rather than once per intent.
            let intents: Vec<&Intent> = write.intents.values().map(|(_, i)| i).collect();
            let planned = self.planner.plan_all(&overlay, &intents);
            for ((slot, (seq, intent)), planned) in write.intents.iter().zip(planned) {
                match planned {
                    Ok(updates) => {
                        if !write.screened && !overlay.would_change(&updates)? {
                            // Git already reads like this: the intent is dropped for good, so it
                            // can never overwrite a later foreign change on replay.
                            dropped.push(slot.clone());
                        } else {
                            overlay.apply(updates);
                        }
                    }
                    Err(TreeError::Plan(error)) => {
                        tracing::warn!(target = %intent.target, key = %intent.key, %error, "intent refused by the planner");
                        self.events.push(WorkerEvent::Refused {
                            seq: *seq,
                            target: intent.target.clone(),
                            key: intent.key.clone(),
                            error,
                        });
                        dropped.push(slot.clone());
                    }
                    Err(TreeError::Repo(e)) => return Err(e),
                }
            }
            for slot in dropped {
                write.intents.remove(&slot);
            }
            write.screened = true;
            let new_tree = overlay.write()?;
            if new_tree != tree {
                let message = self.cfg.messages.render(write);
                let commit = self.repo.write_commit(
                    new_tree,
                    parent,
                    author,
                    &self.cfg.committer,
                    now,
                    &message,
                )?;
                self.own.insert(commit);
                self.stats.commits += 1;
                self.metrics.commit();
                parent = Some(commit);
                tree = new_tree;
                self.chain.head = Some(commit);
            }
            self.chain.through = self.chain.through.max(write.through);
            self.chain.built += 1;
        }
        Ok(())
    }
}
