//! Server-side apply: field ownership per manager, conflicts, and removal of fields a manager
//! stopped applying.
//!
//! The applier (backflow's own, Flux, Argo CD) and people editing through the API are told apart
//! by these records, so they must be the ones a cluster would write (seed 000 "The life of an
//! apply").

use serde_json::{Map, Value, json};

use crate::error::{ApiError, Cause};
use crate::managed_fields::{fields_of, subtract};
use crate::patch;

/// One path into an object, in `fieldsV1` steps (`f:spec`, `k:{"name":"web"}`).
type FieldPath = Vec<String>;

/// Every owned path of a field set: leaves, and maps or items owned themselves (`"."`).
fn owned_paths(set: &Map<String, Value>) -> Vec<FieldPath> {
    let mut out = Vec::new();
    walk(set, &mut Vec::new(), &mut out);
    out
}

fn walk(set: &Map<String, Value>, prefix: &mut FieldPath, out: &mut Vec<FieldPath>) {
    for (k, v) in set {
        if k == "." {
            continue;
        }
        prefix.push(k.clone());
        match v.as_object() {
            Some(children) if children.keys().any(|c| c != ".") => {
                if children.contains_key(".") {
                    out.push(prefix.clone());
                }
                walk(children, prefix, out);
            }
            _ => out.push(prefix.clone()),
        }
        prefix.pop();
    }
}

/// Leaves only: a map or list item owned as a whole does not conflict on its value, its fields do.
fn leaf_paths(set: &Map<String, Value>) -> Vec<FieldPath> {
    let all = owned_paths(set);
    all.iter()
        .filter(|p| !all.iter().any(|q| q.len() > p.len() && is_under(q, p)))
        .cloned()
        .collect()
}

fn step<'a>(v: &'a Value, s: &str) -> Option<&'a Value> {
    if let Some(field) = s.strip_prefix("f:") {
        return v.get(field);
    }
    let key: Map<String, Value> = serde_json::from_str(s.strip_prefix("k:")?).ok()?;
    v.as_array()?
        .iter()
        .find(|item| key.iter().all(|(k, want)| item.get(k) == Some(want)))
}

fn value_at<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, s| step(cur, s))
}

fn remove_at(v: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = v;
    for s in parents {
        let next = if let Some(field) = s.strip_prefix("f:") {
            cur.get_mut(field)
        } else {
            let Some(key) = s
                .strip_prefix("k:")
                .and_then(|k| serde_json::from_str::<Map<String, Value>>(k).ok())
            else {
                return;
            };
            cur.as_array_mut().and_then(|items| {
                items
                    .iter_mut()
                    .find(|i| key.iter().all(|(k, want)| i.get(k) == Some(want)))
            })
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(field) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(field);
        }
    } else if let Some(key) = last
        .strip_prefix("k:")
        .and_then(|k| serde_json::from_str::<Map<String, Value>>(k).ok())
        && let Some(items) = cur.as_array_mut()
    {
        items.retain(|i| !key.iter().all(|(k, want)| i.get(k) == Some(want)));
    }
}

/// `.spec.containers[name="web"].image`, as the API server prints field paths in conflicts.
fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for s in path {
        if let Some(f) = s.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = s.strip_prefix("k:") {
            let key: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        }
    }
    out
}

fn is_under(path: &[String], prefix: &[String]) -> bool {
    path.len() >= prefix.len() && path[..prefix.len()] == *prefix
}

fn set_of(entry: &Value) -> Map<String, Value> {
    entry
        .get("fieldsV1")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// Builds a field set from paths (the inverse of [`owned_paths`]).
fn set_from_paths(paths: &[FieldPath]) -> Map<String, Value> {
    let mut root = Map::new();
    for p in paths {
        let mut cur = &mut root;
        for s in p {
            let entry = cur.entry(s.clone()).or_insert_with(|| json!({}));
            cur = match entry {
                Value::Object(m) => m,
                _ => return root,
            };
        }
    }
    root
}

/// A server-side apply request.
#[derive(Debug, Clone)]
pub struct ApplyRequest<'a> {
    /// The applying field manager.
    pub manager: &'a str,
    /// `force=true`: take conflicting fields instead of failing.
    pub force: bool,
    /// The apiVersion of the request.
    pub api_version: &'a str,
    /// `status` when applied to the status subresource.
    pub subresource: Option<&'a str>,
    /// RFC 3339 time of the apply.
    pub time: &'a str,
}

/// The 409 of an apply that sets fields other managers own to other values.
fn conflict_error(
    conflicts: &[(String, FieldPath)],
    req: &ApplyRequest<'_>,
    resource: (&str, &str),
    name: &str,
) -> ApiError {
    let causes: Vec<Cause> = conflicts
        .iter()
        .map(|(m, p)| Cause {
            reason: "FieldManagerConflict",
            field: display_path(p),
            message: format!("conflict with \"{m}\" using {}", req.api_version),
        })
        .collect();
    let list = causes
        .iter()
        .map(|c| format!("{}: {}", c.message, c.field))
        .collect::<Vec<_>>()
        .join("\n");
    let n = causes.len();
    ApiError::ApplyConflict {
        group: resource.0.into(),
        resource: resource.1.into(),
        name: name.into(),
        message: format!(
            "Apply failed with {n} conflict{}: {list}",
            if n == 1 { "" } else { "s" }
        ),
        causes,
    }
}

