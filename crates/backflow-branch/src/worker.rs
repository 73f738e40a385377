//! The branch worker's decisions: one state machine, no I/O.
//!
//! [`BranchCore::step`] takes one [`Input`] (a request, a tick, or the result of I/O the shell
//! ran) and returns the [`Effect`]s to run next. Time is a [`Moment`] on a monotonic clock and
//! randomness (backoff jitter) is handed in, so the same inputs give the same effects: tests and
//! the simulator drive it against a model remote, and `backflow-git` drives it against a real
//! one.
//!
//! # Phases
//!
//! The publication cycle is one [`Phase`]: `Idle` → (`Fetching`) → `Building` → `Pushing` →
//! `Idle`, with `BackingOff` after any failure and `Recovering` after the branch lost
//! backflow's commits. The commit window fills independently of the phase (intents keep coming
//! while a push is in flight) and is its own small machine, [`CommitWindow`].
//!
//! # Publication
//!
//! A closed window becomes a [`PendingWrite`]. Pending writes are built into a chain of commits
//! on the last known remote tip, one commit per write, and the chain's head is pushed with
//! compare-and-swap. A write stays pending until a push containing it is known to have landed:
//! accepted, or found in the remote after an answer was lost (never replayed twice). When the
//! push is refused because the branch moved, the chain is rebuilt on the new tip from the
//! intents: the API side's objects win and every other path of the foreign commit survives.
//!
//! # What survives a restart
//!
//! [`DurableTips`]: the last tip seen and the last commit pushed. On start, a tip other than
//! the one last seen is a foreign commit (pushed while backflow was stopped), and a tip that
//! does not contain the last push means the branch lost acknowledged writes: the core emits
//! [`Event::Diverged`] and publishes nothing until its owner resubmitted every target.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use crate::backoff::{Backoff, BackoffPolicy};
use crate::commit::{CommitId, Tip};
use crate::commit_window::CommitWindow;
use crate::effect::{Divergence, DurableTips, Effect, Event, ForeignCommit};
use crate::error::{CycleFailure, IoFailure};
use crate::input::{BuiltChain, FetchedTip, Input, PushAnswer};
use crate::intent::{
    Baseline, FlushMark, Intent, IntentSeq, Origin, PendingWrite, Slot, WriteKind,
};
use crate::moment::Moment;

/// The timing of a branch worker. [`CoreConfig::default`] gives the documented defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoreConfig {
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
    /// How long publication waits for the owner's resync after a divergence before it goes on
    /// with what it has.
    pub recovery_timeout: Duration,
    /// The longest silence that gathers one target's resyncs into one commit (the commit
    /// window, when shorter). A long commit window does not hold back an initial snapshot.
    pub resync_window: Duration,
}

impl Default for CoreConfig {
    /// 1 s window, 10 s maximum age, no cooldown, refresh every 10 min, 5 attempts, backoff
    /// 0.5 s doubling to 60 s, 60 s to recover, resyncs gathered for at most 1 s of silence.
    fn default() -> Self {
        Self {
            window: Duration::from_secs(1),
            max_window_age: Duration::from_secs(10),
            push_cooldown: Duration::ZERO,
            refresh_interval: Duration::from_secs(600),
            max_attempts: 5,
            backoff: BackoffPolicy::default(),
            recovery_timeout: Duration::from_secs(60),
            resync_window: Duration::from_secs(1),
        }
    }
}

/// Where the publication cycle stands. Exactly one I/O effect is in flight in `Fetching`,
/// `Building` and `Pushing`, none in the others.
#[derive(Debug, Clone)]
pub enum Phase {
    /// Nothing in flight: the next step looks at the remote, commits or pushes when there is a
    /// reason to.
    Idle,
    /// A fetch is in flight.
    Fetching(FetchPurpose),
    /// Commits for pending writes `from .. from + count` are being written.
    Building {
        /// Index of the first write built.
        from: usize,
        /// How many writes.
        count: usize,
        /// The push attempt that follows, or `None` when the commits are made ahead of a push
        /// that must wait (the cooldown).
        attempt: Option<u32>,
    },
    /// The chain's head is being pushed.
    Pushing {
        /// The commit pushed.
        head: CommitId,
        /// What the remote must still point at.
        expected: Tip,
        /// Which attempt of the cycle this is (from 1).
        attempt: u32,
    },
    /// A cycle failed; nothing is tried before `until`.
    BackingOff {
        /// When the next attempt is due.
        until: Moment,
    },
    /// The branch lost backflow's commits; nothing is published until the owner has
    /// resubmitted every target ([`Input::Recovered`]) or `until` passed.
    Recovering {
        /// When publication goes on regardless.
        until: Moment,
    },
}

