//! The election, decided without I/O or a clock: `Election::step(input, now, wall)` says what to
//! read or write and when to be woken; the shell (`lease.rs`) does it and reports back.

use std::time::{Duration, Instant, SystemTime};

/// How a candidate contends, with client-go's defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// This candidate, as the Lease's `holderIdentity` names it: unique per process.
    pub identity: String,
    /// How long a holder that stopped renewing keeps the Lease (15 s).
    pub lease_duration: Duration,
    /// How long a leader keeps leading without a successful renewal (10 s).
    pub renew_deadline: Duration,
    /// How often a candidate tries, and a leader renews (2 s).
    pub retry_period: Duration,
}

/// Timing an election cannot keep.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// The Lease records whole seconds.
    #[error("the lease duration must be whole seconds, at least 1s")]
    LeaseDurationNotWholeSeconds,
    /// A leader would keep acting after a standby may take over.
    #[error("the renew deadline must be shorter than the lease duration")]
    RenewDeadlineNotShorterThanLease,
    /// A leader would miss its own deadline between two renewals (client-go's rule: more than
    /// 1.2 retry periods).
    #[error("the renew deadline must be more than 1.2 times the retry period")]
    RenewDeadlineTooShortForRetries,
}

impl ElectionConfig {
    /// Checks the timing as client-go does.
    ///
    /// # Errors
    /// The first rule it breaks.
    pub fn validate(&self) -> Result<(), TimingError> {
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration.as_secs() == 0 {
            return Err(TimingError::LeaseDurationNotWholeSeconds);
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(TimingError::RenewDeadlineNotShorterThanLease);
        }
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * 1.2 {
            return Err(TimingError::RenewDeadlineTooShortForRetries);
        }
        Ok(())
    }

    /// `identity` with client-go's timing.
    #[must_use]
    pub fn new(identity: impl Into<String>) -> Self {
        Self {
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// What a Lease says (its spec).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Who holds it; `None` (or empty) when released.
    pub holder: Option<String>,
    /// How long its holder keeps it without renewing.
    pub lease_duration: Duration,
    /// When its holder took it.
    pub acquire_time: Option<SystemTime>,
    /// When its holder last renewed it.
    pub renew_time: Option<SystemTime>,
    /// How many times it changed hands.
    pub transitions: i32,
}

impl LeaseRecord {
    fn held_by(&self, identity: &str) -> bool {
        self.holder.as_deref() == Some(identity)
    }

    fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }
}

/// Why a write of the Lease failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteFailure {
    /// Somebody wrote it since it was read (or created it first).
    Conflict,
    /// Anything else (the API unreachable, forbidden): the message says what.
    Other(String),
}

/// What happened, reported to the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionInput {
    /// Time passed (the wake-up asked for, or any other reason to look).
    Tick,
    /// The Lease as read, with its resourceVersion: `None` when it does not exist.
    Read(Result<Option<(LeaseRecord, String)>, String>),
    /// The Lease as written, with its new resourceVersion.
    Written(Result<(LeaseRecord, String), WriteFailure>),
    /// The process stops: release the Lease if it is held.
    Stop,
}

/// Where this candidate stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// It holds the Lease: it alone may act.
    Leading,
    /// Somebody else holds it (or nobody could be read yet): stand by.
    Following {
        /// The holder, when one is known.
        holder: Option<String>,
    },
    /// It held the Lease and no longer does: it must stop acting at once.
    Lost(String),
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ElectionEffect {
    /// Read the Lease, answer [`ElectionInput::Read`].
    Read,
    /// Create the Lease holding `record`, answer [`ElectionInput::Written`].
    Create(LeaseRecord),
    /// Replace the Lease with `record` if it is still at `version`, answer
    /// [`ElectionInput::Written`].
    Update {
        /// What to write.
        record: LeaseRecord,
        /// The resourceVersion it was read at.
        version: String,
    },
    /// Leadership changed.
    Became(Leadership),
    /// Step again at this time (with [`ElectionInput::Tick`]).
    WakeAt(Instant),
    /// Stopped: the Lease is released, or was not held.
    Stopped,
}

