//! The patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::managed_fields::merge_key;

/// A patch body with its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// Reads the patch type from a Content-Type header value.
    #[must_use]
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(Self::Merge),
            "application/json-patch+json" => Some(Self::Json),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// The 415 answer naming the accepted patch media types.
#[must_use]
pub fn unsupported(accepted_strategic: bool) -> ApiError {
    let mut types = vec![
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/apply-patch+yaml",
    ];
    if accepted_strategic {
        types.push("application/strategic-merge-patch+json");
    }
    ApiError::UnsupportedMediaType(format!(
        "the body of the request was in an unknown format - accepted media types include: {}",
        types.join(", ")
    ))
}

/// RFC 7386: objects merge recursively, `null` deletes, everything else replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// RFC 6902 operations applied in order; any failing operation fails the whole patch.
pub fn json_patch(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    let ops: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| ApiError::BadRequest(format!("invalid JSON patch: {e}")))?;
    json_patch::patch(target, &ops).map_err(|e| ApiError::Invalid {
        group: String::new(),
        kind: String::new(),
        name: String::new(),
        causes: vec![crate::error::Cause {
            reason: "FieldValueInvalid",
            field: String::new(),
            message: e.to_string(),
        }],
    })
}

/// Strategic merge patch as kubectl sends it for built-in kinds.
///
/// Maps merge as in RFC 7386; lists with a merge key merge item by item (with `$patch: delete`
/// entries); `metadata.finalizers` merges as a set; other lists replace. Directives
/// `$patch`, `$retainKeys`, `$setElementOrder/…` and `$deleteFromPrimitiveList/…` are honoured.
pub fn strategic(target: &mut Value, patch: &Value) -> Result<(), ApiError> {
    strategic_at(target, patch, "")
}

// Long on purpose: the strategic-merge directives (`$patch`, `$retainKeys`,
// `$setElementOrder`, `$deleteFromPrimitiveList`) act on one map in a fixed order, kept visible
// in one function.
fn strategic_at(target: &mut Value, patch: &Value, field: &str) -> Result<(), ApiError> {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return Ok(());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("replace") => {
            let mut replaced = p.clone();
            replaced.remove("$patch");
            *target = Value::Object(replaced);
            return Ok(());
        }
        Some("delete") => {
            *target = Value::Null;
            return Ok(());
        }
        Some(other) if other != "merge" => {
            return Err(ApiError::BadRequest(format!(
                "unknown patch directive $patch: {other} in {field}"
            )));
        }
        _ => {}
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(t) = target else {
        return Ok(());
    };
    if let Some(retain) = p.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = retain.iter().filter_map(Value::as_str).collect();
        t.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, v) in p {
        if k.starts_with("$setElementOrder/") || k == "$retainKeys" || k == "$patch" {
            continue;
        }
        if let Some(list) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Some(gone)) = (t.get_mut(list), v.as_array()) {
                items.retain(|i| !gone.contains(i));
            }
            continue;
        }
        if v.is_null() {
            t.remove(k);
            continue;
        }
        let existing = t.entry(k.clone()).or_insert(Value::Null);
        match v {
            Value::Array(items) if k == "finalizers" && field == "metadata" => {
                let mut merged: Vec<Value> = existing.as_array().cloned().unwrap_or_default();
                for i in items {
                    if !merged.contains(i) {
                        merged.push(i.clone());
                    }
                }
                *existing = Value::Array(merged);
            }
            Value::Array(items) => match merge_key(k) {
                Some(key) if items.iter().all(Value::is_object) => {
                    let mut merged: Vec<Value> = existing.as_array().cloned().unwrap_or_default();
                    for item in items {
                        let id = item.get(key);
                        let directive = item.get("$patch").and_then(Value::as_str);
                        let pos = merged.iter().position(|m| id.is_some() && m.get(key) == id);
                        match (directive, pos) {
                            (Some("delete"), Some(i)) => {
                                merged.remove(i);
                            }
                            (Some("delete"), None) => {}
                            (_, Some(i)) => strategic_at(&mut merged[i], item, k)?,
                            (_, None) => {
                                let mut fresh = Value::Null;
                                strategic_at(&mut fresh, item, k)?;
                                merged.push(fresh);
                            }
                        }
                    }
                    if let Some(order) = p
                        .get(&format!("$setElementOrder/{k}"))
                        .and_then(Value::as_array)
                    {
                        let rank = |m: &Value| {
                            order
                                .iter()
                                .position(|o| o.get(key) == m.get(key))
                                .unwrap_or(usize::MAX)
                        };
                        merged.sort_by_key(rank);
                    }
                    *existing = Value::Array(merged);
                }
                _ => *existing = Value::Array(strip_directives(items)),
            },
            Value::Object(_) => {
                strategic_at(existing, v, k)?;
                if existing.is_null() {
                    t.remove(k);
                }
            }
            other => *existing = other.clone(),
        }
    }
    Ok(())
}

fn strip_directives(items: &[Value]) -> Vec<Value> {
    items
        .iter()
        .map(|i| match i {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(k, _)| !k.starts_with('$'))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            other => other.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_deletes_with_null() {
        let mut t = json!({"data": {"a": "1", "b": "2"}});
        merge(&mut t, &json!({"data": {"b": null, "c": "3"}}));
        assert_eq!(t, json!({"data": {"a": "1", "c": "3"}}));
    }

    #[test]
    fn strategic_merges_containers_by_name() {
        let mut t = json!({"spec": {"template": {"spec": {"containers": [
            {"name": "nginx", "image": "nginx:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "side", "image": "busybox"}]}}}});
        let p = json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "nginx"}],
            "containers": [
                {"$setElementOrder/env": [{"name": "B"}], "env": [{"name": "B", "value": "2"}, {"$patch": "delete", "name": "A"}],
                 "image": "nginx:1.27", "name": "nginx"},
                {"$patch": "delete", "name": "side"}]}}}});
        strategic(&mut t, &p).expect("patch applies");
        assert_eq!(
            t,
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "nginx", "image": "nginx:1.27", "env": [{"name": "B", "value": "2"}]}]}}}})
        );
    }

    #[test]
    fn strategic_retain_keys_and_primitive_list() {
        let mut t = json!({"metadata": {"finalizers": ["a.example.com/x", "b.example.com/y"]},
            "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let p = json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example.com/x"]},
            "spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": null, "type": "Recreate"}}});
        strategic(&mut t, &p).expect("patch applies");
        assert_eq!(
            t,
            json!({"metadata": {"finalizers": ["b.example.com/y"]}, "spec": {"strategy": {"type": "Recreate"}}})
        );
    }
}
