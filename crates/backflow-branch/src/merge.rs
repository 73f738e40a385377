//! Three-way merge of one object, field by field: what a live edit changed, laid onto what Git
//! holds now.
//!
//! `base` is the object as the live side held it before the edit, `ours` after it, `theirs` the
//! document Git holds (a push may have changed other fields since). A field only one side
//! changed keeps that side's value; a field both changed to different values takes ours (the
//! API side wins, as seed 000 says) and is reported as an override. Lists Kubernetes merges by a
//! key (containers by `name`, ports by `containerPort`, …) merge item by item; other lists are
//! one value.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

/// The result of [`merge_object`].
#[derive(Debug, Clone, PartialEq)]
pub struct Merged {
    /// The merged object.
    pub value: Value,
    /// The fields both sides changed to different values, where ours was taken over theirs, as
    /// dotted paths (`data.b`, `spec.containers[name=app].image`).
    pub overrides: Vec<String>,
}

/// Merges `ours` (the live side's edit of `base`) into `theirs` (Git's document now).
#[must_use]
pub fn merge_object(base: &Value, ours: &Value, theirs: &Value) -> Merged {
    let mut overrides = Vec::new();
    let value = merge_value(Some(base), ours, theirs, "", "", &mut overrides);
    Merged { value, overrides }
}

/// What the live side held of an object before its change `live`, field by field, when all
/// that is known is the commit it held in full (`held`: what that commit held of the object;
/// `None` when it held none) and the later commits it may have held the object as since
/// (`later`: what backflow pushed of live edits, what an apply brought — the branch's commits
/// after `held`'s).
///
/// A field that reads as one of the later commits held it did not change live since: the two
/// sides agreed on it there, so its base is its live value and Git's change after that commit
/// stands in the merge. Every other field's base is `held`'s (none, where `held` has none). An
/// object that reads as a later commit held it whole is that commit's document; one `held`
/// lacks and no later commit agrees with in any field has no baseline (it is written whole).
#[must_use]
pub fn baseline_since(held: Option<&Value>, later: &[&Value], live: &Value) -> Option<Value> {
    if later.contains(&live) {
        return Some(live.clone());
    }
    let Value::Object(live_fields) = live else {
        return held.cloned();
    };
    let mut base = match held {
        Some(Value::Object(held_fields)) => held_fields.clone(),
        Some(other) => return Some(other.clone()),
        None => Map::new(),
    };
    for (key, value) in live_fields {
        let later_values: Vec<&Value> = later.iter().filter_map(|c| c.get(key)).collect();
        let was = held.and_then(|h| h.get(key));
        if let Some(field) = baseline_since(was, &later_values, value) {
            base.insert(key.clone(), field);
        }
    }
    (held.is_some() || !base.is_empty()).then_some(Value::Object(base))
}

/// The keys by which a list's items are matched, as strategic merge patch matches them
/// (`containers` by `name`, `ports` by `containerPort`, …), candidates in order; none for a
/// list that is one value.
#[must_use]
pub fn merge_keys(list: &str) -> &'static [&'static str] {
    match list {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        // A kustomization's entries, which a live edit projected back changes one by one.
        | "images"
        | "replicas"
        | "configMapGenerator"
        | "secretGenerator" => &["name"],
        "ports" => &["containerPort", "port"],
        "volumeMounts" => &["mountPath"],
        "volumeDevices" => &["devicePath"],
        "conditions" => &["type"],
        _ => &[],
    }
}

/// The merge of one value present on both sides; `field` is its key in its parent (what picks a
/// list's merge key) and `path` where it is, for the override report.
fn merge_value(
    base: Option<&Value>,
    ours: &Value,
    theirs: &Value,
    field: &str,
    path: &str,
    overrides: &mut Vec<String>,
) -> Value {
    if ours == theirs || base == Some(theirs) {
        return ours.clone();
    }
    if base == Some(ours) {
        return theirs.clone();
    }
    match (ours, theirs) {
        (Value::Object(o), Value::Object(t)) => {
            let empty = Map::new();
            let b = match base {
                Some(Value::Object(b)) => b,
                _ => &empty,
            };
            Value::Object(merge_maps(b, o, t, path, overrides))
        }
        (Value::Array(o), Value::Array(t)) => {
            let empty = Vec::new();
            let b = match base {
                Some(Value::Array(b)) => b,
                _ => &empty,
            };
            merge_keyed(b, o, t, field, path, overrides).unwrap_or_else(|| {
                overrides.push(path.to_string());
                ours.clone()
            })
        }
        _ => {
            overrides.push(path.to_string());
            ours.clone()
        }
    }
}

