//! Validation where Kubernetes would reject: names, labels, Secrets, immutable fields.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value};

use crate::error::Cause;
use crate::registry::ResourceType;

/// An RFC 1123 label: lowercase alphanumerics and `-`, at most 63 characters.
#[must_use]
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// An RFC 1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && s.as_bytes()[0].is_ascii_alphanumeric()
            && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric())
}

/// A qualified name (`prefix/name` or `name`) as label and annotation keys use.
#[must_use]
pub fn is_qualified_name(s: &str) -> bool {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix
        && !is_dns_subdomain(p)
    {
        return false;
    }
    !name.is_empty() && is_label_value(name)
}

/// Which name rule a type's object names follow.
fn name_rule(t: &ResourceType) -> (&'static str, fn(&str) -> bool) {
    match (t.group.as_str(), t.plural.as_str()) {
        ("", "namespaces" | "services") => (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
            is_dns_label,
        ),
        ("rbac.authorization.k8s.io", _) => (
            "may not contain '/' or '%' and may not be '.' or '..'",
            is_path_segment_name,
        ),
        _ => (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            is_dns_subdomain,
        ),
    }
}

fn is_path_segment_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains('/') && !s.contains('%')
}

/// Validates an object's metadata and kind-specific rules on create or update.
///
/// `old` is the stored object on update. Returns every problem found, not just the first.
// Long on purpose: the checks in the API server's order, each collecting its causes, so the list
// reads like the rules it implements.
pub fn validate(t: &ResourceType, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    let meta = obj.get("metadata").and_then(Value::as_object);
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let (why, ok) = name_rule(t);
    if name.is_empty() {
        causes.push(Cause::required("metadata.name"));
    } else if !ok(name) {
        causes.push(Cause::invalid("metadata.name", name, why));
    }
    if let Some(labels) = meta.and_then(|m| m.get("labels")) {
        match labels.as_object() {
            Some(map) => {
                for (k, v) in map {
                    if !is_qualified_name(k) {
                        causes.push(Cause::invalid("metadata.labels", k, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
                    }
                    match v.as_str() {
                        Some(s) if is_label_value(s) => {}
                        Some(s) => causes.push(Cause::invalid("metadata.labels", s, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character")),
                        None => causes.push(Cause::invalid("metadata.labels", &v.to_string(), "label values must be strings")),
                    }
                }
            }
            None if labels.is_null() => {}
            None => causes.push(Cause::invalid(
                "metadata.labels",
                &labels.to_string(),
                "must be a map of strings",
            )),
        }
    }
    if let Some(annotations) = meta.and_then(|m| m.get("annotations")) {
        match annotations.as_object() {
            Some(map) => {
                let mut total = 0;
                for (k, v) in map {
                    if !is_qualified_name(k) {
                        causes.push(Cause::invalid("metadata.annotations", k, "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"));
                    }
                    match v.as_str() {
                        Some(s) => total += k.len() + s.len(),
                        None => causes.push(Cause::invalid(
                            "metadata.annotations",
                            &v.to_string(),
                            "annotation values must be strings",
                        )),
                    }
                }
                if total > 256 * 1024 {
                    causes.push(Cause {
                        reason: "FieldValueTooLong",
                        field: "metadata.annotations".into(),
                        message: format!(
                            "Too long: may not be more than 262144 bytes (got {total})"
                        ),
                    });
                }
            }
            None if annotations.is_null() => {}
            None => causes.push(Cause::invalid(
                "metadata.annotations",
                &annotations.to_string(),
                "must be a map of strings",
            )),
        }
    }
    if let Some(f) = meta.and_then(|m| m.get("finalizers"))
        && !f.is_null()
    {
        match f.as_array() {
            Some(items) => {
                for item in items {
                    match item.as_str() {
                        Some(s) if is_qualified_name(s) => {}
                        _ => causes.push(Cause::invalid(
                            "metadata.finalizers",
                            &item.to_string(),
                            "a finalizer must be a qualified name",
                        )),
                    }
                }
            }
            None => causes.push(Cause::invalid(
                "metadata.finalizers",
                &f.to_string(),
                "must be a list of strings",
            )),
        }
    }
    match (t.group.as_str(), t.plural.as_str()) {
        ("", "secrets") => validate_secret(obj, old, &mut causes),
        ("", "configmaps") => validate_configmap(obj, old, &mut causes),
        ("events.k8s.io", "events") => validate_event_v1(obj, old, &mut causes),
        ("apps", "deployments" | "statefulsets" | "daemonsets" | "replicasets") => {
            immutable(obj, old, "/spec/selector", "spec.selector", &mut causes);
        }
        ("batch", "jobs") => {
            immutable(obj, old, "/spec/selector", "spec.selector", &mut causes);
            immutable(obj, old, "/spec/template", "spec.template", &mut causes);
        }
        ("", "services") => {
            if let Some(old) = old {
                let before = old
                    .pointer("/spec/clusterIP")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let after = obj
                    .pointer("/spec/clusterIP")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                if !before.is_empty() && !after.is_empty() && before != after {
                    causes.push(Cause::invalid(
                        "spec.clusterIP",
                        after,
                        "field is immutable",
                    ));
                }
            }
        }
        _ => {}
    }
    causes
}

/// What kube-apiserver asks of an Event written through `events.k8s.io/v1` (on the stored core
/// Event, each field named as that API names it).
fn validate_event_v1(obj: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let text = |field: &str| obj.get(field).and_then(Value::as_str).unwrap_or("");
    if old.is_none() {
        for (stored, limit) in [
            ("eventTime", None),
            ("reportingComponent", None),
            ("reportingInstance", Some(128)),
            ("action", Some(128)),
            ("reason", Some(128)),
        ] {
            let served = crate::convert::event_v1_name(stored);
            let value = text(stored);
            if value.is_empty() {
                causes.push(Cause::required(served));
            } else if let Some(limit) = limit
                && value.len() > limit
            {
                causes.push(Cause::too_long(served, limit));
            }
        }
    }
    let kind = text("type");
    if kind != "Normal" && kind != "Warning" {
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            field: "type".into(),
            message: format!(
                "Unsupported value: {}: supported values: \"Normal\", \"Warning\"",
                Value::from(kind)
            ),
        });
    }
    if text("message").len() > 1024 {
        causes.push(Cause::too_long(
            crate::convert::event_v1_name("message"),
            1024,
        ));
    }
    if let Some(series) = obj.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            causes.push(Cause::invalid_value(
                "series.count",
                series.get("count").unwrap_or(&Value::Null),
                "should be at least 2",
            ));
        }
        if series.get("lastObservedTime").is_none_or(Value::is_null) {
            causes.push(Cause::required("series.lastObservedTime"));
        }
    }
}

