//! Who made a write: the contract between the API server (which authenticates the request) and
//! the mirror (which attributes the commit holding the write to that user).
//!
//! Kubernetes objects do not record who changed them, so the embedded server keeps the user of
//! each recent write beside the store, keyed by the object and the resourceVersion the write
//! gave it. It records the user before the write's watch event is sent, so the mirror finds the
//! user when the event reaches it. The record lives in memory, bounded: a write the mirror reads
//! after a restart (or after [`WriteAuthors::CAPACITY`] later writes) has no known user and is
//! attributed from its managedFields instead.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::ObjectKey;

/// The users of the most recent writes of an API server.
#[derive(Debug, Default)]
pub struct WriteAuthors {
    inner: Mutex<Recent>,
}

#[derive(Debug, Default)]
struct Recent {
    users: HashMap<Written, Arc<str>>,
    order: VecDeque<Written>,
}

/// One write: the object and the resourceVersion it gave it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Written {
    key: ObjectKey,
    resource_version: u64,
}

impl WriteAuthors {
    /// How many writes are remembered; older ones are forgotten first.
    pub const CAPACITY: usize = 65_536;

    /// Records that `user` made the write that gave `key` the resourceVersion
    /// `resource_version`.
    pub fn record(&self, key: ObjectKey, resource_version: u64, user: Arc<str>) {
        let written = Written {
            key,
            resource_version,
        };
        let mut recent = self.lock();
        if recent.users.insert(written.clone(), user).is_none() {
            recent.order.push_back(written);
        }
        while recent.order.len() > Self::CAPACITY {
            if let Some(old) = recent.order.pop_front() {
                recent.users.remove(&old);
            }
        }
    }

    /// The user who made the write that gave `key` the resourceVersion `resource_version`, if
    /// it is still remembered and was made by an authenticated user.
    #[must_use]
    pub fn user_of(&self, key: &ObjectKey, resource_version: u64) -> Option<Arc<str>> {
        let written = Written {
            key: key.clone(),
            resource_version,
        };
        self.lock().users.get(&written).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Recent> {
        // A panic while holding the lock leaves a map that is still consistent enough to read.
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

    #[test]
    fn a_write_is_found_by_object_and_version_and_the_oldest_are_forgotten_first() {
        let authors = WriteAuthors::default();
        authors.record(key("a"), 7, "alice".into());
        assert_eq!(authors.user_of(&key("a"), 7).as_deref(), Some("alice"));
        assert_eq!(authors.user_of(&key("a"), 8), None);
        assert_eq!(authors.user_of(&key("b"), 7), None);
        for rv in 0..WriteAuthors::CAPACITY as u64 {
            authors.record(key("b"), rv, "bob".into());
        }
        assert_eq!(authors.user_of(&key("a"), 7), None, "forgotten");
        assert_eq!(authors.user_of(&key("b"), 0).as_deref(), Some("bob"));
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
