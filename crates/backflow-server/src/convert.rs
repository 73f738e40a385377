//! Conversion between two versions of a built-in kind served from one storage version, as
//! kube-apiserver converts them:
//! - the `HorizontalPodAutoscaler` of `autoscaling/v1` (what `kubectl autoscale` up to 1.31
//!   creates) is stored as `autoscaling/v2`. v1 knows one target, average CPU utilization; v2 a
//!   list of metrics. A v1 write keeps what only v2 holds (other metrics, `behavior`) from the
//!   stored object, so reading and writing through v1 loses nothing v2 set.
//! - the `Event` of `events.k8s.io/v1` (what client-go's `tools/events` recorder writes) is a
//!   core `v1` Event under other field names (`regarding` is `involvedObject`, `note` is
//!   `message`, …): one object, listed and watched through either API.

use serde_json::{Value, json};

use crate::registry::ResourceType;

/// Whether `t` is a served-only version converted to and from its storage version here.
fn is_hpa_v1(t: &ResourceType) -> bool {
    t.group == "autoscaling" && t.version == "v1" && t.kind == "HorizontalPodAutoscaler"
}

/// Whether `t` is `events.k8s.io/v1`'s Event, stored as a core Event.
fn is_events_v1(t: &ResourceType) -> bool {
    t.group == "events.k8s.io" && t.kind == "Event"
}

/// Whether objects of `t` are converted on their way out (not served as stored).
#[must_use]
pub fn converts(t: &ResourceType) -> bool {
    is_hpa_v1(t) || is_events_v1(t)
}

/// A core Event's fields and their names in `events.k8s.io/v1` (the others are the same).
pub(crate) const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// The name `events.k8s.io/v1` serves a stored (core) Event field under.
pub(crate) fn event_v1_name(stored: &'static str) -> &'static str {
    EVENT_FIELDS
        .iter()
        .find(|(core, _)| *core == stored)
        .map_or(stored, |(_, served)| served)
}

/// Renames `obj`'s top-level fields `from` → `to` for each pair; a field already under a
/// target name that is not also a source is dropped (it has no place in the other version).
fn rename_fields(
    obj: &mut Value,
    pairs: impl Iterator<Item = (&'static str, &'static str)> + Clone,
) {
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    let moved: Vec<(&str, Option<Value>)> = pairs
        .clone()
        .map(|(from, to)| (to, m.remove(from)))
        .collect();
    for (_, to) in pairs {
        m.remove(to);
    }
    for (to, value) in moved {
        if let Some(value) = value.filter(|v| !v.is_null()) {
            m.insert(to.into(), value);
        }
    }
}

/// Whether metric `m` is average CPU utilization (a v2 `Resource` metric of `cpu`).
fn is_cpu(m: &Value) -> bool {
    m["type"] == "Resource" && m["resource"]["name"] == "cpu"
}

/// The stored object as a client of `t` reads it (`obj` already carries `t`'s apiVersion).
#[must_use]
pub fn to_served(mut obj: Value, t: &ResourceType) -> Value {
    if is_events_v1(t) {
        rename_fields(&mut obj, EVENT_FIELDS.iter().copied());
        return obj;
    }
    if !is_hpa_v1(t) {
        return obj;
    }
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        let cpu = spec
            .remove("metrics")
            .and_then(|m| {
                m.as_array()
                    .and_then(|ms| ms.iter().find(|m| is_cpu(m)).cloned())
            })
            .filter(|m| m["resource"]["target"]["type"] == "Utilization")
            .map(|m| m["resource"]["target"]["averageUtilization"].clone());
        spec.remove("behavior");
        if let Some(cpu) = cpu.filter(|c| !c.is_null()) {
            spec.insert("targetCPUUtilizationPercentage".into(), cpu);
        }
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        let cpu = status
            .remove("currentMetrics")
            .and_then(|m| {
                m.as_array()
                    .and_then(|ms| ms.iter().find(|m| is_cpu(m)).cloned())
            })
            .map(|m| m["resource"]["current"]["averageUtilization"].clone());
        status.remove("conditions");
        if let Some(cpu) = cpu.filter(|c| !c.is_null()) {
            status.insert("currentCPUUtilizationPercentage".into(), cpu);
        }
    }
    obj
}