/// Why a fetch is in flight.
#[derive(Debug, Clone)]
pub enum FetchPurpose {
    /// Reading the tip: at start, on a refresh, on a hint, before publishing.
    Look,
    /// A push expecting `expected` was refused: where did the branch go?
    AfterRejection {
        /// The tip the refused push expected.
        expected: Tip,
        /// The attempt that was refused.
        attempt: u32,
        /// The remote's reason.
        reason: String,
    },
    /// A chain that changes nothing was judged against a tip not read since its writes were
    /// decided: is that tip still the branch's? Publishing it unconfirmed could drop an intent
    /// as "unchanged" that a push made before the edit already changed.
    Confirm {
        /// The attempt publishing the chain.
        attempt: u32,
    },
    /// The push of `head` got no answer: did it land?
    AfterLostAnswer {
        /// The commit pushed.
        head: CommitId,
        /// The push's error, reported if it did not land.
        error: IoFailure,
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
    /// Pushes that got no answer.
    pub push_errors: u64,
    /// Re-plans of the pending writes onto a moved tip.
    pub replays: u64,
    /// Foreign tips seen.
    pub foreign_commits: u64,
}

/// Commits built on `base` for the first `built` pending writes.
#[derive(Debug, Clone)]
struct Chain {
    base: Tip,
    built: usize,
    /// The commits built, oldest first, each descending from the one before: a tip holding
    /// one holds every one before it.
    commits: Vec<ChainCommit>,
    through: IntentSeq,
    /// Whether some intent was judged unchanged against `base` while `base` was not read since
    /// that intent was decided: the judgement holds only once `base` is confirmed current.
    provisional: bool,
}

/// One commit of a [`Chain`]: what the chain's first `built` pending writes make, up to the
/// writes' last intent `through`.
#[derive(Debug, Clone, Copy)]
struct ChainCommit {
    id: CommitId,
    built: usize,
    through: IntentSeq,
}

impl Chain {
    fn on(base: Tip, through: IntentSeq) -> Self {
        Self {
            base,
            built: 0,
            commits: Vec::new(),
            through,
            provisional: false,
        }
    }

    /// The newest commit built: what a push sends.
    fn head(&self) -> Option<CommitId> {
        self.commits.last().map(|c| c.id)
    }

    /// The newest commit built that `tip` holds, by what a fetch found it contains.
    fn newest_held(&self, contains: &BTreeSet<CommitId>) -> Option<ChainCommit> {
        self.commits
            .iter()
            .rev()
            .find(|c| contains.contains(&c.id))
            .copied()
    }
}

/// The tip last known to be the branch's from the remote itself (a fetch, an accepted push),
/// and the last intent submitted before that I/O started: Git at `tip` is what the remote held
/// after every intent up to `after` was decided.
#[derive(Debug, Clone, Copy)]
struct Confirmed {
    tip: Tip,
    after: IntentSeq,
}

/// The branch worker's state machine. See the module documentation.
#[derive(Debug)]
pub struct BranchCore {
    cfg: CoreConfig,
    phase: Phase,
    window: CommitWindow,
    /// Resyncs of each target gathered like a commit window (the commit window's silence, at
    /// most `resync_window`), so the snapshots of one target's streams, read at start within
    /// moments of each other, become one commit. Always decided before the ordinary window, which only holds intents
    /// submitted after them.
    resyncs: BTreeMap<String, CommitWindow>,
    pending: Vec<PendingWrite>,
    chain: Chain,
    remote_tip: Tip,
    confirmed: Confirmed,
    /// The last intent submitted when the fetch or push in flight started.
    io_after: IntentSeq,
    durable: DurableTips,
    last_seq: IntentSeq,
    decided_through: IntentSeq,
    published_through: IntentSeq,
    flush_through: IntentSeq,
    flush_waiting: bool,
    /// The last intent someone waits for ([`Input::Hurry`]): the window closes as soon as
    /// nothing is in flight.
    hurry_through: IntentSeq,
    push_not_before: Option<Moment>,
    backoff: Backoff,
    refresh_at: Moment,
    stats: WorkerStats,
}

impl BranchCore {
    /// A worker starting at `now` with what it kept from its last run. Its first step reads the
    /// remote.
    #[must_use]
    pub fn new(cfg: CoreConfig, durable: DurableTips, now: Moment) -> Self {
        Self {
            window: CommitWindow::new(cfg.window, cfg.max_window_age),
            backoff: Backoff::new(cfg.backoff),
            phase: Phase::Idle,
            resyncs: BTreeMap::new(),
            pending: Vec::new(),
            chain: Chain::on(Tip::Unknown, IntentSeq(0)),
            remote_tip: Tip::Unknown,
            confirmed: Confirmed {
                tip: Tip::Unknown,
                after: IntentSeq(0),
            },
            io_after: IntentSeq(0),
            durable,
            last_seq: IntentSeq(0),
            decided_through: IntentSeq(0),
            published_through: IntentSeq(0),
            flush_through: IntentSeq(0),
            flush_waiting: false,
            hurry_through: IntentSeq(0),
            push_not_before: None,
            refresh_at: now,
            stats: WorkerStats::default(),
            cfg,
        }
    }

