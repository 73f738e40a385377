//! Which object a person asks about, as the CLI resolves it through discovery and the
//! endpoints take it.

use backflow_api::{GroupResource, ObjectKey};
use backflow_manifest::Identity;
use serde::{Deserialize, Serialize};

/// One object: its type as the API serves it, its namespace (empty when cluster-scoped) and
/// name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    /// API group (empty for core).
    #[serde(default)]
    pub group: String,
    /// Served version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Namespace; empty for a cluster-scoped object.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectRef {
    /// Its storage identity.
    #[must_use]
    pub fn key(&self) -> ObjectKey {
        ObjectKey::new(
            GroupResource::new(&self.group, &self.plural),
            &self.namespace,
            &self.name,
        )
    }

    /// `apps/v1`, `v1`.
    #[must_use]
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether a document of a folder declares this object.
    #[must_use]
    pub fn is(&self, identity: &Identity) -> bool {
        identity.group == self.group
            && identity.kind == self.kind
            && identity.namespace == self.namespace
            && identity.name == self.name
    }

    /// Whether it is a Secret (whose values are never shown).
    #[must_use]
    pub fn is_secret(&self) -> bool {
        self.group.is_empty() && self.kind == "Secret"
    }

    /// `ConfigMap default/demo`, `Namespace team-a`, for people.
    #[must_use]
    pub fn describe(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }

    /// Why the reference cannot name an object, if it cannot: every part but the group (and
    /// the namespace of a cluster-scoped object) must be there, and none may hold a `/`.
    pub fn check(&self) -> Result<(), String> {
        for (what, value) in [
            ("version", &self.version),
            ("kind", &self.kind),
            ("plural", &self.plural),
            ("name", &self.name),
        ] {
            if value.is_empty() {
                return Err(format!("the object's {what} is missing"));
            }
        }
        let parts = [
            &self.group,
            &self.version,
            &self.plural,
            &self.namespace,
            &self.name,
        ];
        if parts.iter().any(|p| p.contains('/')) {
            return Err("no part of an object reference may hold a '/'".into());
        }
        Ok(())
    }
}
