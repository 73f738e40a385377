//! The bounded history of changes that watches read from, like etcd's revision window.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use backflow_api::ObjectKey;
use serde_json::Value;
use tokio::sync::watch;

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
    pub object: Arc<Value>,
    /// The object before the change, so a filtered watch can tell "left the selection".
    pub previous: Option<Arc<Value>>,
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
    /// Every change after this resourceVersion is in `events`.
    floor: u64,
}

/// The event history plus a signal that moves with every commit.
#[derive(Debug)]
pub struct EventLog {
    inner: Mutex<Inner>,
    capacity: usize,
    latest: watch::Sender<u64>,
}

impl EventLog {
    /// An empty log that starts after `resource_version` and keeps at most `capacity` events.
    #[must_use]
    pub fn new(capacity: usize, resource_version: u64) -> Self {
        Self {
            inner: Mutex::new(Inner {
                events: VecDeque::new(),
                floor: resource_version,
            }),
            capacity: capacity.max(1),
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
                inner.events.push_back(Arc::new(e));
            }
            while inner.events.len() > self.capacity {
                if let Some(gone) = inner.events.pop_front() {
                    inner.floor = gone.resource_version;
                }
            }
        }
        self.latest.send_replace(last);
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