    /// The timing in force.
    #[must_use]
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// Where the publication cycle stands.
    #[must_use]
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// What the worker believes the remote tip is.
    #[must_use]
    pub fn remote_tip(&self) -> Tip {
        self.remote_tip
    }

    /// What the worker keeps across restarts, as of now.
    #[must_use]
    pub fn durable(&self) -> DurableTips {
        self.durable
    }

    /// The last intent received (the one a [`Input::Submit`] just recorded).
    #[must_use]
    pub fn last_seq(&self) -> IntentSeq {
        self.last_seq
    }

    /// The last intent decided into a pending write: after [`Input::Flush`], the flush mark.
    #[must_use]
    pub fn decided_through(&self) -> IntentSeq {
        self.decided_through
    }

    /// The flush mark the last [`Input::Flush`] or [`Input::CommitRequest`] took.
    #[must_use]
    pub fn flush_mark(&self) -> FlushMark {
        FlushMark(self.decided_through)
    }

    /// The last intent known to be on the remote.
    #[must_use]
    pub fn published_through(&self) -> IntentSeq {
        self.published_through
    }

    /// Decided writes not yet known to be on the remote.
    #[must_use]
    pub fn pending_writes(&self) -> &[PendingWrite] {
        &self.pending
    }

    /// Objects waiting in the open commit window.
    #[must_use]
    pub fn window_len(&self) -> usize {
        self.window.len()
    }

    /// Whether anything is unpublished (in the window or pending).
    #[must_use]
    pub fn has_unpublished(&self) -> bool {
        !self.window.is_empty() || !self.resyncs.is_empty() || !self.pending.is_empty()
    }

    /// What the worker did so far.
    #[must_use]
    pub fn stats(&self) -> WorkerStats {
        self.stats
    }

    /// Takes one input at `now` and returns what to do next. The last effect is always a
    /// [`Effect::WakeAt`].
    ///
    /// Requests (submit, resync, flush, commit request, hints) only record what is wanted and
    /// start no I/O: the work they make due starts at the next [`Input::Tick`], so a burst of
    /// requests taken together goes out in one push. [`Input::Tick`] and the answers to I/O
    /// start whatever is due.
    pub fn step(&mut self, input: Input, now: Moment, rng: &mut impl Rng) -> Vec<Effect> {
        let mut out = Vec::new();
        let acts = matches!(
            input,
            Input::Tick | Input::Fetched(_) | Input::Built(_) | Input::Pushed(_)
        );
        match input {
            Input::Submit(intent) => self.submit(intent, now),
            Input::Resync { target, intents } => self.resync(target, intents, now),
            Input::Flush => {
                self.decide(WriteKind::Window);
                self.take_flush_mark();
            }
            Input::CommitRequest { message } => {
                self.decide(WriteKind::Save { message });
                self.take_flush_mark();
            }
            Input::Hurry => self.hurry_through = self.last_seq,
            Input::ResyncComplete { target } => self.decide_resyncs_of(&target),
            Input::RemoteMoved => self.refresh_at = self.refresh_at.min(now),
            Input::Recovered => {
                if matches!(self.phase, Phase::Recovering { .. }) {
                    self.phase = Phase::Idle;
                }
            }
            Input::Reconfigure(cfg) => self.reconfigure(cfg, now),
            Input::Tick => {}
            Input::Fetched(result) => self.on_fetched(result, now, rng, &mut out),
            Input::Built(result) => self.on_built(result, now, rng, &mut out),
            Input::Pushed(answer) => self.on_pushed(answer, now, &mut out),
        }
        if acts {
            self.advance(now, &mut out);
        }
        out.push(Effect::WakeAt(self.next_wake(now)));
        self.debug_check();
        out
    }

