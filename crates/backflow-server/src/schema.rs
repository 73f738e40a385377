//! Unknown-field handling for kinds with a structural schema (CRD `openAPIV3Schema`).
//!
//! Like the API server, fields the schema does not know are pruned; `fieldValidation` decides
//! whether that is silent (`Ignore`), reported as a warning (`Warn`, the default) or refused
//! (`Strict`).

use serde_json::Value;

use crate::error::ApiError;

/// The `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and warn about each (the API server's default).
    #[default]
    Warn,
    /// Refuse the request if it has unknown fields.
    Strict,
}

impl FieldValidation {
    /// Parses the query parameter; an unknown value is a 400.
    pub fn parse(v: Option<&str>) -> Result<Self, ApiError> {
        match v {
            None | Some("" | "Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some("Strict") => Ok(Self::Strict),
            Some(other) => Err(ApiError::BadRequest(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, got {other:?}"
            ))),
        }
    }
}

fn preserves_unknown(schema: &Value) -> bool {
    schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
        || schema
            .get("x-kubernetes-embedded-resource")
            .and_then(Value::as_bool)
            == Some(true)
}

/// Removes the fields `schema` does not know from `obj`, returning their paths (`.spec.foo`).
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    prune_at(schema, obj, "", true, &mut unknown);
    unknown
}

fn prune_at(schema: &Value, obj: &mut Value, path: &str, root: bool, unknown: &mut Vec<String>) {
    if preserves_unknown(schema) {
        return;
    }
    match obj {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            if props.is_none() && additional.is_none() {
                return;
            }
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                if root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = format!("{path}.{k}");
                let sub = props.and_then(|p| p.get(&k)).or(match additional {
                    Some(Value::Bool(true)) => Some(&Value::Null),
                    Some(s @ Value::Object(_)) => Some(s),
                    _ => None,
                });
                if let Some(s) = sub {
                    if let Some(v) = map.get_mut(&k) {
                        prune_at(s, v, &child_path, false, unknown);
                    }
                } else {
                    map.remove(&k);
                    unknown.push(child_path);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_at(item_schema, item, &format!("{path}[{i}]"), false, unknown);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prunes_unknown_fields_at_every_level() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}});
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 1, "bogus": 2, "tags": [{"name": "t", "extra": 1}], "free": {"any": 1}, "labels": {"k": "v"}},
            "status": {"x": 1}});
        let unknown = prune(&schema, &mut obj);
        assert_eq!(
            unknown,
            vec![".spec.bogus", ".spec.tags[0].extra", ".status"]
        );
        assert_eq!(
            obj["spec"],
            json!({"size": 1, "tags": [{"name": "t"}], "free": {"any": 1}, "labels": {"k": "v"}})
        );
    }
}
