//! The `default`s of a custom resource's structural schema, walked as kube-apiserver applies
//! them: top down, an absent property (or a null one that is not `nullable`) takes its default,
//! then every property, list item and `additionalProperties` value is defaulted in turn —
//! including inside a default just set. `metadata` is the API server's, never defaulted here.

use serde_json::{Map, Value};

use super::Walk;

/// The defaults of a whole object under its version's `openAPIV3Schema`.
pub(super) fn root(w: &mut Walk, schema: &Value, object: &mut Value) {
    if let Value::Object(map) = object {
        properties(w, schema, map, true);
    }
}

fn properties(w: &mut Walk, schema: &Value, map: &mut Map<String, Value>, at_root: bool) {
    let props = schema.get("properties").and_then(Value::as_object);
    for (key, prop) in props.into_iter().flatten() {
        if at_root && key == "metadata" {
            continue;
        }
        let Some(default) = prop.get("default") else {
            continue;
        };
        let nullable = prop.get("nullable").and_then(Value::as_bool) == Some(true);
        if map.get(key).is_some_and(Value::is_null) && !nullable {
            w.clear(map, key);
        }
        w.field(map, key, || default.clone());
    }
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if at_root && matches!(key.as_str(), "metadata" | "apiVersion" | "kind") {
            continue;
        }
        if let Some(prop) = props.and_then(|p| p.get(&key)).or(additional) {
            value(w, prop, map, &key);
        }
    }
}

/// Defaults inside the value under `key`, whose schema is `schema`.
fn value(w: &mut Walk, schema: &Value, map: &mut Map<String, Value>, key: &str) {
    match map.get(key) {
        Some(Value::Object(_)) => {
            w.object(map, key, |w, child| properties(w, schema, child, false));
        }
        Some(Value::Array(_)) => {
            if let Some(items) = schema.get("items") {
                w.objects(map, key, |w, item| properties(w, items, item, false));
            }
        }
        _ => {}
    }
}