    /// The watermarks' order, checked after every step in debug builds: a simulator schedule
    /// that breaks one stops with its seed instead of reporting a loss later, or not at all.
    fn debug_check(&self) {
        debug_assert!(
            self.published_through <= self.decided_through && self.decided_through <= self.last_seq,
            "published {:?} <= decided {:?} <= last {:?}",
            self.published_through,
            self.decided_through,
            self.last_seq
        );
        debug_assert!(
            self.flush_through <= self.decided_through,
            "the flush mark {:?} is past what was decided {:?}",
            self.flush_through,
            self.decided_through
        );
        debug_assert!(
            self.chain.built <= self.pending.len(),
            "{} writes built of {} pending",
            self.chain.built,
            self.pending.len()
        );
        // What is still pending was never reported published: a report past it would let an
        // apply run on a commit that misses it.
        debug_assert!(
            self.pending
                .iter()
                .all(|w| self.published_through < w.through && w.through <= self.decided_through),
            "a pending write is outside (published {:?}, decided {:?}]: {:?}",
            self.published_through,
            self.decided_through,
            self.pending.iter().map(|w| w.through).collect::<Vec<_>>()
        );
    }

    fn reconfigure(&mut self, cfg: CoreConfig, now: Moment) {
        self.window.set_limits(cfg.window, cfg.max_window_age);
        self.backoff = Backoff::new(cfg.backoff);
        if let Phase::BackingOff { until } = &mut self.phase {
            *until = now;
        }
        // A cooldown already running ends no later than the new one would.
        self.push_not_before = (self.push_not_before).map(|at| at.min(now + cfg.push_cooldown));
        self.refresh_at = self.refresh_at.min(now + cfg.refresh_interval);
        self.cfg = cfg;
        if self.window.is_immediate() && !self.window.is_empty() {
            self.decide(WriteKind::Window);
        }
    }

    fn submit(&mut self, mut intent: Intent, now: Moment) {
        if let Origin::Echo { of: of @ None } = &mut intent.origin {
            // What Git held as far as this worker knows now: the applier was given this tip or
            // an older one, so a push read after this is newer than what the echo repeats.
            *of = self.confirmed.tip.commit();
        }
        let seq = self.next_seq();
        self.window.put(seq, intent, now);
        if self.window.is_immediate() {
            self.decide(WriteKind::Window);
        }
    }

    fn resync(&mut self, target: String, intents: Vec<Intent>, now: Moment) {
        if !self.window.is_empty() {
            // Intents submitted before this resync are decided before it.
            self.decide(WriteKind::Window);
        }
        if intents.is_empty() {
            if self.resyncs.is_empty() && self.decided_through <= self.published_through {
                // Nothing to write and nothing pending whose publication would cover the number
                // the caller reads: without a flush mark no `Published` event would report it.
                self.take_flush_mark();
            }
            return;
        }
        // Windows never interleave: a target's window opened before another's is closed
        // before it gathers intents newer than that one's.
        let first = self.resyncs.get(&target).and_then(CommitWindow::first_seq);
        if first.is_some_and(|f| {
            (self.resyncs.values()).any(|w| w.first_seq().is_some_and(|other| other > f))
        }) {
            self.decide_resyncs_of(&target);
        }
        let silence = self.cfg.window.min(self.cfg.resync_window);
        let max_age = self.cfg.max_window_age.min(self.cfg.resync_window * 10);
        let window = self
            .resyncs
            .entry(target.clone())
            .or_insert_with(|| CommitWindow::new(silence, max_age));
        // What the branch held when the live side was listed, as far as this worker knows:
        // on a branch rewritten past the commit the list is read against, a removal pushed
        // after it stands.
        let listed_on = self.confirmed.tip.commit();
        for mut intent in intents {
            if let Some(Baseline::Commit(held)) = &mut intent.baseline {
                held.listed_on = held.listed_on.or(listed_on);
            }
            self.last_seq = IntentSeq(self.last_seq.0 + 1);
            window.put(self.last_seq, intent, now);
        }
        if self.cfg.window.is_zero() {
            self.decide_resyncs(|_, _| true);
        }
    }

    /// Decides the resync windows `which` selects — and every window opened before the newest
    /// of them — each into a write of its own, oldest first: writes are pending, and so
    /// published, in the order of their intents (a report published through N holds every
    /// intent up to N, which is what a flush waits for).
    fn decide_resyncs(&mut self, which: impl Fn(&str, &CommitWindow) -> bool) {
        let mut open: Vec<(Option<IntentSeq>, String, bool)> = (self.resyncs.iter())
            .map(|(t, w)| (w.first_seq(), t.clone(), which(t, w)))
            .collect();
        open.sort();
        let Some(newest) = open.iter().rposition(|(_, _, chosen)| *chosen) else {
            return;
        };
        for (_, target, _) in open.into_iter().take(newest + 1) {
            self.decide_one_resync(&target);
        }
    }