/// One field of a map merged, `None` when the merge removes it.
fn merge_entry(
    base: Option<&Value>,
    ours: Option<&Value>,
    theirs: Option<&Value>,
    field: &str,
    path: &str,
    overrides: &mut Vec<String>,
) -> Option<Value> {
    match (ours, theirs) {
        (Some(o), Some(t)) => Some(merge_value(base, o, t, field, path, overrides)),
        (Some(o), None) => {
            // Gone from Git: a removal there, unless ours added or changed it.
            if base.is_none() || base != Some(o) {
                if base.is_some() {
                    overrides.push(path.to_string());
                }
                Some(o.clone())
            } else {
                None
            }
        }
        (None, Some(t)) => {
            if base.is_none() || base != Some(t) {
                if base.is_some() {
                    // Removed live, changed in Git: the removal wins.
                    overrides.push(path.to_string());
                    return None;
                }
                Some(t.clone())
            } else {
                None
            }
        }
        (None, None) => None,
    }
}

fn merge_maps(
    base: &Map<String, Value>,
    ours: &Map<String, Value>,
    theirs: &Map<String, Value>,
    path: &str,
    overrides: &mut Vec<String>,
) -> Map<String, Value> {
    let mut out = Map::new();
    // Ours' order first, then what only Git holds.
    let keys = ours
        .keys()
        .chain(theirs.keys().filter(|k| !ours.contains_key(*k)));
    for key in keys {
        let at = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        let merged = merge_entry(
            base.get(key),
            ours.get(key),
            theirs.get(key),
            key,
            &at,
            overrides,
        );
        if let Some(v) = merged {
            out.insert(key.clone(), v);
        }
    }
    out
}

/// A list merged item by item by its merge key, or `None` when it has none (or an item lacks
/// it): then the list is one value.
fn merge_keyed(
    base: &[Value],
    ours: &[Value],
    theirs: &[Value],
    field: &str,
    path: &str,
    overrides: &mut Vec<String>,
) -> Option<Value> {
    let key = merge_keys(field)
        .iter()
        .find(|k| [base, ours, theirs].iter().all(|l| keyed(l, k).is_some()))?;
    let find = |list: &'_ [Value], id: &Value| -> Option<Value> {
        list.iter().find(|i| i.get(*key) == Some(id)).cloned()
    };
    let ids: Vec<Value> = {
        let mut seen = BTreeSet::new();
        ours.iter()
            .chain(theirs.iter())
            .filter_map(|i| i.get(*key).cloned())
            .filter(|id| seen.insert(id.to_string()))
            .collect()
    };
    let mut out = Vec::new();
    for id in ids {
        let at = format!("{path}[{key}={}]", id_text(&id));
        let (b, o, t) = (find(base, &id), find(ours, &id), find(theirs, &id));
        if let Some(v) = merge_entry(b.as_ref(), o.as_ref(), t.as_ref(), "", &at, overrides) {
            out.push(v);
        }
    }
    Some(Value::Array(out))
}

/// Whether every item is a map with a unique scalar under `key`.
fn keyed(items: &[Value], key: &str) -> Option<()> {
    let mut seen = BTreeSet::new();
    for item in items {
        let id = item.get(key)?;
        if !(id.is_string() || id.is_number()) || !seen.insert(id.to_string()) {
            return None;
        }
    }
    Some(())
}

