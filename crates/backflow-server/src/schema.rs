//! Kinds with a structural schema (CRD `openAPIV3Schema`): unknown fields, and values the schema
//! does not allow.
//!
//! Like the API server, fields the schema does not know are pruned; `fieldValidation` decides
//! whether that is silent (`Ignore`), reported as a warning (`Warn`, the default) or refused
//! (`Strict`). Values are then validated against the schema (`type`, `nullable`, `enum`,
//! `required`, `minimum`/`maximum` and their exclusive forms, `minLength`/`maxLength`, `pattern`,
//! `minItems`/`maxItems`, `minProperties`/`maxProperties`), each failure a cause of a 422 worded as
//! kube-apiserver words it. `x-kubernetes-validations` (CEL rules) are evaluated in `cel_rules.rs`.

use serde_json::Value;

use crate::error::{ApiError, Cause};

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

/// What `schema` does not allow in `obj` (whose `apiVersion`, `kind` and `metadata` are checked
/// elsewhere).
#[must_use]
pub fn validate(schema: &Value, obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(map) = obj.as_object() else {
        return causes;
    };
    let props = schema.get("properties").and_then(Value::as_object);
    for (k, v) in map {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(s) = props.and_then(|p| p.get(k)) {
            validate_at(s, v, k, &mut causes);
        }
    }
    required(schema, map, "", &mut causes);
    causes
}