    /// Decides `target`'s resync window now, with the windows opened before it.
    fn decide_resyncs_of(&mut self, target: &str) {
        self.decide_resyncs(|t, _| t == target);
    }

    /// Decides `target`'s resync window alone, if it holds anything.
    fn decide_one_resync(&mut self, target: &str) {
        if let Some(mut window) = self.resyncs.remove(target) {
            let intents = window.close();
            self.push_write(
                intents,
                WriteKind::Resync {
                    target: target.to_string(),
                },
            );
        }
    }

    /// The seq a resync's caller waits for: the last intent it recorded, or, when it recorded
    /// none, the last one decided so far.
    #[must_use]
    pub fn resync_receipt(&self) -> IntentSeq {
        if self.resyncs.is_empty() {
            self.decided_through
        } else {
            self.last_seq
        }
    }

    fn next_seq(&mut self) -> IntentSeq {
        self.last_seq = IntentSeq(self.last_seq.0 + 1);
        self.last_seq
    }

    fn take_flush_mark(&mut self) {
        self.flush_through = self.flush_through.max(self.decided_through);
        self.flush_waiting = true;
    }

    /// Closes every window: the resyncs first (their intents are older), then the ordinary
    /// one as a write of `kind`.
    /// A window's intents by users whose targets keep authors apart become one write per
    /// user, so history says who changed what; the writes go into the pending list together,
    /// so they are built and pushed as one chain (one compare-and-swap push).
    fn decide(&mut self, kind: WriteKind) {
        self.decide_resyncs(|_, _| true);
        let intents = self.window.close();
        if kind != WriteKind::Window {
            return self.push_write(intents, kind);
        }
        for group in by_author(intents) {
            self.push_write(group, WriteKind::Window);
        }
    }

    fn push_write(&mut self, intents: BTreeMap<Slot, (IntentSeq, Intent)>, kind: WriteKind) {
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
    }

    /// Starts whatever is due when nothing is in flight.
    fn advance(&mut self, now: Moment, out: &mut Vec<Effect>) {
        self.decide_resyncs(|_, w| w.is_due(now));
        if self.window.is_due(now) {
            self.decide(WriteKind::Window);
        }
        match self.phase {
            Phase::BackingOff { until } | Phase::Recovering { until } if until <= now => {
                self.phase = Phase::Idle;
            }
            _ => {}
        }
        if !matches!(self.phase, Phase::Idle) {
            return;
        }
        if self.is_hurried() {
            // Nothing is in flight: what collected meanwhile goes out as one commit.
            self.decide(WriteKind::Window);
        }
        if self.remote_tip == Tip::Unknown || self.refresh_at <= now {
            return self.start_fetch(FetchPurpose::Look, out);
        }
        let cooled = self.push_not_before.is_none_or(|t| t <= now);
        if self.has_work() && (self.is_urgent() || cooled) {
            self.start_build(Some(1), out);
        } else if self.chain_is_stale() || self.chain.built < self.pending.len() {
            // Commit decided writes now, even while the push waits for its cooldown: the commit
            // records when the write was decided, and its intents are screened against the tip
            // known then.
            self.start_build(None, out);
        }
    }

    /// Whether someone waits for an intent still in the window.
    fn is_hurried(&self) -> bool {
        self.hurry_through > self.decided_through && !self.window.is_empty()
    }

    fn has_work(&self) -> bool {
        !self.pending.is_empty() || self.flush_waiting
    }

    fn is_urgent(&self) -> bool {
        self.flush_waiting || self.flush_through > self.published_through
    }

    fn chain_is_stale(&self) -> bool {
        self.chain.base != self.remote_tip && !self.pending.is_empty()
    }

    /// When the next [`Input::Tick`] is due.
    fn next_wake(&self, now: Moment) -> Moment {
        // A refresh that fell due while backing off waits for the backoff like everything else.
        let mut wake = match self.phase {
            Phase::BackingOff { until } | Phase::Recovering { until } => until,
            _ => self.refresh_at,
        };
        let windows = std::iter::once(&self.window).chain(self.resyncs.values());
        for deadline in windows.filter_map(CommitWindow::deadline) {
            wake = wake.min(deadline);
        }
        // An unknown tip needs no case of its own: `refresh_at` starts at the core's creation.
        match self.phase {
            Phase::Idle if self.chain_is_stale() || self.is_hurried() => {
                wake = now;
            }
            Phase::Idle if self.has_work() => {
                let cooled = self.push_not_before.filter(|_| !self.is_urgent());
                let unbuilt = self.chain.built < self.pending.len();
                wake = wake.min(if unbuilt { now } else { cooled.unwrap_or(now) });
            }
            _ => {}
        }
        wake.max(now)
    }

