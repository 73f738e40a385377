//! Invariant 10, time as a yardstick: the branch worker keeps the timing it promises.
//!
//! The other invariants judge what ends up where, and the world waits as long as it takes, so
//! a worker that commits late, forgets a cooldown or retries a minute too late keeps them all.
//! This ledger holds what the world saw of the worker from outside — each submission's receipt
//! and time, the `Published` and `Failed` reports, the pushes it started and how the remote
//! answered them — and the promises of its configuration:
//!
//! - an idle worker (nothing in flight) never lets a submission wait past its deadline: the
//!   flush that covers it (at once), the `Hurry` its writer asked (at once, after the cooldown),
//!   else its commit window (a second of silence after the latest submission, at most the
//!   window's age after the earliest one still owed), then the push cooldown unless a flush
//!   waits; a backoff it announced excuses it until the retry it named;
//! - a retry it announces is no further than its backoff allows after so many failures in a row;
//! - no push starts inside the cooldown after an accepted push, unless a flush waits.
//!
//! Each bound is the latest the rule allows, so only a worker that breaks its rule fails it.

use std::collections::BTreeMap;
use std::time::Duration;

use backflow_branch::{CommitId, CoreConfig, IntentSeq, Moment};

use crate::check::Violation;

/// What the world saw of this process's branch worker, against the timing it promises.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// Submissions not reported published yet, by receipt.
    owed: BTreeMap<IntentSeq, Owed>,
    /// The last receipt a writer waits for (`Hurry`), and when it asked.
    hurried: Option<(IntentSeq, Moment)>,
    /// The last flush asked: the receipts it covers, and when.
    flushed: Option<(IntentSeq, Moment)>,
    /// Until when a backoff the worker announced excuses it.
    backing_off: Option<Moment>,
    /// Cycles failed since the worker last reset its backoff (at least as many as it counts).
    failures: u32,
    /// Until when the cooldown after the last push the worker heard landed lasts.
    cooling_until: Option<Moment>,
    /// A push landed with its answer lost (its head): the fetch the worker makes next tells
    /// it so, and its cooldown starts then — unless that fetch fails or finds the branch moved
    /// away from it.
    landed_unheard: Option<CommitId>,
    /// How many of the shell's effects were looked at.
    effects_seen: usize,
}

impl Pace {
    /// The process restarted: its worker remembers none of it.
    pub(crate) fn restarted(&mut self) {
        *self = Self::default();
    }

    /// The world handed the worker an intent at `at`; `receipt` is its number.
    pub(crate) fn submitted(&mut self, receipt: IntentSeq, at: Moment) {
        self.owed.insert(receipt, Owed { at, resync: None });
    }

    /// The world handed the worker a resync at `at`; `receipt` is its last intent's number.
    /// A resync window keeps the limits it opened with: the commit window's silence, at most
    /// `resync_window`, as `cfg` gave them then.
    pub(crate) fn resynced(&mut self, receipt: IntentSeq, at: Moment, cfg: &CoreConfig) {
        let limits = WindowLimits {
            silence: cfg.window.min(cfg.resync_window),
            max_age: cfg.max_window_age.min(cfg.resync_window * 10),
        };
        self.owed.insert(
            receipt,
            Owed {
                at,
                resync: Some(limits),
            },
        );
    }

    /// The writer of everything through `receipt` waits for its push.
    pub(crate) fn hurried(&mut self, receipt: IntentSeq, at: Moment) {
        self.hurried = Some((receipt, at));
    }

    /// A flush of everything through `mark` was asked.
    pub(crate) fn flushed(&mut self, mark: IntentSeq, at: Moment) {
        self.flushed = Some((mark, at));
    }

    /// The worker reported everything through `through` published.
    pub(crate) fn published(&mut self, through: IntentSeq) {
        self.owed.retain(|receipt, _| *receipt > through);
    }

    /// The worker reported a failed cycle at `now`, retried at `retry_at`.
    pub(crate) fn failed(
        &mut self,
        now: Moment,
        retry_at: Moment,
        cfg: &CoreConfig,
    ) -> Result<(), Violation> {
        // The documented policy, computed here rather than asked of `Backoff`: the oracle
        // must not share the code it judges.
        let factor = 1u32.checked_shl(self.failures.min(20)).unwrap_or(u32::MAX);
        let step = cfg
            .backoff
            .initial
            .saturating_mul(factor)
            .min(cfg.backoff.max);
        self.failures = self.failures.saturating_add(1);
        self.backing_off = Some(retry_at);
        // The fetch after a lost answer failed: the worker never heard its push landed.
        self.landed_unheard = None;
        let delay = retry_at.0.saturating_sub(now.0);
        if retry_at <= now || delay > step {
            return Err(Violation::Late(format!(
                "failure {} in a row retried after {delay:?}, the backoff allows at most {step:?}",
                self.failures
            )));
        }
        Ok(())
    }

