//! The field types kube-apiserver's decoder enforces before anything else looks at a body.
//!
//! kube-apiserver decodes every body into its Go type, so a field of the wrong JSON type is a 400
//! (`json: cannot unmarshal string into Go struct field ObjectMeta.metadata.ownerReferences of
//! type []v1.OwnerReference`) and never reaches storage. A server that stored it would hand every
//! client a typed decode error later: a watch of the type (the mirror's too) fails on that one
//! object, and `kubectl describe` cannot read it. `null` is accepted everywhere, as Go leaves the
//! field empty.

use serde_json::Value;

use crate::registry::ResourceType;

/// A field's Go type, as far as the decoder checks it.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// `string`.
    Str,
    /// `int64`.
    Int,
    /// `bool`.
    Bool,
    /// `map[string]string` (also `map[string][]byte`, whose values are base64 strings).
    StrMap(&'static str),
    /// `[]string`.
    StrList,
    /// A list of structs, each checked field by field.
    Structs(&'static str, &'static [Field]),
    /// Anything (`fieldsV1`).
    Any,
}

/// A struct field: its JSON name and shape.
type Field = (&'static str, Shape);

const OWNER_REFERENCE: &[Field] = &[
    ("apiVersion", Shape::Str),
    ("kind", Shape::Str),
    ("name", Shape::Str),
    ("uid", Shape::Str),
    ("controller", Shape::Bool),
    ("blockOwnerDeletion", Shape::Bool),
];

const MANAGED_FIELDS_ENTRY: &[Field] = &[
    ("manager", Shape::Str),
    ("operation", Shape::Str),
    ("apiVersion", Shape::Str),
    ("time", Shape::Str),
    ("fieldsType", Shape::Str),
    ("fieldsV1", Shape::Any),
    ("subresource", Shape::Str),
];

const OBJECT_META: &[Field] = &[
    ("name", Shape::Str),
    ("generateName", Shape::Str),
    ("namespace", Shape::Str),
    ("selfLink", Shape::Str),
    ("uid", Shape::Str),
    ("resourceVersion", Shape::Str),
    ("generation", Shape::Int),
    ("creationTimestamp", Shape::Str),
    ("deletionTimestamp", Shape::Str),
    ("deletionGracePeriodSeconds", Shape::Int),
    ("labels", Shape::StrMap("map[string]string")),
    ("annotations", Shape::StrMap("map[string]string")),
    (
        "ownerReferences",
        Shape::Structs("[]v1.OwnerReference", OWNER_REFERENCE),
    ),
    ("finalizers", Shape::StrList),
    (
        "managedFields",
        Shape::Structs("[]v1.ManagedFieldsEntry", MANAGED_FIELDS_ENTRY),
    ),
];

const CONFIG_MAP: &[Field] = &[
    ("data", Shape::StrMap("map[string]string")),
    ("binaryData", Shape::StrMap("map[string][]uint8")),
    ("immutable", Shape::Bool),
];

const SECRET: &[Field] = &[
    ("data", Shape::StrMap("map[string][]uint8")),
    ("stringData", Shape::StrMap("map[string]string")),
    ("type", Shape::Str),
    ("immutable", Shape::Bool),
];

/// Checks the JSON types of `body`'s metadata (every type) and of the top-level fields of the
/// built-in types whose values clients read typed (`ConfigMap`, `Secret`). The error is the
/// message kube-apiserver gives, for a 400.
pub fn check_types(t: &ResourceType, body: &Value) -> Result<(), String> {
    let cannot = |detail: String| {
        format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: json: {detail}",
            kind = t.kind,
            version = t.version
        )
    };
    if let Some(meta) = body.get("metadata").filter(|m| !m.is_null()) {
        check_struct("ObjectMeta", "metadata", meta, OBJECT_META).map_err(cannot)?;
    }
    let fields = match (t.group.as_str(), t.kind.as_str()) {
        ("", "ConfigMap") => CONFIG_MAP,
        ("", "Secret") => SECRET,
        _ => return Ok(()),
    };
    check_fields(&t.kind, "", body, fields).map_err(cannot)
}