    fn checks(&self) -> BTreeSet<CommitId> {
        (self.chain.commits.iter().map(|c| c.id))
            .chain(self.durable.pushed)
            .chain(self.durable.sending)
            .collect()
    }

    fn start_fetch(&mut self, purpose: FetchPurpose, out: &mut Vec<Effect>) {
        self.io_after = self.last_seq;
        self.phase = Phase::Fetching(purpose);
        out.push(Effect::Fetch {
            check: self.checks(),
        });
    }

    /// Builds what is not built yet on the current tip; with `attempt`, pushes right after.
    fn start_build(&mut self, attempt: Option<u32>, out: &mut Vec<Effect>) {
        if self.chain.base != self.remote_tip {
            self.chain = Chain::on(self.remote_tip, self.published_through);
        }
        let from = self.chain.built;
        let count = self.pending.len().saturating_sub(from);
        if count == 0 {
            if let Some(attempt) = attempt {
                self.try_push(attempt, out);
            }
            return;
        }
        self.phase = Phase::Building {
            from,
            count,
            attempt,
        };
        out.push(Effect::Build {
            parent: self.chain.head().or(self.remote_tip.commit()),
            from,
            count,
        });
    }

    fn try_push(&mut self, attempt: u32, out: &mut Vec<Effect>) {
        let Some(head) = self.chain.head() else {
            if self.chain.provisional {
                // Nothing changes the tree, judged against a tip that may have moved since the
                // edits: look before calling them published.
                return self.start_fetch(FetchPurpose::Confirm { attempt }, out);
            }
            // Nothing pending changes the tree: the remote tip already holds it all.
            self.publish_chain(self.remote_tip, out);
            return;
        };
        self.io_after = self.last_seq;
        let expected = self.remote_tip;
        if self.durable.sending != Some(head) {
            self.durable.sending = Some(head);
            out.push(Effect::Persist(self.durable));
        }
        self.phase = Phase::Pushing {
            head,
            expected,
            attempt,
        };
        out.push(Effect::Push { head, expected });
    }

    /// The branch holds the chain up to `held` and lost the commits after it: the writes
    /// `held` carries are published (a push made on top of them since is somebody's later
    /// edit, never written over by building them again); the rest are built again on `tip`
    /// after the owner's resync. Announced with the next publication: the divergence this
    /// leads to holds the claims first. The watermark never passes an intent still pending
    /// (writes are not always in sequence order: resyncs are decided per target).
    fn lost_after(&mut self, held: ChainCommit, tip: Tip) {
        let built = held.built.min(self.pending.len());
        self.pending.drain(..built);
        let still_pending = (self.pending.iter())
            .flat_map(|p| p.intents.values().map(|(seq, _)| *seq))
            .min();
        let through = match still_pending {
            Some(first) => held.through.min(IntentSeq(first.0.saturating_sub(1))),
            None => held.through,
        };
        self.published_through = self.published_through.max(through);
        self.chain = Chain::on(tip, self.published_through);
    }

    /// The chain (all built writes) is on the remote at `tip`.
    fn publish_chain(&mut self, tip: Tip, out: &mut Vec<Effect>) {
        let built = self.chain.built.min(self.pending.len());
        self.pending.drain(..built);
        let mut through = self.chain.through;
        if self.pending.is_empty() && self.window.is_empty() && self.resyncs.is_empty() {
            through = through.max(self.decided_through);
        }
        self.published_through = self.published_through.max(through);
        self.chain = Chain::on(tip, self.published_through);
        if self.flush_through <= self.published_through {
            self.flush_waiting = false;
        }
        self.phase = Phase::Idle;
        out.push(Effect::Emit(Event::Published {
            through: self.published_through,
            tip: tip.commit(),
        }));
    }

    fn fail(
        &mut self,
        error: CycleFailure,
        now: Moment,
        rng: &mut impl Rng,
        out: &mut Vec<Effect>,
    ) {
        let until = now + self.backoff.next_delay(rng);
        self.phase = Phase::BackingOff { until };
        out.push(Effect::Emit(Event::Failed {
            error,
            retry_at: until,
        }));
    }