    /// The remote accepted a push of `head` at `now` (`heard`: the worker got the answer).
    pub(crate) fn push_landed(
        &mut self,
        head: CommitId,
        now: Moment,
        heard: bool,
        cfg: &CoreConfig,
    ) {
        if heard {
            self.failures = 0;
            self.cooling_until = Some(now + cfg.push_cooldown);
        } else {
            self.landed_unheard = Some(head);
        }
    }

    /// A push whose answer was lost, not learned of yet.
    pub(crate) fn unheard_landing(&self) -> Option<CommitId> {
        self.landed_unheard
    }

    /// A fetch was answered at `now` (`learned`: it told the worker its push whose answer was
    /// lost landed).
    pub(crate) fn fetch_answered(&mut self, now: Moment, learned: bool, cfg: &CoreConfig) {
        if self.landed_unheard.take().is_some() && learned {
            self.cooling_until = Some(now + cfg.push_cooldown);
        }
    }

    /// The provider's settings changed at `now`: the worker backs off no longer and cools down
    /// no longer than the new settings say, and counts its failures from zero.
    pub(crate) fn reconfigured(&mut self, now: Moment, cfg: &CoreConfig) {
        let cap = now + cfg.push_cooldown;
        self.cooling_until = self.cooling_until.map(|c| c.min(cap));
        self.backing_off = self.backing_off.map(|b| b.min(now));
        self.failures = 0;
    }

    /// The shell's effects since the last look, at `now`: no I/O starts before the retry a
    /// backoff named, and no push inside the cooldown unless a flush waits (`urgent`).
    pub(crate) fn effects(
        &mut self,
        effects: &[String],
        now: Moment,
        urgent: bool,
    ) -> Result<(), Violation> {
        let new = effects.get(self.effects_seen..).unwrap_or_default();
        self.effects_seen = effects.len();
        let started = |kinds: &[&str]| new.iter().any(|e| kinds.iter().any(|k| e.starts_with(k)));
        if let Some(until) = self.backing_off.filter(|until| now < *until)
            && started(&["Fetch", "Build", "Push"])
        {
            return Err(Violation::Late(format!(
                "I/O started {:?} before the retry its backoff named",
                until.0.saturating_sub(now.0)
            )));
        }
        match self.cooling_until {
            Some(until) if !urgent && now < until && started(&["Push"]) => {
                Err(Violation::Late(format!(
                    "a push started {:?} before the cooldown after the last one ended",
                    until.0.saturating_sub(now.0)
                )))
            }
            _ => Ok(()),
        }
    }

    /// The worker is idle at `now` and will next be looked at `next`: no submission may pass
    /// its deadline meanwhile (`urgent`: a flush waits, so no cooldown holds).
    pub(crate) fn idle_until(
        &self,
        now: Moment,
        next: Moment,
        cfg: &CoreConfig,
        urgent: bool,
    ) -> Result<Option<Held>, Violation> {
        let Some((deadline, held)) = self.deadline(cfg, urgent) else {
            return Ok(None);
        };
        if deadline < next {
            let owed: Vec<u64> = self.owed.keys().map(|r| r.0).collect();
            return Err(Violation::Late(format!(
                "idle at {} ms with intents {owed:?} due at {} ms; next looked at {} ms",
                now.0.as_millis(),
                deadline.0.as_millis(),
                next.0.as_millis()
            )));
        }
        Ok(held.then_some(Held { until: deadline }))
    }