fn id_text(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cm(a: &str, b: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"}, "data": {"a": a, "b": b}})
    }

    #[test]
    fn a_field_a_later_commit_held_is_based_on_its_live_value() {
        let held = json!({"data": {"a": "1", "b": "1"}, "kind": "ConfigMap"});
        let pushed = json!({"data": {"a": "1", "b": "2"}, "kind": "ConfigMap"});
        let live = json!({"data": {"a": "live", "b": "2"}, "kind": "ConfigMap"});
        let base = baseline_since(Some(&held), &[&pushed], &live).expect("a baseline");
        assert_eq!(
            base,
            json!({"data": {"a": "1", "b": "2"}, "kind": "ConfigMap"})
        );
        let theirs = json!({"data": {"a": "1", "b": "git"}, "kind": "ConfigMap"});
        let merged = merge_object(&base, &live, &theirs);
        assert_eq!(merged.value["data"], json!({"a": "live", "b": "git"}));
        assert!(merged.overrides.is_empty(), "{:?}", merged.overrides);
    }

    #[test]
    fn an_object_a_later_commit_held_whole_is_that_document() {
        let held = json!({"data": {"a": "1"}});
        let live = json!({"data": {"a": "2", "c": "3"}});
        let since = |held: Option<&Value>, later: &[&Value]| baseline_since(held, later, &live);
        assert_eq!(since(Some(&held), &[&held, &live]), Some(live.clone()));
        assert_eq!(
            since(Some(&held), &[]),
            Some(held.clone()),
            "nothing later: the commit held"
        );
        let other = json!({"data": {"c": "3"}});
        assert_eq!(
            since(Some(&held), &[&other]),
            Some(json!({"data": {"a": "1", "c": "3"}})),
            "a field added live that a later commit held"
        );
        assert_eq!(
            since(None, &[&other]),
            Some(json!({"data": {"c": "3"}})),
            "created after the commit held: only what a later commit agrees with"
        );
        assert_eq!(since(None, &[&held]), None, "nothing agrees: written whole");
    }

    #[test]
    fn fields_one_side_changed_keep_that_sides_value() {
        let merged = merge_object(&cm("1", "1"), &cm("live", "1"), &cm("1", "git"));
        assert_eq!(merged.value, cm("live", "git"));
        assert!(merged.overrides.is_empty());
    }

    #[test]
    fn a_field_both_changed_takes_ours_and_is_reported() {
        let merged = merge_object(&cm("1", "1"), &cm("live", "1"), &cm("git", "git"));
        assert_eq!(merged.value, cm("live", "git"));
        assert_eq!(merged.overrides, vec!["data.a".to_string()]);
    }

    #[test]
    fn additions_and_removals_on_either_side_survive() {
        let base = json!({"data": {"a": "1", "b": "1"}});
        let ours = json!({"data": {"a": "1", "c": "live"}});
        let theirs = json!({"data": {"a": "1", "b": "1", "d": "git"}});
        let merged = merge_object(&base, &ours, &theirs);
        assert_eq!(
            merged.value,
            json!({"data": {"a": "1", "c": "live", "d": "git"}})
        );
        let theirs_removed = json!({"data": {"b": "1"}});
        let merged = merge_object(
            &base,
            &json!({"data": {"a": "1", "b": "2"}}),
            &theirs_removed,
        );
        assert_eq!(merged.value, json!({"data": {"b": "2"}}));
    }

    #[test]
    fn keyed_lists_merge_item_by_item_and_other_lists_whole() {
        let spec = |app: &str, side: &str, args: &[&str]| {
            json!({"spec": {"containers": [
                {"name": "app", "image": app},
                {"name": "side", "image": side},
            ], "args": args}})
        };
        let base = spec("app:1", "side:1", &["x"]);
        let ours = spec("app:2", "side:1", &["y"]);
        let theirs = spec("app:1", "side:2", &["z"]);
        let merged = merge_object(&base, &ours, &theirs);
        assert_eq!(merged.value, spec("app:2", "side:2", &["y"]));
        assert_eq!(merged.overrides, vec!["spec.args".to_string()]);
        let both = merge_object(&base, &ours, &spec("app:3", "side:1", &["x"]));
        assert_eq!(
            both.overrides,
            vec!["spec.containers[name=app].image".to_string()]
        );
    }

    #[test]
    fn a_field_changed_live_and_removed_in_git_is_kept_and_reported() {
        let merged = merge_object(
            &json!({"data": {"a": "1"}}),
            &json!({"data": {"a": "live"}}),
            &json!({"data": {}}),
        );
        assert_eq!(merged.value, json!({"data": {"a": "live"}}));
        assert_eq!(merged.overrides, vec!["data.a".to_string()]);
    }

    #[test]
    fn lists_merge_by_the_keys_kubernetes_merges_them_by() {
        let by_name = ["containers", "initContainers", "ephemeralContainers", "env"]
            .into_iter()
            .chain(["volumes", "imagePullSecrets", "images", "replicas"])
            .chain(["configMapGenerator", "secretGenerator"]);
        for list in by_name {
            assert_eq!(merge_keys(list), ["name"], "{list}");
        }
        assert_eq!(merge_keys("ports"), ["containerPort", "port"]);
        assert_eq!(merge_keys("volumeMounts"), ["mountPath"]);
        assert_eq!(merge_keys("volumeDevices"), ["devicePath"]);
        assert_eq!(merge_keys("conditions"), ["type"]);
        assert!(merge_keys("args").is_empty());
    }

    #[test]
    fn a_list_whose_items_lack_a_unique_scalar_key_is_one_value() {
        let twice = |image: &str| json!({"containers": [{"name": "a", "image": image}, {"name": "a", "image": "x"}]});
        let merged = merge_object(&twice("1"), &twice("2"), &twice("git"));
        assert_eq!(merged.value, twice("2"));
        assert_eq!(
            merged.overrides,
            vec!["containers".to_string()],
            "a name twice"
        );
        let named = |image: &str| json!({"containers": [{"name": {"n": "a"}, "image": image}]});
        let merged = merge_object(&named("1"), &named("2"), &named("git"));
        assert_eq!(
            merged.overrides,
            vec!["containers".to_string()],
            "a name not scalar"
        );
    }

    #[test]
    fn a_field_removed_live_and_changed_in_git_is_removed_and_reported() {
        let merged = merge_object(
            &json!({"data": {"a": "1"}}),
            &json!({"data": {}}),
            &json!({"data": {"a": "git"}}),
        );
        assert_eq!(merged.value, json!({"data": {}}));
        assert_eq!(merged.overrides, vec!["data.a".to_string()]);
    }
}
