//! Field ownership (`metadata.managedFields`, `fieldsV1`) as the API server records it.
//!
//! A field set is kept in the wire shape itself: a JSON map of `f:<field>` / `k:<key>` entries, each
//! a map of its children, where `"."` marks that the parent itself is owned. Lists of maps with a
//! known merge key are owned per item (`k:{"name":"web"}`); other lists are owned whole.

use serde_json::{Map, Value, json};

/// Metadata fields the server sets; nobody owns them.
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "generateName",
];

/// The merge key of a list field, for lists Kubernetes merges by key.
#[must_use]
pub fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "ports"
        | "volumeDevices"
        | "hostAliases" => match field {
            "ports" => Some("containerPort"),
            "volumeDevices" => Some("devicePath"),
            "hostAliases" => Some("ip"),
            _ => Some("name"),
        },
        "volumeMounts" => Some("mountPath"),
        "conditions" => Some("type"),
        _ => None,
    }
}

fn item_key(field: &str, item: &Value) -> Option<String> {
    let key = merge_key(field)?;
    let v = item.get(key)?;
    let mut m = Map::new();
    m.insert(key.into(), v.clone());
    Some(format!("k:{}", Value::Object(m)))
}

/// Every field set in `value`, as a field set.
#[must_use]
pub fn fields_of(value: &Value) -> Map<String, Value> {
    fields_of_at(value, true)
}

fn fields_of_at(value: &Value, top: bool) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(obj) = value.as_object() else {
        return out;
    };
    for (k, v) in obj {
        if top && matches!(k.as_str(), "apiVersion" | "kind" | "status") {
            continue;
        }
        if top && k == "metadata" {
            let meta = metadata_fields(v);
            if !meta.is_empty() {
                out.insert("f:metadata".into(), Value::Object(meta));
            }
            continue;
        }
        out.insert(format!("f:{k}"), Value::Object(child_fields(k, v)));
    }
    out
}

fn metadata_fields(meta: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(m) = meta.as_object() {
        for (k, v) in m {
            if SERVER_METADATA.contains(&k.as_str()) {
                continue;
            }
            out.insert(format!("f:{k}"), Value::Object(child_fields(k, v)));
        }
    }
    out
}

fn child_fields(field: &str, v: &Value) -> Map<String, Value> {
    match v {
        Value::Object(o) if !o.is_empty() => {
            let mut m = fields_of_at(v, false);
            m.insert(".".into(), json!({}));
            m
        }
        Value::Array(items)
            if merge_key(field).is_some() && items.iter().all(|i| item_key(field, i).is_some()) =>
        {
            let mut m = Map::new();
            m.insert(".".into(), json!({}));
            for item in items {
                if let Some(k) = item_key(field, item) {
                    let mut inner = fields_of_at(item, false);
                    inner.insert(".".into(), json!({}));
                    m.insert(k, Value::Object(inner));
                }
            }
            m
        }
        _ => Map::new(),
    }
}

/// The fields that are new or different in `new` compared to `old`.
#[must_use]
pub fn changed_fields(old: &Value, new: &Value) -> Map<String, Value> {
    changed_at(old, new, true)
}

