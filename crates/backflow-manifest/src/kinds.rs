//! The kind of each resource type, filled from discovery.
//!
//! Deletes and sweeps name a resource type (`deployments.apps`), while documents name a kind
//! (`Deployment`); this map joins the two.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use backflow_api::GroupResource;

/// Resource type → kind, shared between whoever learns it (the mirror, from discovery) and the
/// planner. Cloning shares the map.
#[derive(Debug, Clone, Default)]
pub struct KindMap {
    inner: Arc<RwLock<BTreeMap<GroupResource, String>>>,
}

impl KindMap {
    /// An empty map.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `resource` objects are of `kind`.
    pub fn insert(&self, resource: GroupResource, kind: impl Into<String>) {
        // A poisoned lock only means a writer panicked mid-insert of a plain map entry; the
        // map itself is still consistent.
        let mut map = self
            .inner
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(resource, kind.into());
    }

    /// The kind of `resource` objects, if known.
    #[must_use]
    pub fn kind_of(&self, resource: &GroupResource) -> Option<String> {
        let map = self
            .inner
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(resource).cloned()
    }
}