    fn on_fetched(
        &mut self,
        result: Result<FetchedTip, IoFailure>,
        now: Moment,
        rng: &mut impl Rng,
        out: &mut Vec<Effect>,
    ) {
        let Phase::Fetching(purpose) = std::mem::replace(&mut self.phase, Phase::Idle) else {
            return;
        };
        let fetched = match result {
            Ok(fetched) => fetched,
            Err(error) => {
                let failure = match purpose {
                    FetchPurpose::AfterLostAnswer { error, .. } => {
                        // Whether it landed is unknown: look again before the next push.
                        self.refresh_at = now;
                        CycleFailure::Push(error)
                    }
                    _ => CycleFailure::Fetch(error),
                };
                return self.fail(failure, now, rng, out);
            }
        };
        self.refresh_at = now + self.cfg.refresh_interval;
        self.confirmed = Confirmed {
            tip: fetched.tip,
            after: self.io_after,
        };
        if self.observe(&fetched, out) {
            self.phase = Phase::Recovering {
                until: now + self.cfg.recovery_timeout,
            };
            return;
        }
        match purpose {
            FetchPurpose::Look => {}
            FetchPurpose::AfterRejection {
                expected,
                attempt,
                reason,
            } => {
                if fetched.tip == expected {
                    // The branch did not move, so replaying cannot help: a hook or a protection
                    // refused it.
                    return self.fail(CycleFailure::Refused { reason }, now, rng, out);
                }
                self.replay(attempt, now, rng, out);
            }
            FetchPurpose::Confirm { attempt } => {
                if fetched.tip == self.chain.base {
                    // Read after every built intent was decided: the judgements stand.
                    self.publish_chain(fetched.tip, out);
                } else {
                    self.replay(attempt, now, rng, out);
                }
            }
            FetchPurpose::AfterLostAnswer { head, error } => {
                if fetched.contains.contains(&head) {
                    self.backoff.reset();
                    self.start_cooldown(now);
                } else {
                    self.fail(CycleFailure::Push(error), now, rng, out);
                }
            }
        }
    }

    /// Builds the pending writes again on the tip just read, unless `attempt` was the last.
    fn replay(&mut self, attempt: u32, now: Moment, rng: &mut impl Rng, out: &mut Vec<Effect>) {
        if attempt >= self.cfg.max_attempts.max(1) {
            let failure = CycleFailure::Exhausted { attempts: attempt };
            return self.fail(failure, now, rng, out);
        }
        if !self.pending.is_empty() {
            self.stats.replays += 1;
        }
        self.start_build(Some(attempt + 1), out);
    }

    /// Takes note of the remote tip as just read. Returns whether the branch diverged.
    /// Whether `id` is backflow's own push whose landing it has not seen yet: the chain it is
    /// sending, or the commit a process that died was sending. Any other tip it did not see
    /// before is somebody's move — its own older commit too (a force-push back to it, after
    /// backflow saw the branch move past it).
    fn landing(&self, id: CommitId) -> bool {
        self.chain.head() == Some(id)
            || (self.durable.sending == Some(id) && self.durable.pushed != Some(id))
    }

    fn observe(&mut self, fetched: &FetchedTip, out: &mut Vec<Effect>) -> bool {
        let before = self.durable;
        let tip = fetched.tip;
        let seen = self.durable.seen;
        // A worker that never pushed to this branch nor looked at it before takes the branch as
        // it finds it; after that, every tip it did not write is foreign.
        let first_ever =
            self.remote_tip == Tip::Unknown && seen.is_none() && self.durable.pushed.is_none();
        if let Tip::At(id) = tip
            && Some(id) != seen
            && !self.landing(id)
            && !first_ever
        {
            self.stats.foreign_commits += 1;
            out.push(Effect::Emit(Event::Foreign(ForeignCommit {
                tip: id,
                previous: seen,
            })));
        }
        self.remote_tip = tip;
        self.durable.seen = tip.commit();
        // A push whose answer was lost may have landed: if the tip contains the chain, the
        // writes in it are published and must not be replayed (never twice).
        if let Some(head) = self.chain.head() {
            if fetched.contains.contains(&head) {
                self.durable.pushed = Some(head);
                self.publish_chain(tip, out);
            } else if let Some(held) = self.chain.newest_held(&fetched.contains) {
                // Part of the chain is on the branch, its head is not: the push landed and the
                // branch lost backflow's commits since (a force-push back into the chain).
                self.durable.pushed = Some(head);
                self.lost_after(held, tip);
            }
        }
        // A push sent by a process that died before it heard the answer landed.
        if let Some(sent) = self.durable.sending
            && self.durable.pushed != Some(sent)
            && fetched.contains.contains(&sent)
        {
            self.durable.pushed = Some(sent);
        }
        let diverged = match self.durable.pushed {
            Some(lost) if tip.commit() != Some(lost) && !fetched.contains.contains(&lost) => {
                // The new tip is the baseline from now on: the owner's resync restores what was
                // lost on top of it.
                self.durable.pushed = tip.commit();
                out.push(Effect::Emit(Event::Diverged(Divergence {
                    tip: tip.commit(),
                    lost,
                })));
                true
            }
            _ => false,
        };
        if self.durable != before {
            out.push(Effect::Persist(self.durable));
        }
        diverged
    }

