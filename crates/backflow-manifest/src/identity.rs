//! The identity of a manifest: which object a document describes.

use std::fmt;

use serde_json::Value;

/// Which object a document describes: API group (from `apiVersion`, empty for core), kind,
/// namespace (empty when absent) and name. The version is not part of it, so a file written at
/// `v1beta1` is still found for the same object served at `v1`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Identity {
    /// API group; empty for the core group.
    pub group: String,
    /// Kind, e.g. `Deployment`.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects (or a document that omits it).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl Identity {
    /// The identity of an object value, or why it has none.
    pub fn of(value: &Value) -> Result<Self, String> {
        let map = value.as_object().ok_or("it is not a mapping")?;
        let api_version = map
            .get("apiVersion")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or("it has no apiVersion")?;
        let kind = map
            .get("kind")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or("it has no kind")?;
        let meta = map
            .get("metadata")
            .and_then(Value::as_object)
            .ok_or("it has no metadata")?;
        let name = meta
            .get("name")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or("it has no metadata.name")?;
        let namespace = match meta.get("namespace") {
            None | Some(Value::Null) => "",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err("its metadata.namespace is not a string".into()),
        };
        Ok(Self {
            group: group_of(api_version).to_string(),
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }
}

/// The group part of an `apiVersion` (`apps/v1` → `apps`, `v1` → the empty string).
#[must_use]
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        };
        if self.namespace.is_empty() {
            write!(f, "{kind} {}", self.name)
        } else {
            write!(f, "{kind} {}/{}", self.namespace, self.name)
        }
    }
}
