//! Points on a monotonic clock.
//!
//! Every timer of the branch worker (commit window, cooldown, backoff, refresh) is measured on a
//! clock that never goes backwards, so a wall-clock step (NTP, a VM resumed, a person setting
//! the date) can neither stretch nor skip a wait. Wall time is only for commit timestamps and
//! for display, and the shell reads it itself.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on a monotonic clock: the time elapsed since an origin the clock chose (for the
/// process clock, its first reading). Only differences between moments of one clock mean
/// anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Moment(pub Duration);

impl Moment {
    /// The origin of the clock.
    pub const ZERO: Self = Self(Duration::ZERO);

    /// How long after `earlier` this moment is; zero when it is not after it.
    #[must_use]
    pub fn saturating_since(self, earlier: Self) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Duration> for Moment {
    type Output = Self;

    fn add(self, rhs: Duration) -> Self {
        Self(self.0.saturating_add(rhs))
    }
}

impl Sub<Duration> for Moment {
    type Output = Self;

    fn sub(self, rhs: Duration) -> Self {
        Self(self.0.saturating_sub(rhs))
    }
}