/// Which I/O is in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing in flight; the next look is due at `next`.
    Idle {
        next: Instant,
    },
    Reading,
    /// A write sent at `since`: a renewal counts from when it was sent, not answered.
    Writing {
        since: Instant,
    },
    Stopped,
}

/// The last record read or written, and when this candidate first saw it as it is: a holder
/// keeps the Lease until it stays unchanged for its duration, by this candidate's clock.
#[derive(Debug, Clone)]
struct Observed {
    record: LeaseRecord,
    version: String,
    since: Instant,
}

/// One candidate's election.
#[derive(Debug)]
pub struct Election {
    config: ElectionConfig,
    phase: Phase,
    observed: Option<Observed>,
    /// When it last renewed the Lease, while it leads.
    renewed: Option<Instant>,
    stopping: bool,
    /// The leadership last reported.
    reported: Option<Leadership>,
}

impl Election {
    /// A candidate that looks at the Lease at its first step.
    #[must_use]
    pub fn new(config: ElectionConfig, now: Instant) -> Self {
        Self {
            config,
            phase: Phase::Idle { next: now },
            observed: None,
            renewed: None,
            stopping: false,
            reported: None,
        }
    }

    /// Whether it holds the Lease now.
    #[must_use]
    pub fn leading(&self) -> bool {
        self.renewed.is_some()
    }