fn immutable(obj: &Value, old: Option<&Value>, ptr: &str, field: &str, causes: &mut Vec<Cause>) {
    if let Some(old) = old
        && old.pointer(ptr) != obj.pointer(ptr)
    {
        let shown = obj
            .pointer(ptr)
            .map_or_else(|| "null".into(), Value::to_string);
        causes.push(Cause::invalid(field, &shown, "field is immutable"));
    }
}

fn validate_data_keys(map: &Map<String, Value>, field: &str, causes: &mut Vec<Cause>) {
    for k in map.keys() {
        let ok = !k.is_empty()
            && k.len() <= 253
            && k.bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'));
        if !ok {
            causes.push(Cause::invalid(format!("{field}[{k}]"), k, "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"));
        }
    }
}

fn validate_secret(obj: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    if let Some(data) = obj.get("data").and_then(Value::as_object) {
        validate_data_keys(data, "data", causes);
        for (k, v) in data {
            match v.as_str() {
                Some(s) if STANDARD.decode(s).is_ok() => {}
                // A Secret's value is never echoed back, not even an invalid one.
                _ => causes.push(Cause::invalid(
                    format!("data[{k}]"),
                    "<secret contents redacted>",
                    "must be base64-encoded bytes",
                )),
            }
        }
    }
    check_total_size(obj, &[("data", Encoding::Base64)], causes);
    if let Some(old) = old {
        if old.get("type") != obj.get("type") {
            let shown = obj.get("type").and_then(Value::as_str).unwrap_or("");
            causes.push(Cause::invalid("type", shown, "field is immutable"));
        }
        immutable_data(obj, old, &["data"], causes);
    }
}