/// The manager's `Apply` entry in managedFields, keeping the previous entry's time when its
/// ownership did not change and the apply changed no value (`change`: the object before and
/// after), so a repeated apply is a no-op; as kube-apiserver, a manager changing the value of a
/// field it owns dates its entry anew.
fn apply_entry(
    req: &ApplyRequest<'_>,
    applied: Map<String, Value>,
    previous: Option<&Value>,
    change: (&Value, &Value),
) -> Value {
    let changed = !crate::object::same_but_server_fields(change.0, change.1);
    let mut e = json!({
        "manager": req.manager,
        "operation": "Apply",
        "apiVersion": req.api_version,
        "time": req.time,
        "fieldsType": "FieldsV1",
        "fieldsV1": Value::Object(applied),
    });
    if let Some(s) = req.subresource {
        e["subresource"] = json!(s);
    }
    if let Some(old) = previous
        && !changed
        && old.get("fieldsV1") == e.get("fieldsV1")
        && let Some(t) = old.get("time")
    {
        e["time"] = t.clone();
    }
    e
}

/// The live object's managedFields as an apply finds them: this manager's previous set, the
/// other managers' entries less what this apply takes over, and the conflicts it takes them over
/// with.
struct Ownership {
    conflicts: Vec<(String, FieldPath)>,
    others: Vec<Value>,
    previous: Map<String, Value>,
}

/// Conflicts: fields another manager owns that this apply (`applied`, its `applied_set`) sets to
/// a different value than `live` holds.
fn ownership(
    entries: &[Value],
    is_mine: &dyn Fn(&Value) -> bool,
    applied_set: &Map<String, Value>,
    live: &Value,
    applied: &Value,
) -> Ownership {
    let mut found = Ownership {
        conflicts: Vec::new(),
        others: Vec::new(),
        previous: Map::new(),
    };
    for e in entries {
        if is_mine(e) {
            found.previous = set_of(e);
            continue;
        }
        let theirs = leaf_paths(&set_of(e));
        let manager = e
            .get("manager")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut lost = Vec::new();
        for p in &leaf_paths(applied_set) {
            if theirs.contains(p) && value_at(live, p) != value_at(applied, p) {
                found.conflicts.push((manager.clone(), p.clone()));
                lost.push(p.clone());
            }
        }
        let mut e = e.clone();
        if !lost.is_empty() {
            let remaining = subtract(&set_of(&e), &set_from_paths(&lost));
            e["fieldsV1"] = Value::Object(remaining);
        }
        if !set_of(&e).is_empty() {
            found.others.push(e);
        }
    }
    found
}

/// Removes from `merged` the fields this manager applied before (`previous`) and no longer
/// applies, unless another manager (`others`) owns them.
fn drop_unapplied(
    merged: &mut Value,
    previous: &Map<String, Value>,
    others: &[Value],
    applied_paths: &[FieldPath],
) {
    let other_paths: Vec<FieldPath> = others
        .iter()
        .flat_map(|e| owned_paths(&set_of(e)))
        .collect();
    let mut dropped: Vec<FieldPath> = owned_paths(previous)
        .into_iter()
        .filter(|p| !applied_paths.contains(p))
        .collect();
    // Parents first: removing an item by its key must happen before its key field goes.
    dropped.sort_by_key(Vec::len);
    for p in &dropped {
        let shared = other_paths.iter().any(|o| is_under(o, p));
        let still_applied = applied_paths.iter().any(|a| is_under(a, p));
        if !shared && !still_applied {
            remove_at(merged, p);
        }
    }
}

/// Merges an applied configuration into the live object (or creates it) and computes the new
/// `managedFields`. Fails with 409 on fields another manager owns with a different value, unless
/// forced. The group, plural and name only shape the error.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    req: &ApplyRequest<'_>,
    resource: (&str, &str),
    name: &str,
) -> Result<(Value, Vec<Value>), ApiError> {
    let applied_set = fields_of(applied);
    let applied_paths = owned_paths(&applied_set);
    let empty = json!({});
    let live_obj = live.unwrap_or(&empty);
    let entries: Vec<Value> = live_obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let is_mine = |e: &Value| {
        e.get("manager").and_then(Value::as_str) == Some(req.manager)
            && e.get("operation").and_then(Value::as_str) == Some("Apply")
            && e.get("subresource").and_then(Value::as_str) == req.subresource
    };

    let Ownership {
        conflicts,
        others,
        previous,
    } = ownership(&entries, &is_mine, &applied_set, live_obj, applied);
    if !conflicts.is_empty() && !req.force {
        return Err(conflict_error(&conflicts, req, resource, name));
    }
    let mut merged = live.cloned().unwrap_or_else(|| json!({}));
    drop_unapplied(&mut merged, &previous, &others, &applied_paths);
    patch::strategic(&mut merged, applied)?;

    let mut managed = others;
    if !applied_set.is_empty() {
        let previous_entry = entries.iter().find(|e| is_mine(e));
        let change = (live_obj, &merged);
        managed.push(apply_entry(req, applied_set, previous_entry, change));
    }
    Ok((merged, managed))
}