fn changed_at(old: &Value, new: &Value, top: bool) -> Map<String, Value> {
    let mut out = Map::new();
    let Some(n) = new.as_object() else { return out };
    let o = old.as_object();
    for (k, nv) in n {
        if top && matches!(k.as_str(), "apiVersion" | "kind" | "status") {
            continue;
        }
        let ov = o.and_then(|o| o.get(k));
        if ov == Some(nv) {
            continue;
        }
        if top && k == "metadata" {
            let empty = json!({});
            let mut filtered_new = nv.clone();
            let mut filtered_old = ov.cloned().unwrap_or(empty);
            for f in SERVER_METADATA {
                if let Some(m) = filtered_new.as_object_mut() {
                    m.remove(*f);
                }
                if let Some(m) = filtered_old.as_object_mut() {
                    m.remove(*f);
                }
            }
            let c = changed_at(&filtered_old, &filtered_new, false);
            if !c.is_empty() {
                out.insert("f:metadata".into(), Value::Object(c));
            }
            continue;
        }
        let sub = match (ov, nv) {
            (Some(ov @ Value::Object(_)), Value::Object(_)) => {
                let mut c = changed_at(ov, nv, false);
                if c.is_empty() {
                    continue;
                }
                c.insert(".".into(), json!({}));
                c
            }
            (Some(Value::Array(oi)), Value::Array(ni))
                if merge_key(k).is_some() && ni.iter().all(|i| item_key(k, i).is_some()) =>
            {
                let mut c = Map::new();
                for item in ni {
                    let Some(key) = item_key(k, item) else {
                        continue;
                    };
                    let before = oi
                        .iter()
                        .find(|i| item_key(k, i).as_deref() == Some(key.as_str()));
                    match before {
                        Some(b) if b == item => {}
                        Some(b) => {
                            let mut inner = changed_at(b, item, false);
                            inner.insert(".".into(), json!({}));
                            c.insert(key, Value::Object(inner));
                        }
                        None => {
                            let mut inner = fields_of_at(item, false);
                            inner.insert(".".into(), json!({}));
                            c.insert(key, Value::Object(inner));
                        }
                    }
                }
                c.insert(".".into(), json!({}));
                c
            }
            _ => child_fields(k, nv),
        };
        out.insert(format!("f:{k}"), Value::Object(sub));
    }
    out
}

/// `a ∪ b`.
#[must_use]
pub fn union(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = a.clone();
    for (k, bv) in b {
        match (out.get_mut(k), bv.as_object()) {
            (Some(Value::Object(av)), Some(bo)) => {
                let merged = union(av, bo);
                *av = merged;
            }
            _ => {
                out.insert(k.clone(), bv.clone());
            }
        }
    }
    out
}

/// `a` without the leaves of `b` (a parent stays owned while any child of it stays).
#[must_use]
pub fn subtract(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, av) in a {
        // "." (ownership of the parent itself) stays while any child stays.
        match b.get(k).filter(|_| k != ".") {
            None => {
                out.insert(k.clone(), av.clone());
            }
            Some(bv) => {
                let (Some(ao), Some(bo)) = (av.as_object(), bv.as_object()) else {
                    continue;
                };
                if bo.is_empty() || ao.is_empty() {
                    // A leaf in b takes the whole subtree away.
                    continue;
                }
                let rest = subtract(ao, bo);
                if rest.keys().any(|k| k != ".") {
                    out.insert(k.clone(), Value::Object(rest));
                }
            }
        }
    }
    out
}

/// Keeps only the fields that still exist in `value`.
#[must_use]
pub fn prune(set: &Map<String, Value>, value: &Value) -> Map<String, Value> {
    let present = fields_of(value);
    intersect(set, &present)
}

fn intersect(a: &Map<String, Value>, b: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, av) in a {
        if let Some(bv) = b.get(k) {
            let (ao, bo) = (av.as_object(), bv.as_object());
            match (ao, bo) {
                (Some(ao), Some(bo)) if !ao.is_empty() && !bo.is_empty() => {
                    out.insert(k.clone(), Value::Object(intersect(ao, bo)));
                }
                _ => {
                    out.insert(k.clone(), av.clone());
                }
            }
        }
    }
    out
}

/// The object's `managedFields` with every `time` removed, to tell real ownership changes from
/// a repeated write.
pub fn without_times(obj: &Value) -> Option<Vec<Value>> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .map(|e| {
                    let mut e = e.clone();
                    if let Some(m) = e.as_object_mut() {
                        m.remove("time");
                    }
                    e
                })
                .collect()
        })
}

/// One manager's write, to be recorded in `managedFields`.
#[derive(Debug, Clone)]
pub struct FieldWrite<'a> {
    /// The field manager (`fieldManager` or derived from the User-Agent).
    pub manager: &'a str,
    /// `Update` or `Apply`.
    pub operation: &'a str,
    /// The apiVersion the request used.
    pub api_version: &'a str,
    /// `status` or `scale` when written through a subresource.
    pub subresource: Option<&'a str>,
    /// RFC 3339 time of the write.
    pub time: &'a str,
}

