//! Injected time (docs/architecture.md, pure cores): decision logic never calls `SystemTime::now()` itself.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// A source of time, handed to whatever needs "now".
///
/// Two readings: wall-clock time, for timestamps people read (commits, status), and a
/// monotonic reading, for every timer (windows, cooldowns, backoff), which never goes backwards
/// when the wall clock is stepped. Production code uses [`SystemClock`]; tests and the simulator
/// use [`ManualClock`].
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;

    /// Time elapsed since an origin of this clock's choosing, on a clock that never goes
    /// backwards. Only differences between two readings mean anything.
    fn monotonic(&self) -> Duration;
}

/// The real clock of the machine.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn monotonic(&self) -> Duration {
        // One origin for the whole process, so readings from every copy compare.
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed()
    }
}

/// A clock that only moves when told to.
#[derive(Debug)]
pub struct ManualClock {
    times: Mutex<ManualTimes>,
}

#[derive(Debug, Clone, Copy)]
struct ManualTimes {
    wall: SystemTime,
    monotonic: Duration,
}

impl ManualClock {
    /// A clock standing at `start`.
    #[must_use]
    pub fn new(start: SystemTime) -> Self {
        Self {
            times: Mutex::new(ManualTimes {
                wall: start,
                monotonic: Duration::ZERO,
            }),
        }
    }

    fn times(&self) -> std::sync::MutexGuard<'_, ManualTimes> {
        self.times
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Moves both readings forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut times = self.times();
        times.wall += by;
        times.monotonic += by;
    }

    /// Sets the wall clock to `wall` (forwards or backwards) without moving the monotonic
    /// reading, as an NTP step or a person setting the date does.
    pub fn set_wall(&self, wall: SystemTime) {
        self.times().wall = wall;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        self.times().wall
    }

    fn monotonic(&self) -> Duration {
        self.times().monotonic
    }
}
