//! A `HorizontalPodAutoscaler`'s TARGETS cell: each metric's current value against its target
//! (`cpu: 45%/80%`, `memory: 120Mi/500Mi`), two at most, as kube-apiserver's printer writes it.

use serde_json::Value;

use super::format::text;

/// The current value of metric `i` at `current` (status) and `field`, or `<unknown>`.
fn current(obj: &Value, i: usize, section: &str, field: &str) -> String {
    let status = obj
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .and_then(|m| m.get(i))
        .and_then(|m| m.get(section));
    match status.and_then(|s| s.pointer(field)) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "<unknown>".into(),
    }
}

/// One metric's entry.
fn entry(obj: &Value, i: usize, metric: &Value) -> String {
    let kind = text(metric, "/type");
    let (section, named) = match kind {
        "External" => ("external", false),
        "Pods" => ("pods", false),
        "Object" => ("object", false),
        "Resource" => ("resource", true),
        "ContainerResource" => ("containerResource", true),
        _ => return "<unknown type>".into(),
    };
    let spec = metric.get(section).unwrap_or(&Value::Null);
    let target = |f: &str| text(spec, &format!("/target/{f}")).to_string();
    let average = spec.pointer("/target/averageValue").is_some();
    let prefix = if named {
        format!("{}: ", text(spec, "/name"))
    } else {
        String::new()
    };
    if kind == "Pods" || average {
        let avg = if named || kind == "Pods" {
            ""
        } else {
            " (avg)"
        };
        let cur = current(obj, i, section, "/current/averageValue");
        return format!("{prefix}{cur}/{}{avg}", target("averageValue"));
    }
    if !named {
        let cur = current(obj, i, section, "/current/value");
        return format!("{cur}/{}", target("value"));
    }
    let cur = match current(obj, i, section, "/current/averageUtilization") {
        u if u == "<unknown>" => u,
        u => format!("{u}%"),
    };
    let tgt = spec
        .pointer("/target/averageUtilization")
        .and_then(Value::as_i64)
        .map_or_else(|| "<auto>".into(), |u| format!("{u}%"));
    format!("{prefix}{cur}/{tgt}")
}

/// The TARGETS cell, `<none>` without metrics.
pub(super) fn targets(obj: &Value) -> String {
    let metrics = obj
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if let Some(target) = obj
        .pointer("/spec/targetCPUUtilizationPercentage")
        .and_then(Value::as_i64)
    {
        // autoscaling/v1: one CPU utilization target.
        let cur = obj
            .pointer("/status/currentCPUUtilizationPercentage")
            .and_then(Value::as_i64)
            .map_or_else(|| "<unknown>".into(), |u| format!("{u}%"));
        return format!("cpu: {cur}/{target}%");
    }
    if metrics.is_empty() {
        return "<none>".into();
    }
    let shown: Vec<String> = metrics
        .iter()
        .take(2)
        .enumerate()
        .map(|(i, m)| entry(obj, i, m))
        .collect();
    let mut out = shown.join(", ");
    if metrics.len() > 2 {
        out.push_str(&format!(" + {} more...", metrics.len() - 2));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn targets_read_as_kubectl_shows_them() {
        let hpa = json!({"spec": {"metrics": [
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
            {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "500Mi"}}},
            {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"averageValue": "1k"}}}]},
            "status": {"currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 45}}}]}});
        assert_eq!(
            targets(&hpa),
            "cpu: 45%/80%, memory: <unknown>/500Mi + 1 more..."
        );
        assert_eq!(targets(&json!({"spec": {}})), "<none>");
        let v1 = json!({"spec": {"targetCPUUtilizationPercentage": 80}});
        assert_eq!(targets(&v1), "cpu: <unknown>/80%");
    }
}