fn validate_at(schema: &Value, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    if v.is_null() && schema.get("nullable").and_then(Value::as_bool) == Some(true) {
        return;
    }
    if !type_fits(schema, v) {
        let int_or_string = schema
            .get("x-kubernetes-int-or-string")
            .and_then(Value::as_bool)
            == Some(true);
        let want = if int_or_string {
            "integer,string"
        } else {
            schema.get("type").and_then(Value::as_str).unwrap_or("")
        };
        let got = json_type(v);
        causes.push(Cause {
            reason: "FieldValueTypeInvalid",
            field: path.to_string(),
            message: format!(
                "Invalid value: \"{got}\": {path} in body must be of type {want}: \"{got}\""
            ),
        });
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        let list: Vec<String> = allowed.iter().map(Value::to_string).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: path.to_string(),
            message: format!(
                "Unsupported value: {v}: supported values: {}",
                list.join(", ")
            ),
        });
    }
    match v {
        Value::Number(n) => bounds(schema, n.as_f64().unwrap_or(0.0), v, path, causes),
        Value::String(text) => strings(schema, text, path, causes),
        Value::Array(items) => {
            counts(
                schema,
                items.len(),
                ("minItems", "maxItems", "items"),
                path,
                causes,
            );
            if let Some(item) = schema.get("items") {
                for (i, x) in items.iter().enumerate() {
                    validate_at(item, x, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Object(map) => {
            counts(
                schema,
                map.len(),
                ("minProperties", "maxProperties", "properties"),
                path,
                causes,
            );
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (k, x) in map {
                if let Some(s) = props.and_then(|p| p.get(k)).or(additional) {
                    validate_at(s, x, &format!("{path}.{k}"), causes);
                }
            }
            required(schema, map, path, causes);
        }
        _ => {}
    }
}

/// Whether `v` is of the schema's `type` (an int-or-string takes either; no type takes all).
fn type_fits(schema: &Value, v: &Value) -> bool {
    if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return v.is_string() || v.is_i64() || v.is_u64();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("boolean") => v.is_boolean(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        _ => true,
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn required(
    schema: &Value,
    map: &serde_json::Map<String, Value>,
    path: &str,
    causes: &mut Vec<Cause>,
) {
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !map.contains_key(r) {
            let field = if path.is_empty() {
                r.to_string()
            } else {
                format!("{path}.{r}")
            };
            causes.push(Cause::required(field));
        }
    }
}

fn bounds(schema: &Value, n: f64, v: &Value, path: &str, causes: &mut Vec<Cause>) {
    let limit = |key: &str| schema.get(key).and_then(Value::as_f64);
    let exclusive = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    if let Some(min) = limit("minimum") {
        let (broken, words) = if exclusive("exclusiveMinimum") {
            (n <= min, "greater than")
        } else {
            (n < min, "greater than or equal to")
        };
        if broken {
            causes.push(Cause::invalid_value(
                path,
                v,
                format!("{path} in body should be {words} {}", schema["minimum"]),
            ));
        }
    }
    if let Some(max) = limit("maximum") {
        let (broken, words) = if exclusive("exclusiveMaximum") {
            (n >= max, "less than")
        } else {
            (n > max, "less than or equal to")
        };
        if broken {
            causes.push(Cause::invalid_value(
                path,
                v,
                format!("{path} in body should be {words} {}", schema["maximum"]),
            ));
        }
    }
}

fn strings(schema: &Value, text: &str, path: &str, causes: &mut Vec<Cause>) {
    let chars = text.chars().count();
    let v = Value::String(text.to_string());
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && (chars as u64) < min
    {
        causes.push(Cause::invalid_value(
            path,
            &v,
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && (chars as u64) > max
    {
        causes.push(Cause {
            reason: "FieldValueTooLong",
            field: path.to_string(),
            message: format!("Too long: may not be more than {max} bytes"),
        });
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(pattern) {
            Ok(re) if !re.is_match(text) => causes.push(Cause::invalid_value(
                path,
                &v,
                format!("{path} in body should match '{pattern}'"),
            )),
            // A pattern the CRD's own validation let through but this engine cannot read is
            // not held against the object.
            _ => {}
        }
    }
}

/// `minItems`/`maxItems` (or properties): `keys` names the bounds and what is counted.
fn counts(schema: &Value, n: usize, keys: (&str, &str, &str), path: &str, causes: &mut Vec<Cause>) {
    let (min_key, max_key, what) = keys;
    let what = if what == "items" {
        "items"
    } else {
        "properties"
    };
    if let Some(min) = schema.get(min_key).and_then(Value::as_u64)
        && (n as u64) < min
    {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: path.to_string(),
            message: format!(
                "Invalid value: {n}: {path} in body should have at least {min} {what}"
            ),
        });
    }
    if let Some(max) = schema.get(max_key).and_then(Value::as_u64)
        && (n as u64) > max
    {
        causes.push(Cause {
            reason: "FieldValueTooMany",
            field: path.to_string(),
            message: format!("Too many: {n}: must have at most {max} {what}"),
        });
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

    #[test]
    fn values_the_schema_does_not_allow_are_named_as_kube_apiserver_names_them() {
        let schema = json!({"type": "object", "required": ["spec"], "properties": {
            "spec": {"type": "object", "required": ["size", "mode"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["fast", "safe"]},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "port": {"x-kubernetes-int-or-string": true},
                "note": {"type": "string", "nullable": true},
                "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}}}}}});
        let fine = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 3, "mode": "fast", "name": "abc", "port": "http", "note": null, "tags": ["a"]}});
        assert!(
            validate(&schema, &fine).is_empty(),
            "{:?}",
            validate(&schema, &fine)
        );
        let bad = json!({"spec": {"size": "3", "mode": "slow", "name": "ABCDEFG", "port": 1.5, "tags": ["a", 2]}});
        let got: Vec<(String, String)> = validate(&schema, &bad)
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect();
        let want = [
            (
                "spec.size",
                "Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
            ),
            (
                "spec.mode",
                "Unsupported value: \"slow\": supported values: \"fast\", \"safe\"",
            ),
            ("spec.name", "Too long: may not be more than 5 bytes"),
            (
                "spec.name",
                "Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'",
            ),
            (
                "spec.port",
                "Invalid value: \"number\": spec.port in body must be of type integer,string: \"number\"",
            ),
            ("spec.tags", "Too many: 2: must have at most 1 items"),
            (
                "spec.tags[1]",
                "Invalid value: \"integer\": spec.tags[1] in body must be of type string: \"integer\"",
            ),
        ];
        for (field, message) in want {
            assert!(
                got.iter().any(|(f, m)| f == field && m == message),
                "missing {field}: {message} in {got:#?}"
            );
        }
        let out_of_range = json!({"spec": {"size": 11, "mode": "safe"}});
        let causes = validate(&schema, &out_of_range);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(
            causes[0].message,
            "Invalid value: 11: spec.size in body should be less than or equal to 10"
        );
        let missing = validate(&schema, &json!({"spec": {}}));
        let fields: Vec<&str> = missing.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec.size", "spec.mode"]);
        assert_eq!(validate(&schema, &json!({}))[0].field, "spec");
    }
}