    /// The latest moment the worker must have started on what it owes, and whether the
    /// cooldown set it.
    fn deadline(&self, cfg: &CoreConfig, urgent: bool) -> Option<(Moment, bool)> {
        let earliest_receipt = *self.owed.keys().next()?;
        let ordinary = WindowLimits {
            silence: cfg.window,
            max_age: cfg.max_window_age,
        };
        let window = [
            window_deadline(self.owed.values().filter(|o| o.resync.is_none()), |_| {
                ordinary
            }),
            window_deadline(self.owed.values().filter(|o| o.resync.is_some()), |o| {
                o.resync.unwrap_or(ordinary)
            }),
        ]
        .into_iter()
        .flatten()
        .min()?;
        let covered = |by: Option<(IntentSeq, Moment)>| {
            by.filter(|(through, _)| earliest_receipt <= *through)
                .map(|(_, at)| at)
        };
        let mut deadline = window;
        if let Some(hurried) = covered(self.hurried) {
            deadline = deadline.min(hurried);
        }
        let mut cooling = false;
        if !urgent && let Some(until) = self.cooling_until.filter(|until| *until > deadline) {
            (deadline, cooling) = (until, true);
        }
        if let Some(flushed) = covered(self.flushed) {
            deadline = deadline.min(flushed);
        }
        if let Some(until) = self.backing_off.filter(|until| *until > deadline) {
            (deadline, cooling) = (until, false);
        }
        Some((deadline, cooling))
    }
}

/// The push cooldown holds the worker back from what it owes, until `until`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub until: Moment,
}

/// One submission the worker has not reported published.
#[derive(Debug, Clone, Copy)]
struct Owed {
    /// When it was handed in.
    at: Moment,
    /// A resync's window limits; `None` for an intent of the ordinary commit window.
    resync: Option<WindowLimits>,
}

/// What closes a commit window: a silence after its latest intent, or its age.
#[derive(Debug, Clone, Copy)]
struct WindowLimits {
    silence: Duration,
    max_age: Duration,
}

/// The latest a window holding `owed` closes: the silence after the latest, or the age of the
/// earliest, with the widest limits any of them was given.
fn window_deadline<'a>(
    owed: impl Iterator<Item = &'a Owed>,
    limits: impl Fn(&Owed) -> WindowLimits,
) -> Option<Moment> {
    let mut span: Option<(Moment, Moment, WindowLimits)> = None;
    for o in owed {
        let l = limits(o);
        span = Some(match span {
            None => (o.at, o.at, l),
            Some((first, last, w)) => (
                first.min(o.at),
                last.max(o.at),
                WindowLimits {
                    silence: w.silence.max(l.silence),
                    max_age: w.max_age.max(l.max_age),
                },
            ),
        });
    }
    span.map(|(first, last, l)| std::cmp::min(last + l.silence, first + l.max_age))
}

/// The push cooldowns a seed or a reconfiguration may give the worker: none (the default),
/// or one long enough that commit windows close inside it.
pub(crate) const COOLDOWNS: [Duration; 3] =
    [Duration::ZERO, Duration::ZERO, Duration::from_millis(1500)];

/// The longest a commit window may stay open, per seed: the default, or short enough that a
/// stream of edits reaches it.
pub(crate) const MAX_WINDOW_AGES: [Duration; 2] = [Duration::from_secs(10), Duration::from_secs(2)];

/// The apply decision's backoff, as it promises it: after failed operations in a row nothing is
/// flushed for the applier before `backoff_base` doubled per further failure (at most
/// `backoff_max`) has passed since the last one failed.
#[derive(Debug, Default)]
pub(crate) struct ApplyPace {
    /// Operations failed in a row in this process, and when the last one failed.
    failed: Option<(u32, Moment)>,
}

impl ApplyPace {
    /// An operation failed at `now`.
    pub(crate) fn failed(&mut self, now: Moment) {
        let failures = self.failed.map_or(0, |(n, _)| n);
        self.failed = Some((failures + 1, now));
    }

    /// An operation succeeded: the backoff starts over.
    pub(crate) fn succeeded(&mut self) {
        self.failed = None;
    }

    /// The decision flushes for an apply at `now`: not inside its backoff.
    pub(crate) fn flushed(
        &self,
        now: Moment,
        config: &backflow_decision::ApplierConfig,
    ) -> Result<(), Violation> {
        let Some((failures, at)) = self.failed else {
            return Ok(());
        };
        let doublings = failures.saturating_sub(1).min(31);
        let backoff = (config.backoff_base)
            .saturating_mul(1_u32 << doublings)
            .min(config.backoff_max);
        if now.0 < at.0 + backoff {
            return Err(Violation::Late(format!(
                "the apply decision flushed at {now:?}, inside the {backoff:?} backoff after {failures} failed operations (the last at {at:?})"
            )));
        }
        Ok(())
    }
}
