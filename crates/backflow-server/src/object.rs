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

/// Whether `a` and `b` are the same object but for the fields the server sets on every write
/// (`resourceVersion`, `managedFields`), compared in place.
#[must_use]
pub fn same_but_server_fields(a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let server = |k: &String| matches!(k.as_str(), "resourceVersion" | "managedFields");
    let meta_same = match (a.get("metadata"), b.get("metadata")) {
        (Some(Value::Object(ma)), Some(Value::Object(mb))) => {
            let (ka, kb) = (
                ma.iter().filter(|(k, _)| !server(k)),
                mb.iter().filter(|(k, _)| !server(k)),
            );
            ka.count() == kb.count()
                && ma
                    .iter()
                    .filter(|(k, _)| !server(k))
                    .all(|(k, v)| mb.get(k) == Some(v))
        }
        (ma, mb) => ma == mb,
    };
    meta_same
        && a.len() == b.len()
        && a.iter()
            .filter(|(k, _)| k.as_str() != "metadata")
            .all(|(k, v)| b.get(k) == Some(v))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_same_object_but_for_server_fields() {
        let a = json!({"metadata": {"name": "x", "resourceVersion": "1", "managedFields": [1]}, "data": {"k": "v"}});
        let b = json!({"metadata": {"name": "x", "resourceVersion": "2"}, "data": {"k": "v"}});
        assert!(same_but_server_fields(&a, &b));
        let c = json!({"metadata": {"name": "x", "labels": {"l": "1"}}, "data": {"k": "v"}});
        assert!(!same_but_server_fields(&b, &c), "a label more");
        let d = json!({"metadata": {"name": "x"}, "data": {"k": "w"}});
        assert!(!same_but_server_fields(&b, &d), "a value changed");
        let e = json!({"metadata": {"name": "x"}, "data": {"k": "v"}, "extra": 1});
        assert!(!same_but_server_fields(&b, &e), "a field more");
        assert!(same_but_server_fields(&json!({}), &json!({})));
        assert!(!same_but_server_fields(&json!({}), &b));
    }
}