fn check_struct(go: &str, path: &str, value: &Value, fields: &[Field]) -> Result<(), String> {
    if !value.is_object() {
        return Err(format!(
            "cannot unmarshal {} into Go value of type {go}",
            json_type(value)
        ));
    }
    check_fields(go, path, value, fields)
}

fn check_fields(go: &str, path: &str, value: &Value, fields: &[Field]) -> Result<(), String> {
    for (name, shape) in fields {
        let Some(field) = value.get(*name).filter(|v| !v.is_null()) else {
            continue;
        };
        let at = if path.is_empty() {
            (*name).to_string()
        } else {
            format!("{path}.{name}")
        };
        check(go, &at, field, *shape)?;
    }
    Ok(())
}

fn check(go: &str, at: &str, value: &Value, shape: Shape) -> Result<(), String> {
    let wrong = |of: &str, found: &Value| {
        Err(format!(
            "cannot unmarshal {} into Go struct field {go}.{at} of type {of}",
            json_type(found)
        ))
    };
    match shape {
        Shape::Any => Ok(()),
        Shape::Str if value.is_string() => Ok(()),
        Shape::Str => wrong("string", value),
        Shape::Int if value.as_i64().is_some() => Ok(()),
        Shape::Int => wrong("int64", value),
        Shape::Bool if value.is_boolean() => Ok(()),
        Shape::Bool => wrong("bool", value),
        Shape::StrMap(of) => match value.as_object() {
            None => wrong(of, value),
            Some(map) => match map.values().find(|v| !v.is_string() && !v.is_null()) {
                Some(bad) => wrong("string", bad),
                None => Ok(()),
            },
        },
        Shape::StrList => match value.as_array() {
            None => wrong("[]string", value),
            Some(items) => match items.iter().find(|v| !v.is_string()) {
                Some(bad) => wrong("string", bad),
                None => Ok(()),
            },
        },
        Shape::Structs(of, fields) => match value.as_array() {
            None => wrong(of, value),
            Some(items) => {
                for item in items {
                    if !item.is_object() {
                        return wrong(of, item);
                    }
                    check_fields(go, at, item, fields)?;
                }
                Ok(())
            }
        },
    }
}

/// The JSON type name Go's decoder reports.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn configmaps() -> ResourceType {
        crate::builtin::types()
            .into_iter()
            .find(|t| t.kind == "ConfigMap")
            .expect("ConfigMap is built in")
    }

    #[test]
    fn wrongly_typed_fields_are_refused_as_kube_apiserver_refuses_them() {
        let t = configmaps();
        let refused = [
            (
                json!({"metadata": {"name": "a", "ownerReferences": "x"}}),
                "cannot unmarshal string into Go struct field ObjectMeta.metadata.ownerReferences of type []v1.OwnerReference",
            ),
            (
                json!({"metadata": {"name": "a", "resourceVersion": 5}}),
                "cannot unmarshal number into Go struct field ObjectMeta.metadata.resourceVersion of type string",
            ),
            (
                json!({"metadata": {"name": "a", "labels": {"x": 1}}}),
                "of type string",
            ),
            (
                json!({"metadata": {"name": "a", "finalizers": "f"}}),
                "of type []string",
            ),
            (
                json!({"metadata": {"name": "a", "ownerReferences": [{"uid": 7}]}}),
                "ObjectMeta.metadata.ownerReferences.uid of type string",
            ),
            (json!({"metadata": "a"}), "Go value of type ObjectMeta"),
            (
                json!({"metadata": {"name": "a"}, "data": [1, 2]}),
                "cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string",
            ),
        ];
        for (body, message) in refused {
            let err = check_types(&t, &body).expect_err(&body.to_string());
            assert!(err.contains(message), "{err}");
            assert!(
                err.starts_with(
                    "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: "
                ),
                "{err}"
            );
        }
        let fine = json!({"metadata": {"name": "a", "labels": {"x": "1"}, "annotations": null,
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": true}],
            "generation": 3}, "data": {"k": "v"}, "extra": [1]});
        assert_eq!(check_types(&t, &fine), Ok(()));
    }
}
