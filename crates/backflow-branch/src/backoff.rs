//! Retry pacing: jittered exponential backoff, with the randomness handed in.

use std::time::Duration;

use rand::Rng;

/// The shape of a backoff: first delay, growth and cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// The delay before the first retry (before jitter).
    pub initial: Duration,
    /// The longest delay (before jitter).
    pub max: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(60),
        }
    }
}

/// A running backoff: each failure doubles the delay up to the cap; a success resets it.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: BackoffPolicy,
    failures: u32,
}

impl Backoff {
    /// A fresh backoff.
    #[must_use]
    pub fn new(policy: BackoffPolicy) -> Self {
        Self {
            policy,
            failures: 0,
        }
    }

    /// The delay before the next attempt, somewhere in the upper half of the current step, so
    /// many workers failing at once do not retry in lockstep.
    pub fn next_delay(&mut self, rng: &mut impl Rng) -> Duration {
        let factor = 1u32.checked_shl(self.failures.min(20)).unwrap_or(u32::MAX);
        let step = self
            .policy
            .initial
            .saturating_mul(factor)
            .min(self.policy.max);
        self.failures = self.failures.saturating_add(1);
        let half = step / 2;
        let jitter_ns = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        let extra = if jitter_ns == 0 {
            0
        } else {
            rng.random_range(0..=jitter_ns)
        };
        half + Duration::from_nanos(extra)
    }

    /// How many failures in a row so far.
    #[must_use]
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Back to the first step, after a success.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn doubles_within_jitter_and_caps() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let policy = BackoffPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(8),
        };
        let mut b = Backoff::new(policy);
        let expect = [1u64, 2, 4, 8, 8, 8];
        for step in expect {
            let d = b.next_delay(&mut rng);
            let step = Duration::from_secs(step);
            assert!(
                d >= step / 2 && d <= step,
                "{d:?} outside [{:?}, {step:?}]",
                step / 2
            );
        }
        b.reset();
        let d = b.next_delay(&mut rng);
        assert!(d <= Duration::from_secs(1));
    }

    /// Workers failing together spread their retries over the upper half of the step, and the
    /// count of failures in a row is what the worker reports.
    #[test]
    fn retries_are_spread_and_failures_counted() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let policy = BackoffPolicy {
            initial: Duration::from_secs(1),
            max: Duration::from_secs(1),
        };
        let mut b = Backoff::new(policy);
        assert_eq!(b.failures(), 0);
        let delays: std::collections::BTreeSet<Duration> =
            (0..20).map(|_| b.next_delay(&mut rng)).collect();
        assert!(delays.len() > 10, "jittered, not in lockstep: {delays:?}");
        assert!(delays.iter().any(|d| *d > Duration::from_millis(500)));
        assert_eq!(b.failures(), 20);
        b.reset();
        assert_eq!(b.failures(), 0);
    }

    #[test]
    fn same_seed_same_delays() {
        let run = || {
            let mut rng = rand::rngs::StdRng::seed_from_u64(42);
            let mut b = Backoff::new(BackoffPolicy::default());
            (0..8).map(|_| b.next_delay(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
