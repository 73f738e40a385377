//! Object identity: what names one object on the live side, independent of version.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A resource type without its version: `deployments.apps`, `configmaps` (core group is empty).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GroupResource {
    /// API group; empty for the core group.
    pub group: String,
    /// Plural resource name, e.g. `configmaps`.
    pub resource: String,
}

impl GroupResource {
    /// Builds a group-resource pair.
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupResource {
    /// Formats as Kubernetes does in messages: `configmaps`, `deployments.apps`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// One object's identity: its type, namespace (empty when cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectKey {
    /// The object's type.
    pub resource: GroupResource,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

impl ObjectKey {
    /// Builds a key.
    pub fn new(
        resource: GroupResource,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            resource,
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}/{}", self.resource, self.name)
        } else {
            write!(f, "{}/{}/{}", self.resource, self.namespace, self.name)
        }
    }
}
