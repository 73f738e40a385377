//! `ClusterRole` aggregation, as kube-controller-manager's clusterrole-aggregation controller
//! does it: a `ClusterRole` with an `aggregationRule` holds the rules of every `ClusterRole`
//! whose labels one of its selectors matches, written into its `rules` (so `kubectl describe
//! clusterrole edit` lists them), kept current whenever a `ClusterRole` changes.

use serde_json::{Map, Value};

use super::PolicyRule;

/// Whether `labels` satisfy a label selector (`matchLabels`, `matchExpressions`).
pub(super) fn labels_match(selector: &Value, labels: &Map<String, Value>) -> bool {
    let exact = selector
        .get("matchLabels")
        .and_then(Value::as_object)
        .is_none_or(|m| m.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let expressions = selector
        .get("matchExpressions")
        .and_then(Value::as_array)
        .is_none_or(|es| es.iter().all(|e| expression_holds(e, labels)));
    exact && expressions
}

fn expression_holds(e: &Value, labels: &Map<String, Value>) -> bool {
    let key = e["key"].as_str().unwrap_or("");
    let values: Vec<&str> = e["values"]
        .as_array()
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let got = labels.get(key).and_then(Value::as_str);
    match e["operator"].as_str().unwrap_or("") {
        "In" => got.is_some_and(|g| values.contains(&g)),
        "NotIn" => got.is_none_or(|g| !values.contains(&g)),
        "Exists" => got.is_some(),
        "DoesNotExist" => got.is_none(),
        _ => false,
    }
}

fn name(role: &Value) -> &str {
    role["metadata"]["name"].as_str().unwrap_or("")
}

pub(super) fn rules_of(role: &Value) -> Vec<PolicyRule> {
    role.get("rules")
        .cloned()
        .and_then(|r| serde_json::from_value(r).ok())
        .unwrap_or_default()
}

/// The rules `role` aggregates from `all` (its own when it aggregates nothing), without repeats.
pub(super) fn aggregate(role: &Value, all: &[Value]) -> Vec<PolicyRule> {
    let Some(selectors) = role
        .pointer("/aggregationRule/clusterRoleSelectors")
        .and_then(Value::as_array)
    else {
        return rules_of(role);
    };
    let empty = Map::new();
    let mut rules: Vec<PolicyRule> = Vec::new();
    for other in all.iter().filter(|o| name(o) != name(role)) {
        let labels = other["metadata"]["labels"].as_object().unwrap_or(&empty);
        if selectors.iter().any(|s| labels_match(s, labels)) {
            for rule in rules_of(other) {
                if !rules.contains(&rule) {
                    rules.push(rule);
                }
            }
        }
    }
    rules
}

/// The label keys one of `aggregating`'s selectors needs a role to carry before it can pick
/// it; `None` when some selector can pick a role carrying none of them (an empty selector, or
/// one of only `NotIn`/`DoesNotExist`).
#[must_use]
pub fn selected_keys(aggregating: &[Value]) -> Option<Vec<String>> {
    let mut keys = Vec::new();
    for role in aggregating {
        let selectors = role
            .pointer("/aggregationRule/clusterRoleSelectors")
            .and_then(Value::as_array);
        for selector in selectors.into_iter().flatten() {
            let mut positive: Vec<String> = selector
                .get("matchLabels")
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            for e in selector
                .get("matchExpressions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if matches!(e["operator"].as_str(), Some("In" | "Exists"))
                    && let Some(k) = e["key"].as_str()
                {
                    positive.push(k.to_string());
                }
            }
            if positive.is_empty() {
                return None;
            }
            keys.extend(positive);
        }
    }
    Some(keys)
}

/// The aggregated `ClusterRoles` of `all` whose stored rules are not what they aggregate, with
/// the rules they should hold — repeated until nothing changes, since one aggregated role may
/// select another.
#[must_use]
pub fn aggregation_updates(all: &[Value]) -> Vec<Value> {
    let mut roles = all.to_vec();
    let mut changed: Vec<String> = Vec::new();
    // An aggregation chain is as long as the roles it goes through at most.
    for _ in 0..=roles.len() {
        let mut any = false;
        for i in 0..roles.len() {
            if roles[i].get("aggregationRule").is_none() {
                continue;
            }
            let rules = aggregate(&roles[i], &roles);
            if rules != rules_of(&roles[i]) {
                roles[i]["rules"] = serde_json::to_value(&rules).unwrap_or(Value::Array(vec![]));
                let n = name(&roles[i]).to_string();
                if !changed.contains(&n) {
                    changed.push(n);
                }
                any = true;
            }
        }
        if !any {
            break;
        }
    }
    roles
        .into_iter()
        .filter(|r| changed.iter().any(|n| n == name(r)))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_aggregated_role_holds_what_its_selectors_pick_through_a_chain() {
        let all = vec![
            json!({"metadata": {"name": "admin"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-admin": "true"}}]}, "rules": []}),
            json!({"metadata": {"name": "edit", "labels": {"to-admin": "true"}}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"to-edit": "true"}}]}, "rules": []}),
            json!({"metadata": {"name": "widgets", "labels": {"to-edit": "true"}}, "rules": [{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]}),
            json!({"metadata": {"name": "other", "labels": {"to-nothing": "true"}}, "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
        ];
        let updates = aggregation_updates(&all);
        let rules = |n: &str| {
            updates
                .iter()
                .find(|r| r["metadata"]["name"] == n)
                .map_or_else(
                    || panic!("{n} not updated: {updates:?}"),
                    |r| r["rules"].clone(),
                )
        };
        let widgets =
            json!([{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["get"]}]);
        assert_eq!(rules("edit"), widgets);
        assert_eq!(rules("admin"), widgets, "through edit");
        assert!(
            aggregation_updates(&updates.iter().chain(&all[2..]).cloned().collect::<Vec<_>>())
                .is_empty(),
            "stable once written"
        );
    }

    /// What a role must carry to be picked: the keys of every selector's positive terms, or
    /// nothing to go by when a selector can pick a role without any (then every role is read).
    #[test]
    fn the_keys_a_selector_needs_or_none_when_it_needs_none() {
        let role = |selectors: serde_json::Value| json!({"aggregationRule": {"clusterRoleSelectors": selectors}});
        assert_eq!(
            selected_keys(&[role(
                json!([{"matchLabels": {"a": "1"}}, {"matchExpressions": [{"key": "b", "operator": "Exists"}, {"key": "c", "operator": "NotIn", "values": ["x"]}]}])
            )]),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(selected_keys(&[role(json!([{}]))]), None);
        assert_eq!(
            selected_keys(&[role(
                json!([{"matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]}])
            )]),
            None
        );
    }
}
