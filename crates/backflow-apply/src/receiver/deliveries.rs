//! [`DeliveryLog`]: what became of each delivery to a known receiver, handed from the endpoint
//! and the dispatcher to the controller, which keeps the newest in the receiver's status
//! (`status.recentDeliveries`): durable, bounded, and what the web view shows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use backflow_api::Clock;
use backflow_api::config::{DeliveryRecord, RECENT_DELIVERIES};
use tokio::sync::Notify;

/// Deliveries not yet written to their receiver's status, by receiver (`namespace/name`).
pub struct DeliveryLog {
    pending: Mutex<BTreeMap<String, Vec<DeliveryRecord>>>,
    /// Signalled when a delivery is recorded.
    pub news: Notify,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for DeliveryLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliveryLog").finish_non_exhaustive()
    }
}

impl DeliveryLog {
    /// An empty log, timing deliveries by `clock`.
    #[must_use]
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            pending: Mutex::default(),
            news: Notify::new(),
            clock,
        }
    }

    /// A delivery to `receiver` came, and this became of it.
    pub fn record(&self, receiver: &str, outcome: &str, detail: String) {
        let record = DeliveryRecord {
            at: humantime::format_rfc3339_seconds(self.clock.now()).to_string(),
            outcome: outcome.to_string(),
            detail,
        };
        let mut pending = self.lock();
        let queue = pending.entry(receiver.to_string()).or_default();
        queue.push(record);
        // Only the newest reach a status; a flood keeps no more than that in memory.
        if queue.len() > RECENT_DELIVERIES {
            queue.drain(..queue.len() - RECENT_DELIVERIES);
        }
        drop(pending);
        self.news.notify_one();
    }

    /// Takes every pending delivery, oldest first per receiver.
    pub fn take(&self) -> BTreeMap<String, Vec<DeliveryRecord>> {
        std::mem::take(&mut *self.lock())
    }

    /// Puts back deliveries whose status could not be written (before any recorded since).
    pub fn put_back(&self, receiver: &str, mut records: Vec<DeliveryRecord>) {
        let mut pending = self.lock();
        let queue = pending.entry(receiver.to_string()).or_default();
        records.append(queue);
        let over = records.len().saturating_sub(RECENT_DELIVERIES);
        records.drain(..over);
        *queue = records;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Vec<DeliveryRecord>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A status's recent deliveries (newest first) with `new` ones (oldest first) added: newest
/// first, at most [`RECENT_DELIVERIES`].
#[must_use]
pub fn merged(kept: &[DeliveryRecord], new: &[DeliveryRecord]) -> Vec<DeliveryRecord> {
    new.iter()
        .rev()
        .chain(kept)
        .take(RECENT_DELIVERIES)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(at: &str) -> DeliveryRecord {
        DeliveryRecord {
            at: at.into(),
            outcome: "accepted".into(),
            detail: String::new(),
        }
    }

    #[test]
    fn new_deliveries_go_first_and_the_oldest_fall_off() {
        let kept: Vec<DeliveryRecord> = (0..RECENT_DELIVERIES)
            .rev()
            .map(|n| record(&n.to_string()))
            .collect();
        let new = [record("a"), record("b")];
        let ats: Vec<String> = merged(&kept, &new).into_iter().map(|r| r.at).collect();
        assert_eq!(ats.len(), RECENT_DELIVERIES);
        assert_eq!(ats[..3], ["b", "a", "9"]);
        assert_eq!(
            ats.last().map(String::as_str),
            Some("2"),
            "0 and 1 fell off"
        );
    }

    #[test]
    fn a_flood_keeps_only_the_newest_pending_and_a_put_back_goes_before_what_came_since() {
        let log = DeliveryLog::new(Arc::new(backflow_api::SystemClock));
        for n in 0..RECENT_DELIVERIES + 5 {
            log.record("ns/r", "accepted", n.to_string());
        }
        let taken = log.take();
        let details: Vec<&str> = taken["ns/r"].iter().map(|r| r.detail.as_str()).collect();
        assert_eq!(details.len(), RECENT_DELIVERIES);
        assert_eq!(details[0], "5");
        log.record("ns/r", "refused", "later".into());
        log.put_back("ns/r", vec![record("x")]);
        let again: Vec<String> = log.take()["ns/r"]
            .iter()
            .map(|r| r.outcome.clone())
            .collect();
        assert_eq!(again, ["accepted", "refused"], "the put-back one first");
    }
}
