//! How kube-apiserver's printers write values into cells: label selectors, label maps, times
//! since an instant, counts and placeholders.

use std::time::SystemTime;

use serde_json::Value;

use super::human_duration;

/// A string field, or `""`.
pub(super) fn text<'a>(obj: &'a Value, ptr: &str) -> &'a str {
    obj.pointer(ptr).and_then(Value::as_str).unwrap_or("")
}

/// A string field, or `placeholder` when absent or empty.
pub(super) fn text_or(obj: &Value, ptr: &str, placeholder: &str) -> String {
    match text(obj, ptr) {
        "" => placeholder.to_string(),
        s => s.to_string(),
    }
}

/// An integer field, or 0.
pub(super) fn int(obj: &Value, ptr: &str) -> i64 {
    obj.pointer(ptr).and_then(Value::as_i64).unwrap_or(0)
}

/// How many items a list field holds (0 when absent).
pub(super) fn len(obj: &Value, ptr: &str) -> usize {
    obj.pointer(ptr)
        .and_then(Value::as_array)
        .map_or(0, Vec::len)
}

/// A number or a string (an `IntOrString`) as text, or `placeholder` when absent.
pub(super) fn int_or_string(obj: &Value, ptr: &str, placeholder: &str) -> String {
    match obj.pointer(ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => placeholder.to_string(),
    }
}

/// A boolean pointer as Go prints it: `True`, `False`, or `<unset>`.
pub(super) fn bool_ptr(obj: &Value, ptr: &str) -> String {
    match obj.pointer(ptr).and_then(Value::as_bool) {
        Some(true) => "True".into(),
        Some(false) => "False".into(),
        None => "<unset>".into(),
    }
}

/// The time from the instant at `ptr` to `now`, as the AGE column writes it; `None` when absent.
pub(super) fn since(obj: &Value, ptr: &str, now: SystemTime) -> Option<String> {
    let at = humantime::parse_rfc3339(text(obj, ptr)).ok()?;
    Some(human_duration(now.duration_since(at).unwrap_or_default()))
}

/// A label map as `k=v` pairs sorted by key, or `<none>`.
pub(super) fn labels(map: Option<&Value>) -> String {
    let mut pairs: Vec<String> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// A `LabelSelector` as kubectl writes it: requirements sorted by key (`k=v`, `k in (a,b)`,
/// `k notin (a,b)`, `k`, `!k`), or `<none>` when it selects everything.
pub(super) fn label_selector(selector: Option<&Value>) -> String {
    let Some(selector) = selector else {
        return "<none>".into();
    };
    let mut requirements: Vec<(String, String)> = Vec::new();
    if let Some(m) = selector.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            requirements.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or(""))));
        }
    }
    for e in selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = text(e, "/key");
        let mut values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|vs| vs.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        values.sort_unstable();
        let written = match text(e, "/operator") {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.to_string(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<error>".into(),
        };
        requirements.push((key.to_string(), written));
    }
    requirements.sort();
    if requirements.is_empty() {
        "<none>".into()
    } else {
        requirements
            .into_iter()
            .map(|(_, r)| r)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The creation time as the `Created At` column writes it (RFC 3339, UTC, seconds).
pub(super) fn created_at(obj: &Value) -> String {
    humantime::parse_rfc3339(text(obj, "/metadata/creationTimestamp")).map_or_else(
        |_| "0001-01-01T00:00:00Z".into(),
        |t| humantime::format_rfc3339_seconds(t).to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn selectors_read_as_kubectl_writes_them() {
        let s = json!({"matchLabels": {"b": "2", "a": "1"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]},
                                 {"key": "gone", "operator": "DoesNotExist"}]});
        assert_eq!(label_selector(Some(&s)), "a=1,b=2,!gone,tier in (api,web)");
        assert_eq!(label_selector(Some(&json!({}))), "<none>");
        assert_eq!(label_selector(None), "<none>");
        assert_eq!(labels(Some(&json!({"z": "1", "a": "2"}))), "a=2,z=1");
        assert_eq!(labels(None), "<none>");
    }
}