/// Parses an apply body: JSON, or YAML (`application/apply-patch+yaml`).
pub fn parse_body(bytes: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        return Ok(v);
    }
    yaml_serde::from_slice::<Value>(bytes)
        .map_err(|e| ApiError::BadRequest(format!("the apply body is neither JSON nor YAML: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(manager: &str, force: bool) -> ApplyRequest<'_> {
        ApplyRequest {
            manager,
            force,
            api_version: "v1",
            subresource: None,
            time: "2026-01-01T00:00:00Z",
        }
    }

    fn with_mf(mut obj: Value, mf: Vec<Value>) -> Value {
        obj["metadata"]["managedFields"] = json!(mf);
        obj
    }

    #[test]
    fn create_then_remove_a_field_no_longer_applied() {
        let a1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}});
        let (obj, mf) =
            apply(None, &a1, &req("mgr", false), ("", "configmaps"), "c").expect("applies");
        assert_eq!(obj["data"], json!({"a": "1", "b": "2"}));
        let live = with_mf(obj, mf);
        let a2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let (obj, _) = apply(
            Some(&live),
            &a2,
            &req("mgr", false),
            ("", "configmaps"),
            "c",
        )
        .expect("applies");
        assert_eq!(obj["data"], json!({"a": "1"}));
    }

    #[test]
    fn an_apply_changing_a_value_dates_its_entry_anew_and_a_repeated_one_does_not() {
        let at = |time| ApplyRequest {
            time,
            ..req("mgr", false)
        };
        let a1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}});
        let (obj, mf) = apply(
            None,
            &a1,
            &at("2026-01-01T00:00:00Z"),
            ("", "configmaps"),
            "c",
        )
        .expect("applies");
        let live = with_mf(obj, mf);
        let (_, mf) = apply(
            Some(&live),
            &a1,
            &at("2026-01-01T00:00:09Z"),
            ("", "configmaps"),
            "c",
        )
        .expect("applies");
        assert_eq!(
            mf[0]["time"], "2026-01-01T00:00:00Z",
            "the same apply again"
        );
        let a2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "2"}});
        let (_, mf) = apply(
            Some(&live),
            &a2,
            &at("2026-01-01T00:00:09Z"),
            ("", "configmaps"),
            "c",
        )
        .expect("applies");
        assert_eq!(
            mf[0]["time"], "2026-01-01T00:00:09Z",
            "a value it owns changed"
        );
    }

    #[test]
    fn conflict_unless_forced() {
        let live = with_mf(
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
            vec![
                json!({"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:a": {}}}}),
            ],
        );
        let a = json!({"metadata": {"name": "c"}, "data": {"a": "2"}});
        let err = apply(
            Some(&live),
            &a,
            &req("kubectl", false),
            ("", "configmaps"),
            "c",
        )
        .expect_err("conflicts");
        let status = err.to_status();
        assert_eq!(status["code"], 409);
        assert_eq!(status["details"]["causes"][0]["field"], ".data.a");
        assert!(
            status["message"]
                .as_str()
                .is_some_and(|m| m.contains("conflict with \"kubectl-client-side-apply\""))
        );
        let (obj, mf) = apply(
            Some(&live),
            &a,
            &req("kubectl", true),
            ("", "configmaps"),
            "c",
        )
        .expect("forced");
        assert_eq!(obj["data"]["a"], "2");
        assert!(
            mf.iter()
                .all(|e| e["manager"] != "kubectl-client-side-apply"),
            "{mf:?}"
        );
    }

    #[test]
    fn same_value_is_shared_not_a_conflict() {
        let live = with_mf(
            json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
            vec![
                json!({"manager": "other", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:a": {}}}}),
            ],
        );
        let a = json!({"metadata": {"name": "c"}, "data": {"a": "1"}});
        let (_, mf) = apply(
            Some(&live),
            &a,
            &req("mine", false),
            ("", "configmaps"),
            "c",
        )
        .expect("no conflict");
        assert_eq!(mf.len(), 2);
    }

    #[test]
    fn list_items_removed_by_key() {
        let a1 = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "y"}]}}}});
        let (obj, mf) =
            apply(None, &a1, &req("m", false), ("apps", "deployments"), "d").expect("applies");
        let live = with_mf(obj, mf);
        let a2 =
            json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x2"}]}}}});
        let (obj, _) = apply(
            Some(&live),
            &a2,
            &req("m", false),
            ("apps", "deployments"),
            "d",
        )
        .expect("applies");
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"],
            json!([{"name": "a", "image": "x2"}])
        );
    }
}
