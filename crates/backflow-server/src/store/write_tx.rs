//! One group commit's view of the store, as the write operations inside it see it.

use std::collections::BTreeMap;
use std::sync::Arc;

use backflow_api::{GroupResource, ObjectKey};
use serde_json::{Value, json};

use super::event_log::{EventType, WatchEvent};
use super::{State, StoredObject};
use crate::error::ApiResult;

type Overlay = BTreeMap<ObjectKey, Option<StoredObject>>;

/// Who made a change (the authenticated user, the field manager), by the resourceVersion it
/// took.
pub(super) struct Authored {
    pub(super) resource_version: u64,
    pub(super) user: Option<Arc<str>>,
    pub(super) manager: Option<Arc<str>>,
}

/// What a batch leaves behind: the changes, their watch events, and who made them.
pub(super) struct BatchParts {
    pub(super) changes: Overlay,
    pub(super) events: Vec<WatchEvent>,
    pub(super) authored: Vec<Authored>,
}

/// The state as the current write sees it: committed objects, then earlier writes of the same
/// batch, then its own changes. Every change takes the next resourceVersion.
pub struct WriteTx<'a> {
    committed: &'a State,
    batch: Overlay,
    batch_events: Vec<WatchEvent>,
    op: Overlay,
    op_events: Vec<WatchEvent>,
    batch_authored: Vec<Authored>,
    op_authored: Vec<Authored>,
    user: Option<Arc<str>>,
    manager: Option<Arc<str>>,
    next_rv: u64,
}

impl<'a> WriteTx<'a> {
    pub(super) fn new(committed: &'a State) -> Self {
        Self {
            committed,
            batch: Overlay::new(),
            batch_events: Vec::new(),
            op: Overlay::new(),
            op_events: Vec::new(),
            batch_authored: Vec::new(),
            op_authored: Vec::new(),
            user: None,
            manager: None,
            next_rv: committed.resource_version,
        }
    }

    pub(super) fn run_op<T>(
        &mut self,
        op: impl FnOnce(&mut WriteTx<'_>) -> ApiResult<T>,
    ) -> ApiResult<T> {
        let rv_before = self.next_rv;
        let result = op(self);
        let op = std::mem::take(&mut self.op);
        let events = std::mem::take(&mut self.op_events);
        let authored = std::mem::take(&mut self.op_authored);
        self.user = None;
        self.manager = None;
        if result.is_ok() {
            self.batch.extend(op);
            self.batch_events.extend(events);
            self.batch_authored.extend(authored);
        } else {
            self.next_rv = rv_before;
        }
        result
    }

    pub(super) fn into_parts(self) -> BatchParts {
        BatchParts {
            changes: self.batch,
            events: self.batch_events,
            authored: self.batch_authored,
        }
    }

    /// Attributes this write's changes to `user` (the request's authenticated user), so the
    /// commit that mirrors them names the user as its author.
    pub fn act_as(&mut self, user: Option<Arc<str>>) {
        self.user = user;
    }

    /// Names the field manager of this write's changes, for the record of writes.
    pub fn managed_by(&mut self, manager: &str) {
        self.manager = (!manager.is_empty()).then(|| manager.into());
    }

    /// The resourceVersion of the latest change seen so far (committed or in this batch).
    #[must_use]
    pub fn resource_version(&self) -> u64 {
        self.next_rv
    }

    /// One object as this write sees it.
    #[must_use]
    pub fn get(&self, key: &ObjectKey) -> Option<StoredObject> {
        if let Some(v) = self.op.get(key) {
            return v.clone();
        }
        if let Some(v) = self.batch.get(key) {
            return v.clone();
        }
        self.committed.get(key).cloned()
    }

    /// The objects of one type (in one namespace, or all), as this write sees them.
    #[must_use]
    pub fn list(
        &self,
        resource: &GroupResource,
        namespace: Option<&str>,
    ) -> Vec<(ObjectKey, StoredObject)> {
        let mut merged: BTreeMap<ObjectKey, Option<StoredObject>> = self
            .committed
            .list(resource, namespace)
            .map(|(k, v)| (k.to_key(), Some(v.clone())))
            .collect();
        let in_scope =
            |k: &ObjectKey| &k.resource == resource && namespace.is_none_or(|ns| k.namespace == ns);
        for overlay in [&self.batch, &self.op] {
            for (k, v) in overlay.iter().filter(|(k, _)| in_scope(k)) {
                merged.insert(k.clone(), v.clone());
            }
        }
        merged
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    }

    fn bump(&mut self) -> u64 {
        self.next_rv += 1;
        if self.user.is_some() || self.manager.is_some() {
            self.op_authored.push(Authored {
                resource_version: self.next_rv,
                user: self.user.clone(),
                manager: self.manager.clone(),
            });
        }
        self.next_rv
    }

    /// Stores `object` under `key` with the next resourceVersion, and returns it as stored.
    pub fn put(&mut self, key: ObjectKey, mut object: Value) -> Value {
        let rv = self.bump();
        object["metadata"]["resourceVersion"] = json!(rv.to_string());
        let previous = self.get(&key);
        let stored = StoredObject::new(&object);
        let event_type = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.op_events.push(WatchEvent {
            resource_version: rv,
            event_type,
            key: key.clone(),
            object: stored.clone(),
            previous,
        });
        self.op.insert(key, Some(stored));
        object
    }

    /// Removes the object under `key`; the DELETED event carries its last state at a new
    /// resourceVersion, which is returned.
    pub fn delete(&mut self, key: &ObjectKey) -> Option<Value> {
        let previous = self.get(key)?;
        let last = previous.value();
        Some(self.remove(key, previous, last))
    }

    /// Removes the object under `key` as the write that produced `last` leaves it (an update that
    /// empties the finalizers of an object being deleted): one DELETED event carrying `last` at a
    /// new resourceVersion, which is returned, and no intermediate MODIFIED.
    pub fn delete_as(&mut self, key: &ObjectKey, last: Value) -> Option<Value> {
        let previous = self.get(key)?;
        Some(self.remove(key, previous, last))
    }

    fn remove(&mut self, key: &ObjectKey, previous: StoredObject, mut last: Value) -> Value {
        let rv = self.bump();
        last["metadata"]["resourceVersion"] = json!(rv.to_string());
        self.op_events.push(WatchEvent {
            resource_version: rv,
            event_type: EventType::Deleted,
            key: key.clone(),
            object: StoredObject::new(&last),
            previous: Some(previous),
        });
        self.op.insert(key.clone(), None);
        last
    }
}
