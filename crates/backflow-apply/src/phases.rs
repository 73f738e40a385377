//! Where one apply's time went, phase by phase: published as `backflow_apply_phase_seconds`,
//! so a slow apply says which part of it was slow.

use std::time::{Duration, Instant};

/// The time one apply spent in each of its phases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApplyPhases {
    /// Reading the folders' files from Git: the commit applied, the last applied one, and the
    /// one asked before when it is neither.
    pub read: Duration,
    /// Parsing (and decrypting) the files into the objects they declare.
    pub declare: Duration,
    /// Reading the live objects the apply judges (one paged list per type it declares many of).
    pub live_reads: Duration,
    /// Judging each object and writing those that need it (server-side apply, label stamps).
    pub writes: Duration,
    /// Judging and deleting what the folders no longer declare.
    pub prune: Duration,
}

impl ApplyPhases {
    /// Each phase beside the name its metric label carries.
    #[must_use]
    pub fn labelled(&self) -> [(&'static str, Duration); 5] {
        [
            ("read", self.read),
            ("declare", self.declare),
            ("live_reads", self.live_reads),
            ("writes", self.writes),
            ("prune", self.prune),
        ]
    }
}

/// Times consecutive phases: each lap is the time since the last.
pub(crate) struct Stopwatch(Instant);

impl Stopwatch {
    pub(crate) fn start() -> Self {
        Self(Instant::now())
    }

    /// The time since the start or the last lap.
    pub(crate) fn lap(&mut self) -> Duration {
        let now = Instant::now();
        let took = now.duration_since(self.0);
        self.0 = now;
        took
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_has_its_own_label() {
        let phases = ApplyPhases {
            read: Duration::from_millis(1),
            declare: Duration::from_millis(2),
            live_reads: Duration::from_millis(3),
            writes: Duration::from_millis(4),
            prune: Duration::from_millis(5),
        };
        let labelled = phases.labelled();
        let names: Vec<&str> = labelled.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["read", "declare", "live_reads", "writes", "prune"]);
        let millis: Vec<u128> = labelled.iter().map(|(_, d)| d.as_millis()).collect();
        assert_eq!(millis, [1, 2, 3, 4, 5]);
    }
}
