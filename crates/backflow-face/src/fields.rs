//! The fields people read an object by: every top-level field but the bookkeeping ones, with
//! `metadata`'s labels, annotations and finalizers each on their own.

use std::collections::BTreeMap;

use serde_json::Value;

/// Top-level keys that are not fields of their own: identity, what the server keeps, SOPS's
/// own block.
const NOT_FIELDS: &[&str] = &["apiVersion", "kind", "metadata", "status", "sops"];

/// The parts of `metadata` a person or a push changes.
const METADATA_FIELDS: &[&str] = &["labels", "annotations", "finalizers"];

/// The fields of `object` with their values.
#[must_use]
pub fn fields_of(object: &Value) -> BTreeMap<String, &Value> {
    let mut out = BTreeMap::new();
    let Some(map) = object.as_object() else {
        return out;
    };
    for (key, value) in map {
        if !NOT_FIELDS.contains(&key.as_str()) {
            out.insert(key.clone(), value);
        }
    }
    if let Some(meta) = map.get("metadata").and_then(Value::as_object) {
        for key in METADATA_FIELDS {
            if let Some(value) = meta.get(*key) {
                out.insert(format!("metadata.{key}"), value);
            }
        }
    }
    out
}

/// The fields whose values differ between `before` and `after` (an absent object has none).
#[must_use]
pub fn changed_fields(before: Option<&Value>, after: Option<&Value>) -> Vec<String> {
    let empty = Value::Null;
    let before = fields_of(before.unwrap_or(&empty));
    let after = fields_of(after.unwrap_or(&empty));
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| before.get(*name) != after.get(*name))
        .cloned()
        .collect()
}

/// Whether the managedFields entry's `fieldsV1` owns `field` (as [`fields_of`] names it) as
/// it reads now (`value`): of `metadata`'s maps, only keys that are still there count, so an
/// applier's stamp label is not ownership of the labels a person set.
#[must_use]
pub fn owns(fields_v1: &Value, field: &str, value: &Value) -> bool {
    match field.split_once('.') {
        Some((parent, child)) => {
            let Some(owned) = fields_v1
                .get(format!("f:{parent}"))
                .and_then(|p| p.get(format!("f:{child}")))
            else {
                return false;
            };
            match (owned.as_object(), value.as_object()) {
                (Some(keys), Some(present)) => keys.keys().any(|k| {
                    k.strip_prefix("f:")
                        .is_some_and(|name| present.contains_key(name))
                }),
                _ => true,
            }
        }
        None => fields_v1.get(format!("f:{field}")).is_some(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn labels_annotations_and_top_level_fields_are_fields_and_bookkeeping_is_not() {
        let object = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "labels": {"x": "1"}, "resourceVersion": "4"},
            "data": {"k": "v"}, "status": {}, "sops": {}
        });
        let names: Vec<String> = fields_of(&object).into_keys().collect();
        assert_eq!(names, ["data", "metadata.labels"]);
    }

    #[test]
    fn a_changed_added_or_removed_field_is_changed_and_an_equal_one_is_not() {
        let before = json!({"metadata": {"labels": {"x": "1"}}, "data": {"k": "v"}, "spec": 1});
        let after = json!({"metadata": {"labels": {"x": "2"}}, "data": {"k": "v"}, "extra": 2});
        assert_eq!(
            changed_fields(Some(&before), Some(&after)),
            ["extra", "metadata.labels", "spec"]
        );
        assert_eq!(
            changed_fields(None, Some(&after)).len(),
            3,
            "a new object's fields"
        );
    }

    #[test]
    fn ownership_is_read_from_fields_v1_one_level_down_for_metadata() {
        let fields = json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:x": {}}}});
        let labels = json!({"x": "1", "y": "2"});
        assert!(owns(&fields, "data", &json!({"k": "v"})));
        assert!(owns(&fields, "metadata.labels", &labels));
        assert!(
            !owns(&fields, "metadata.labels", &json!({"y": "2"})),
            "a label no longer there is not ownership"
        );
        assert!(!owns(&fields, "metadata.annotations", &labels));
        assert!(!owns(&fields, "spec", &Value::Null));
    }
}
