//! What the planner knows of each type, filled by the mirror: the kind of each resource type
//! (from discovery) and the structural schema of each custom kind (from its CRD).
//!
//! Deletes and sweeps name a resource type (`deployments.apps`), while documents name a kind
//! (`Deployment`); this map joins the two. A custom kind's schema says which fields the API
//! server defaults, so Git gets them only where a person wrote them.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use backflow_api::GroupResource;
use serde_json::Value;

/// Resource type → kind, and custom kinds' schemas, shared between whoever learns them (the
/// mirror) and the planner. Cloning shares the maps.
#[derive(Debug, Clone, Default)]
pub struct KindMap {
    inner: Arc<RwLock<BTreeMap<GroupResource, String>>>,
    schemas: Arc<RwLock<SchemasByType>>,
}

/// (`apiVersion`, kind) → that version's `openAPIV3Schema`.
type SchemasByType = BTreeMap<(String, String), Arc<Value>>;

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

    /// Replaces the custom kinds' schemas with those the CRDs `crds` (as JSON) declare, one per
    /// served version that has one.
    pub fn set_schemas_from_crds<'a>(&self, crds: impl IntoIterator<Item = &'a Value>) {
        let mut schemas = BTreeMap::new();
        for crd in crds {
            let spec = &crd["spec"];
            let (Some(group), Some(kind)) = (
                spec["group"].as_str(),
                spec.pointer("/names/kind").and_then(Value::as_str),
            ) else {
                continue;
            };
            for version in spec["versions"].as_array().into_iter().flatten() {
                let (Some(name), Some(schema)) = (
                    version["name"].as_str(),
                    version.pointer("/schema/openAPIV3Schema"),
                ) else {
                    continue;
                };
                let key = (format!("{group}/{name}"), kind.to_string());
                schemas.insert(key, Arc::new(schema.clone()));
            }
        }
        *self
            .schemas
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = schemas;
    }

    /// The schema of a custom kind at `api_version`, if its CRD was read.
    #[must_use]
    pub fn schema_of(&self, api_version: &str, kind: &str) -> Option<Arc<Value>> {
        self.schemas
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(api_version.to_string(), kind.to_string()))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_served_version_of_a_crd_has_its_own_schema_and_a_new_read_replaces_them() {
        let kinds = KindMap::new();
        let crd = json!({"spec": {"group": "example.com", "names": {"kind": "Gadget"}, "versions": [
            {"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "x": 1}}},
            {"name": "v2", "schema": {"openAPIV3Schema": {"type": "object", "x": 2}}},
            {"name": "v3"},
        ]}});
        kinds.set_schemas_from_crds([&crd]);
        assert_eq!(
            kinds
                .schema_of("example.com/v2", "Gadget")
                .map(|s| s["x"].clone()),
            Some(json!(2))
        );
        assert!(
            kinds.schema_of("example.com/v3", "Gadget").is_none(),
            "no schema"
        );
        assert!(kinds.schema_of("example.com/v1", "Widget").is_none());
        kinds.set_schemas_from_crds([]);
        assert!(
            kinds.schema_of("example.com/v1", "Gadget").is_none(),
            "the CRD is gone"
        );
    }
}