    /// Takes `input` at `now` (monotonic; `wall` for the Lease's timestamps).
    pub fn step(
        &mut self,
        input: ElectionInput,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<ElectionEffect> {
        let mut out = Vec::new();
        if self.phase == Phase::Stopped {
            return out;
        }
        match input {
            ElectionInput::Tick => {}
            ElectionInput::Stop => {
                self.stopping = true;
                // Release at once; a failed read or write then waits the retry period.
                if let Phase::Idle { next } = &mut self.phase {
                    *next = now;
                }
            }
            ElectionInput::Read(read) => self.on_read(read, now, wall, &mut out),
            ElectionInput::Written(written) => self.on_written(written, now, &mut out),
        }
        self.check_deadline(now, &mut out);
        if let Phase::Idle { next } = self.phase {
            if self.stopping && !self.leading() {
                self.phase = Phase::Stopped;
                out.push(ElectionEffect::Stopped);
                return out;
            }
            if now >= next {
                self.phase = Phase::Reading;
                out.push(ElectionEffect::Read);
            } else {
                out.push(ElectionEffect::WakeAt(self.wake(next)));
            }
        }
        out
    }

    /// The Lease was read: renew it, take it over, stand by, or release it.
    fn on_read(
        &mut self,
        read: Result<Option<(LeaseRecord, String)>, String>,
        now: Instant,
        wall: SystemTime,
        out: &mut Vec<ElectionEffect>,
    ) {
        if self.phase != Phase::Reading {
            return;
        }
        // A failed read was logged by the shell: look again after the retry period.
        let Ok(found) = read else {
            return self.retry(now);
        };
        let Some((record, version)) = found else {
            if self.stopping {
                self.phase = Phase::Idle { next: now };
                return;
            }
            self.phase = Phase::Writing { since: now };
            out.push(ElectionEffect::Create(self.taken(None, wall)));
            return;
        };
        self.observe(&record, &version, now);
        let mine = record.held_by(&self.config.identity);
        if self.stopping {
            if mine {
                self.phase = Phase::Writing { since: now };
                out.push(ElectionEffect::Update {
                    record: self.released(&record, wall),
                    version,
                });
            } else {
                self.lose("the Lease is held by another", out);
                self.phase = Phase::Idle { next: now };
            }
            return;
        }
        if mine {
            let mut renewed = record.clone();
            renewed.renew_time = Some(wall);
            renewed.lease_duration = self.config.lease_duration;
            self.phase = Phase::Writing { since: now };
            out.push(ElectionEffect::Update {
                record: renewed,
                version,
            });
        } else if self.held_by_another(now) {
            if self.leading() {
                self.lose("another replica holds the Lease", out);
            }
            self.report(
                Leadership::Following {
                    holder: record.holder().map(str::to_string),
                },
                out,
            );
            self.retry(now);
        } else {
            self.phase = Phase::Writing { since: now };
            out.push(ElectionEffect::Update {
                record: self.taken(Some(&record), wall),
                version,
            });
        }
    }

    /// A write answered: leading on success; otherwise look again after the retry period.
    fn on_written(
        &mut self,
        written: Result<(LeaseRecord, String), WriteFailure>,
        now: Instant,
        out: &mut Vec<ElectionEffect>,
    ) {
        let Phase::Writing { since } = self.phase else {
            return;
        };
        match written {
            Ok((record, version)) => {
                self.observe(&record, &version, now);
                if record.held_by(&self.config.identity) {
                    self.renewed = Some(since);
                    self.report(Leadership::Leading, out);
                } else if self.stopping {
                    // Released.
                    self.renewed = None;
                    self.phase = Phase::Stopped;
                    out.push(ElectionEffect::Stopped);
                    return;
                }
                self.retry(now);
            }
            // Somebody wrote it first, or it failed (the shell logged it): look again.
            Err(_) => self.retry(now),
        }
    }

    /// A leader that has not renewed within its deadline no longer leads.
    fn check_deadline(&mut self, now: Instant, out: &mut Vec<ElectionEffect>) {
        let Some(renewed) = self.renewed else {
            return;
        };
        if now.saturating_duration_since(renewed) > self.config.renew_deadline {
            let why = format!(
                "the Lease was not renewed within {}s",
                self.config.renew_deadline.as_secs()
            );
            self.lose(&why, out);
        }
    }

    fn lose(&mut self, why: &str, out: &mut Vec<ElectionEffect>) {
        if self.renewed.take().is_some() {
            self.report(Leadership::Lost(why.to_string()), out);
        }
    }

    fn report(&mut self, leadership: Leadership, out: &mut Vec<ElectionEffect>) {
        if self.reported.as_ref() != Some(&leadership) {
            self.reported = Some(leadership.clone());
            out.push(ElectionEffect::Became(leadership));
        }
    }

    fn retry(&mut self, now: Instant) {
        self.phase = Phase::Idle {
            next: now + self.config.retry_period,
        };
    }

    /// When to be woken for `next`: a leader also at its renew deadline.
    fn wake(&self, next: Instant) -> Instant {
        match self.renewed {
            Some(renewed) => {
                next.min(renewed + self.config.renew_deadline + Duration::from_millis(1))
            }
            None => next,
        }
    }

    fn observe(&mut self, record: &LeaseRecord, version: &str, now: Instant) {
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.record != *record || o.version != version);
        if changed {
            self.observed = Some(Observed {
                record: record.clone(),
                version: version.to_string(),
                since: now,
            });
        }
    }

    /// Whether another candidate holds the Lease and has kept it fresh: its record changed
    /// within its duration, as this candidate observed it.
    fn held_by_another(&self, now: Instant) -> bool {
        let Some(observed) = &self.observed else {
            return false;
        };
        let record = &observed.record;
        record.holder().is_some_and(|h| h != self.config.identity)
            && now < observed.since + record.lease_duration
    }

    /// The record of this candidate taking the Lease (over `previous`, when there is one).
    fn taken(&self, previous: Option<&LeaseRecord>, wall: SystemTime) -> LeaseRecord {
        let transitions = previous.map_or(0, |p| p.transitions.saturating_add(1));
        LeaseRecord {
            holder: Some(self.config.identity.clone()),
            lease_duration: self.config.lease_duration,
            acquire_time: Some(wall),
            renew_time: Some(wall),
            transitions,
        }
    }

    /// The record of this leader releasing the Lease: no holder, one second, as client-go's
    /// `ReleaseOnCancel` writes it.
    fn released(&self, record: &LeaseRecord, wall: SystemTime) -> LeaseRecord {
        LeaseRecord {
            holder: None,
            lease_duration: Duration::from_secs(1),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            transitions: record.transitions,
        }
    }
}