/// `new`, written through `t`, as it is stored; `old` is what is stored now, if anything.
/// `None` when `t` is stored as it is served.
#[must_use]
pub fn to_stored(t: &ResourceType, new: &Value, old: Option<&Value>) -> Option<Value> {
    if is_events_v1(t) {
        let mut stored = new.clone();
        rename_fields(
            &mut stored,
            EVENT_FIELDS.iter().map(|&(core, v1)| (v1, core)),
        );
        return Some(stored);
    }
    if !is_hpa_v1(t) {
        return None;
    }
    let mut stored = new.clone();
    let obj = stored.as_object_mut()?;
    let old_spec = old.map(|o| &o["spec"]);
    // A spec that holds `metrics` is the stored one, carried over by a status write.
    if let Some(spec) = obj
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .filter(|s| !s.contains_key("metrics"))
    {
        let cpu = spec.remove("targetCPUUtilizationPercentage");
        let mut metrics = other_metrics(old_spec.map(|s| &s["metrics"]));
        if let Some(cpu) = cpu {
            metrics.insert(
                0,
                json!({"type": "Resource", "resource": {"name": "cpu",
                       "target": {"type": "Utilization", "averageUtilization": cpu}}}),
            );
        }
        if !metrics.is_empty() {
            spec.insert("metrics".into(), Value::Array(metrics));
        }
        if let Some(behavior) = old_spec.and_then(|s| s.get("behavior")) {
            spec.insert("behavior".into(), behavior.clone());
        }
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut)
        && let Some(cpu) = status.remove("currentCPUUtilizationPercentage")
    {
        let current = json!({"type": "Resource", "resource": {"name": "cpu",
                             "current": {"averageUtilization": cpu}}});
        status.insert("currentMetrics".into(), json!([current]));
    }
    Some(stored)
}

/// The stored metrics v1 cannot show (all but CPU).
fn other_metrics(metrics: Option<&Value>) -> Vec<Value> {
    metrics
        .and_then(Value::as_array)
        .map(|ms| ms.iter().filter(|m| !is_cpu(m)).cloned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    fn hpa(version: &str) -> ResourceType {
        Registry::builtin()
            .get("autoscaling", version, "horizontalpodautoscalers")
            .expect("served")
            .clone()
    }

    #[test]
    fn a_v1_autoscaler_is_stored_as_v2_and_read_back_the_same() {
        let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70},
            "status": {"currentReplicas": 2, "desiredReplicas": 2, "currentCPUUtilizationPercentage": 40}});
        let stored = to_stored(&hpa("v1"), &v1, None).expect("converted");
        assert_eq!(
            stored["spec"]["metrics"],
            json!([{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 70}}}])
        );
        assert!(
            stored["spec"]
                .get("targetCPUUtilizationPercentage")
                .is_none()
        );
        assert_eq!(
            stored["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"],
            40
        );
        assert_eq!(to_served(stored, &hpa("v1")), v1);
        assert_eq!(
            to_stored(&hpa("v2"), &v1, None),
            None,
            "v2 is stored as served"
        );
    }

    #[test]
    fn an_events_v1_event_is_a_core_event_under_other_names() {
        let events = Registry::builtin()
            .get("events.k8s.io", "v1", "events")
            .expect("served")
            .clone();
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "conf.1", "namespace": "web"},
            "eventTime": "2026-12-06T10:00:00.000000Z",
            "series": {"count": 2, "lastObservedTime": "2026-12-06T10:01:00.000000Z"},
            "reportingController": "backflow", "reportingInstance": "replica-a",
            "action": "Write", "reason": "LiveValueKept", "type": "Normal",
            "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "namespace": "web", "name": "conf"},
            "note": "field a kept", "deprecatedCount": 3});
        let stored = to_stored(&events, &v1, None).expect("converted");
        assert_eq!(stored["involvedObject"]["name"], "conf");
        assert_eq!(stored["message"], "field a kept");
        assert_eq!(stored["reportingComponent"], "backflow");
        assert_eq!(stored["count"], 3);
        assert_eq!(stored["series"]["count"], 2);
        assert!(stored.get("regarding").is_none() && stored.get("note").is_none());
        assert_eq!(to_served(stored, &events), v1);
        // A field of the other version sent here has no place in this one.
        let odd = json!({"note": "n", "message": "stray"});
        assert_eq!(
            to_stored(&events, &odd, None).expect("converted"),
            json!({"message": "n"})
        );
    }

    #[test]
    fn a_v1_write_keeps_what_only_v2_holds() {
        let old = json!({"spec": {"maxReplicas": 5, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}},
            "metrics": [
                {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
                {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "1Gi"}}}]}});
        let v1 = json!({"spec": {"maxReplicas": 7, "targetCPUUtilizationPercentage": 60}});
        let stored = to_stored(&hpa("v1"), &v1, Some(&old)).expect("converted");
        assert_eq!(stored["spec"]["maxReplicas"], 7);
        assert_eq!(
            stored["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            60
        );
        assert_eq!(stored["spec"]["metrics"][1]["resource"]["name"], "memory");
        assert_eq!(stored["spec"]["behavior"], old["spec"]["behavior"]);
    }
}