    fn on_built(
        &mut self,
        result: Result<BuiltChain, IoFailure>,
        now: Moment,
        rng: &mut impl Rng,
        out: &mut Vec<Effect>,
    ) {
        let Phase::Building {
            from,
            count,
            attempt,
        } = std::mem::replace(&mut self.phase, Phase::Idle)
        else {
            return;
        };
        let built = match result {
            Ok(built) => built,
            Err(error) => return self.fail(CycleFailure::Build(error), now, rng, out),
        };
        for (index, write) in (from..from + count).zip(built.writes) {
            let Some(pending) = self.pending.get_mut(index) else {
                break;
            };
            for refused in &write.refused {
                if let Some((_, intent)) = pending.intents.get(&refused.slot) {
                    out.push(Effect::Emit(Event::Refused {
                        seq: refused.seq,
                        target: intent.target.clone(),
                        key: intent.key.clone(),
                        error: refused.error.clone(),
                    }));
                }
            }
            // An unchanged intent is dropped for good only when judged against a tip read after
            // it was decided; otherwise it stays (and is judged again on a replay) until the
            // chain's base is confirmed.
            let base_read_after =
                self.confirmed.tip == self.chain.base && pending.through <= self.confirmed.after;
            let refused = write.refused.into_iter().map(|r| r.slot);
            if base_read_after {
                pending.settle_build(write.unchanged.into_iter().chain(refused));
            } else {
                // An applier's echo of what Git held is judged on the tip known now, for good.
                let (echoes, edits): (Vec<Slot>, Vec<Slot>) = write
                    .unchanged
                    .into_iter()
                    .partition(|slot| pending.is_echo(slot));
                self.chain.provisional |= !edits.is_empty();
                pending.refuse(refused.chain(echoes));
            }
            self.chain.through = self.chain.through.max(pending.through);
            self.chain.built += 1;
            if let Some(commit) = write.commit {
                self.chain.commits.push(ChainCommit {
                    id: commit,
                    built: self.chain.built,
                    through: self.chain.through,
                });
                self.stats.commits += 1;
            }
        }
        if let Some(attempt) = attempt {
            self.try_push(attempt, out);
        }
    }

    fn on_pushed(&mut self, answer: PushAnswer, now: Moment, out: &mut Vec<Effect>) {
        let Phase::Pushing {
            head,
            expected,
            attempt,
        } = std::mem::replace(&mut self.phase, Phase::Idle)
        else {
            return;
        };
        match answer {
            PushAnswer::Accepted => {
                self.stats.pushes_accepted += 1;
                self.confirmed = Confirmed {
                    tip: Tip::At(head),
                    after: self.io_after,
                };
                self.remote_tip = Tip::At(head);
                self.durable = DurableTips {
                    seen: Some(head),
                    pushed: Some(head),
                    sending: Some(head),
                };
                out.push(Effect::Persist(self.durable));
                self.publish_chain(Tip::At(head), out);
                self.backoff.reset();
                self.start_cooldown(now);
            }
            PushAnswer::Rejected { reason } => {
                self.stats.pushes_rejected += 1;
                let purpose = FetchPurpose::AfterRejection {
                    expected,
                    attempt,
                    reason,
                };
                self.start_fetch(purpose, out);
            }
            PushAnswer::Lost(error) => {
                self.stats.push_errors += 1;
                self.start_fetch(FetchPurpose::AfterLostAnswer { head, error }, out);
            }
        }
    }

    fn start_cooldown(&mut self, now: Moment) {
        self.push_not_before =
            (!self.cfg.push_cooldown.is_zero()).then(|| now + self.cfg.push_cooldown);
    }
}

/// A closed window's intents, one per slot.
type Decided = BTreeMap<Slot, (IntentSeq, Intent)>;

/// Splits a closed window's intents into the writes their authors get: one per user whose
/// target keeps authors apart, one for every other intent, in the order of each group's first
/// intent.
fn by_author(intents: Decided) -> Vec<Decided> {
    let mut groups: BTreeMap<Option<Arc<str>>, Decided> = BTreeMap::new();
    for (slot, (seq, intent)) in intents {
        let author = intent.separate_author().cloned();
        groups
            .entry(author)
            .or_default()
            .insert(slot, (seq, intent));
    }
    let mut groups: Vec<_> = groups.into_values().collect();
    groups.sort_by_key(|g| g.values().map(|(seq, _)| *seq).min());
    groups
}
