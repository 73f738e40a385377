//! [`Deliveries`]: what became of the push webhooks' recent deliveries, newest first, for
//! people (the web view). Bounded and in memory: the receiver's metrics count every delivery
//! and its log tells each.

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// One delivery to a `GitReceiver`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Delivery {
    /// When it came (RFC 3339).
    pub at: String,
    /// The receiver's `namespace/name`.
    pub receiver: String,
    /// What became of it: `accepted`, `duplicate`, `no matching branch`, `refused`, …
    pub outcome: String,
    /// What it named or why it was refused, for a person.
    pub detail: String,
}

/// The newest deliveries.
#[derive(Debug, Default)]
pub struct Deliveries(Mutex<VecDeque<Delivery>>);

impl Deliveries {
    /// How many are kept; older ones are forgotten first.
    pub const KEPT: usize = 100;

    /// Records `delivery`.
    pub fn record(&self, delivery: Delivery) {
        let mut kept = self.lock();
        kept.push_front(delivery);
        kept.truncate(Self::KEPT);
    }

    /// The kept deliveries, newest first.
    #[must_use]
    pub fn newest(&self) -> Vec<Delivery> {
        self.lock().iter().cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Delivery>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_come_first_and_the_oldest_are_forgotten() {
        let kept = Deliveries::default();
        for n in 0..=Deliveries::KEPT {
            kept.record(Delivery {
                at: n.to_string(),
                receiver: "r".into(),
                outcome: "accepted".into(),
                detail: String::new(),
            });
        }
        let newest = kept.newest();
        assert_eq!(newest.len(), Deliveries::KEPT);
        assert_eq!(newest[0].at, Deliveries::KEPT.to_string());
        assert_eq!(
            newest[Deliveries::KEPT - 1].at,
            "1",
            "the first one forgotten"
        );
    }
}
