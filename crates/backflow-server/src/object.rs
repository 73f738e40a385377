//! Small accessors on schemaless objects (`serde_json::Value`).

use serde_json::{Map, Value};

/// `metadata.name`, or "".
pub fn name(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.namespace`, or "".
pub fn namespace(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.resourceVersion`, or "".
pub fn resource_version(obj: &Value) -> &str {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.uid`, or "".
pub fn uid(obj: &Value) -> &str {
    obj.pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether a delete has been requested (`metadata.deletionTimestamp` is set).
#[must_use]
pub fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

/// The `metadata` map, created if missing or not a map.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = Value::Object(Map::new());
    }
    match obj.get_mut("metadata") {
        Some(Value::Object(m)) => m,
        // Unreachable: set to a map just above.
        _ => unreachable!("metadata was just set to a map"),
    }
}

/// Drops empty maps and nulls that clients send for "unset" metadata (`labels: {}`, `finalizers: null`).
pub fn tidy_metadata(obj: &mut Value) {
    let meta = metadata_mut(obj);
    meta.retain(|k, v| {
        !(v.is_null()
            || (matches!(k.as_str(), "labels" | "annotations")
                && v.as_object().is_some_and(Map::is_empty))
            || (matches!(
                k.as_str(),
                "finalizers" | "ownerReferences" | "managedFields"
            ) && v.as_array().is_some_and(Vec::is_empty)))
    });
}

/// The object without the fields the server stamps, for "did anything change?" checks.
pub fn without_server_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("managedFields");
    }
    o
}

/// The object without `metadata` and `status`: what `generation` tracks.
#[must_use]
pub fn spec_part(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
        m.remove("apiVersion");
        m.remove("kind");
    }
    o
}
