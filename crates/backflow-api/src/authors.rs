//! Who made a write, and when: the contract between the API server (which authenticates the
//! request) and the mirror (which attributes the commit holding the write to that user), and
//! what `backflow history` reads of the live side.
//!
//! Kubernetes objects do not record who changed them, so the embedded server keeps a record of
//! each recent write beside the store: the object, the resourceVersion the write gave it, the
//! authenticated user (when there is one), the verb and the time. It records the write before
//! its watch event is sent, so the mirror finds the user when the event reaches it. The store
//! keeps the record durably in the same transaction as the write and loads it again on start,
//! so a write the mirror reads after a restart still names its user. It is bounded: the last
//! [`WriteRecord::CAPACITY`] writes, older ones forgotten first; a write no longer in it is
//! attributed from its managedFields instead.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::ObjectKey;

/// What a write did to its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteVerb {
    /// The object came to be.
    Create,
    /// The object changed.
    Update,
    /// The object went away.
    Delete,
}

/// One write as the record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordedWrite {
    /// The object written.
    pub key: ObjectKey,
    /// The resourceVersion the write gave it.
    pub resource_version: u64,
    /// The authenticated user, when the server authenticates requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<Arc<str>>,
    /// The field manager the request named (none for a delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<Arc<str>>,
    /// Create, update or delete.
    pub verb: WriteVerb,
    /// When the store committed it (RFC 3339).
    pub at: String,
}

/// The most recent writes of an API server, oldest first.
#[derive(Debug, Default)]
pub struct WriteRecord {
    inner: Mutex<VecDeque<RecordedWrite>>,
}

impl WriteRecord {
    /// How many writes are remembered; older ones are forgotten first.
    pub const CAPACITY: usize = 65_536;

    /// Records `write`. Writes come in resourceVersion order; one that does not is put in its
    /// place.
    pub fn record(&self, write: RecordedWrite) {
        let mut recent = self.lock();
        // Room is made before the write goes in: one over the capacity doubled the queue's
        // buffer, half of it never used (11 MB at the capacity).
        while recent.len() >= Self::CAPACITY {
            let oldest = recent.front().map_or(0, |w| w.resource_version);
            if write.resource_version < oldest {
                // Older than everything kept: it would be the first forgotten.
                return;
            }
            recent.pop_front();
        }
        let at = recent.partition_point(|w| w.resource_version <= write.resource_version);
        recent.insert(at, write);
    }

    /// The user who made the write that gave `key` the resourceVersion `resource_version`, if
    /// it is still remembered and was made by an authenticated user.
    #[must_use]
    pub fn user_of(&self, key: &ObjectKey, resource_version: u64) -> Option<Arc<str>> {
        let recent = self.lock();
        let from = recent.partition_point(|w| w.resource_version < resource_version);
        recent
            .range(from..)
            .take_while(|w| w.resource_version == resource_version)
            .find(|w| &w.key == key)
            .and_then(|w| w.user.clone())
    }

    /// The remembered writes of `key`, oldest first.
    #[must_use]
    pub fn writes_of(&self, key: &ObjectKey) -> Vec<RecordedWrite> {
        self.lock()
            .iter()
            .filter(|w| &w.key == key)
            .cloned()
            .collect()
    }

    /// The remembered writes after resourceVersion `after`, oldest first, at most `limit` of the
    /// newest.
    #[must_use]
    pub fn after(&self, after: u64, limit: usize) -> Vec<RecordedWrite> {
        let recent = self.lock();
        let from = recent.partition_point(|w| w.resource_version <= after);
        let from = from.max(recent.len().saturating_sub(limit));
        recent.range(from..).cloned().collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<RecordedWrite>> {
        // A panic while holding the lock leaves a queue that is still consistent enough to read.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GroupResource;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(GroupResource::new("", "configmaps"), "default", name)
    }

    fn write(name: &str, rv: u64, user: Option<&str>) -> RecordedWrite {
        RecordedWrite {
            key: key(name),
            resource_version: rv,
            user: user.map(Into::into),
            manager: None,
            verb: WriteVerb::Update,
            at: format!("t{rv}"),
        }
    }

    #[test]
    fn a_write_is_found_by_object_and_version_and_the_oldest_are_forgotten_first() {
        let record = WriteRecord::default();
        record.record(write("a", 7, Some("alice")));
        assert_eq!(record.user_of(&key("a"), 7).as_deref(), Some("alice"));
        assert_eq!(record.user_of(&key("a"), 8), None);
        assert_eq!(record.user_of(&key("b"), 7), None);
        for rv in 8..8 + WriteRecord::CAPACITY as u64 {
            record.record(write("b", rv, Some("bob")));
        }
        assert_eq!(record.user_of(&key("a"), 7), None, "forgotten");
        assert_eq!(record.user_of(&key("b"), 8).as_deref(), Some("bob"));
        assert!(record.writes_of(&key("a")).is_empty());
        assert_eq!(record.lock().len(), WriteRecord::CAPACITY);
        assert!(
            record.lock().capacity() <= WriteRecord::CAPACITY,
            "the buffer is never grown past the capacity"
        );
        record.record(write("c", 1, Some("carol")));
        assert_eq!(record.user_of(&key("c"), 1), None, "older than all kept");
        assert_eq!(record.user_of(&key("b"), 8).as_deref(), Some("bob"));
    }

    #[test]
    fn an_objects_writes_and_the_newest_writes_come_oldest_first() {
        let record = WriteRecord::default();
        record.record(write("a", 3, Some("alice")));
        record.record(write("b", 5, None));
        record.record(write("a", 4, None));
        let of_a: Vec<u64> = record
            .writes_of(&key("a"))
            .iter()
            .map(|w| w.resource_version)
            .collect();
        assert_eq!(of_a, [3, 4], "put in its place");
        let after: Vec<u64> = record
            .after(3, 10)
            .iter()
            .map(|w| w.resource_version)
            .collect();
        assert_eq!(after, [4, 5]);
        let newest: Vec<u64> = record
            .after(0, 1)
            .iter()
            .map(|w| w.resource_version)
            .collect();
        assert_eq!(newest, [5], "only the newest when limited");
        assert_eq!(record.user_of(&key("b"), 5), None, "no user known");
    }
}

/// How commits name the users who changed a folder's objects.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "kinds", derive(schemars::JsonSchema))]
pub enum CommitAuthors {
    /// Each user's changes in a commit window become a commit authored by them.
    #[default]
    PerAuthor,
    /// One commit per window, with a `Co-authored-by:` trailer for each user but its author.
    CoAuthored,
}

#[cfg(feature = "kinds")]
impl CommitAuthors {
    #[allow(
        clippy::trivially_copy_pass_by_ref,
        reason = "serde's skip_serializing_if hands a reference"
    )]
    pub(crate) fn is_per_author(&self) -> bool {
        *self == Self::PerAuthor
    }
}
