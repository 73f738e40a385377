//! The bounded history of changes that watches read from, like etcd's revision window.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use backflow_api::ObjectKey;
use tokio::sync::watch;

use super::StoredObject;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

impl EventType {
    /// The watch event `type` string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// One committed change.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// The resourceVersion the change took.
    pub resource_version: u64,
    /// Added, modified or deleted.
    pub event_type: EventType,
    /// Which object.
    pub key: ObjectKey,
    /// The object after the change (for a delete: its last state at the new resourceVersion).
    pub object: StoredObject,
    /// The object before the change, so a filtered watch can tell "left the selection".
    pub previous: Option<StoredObject>,
}

/// A watch asked to resume from a resourceVersion older than the history kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expired {
    /// The resourceVersion asked for.
    pub requested: u64,
    /// The oldest resourceVersion a watch can still resume from.
    pub oldest: u64,
}

#[derive(Debug)]
struct Inner {
    events: VecDeque<Arc<WatchEvent>>,
    /// The approximate size of each event's object, in `events`' order.
    sizes: VecDeque<usize>,
    /// Their sum.
    bytes: usize,
    /// Every change after this resourceVersion is in `events`.
    floor: u64,
}

/// The event history plus a signal that moves with every commit.
#[derive(Debug)]
pub struct EventLog {
    inner: Mutex<Inner>,
    capacity: usize,
    /// The most bytes of objects the history keeps (approximately); the newest event stays
    /// whatever its size.
    max_bytes: AtomicUsize,
    latest: watch::Sender<u64>,
}

impl EventLog {
    /// An empty log that starts after `resource_version` and keeps at most `capacity` events.
    #[must_use]
    pub fn new(capacity: usize, resource_version: u64) -> Self {
        Self {
            inner: Mutex::new(Inner {
                events: VecDeque::new(),
                sizes: VecDeque::new(),
                bytes: 0,
                floor: resource_version,
            }),
            capacity: capacity.max(1),
            max_bytes: AtomicUsize::new(usize::MAX),
            latest: watch::Sender::new(resource_version),
        }
    }

    pub(super) fn append(&self, events: Vec<WatchEvent>) {
        let Some(last) = events.last().map(|e| e.resource_version) else {
            return;
        };
        {
            let mut inner = self
                .inner
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for e in events {
                let size = approx_bytes(&e);
                inner.bytes += size;
                inner.sizes.push_back(size);
                inner.events.push_back(Arc::new(e));
            }
            let max_bytes = self.max_bytes.load(Ordering::Relaxed);
            while inner.events.len() > self.capacity
                || (inner.bytes > max_bytes && inner.events.len() > 1)
            {
                if let Some(gone) = inner.events.pop_front() {
                    inner.floor = gone.resource_version;
                }
                let size = inner.sizes.pop_front().unwrap_or(0);
                inner.bytes = inner.bytes.saturating_sub(size);
            }
        }
        self.latest.send_replace(last);
    }

    /// Bounds the history to about `bytes` of objects (a watch resuming from before what is
    /// kept gets 410 Expired and lists again).
    pub fn set_byte_limit(&self, bytes: usize) {
        self.max_bytes.store(bytes, Ordering::Relaxed);
    }

    /// The approximate bytes of objects the history holds now.
    #[must_use]
    pub fn retained_bytes(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .bytes
    }

    /// Every event after `resource_version`, or [`Expired`] if some of them are gone.
    pub fn since(&self, resource_version: u64) -> Result<Vec<Arc<WatchEvent>>, Expired> {
        let inner = self
            .inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if resource_version < inner.floor {
            return Err(Expired {
                requested: resource_version,
                oldest: inner.floor,
            });
        }
        let start = inner
            .events
            .partition_point(|e| e.resource_version <= resource_version);
        Ok(inner.events.range(start..).cloned().collect())
    }

    /// A receiver that changes whenever a commit lands.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.latest.subscribe()
    }
}

/// About how many bytes an event keeps: its object's JSON (the previous version is the one
/// the event before it, or the read model, holds) plus the event itself.
fn approx_bytes(e: &WatchEvent) -> usize {
    e.object.len() + size_of::<WatchEvent>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use backflow_api::GroupResource;

    fn event(rv: u64, bytes: usize) -> WatchEvent {
        WatchEvent {
            resource_version: rv,
            event_type: EventType::Modified,
            key: ObjectKey::new(GroupResource::new("", "configmaps"), "default", "big"),
            object: StoredObject::new(&serde_json::json!({"data": {"k": "x".repeat(bytes)}})),
            previous: None,
        }
    }

    #[test]
    fn the_history_is_bounded_in_bytes_and_keeps_the_newest_event() {
        let log = EventLog::new(1_000, 0);
        log.set_byte_limit(1_000_000);
        for rv in 1..=10 {
            log.append(vec![event(rv, 300_000)]);
        }
        assert!(
            log.retained_bytes() <= 1_000_000,
            "{}",
            log.retained_bytes()
        );
        let kept = log.since(7).expect("the newest are kept");
        assert_eq!(kept.len(), 3);
        assert!(
            log.since(5).is_err(),
            "older ones expired: a watch lists again"
        );
        // One event larger than the bound is still kept: watches see every change.
        log.append(vec![event(11, 2_000_000)]);
        assert_eq!(log.since(10).expect("kept").len(), 1);
    }
}