fn validate_configmap(obj: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    for field in ["data", "binaryData"] {
        if let Some(map) = obj.get(field).and_then(Value::as_object) {
            validate_data_keys(map, field, causes);
            for (k, v) in map {
                let ok = match field {
                    "data" => v.is_string(),
                    _ => v.as_str().is_some_and(|s| STANDARD.decode(s).is_ok()),
                };
                if !ok {
                    causes.push(Cause::invalid(
                        format!("{field}[{k}]"),
                        &v.to_string(),
                        if field == "data" {
                            "must be a string"
                        } else {
                            "must be base64-encoded bytes"
                        },
                    ));
                }
            }
        }
    }
    check_total_size(
        obj,
        &[("data", Encoding::Text), ("binaryData", Encoding::Base64)],
        causes,
    );
    if let Some(old) = old {
        immutable_data(obj, old, &["data", "binaryData"], causes);
    }
}

/// The most a `ConfigMap`'s or Secret's data may hold: keys plus values (decoded bytes for
/// base64 fields), as kube-apiserver counts it.
const MAX_DATA_BYTES: usize = 1024 * 1024;

/// How a data field's values are held.
#[derive(Clone, Copy)]
enum Encoding {
    /// As they are (`ConfigMap.data`).
    Text,
    /// Base64 of the bytes, which are what counts (`binaryData`, `Secret.data`).
    Base64,
}

fn check_total_size(obj: &Value, fields: &[(&str, Encoding)], causes: &mut Vec<Cause>) {
    let mut total = 0usize;
    for (field, encoding) in fields {
        let Some(map) = obj.get(*field).and_then(Value::as_object) else {
            continue;
        };
        for (k, v) in map {
            let text = v.as_str().unwrap_or_default();
            let bytes = match encoding {
                Encoding::Text => text.len(),
                Encoding::Base64 => STANDARD.decode(text).map_or(text.len(), |b| b.len()),
            };
            total += k.len() + bytes;
        }
    }
    if total > MAX_DATA_BYTES {
        causes.push(Cause::too_long("", MAX_DATA_BYTES));
    }
}

/// `immutable: true` on a `ConfigMap` or Secret freezes its data and itself.
fn immutable_data(obj: &Value, old: &Value, fields: &[&str], causes: &mut Vec<Cause>) {
    if old.get("immutable").and_then(Value::as_bool) != Some(true) {
        return;
    }
    if obj.get("immutable").and_then(Value::as_bool) != Some(true) {
        causes.push(Cause::forbidden(
            "immutable",
            "field is immutable when `immutable` is set",
        ));
    }
    for f in fields {
        let empty = |v: Option<&Value>| {
            v.is_none_or(|v| v.is_null() || v.as_object().is_some_and(Map::is_empty))
        };
        let same = old.get(*f) == obj.get(*f) || (empty(old.get(*f)) && empty(obj.get(*f)));
        if !same {
            causes.push(Cause::forbidden(
                *f,
                "field is immutable when `immutable` is set",
            ));
        }
    }
}

/// Folds a Secret's `stringData` into `data` (base64) and defaults `type`, as the API server does.
pub fn normalize_secret(obj: &mut Value) {
    let Some(map) = obj.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map
            .entry("data")
            .or_insert_with(|| Value::Object(Map::new()));
        if !data.is_object() {
            *data = Value::Object(Map::new());
        }
        if let Some(data) = data.as_object_mut() {
            for (k, v) in string_data {
                let text = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                data.insert(k, Value::String(STANDARD.encode(text.as_bytes())));
            }
        }
    }
    let needs_type = map
        .get("type")
        .is_none_or(|t| t.as_str().is_none_or(str::is_empty));
    if needs_type {
        map.insert("type".into(), Value::String("Opaque".into()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_dns_label("web-1"));
        assert!(!is_dns_label("Web"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(is_dns_subdomain("a.b-c.d"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain("../etc"));
        assert!(is_qualified_name("app.kubernetes.io/name"));
        assert!(!is_qualified_name("a/b/c"));
        assert!(!is_qualified_name("bad key"));
    }

    #[test]
    fn secret_string_data_merges() {
        let mut s = serde_json::json!({"data": {"a": "eA=="}, "stringData": {"b": "y", "a": "z"}});
        normalize_secret(&mut s);
        assert_eq!(
            s,
            serde_json::json!({"data": {"a": "eg==", "b": "eQ=="}, "type": "Opaque"})
        );
    }
}
