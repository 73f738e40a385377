//! An object as the store keeps it: serialized once, shared by the read model and the history.
//!
//! A parsed `serde_json::Value` of a 1 KiB `ConfigMap` takes about 4.5 KiB of heap (a map per
//! level, a `String` per key); its JSON takes about 1.3 KiB. The read model holds every object
//! and the watch history the recent versions, so they keep the JSON, and a reader parses the
//! objects it looks into. Lists and watches that serve an object as stored copy its bytes
//! without parsing it at all.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::Value;

/// One stored object as compact JSON. Always a JSON object: built from a `Value` here, or
/// checked when read back from disk ([`StoredObject::from_json`]). Cloning shares the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredObject {
    json: Bytes,
}

impl std::fmt::Debug for StoredObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredObject")
            .field("bytes", &self.json.len())
            .finish()
    }
}

/// The type fields of a stored object, borrowed from its JSON.
#[derive(Debug, Deserialize)]
struct TypeFields<'a> {
    #[serde(rename = "apiVersion", borrow, default)]
    api_version: Option<&'a str>,
    #[serde(borrow, default)]
    kind: Option<&'a str>,
}

impl StoredObject {
    /// Serializes `value` (the store's own objects, which are JSON objects).
    #[must_use]
    pub fn new(value: &Value) -> Self {
        // Exactly as long as the JSON, with no gap left behind it: the read model keeps it for
        // as long as the object lives.
        Self {
            json: Bytes::from(backflow_api::compact::json_exact(value).into_boxed_bytes()),
        }
    }

    /// Takes JSON read back from disk, after checking that it is a JSON object.
    pub fn from_json(json: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice::<serde::de::IgnoredAny>(json)?;
        if json.first() != Some(&b'{') {
            return Err(serde::de::Error::custom(
                "a stored object is not a JSON object",
            ));
        }
        Ok(Self {
            json: Bytes::copy_from_slice(json),
        })
    }

    /// The object, parsed.
    #[must_use]
    pub fn value(&self) -> Value {
        // Valid by construction (see the type); a failure would be a bug, answered with an
        // empty object rather than a panic in a reader.
        serde_json::from_slice(&self.json).unwrap_or_else(|e| {
            tracing::error!(error = %e, "a stored object does not parse");
            Value::Object(serde_json::Map::new())
        })
    }

    /// The object's JSON.
    #[must_use]
    pub fn json(&self) -> &Bytes {
        &self.json
    }

    /// The length of its JSON, what it costs the store beyond a fixed overhead.
    #[must_use]
    pub fn len(&self) -> usize {
        self.json.len()
    }

    /// Whether its JSON is empty (never, for a stored object).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.json.is_empty()
    }

    /// Whether its `apiVersion` and `kind` are these, read without building the object.
    #[must_use]
    pub fn is_typed(&self, api_version: &str, kind: &str) -> bool {
        serde_json::from_slice::<TypeFields<'_>>(&self.json)
            .is_ok_and(|t| t.api_version == Some(api_version) && t.kind == Some(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_object_reads_back_as_it_was_stored_in_key_order() {
        let v = json!({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "a"}, "data": {"z": "1", "a": "é\""}});
        let stored = StoredObject::new(&v);
        assert_eq!(stored.value(), v);
        assert_eq!(
            stored.json().as_ref(),
            serde_json::to_vec(&v).expect("json")
        );
        assert!(stored.is_typed("v1", "ConfigMap"));
        assert!(!stored.is_typed("v1", "Secret"));
        assert!(!StoredObject::new(&json!({"kind": "ConfigMap"})).is_typed("v1", "ConfigMap"));
    }

    #[test]
    fn json_from_disk_is_checked() {
        assert!(StoredObject::from_json(br#"{"a":1}"#).is_ok());
        assert!(StoredObject::from_json(br#"{"a":"#).is_err());
        assert!(StoredObject::from_json(b"[1]").is_err());
        assert!(StoredObject::from_json(b"  ").is_err());
    }
}