/// Records an Update by `write` that turned `old` (None on create) into `new`, returning the new
/// `managedFields` list.
pub fn record_update(old: Option<&Value>, new: &Value, write: &FieldWrite<'_>) -> Vec<Value> {
    let changed = match old {
        Some(old) => changed_fields(old, new),
        None => fields_of(new),
    };
    let changed = if write.subresource == Some("status") {
        status_fields(old, new)
    } else {
        changed
    };
    let existing: Vec<Value> = old
        .and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    let mut mine: Option<Map<String, Value>> = None;
    for entry in existing {
        let same = entry.get("manager").and_then(Value::as_str) == Some(write.manager)
            && entry.get("operation").and_then(Value::as_str) == Some(write.operation)
            && entry.get("subresource").and_then(Value::as_str) == write.subresource;
        let set = entry
            .get("fieldsV1")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if same {
            mine = Some(set);
            continue;
        }
        let rest = prune(&subtract(&set, &changed), new);
        let rest = if entry.get("subresource").and_then(Value::as_str) == Some("status") {
            subtract(&set, &changed)
        } else {
            rest
        };
        if !rest.is_empty() {
            let mut e = entry.clone();
            e["fieldsV1"] = Value::Object(rest);
            out.push(e);
        }
    }
    let merged = union(&mine.unwrap_or_default(), &changed);
    let merged = if write.subresource == Some("status") {
        merged
    } else {
        prune(&merged, new)
    };
    if !merged.is_empty() {
        let mut e = json!({
            "manager": write.manager,
            "operation": write.operation,
            "apiVersion": write.api_version,
            "time": write.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": Value::Object(merged),
        });
        if let Some(s) = write.subresource {
            e["subresource"] = json!(s);
        }
        out.push(e);
    }
    out
}

fn status_fields(old: Option<&Value>, new: &Value) -> Map<String, Value> {
    let empty = json!({});
    let before =
        json!({"status": old.and_then(|o| o.get("status")).cloned().unwrap_or(empty.clone())});
    let after = json!({"status": new.get("status").cloned().unwrap_or(empty)});
    let mut m = Map::new();
    if let Some(c) = changed_status(&before, &after) {
        m.insert("f:status".into(), Value::Object(c));
    }
    m
}

fn changed_status(before: &Value, after: &Value) -> Option<Map<String, Value>> {
    let (b, a) = (before.get("status")?, after.get("status")?);
    if b == a {
        return None;
    }
    let mut c = changed_at(b, a, false);
    c.insert(".".into(), json!({}));
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2026-01-01T00:00:00Z";

    fn w(manager: &str) -> FieldWrite<'_> {
        FieldWrite {
            manager,
            operation: "Update",
            api_version: "v1",
            subresource: None,
            time: T,
        }
    }

    #[test]
    fn create_owns_every_field_set() {
        let obj = json!({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"1"}},"data":{"k":"v"}});
        let mf = record_update(None, &obj, &w("kubectl-create"));
        assert_eq!(mf.len(), 1);
        assert_eq!(
            mf[0]["fieldsV1"],
            json!({"f:metadata":{"f:labels":{".":{},"f:x":{}}},"f:data":{".":{},"f:k":{}}})
        );
    }

    #[test]
    fn second_manager_takes_changed_fields() {
        let v1 = json!({"metadata":{"name":"a"},"data":{"k":"v","j":"w"}});
        let mf = record_update(None, &v1, &w("one"));
        let mut v1s = v1.clone();
        v1s["metadata"]["managedFields"] = json!(mf);
        let v2 = json!({"metadata":{"name":"a"},"data":{"k":"changed","j":"w"}});
        let mf2 = record_update(Some(&v1s), &v2, &w("two"));
        let one = mf2
            .iter()
            .find(|e| e["manager"] == "one")
            .expect("one keeps j");
        assert_eq!(one["fieldsV1"], json!({"f:data":{".":{},"f:j":{}}}));
        let two = mf2
            .iter()
            .find(|e| e["manager"] == "two")
            .expect("two owns k");
        assert_eq!(two["fieldsV1"], json!({"f:data":{".":{},"f:k":{}}}));
    }

    #[test]
    fn containers_are_owned_by_name() {
        let obj = json!({"spec":{"containers":[{"name":"web","image":"nginx"}]}});
        let f = fields_of(&obj);
        assert_eq!(
            Value::Object(f),
            json!({"f:spec":{".":{},"f:containers":{".":{},"k:{\"name\":\"web\"}":{".":{},"f:image":{},"f:name":{}}}}})
        );
    }
}
